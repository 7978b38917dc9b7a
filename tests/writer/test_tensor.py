"""Tensor encoding: float_data for MindInsight, raw_data so that our reader is exact."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rankscribe.writer import SummaryRecord, events

# private: the tensor codec
from rankscribe.writer.encoding._tensor import (
    decode_tensor,
    tensor_data_type,
    tensor_proto,
    tensor_proto_bytes,
    tensor_to_tensorboard,
)
from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.pb import anf_ir_pb2, tensorboard_pb2

DataType = anf_ir_pb2.DataType

# docs/file-format.md: bool->1, int8->2, int16->3, int32->4, int64->5, uint8->6, uint16->7,
# uint32->8, uint64->9, float16->10, float32->11, float64->12.
MINDSPORE_TYPES = [
    (np.bool_, 1),
    (np.int8, 2),
    (np.int16, 3),
    (np.int32, 4),
    (np.int64, 5),
    (np.uint8, 6),
    (np.uint16, 7),
    (np.uint32, 8),
    (np.uint64, 9),
    (np.float16, 10),
    (np.float32, 11),
    (np.float64, 12),
]
NEEDS_RAW = {np.int32, np.uint32, np.int64, np.uint64, np.float64}
TENSORBOARD_TYPES = {
    np.bool_: "DT_BOOL",
    np.int8: "DT_INT8",
    np.int16: "DT_INT16",
    np.int32: "DT_INT32",
    np.int64: "DT_INT64",
    np.uint8: "DT_UINT8",
    np.uint16: "DT_UINT16",
    np.uint32: "DT_UINT32",
    np.uint64: "DT_UINT64",
    np.float16: "DT_HALF",
    np.float32: "DT_FLOAT",
    np.float64: "DT_DOUBLE",
}


def same_values(left: np.ndarray, right: np.ndarray) -> bool:
    """Equal dtype, shape and bits (so NaN payloads and -0.0 count too)."""
    return (
        left.dtype == right.dtype
        and left.shape == right.shape
        and left.tobytes() == np.ascontiguousarray(right).tobytes()
    )


def slow_reference_proto(values: np.ndarray) -> anf_ir_pb2.TensorProto:
    """The same message built field by field through python-protobuf."""
    proto = anf_ir_pb2.TensorProto()
    proto.dims.extend(values.shape)
    proto.data_type = tensor_data_type(values.dtype)
    as_float = values.astype(np.float64) if values.dtype.itemsize == 8 else values
    with np.errstate(over="ignore"):
        proto.float_data.extend(as_float.astype(np.float32).reshape(-1).tolist())
    if values.dtype.type in NEEDS_RAW:
        proto.raw_data = values.astype(values.dtype.newbyteorder("<")).tobytes()
    return proto


@pytest.mark.parametrize(("dtype", "number"), MINDSPORE_TYPES)
def test_data_type_numbers_are_mindsporess(dtype, number):
    assert tensor_data_type(dtype) == number
    assert tensor_proto(np.zeros(2, dtype)).data_type == number


@pytest.mark.parametrize(("dtype", "_number"), MINDSPORE_TYPES)
def test_raw_data_only_where_float32_cannot_hold_the_dtype(dtype, _number):
    proto = tensor_proto(np.ones((2, 3), dtype))
    assert proto.HasField("raw_data") == (dtype in NEEDS_RAW)
    assert list(proto.dims) == [2, 3]
    assert list(proto.float_data) == [1.0] * 6


@pytest.mark.parametrize(
    "dtype", [np.complex64, np.complex128, object, np.str_, np.bytes_, "datetime64[s]", "V4"]
)
def test_unsupported_dtype_is_a_type_error_naming_it_and_the_accepted_ones(dtype):
    values = np.zeros(2, dtype)
    message = (
        rf"tensor value has dtype {re.escape(str(values.dtype))}, which has no MindSpore "
        r"data type; expected bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, "
        r"float16, float32 or float64$"
    )
    for encode in (tensor_proto, tensor_proto_bytes, tensor_to_tensorboard):
        with pytest.raises(WriterTypeError, match=message):
            encode(values)
    with pytest.raises(TypeError):
        tensor_data_type(values.dtype)


def test_int64_beyond_float32_reads_back_exactly_and_shows_rounded():
    values = np.array([0, -7, 2**40 + 1, 2**53 + 1], np.int64)
    proto = tensor_proto(values)
    # float_data is what MindSpore writes and MindInsight shows.
    assert list(proto.float_data) == [0.0, -7.0, 1099511627776.0, 9007199254740992.0]
    assert same_values(decode_tensor(proto), values)


def test_int64_float_data_is_rounded_twice_like_mindspore():
    # protobuf rounds MindSpore's Python int to float64 first: 2**60 + 2**36 + 1 becomes the
    # float32 tie 2**60 + 2**36, which rounds to even; rounding once would give 2**60 + 2**37.
    values = np.array([2**60 + 2**36 + 1], np.int64)
    assert list(tensor_proto(values).float_data) == [2.0**60]
    assert same_values(decode_tensor(tensor_proto(values)), values)


def test_float64_third_reads_back_exactly():
    values = np.array([1 / 3, -1e300, 5e-324])
    proto = tensor_proto(values)
    assert list(proto.float_data) == [float(np.float32(1 / 3)), -math.inf, 0.0]
    assert same_values(decode_tensor(proto), values)


def test_extremes_of_every_integer_dtype_read_back_exactly():
    for dtype, _ in MINDSPORE_TYPES[1:9]:
        info = np.iinfo(dtype)
        values = np.array([info.min, info.max, 0], dtype)
        assert same_values(decode_tensor(tensor_proto(values)), values)


def test_uint64_max():
    values = np.array([np.iinfo(np.uint64).max], np.uint64)
    proto = tensor_proto(values)
    assert list(proto.float_data) == [2.0**64]
    assert same_values(decode_tensor(proto), values)


def test_float16_bool_and_nan_read_back_exactly():
    for values in (
        np.array([[0.5, -2.0], [65504.0, 0.0999]], np.float16),
        np.array([[True, False, True], [False, False, True]]),
        np.array([0.0, -0.0, np.nan, np.inf, -np.inf], np.float32),
    ):
        proto = tensor_proto(values)
        assert not proto.HasField("raw_data")
        assert same_values(decode_tensor(proto), values)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0, 2), ()])
@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.bool_])
def test_empty_and_zero_d_shapes(shape, dtype):
    values = np.zeros(shape, dtype)
    proto = tensor_proto(values)
    assert list(proto.dims) == list(shape)
    assert same_values(decode_tensor(proto), values)


def test_big_endian_and_strided_input():
    values = np.arange(12, dtype=">i8").reshape(3, 4)[:, ::2]
    decoded = decode_tensor(tensor_proto(values))
    assert decoded.dtype == np.dtype(np.int64)
    assert decoded.tolist() == values.tolist()


def test_python_floats_and_lists_are_float64():
    proto = tensor_proto([1.5, 2.5])
    assert proto.data_type == DataType.DT_FLOAT64
    assert decode_tensor(proto).tolist() == [1.5, 2.5]


# --- the serialized form ----------------------------------------------------------------


def test_bytes_equal_the_message_serialized_field_by_field():
    for values in (
        np.arange(300, dtype=np.int64).reshape(3, 100),  # varint lengths of two bytes
        np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32),
        np.array([True, False]),
        np.zeros((0, 4), np.float64),
        np.float16(3.0),
    ):
        expected = slow_reference_proto(np.asarray(values))
        assert tensor_proto_bytes(values) == expected.SerializeToString()
        assert tensor_proto(values) == expected


def test_large_float32_tensor_is_one_packed_field():
    values = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)
    encoded = tensor_proto_bytes(values)
    # dims: tag + 3-byte varint; data_type: 2 bytes; float_data: tag + 4-byte length.
    assert len(encoded) == 4 + 2 + 5 + 4 * (1 << 20)
    assert same_values(decode_tensor(anf_ir_pb2.TensorProto.FromString(encoded)), values)


# --- files written by MindSpore: float_data only ----------------------------------------


def mindspore_proto(dims, data_type, floats) -> anf_ir_pb2.TensorProto:
    return anf_ir_pb2.TensorProto(dims=dims, data_type=data_type, float_data=floats)


def test_mindspore_int64_decodes_to_the_rounded_values_it_stored():
    proto = mindspore_proto([4], DataType.DT_INT64, [0.0, -7.0, 1099511627776.0, 2.0**53])
    decoded = decode_tensor(proto)
    assert decoded.dtype == np.dtype(np.int64)
    assert decoded.tolist() == [0, -7, 2**40, 2**53]


def test_mindspore_integers_rounded_past_the_dtype_range_are_clipped():
    proto = mindspore_proto([2], DataType.DT_INT32, [2.0**31, -(2.0**31)])
    assert decode_tensor(proto).tolist() == [2**31 - 1, -(2**31)]
    proto = mindspore_proto([2], DataType.DT_INT64, [2.0**63, math.inf])
    assert decode_tensor(proto).tolist() == [2**63 - 1, 2**63 - 1]
    proto = mindspore_proto([2], DataType.DT_UINT64, [2.0**64, -1.0])
    assert decode_tensor(proto).tolist() == [2**64 - 1, 0]


def test_mindspore_float64_and_bool():
    proto = mindspore_proto([2], DataType.DT_FLOAT64, [0.1, 2.0])
    decoded = decode_tensor(proto)
    assert decoded.dtype == np.dtype(np.float64)
    assert decoded.tolist() == [float(np.float32(0.1)), 2.0]
    proto = mindspore_proto([1, 3], DataType.DT_BOOL, [1.0, 0.0, 1.0])
    assert decode_tensor(proto).tolist() == [[True, False, True]]


def test_decode_rejects_a_value_count_that_does_not_match_dims():
    short = mindspore_proto([2, 2], DataType.DT_FLOAT32, [1.0, 2.0, 3.0])
    with pytest.raises(WriterValueError, match=r"float_data holds 3 values, but dims \[2, 2\]"):
        decode_tensor(short)
    short = anf_ir_pb2.TensorProto(dims=[3], data_type=DataType.DT_INT64, raw_data=b"\0" * 16)
    with pytest.raises(WriterValueError, match=r"raw_data holds 16 bytes, but dims \[3\] of int64"):
        decode_tensor(short)


@pytest.mark.parametrize("dims", [[-1, -1, 3], [-1, -3], [3, -1, -1]])
def test_decode_rejects_negative_dims_whose_product_matches_the_values(dims):
    # A hostile file: the product of the dims is the count of values (3), but no array
    # has such a shape (numpy's reshape raised a bare ValueError out of every reader).
    raw = anf_ir_pb2.TensorProto(dims=dims, data_type=DataType.DT_FLOAT32, raw_data=b"\0" * 12)
    listed = mindspore_proto(dims, DataType.DT_FLOAT32, [1.0, 2.0, 3.0])
    for proto in (raw, listed):
        with pytest.raises(WriterValueError, match=r"tensor dims \[.*\] hold a negative size"):
            decode_tensor(proto)


@pytest.mark.parametrize(("number", "name"), [(13, "DT_STRING"), (0, "DT_UNDEFINED")])
def test_decode_rejects_non_numeric_data_types(number, name):
    proto = anf_ir_pb2.TensorProto(dims=[1], data_type=number, float_data=[1.0])
    with pytest.raises(WriterValueError, match=rf"data_type {number} \({name}\) is not a numeric"):
        decode_tensor(proto)


# --- TensorBoard ------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "_number"), MINDSPORE_TYPES)
def test_tensorboard_tensor_has_dtype_shape_and_little_endian_content(dtype, _number):
    values = np.arange(6).astype(dtype).reshape(2, 3)
    proto = tensor_to_tensorboard(values.astype(values.dtype.newbyteorder(">")))
    assert proto.dtype == tensorboard_pb2.DataType.Value(TENSORBOARD_TYPES[dtype])
    assert [dim.size for dim in proto.tensor_shape.dim] == [2, 3]
    assert proto.tensor_content == values.astype(values.dtype.newbyteorder("<")).tobytes()


# --- properties -------------------------------------------------------------------------


@given(
    st.sampled_from([dtype for dtype, _ in MINDSPORE_TYPES]).flatmap(
        lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0))
    )
)
def test_property_every_dtype_round_trips_exactly(values):
    proto = tensor_proto(values)
    assert same_values(decode_tensor(proto), values)
    assert proto == slow_reference_proto(values)
    assert tensor_proto_bytes(values) == proto.SerializeToString()


@given(hnp.arrays(st.sampled_from([np.int64, np.uint64]), st.integers(0, 50)))
def test_property_float_data_is_what_mindspore_writes_for_64_bit_integers(values):
    # MindSpore extends float_data with Python ints: rounded to float64, then float32.
    reference = anf_ir_pb2.TensorProto()
    reference.float_data.extend(values.tolist())
    assert list(tensor_proto(values).float_data) == list(reference.float_data)


# Arrays in big-endian byte order (np.load of files written on such machines, FITS,
# ``np.frombuffer(..., '>f4')``) hold ordinary int32/float64/... values and are
# recorded as such.

BIG_ENDIAN = [">i2", ">i4", ">i8", ">u4", ">u8", ">f2", ">f4", ">f8"]


@pytest.mark.parametrize("dtype", BIG_ENDIAN)
def test_a_big_endian_tensor_reads_back_with_its_values(tmp_path, dtype):
    values = np.array([[1, 2, 3], [4, 5, 126]], dtype=dtype)
    with SummaryRecord(tmp_path, export_options={"tensor_format": "npy"}) as record:
        record.add_value("tensor", "weights", values)
        record.record(3)

    [event] = [event for event in events.load_dir(tmp_path, strict=True) if event.what == "summary"]
    [value] = event.values
    assert value.value.dtype == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(value.value, values)
    [exported] = (tmp_path).glob("export_*/tensor/weights_3.npy")
    np.testing.assert_array_equal(np.load(exported), values)
