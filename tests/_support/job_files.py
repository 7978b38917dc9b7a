"""What a finished job left on disk, read as a user would: the merged lineage's
``user_defined`` section, a rank's scalars, and ``rankscribe-lineage show`` in a new process.

Shared by the tests of real ``mpiexec`` and ``torchrun`` jobs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rankscribe.lineage.recording import parse_run
from rankscribe.writer.reader import scalars
from tests._support.launchers import Finished, run_bounded


def user_defined(job_dir: Path) -> dict[str, Any]:
    """The merged lineage's ``user_defined`` section (the job view's verdicts among it)."""
    lineage = parse_run(str(job_dir)).lineage
    assert lineage is not None
    return lineage.section("user_defined")


def rank_scalars(rank_dir: Path) -> dict[str, dict[int, float]]:
    """Tag -> {step: value} over every summary file of one rank's directory."""
    found: dict[str, dict[int, float]] = {}
    for path in rank_dir.iterdir():
        if path.name.endswith("_MS"):
            for tag, points in scalars(path).items():
                found.setdefault(tag, {}).update(points)
    return found


def show(*arguments: str | Path) -> Finished:
    """``rankscribe-lineage show <arguments>`` in a new process (stderr kept apart)."""
    return run_bounded(
        [
            sys.executable,
            "-c",
            "import sys; from rankscribe.lineage.cli import main; sys.exit(main())",
            "show",
            *map(str, arguments),
        ],
        timeout=60.0,
        check=False,
        stderr_apart=True,
    )
