"""tools/bench/jobview.py --parts judge: the straggler rule's cost on arrays, on a small job."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_tree_part_times_intervals_in_a_row_and_judges_the_slowest() -> None:
    small = ["--tree-ranks", "64", "--tree-steps", "600", "--interval-steps", "100"]
    done = subprocess.run(
        [sys.executable, str(BENCH), "--parts", "tree", *small, "--tree-intervals", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rounds = re.search(
        r"3 intervals in a row into one view: critical paths ((?:\d+\.\d{3}(?:, )?){3}) s; "
        r"the slowest (\d+\.\d{3}) s \((meets|MISSES) the 1 s target\)",
        done.stdout,
    )
    assert rounds is not None, done.stdout
    paths = [float(path) for path in rounds.group(1).split(", ")]
    assert len(paths) == 3 and float(rounds.group(2)) == max(paths)
    assert "rank 0's node for 64 ranks x 600 steps" in done.stdout
    # Rank 0's part, and the kernel's share of it (a fresh view's first pages).
    parts = re.search(
        r"rank 0's add and write \d+\.\d{3} s wall, (\d+\.\d{3}) s CPU \((\d+\.\d{3}) s of it "
        r"in the kernel",
        done.stdout,
    )
    assert parts is not None, done.stdout
    assert 0.0 <= float(parts.group(2)) <= float(parts.group(1)) + 0.01


def _bench(
    *options: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *options],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--tree-intervals", "0"], "--tree-intervals must be at least 1, got 0"),
        (["--gradient-buckets", "-1"], "--gradient-buckets must be an int >= 0, got -1"),
    ],
)
def test_a_tree_of_no_intervals_or_of_fewer_than_no_buckets_is_refused_naming_the_option(
    option: list[str], message: str
) -> None:
    done = _bench("--parts", "tree", *option, timeout=60, check=False)
    assert done.returncode == 2
    assert message in done.stderr


def test_the_tree_carries_a_ddp_probes_norms_and_peaks_per_rank_when_asked() -> None:
    small = ["--tree-ranks", "64", "--tree-steps", "200", "--interval-steps", "100"]
    done = _bench("--parts", "tree", *small, "--gradient-buckets", "2")
    # 10 tags and two buckets' norm and peak.
    assert "one interval of 64 ranks x 100 steps x 14 tags" in done.stdout
    assert "rank 0's node for 64 ranks x 200 steps x 14 tags" in done.stdout
