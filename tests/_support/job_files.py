"""What a finished job left on disk, read as a user would: the merged lineage's
``user_defined`` section, a rank's scalars, and ``rankscribe-lineage show`` and ``report``
in a new process.

Shared by the tests of real ``mpiexec`` and ``torchrun`` jobs.
"""

from __future__ import annotations

import html
import re
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
    return _lineage_command("show", *arguments)


def report_verdicts(job_dir: Path) -> list[str]:
    """The verdicts a ``rankscribe-lineage report`` of ``job_dir`` lists, as the page's text
    (the page is written beside the job's folder)."""
    page = job_dir.parent / f"{job_dir.name}.report.html"
    finished = _lineage_command("report", job_dir, "-o", page)
    assert finished.returncode == 0, finished.stderr
    [listed] = re.findall(r'<ul class="verdicts">(.*?)</ul>', page.read_text(), re.S)
    items = re.findall(r"<li[^>]*>(.*?)</li>", listed, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", item)) for item in items]


def _lineage_command(command: str, *arguments: str | Path) -> Finished:
    return run_bounded(
        [
            sys.executable,
            "-c",
            "import sys; from rankscribe.lineage.cli import main; sys.exit(main())",
            command,
            *map(str, arguments),
        ],
        timeout=60.0,
        check=False,
        stderr_apart=True,
    )
