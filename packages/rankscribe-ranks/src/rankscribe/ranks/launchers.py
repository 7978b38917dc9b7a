"""What launchers export: the one table of their environment variables, for the siblings.

A sibling-facing module (``docs/contributing.md``, "Sibling modules"), not part of
``rankscribe.ranks``' top-level API. The table lives with rank detection
(``rankscribe/ranks/detection/``): :func:`rankscribe.ranks.detect` reads :data:`LAUNCHERS`
in order, the first launcher whose rank variable is set winning; :func:`launcher_rank`
reads the same table for a ``SummaryRecord`` opened without ``rank=``, which labels its
files with the launcher's rank (``docs/layout.md``, "A plain SummaryRecord under a
launcher"); :func:`environment_variables` names every variable ranks reads, so a test
can clear them.
"""

from __future__ import annotations

from rankscribe.ranks.detection._launchers import (
    JOB_ID_ENV,
    JOB_NAME_VARIABLES,
    LAUNCHERS,
    SLURM_TASKS_PER_NODE_VARIABLES,
    EnvironmentLauncher,
    LauncherRank,
    LauncherVariables,
    environment_variables,
    launch_name,
    launcher_rank,
)

__all__ = [
    "JOB_ID_ENV",
    "JOB_NAME_VARIABLES",
    "LAUNCHERS",
    "SLURM_TASKS_PER_NODE_VARIABLES",
    "EnvironmentLauncher",
    "LauncherRank",
    "LauncherVariables",
    "environment_variables",
    "launch_name",
    "launcher_rank",
]
