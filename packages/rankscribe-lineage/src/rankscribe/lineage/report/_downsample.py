"""Curves thinned for drawing, with each bucket's minimum and maximum kept.

A browser draws a 10,000-point curve no better than a 1,000-point one on a
chart a few hundred pixels wide, but a plain stride would drop the spikes a
reader looks for (a loss blow-up at one step, one slow step). So the points
are cut into consecutive buckets and each bucket keeps its lowest and its
highest point, in step order: every local extreme the eye could see survives,
and the first and last points are always kept. NaN points are never a
bucket's extreme unless the whole bucket is NaN (then one of them is kept, so
the gap still shows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rankscribe.lineage.report._limits import DEFAULT_MAX_POINTS

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["DEFAULT_MAX_POINTS", "downsample"]


def downsample(
    steps: npt.NDArray[np.int64],
    values: npt.NDArray[np.float64],
    max_points: int = DEFAULT_MAX_POINTS,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """At most ``max_points`` of ``(steps, values)``: each bucket's min and max point.

    ``steps`` are in drawing order (ascending). Curves already short enough
    come back unchanged (as arrays).

    Raises:
        ValueError: ``max_points`` is below 4, or the arrays differ in length.
    """
    if max_points < 4:
        raise ValueError(f"max_points must be an int >= 4, got {max_points!r}")
    steps = np.asarray(steps, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if steps.shape != values.shape or steps.ndim != 1:
        raise ValueError(
            f"steps and values must be 1-D and of one length, got {steps.shape} and {values.shape}"
        )
    size = len(steps)
    if size <= max_points:
        return steps, values
    # The first and last points get buckets of their own, so the curve's ends stay put.
    buckets = (max_points - 2) // 2
    inner = size - 2
    bounds = np.linspace(1, 1 + inner, buckets + 1).astype(np.int64)
    starts, ends = bounds[:-1], bounds[1:]
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    low = np.where(np.isnan(values), np.inf, values)
    high = np.where(np.isnan(values), -np.inf, values)
    lowest = _bucket_argextreme(low, starts, ends, np.minimum)
    highest = _bucket_argextreme(high, starts, ends, np.maximum)
    chosen = np.unique(np.concatenate(([0], lowest, highest, [size - 1])))
    return steps[chosen], values[chosen]


def _bucket_argextreme(
    values: npt.NDArray[np.float64],
    starts: npt.NDArray[np.int64],
    ends: npt.NDArray[np.int64],
    reduce: np.ufunc,
) -> npt.NDArray[np.int64]:
    """Index of each bucket's extreme (its first one on a tie); buckets are contiguous."""
    first, stop = int(starts[0]), int(ends[-1])
    segment = values[first:stop]
    extremes = reduce.reduceat(segment, starts - first)
    bucket_of = np.repeat(np.arange(len(starts)), ends - starts)
    hits = np.flatnonzero(segment == extremes[bucket_of])
    hit_buckets = bucket_of[hits]
    # Hits ascend, so a bucket's first hit is where its bucket number first appears.
    firsts = np.flatnonzero(np.r_[True, hit_buckets[1:] != hit_buckets[:-1]])
    return hits[firsts] + first
