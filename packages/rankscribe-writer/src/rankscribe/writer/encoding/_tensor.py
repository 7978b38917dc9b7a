"""Tensors for the ``tensor`` plugin, and back.

MindInsight shows a tensor from ``float_data`` only, and MindSpore 2.10 wrote every dtype
there as float32 (docs/file-format.md), which loses int32/int64 values above 2**24 and every
float64 digit past float32. RankScribe writes:

* ``dims`` = the shape and ``data_type`` = MindSpore's DataType number of the dtype;
* ``float_data``: the values as float32, exactly as MindSpore writes them, so MindInsight
  still shows the tensor;
* ``raw_data``: the values as little-endian bytes of their own dtype, but only for the
  dtypes float32 cannot hold exactly (int32, uint32, int64, uint64, float64). For the
  others float_data already is exact, and raw_data would only double the size.

:func:`decode_tensor` returns raw_data when it is there, so a RankScribe file gives back
the exact dtype and values. A MindSpore file only has float_data; decoding returns those
float32 values converted to the declared dtype: the float32-rounded values MindSpore
stored (an int64 ``2**40 + 1`` reads back as ``2**40``), with integers clipped to the
dtype's range (an int32 ``2**31 - 1`` was stored as ``2.0**31``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.format._wire import varint
from rankscribe.writer.pb import anf_ir_pb2, tensorboard_pb2

__all__ = [
    "decode_tensor",
    "tensor_data_type",
    "tensor_proto",
    "tensor_proto_bytes",
    "tensor_to_tensorboard",
]

DataType = anf_ir_pb2.DataType
_TensorBoardType = tensorboard_pb2.DataType

# (numpy kind, item size) -> (MindSpore DataType, TensorBoard DataType). The numbers are
# the anf_ir.proto and TensorFlow types.proto enum values.
_DATA_TYPES: dict[tuple[str, int], tuple[anf_ir_pb2.DataType, tensorboard_pb2.DataType]] = {
    ("b", 1): (DataType.DT_BOOL, _TensorBoardType.DT_BOOL),
    ("i", 1): (DataType.DT_INT8, _TensorBoardType.DT_INT8),
    ("i", 2): (DataType.DT_INT16, _TensorBoardType.DT_INT16),
    ("i", 4): (DataType.DT_INT32, _TensorBoardType.DT_INT32),
    ("i", 8): (DataType.DT_INT64, _TensorBoardType.DT_INT64),
    ("u", 1): (DataType.DT_UINT8, _TensorBoardType.DT_UINT8),
    ("u", 2): (DataType.DT_UINT16, _TensorBoardType.DT_UINT16),
    ("u", 4): (DataType.DT_UINT32, _TensorBoardType.DT_UINT32),
    ("u", 8): (DataType.DT_UINT64, _TensorBoardType.DT_UINT64),
    ("f", 2): (DataType.DT_FLOAT16, _TensorBoardType.DT_HALF),
    ("f", 4): (DataType.DT_FLOAT32, _TensorBoardType.DT_FLOAT),
    ("f", 8): (DataType.DT_FLOAT64, _TensorBoardType.DT_DOUBLE),
}
_NUMPY_DTYPES: dict[int, np.dtype[Any]] = {
    DataType.DT_BOOL: np.dtype(np.bool_),
    DataType.DT_INT8: np.dtype(np.int8),
    DataType.DT_INT16: np.dtype(np.int16),
    DataType.DT_INT32: np.dtype(np.int32),
    DataType.DT_INT64: np.dtype(np.int64),
    DataType.DT_UINT8: np.dtype(np.uint8),
    DataType.DT_UINT16: np.dtype(np.uint16),
    DataType.DT_UINT32: np.dtype(np.uint32),
    DataType.DT_UINT64: np.dtype(np.uint64),
    DataType.DT_FLOAT16: np.dtype(np.float16),
    DataType.DT_FLOAT32: np.dtype(np.float32),
    DataType.DT_FLOAT64: np.dtype(np.float64),
}
# The dtypes with values that float32 cannot hold: these also get raw_data.
_NEEDS_RAW_DATA = frozenset(
    {
        DataType.DT_INT32,
        DataType.DT_UINT32,
        DataType.DT_INT64,
        DataType.DT_UINT64,
        DataType.DT_FLOAT64,
    }
)
_ACCEPTED = (
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32 or float64"
)

# Wire tags of TensorProto: field number << 3 | wire type (0 varint, 2 length-delimited).
_TAG_DIMS = b"\x08"  # dims = 1, repeated int64, not packed (proto2 default)
_TAG_DATA_TYPE = b"\x10"  # data_type = 2, enum
_TAG_FLOAT_DATA = b"\x1a"  # float_data = 3, [packed = true]
_TAG_RAW_DATA = b"\x42"  # raw_data = 8, bytes


def tensor_data_type(dtype: npt.DTypeLike) -> int:
    """Return MindSpore's DataType number for a numpy dtype.

    Raises :class:`WriterTypeError` naming the dtype for anything MindSpore has no
    DataType for; histograms accept the same dtypes, so SummaryRecord can call this when
    a tensor or histogram value is added.
    """
    return _data_types(np.dtype(dtype))[0]


def tensor_proto_bytes(array: npt.ArrayLike) -> bytes:
    """Return the serialized ``TensorProto`` of *array*, built without a message object.

    The bytes equal ``tensor_proto(array).SerializeToString()``. Filling ``float_data``
    through python-protobuf converts each value on its own (measured 23 MB/s for 4 MB);
    writing the packed field directly runs at memory speed.
    """
    return b"".join(tensor_proto_parts(array))


def tensor_proto_parts(array: npt.ArrayLike) -> list[bytes | memoryview]:
    """The serialized ``TensorProto`` of *array* as pieces, the big ones views of array memory.

    The writer frames and writes the pieces without joining them, so a float32
    tensor reaches the file without being copied again.
    """
    values = np.asarray(array)
    data_type = _data_types(values.dtype)[0]
    parts: list[bytes | memoryview] = [
        b"".join(_TAG_DIMS + varint(size) for size in values.shape),
        _TAG_DATA_TYPE + varint(data_type),
    ]
    if values.size:
        floats = _float32_values(values, data_type)
        parts += [_TAG_FLOAT_DATA, varint(floats.nbytes), _bytes_view(floats)]
    if data_type in _NEEDS_RAW_DATA:
        raw = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
        parts += [_TAG_RAW_DATA, varint(raw.nbytes), _bytes_view(raw)]
    return parts


def tensor_proto(array: npt.ArrayLike) -> anf_ir_pb2.TensorProto:
    """Return the ``TensorProto`` message of *array* (see the module docstring)."""
    return anf_ir_pb2.TensorProto.FromString(tensor_proto_bytes(array))


def decode_tensor(proto: anf_ir_pb2.TensorProto) -> npt.NDArray[Any]:
    """Return the array a ``TensorProto`` holds, in the dtype its ``data_type`` names.

    Reads ``raw_data`` when present (RankScribe files: exact), else ``float_data``
    (MindSpore files: float32-rounded, see the module docstring). Raises
    :class:`WriterValueError` for a data_type that is not a numeric tensor type, for a
    negative size in ``dims``, or when the number of values does not match ``dims``.
    """
    dtype = _NUMPY_DTYPES.get(proto.data_type)
    if dtype is None:
        raise WriterValueError(
            f"tensor data_type {proto.data_type} ({_data_type_name(proto.data_type)}) is not "
            f"a numeric tensor type; expected one of {_ACCEPTED}"
        )
    shape = tuple(proto.dims)
    if any(size < 0 for size in shape):
        raise WriterValueError(f"tensor dims {list(shape)} hold a negative size")
    expected = math.prod(shape)
    if proto.HasField("raw_data"):
        raw = proto.raw_data
        if len(raw) != expected * dtype.itemsize:
            raise WriterValueError(
                f"tensor raw_data holds {len(raw)} bytes, but dims {list(shape)} of "
                f"{dtype} need {expected * dtype.itemsize}"
            )
        little_endian = np.frombuffer(raw, dtype=dtype.newbyteorder("<"))
        return little_endian.astype(dtype).reshape(shape)
    floats = np.array(proto.float_data, dtype=np.float32)
    if floats.size != expected:
        raise WriterValueError(
            f"tensor float_data holds {floats.size} values, but dims {list(shape)} need {expected}"
        )
    return _from_float32(floats, dtype).reshape(shape)


def tensor_to_tensorboard(array: npt.ArrayLike) -> tensorboard_pb2.TensorProto:
    """Return TensorBoard's ``TensorProto``: dtype, shape and raw little-endian content."""
    values = np.asarray(array)
    tensorboard_type = _data_types(values.dtype)[1]
    shape = tensorboard_pb2.TensorShapeProto(
        dim=[tensorboard_pb2.TensorShapeProto.Dim(size=size) for size in values.shape]
    )
    content = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    return tensorboard_pb2.TensorProto(
        dtype=tensorboard_type,
        tensor_shape=shape,
        tensor_content=content.tobytes(),
    )


def _data_types(
    dtype: np.dtype[Any],
) -> tuple[anf_ir_pb2.DataType, tensorboard_pb2.DataType]:
    types = _DATA_TYPES.get((dtype.kind, dtype.itemsize))
    if types is None:
        raise WriterTypeError(
            f"tensor value has dtype {dtype}, which has no MindSpore data type; "
            f"expected {_ACCEPTED}"
        )
    return types


def _float32_values(values: npt.NDArray[Any], data_type: int) -> npt.NDArray[np.float32]:
    if data_type in (DataType.DT_INT64, DataType.DT_UINT64):
        # MindSpore passes Python ints to protobuf, which rounds them to float64 and then
        # to float32; rounding twice differs from rounding once for rare values > 2**53.
        values = values.astype(np.float64)
    with np.errstate(over="ignore"):
        # float64 values beyond the float32 range become ±inf, as in MindSpore's files.
        return np.ascontiguousarray(values, dtype="<f4")


def _from_float32(floats: npt.NDArray[np.float32], dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    if dtype.kind == "f":
        return floats.astype(dtype)
    if dtype.kind == "b":
        return np.not_equal(floats, 0)
    info = np.iinfo(dtype)
    values = np.nan_to_num(floats.astype(np.float64), nan=0.0)
    # 2**bits (or 2**(bits-1)) is exactly representable, unlike info.max.
    too_high = values >= 2.0 ** (info.bits - (1 if info.min < 0 else 0))
    too_low = values < float(info.min)
    with np.errstate(invalid="ignore"):
        result = values.astype(dtype)
    result[too_high] = info.max
    result[too_low] = info.min
    return result


def _data_type_name(number: int) -> str:
    try:
        return DataType.Name(number)
    except ValueError:
        return "unknown"


def _bytes_view(array: npt.NDArray[Any]) -> memoryview:
    # A byte view of a C-contiguous array; b"".join copies it once, straight from numpy.
    return memoryview(array.reshape(-1).view(np.uint8).data)
