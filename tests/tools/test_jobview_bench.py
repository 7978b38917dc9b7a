"""tools/bench/jobview.py --parts judge: the straggler rule's cost on arrays, on a small job."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench" / "jobview.py"


def test_the_judge_part_times_judge_timings_and_names_the_slow_rank() -> None:
    small = ["--judge-ranks", "64", "--judge-steps", "40", "--repeat", "1"]
    done = subprocess.run(
        [sys.executable, str(BENCH), "--parts", "judge", *small],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    first, second = done.stdout.splitlines()
    assert first.startswith("judge_timings, 64 ranks x 40 steps x 2 timings: ")
    # The rank made slow is the one named, on its forward and on its arrival.
    assert first.endswith("named [('forward', [1]), ('arrival', [1])]")
    assert re.search(r"\d+\.\d{3} s CPU, \d+ MB traced peak \((meets|MISSES) ", first)
    merged = re.search(r"merged from 10 windows: .* ratio (\d+\.\d\d)x", second)
    assert merged is not None and float(merged.group(1)) > 0
