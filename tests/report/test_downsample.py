"""Curves thinned for drawing keep every bucket's lowest and highest point."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

# private: the curve downsampling rule, no public door
from rankscribe.lineage.report._downsample import downsample


def test_short_curves_come_back_unchanged() -> None:
    steps = np.arange(10, dtype=np.int64)
    values = np.linspace(0.0, 1.0, 10)
    drawn_steps, drawn_values = downsample(steps, values, max_points=10)
    assert drawn_steps.tolist() == steps.tolist()
    assert drawn_values.tolist() == values.tolist()


def test_a_long_curve_keeps_its_spikes_ends_and_order() -> None:
    steps = np.arange(1, 10_001, dtype=np.int64) * 2
    values = np.sin(np.arange(10_000) / 50.0)
    values[3_333] = 40.0  # a one-step blow-up
    values[7_777] = -40.0
    drawn_steps, drawn_values = downsample(steps, values, max_points=1000)
    assert len(drawn_steps) <= 1000
    assert len(drawn_steps) > 900  # two points per bucket, not a handful
    assert (drawn_steps[0], drawn_steps[-1]) == (2, 20_000)
    assert np.all(np.diff(drawn_steps) > 0)
    assert 40.0 in drawn_values.tolist() and -40.0 in drawn_values.tolist()
    assert drawn_steps[drawn_values.tolist().index(40.0)] == steps[3_333]
    # Every point drawn is a recorded one, at its own step.
    recorded = dict(zip(steps.tolist(), values.tolist(), strict=True))
    assert all(
        recorded[s] == v for s, v in zip(drawn_steps.tolist(), drawn_values.tolist(), strict=True)
    )


def test_nan_is_not_an_extreme_unless_a_bucket_is_all_nan() -> None:
    values = np.arange(3000, dtype=np.float64)
    values[100:110] = np.nan  # inside a bucket with numbers
    values[2000:2100] = np.nan  # whole buckets of NaN: the gap must still show
    drawn_steps, drawn_values = downsample(np.arange(3000, dtype=np.int64), values, 200)
    assert np.isnan(drawn_values).any()
    for step, value in zip(drawn_steps.tolist(), drawn_values.tolist(), strict=True):
        if np.isnan(value):
            assert 2000 <= step < 2100
    assert np.nanmax(drawn_values) == 2999.0 and np.nanmin(drawn_values) == 0.0


@pytest.mark.parametrize("max_points", [0, 3, -1])
def test_too_few_points_is_refused(max_points: int) -> None:
    with pytest.raises(ValueError, match="max_points must be an int >= 4"):
        downsample(np.arange(10, dtype=np.int64), np.zeros(10), max_points)


def test_arrays_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="one length"):
        downsample(np.arange(10, dtype=np.int64), np.zeros(9))


@given(
    values=arrays(np.float64, st.integers(1, 3000), elements=st.floats(-1e6, 1e6, allow_nan=False)),
    max_points=st.integers(4, 400),
)
def test_the_global_extremes_and_ends_are_always_kept(values: np.ndarray, max_points: int) -> None:
    steps = np.arange(len(values), dtype=np.int64)
    drawn_steps, drawn_values = downsample(steps, values, max_points)
    assert len(drawn_steps) <= max_points
    assert drawn_steps[0] == 0 and drawn_steps[-1] == len(values) - 1
    assert drawn_values.max() == values.max() and drawn_values.min() == values.min()
    assert np.all(np.diff(drawn_steps) > 0)
    assert np.array_equal(values[drawn_steps], drawn_values)
