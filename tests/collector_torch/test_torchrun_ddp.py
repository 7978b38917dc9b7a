"""A real ``torchrun --nproc_per_node 2`` DistributedDataParallel job (gloo, CPU).

DDP averages the gradients inside ``backward``: both ranks' wall step times
are the slow rank's, so the step time names nobody; the forward time, taken
by module hooks on the model the loop was given, names the rank whose forward
is 40 ms longer. The clean job of the same launch flags nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rankscribe.jobview import verdict_lines
from rankscribe.jobview.feed import FORWARD_TIME_TAG, STEP_TIME_TAG
from tests._support.job_files import rank_scalars, user_defined
from tests._support.launchers import clean_environment, run_bounded, torchrun

SCRIPT = Path(__file__).resolve().parent / "torchrun_ddp.py"
JOB_TIMEOUT = 240
STEPS, SLOW_RANK, SLOW_SECONDS = 12, 1, 0.040  # torchrun_ddp


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ddp")
    result = run_bounded(
        torchrun(SCRIPT, out),
        env=clean_environment(OMP_NUM_THREADS="1"),
        cwd=out,
        timeout=JOB_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.output
    return out


def test_a_clean_ddp_job_flags_nothing(jobs: Path) -> None:
    notes = user_defined(jobs / "clean")
    assert (notes["job/straggler_rank"], notes["job/straggler_ranks"]) == (-1, "")
    assert notes["job/divergence_check"] == "checked"
    assert notes["job/diverged_ranks"] == ""


def test_the_rank_with_the_longer_forward_is_named_by_its_forward_time(jobs: Path) -> None:
    notes = user_defined(jobs / "slow")
    assert notes["job/step_time_skew"] < 1.2  # DDP's all-reduce evens the wall step times out
    assert (notes["job/straggler_rank"], notes["job/straggler_ranks"]) == (SLOW_RANK, "1")
    assert notes["job/straggler_timing"] == FORWARD_TIME_TAG
    assert notes["job/diverged_ranks"] == ""  # DDP kept the replicas equal
    line = verdict_lines(notes)[0]
    assert line.startswith("straggler: rank 1 costs "), line
    assert "): forward " in line  # the timing that named it, after the cost
    for rank in (0, 1):
        found = rank_scalars(jobs / "slow" / f"rank_{rank}")
        forward = found[FORWARD_TIME_TAG]
        assert sorted(forward) == sorted(found[STEP_TIME_TAG]) == list(range(1, STEPS + 1))
        # both ranks' steps last the slow rank's forward; only its own forward does
        assert np.median(list(found[STEP_TIME_TAG].values())) >= SLOW_SECONDS
        slow_forward = np.median(list(forward.values())) >= SLOW_SECONDS
        assert slow_forward == (rank == SLOW_RANK)
