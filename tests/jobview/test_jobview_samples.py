"""The machine samples' bands over ranks that sample the same moment at neighbouring steps.

docs/system-metrics.md: ranks sample on a shared wall-clock grid but label a sample
with their own step, so rank 1 may put a moment at step 11 that rank 0 put at 10.
The job's bands of ``rankscribe/system/*`` hold each rank's latest sample, so every
band point is over both ranks (no zig-zag between one rank's reading and the
other's), in the offline job view and the live one alike.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rankscribe.jobview import JobStatistics, LiveJobView, RankSeries, write_job_view
from rankscribe.jobview.feed import STEP_TIME_TAG
from rankscribe.jobview.protocol import JobPartial
from rankscribe.writer.reader import scalars

CPU = "rankscribe/system/cpu_percent"
STEPS = range(1, 41)
# Each rank's samples: rank 0 at steps 0, 10, 20, 30, 41 (its end sample), rank 1 one
# step later each time but the first; readings far apart so a one-rank band shows.
SAMPLES = {
    0: [(0, 10.0), (10, 12.0), (20, 14.0), (30, 16.0), (41, 18.0)],
    1: [(0, 90.0), (11, 92.0), (21, 94.0), (31, 96.0), (41, 98.0)],
}


def rank_points(rank: int, samples: list[tuple[int, float]]) -> dict[str, list[tuple[int, float]]]:
    return {
        "loss/auto": [(step, 1.0 / step) for step in STEPS],
        STEP_TIME_TAG: [(step, 0.1) for step in STEPS],
        CPU: samples,
    }


def held(rank: int, step: int) -> float:
    """Rank ``rank``'s latest sample at or before ``step``."""
    return [value for at, value in SAMPLES[rank] if at <= step][-1]


def job_points(directory: Path) -> dict[str, dict[int, float]]:
    found: dict[str, dict[int, float]] = {}
    for path in directory.glob("*.job.*_MS"):
        for tag, points in scalars(path).items():
            found.setdefault(tag, {}).update(points)
    return found


def assert_held_bands(written: dict[str, dict[int, float]]) -> None:
    sampled = sorted({step for samples in SAMPLES.values() for step, _ in samples})
    assert sorted(written[f"{CPU}/mean"]) == sampled  # a band point where any rank sampled
    for step in sampled:
        assert written[f"{CPU}/ranks"][step] == 2.0, step
        both = [held(0, step), held(1, step)]
        assert written[f"{CPU}/mean"][step] == pytest.approx(np.mean(both), rel=1e-6), step
        assert written[f"{CPU}/min"][step] == pytest.approx(min(both), rel=1e-6)
        assert written[f"{CPU}/max_rank"][step] == 1.0
    # The mean steps from one pair of readings to the next: it never falls back.
    means = [written[f"{CPU}/mean"][step] for step in sampled]
    assert means == sorted(means)


def test_the_offline_job_view_holds_each_ranks_latest_sample(tmp_path: Path) -> None:
    series = {rank: RankSeries(rank, rank_points(rank, SAMPLES[rank])) for rank in SAMPLES}
    write_job_view(tmp_path, series, world_size=2)
    written = job_points(tmp_path)
    assert_held_bands(written)
    # Ordinary tags keep their own steps' statistics.
    assert sorted(written["loss/auto/mean"]) == list(STEPS)


def test_a_job_statistics_of_merged_partials_gives_the_same_bands(tmp_path: Path) -> None:
    merged = JobPartial.of_rank(0, rank_points(0, SAMPLES[0]))
    other = JobPartial.of_rank(1, rank_points(1, SAMPLES[1]))
    merged.merge(JobPartial.from_bytes(other.to_bytes()))  # through the wire format
    write_job_view(tmp_path, merged.job_statistics(), world_size=2)
    assert_held_bands(job_points(tmp_path))


def test_the_live_view_carries_each_ranks_latest_sample_into_later_intervals(
    tmp_path: Path,
) -> None:
    view = LiveJobView(tmp_path, world_size=2)
    # Three intervals; the start samples (step 0) come with the first, the end ones
    # (step 41, after the last step) with the last.
    for first, last in ((0, 10), (11, 25), (26, 41)):
        partial = JobPartial()
        for rank, samples in SAMPLES.items():
            window = {
                tag: [(step, value) for step, value in values if first <= step <= last]
                for tag, values in rank_points(rank, samples).items()
            }
            partial.merge(JobPartial.of_rank(rank, window, finished=last == 41))
        view.add(partial)
        view.write()
    view.finish()
    assert_held_bands(job_points(tmp_path))


def test_a_rank_that_stopped_is_not_held_past_its_last_step(tmp_path: Path) -> None:
    early = [(0, 50.0), (5, 52.0)]  # rank 1 ran steps 1-5 and sampled at 0 and 5
    series = {
        0: RankSeries(0, rank_points(0, SAMPLES[0])),
        1: RankSeries(
            1,
            {
                "loss/auto": [(step, 1.0) for step in range(1, 6)],
                STEP_TIME_TAG: [(step, 0.1) for step in range(1, 6)],
                CPU: early,
            },
        ),
    }
    write_job_view(tmp_path, series, world_size=2)
    written = job_points(tmp_path)
    assert written[f"{CPU}/ranks"][0] == 2.0
    assert written[f"{CPU}/mean"][0] == pytest.approx(30.0)
    assert written[f"{CPU}/ranks"][5] == 2.0  # rank 0's step-0 sample, held
    assert written[f"{CPU}/mean"][5] == pytest.approx((10.0 + 52.0) / 2)
    # Rank 1 last ran step 5: from step 10 on, the band is rank 0's alone.
    assert [written[f"{CPU}/ranks"][step] for step in (10, 20, 30, 41)] == [1.0] * 4
    assert written[f"{CPU}/mean"][20] == pytest.approx(14.0)


def test_job_statistics_keep_the_samples_apart_from_the_quantity_tags() -> None:
    statistics = JobStatistics()
    for rank, samples in SAMPLES.items():
        statistics.add(RankSeries(rank, rank_points(rank, samples)))
    assert CPU not in statistics.tags
    assert sorted(statistics.samples[CPU]) == [0, 1]
    # The samples do not count as steps the ranks ran (the end sample is at last + 1).
    assert statistics.last_steps == {0: 40, 1: 40}
