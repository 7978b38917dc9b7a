"""The main job (``tox -e demo``): three 2-rank jobs, the runs side by side, the best first."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests._support.launchers import run_bounded

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def test_the_demo_lists_the_jobs_best_first_with_their_verdicts(mpi: Any, tmp_path: Path) -> None:
    # demo.py runs mpiexec jobs: on the timeout they are killed with it (one process group).
    process = run_bounded(
        [sys.executable, ROOT / "tools" / "demo.py", "--base", "runs"],
        cwd=tmp_path,
        timeout=900,
        check=False,
        stderr_apart=True,
    )
    assert process.returncode == 0, process.output
    lines = process.stdout.splitlines()
    start = lines.index("$ rankscribe-lineage query runs --sort 'metric/accuracy desc'")
    header = lines[start + 1].split()
    assert header[0] == "run" and header[-1] == "metric/accuracy"
    rows = [line.split() for line in lines[start + 2 : start + 5]]
    accuracies = [float(row[-1]) for row in rows]
    assert accuracies == sorted(accuracies, reverse=True)
    assert lines[start + 5] == "3 matching runs"
    # One verdict line per job, truthful for a clean run (docs/job-view.md).
    verdicts = [line for line in lines if ": straggler: " in line]
    assert len(verdicts) == 3
    assert all("straggler: none" in line and "divergence: none" in line for line in verdicts)
    assert (tmp_path / "runs" / "report.html").is_file()
