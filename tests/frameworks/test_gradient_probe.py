"""The gradient probe in an Accelerate job that never shows the tracker its model, and
where a framework registers a communication hook of its own.

The probe in the Lightning, Hugging Face Trainer and Accelerate examples' jobs, with no
probe code in them, is checked on those jobs (``checks.assert_each_rank_probed`` in
test_lightning.py, test_transformers.py and test_accelerate.py): each framework wraps the
model in ``DistributedDataParallel`` itself, the integration finds the wrapper, and each
rank's files hold its arrival and its local bucket norms (docs/gradients.md, "The probe").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rankscribe.jobview.feed import ARRIVAL_TIME_TAG
from tests._support.job_files import rank_scalars

from .checks import assert_each_rank_probed
from .conftest import run_job, torchrun

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parent / "gradient_jobs.py"
STEPS = 24  # gradient_jobs.STEPS


def test_an_accelerate_job_without_watch_records_each_ranks_arrival_and_bucket_norms(
    tmp_path: Path,
) -> None:
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
