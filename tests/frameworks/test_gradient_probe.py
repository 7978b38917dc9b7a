"""The gradient probe in Lightning, Hugging Face Trainer and Accelerate jobs, with no user code.

Each framework wraps the model in ``DistributedDataParallel`` itself and shows its
integration the model (Lightning, the Trainer) or nothing (Accelerate, with no
``watch``): the integration finds the wrapper, and each rank's files hold its
arrival and its local bucket norms (docs/gradients.md, "The probe").
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from rankscribe.jobview.feed import (
    ARRIVAL_TIME_TAG,
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_READY_TAG,
    STEP_TIME_TAG,
)
from tests._support.job_files import rank_scalars

from .conftest import run_job, torchrun

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parent / "gradient_jobs.py"
STEPS = 24  # gradient_jobs.STEPS


def assert_each_rank_probed(job: Path) -> None:
    """Per rank: an arrival and local bucket norms at (nearly) every step, and the norms
    are the rank's own (the ranks' differ: taken before the reduce averaged them)."""
    norms_by_rank = []
    for rank in (0, 1):
        found = rank_scalars(job / f"rank_{rank}")
        arrivals = found.get(ARRIVAL_TIME_TAG, {})
        norm_tags = sorted(tag for tag in found if tag.startswith(GRADIENT_NORM_TAG_PREFIX))
        assert norm_tags, f"rank {rank} recorded no gradient norm: {sorted(found)}"
        # Accelerate's run opens at the first log, after the first step's backward.
        assert len(arrivals) >= STEPS - 2, (rank, sorted(arrivals))
        assert arrivals == found[GRADIENT_READY_TAG]
        step_times = found[STEP_TIME_TAG]
        for step, arrival in arrivals.items():
            assert arrival > 0.0, (rank, step, arrival)
            if step in step_times:
                assert arrival <= step_times[step] + 1e-3, (rank, step)
        norms = {
            step: math.sqrt(sum(found[tag].get(step, 0.0) ** 2 for tag in norm_tags))
            for step in arrivals
        }
        assert all(math.isfinite(norm) and norm > 0.0 for norm in norms.values()), norms
        norms_by_rank.append(norms)
    shared = sorted(norms_by_rank[0].keys() & norms_by_rank[1].keys())
    assert len(shared) >= STEPS - 2
    assert any(norms_by_rank[0][step] != norms_by_rank[1][step] for step in shared)


def test_a_lightning_ddp_job_records_each_ranks_arrival_and_bucket_norms(tmp_path: Path) -> None:
    run_job([sys.executable, SCRIPT, "lightning", "runs"], tmp_path)
    assert_each_rank_probed(tmp_path / "runs" / "job" / "run")


def test_a_trainer_job_records_each_ranks_arrival_and_bucket_norms(tmp_path: Path) -> None:
    run_job(torchrun(SCRIPT, "transformers", "runs/hf"), tmp_path)
    assert_each_rank_probed(tmp_path / "runs" / "hf")


def test_an_accelerate_job_records_each_ranks_arrival_and_bucket_norms(tmp_path: Path) -> None:
    run_job(torchrun(SCRIPT, "accelerate", "runs/acc"), tmp_path)
    assert_each_rank_probed(tmp_path / "runs" / "acc")


def test_a_hook_accelerate_registers_when_it_wraps_the_model_turns_the_probe_off_with_a_warning(
    tmp_path: Path,
) -> None:
    finished = run_job(torchrun(SCRIPT, "accelerate-own-hook", "runs/acc"), tmp_path)
    # One warning per rank; training goes on under Accelerate's hook, recorded as before.
    assert finished.output.count("The gradient probe is off for this network") == 2
    for rank in (0, 1):
        found = rank_scalars(tmp_path / "runs" / "acc" / f"rank_{rank}")
        assert not [tag for tag in found if tag.startswith("rankscribe/gradient/")]
        assert ARRIVAL_TIME_TAG not in found
        assert sorted(found["loss"]) == list(range(1, STEPS + 1))
