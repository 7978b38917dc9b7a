"""The main job (``tox -e demo``): three 2-rank jobs, the runs side by side, the best first."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._support.launchers import run_bounded
from tests._support.straggler_check import check_the_straggler_verdict

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def test_the_demo_lists_the_jobs_best_first_with_their_verdicts(mpi: Any, tmp_path: Path) -> None:
    # demo.py runs mpiexec jobs: on the timeout they are killed with it (one process group).
    # Untraced by the mpi env's coverage (as a user runs it): the verdicts below are of a
    # clean run's timings, which tracing the recorder's threads on rank 0 would change.
    untraced = {
        name: value for name, value in os.environ.items() if not name.startswith("COVERAGE_")
    }
    process = run_bounded(
        [sys.executable, ROOT / "tools" / "demo.py", "--base", "runs"],
        cwd=tmp_path,
        timeout=900,
        check=False,
        stderr_apart=True,
        env=untraced,
    )
    assert process.returncode == 0, process.output
    lines = process.stdout.splitlines()
    start = lines.index("$ rankscribe-lineage query runs --sort 'metric/accuracy desc'")
    end = lines.index("$ rankscribe-lineage report runs -o runs/report.html")
    printed = lines[start + 1 : end]
    while printed and not printed[-1]:
        printed.pop()
    header = printed[0].split()
    assert header[0] == "run" and "metric/accuracy" in header
    rows = [line.split() for line in printed[1:4]]
    accuracy = header.index("metric/accuracy")
    accuracies = [float(row[accuracy]) for row in rows]
    assert accuracies == sorted(accuracies, reverse=True)
    assert printed[-1] == "3 matching runs"
    # One verdict line per job, in the table's order, printed by the query itself.
    verdicts = [line for line in printed if ": straggler: " in line]
    assert [line.split(":")[0] for line in verdicts] == [row[0] for row in rows]
    # The ranks start from the same weights and average their gradients: they agree.
    assert all("divergence: none" in line for line in verdicts), verdicts
    # Each straggler verdict is true of the timings the job recorded. It is not asserted
    # that nobody is named: the digits steps compute for real on a shared machine
    # (tests/_support/straggler_check.py says why).
    for row in rows:
        check_the_straggler_verdict(tmp_path / "runs" / row[0])
    # The command it printed is the command it ran: typed by hand, it prints the same.
    # (In the demo's environment: a child started with no env of its own gets COLUMNS=80
    # from somewhere in the test process's C environment, which os.environ does not hold.)
    by_hand = run_bounded(
        [BIN / "rankscribe-lineage", *shlex.split(lines[start])[2:]],
        cwd=tmp_path,
        timeout=120,
        env=untraced,
    )
    assert by_hand.stdout.splitlines() == printed
    assert (tmp_path / "runs" / "report.html").is_file()
