"""Where each rank stopped: a tie never goes to an innocent rank; 'undetermined' when unsure."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankscribe.jobview import RankSeries, verdict_lines, write_job_view
from rankscribe.jobview.errors import JobViewParamValueError
from rankscribe.jobview.feed import STEP_TIME_TAG


def _job(last_steps: dict[int, int]) -> dict[int, RankSeries]:
    return {
        rank: RankSeries(rank, {STEP_TIME_TAG: [(step, 0.01) for step in range(1, last + 1)]})
        for rank, last in last_steps.items()
    }


def test_one_rank_alone_with_the_smallest_last_step_stopped_first(tmp_path: Path) -> None:
    verdicts = write_job_view(tmp_path, _job({0: 20, 1: 14, 2: 20}), world_size=3).verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (1, 14)
    assert verdicts["job/stopped_first_evidence"] == "last_step"
    assert "stopped first: rank 1 at step 14" in "\n".join(verdict_lines(verdicts))


def test_a_tie_is_undetermined_not_the_lowest_rank(tmp_path: Path) -> None:
    """The victim (rank 3) and rank 0 stopped at the same step: nothing tells them apart."""
    verdicts = write_job_view(tmp_path, _job({0: 14, 1: 15, 2: 15, 3: 14}), world_size=4).verdicts
    assert verdicts["job/stopped_first_rank"] == -1
    assert verdicts["job/stopped_first_step"] == 14
    assert verdicts["job/stopped_first_evidence"] == "undetermined"
    assert verdicts["job/stopped_first_tied_ranks"] == "0,3"
    assert verdicts["job/stopped_early_ranks"] == "0,3"
    lines = verdict_lines(verdicts)
    assert (
        "stopped first: undetermined (ranks 0,3 stopped at step 14; nothing tells them apart)"
    ) in lines


def test_the_launchers_report_breaks_a_tie(tmp_path: Path) -> None:
    verdicts = write_job_view(
        tmp_path, _job({0: 14, 1: 15, 2: 15, 3: 14}), world_size=4, failed=[3]
    ).verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (3, 14)
    assert verdicts["job/stopped_first_evidence"] == "launcher"
    assert any("reported by the launcher" in line for line in verdict_lines(verdicts))


def test_lock_step_ranks_name_nobody_without_the_launchers_report(tmp_path: Path) -> None:
    job = _job({0: 30, 1: 30, 2: 30})
    verdicts = write_job_view(tmp_path, job, world_size=3).verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_evidence"]) == (-1, "")
    assert not any(line.startswith("stopped first") for line in verdict_lines(verdicts))
    reported = write_job_view(tmp_path, job, world_size=3, failed=[2]).verdicts
    assert (reported["job/stopped_first_rank"], reported["job/stopped_first_step"]) == (2, 30)


@pytest.mark.parametrize("failed", [[-1], ["1"], [True]])
def test_failed_must_hold_ranks(tmp_path: Path, failed: list[object]) -> None:
    with pytest.raises(JobViewParamValueError, match="failed"):
        write_job_view(tmp_path, _job({0: 3}), world_size=1, failed=failed)  # type: ignore[arg-type]


def test_verdict_lines_read_unexpected_types_as_unknown() -> None:
    lines = verdict_lines(
        {
            "job/straggler_rank": 1,
            "job/straggler_slowest_share": "n/a",
            "job/straggler_excess": None,
            "job/step_time_skew": "x",
            "job/stopped_first_rank": "2",
            "job/straggler_timing": 5,
        }
    )
    # Unknown values are left out of the sentence (never "nan%"), the timing too.
    assert lines[0] == "straggler: rank 1 (no measure recorded)"
    assert not any("nan" in line for line in lines), lines


def test_the_largest_step_reaches_the_job_file_unwrapped(tmp_path: Path) -> None:
    """Step 2**63 - 1 used to wrap to -2**63 in a float-to-int64 cast."""
    from rankscribe.writer import reader

    largest = 2**63 - 1
    series = {
        rank: RankSeries(rank, {"loss": [(1, 1.0 + rank), (largest, 2.0 + rank)]})
        for rank in range(2)
    }
    view = write_job_view(tmp_path, series, world_size=2)
    means = dict(reader.scalars(view.paths[0])["loss/mean"])
    assert means == {1: 1.5, largest: 2.5}
    assert view.verdicts["job/last_step/0"] == float(largest)  # beyond int32: a float
