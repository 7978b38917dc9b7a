"""Histogram buckets for the ``histogram`` plugin.

The bucketing rule is MindSpore 2.10's (docs/file-format.md, "What goes in each file"), so that
MindInsight draws the same histogram for the same tensor:

* NaN, +inf and -inf are counted apart; ``count`` is the total number of elements,
  non-finite ones included; min, max and sum cover the finite values only (sum in
  float64). With no finite value, min, max and sum stay unset and there is no bucket.
* The number of buckets depends on the number *v* of finite values: 2 up to 5 values,
  3 up to 10, ``v // 10 + 1`` up to 880 and 90 above.
* The edges split ``[min, max]`` (``[v - 0.5, v + 0.5]`` for a constant tensor) into equal
  parts. Bucket *i* covers ``[edge_i, edge_i+1)``; the last bucket also holds ``max``.

Differences from MindSpore, all of them fixes of data it lost:

* Integer and bool tensors get float64 edges. MindSpore computed the edges in the
  tensor's own dtype, so an int32 tensor got truncated integer edges.
* For float16/float32 tensors the edges are rounded to the tensor's dtype and the widths
  are differences taken in that dtype, exactly as MindSpore writes them (the golden files
  match bit for bit). When that rounding would merge edges or move one by more than a
  quarter of a bucket (a range only a few float32 steps wide), float64 edges are used
  instead; MindSpore wrote zero-width buckets there.
* float64 edges that still cannot be told apart (a range narrower than 90 float64 steps)
  are merged, giving fewer buckets; a constant beyond 2**53, where ±0.5 vanishes, gets
  the neighbouring float64 values as its outer edges. MindSpore wrote equal edges there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.pb import summary_pb2, tensorboard_pb2

__all__ = [
    "MAX_BUCKETS",
    "HistogramData",
    "bucket_count",
    "compute_histogram",
    "histogram_edges",
    "histogram_proto",
    "histogram_to_tensorboard",
    "no_finite_histogram",
]

#: MindInsight rejects histograms with more than 90 buckets; MindSpore caps at 90.
MAX_BUCKETS = 90

# Values are bucketed in blocks of this many elements so that the temporaries of one
# block stay in the CPU cache; measured on 1M float32: 3.1 ms with 2**18, 4.3 ms with
# whole-array temporaries, 5.4 ms for numpy.histogram.
_BLOCK = 1 << 18

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_ACCEPTED_KINDS = "bool, int8-int64, uint8-uint64, float16, float32 or float64"


def bucket_count(finite_count: int) -> int:
    """Return how many buckets MindSpore uses for *finite_count* finite values (0 for none)."""
    if finite_count <= 0:
        return 0
    if finite_count <= 5:
        return 2
    if finite_count <= 10:
        return 3
    if finite_count <= 880:
        return finite_count // 10 + 1
    return MAX_BUCKETS


@dataclass(frozen=True, eq=False)
class HistogramData:
    """A computed histogram, ready to become a MindSpore or a TensorBoard proto.

    ``edges`` has one entry more than ``counts``; ``widths[i]`` is the width written for
    bucket *i* (for float16/float32 tensors a difference taken in that dtype, so it can
    differ from ``edges[i + 1] - edges[i]`` in the last float32 bit). All three are empty
    when there is no finite value.
    """

    count: int
    nan_count: int
    pos_inf_count: int
    neg_inf_count: int
    min: float | None
    max: float | None
    sum: float | None
    edges: npt.NDArray[np.float64]
    widths: npt.NDArray[np.float64]
    counts: npt.NDArray[np.int64]
    sum_squares: float | None = None

    @property
    def finite_count(self) -> int:
        """The number of values that are neither NaN nor infinite."""
        return self.count - self.nan_count - self.pos_inf_count - self.neg_inf_count

    def to_proto(self) -> summary_pb2.Summary.Histogram:
        """Return the ``Summary.Histogram`` message MindInsight reads."""
        proto = summary_pb2.Summary.Histogram(
            count=self.count,
            nan_count=self.nan_count,
            pos_inf_count=self.pos_inf_count,
            neg_inf_count=self.neg_inf_count,
        )
        if self.min is not None and self.max is not None and self.sum is not None:
            proto.min = self.min
            proto.max = self.max
            proto.sum = self.sum
        buckets = proto.buckets
        for left, width, count in zip(
            self.edges[:-1].tolist(), self.widths.tolist(), self.counts.tolist(), strict=True
        ):
            buckets.add(left=left, width=width, count=count)
        return proto

    def to_tensorboard(self) -> tensorboard_pb2.HistogramProto:
        """Return the TensorBoard ``HistogramProto`` of the same buckets.

        TensorBoard keeps right edges (``bucket_limit``) and takes ``min`` as the left edge
        of the first bucket. ``num`` counts the finite values only, so that it equals the
        sum of the bucket counts. ``sum_squares`` is 0 unless it was computed
        (``compute_histogram(..., sum_squares=True)``); TensorBoard does not draw it.
        """
        return tensorboard_pb2.HistogramProto(
            min=self.min or 0.0,
            max=self.max or 0.0,
            num=float(self.finite_count),
            sum=self.sum or 0.0,
            sum_squares=self.sum_squares or 0.0,
            bucket_limit=self.edges[1:].tolist(),
            bucket=self.counts.astype(np.float64).tolist(),
        )


def compute_histogram(array: npt.ArrayLike, *, sum_squares: bool = False) -> HistogramData:
    """Bucket the values of *array* by MindSpore's rule (see the module docstring).

    *sum_squares* also computes the float64 sum of squares of the finite values, which only
    the TensorBoard target writes. Raises :class:`WriterTypeError` for a dtype other than
    bool, integers and float16/32/64.
    """
    values = _flat_numeric(array)
    total = values.size
    if total == 0:
        return _no_finite_values(0, 0, 0, 0)
    low, high = values.min(), values.max()
    nan_count = pos_inf_count = neg_inf_count = 0
    # NaN propagates through min and max, so two finite extremes prove there is no NaN
    # or infinity without a pass over an isfinite mask.
    if math.isfinite(low) and math.isfinite(high):
        finite = values
        with np.errstate(over="ignore"):  # a sum beyond float64 max is inf, as in MindSpore
            total_sum = float(np.sum(values, dtype=np.float64))
    else:
        finite_mask = np.isfinite(values)
        nan_count = int(np.count_nonzero(np.isnan(values)))
        pos_inf_count = int(np.count_nonzero(values == np.inf))
        neg_inf_count = total - nan_count - pos_inf_count - int(np.count_nonzero(finite_mask))
        finite = values[finite_mask]
        if finite.size == 0:
            return _no_finite_values(total, nan_count, pos_inf_count, neg_inf_count)
        low, high = finite.min(), finite.max()
        # MindSpore sums the masked array with the invalid entries set to 0; summing that
        # same sequence keeps pairwise summation, and so the last bits, identical.
        with np.errstate(over="ignore"):
            total_sum = float(np.sum(np.where(finite_mask, values, 0), dtype=np.float64))
    edges, widths, work_dtype = _bucket_edges(
        float(low), float(high), bucket_count(finite.size), values.dtype
    )
    counts = _bucket_counts(finite, edges, work_dtype)
    squares = None
    if sum_squares:
        as_float64 = finite.astype(np.float64)
        squares = float(np.dot(as_float64, as_float64))
    return HistogramData(
        count=total,
        nan_count=nan_count,
        pos_inf_count=pos_inf_count,
        neg_inf_count=neg_inf_count,
        min=float(low),
        max=float(high),
        sum=total_sum,
        edges=edges,
        widths=widths,
        counts=counts,
        sum_squares=squares,
    )


def histogram_edges(
    finite_count: int, low: float, high: float, dtype: npt.DTypeLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The bucket edges and widths for *finite_count* finite values in [*low*, *high*].

    The same edges :func:`compute_histogram` uses for values of *dtype* (the tensor's:
    float16/float32 edges are rounded to it where that is safe, see the module
    docstring), for code that counts the values elsewhere (the collector counts an
    accelerator's tensors on the device, docs/file-format.md, "Histograms of
    accelerator tensors"). Bucket *i* holds ``edges[i] <= v < edges[i + 1]``, the last
    bucket also ``v == edges[-1]``; every edge is exactly representable in float64 and,
    when it was rounded, in *dtype*.
    """
    if finite_count <= 0:
        raise WriterValueError(
            f"a histogram's edges need at least one finite value, got {finite_count}"
        )
    edges, widths, _ = _bucket_edges(
        float(low), float(high), bucket_count(finite_count), np.dtype(dtype)
    )
    return edges, widths


def no_finite_histogram(
    count: int, nan_count: int, pos_inf_count: int, neg_inf_count: int
) -> HistogramData:
    """The histogram of *count* values none of which is finite (no bucket, no min/max/sum)."""
    return _no_finite_values(count, nan_count, pos_inf_count, neg_inf_count)


def histogram_proto(array: npt.ArrayLike | HistogramData) -> summary_pb2.Summary.Histogram:
    """Return the ``Summary.Histogram`` message of *array* (what SummaryRecord writes).

    A :class:`HistogramData` (buckets counted elsewhere) is written as it is.
    """
    if isinstance(array, HistogramData):
        return array.to_proto()
    return compute_histogram(array).to_proto()


def histogram_to_tensorboard(
    histogram: HistogramData | summary_pb2.Summary.Histogram,
) -> tensorboard_pb2.HistogramProto:
    """Convert a histogram to TensorBoard's ``HistogramProto`` (same buckets, right edges).

    A ``Summary.Histogram`` message carries no sum of squares, so ``sum_squares`` is 0 for
    it. The last right edge is ``left + width`` of the last bucket; the others are the
    next bucket's left edge, exactly.
    """
    if isinstance(histogram, HistogramData):
        return histogram.to_tensorboard()
    buckets = histogram.buckets
    limits = [bucket.left for bucket in buckets[1:]]
    if buckets:
        limits.append(buckets[-1].left + buckets[-1].width)
    finite_count = (
        histogram.count - histogram.nan_count - histogram.pos_inf_count - histogram.neg_inf_count
    )
    return tensorboard_pb2.HistogramProto(
        min=histogram.min,
        max=histogram.max,
        num=float(finite_count),
        sum=histogram.sum,
        bucket_limit=limits,
        bucket=[float(bucket.count) for bucket in buckets],
    )


def _flat_numeric(array: npt.ArrayLike) -> npt.NDArray[Any]:
    values = np.asarray(array)
    dtype = values.dtype
    if dtype.kind == "b":
        # bool counts as 0 and 1, without a copy.
        return values.reshape(-1).view(np.uint8)
    if dtype.kind not in "iuf" or (dtype.kind == "f" and dtype.itemsize > 8):
        raise WriterTypeError(
            f"a histogram needs a numeric array ({_ACCEPTED_KINDS}), got dtype {dtype}"
        )
    if not dtype.isnative:
        values = values.astype(dtype.newbyteorder("="))
    return values.reshape(-1)


def _no_finite_values(
    total: int, nan_count: int, pos_inf_count: int, neg_inf_count: int
) -> HistogramData:
    empty = np.empty(0, np.float64)
    return HistogramData(
        count=total,
        nan_count=nan_count,
        pos_inf_count=pos_inf_count,
        neg_inf_count=neg_inf_count,
        min=None,
        max=None,
        sum=None,
        edges=empty,
        widths=empty,
        counts=np.empty(0, np.int64),
    )


def _linspace(first: float, last: float, count: int) -> npt.NDArray[np.float64]:
    # numpy.linspace computes index * step before it stores `last` at the end; near
    # ±1.8e308 that product may overflow, and the range itself may too.
    with np.errstate(over="ignore", invalid="ignore"):
        edges = np.linspace(first, last, count)
        if not np.all(np.isfinite(edges)):
            # Halving is exact at that scale.
            edges = np.linspace(first / 2, last / 2, count) * 2
    return edges


def _bucket_edges(
    low: float, high: float, bins: int, value_dtype: np.dtype[Any]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], np.dtype[Any] | None]:
    """Return (edges, widths, dtype to bucket in) for values in [low, high].

    The dtype is None when the edges are too close together for the even-grid estimate
    of _bucket_counts; those few cases search the edges instead.
    """
    if low == high:
        low, high = low - 0.5, high + 0.5
        if low == high:
            # ±0.5 vanishes beyond 2**53: use the neighbouring float64 values, but never
            # step past ±float64 max.
            low, high = math.nextafter(low, -math.inf), math.nextafter(high, math.inf)
            if math.isinf(low):
                low = math.nextafter(low, 0)
            if math.isinf(high):
                high = math.nextafter(high, 0)
    edges = _linspace(low, high, bins + 1)
    if value_dtype.kind == "f" and value_dtype.itemsize < 8:
        rounded = edges.astype(value_dtype)
        with np.errstate(over="ignore"):
            # MindSpore writes `edge2 - edge1` computed in the tensor's dtype.
            widths = rounded[1:] - rounded[:-1]
        if _rounded_edges_usable(edges, rounded, widths):
            return rounded.astype(np.float64), widths.astype(np.float64), _work_dtype(edges)
    if not np.all(edges[1:] > edges[:-1]):
        edges = np.unique(edges)
    widths = edges[1:] - edges[:-1]
    # The estimate is within one bucket while a bucket is several float64 steps wide.
    magnitude = max(abs(float(edges[0])), abs(float(edges[-1])))
    if float(widths.min()) < 4 * math.ulp(magnitude):
        return edges, widths, None
    return edges, widths, np.dtype(np.float64)


def _rounded_edges_usable(
    edges: npt.NDArray[np.float64], rounded: npt.NDArray[Any], widths: npt.NDArray[Any]
) -> bool:
    if not (bool(np.all(np.isfinite(widths))) and bool(np.all(widths > 0))):
        return False
    # _bucket_counts corrects an estimated bucket by at most one; that needs every edge
    # within half a bucket of its place on the even grid (a quarter, with margin).
    drift = float(np.max(np.abs(rounded.astype(np.float64) - edges)))
    quarter_bucket = (float(edges[-1]) / 4 - float(edges[0]) / 4) / (edges.size - 1)
    return drift <= quarter_bucket


def _work_dtype(edges: npt.NDArray[np.float64]) -> np.dtype[Any]:
    # float32 arithmetic halves the memory traffic; it needs the offsets from the first
    # edge (with a margin for their rounding) and the scale factor to be finite in float32.
    span = float(edges[-1]) - float(edges[0])
    scale = (edges.size - 1) / span
    if span <= _FLOAT32_MAX / 2 and scale <= _FLOAT32_MAX:
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def _bucket_counts(
    values: npt.NDArray[Any], edges: npt.NDArray[np.float64], work_dtype: np.dtype[Any] | None
) -> npt.NDArray[np.int64]:
    """Count the finite *values* per bucket: [edge_i, edge_i+1), the last one closed.

    numpy.histogram with an explicit edge array sorts the data (slow); its uniform fast
    path assumes its own float64 edges. This is that fast path with our edges: estimate
    each bucket from the even grid, then correct it by one against the real edges.
    """
    bins = edges.size - 1
    first, last = float(edges[0]), float(edges[-1])
    factor = 1.0 if math.isfinite(last - first) else 0.5
    scale = bins / (last * factor - first * factor) if last > first else math.inf
    if work_dtype is None or not math.isfinite(scale):
        # Edges too close for the estimate (or a subnormal range): search them instead.
        found = np.searchsorted(edges, values, side="right") - 1
        np.minimum(found, bins - 1, out=found)
        return np.bincount(found, minlength=bins).astype(np.int64)
    lower = edges.astype(work_dtype)
    upper = np.empty(bins + 1, work_dtype)
    upper[:-1] = lower[1:]
    upper[-1] = np.inf  # an estimate of `bins` is the closed end of the last bucket
    origin = work_dtype.type(first * factor)
    scale_in_work_dtype = work_dtype.type(scale)

    counts = np.zeros(bins + 1, np.int64)
    block = min(values.size, _BLOCK)
    converted = np.empty(block, work_dtype)
    estimate = np.empty(block, work_dtype)
    index = np.empty(block, np.intp)
    gathered = np.empty(block, work_dtype)
    outside = np.empty(block, np.bool_)
    for start in range(0, values.size, block):
        chunk = values[start : start + block]
        size = chunk.size
        if chunk.dtype != work_dtype:
            np.copyto(converted[:size], chunk, casting="unsafe")
            chunk = converted[:size]
        est, idx, near, out = estimate[:size], index[:size], gathered[:size], outside[:size]
        if factor == 1.0:
            np.subtract(chunk, origin, out=est)
        else:
            np.multiply(chunk, factor, out=est)
            np.subtract(est, origin, out=est)
        np.multiply(est, scale_in_work_dtype, out=est)
        idx[...] = est  # truncation = floor, since every offset is >= 0
        # Corrections are rare (values within a rounding error of an edge): finding them
        # with any() + flatnonzero costs 0.06 ms per 1M values, adding a mask 0.4 ms.
        np.take(lower, idx, out=near, mode="clip")
        np.less(chunk, near, out=out)
        if out.any():
            idx[np.flatnonzero(out)] -= 1
        np.take(upper, idx, out=near, mode="clip")
        np.greater_equal(chunk, near, out=out)
        if out.any():
            idx[np.flatnonzero(out)] += 1
        counts += np.bincount(idx, minlength=bins + 1)
    counts[bins - 1] += counts[bins]
    return counts[:bins]
