"""What launchers export: the one table of their environment variables.

Rank detection's table, which the sibling packages and tests read through
:mod:`rankscribe.ranks.launchers` (``docs/contributing.md``, "Sibling modules"); not part
of ``rankscribe.ranks``' top-level API. :func:`rankscribe.ranks.detect`
reads :data:`LAUNCHERS` in order (the first launcher whose rank variable is set
wins, so an MPI job started inside a Slurm allocation, or torchrun under Slurm,
reports the inner launcher); :func:`launcher_rank` reads the same table for a
``SummaryRecord`` opened without ``rank=``, which labels its files with the
launcher's rank (``docs/layout.md``, "A plain SummaryRecord under a launcher").

========== ======================= ========================== ===========================
launcher   rank                    world size                 local rank / local size
========== ======================= ========================== ===========================
openmpi    OMPI_COMM_WORLD_RANK    OMPI_COMM_WORLD_SIZE       OMPI_COMM_WORLD_LOCAL_RANK /
                                                              OMPI_COMM_WORLD_LOCAL_SIZE
pmi        PMI_RANK                PMI_SIZE (MPICH Hydra,     MPI_LOCALRANKID /
                                   Intel MPI, srun)           MPI_LOCALNRANKS
pmix       PMIX_RANK               SLURM_NTASKS (none         SLURM_LOCALID / Slurm's
                                   outside srun)              tasks-per-node list
torchrun   RANK                    WORLD_SIZE (both must be   LOCAL_RANK / LOCAL_WORLD_SIZE
                                   set)
slurm      SLURM_PROCID            SLURM_NTASKS               SLURM_LOCALID / Slurm's
                                                              tasks-per-node list
========== ======================= ========================== ===========================

:data:`JOB_NAME_VARIABLES` are those that name one launch (``launch_name`` in
below: :func:`launch_name`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

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

logger = logging.getLogger(__name__)

#: The launchers known by their environment variables (``detect`` knows more: ``mpi``,
#: ``torch`` and ``single`` come from what the program initialised).
EnvironmentLauncher = Literal["openmpi", "pmi", "pmix", "torchrun", "slurm"]


@dataclass(frozen=True)
class LauncherVariables:
    """The environment variable names one launcher exports.

    ``local_size`` is None for Slurm's compressed per-node list
    (:data:`SLURM_TASKS_PER_NODE_VARIABLES` with ``SLURM_NODEID``), parsed on its own;
    ``size_required``: the rank variable counts only when the size variable is set too
    (``RANK`` alone is too common a name to mean torchrun).
    """

    launcher: EnvironmentLauncher
    rank: str
    size: str
    local_rank: str
    local_size: str | None
    size_required: bool = False


#: Every launcher the environment tells of, in the order detection tries them.
LAUNCHERS: tuple[LauncherVariables, ...] = (
    LauncherVariables(
        "openmpi",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    LauncherVariables("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    LauncherVariables("pmix", "PMIX_RANK", "SLURM_NTASKS", "SLURM_LOCALID", None),
    LauncherVariables(
        "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", size_required=True
    ),
    LauncherVariables("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),
)

#: Slurm's tasks on each node (e.g. ``2(x3),1``), the step's first; ``SLURM_NODEID``
#: says which entry is this node.
SLURM_TASKS_PER_NODE_VARIABLES = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")

#: Set it to the same text on every rank of a job (and new for each job) where the
#: launcher names none: the file backend's ranks meet under it (``docs/layout.md``).
JOB_ID_ENV = "RANKSCRIBE_JOB_ID"

#: What names one launch: this package's own variable, Slurm's job and step, torchrun's
#: run id and restart count, and the address torch's ranks meet at.
JOB_NAME_VARIABLES = (
    JOB_ID_ENV,
    _SLURM_JOB := "SLURM_JOB_ID",
    _SLURM_STEP := "SLURM_STEP_ID",
    _RUN_ID := "TORCHELASTIC_RUN_ID",
    _RESTARTS := "TORCHELASTIC_RESTART_COUNT",
    _MASTER_ADDR := "MASTER_ADDR",
    _MASTER_PORT := "MASTER_PORT",
)
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]")


def environment_variables() -> tuple[str, ...]:
    """Every variable this package reads to place a process in a job (each once)."""
    names: list[str] = []
    for launcher in LAUNCHERS:
        names += [launcher.rank, launcher.size, launcher.local_rank]
        names += [launcher.local_size] if launcher.local_size else []
    names += [*SLURM_TASKS_PER_NODE_VARIABLES, "SLURM_NODEID", *JOB_NAME_VARIABLES]
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class LauncherRank:
    """This process's rank as a launcher exported it; ``world_size`` None when not exported."""

    launcher: EnvironmentLauncher
    variable: str
    rank: int
    world_size: int | None

    @property
    def shared(self) -> bool:
        """Whether other ranks of the same launch may exist (several, or an unknown number)."""
        return self.world_size is None or self.world_size > 1


def _number(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name, "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


def launcher_rank(environ: Mapping[str, str]) -> LauncherRank | None:
    """The first launcher of :data:`LAUNCHERS` whose rank variable is set, or None.

    Unlike :func:`rankscribe.ranks.detect`, this never fails and never asks MPI or
    torch: a malformed rank (not a number, or not below the world size) is skipped
    with a warning naming the variable, and a world size the launcher does not
    export is ``None`` (a summary is still worth writing).
    """
    for names in LAUNCHERS:
        if names.rank not in environ or (names.size_required and names.size not in environ):
            continue
        rank = _number(environ, names.rank)
        size = _number(environ, names.size) if names.size in environ else None
        if rank is None or (names.size in environ and (size is None or size <= rank)):
            logger.warning(
                "%s=%r (with %s=%r) is not a rank below the world size; it is ignored",
                names.rank,
                environ[names.rank],
                names.size,
                environ.get(names.size),
            )
            continue
        return LauncherRank(names.launcher, names.rank, rank, size)
    return None


def launch_name(environ: Mapping[str, str]) -> str:
    """A name every rank of one launch computes alike (``job`` when nothing names it).

    From :data:`JOB_ID_ENV` when set; else Slurm's job and step, or torchrun's run id
    and restart count; and the ``MASTER_ADDR:MASTER_PORT`` torch's ranks meet at,
    which two jobs running at once never share (torchrun's run id is ``none`` unless
    given). Two launches that nothing names look alike: see ``docs/layout.md``.
    """
    if environ.get(JOB_ID_ENV):
        parts = ["id", environ[JOB_ID_ENV]]
    elif _SLURM_JOB in environ and _RUN_ID not in environ:
        parts = ["slurm", environ[_SLURM_JOB], environ.get(_SLURM_STEP, "")]
    elif _RUN_ID in environ:
        parts = [
            "torchrun",
            environ[_RUN_ID],
            environ.get(_RESTARTS, ""),
        ]
    else:
        parts = ["job"]
    if not environ.get(JOB_ID_ENV) and environ.get(_MASTER_PORT):
        parts += [environ.get(_MASTER_ADDR, ""), environ[_MASTER_PORT]]
    return _UNSAFE_IN_NAME.sub("_", ".".join(part for part in parts if part))[:200]
