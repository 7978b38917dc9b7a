"""Stragglers an ``Allreduce`` hides, and divergence from the first step, under real ``mpiexec``.

Two launches of timing_scenarios.py: ``pair`` (2 ranks: a clean job, a job
whose rank 1 computes 2.5x longer, a job whose ranks never average their
gradients, each in a TrainSession loop) and ``node`` (4 ranks, ranks 2 and 3
compute twice as long, in a TrainLoop). Every step ends in an Allreduce, so
the wall step times are equal; the ``compute`` section tells the ranks apart.
Checked from the files: the merged lineage's verdicts and the ranks' own tags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.jobview import verdict_lines
from rankscribe.jobview.feed import FINGERPRINT_TAG, SECTION_TAG_PREFIX, STEP_TIME_TAG
from tests._support.job_files import rank_scalars, user_defined

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "timing_scenarios.py"
JOB_TIMEOUT = 150.0
STEPS, COMPUTE_SECONDS, SLOW_RANK = 24, 0.008, 1  # timing_scenarios
COMPUTE_TAG = f"{SECTION_TAG_PREFIX}compute"


def launch(mpi: Any, ranks: int, scenario: str, out: Path) -> None:
    out.mkdir(parents=True)
    run = mpi.run(ranks, *mpi.python(SCENARIOS, scenario, out), cwd=out, timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.output


@pytest.fixture(scope="module")
def pair(mpi: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("timings") / "pair"
    launch(mpi, 2, "pair", out)
    return out


def test_a_clean_allreduce_job_flags_nothing(pair: Path) -> None:
    notes = user_defined(pair / "clean")
    assert (notes["job/straggler_rank"], notes["job/straggler_ranks"]) == (-1, "")
    assert notes["job/divergence_check"] == "checked"
    assert notes["job/diverged_ranks"] == ""
    assert verdict_lines(notes)[:2] == [
        f"straggler: none; step-time skew {notes['job/step_time_skew']:.2f}",
        "divergence: none (the ranks' parameters agree)",
    ]


def test_the_rank_that_computes_longer_is_named_by_its_section(pair: Path) -> None:
    notes = user_defined(pair / "slow")
    assert notes["job/step_time_skew"] < 1.2  # the Allreduce evens out the wall step times
    assert (notes["job/straggler_rank"], notes["job/straggler_ranks"]) == (SLOW_RANK, "1")
    assert notes["job/straggler_timing"] == COMPUTE_TAG
    assert notes["job/straggler_excess"] == pytest.approx(1.5, abs=0.5)
    assert verdict_lines(notes)[0].startswith("straggler: rank 1 costs ")


def test_a_train_session_records_real_step_times(pair: Path) -> None:
    for rank in (0, 1):
        found = rank_scalars(pair / "slow" / f"rank_{rank}")
        times, compute = found[STEP_TIME_TAG], found[COMPUTE_TAG]
        assert sorted(times) == sorted(compute) == list(range(1, STEPS + 1))
        # each rank's step waits for the slow rank's compute in the Allreduce
        assert np.median(list(times.values())) >= COMPUTE_SECONDS * 2.5 * 0.9
        expected = COMPUTE_SECONDS * (2.5 if rank == SLOW_RANK else 1.0)
        assert np.median(list(compute.values())) == pytest.approx(expected, rel=0.5)


def test_ranks_that_skip_the_averaging_are_flagged_at_the_first_collected_step(
    pair: Path,
) -> None:
    notes = user_defined(pair / "unaveraged")
    assert notes["job/divergence_check"] == "checked"  # identical at step 0
    assert notes["job/diverged_first_step"] == 1
    # two ranks that disagree: neither holds a majority, both are reported
    assert notes["job/diverged_ranks"] == "0,1"
    prints = rank_scalars(pair / "unaveraged" / "rank_0")[FINGERPRINT_TAG]
    assert sorted(prints)[:2] == [0, 1]


def test_a_slow_node_is_named_whole(mpi: Any, tmp_path: Path) -> None:
    launch(mpi, 4, "node", tmp_path / "out")
    notes = user_defined(tmp_path / "out" / "node")
    assert notes["job/straggler_ranks"] == "2,3"
    assert notes["job/straggler_rank"] in (2, 3)
    assert notes["job/straggler_timing"] == COMPUTE_TAG
    assert notes["job/divergence_check"] == "checked" and notes["job/diverged_ranks"] == ""
    assert any(line.startswith("stragglers: ranks 2,3") for line in verdict_lines(notes))
