"""Histogram buckets: MindSpore's rule, exact bucketing, and the integer-edge fix."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rankscribe.writer.errors import WriterTypeError
from rankscribe.writer.histograms import (
    MAX_BUCKETS,
    HistogramData,
    bucket_count,
    compute_histogram,
    histogram_proto,
    histogram_to_tensorboard,
)
from rankscribe.writer.pb import summary_pb2

FLOAT_DTYPES = [np.float16, np.float32, np.float64]
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def buckets_of(proto: summary_pb2.Summary.Histogram) -> list[tuple[float, float, int]]:
    return [(b.left, b.width, b.count) for b in proto.buckets]


def present_fields(proto: summary_pb2.Summary.Histogram) -> list[str]:
    return [field.name for field, _ in proto.ListFields()]


# --- hand cases -------------------------------------------------------------------------


def test_constant_int_tensor_gets_half_unit_float_edges_not_truncated_integer_edges():
    # MindSpore wrote (2, 1, 0) and (3, 0, 3): truncated int32 edges.
    proto = histogram_proto(np.array([3, 3, 3], np.int32))
    assert buckets_of(proto) == [(2.5, 0.5, 0), (3.0, 0.5, 3)]
    assert (proto.min, proto.max, proto.sum, proto.count) == (3.0, 3.0, 9.0, 3)


def test_int_tensor_edges_split_the_range_evenly():
    proto = histogram_proto(np.arange(-3, 13, dtype=np.int32).reshape(4, 4))
    # 16 values -> 16 // 10 + 1 = 2 buckets; MindSpore's int32 edges were -3, 4, 12.
    assert buckets_of(proto) == [(-3.0, 7.5, 8), (4.5, 7.5, 8)]
    assert (proto.min, proto.max, proto.sum, proto.count) == (-3.0, 12.0, 72.0, 16)


def test_float32_edges_and_widths_are_float32_values_like_mindspore():
    proto = histogram_proto(np.full(10, 2.5, np.float32))
    edges = np.linspace(2.0, 3.0, 4).astype(np.float32)
    widths = edges[1:] - edges[:-1]  # float32 subtraction, as MindSpore
    assert buckets_of(proto) == [
        (float(edges[0]), float(widths[0]), 0),
        (float(edges[1]), float(widths[1]), 10),
        (float(edges[2]), float(widths[2]), 0),
    ]
    assert buckets_of(proto)[1][0] == 2.3333332538604736


def test_last_bucket_is_closed_and_others_half_open():
    proto = histogram_proto(np.array([0.0, 0.5, 1.0]))
    assert buckets_of(proto) == [(0.0, 0.5, 1), (0.5, 0.5, 2)]


def test_ten_values_get_three_buckets():
    proto = histogram_proto(np.arange(10, dtype=np.float32))
    assert buckets_of(proto) == [(0.0, 3.0, 3), (3.0, 3.0, 3), (6.0, 3.0, 4)]


def test_nan_and_infinities_are_counted_apart_and_left_out_of_min_max_sum():
    values = np.array([np.nan, 1.0, np.inf, -np.inf, 3.0, np.nan, -1.0], np.float32)
    proto = histogram_proto(values)
    assert (proto.nan_count, proto.pos_inf_count, proto.neg_inf_count) == (2, 1, 1)
    assert proto.count == 7
    assert (proto.min, proto.max, proto.sum) == (-1.0, 3.0, 3.0)
    assert sum(b.count for b in proto.buckets) == 3


def test_only_non_finite_values_give_no_buckets_and_no_min_max_sum():
    proto = histogram_proto(np.array([np.nan, np.inf, -np.inf], np.float32))
    assert present_fields(proto) == ["nan_count", "pos_inf_count", "neg_inf_count", "count"]
    assert (proto.nan_count, proto.pos_inf_count, proto.neg_inf_count, proto.count) == (1, 1, 1, 3)


def test_counts_are_on_the_wire_even_when_zero():
    proto = histogram_proto(np.array([1.0, 2.0]))
    assert present_fields(proto) == [
        "buckets",
        "nan_count",
        "pos_inf_count",
        "neg_inf_count",
        "max",
        "min",
        "sum",
        "count",
    ]


def test_empty_array_has_count_zero_and_no_buckets():
    proto = histogram_proto(np.zeros((0, 3), np.float32))
    assert present_fields(proto) == ["nan_count", "pos_inf_count", "neg_inf_count", "count"]
    assert proto.count == 0


def test_bool_counts_as_zero_and_one():
    proto = histogram_proto(np.array([True, False, True, True]))
    assert buckets_of(proto) == [(0.0, 0.5, 1), (0.5, 0.5, 3)]
    assert (proto.min, proto.max, proto.sum) == (0.0, 1.0, 3.0)


@pytest.mark.parametrize(
    ("finite", "buckets"),
    [
        (0, 0),
        (1, 2),
        (5, 2),
        (6, 3),
        (10, 3),
        (11, 2),
        (19, 2),
        (20, 3),
        (880, 89),
        (881, 90),
        (10**6, 90),
    ],
)
def test_bucket_count_follows_mindspore(finite, buckets):
    assert bucket_count(finite) == buckets


def test_a_million_values_get_the_90_bucket_cap():
    values = np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32)
    histogram = compute_histogram(values)
    assert histogram.counts.size == MAX_BUCKETS
    assert int(histogram.counts.sum()) == 1_000_000
    assert histogram.counts.tolist() == np.histogram(values, histogram.edges)[0].tolist()


def test_sum_is_accumulated_in_float64():
    values = np.full(1_000_000, 0.1, np.float32)
    assert histogram_proto(values).sum == pytest.approx(float(np.float32(0.1)) * 1e6, rel=1e-12)


def test_huge_constant_keeps_distinct_edges():
    proto = histogram_proto(np.full(4, 1e20))
    lefts = [b.left for b in proto.buckets]
    assert lefts == sorted(set(lefts))
    assert all(b.width > 0 for b in proto.buckets)
    assert [b.count for b in proto.buckets][-1] == 4


def test_range_wider_than_float64_max_still_has_finite_edges():
    values = np.array([-1.7e308, 0.0, 1.7e308])
    proto = histogram_proto(values)
    assert all(math.isfinite(b.left) and math.isfinite(b.width) for b in proto.buckets)
    assert [b.count for b in proto.buckets] == [1, 2]


def test_float32_range_narrower_than_its_precision_gets_float64_edges():
    # MindSpore's float32 edges would repeat: 1e6 has a float32 spacing of 0.0625.
    values = np.float32(1e6) + np.arange(20, dtype=np.float32) * np.float32(0.0625)
    histogram = compute_histogram(values[:3])
    assert np.all(np.diff(histogram.edges) > 0)
    assert histogram.counts.tolist() == [1, 2]
    wide = compute_histogram(np.repeat(values, 50))  # 1000 values, 90 buckets
    assert wide.counts.size == 90 and np.all(np.diff(wide.edges) > 0)
    assert wide.counts.tolist() == reference_counts(np.repeat(values, 50), wide.edges).tolist()


def test_big_endian_and_strided_input_give_the_same_histogram():
    values = np.random.default_rng(1).standard_normal(301).astype(np.float32)
    expected = histogram_proto(values[::3])
    assert histogram_proto(values.astype(">f4")[::3]) == expected
    assert histogram_proto(values[::3].copy()) == expected


@pytest.mark.parametrize("dtype", [np.complex64, object, np.str_, "datetime64[s]", np.longdouble])
def test_non_numeric_dtype_is_a_type_error_naming_the_dtype(dtype):
    if np.dtype(dtype) == np.dtype(np.float64):
        pytest.skip("longdouble is float64 on this platform")
    values = np.zeros(3, dtype=dtype)
    dtype_name = re.escape(str(values.dtype))
    expected = rf"histogram needs a numeric array \(bool, .*\), got dtype {dtype_name}$"
    with pytest.raises(WriterTypeError, match=expected):
        histogram_proto(values)
    with pytest.raises(TypeError):
        histogram_proto(values)


# --- TensorBoard ------------------------------------------------------------------------


def test_tensorboard_histogram_has_right_edges_and_counts():
    values = np.array([0.0, 1.0, 2.0, 3.0, np.nan])
    histogram = compute_histogram(values, sum_squares=True)
    proto = histogram_to_tensorboard(histogram)
    assert list(proto.bucket_limit) == [1.5, 3.0]
    assert list(proto.bucket) == [2.0, 2.0]
    assert (proto.min, proto.max, proto.num, proto.sum, proto.sum_squares) == (
        0.0,
        3.0,
        4.0,
        6.0,
        14.0,
    )


def test_tensorboard_histogram_from_a_stored_mindspore_message():
    values = np.random.default_rng(2).standard_normal(500)
    histogram = compute_histogram(values)
    from_data = histogram_to_tensorboard(histogram)
    from_message = histogram_to_tensorboard(histogram.to_proto())
    assert list(from_message.bucket) == list(from_data.bucket)
    assert list(from_message.bucket_limit)[:-1] == list(from_data.bucket_limit)[:-1]
    assert list(from_message.bucket_limit)[-1] == pytest.approx(values.max(), rel=1e-15)
    assert (from_message.min, from_message.max, from_message.num, from_message.sum) == (
        from_data.min,
        from_data.max,
        from_data.num,
        from_data.sum,
    )


def test_tensorboard_histogram_without_finite_values_is_empty():
    proto = histogram_to_tensorboard(compute_histogram(np.array([np.nan])))
    assert list(proto.bucket) == [] and proto.num == 0


# --- properties -------------------------------------------------------------------------


def reference_counts(finite: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bucket by searching the edges: [edge_i, edge_i+1), last bucket closed."""
    bins = edges.size - 1
    index = np.searchsorted(edges, finite.astype(np.float64), side="right") - 1
    return np.bincount(np.minimum(index, bins - 1), minlength=bins)


def relative_precision(dtype: np.dtype) -> float:
    """The relative rounding of a width computed in the tensor's dtype (float64 otherwise)."""
    if dtype.kind == "f" and dtype.itemsize < 8:
        return {2: 2.0**-10, 4: 2.0**-23}[dtype.itemsize]
    return 2.0**-52


def check_histogram(values: np.ndarray) -> None:
    histogram = compute_histogram(values)
    proto = histogram.to_proto()
    flat = values.reshape(-1)
    if flat.dtype.kind == "b":
        flat = flat.astype(np.uint8)
    finite_mask = np.isfinite(flat) if flat.dtype.kind == "f" else np.ones(flat.size, bool)
    finite = flat[finite_mask]

    assert proto.count == flat.size
    if flat.dtype.kind == "f":
        assert proto.nan_count == np.count_nonzero(np.isnan(flat))
        assert proto.pos_inf_count == np.count_nonzero(flat == np.inf)
        assert proto.neg_inf_count == np.count_nonzero(flat == -np.inf)
    else:
        assert (proto.nan_count, proto.pos_inf_count, proto.neg_inf_count) == (0, 0, 0)

    if finite.size == 0:
        assert not proto.buckets
        assert not (proto.HasField("min") or proto.HasField("max") or proto.HasField("sum"))
        return
    assert proto.min == float(finite.min()) and proto.max == float(finite.max())
    with np.errstate(over="ignore"):
        expected_sum = float(np.sum(np.where(finite_mask, flat, 0), dtype=np.float64))
    assert proto.sum == expected_sum or (math.isnan(proto.sum) and math.isnan(expected_sum))

    counts = [b.count for b in proto.buckets]
    assert sum(counts) == finite.size
    assert 1 <= len(counts) <= min(MAX_BUCKETS, bucket_count(finite.size))

    edges = histogram.edges
    assert [b.left for b in proto.buckets] == edges[:-1].tolist()
    assert np.all(edges[1:] > edges[:-1])
    assert edges[0] <= finite.min() and finite.max() <= edges[-1]
    # Contiguous: each bucket ends where the next begins, up to the rounding of a width
    # taken in the tensor's dtype.
    precision = relative_precision(flat.dtype)
    for i, bucket in enumerate(proto.buckets):
        assert bucket.width > 0
        scale = max(abs(edges[i]), abs(edges[i + 1]))
        assert abs(bucket.left + bucket.width - edges[i + 1]) <= 2 * precision * scale
    # Every finite value falls in its bucket.
    assert counts == reference_counts(finite, edges).tolist()


@st.composite
def numeric_arrays(draw, max_size=300):
    dtype = draw(st.sampled_from([np.bool_, *INT_DTYPES, *FLOAT_DTYPES]))
    size = draw(st.integers(0, max_size))
    return draw(hnp.arrays(dtype, size))


@given(numeric_arrays())
def test_property_buckets_hold_every_finite_value_once(values):
    check_histogram(values)


@given(numeric_arrays(max_size=1200))
def test_property_large_arrays_hit_the_cap(values):
    check_histogram(values)


@given(hnp.arrays(st.sampled_from(FLOAT_DTYPES), hnp.array_shapes(max_dims=3, max_side=8)))
def test_property_multidimensional_arrays(values):
    check_histogram(values)


@given(
    st.sampled_from([np.float32, np.float64, np.float16]),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.sampled_from([1.0, 1e-3, 1e3, 1e30, 1e-30]),
)
def test_property_values_exactly_on_and_next_to_the_edges(dtype, low, high, magnitude):
    # 900 values -> 90 buckets; the array holds every edge and its two neighbours, where a
    # bucketing estimate is most likely to be off by one.
    info = np.finfo(dtype)
    low, high = sorted((low * magnitude, high * magnitude))
    low, high = np.clip([low, high], info.min, info.max).astype(dtype)
    if not (np.isfinite(low) and np.isfinite(high)):
        return
    edges = np.linspace(float(low), float(high), 91).astype(dtype)
    with np.errstate(over="ignore"):
        near = np.concatenate(
            [edges, np.nextafter(edges, dtype(np.inf)), np.nextafter(edges, dtype(-np.inf))]
        )
    near = near[(near >= low) & (near <= high)]
    filler = np.full(900 - near.size, low, dtype)
    check_histogram(np.concatenate([near, filler, [high]]))


def test_histogram_data_reports_finite_count():
    histogram = compute_histogram(np.array([1.0, np.nan, np.inf]))
    assert isinstance(histogram, HistogramData)
    assert histogram.finite_count == 1
