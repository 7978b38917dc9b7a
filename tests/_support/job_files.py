"""What a finished job left on disk, read as a user would: the merged lineage's
``user_defined`` section, a rank's scalars, and ``rankscribe-lineage show`` in a new process.

Shared by the tests of real ``mpiexec`` and ``torchrun`` jobs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rankscribe.lineage.recording import parse_run
from rankscribe.writer.events import read_tensorboard_events
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


def board_texts(board: str | Path) -> list[tuple[int, str, str]]:
    """(step, tag, text) of every text piece of a TensorBoard event file, in the order
    written (the job view's verdicts: tag ``verdicts``)."""
    return [
        (event.step, value.tag, piece.decode("utf-8"))
        for event in read_tensorboard_events(board)
        if event.WhichOneof("what") == "summary"
        for value in event.summary.value
        if value.metadata.plugin_data.plugin_name == "text"
        for piece in value.tensor.string_val
    ]


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
