"""tools/bench/step_cost.py on real torch steps, in a new process: its table, and a record
the collected copy really wrote (its figures' steps: tests/tools/test_step_cost_bench.py).

No cost is asserted (a benchmark's numbers are for reading); only that the collector timed
its copy's own step, which a factor of three sets apart from both copies' together."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench" / "step_cost.py"
PERCENT = r"[+-]\d+\.\d\d%"


def test_a_quick_run_prints_each_row_and_the_loss_its_collector_recorded(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PMI", "OMPI"))}
    finished = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--rows", "mlp-1ms"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    assert lines[0].startswith("SummaryCollector cost per step, against a bare copy interleaved")
    assert "1 run(s) of 60 steps, the first 20 left out" in lines[0]
    assert re.fullmatch(
        rf"mlp-1ms +\d+\.\d{{3}} ms   quiet {PERCENT} \(<=2 (ok|MISS)\)   collected step "
        rf"[+-]\d+\.\d%   mean/step {PERCENT} \(<=2 (ok|MISS)\)   CPU: quiet {PERCENT}, "
        rf"mean {PERCENT}",
        lines[1],
    ), lines[1]
    assert re.fullmatch(rf"    quiet by run: {PERCENT}", lines[2]), lines[2]
    # The loss at step 1 and every 10th of the 60: the collector recorded the copy it ran on.
    assert lines[-4] == "    the collected copy's record, loss points read back by run: 7"
    # The step time it recorded is its copy's own step, not both copies' (it read 3x its
    # own step with the session's clock left running over the bare copy's step, and
    # 1.40-1.49x with the steps a session logs timed from the end of the one before,
    # which the bench's restarted clock moves; 1.02-1.03x timed from each one's start).
    # Read against the same steps as the bench timed them: against the quiet steps
    # alone, a loaded machine's slow steps read 1.47x in one CI run.
    timed = re.fullmatch(
        r"    its median step time recorded by run \(the same steps timed here\): "
        r"(\d+\.\d{3}) ms \((\d+\.\d{3}) ms\)",
        lines[-3],
    )
    assert timed is not None, lines[-3]
    assert float(timed[1]) < 1.25 * float(timed[2]), lines[-3]
    # Its own recorded cost beside the overhead measured (or none: no window closed; or
    # no ratio: a short run's mean/step can read no overhead at all).
    assert re.fullmatch(
        rf"    its own recorded cost \(wall\) by run, of the bare step \(x the mean/step\): "
        rf"(not recorded|{PERCENT} \((x-?\d+\.\d\d|no overhead measured)\))",
        lines[-2],
    ), lines[-2]
    # What the collector's threads used over the steps after the warm-up, read from their
    # own CPU clocks (beside both copies: in neither copy's figures), a number on Linux.
    threads = re.fullmatch(
        r"    the collector's threads' CPU a step by run \(of the bare step; beside both "
        rf"copies, in neither's figures\): (\d+\.\d) us \(({PERCENT})\)",
        lines[-1],
    )
    assert threads is not None, lines[-1]
    assert float(threads[2].rstrip("%")) >= 0.0
    assert list(tmp_path.iterdir()) == []  # its record went with its temporary folder
