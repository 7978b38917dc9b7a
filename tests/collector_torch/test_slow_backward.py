"""A slow backward named by rank: a real ``torchrun --nproc_per_node 2`` DDP job (gloo, CPU).

From step 50 rank 1 busy-waits 40 ms in its backward, before any of its gradients
(torchrun_backward.py); its forward is unchanged. DDP's all-reduce makes both ranks'
steps wait for it, so step and forward times cannot tell the ranks apart. The
gradient probe's ready time (when a rank's last bucket was handed to the reduce) is
each rank's arrival; the straggler rule names rank 1 by it, and the cost it gives is
what the job lost per step: the step-time difference to the clean job of the same
launch, within 25 %. In a third job the slow rank also corrupts one element of its
local gradient once: it is named under both kinds, each verdict with its own evidence.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rankscribe.jobview import verdict_lines
from rankscribe.jobview.feed import ARRIVAL_TIME_TAG, FORWARD_TIME_TAG, STEP_TIME_TAG
from tests._support.job_files import rank_scalars, show, user_defined
from tests._support.launchers import clean_environment, run_bounded, torchrun

SCRIPT = Path(__file__).resolve().parent / "torchrun_backward.py"
JOB_TIMEOUT = 120
STEPS, SLOW_RANK, SLOW_FROM, SLOW_SECONDS = 150, 1, 50, 0.040  # torchrun_backward
CORRUPT_STEP = 100  # torchrun_backward
#: Steps after the onset left out of the steady state (the rule's window may straddle it).
SETTLE = 10


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("backward")
    result = run_bounded(
        torchrun(SCRIPT, out),
        env=clean_environment(OMP_NUM_THREADS="1"),
        cwd=out,
        timeout=JOB_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.output
    return out


def steady_mean(points: dict[int, float]) -> float:
    return float(np.mean([value for step, value in points.items() if step >= SLOW_FROM + SETTLE]))


def test_the_rank_with_the_slow_backward_is_named_by_its_arrival_with_what_it_costs(
    jobs: Path,
) -> None:
    notes = user_defined(jobs / "slow")
    assert (notes["job/straggler_rank"], notes["job/straggler_ranks"]) == (SLOW_RANK, "1")
    assert notes["job/straggler_timing"] == ARRIVAL_TIME_TAG
    assert abs(notes["job/straggler_since_step"] - SLOW_FROM) <= SETTLE
    # What rank 1 cost is what the job lost per step: the step time against the clean job's.
    lost = steady_mean(rank_scalars(jobs / "slow" / "rank_0")[STEP_TIME_TAG]) - steady_mean(
        rank_scalars(jobs / "clean" / "rank_0")[STEP_TIME_TAG]
    )
    assert lost > SLOW_SECONDS / 2  # the wait really reached every rank's step
    cost = notes[f"job/straggler_cost_seconds/{SLOW_RANK}"]
    assert abs(cost - lost) <= 0.25 * lost, (cost, lost)
    line = verdict_lines(notes)[0]
    assert line.startswith("straggler: rank 1 costs "), line
    assert "arrival" in line


def test_step_and_forward_times_cannot_tell_the_ranks_apart(jobs: Path) -> None:
    found = [rank_scalars(jobs / "slow" / f"rank_{rank}") for rank in (0, 1)]
    steps = [steady_mean(ranks[STEP_TIME_TAG]) for ranks in found]
    forwards = [steady_mean(ranks[FORWARD_TIME_TAG]) for ranks in found]
    arrivals = [steady_mean(ranks[ARRIVAL_TIME_TAG]) for ranks in found]
    assert abs(steps[0] - steps[1]) < 0.1 * steps[0]  # the all-reduce evens them out
    assert abs(forwards[0] - forwards[1]) < 0.5 * SLOW_SECONDS
    assert arrivals[1] - arrivals[0] > 0.75 * SLOW_SECONDS  # rank 1's last bucket, late
    assert sorted(found[1][ARRIVAL_TIME_TAG]) == list(range(1, STEPS + 1))


def test_the_clean_job_names_nobody(jobs: Path) -> None:
    notes = user_defined(jobs / "clean")
    assert (notes["job/straggler_rank"], notes["job/straggler_ranks"]) == (-1, "")


def test_a_rank_slow_and_corrupting_at_once_is_named_under_both_kinds(jobs: Path) -> None:
    notes = user_defined(jobs / "both")
    # Its arrival names it a straggler, from the slow backward's onset...
    assert (notes["job/straggler_rank"], notes["job/straggler_ranks"]) == (SLOW_RANK, "1")
    assert notes["job/straggler_timing"] == ARRIVAL_TIME_TAG
    assert abs(notes["job/straggler_since_step"] - SLOW_FROM) <= SETTLE
    # ...and its local gradient names it the origin of the corrupted step's update.
    assert notes["job/gradient_ranks"] == str(SLOW_RANK)
    assert notes["job/gradient_first_step"] == CORRUPT_STEP
    assert notes[f"job/gradient_step/{SLOW_RANK}"] == CORRUPT_STEP
    assert notes[f"job/gradient_ratio/{SLOW_RANK}"] > 100
    assert "fc1.weight" in notes[f"job/gradient_parameters/{SLOW_RANK}"].split(",")
    checked = show("--check", jobs / "both")
    assert checked.returncode == 3, checked.output
    assert "straggler: rank 1 costs " in checked.output
    assert f"gradient: rank 1's local gradient at step {CORRUPT_STEP}, before the reduce" in (
        checked.output
    )
