"""The job view's cross-rank statistics: equal to numpy's, mergeable in any order."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.jobview import JobStatistics, RankSeries
from rankscribe.jobview.feed import FINGERPRINT_TAG


def _synthetic(ranks: int, steps: int, seed: int) -> dict[int, RankSeries]:
    """Ranks with gaps, a tag on some ranks only and values of very different scales."""
    rng = np.random.default_rng(seed)
    series = {}
    for rank in range(ranks):
        scalars: dict[str, list[tuple[int, float]]] = {}
        kept = rng.random(steps) > 0.2  # each rank misses ~20 % of the points
        scalars["loss"] = [
            (step, float(rng.normal(2.0, 0.5))) for step in range(steps) if kept[step]
        ]
        scalars["lr"] = [(step, 1e-3 * (1 + rank)) for step in range(0, steps, 3)]
        if rank % 2 == 0:
            scalars["even/only"] = [(step, float(rng.normal(1e6, 1.0))) for step in range(steps)]
        series[rank] = RankSeries(rank, scalars)
    return series


def _numpy_expectation(
    series: dict[int, RankSeries], tag: str
) -> dict[int, tuple[float, float, float, float, int, int, int]]:
    by_step: dict[int, list[tuple[int, float]]] = {}
    for rank, item in series.items():
        for step, value in item.scalars.get(tag, []):
            by_step.setdefault(step, []).append((rank, value))
    expected = {}
    for step, points in by_step.items():
        values = np.array([value for _, value in points])
        ranks = [rank for rank, _ in points]
        expected[step] = (
            float(np.mean(values)),
            float(np.min(values)),
            float(np.max(values)),
            float(np.std(values)),
            len(values),
            ranks[int(np.argmin(values))],
            ranks[int(np.argmax(values))],
        )
    return expected


@pytest.mark.parametrize("seed", [0, 1])
def test_statistics_equal_numpys_over_the_ranks_that_have_the_point(seed: int) -> None:
    series = _synthetic(ranks=6, steps=40, seed=seed)
    statistics = JobStatistics()
    for item in series.values():
        statistics.add(item)
    assert sorted(statistics.tags) == ["even/only", "loss", "lr"]
    for tag in statistics.tags:
        computed = statistics.tags[tag]
        expected = _numpy_expectation(series, tag)
        assert computed.steps.tolist() == sorted(expected)
        for index, step in enumerate(computed.steps.tolist()):
            mean, low, high, std, count, low_rank, high_rank = expected[step]
            assert computed.mean[index] == pytest.approx(mean, rel=1e-12)
            assert computed.minimum[index] == low
            assert computed.maximum[index] == high
            assert computed.std[index] == pytest.approx(std, rel=1e-9, abs=1e-12)
            assert computed.count[index] == count
            assert computed.min_rank[index] == low_rank
            assert computed.max_rank[index] == high_rank
    # the even ranks alone hold "even/only": 3 of 6 at every step
    assert set(statistics.tags["even/only"].count.tolist()) == {3}
    assert set(statistics.tags["even/only"].min_rank.tolist()) <= {0, 2, 4}


def test_a_tie_goes_to_the_lowest_rank_and_a_repeated_step_keeps_its_last_value() -> None:
    statistics = JobStatistics()
    statistics.add(RankSeries(2, {"x": [(1, 5.0)]}))
    statistics.add(RankSeries(0, {"x": [(1, 9.0), (1, 5.0)]}))  # step 1 twice: 5.0 wins
    statistics.add(RankSeries(1, {"x": [(1, 5.0)]}))
    tag = statistics.tags["x"]
    assert tag.count.tolist() == [3]
    assert (tag.min_rank.tolist(), tag.max_rank.tolist()) == ([0], [0])
    assert tag.mean.tolist() == [5.0]


def test_a_nan_point_shows_in_the_mean_not_in_the_extremes() -> None:
    statistics = JobStatistics()
    statistics.add(RankSeries(0, {"loss": [(1, 1.0)]}))
    statistics.add(RankSeries(1, {"loss": [(1, math.nan)]}))
    statistics.add(RankSeries(2, {"loss": [(1, 3.0)]}))
    tag = statistics.tags["loss"]
    assert math.isnan(tag.mean[0]) and math.isnan(tag.std[0])
    assert (tag.minimum[0], tag.min_rank[0], tag.maximum[0], tag.max_rank[0]) == (1.0, 0, 3.0, 2)
    assert tag.count[0] == 3


def test_the_fingerprint_gets_no_statistics_and_a_rank_is_added_once() -> None:
    statistics = JobStatistics()
    statistics.add(RankSeries(0, {FINGERPRINT_TAG: [(1, 7.0)], "loss": [(1, 1.0)]}))
    assert FINGERPRINT_TAG not in statistics.tags
    assert statistics.fingerprints[0][1].tolist() == [7.0]
    with pytest.raises(ValueError, match="rank 0 was already added"):
        statistics.add(RankSeries(0, {"loss": [(2, 1.0)]}))
    other = JobStatistics()
    other.add(RankSeries(0, {"loss": [(3, 1.0)]}))
    with pytest.raises(ValueError, match=r"ranks \[0\] are in both"):
        statistics.merge(other)


def _assert_same(first: JobStatistics, second: JobStatistics) -> None:
    assert sorted(first.tags) == sorted(second.tags)
    for tag in first.tags:
        a, b = first.tags[tag], second.tags[tag]
        assert a.steps.tolist() == b.steps.tolist()
        assert a.count.tolist() == b.count.tolist()
        assert a.minimum.tolist() == b.minimum.tolist()
        assert a.maximum.tolist() == b.maximum.tolist()
        assert a.min_rank.tolist() == b.min_rank.tolist()
        assert a.max_rank.tolist() == b.max_rank.tolist()
        np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.std, b.std, rtol=1e-9, atol=1e-9)
    assert first.last_steps == second.last_steps
    assert first.nonfinite_loss == second.nonfinite_loss
    assert sorted(first.step_times) == sorted(second.step_times)


_values = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, 1.0, -2.5]),  # ties, to test which rank wins
)
_rank_points = st.dictionaries(
    st.sampled_from(["a", "b", "loss/auto"]),
    st.dictionaries(st.integers(0, 12), _values, max_size=8),
    max_size=3,
)


@given(
    st.lists(_rank_points, min_size=1, max_size=7),
    st.randoms(use_true_random=False),
)
def test_partitions_merged_in_any_order_equal_one_pass(
    ranks: list[dict[str, dict[int, float]]], shuffler: random.Random
) -> None:
    series = [
        RankSeries(rank, {tag: sorted(points.items()) for tag, points in scalars.items()})
        for rank, scalars in enumerate(ranks)
    ]
    one_pass = JobStatistics()
    for item in series:
        one_pass.add(item)
    order = list(series)
    shuffler.shuffle(order)
    groups: list[JobStatistics] = []
    while order:
        size = shuffler.randint(1, len(order))
        group = JobStatistics()
        for item in order[:size]:
            group.add(item)
        groups.append(group)
        order = order[size:]
    shuffler.shuffle(groups)
    while len(groups) > 1:  # a random reduction tree
        first = groups.pop(shuffler.randrange(len(groups)))
        second = groups.pop(shuffler.randrange(len(groups)))
        first.merge(second)
        groups.append(first)
    _assert_same(one_pass, groups[0])


_any_values = st.lists(
    st.one_of(
        st.floats(-1e100, 1e100, allow_nan=False, allow_infinity=False).filter(
            lambda value: value == 0.0 or abs(value) >= 1e-100
        ),
        st.sampled_from([math.inf, -math.inf, math.nan, 0.0, 1.0]),
    ),
    min_size=1,
    max_size=9,
)


def _same(computed: float, expected: float, scale: float = 0.0) -> bool:
    """Equal, NaN included; finite values up to rounding relative to the values' magnitude.

    (Both sides round: numpy's two-pass std of values near 3e15 that differ by
    hundreds is itself off in the 7th digit.)
    """
    if math.isnan(expected) or math.isinf(expected):
        return computed == expected or (math.isnan(computed) and math.isnan(expected))
    return computed == pytest.approx(expected, rel=1e-9, abs=1e-12 * scale + 1e-300)


@given(_any_values, st.randoms(use_true_random=False))
def test_mean_std_and_extremes_match_numpy_for_every_finite_infinite_and_nan_mix(
    values: list[float], shuffler: random.Random
) -> None:
    """numpy's mean and std of the points, its nanmin and nanmax, merged in any order.

    Finite values stay within 1e100, where numpy's sum of squares cannot overflow, and
    at or above 1e-100 (or zero), where their squares are normal floats: below it the
    squared deviations are subnormal and lose digits in numpy's std as in ours (values
    near 1e-158 differed in the 9th digit), so neither side is a reference there.
    """
    parts = []
    for rank, value in enumerate(values):
        part = JobStatistics()
        part.add(RankSeries(rank, {"x": [(7, value)]}))
        parts.append(part)
    shuffler.shuffle(parts)
    while len(parts) > 1:
        first = parts.pop(shuffler.randrange(len(parts)))
        first.merge(parts.pop(shuffler.randrange(len(parts))))
        parts.append(first)
    tag = parts[0].tags["x"]
    array = np.array(values)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = (
            float(np.mean(array)),
            float(np.std(array)),
            float(np.nanmin(array)),
            float(np.nanmax(array)),
        )
    computed = (float(tag.mean[0]), float(tag.std[0]), float(tag.minimum[0]), float(tag.maximum[0]))
    finite = array[np.isfinite(array)]
    scale = float(np.abs(finite).max()) if len(finite) else 0.0
    assert all(_same(got, want, scale) for got, want in zip(computed, expected, strict=True)), (
        values,
        computed,
        expected,
    )
    assert tag.count[0] == len(values)


@pytest.mark.parametrize(
    ("values", "mean", "std"),
    [
        ([math.inf, 1.0], math.inf, math.nan),
        ([math.inf, -math.inf], math.nan, math.nan),
        ([-math.inf, 2.0, 3.0], -math.inf, math.nan),
        ([1.0, math.nan, 3.0], math.nan, math.nan),
        ([math.inf], math.inf, math.nan),
        ([2.0, 4.0], 3.0, 1.0),
    ],
)
def test_the_cases_numpy_decides_by_hand(values: list[float], mean: float, std: float) -> None:
    statistics = JobStatistics()
    for rank, value in enumerate(values):
        statistics.add(RankSeries(rank, {"x": [(1, value)]}))
    tag = statistics.tags["x"]
    assert _same(float(tag.mean[0]), mean) and _same(float(tag.std[0]), std)


def test_the_largest_step_survives_the_statistics() -> None:
    """Step 2**63 - 1 used to round up to 2**63 as a float and wrap to -2**63."""
    largest = 2**63 - 1
    statistics = JobStatistics()
    statistics.add(RankSeries(0, {"x": [(1, 1.0), (largest, 2.0)]}))
    statistics.add(RankSeries(1, {"x": [(largest, 4.0)]}))
    tag = statistics.tags["x"]
    assert tag.steps.tolist() == [1, largest]
    assert tag.mean.tolist() == [1.0, 3.0]
    assert statistics.last_steps == {0: largest, 1: largest}
