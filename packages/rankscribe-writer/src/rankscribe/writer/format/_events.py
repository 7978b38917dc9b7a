"""Assembly of Event and LineageEvent payloads straight from wire bytes.

A summary step is an ``Event`` whose ``summary`` holds one ``Value`` per
recorded value. Building it through protobuf message objects costs more than
the rest of a scalar step together, and would copy a large tensor several
times; these functions write the same bytes directly (field order as protobuf
serializes it: by field number). tests/writer/test_events.py proves each one
parses back to the intended message.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from functools import lru_cache

from rankscribe.writer.format._wire import (
    SUMMARY_FILE_VERSION,
    field_key,
    length_delimited,
    varint,
)

_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")
_FLOAT32_MAX = 3.4028234663852886e38

# (field number << 3) | wire type, for the fields written here.
_EVENT_WALL_TIME = b"\x09"  # 1, fixed64
EVENT_STEP_KEY = b"\x10"  # 2, varint
_EVENT_VERSION = b"\x1a"  # 3, length-delimited
_EVENT_GRAPH = b"\x22"  # 4
_EVENT_SUMMARY = b"\x2a"  # 5
_SUMMARY_VALUE = b"\x0a"  # Summary.value = 1
_VALUE_TAG = b"\x0a"  # Value.tag = 1
_VALUE_SCALAR = b"\x1d"  # Value.scalar_value = 3, fixed32
_VALUE_SIMPLE = b"\x15"  # TensorFlow's Value.simple_value = 2, fixed32

# Value oneof fields by plugin (Summary.Value in summary.proto).
VALUE_FIELD = {"image": 4, "tensor": 8, "histogram": 9, "landscape": 10}
# LineageEvent oneof fields by plugin (lineage.proto).
LINEAGE_FIELD = {
    "train_lineage": 6,
    "eval_lineage": 7,
    "dataset_graph": 9,
    "custom_lineage_data": 10,
}


def float32_bytes(value: float) -> bytes:
    """``value`` rounded to float32; beyond float32's range it becomes ±inf, as NumPy does."""
    try:
        return _FLOAT.pack(value)
    except OverflowError:
        if math.isnan(value) or abs(value) <= _FLOAT32_MAX:  # pragma: no cover - defensive
            raise
        return _FLOAT.pack(math.copysign(math.inf, value))


def scalar_value(tag: bytes, value: float) -> bytes:
    """A ``Summary.Value`` holding ``scalar_value``; ``tag`` is UTF-8."""
    body = _VALUE_TAG + varint(len(tag)) + tag + _VALUE_SCALAR + float32_bytes(value)
    return _SUMMARY_VALUE + varint(len(body)) + body


Chunk = bytes | memoryview


def message_value_chunks(tag: bytes, plugin: str, message: list[Chunk]) -> list[Chunk]:
    """:func:`message_value` for a message given in pieces; the pieces are not copied."""
    size = sum(chunk.nbytes if isinstance(chunk, memoryview) else len(chunk) for chunk in message)
    head = _VALUE_TAG + varint(len(tag)) + tag + field_key(VALUE_FIELD[plugin]) + varint(size)
    return [_SUMMARY_VALUE + varint(len(head) + size) + head, *message]


def summary_event_chunks(wall_time: float, step: int, values: list[list[Chunk]]) -> list[Chunk]:
    """:func:`summary_event` for values given in pieces."""
    chunks = [chunk for value in values for chunk in value]
    size = sum(chunk.nbytes if isinstance(chunk, memoryview) else len(chunk) for chunk in chunks)
    head = (
        _EVENT_WALL_TIME
        + _DOUBLE.pack(wall_time)
        + EVENT_STEP_KEY
        + varint(step)
        + _EVENT_SUMMARY
        + varint(size)
    )
    return [head, *chunks]


def message_value(tag: bytes, plugin: str, message: bytes) -> bytes:
    """A ``Summary.Value`` holding a serialized image/tensor/histogram/landscape message."""
    body = (
        _VALUE_TAG
        + varint(len(tag))
        + tag
        + length_delimited(field_key(VALUE_FIELD[plugin]), message)
    )
    return _SUMMARY_VALUE + varint(len(body)) + body


def wall_time_field(wall_time: float, *, tensorboard: bool) -> bytes:
    """An ``Event``'s ``wall_time`` field, which TensorFlow's schema leaves out when zero.

    What comes before its ``step`` field (:data:`EVENT_STEP_KEY` and the step's varint).
    """
    wall = _DOUBLE.pack(wall_time)
    return _EVENT_WALL_TIME + wall if any(wall) or not tensorboard else b""


def _step_varint(step: int) -> bytes:
    return _SMALL_VARINTS[step] if 0 <= step < 128 else varint(step)


def summary_field_head(size: int) -> bytes:
    """The key and length of an ``Event``'s ``summary`` (field 5 in both schemas)."""
    return _EVENT_SUMMARY + varint(size)


def summary_event(wall_time: float, step: int, values: list[bytes]) -> bytes:
    """An ``Event`` with ``summary`` made of already framed ``Summary.value`` entries."""
    summary = b"".join(values)
    return (
        _EVENT_WALL_TIME
        + _DOUBLE.pack(wall_time)
        + EVENT_STEP_KEY
        + varint(step)
        + _EVENT_SUMMARY
        + varint(len(summary))
        + summary
    )


@lru_cache(maxsize=4096)
def _scalar_prefix(tag: str) -> bytes:
    """Everything of a scalar ``Summary.Value`` before its 4 float bytes (fixed per tag)."""
    return scalar_value_prefix(tag, tensorboard=False)


def scalar_value_prefix(tag: str, *, tensorboard: bool) -> bytes:
    """A ``Summary.value`` entry holding ``tag`` and a scalar, less the scalar's 4 float bytes.

    MindSpore's ``scalar_value`` is field 3, TensorFlow's ``simple_value`` field 2; both
    are fixed32, and the rest of the entry is the same in both schemas.
    """
    encoded = tag.encode()
    body_length = 1 + len(varint(len(encoded))) + len(encoded) + 1 + 4
    return (
        _SUMMARY_VALUE
        + varint(body_length)
        + _VALUE_TAG
        + varint(len(encoded))
        + encoded
        + (_VALUE_SIMPLE if tensorboard else _VALUE_SCALAR)
    )


def scalar_event(wall_time: float, step: int, scalars: Iterable[tuple[str, float]]) -> bytes:
    """A step made only of scalars: the common case, kept to one tight loop."""
    summary = b"".join([_scalar_prefix(tag) + float32_bytes(value) for tag, value in scalars])
    return b"".join(
        (
            _EVENT_WALL_TIME,
            _DOUBLE.pack(wall_time),
            EVENT_STEP_KEY,
            _step_varint(step),
            _EVENT_SUMMARY,
            varint(len(summary)),
            summary,
        )
    )


# The one-byte varints of steps 0..127, looked up rather than encoded at every step.
_SMALL_VARINTS = [varint(number) for number in range(128)]


def summary_event_size(values_size: int) -> int:
    """Upper bound of the size of an event whose values take ``values_size`` bytes."""
    return 9 + 11 + 1 + 10 + values_size


def version_event(wall_time: float) -> bytes:
    """The record that opens every summary file."""
    return (
        _EVENT_WALL_TIME
        + _DOUBLE.pack(wall_time)
        + length_delimited(_EVENT_VERSION, SUMMARY_FILE_VERSION.encode())
    )


def graph_event(wall_time: float, step: int, graph: bytes) -> bytes:
    """An ``Event`` holding a serialized ``GraphProto`` in ``graph_def``."""
    return (
        _EVENT_WALL_TIME
        + _DOUBLE.pack(wall_time)
        + EVENT_STEP_KEY
        + varint(step)
        + length_delimited(_EVENT_GRAPH, graph)
    )


def lineage_event(wall_time: float, plugin: str, message: bytes) -> bytes:
    """A ``LineageEvent``; the original never sets its ``step``."""
    return (
        _EVENT_WALL_TIME
        + _DOUBLE.pack(wall_time)
        + length_delimited(field_key(LINEAGE_FIELD[plugin]), message)
    )
