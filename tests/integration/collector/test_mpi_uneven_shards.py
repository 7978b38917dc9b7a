"""Tensor steps on ranks that run different numbers of steps, under a real ``mpiexec``.

One job per world size runs every case of uneven_shards.py (shards of 75 and 76
rows, one batch a step, and a last rank that stops early); the test reads every
rank's summary files and checks that the job records each of its tensor steps
on exactly one rank (docs/collector-schedule.md, "Tensor steps on several ranks").
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rankscribe.writer.events import load_dir

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "uneven_shards.py"
#: No job may outlive this, whatever happens inside it.
JOB_TIMEOUT = 120.0

# Worked out by hand from docs/collector-schedule.md for one process running the job's
# longest shard, collect_freq 1: over 38 steps range(0, 39) has 39 > 20 entries and
# 38 // 19 = 2, so range(0, 39, 2)[:20]; over 25 or 26 steps, 25 // 19 = 1: range(0, 26)[:21].
# collect_tensor_freq 2 over 26 steps: range(0, 27, 2). The first step is always one.
EVERY_OTHER_TO_38 = [1, *range(2, 39, 2)]
FIRST_20 = list(range(1, 21))
EVERY_OTHER_TO_26 = [1, *range(2, 27, 2)]
THIRDS_OF_20 = {0: list(range(1, 8)), 1: list(range(8, 15)), 2: list(range(15, 21))}

#: world size -> case -> (the job's tensor steps, rank -> its share)
EXPECTED: dict[int, dict[str, tuple[list[int], dict[int, list[int]]]]] = {
    2: {
        # shards of 38 and 37 steps: step 38 goes to rank 0, the only one that runs it
        "rows_75": (EVERY_OTHER_TO_38, {0: [1, *range(2, 19, 2), 38], 1: list(range(20, 37, 2))}),
        "rows_76": (EVERY_OTHER_TO_38, {0: [1, *range(2, 19, 2)], 1: list(range(20, 39, 2))}),
        "rows_76_tensor_freq_2": (
            EVERY_OTHER_TO_38,
            {0: [1, *range(2, 19, 2)], 1: list(range(20, 39, 2))},
        ),
        # rank 1 stops after step 25: steps 26 to 36 of its share are left out
        "stop": (EVERY_OTHER_TO_38, {0: [1, *range(2, 19, 2), 38], 1: [20, 22, 24]}),
    },
    3: {
        "rows_75": (FIRST_20, THIRDS_OF_20),
        "rows_76": (FIRST_20, THIRDS_OF_20),
        # shards of 26, 25 and 25 steps: step 26 goes to rank 0
        "rows_76_tensor_freq_2": (
            EVERY_OTHER_TO_26,
            {0: [1, 2, 4, 6, 8, 26], 1: [10, 12, 14, 16], 2: [18, 20, 22, 24]},
        ),
        # rank 2 stops after step 17: steps 18 to 20 of its share are left out
        "stop": (FIRST_20, {0: list(range(1, 8)), 1: list(range(8, 15)), 2: [15, 16, 17]}),
    },
}
#: The tensor steps the ``stop`` case leaves out (the rest of the stopping rank's share).
STOP_LEFT_OUT = {2: list(range(26, 37, 2)), 3: [18, 19, 20]}
#: What the stopping rank says, by world size.
STOP_WARNINGS = {
    2: "Rank 1 stopped at step 25, before the tensor steps 26, 28, 30, 32, 34, 36 of its share",
    3: "Rank 2 stopped at step 17, before the tensor steps 18, 19, 20 of its share",
}


def tensor_steps(directory: Path) -> list[int]:
    return [
        event.step
        for event in load_dir(directory)
        if event.what == "summary" and event.step is not None
        for value in event.values
        if (value.plugin, value.tag) == ("tensor", "weights")
    ]


@pytest.mark.parametrize("ranks", [2, 3])
def test_each_tensor_step_is_recorded_by_exactly_one_rank(
    mpi: Any, tmp_path: Path, ranks: int
) -> None:
    out = tmp_path / "out"
    run = mpi.run(ranks, *mpi.python(SCRIPT, out), cwd=tmp_path, timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.output
    for case, (job_steps, shares) in EXPECTED[ranks].items():
        recorded = {rank: tensor_steps(out / case / f"rank_{rank}") for rank in range(ranks)}
        assert recorded == shares, case
        counts = Counter(step for steps in recorded.values() for step in steps)
        assert max(counts.values()) == 1, case  # never twice
        left_out = sorted(set(job_steps) - set(counts))
        assert left_out == (STOP_LEFT_OUT[ranks] if case == "stop" else []), case
    assert run.output.count(STOP_WARNINGS[ranks]) == 1
    # the ranks agreed on the run lengths: none says it could not
    assert "could not learn the other ranks' run lengths" not in run.output
