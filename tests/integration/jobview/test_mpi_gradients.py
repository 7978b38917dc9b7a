"""The rank that corrupted a gradient in a NumPy ``mpiexec -n 4`` job, named.

gradient_scenarios.py's jobs average their two gradient arrays with
``SummaryCollector.allreduce_gradients``; in ``corrupt`` rank 2 multiplies one
element of its first array by 2**16 at step 30, before the call. The merged
lineage names rank 2 at step 30 in bucket 0 (kind ``gradient``), and the ranks apart
in the steps after, while its update works through every replica, as its fallout;
``show --check`` exits 3 on it; the clean job of the same launch names nobody in 500
steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.jobview.feed import (
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_PEAK_TAG_PREFIX,
    GRADIENT_READY_TAG,
    STEP_TIME_TAG,
)
from tests._support.job_files import rank_scalars, show, user_defined

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "gradient_scenarios.py"
JOB_TIMEOUT = 90.0
STEPS, RANKS, CORRUPT_RANK, CORRUPT_STEP = 500, 4, 2, 30  # gradient_scenarios


@pytest.fixture(scope="module")
def jobs(mpi: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gradients")
    run = mpi.run(RANKS, *mpi.python(SCENARIOS, out, STEPS), cwd=out, timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.output
    return out


def test_the_rank_that_corrupted_its_gradient_is_named_at_its_step_and_bucket(
    jobs: Path,
) -> None:
    notes = user_defined(jobs / "corrupt")
    assert notes["job/gradient_ranks"] == str(CORRUPT_RANK)
    assert notes[f"job/gradient_step/{CORRUPT_RANK}"] == CORRUPT_STEP
    assert notes[f"job/gradient_bucket/{CORRUPT_RANK}"] == 0
    assert notes[f"job/gradient_ratio/{CORRUPT_RANK}"] > 100
    # The corrupted update then sends every replica's norms up until the network
    # overflows; rank 1's second bucket stands 8.6x apart at step 32: fallout, not named.
    assert notes["job/gradient_fallout_ranks"] == "1"
    assert (notes["job/gradient_fallout_step/1"], notes["job/gradient_fallout_of/1"]) == (32, 2)
    found = {rank: rank_scalars(jobs / "corrupt" / f"rank_{rank}") for rank in range(RANKS)}
    norm = GRADIENT_NORM_TAG_PREFIX + "0"
    others = [found[rank][norm][CORRUPT_STEP] for rank in range(RANKS) if rank != CORRUPT_RANK]
    assert found[CORRUPT_RANK][norm][CORRUPT_STEP] > 100 * max(others)
    check = show("--check", jobs / "corrupt")
    assert check.returncode == 3, check.output
    assert "gradient: rank 2's local gradient at step 30, before the reduce: bucket 0" in (
        check.output
    )
    assert "and rank 1 at step 32 stood apart after it (its fallout, not named)" in check.output


def test_the_clean_numpy_job_names_nobody_and_records_every_step(jobs: Path) -> None:
    notes = user_defined(jobs / "clean")
    assert (notes["job/gradient_check"], notes["job/gradient_ranks"]) == ("checked", "")
    assert notes["job/diverged_ranks"] == ""
    assert show("--check", jobs / "clean").returncode == 0
    for rank in range(RANKS):
        found = rank_scalars(jobs / "clean" / f"rank_{rank}")
        for bucket in (0, 1):
            norms = found[f"{GRADIENT_NORM_TAG_PREFIX}{bucket}"]
            peaks = found[f"{GRADIENT_PEAK_TAG_PREFIX}{bucket}"]
            assert sorted(norms) == sorted(peaks) == list(range(1, STEPS + 1))
            # A peak is the norm of a row of the bucket: within its norm.
            assert all(0.0 < peaks[step] <= norms[step] * (1 + 1e-6) for step in norms)
        ready, steps = found[GRADIENT_READY_TAG], found[STEP_TIME_TAG]
        assert all(0.0 < ready[step] <= steps[step] for step in ready)
        assert np.all(np.isfinite(list(ready.values())))


def test_the_live_view_hands_on_verdict_the_origin_and_nothing_for_its_fallout(
    jobs: Path,
) -> None:
    def gradient_records(job: str) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = json.loads((jobs / job / "rank_0.json").read_text())[
            "verdicts"
        ]
        return [record for record in records if record["kind"] == "gradient"]

    [record] = gradient_records("corrupt")  # rank 1's fallout at step 32: no record
    assert (record["ranks"], record["since_step"], record["bucket"]) == (
        [CORRUPT_RANK],
        CORRUPT_STEP,
        0,
    )
    assert record["ratio"] > 100 and record["nonfinite"] is False
    assert gradient_records("clean") == []
