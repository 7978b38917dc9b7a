"""Checks and snapshots for ``SummaryRecord.add_value``.

Everything here runs on the caller's (training) thread, so it does only what
must happen there: validate once, with messages that name the argument, the
value and the expected form, and copy the data so that later in-place updates
(weights, buffers) cannot change what gets recorded. Encoding happens later,
off that thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf.message import Message

from rankscribe.writer.deferred import DeferredArray, DeferredValue, device_reader
from rankscribe.writer.encoding._histogram import MAX_BUCKETS, HistogramData
from rankscribe.writer.encoding._image import validate_image_shape
from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.pb import anf_ir_pb2, lineage_pb2, summary_pb2

ARRAY_PLUGINS = ("image", "tensor", "histogram")
SUMMARY_PLUGINS = ("scalar", *ARRAY_PLUGINS, "landscape")
LINEAGE_MESSAGES: dict[str, type[Message]] = {
    "train_lineage": lineage_pb2.TrainLineage,
    "eval_lineage": lineage_pb2.EvaluationLineage,
    "dataset_graph": lineage_pb2.DatasetGraph,
    "custom_lineage_data": lineage_pb2.UserDefinedInfo,
}
# "text" is shown by the TensorBoard target only: the original schema has no text value.
PLUGINS = (*SUMMARY_PLUGINS, "graph", *LINEAGE_MESSAGES, "text")

# One step is one protobuf message, which cannot exceed 2 GiB - 1 bytes.
MAX_STEP_BYTES = 2_147_483_647

_TENSOR_DTYPES = frozenset(
    np.dtype(name)
    for name in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    )
)
# Kinds whose float32 copy is not exact: the tensor also carries its raw bytes.
_RAW_KINDS = frozenset(np.dtype(name) for name in ("int32", "int64", "uint32", "uint64", "float64"))


@dataclass(frozen=True)
class Snapshot:
    """A validated, private copy of one value, with the cost it will have on disk."""

    plugin: str
    tag: str
    data: Any  # float (scalar), np.ndarray, bytes (messages, graph) or str (text)
    encoded_size: int  # upper bound of its serialized size in an event
    memory: int  # bytes held until it is written


def check_plugin(plugin: object) -> str:
    if not isinstance(plugin, str) or plugin not in PLUGINS:
        raise WriterValueError(
            f"For 'SummaryRecord.add_value', the argument 'plugin' must be one of "
            f"{list(PLUGINS)}, but got {plugin!r}."
        )
    return plugin


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise WriterValueError(
            f"For 'SummaryRecord.add_value', the argument 'name' must be a non-empty str, "
            f"but got {name!r}."
        )
    if not name.isascii():
        # Tags are UTF-8 on the wire; a lone surrogate (os.fsdecode of a
        # non-UTF-8 file name) cannot be encoded, and must fail here, not in
        # the writer thread where it would cost the steps queued with it.
        try:
            name.encode()
        except UnicodeEncodeError as error:
            raise WriterValueError(
                f"For 'SummaryRecord.add_value', the argument 'name' must be valid UTF-8 text, "
                f"but got {name!r} ({error.reason} at position {error.start})."
            ) from None
    return name


def snapshot(plugin: str, name: str, value: object) -> Snapshot:
    """Validate ``value`` for ``plugin`` and return a copy that is safe to encode later.

    A :class:`~rankscribe.writer.deferred.DeferredValue` histogram is kept as it is:
    its own copy is under way, and it is checked once resolved (a deferred scalar:
    ``SummaryRecord.add_value``).
    """
    if plugin == "scalar":
        number = scalar(name, value)
        return Snapshot(plugin, name, number, len(name) + 16, 64)
    if plugin in ARRAY_PLUGINS:
        return _array_snapshot(plugin, name, value)
    if plugin in LINEAGE_MESSAGES:
        payload = _message_bytes(plugin, name, value, LINEAGE_MESSAGES[plugin])
        return Snapshot(plugin, name, payload, len(payload) + 32, len(payload))
    if plugin == "landscape":
        payload = _message_bytes(plugin, name, value, summary_pb2.LossLandscape)
        return Snapshot(plugin, name, payload, len(payload) + len(name) + 32, len(payload))
    if plugin == "graph":
        payload = graph_bytes(value)
        return Snapshot(plugin, name, payload, len(payload) + 32, len(payload))
    if not isinstance(value, str):
        raise WriterTypeError(
            f"For 'SummaryRecord.add_value', the value of text '{name}' must be a str, "
            f"but got {type(value).__name__}."
        )
    try:
        size = len(value.encode())
    except UnicodeEncodeError as error:
        raise WriterValueError(
            f"For 'SummaryRecord.add_value', the value of text '{name}' cannot be encoded as "
            f"UTF-8 ({error.reason} at position {error.start})."
        ) from None
    return Snapshot(plugin, name, value, size + len(name) + 64, len(value) + 64)


def deferred_snapshot(plugin: str, name: str, value: DeferredValue) -> Snapshot:
    """The snapshot of a value resolved when its step is encoded (its size: the largest)."""
    if plugin == "scalar":
        return Snapshot(plugin, name, value, len(name) + 16, 64)
    return Snapshot(plugin, name, value, _HISTOGRAM_SIZE + len(name) + 16, MAX_BUCKETS * 24 + 128)


def resolved(snap: Snapshot) -> Snapshot:
    """``snap`` with a deferred value replaced by what it resolves to, checked as
    ``add_value`` checks it (off the training thread: it may wait for a device)."""
    if not isinstance(snap.data, DeferredValue):
        return snap
    return snapshot(snap.plugin, snap.tag, snap.data.resolve())


def scalar(name: str, value: object) -> float:
    """The float a scalar value records: a number, or an array-like holding exactly one."""
    kind = type(value)
    if kind is float:
        return value  # type: ignore[return-value]
    if kind is int:
        try:
            return float(value)  # type: ignore[arg-type]
        except OverflowError:
            raise WriterValueError(
                f"For 'SummaryRecord.add_value', the value of scalar '{name}' is an int too "
                f"large for a float ({len(str(value))} digits)."
            ) from None
    array = to_numpy(value, "scalar", name)
    if array.size != 1:
        raise WriterValueError(
            f"For 'SummaryRecord.add_value', the value of scalar '{name}' must hold exactly "
            f"one element, but got shape {array.shape}."
        )
    return float(array.reshape(-1)[0])


def to_numpy(value: object, plugin: str, name: str) -> np.ndarray:
    """Read ``value`` through NumPy (``__array__``; framework tensors are detached first,
    and one of a dtype NumPy lacks, bfloat16, is read through its ``float()``)."""
    if not isinstance(value, np.ndarray):
        detach = getattr(value, "detach", None)
        if callable(detach):  # torch-style tensors refuse __array__ while they need grad
            value = detach()
            to_cpu = getattr(value, "cpu", None)
            value = to_cpu() if callable(to_cpu) else value
        if isinstance(value, (str, bytes)) or value is None:
            raise _not_numeric(plugin, name, type(value).__name__)
        try:
            value = np.asarray(value)
        except (TypeError, ValueError) as error:
            # A torch-style tensor of a dtype NumPy lacks (bfloat16, float8): as float32,
            # which holds each of its values exactly (the collector's device path does so).
            to_float = getattr(value, "float", None)
            if not callable(to_float):
                raise _not_numeric(plugin, name, type(value).__name__) from error
            try:
                value = np.asarray(to_float())
            except (TypeError, ValueError):
                raise _not_numeric(plugin, name, type(value).__name__) from error
    assert isinstance(value, np.ndarray)
    if value.dtype.kind not in "biuf":
        raise _not_numeric(plugin, name, f"an array of dtype {value.dtype}")
    return value


def _not_numeric(plugin: str, name: str, got: str) -> WriterTypeError:
    return WriterTypeError(
        f"For 'SummaryRecord.add_value', the value of {plugin} '{name}' must be a number or "
        f"an array-like of bool, int or float (NumPy array, tensor, Python number), but got {got}."
    )


# An encoded histogram's upper bound: at most MAX_BUCKETS buckets of three numbers each.
_HISTOGRAM_SIZE = MAX_BUCKETS * 30 + 128


def _array_snapshot(plugin: str, name: str, value: object) -> Snapshot:
    if plugin == "histogram" and isinstance(value, DeferredValue):
        return deferred_snapshot(plugin, name, value)
    if plugin == "histogram" and isinstance(value, HistogramData):
        # Buckets counted elsewhere (an accelerator's tensor, counted on its device,
        # rankscribe.writer.histograms): written as they are.
        return Snapshot(
            plugin, name, value, _HISTOGRAM_SIZE + len(name) + 16, MAX_BUCKETS * 24 + 128
        )
    array = to_numpy(value, plugin, name)
    if not array.dtype.isnative:  # a big-endian int32 is an int32 (rare: one more copy)
        array = array.astype(array.dtype.newbyteorder("="))
    encoded = _encoded_size(plugin, name, array.shape, array.dtype)
    copy = np.array(array, copy=True, order="C")
    return Snapshot(plugin, name, copy, encoded, copy.nbytes + 128)


def _encoded_size(plugin: str, name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> int:
    """The encoded size's upper bound of an image, tensor or histogram of ``shape`` and
    ``dtype`` (a native NumPy dtype of bool, int or float), or a clear error for a value
    the plugin cannot hold: what :func:`snapshot` checks before anything is copied."""
    if not shape:
        raise WriterValueError(
            f"For 'SummaryRecord.add_value', the value of {plugin} '{name}' must have at "
            f"least one dimension, but got a 0-d array; record a single number as a scalar."
        )
    if plugin == "image":
        check_image_shape(name, shape)
        encoded = _image_size(shape)
    elif plugin == "tensor":
        if dtype not in _TENSOR_DTYPES:
            raise WriterTypeError(
                f"For 'SummaryRecord.add_value', the value of tensor '{name}' has dtype "
                f"{dtype}; supported are bool, int8-64, uint8-64, float16, float32 "
                f"and float64."
            )
        encoded = _tensor_size(math.prod(shape), len(shape), dtype)
    else:
        encoded = _HISTOGRAM_SIZE
    encoded += len(name) + 16
    if encoded > MAX_STEP_BYTES:
        raise WriterValueError(
            f"For 'SummaryRecord.add_value', {plugin} '{name}' would take {encoded:,} bytes, "
            f"more than the {MAX_STEP_BYTES:,}-byte limit of one step; it was not recorded."
        )
    return encoded


# Values the host holds already: no device reader is asked about them.
_HOST_TYPES = frozenset({float, int, bool, np.ndarray})


def device_snapshot(plugin: str, name: str, value: object) -> Snapshot | None:
    """The snapshot of a scalar, image, tensor or histogram ``value`` on an accelerator,
    its copy to the host started by the installed device reader
    (``rankscribe.writer.deferred.set_device_reader``) and checked from its shape and
    dtype (:func:`deferred_array_snapshot`); None for a value the host reads at once
    (no reader, or one that leaves it alone)."""
    reader = device_reader[0]
    if reader is None or type(value) in _HOST_TYPES:
        return None
    deferred = reader(value)
    return None if deferred is None else deferred_array_snapshot(plugin, name, deferred)


def deferred_array_snapshot(plugin: str, name: str, value: DeferredArray) -> Snapshot:
    """The snapshot of an array on its way from a device (a summary operator's), checked
    now from its shape and dtype as :func:`snapshot` checks a host array, and resolved
    (checked again, values and all) when its step is encoded."""
    if value.dtype.kind not in "biuf":
        raise _not_numeric(plugin, name, f"an array of dtype {value.dtype}")
    if plugin == "scalar":
        if math.prod(value.shape) != 1:
            raise WriterValueError(
                f"For 'SummaryRecord.add_value', the value of scalar '{name}' must hold "
                f"exactly one element, but got shape {tuple(value.shape)}."
            )
        return deferred_snapshot(plugin, name, value)
    encoded = _encoded_size(plugin, name, tuple(value.shape), value.dtype)
    nbytes = math.prod(value.shape) * value.dtype.itemsize
    return Snapshot(plugin, name, value, encoded, nbytes + 128)


def check_image_shape(name: str, shape: tuple[int, ...]) -> None:
    """Images are NCHW batches with 1 (gray) or 3 (RGB) channels (the rule is _image.py's)."""
    try:
        validate_image_shape(shape)
    except WriterValueError as error:
        raise WriterValueError(
            f"For 'SummaryRecord.add_value', the value of image '{name}' must be a 4-D NCHW "
            f"array with C in (1, 3) and no empty dimension, but got shape {tuple(shape)}."
        ) from error


def _image_size(shape: tuple[int, ...]) -> int:
    count, _, height, width = shape
    columns = min(count, 8)
    rows = math.ceil(count / 8)
    raw = rows * height * (columns * width * 3 + 1)
    # PNG never stores more than the raw pixels plus zlib's stored-block overhead.
    return raw + raw // 1000 + 1024


def _tensor_size(size: int, ndim: int, dtype: np.dtype[Any]) -> int:
    """Upper bound of an encoded TensorProto of ``size`` elements in ``ndim`` dimensions:
    its float32 copy, the raw bytes where needed, the dims."""
    encoded = size * 4 + 32 + 11 * ndim
    if dtype in _RAW_KINDS:
        encoded += size * dtype.itemsize + 11
    return encoded


def _message_bytes(plugin: str, name: str, value: object, expected: type[Message]) -> bytes:
    if not isinstance(value, expected):
        raise WriterTypeError(
            f"For 'SummaryRecord.add_value', the value of {plugin} '{name}' must be a "
            f"{expected.__name__} message, but got {type(value).__name__}."
        )
    return bytes(value.SerializeToString())


def graph_bytes(value: object) -> bytes:
    """Serialized ``GraphProto`` from a GraphProto, a ModelProto, or a serialized ModelProto."""
    if isinstance(value, anf_ir_pb2.GraphProto):
        return bytes(value.SerializeToString())
    if isinstance(value, anf_ir_pb2.ModelProto):
        return bytes(value.graph.SerializeToString())
    if isinstance(value, (bytes, bytearray)):
        model = anf_ir_pb2.ModelProto()
        try:
            model.ParseFromString(bytes(value))
        except Exception as error:
            raise WriterValueError(
                "For 'SummaryRecord.add_value', graph bytes must be a serialized ModelProto: "
                f"{error}"
            ) from error
        return bytes(model.graph.SerializeToString())
    raise WriterTypeError(
        "For 'SummaryRecord.add_value', a graph must be a GraphProto, a ModelProto or the "
        f"bytes of a serialized ModelProto, but got {type(value).__name__}."
    )
