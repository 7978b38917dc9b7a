"""The records of one payload length in a chunk: read as columns by template, or by protobuf.

The first record is walked byte by byte (``_wire.py``) to give a template: the
bytes that fix its shape and where its step and numbers lie. Every record that
shares those bytes has that shape, so its numbers are read as columns in a few
NumPy operations. A record the walk does not accept (a graph, an image, a
histogram, anything unusual) is parsed by protobuf, as ``reader.scalars``
always did (docs/reading.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError, Message

from rankscribe.writer.errors import CorruptRecordError
from rankscribe.writer.format._framing import HEADER_SIZE, RECORD_OVERHEAD
from rankscribe.writer.pb import summary_pb2, tensorboard_pb2
from rankscribe.writer.reader._curves import Curves, Int64Array, Piece
from rankscribe.writer.reader._record_table import RecordTable
from rankscribe.writer.reader._wire import Schema, Template, scalar_template

# A template that matches fewer than 1 in this many of the records left in its
# group, or this many records in a row that the walk refuses, and the rest of
# the group is parsed by protobuf: a file of all-different records costs no
# more than protobuf would.
_POOR_TEMPLATE = 16
_REFUSALS = 8

# A record longer than this (a graph, a large tensor, thousands of tags in one
# step) is parsed by protobuf: it would share its shape with few others, and
# protobuf's C parser reads long records fast where the walk would not.
_LONGEST_TEMPLATE = 64 << 10

_MESSAGE_TYPES: dict[Schema, type[Message]] = {
    Schema.SUMMARY: summary_pb2.Event,
    Schema.TENSORBOARD: tensorboard_pb2.Event,
}


@dataclass
class FileRead:
    path: Path
    schema: Schema
    strict: bool
    curves: Curves
    first_ordinal: int
    read: int = 0  # records parsed without error, for the torn-tail message

    @property
    def message_type(self) -> type[Message]:
        return _MESSAGE_TYPES[self.schema]

    def error(self, offset: int, reason: str) -> CorruptRecordError:
        return CorruptRecordError(os.fspath(self.path), offset, reason)


def parse_records(
    file: FileRead, buffer: bytearray, base: int, table: RecordTable, ordinals: Int64Array
) -> list[CorruptRecordError]:
    """Read the scalars of the records in ``table``; return those protobuf refused.

    ``buffer`` ends in at least 8 zeros past the records (see :func:`_fill`).
    """
    if not table.offsets.size:
        return []
    starts = table.offsets + HEADER_SIZE
    lengths = table.lengths
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
    errors: list[CorruptRecordError] = []
    for group in np.split(order, bounds):
        length = int(lengths[group[0]])
        group_errors = _Group(file, buffer, base, length, starts[group], ordinals[group]).read()
        errors.extend(group_errors)
    file.read += table.offsets.size - len(errors)
    file.curves.flush_singles()
    return errors


class _Group:
    """The records of one payload length within a chunk (see the module docstring)."""

    def __init__(
        self,
        file: FileRead,
        buffer: bytearray,
        base: int,
        length: int,
        starts: Int64Array,
        ordinals: Int64Array,
    ) -> None:
        self.file = file
        self.buffer = buffer
        self.base = base
        self.length = length
        self.starts = starts
        self.ordinals = ordinals
        self.errors: list[CorruptRecordError] = []

    def read(self) -> list[CorruptRecordError]:
        if self.length == 0:
            return []  # an empty Event: valid, and without scalars
        if self.length > _LONGEST_TEMPLATE:
            for index in range(self.starts.size):
                self._single(index)
            return self.errors
        width = (self.length + 7) // 8 * 8
        words = self._rows(width)
        left = np.arange(self.starts.size)
        refusals = 0
        while left.size:
            first = int(left[0])
            start = int(self.starts[first])
            payload = bytes(self.buffer[start : start + self.length])
            template = scalar_template(payload, self.file.schema)
            if template is None:
                self._single(first)
                left = left[1:]
                refusals += 1
                if refusals >= _REFUSALS:
                    break
                continue
            candidates = words if left.size == self.starts.size else words[left]
            matches = _matches(candidates, template, width)
            if not matches[0]:  # cannot happen: a record has its own shape; never loop on it
                self._single(first)
                left = left[1:]
                continue
            refusals = 0
            matched = int(np.count_nonzero(matches))
            if matched == left.size:
                self._emit(template, candidates, self.ordinals[left])
            else:
                self._emit(template, candidates[matches], self.ordinals[left[matches]])
            left = left[~matches]
            if matched * _POOR_TEMPLATE < left.size:
                break
        for index in left.tolist():
            self._single(index)
        return self.errors

    def _rows(self, width: int) -> npt.NDArray[np.uint64]:
        """The group's records as rows of ``width // 8`` words (a view when they run back to back).

        Records are at least a record apart, so first and last exactly that far
        apart means every one is: a training loop's steps, read without a copy.
        """
        count = self.starts.size
        stride = self.length + RECORD_OVERHEAD
        first = int(self.starts[0])
        if int(self.starts[-1]) - first == stride * (count - 1):
            return np.ndarray(
                (count, width // 8),
                dtype="<u8",
                buffer=self.buffer,
                offset=first,
                strides=(stride, 8),
            )
        windows = np.ndarray(
            (len(self.buffer) - width + 1,),
            dtype=np.dtype((np.void, width)),
            buffer=self.buffer,
            offset=0,
            strides=(1,),
        )
        return windows[self.starts].view("<u8").reshape(count, width // 8)

    def _emit(self, template: Template, rows: npt.NDArray[np.uint64], ordinals: Int64Array) -> None:
        curves = self.file.curves
        cells = rows.view(np.uint8)  # (rows, width) bytes, whatever the rows' stride
        steps = _steps(cells, template.step)
        for metadata in template.metadata:
            tag = curves.name(metadata.tag, self.file.path)
            if tag is not None:
                curves.add_metadata(tag, int(ordinals[0]), metadata.position, metadata.plugin)
        for slot in template.scalars:
            tag = curves.name(slot.tag, self.file.path)
            if tag is None:
                continue
            dtype = "<f4" if slot.width == 4 else "<f8"
            number = cells[:, slot.offset : slot.offset + slot.width].view(dtype)
            # A signalling NaN widens to a quiet one, as in protobuf's float
            # conversion; NumPy would warn of it ("invalid value"), which a
            # program running with warnings as errors would not survive.
            with np.errstate(invalid="ignore"):
                values = number[:, 0].astype(np.float64)
            store = curves.tensor_points if slot.tensor else curves.points
            store.setdefault(tag, []).append(Piece(ordinals, slot.position, steps, values))

    def _single(self, index: int) -> None:
        """Parse one record with protobuf, as ``reader.scalars`` always did."""
        start = int(self.starts[index])
        payload = bytes(self.buffer[start : start + self.length])
        file = self.file
        try:
            event = file.message_type.FromString(payload)
        except (DecodeError, UnicodeDecodeError) as exc:
            self.errors.append(
                file.error(
                    self.base + start - HEADER_SIZE,
                    f"payload of {len(payload)} bytes is not a valid "
                    f"{file.message_type.DESCRIPTOR.full_name}: {exc}",
                )
            )
            return
        if event.WhichOneof("what") != "summary":
            return
        ordinal = int(self.ordinals[index])
        step = event.step  # type: ignore[attr-defined]
        for position, value in enumerate(event.summary.value):  # type: ignore[attr-defined]
            which = value.WhichOneof("value")
            if file.schema is Schema.SUMMARY:
                if which == "scalar_value":
                    tag = file.curves.name(value.tag, file.path)
                    if tag is not None:
                        file.curves.add_single(
                            tag, ordinal, position, step, value.scalar_value, tensor=False
                        )
                continue
            self._single_tensorboard_value(value, ordinal, position, step, start)

    def _single_tensorboard_value(
        self,
        value: tensorboard_pb2.Summary.Value,
        ordinal: int,
        position: int,
        step: int,
        start: int,
    ) -> None:
        curves = self.file.curves
        tag = curves.name(value.tag, self.file.path)
        if tag is None:
            return
        if value.HasField("metadata"):
            plugin = value.metadata.plugin_data.plugin_name.encode()
            curves.add_metadata(tag, ordinal, position, plugin)
        which = value.WhichOneof("value")
        if which == "simple_value":
            curves.add_single(tag, ordinal, position, step, value.simple_value, tensor=False)
        elif which == "tensor":
            number = tensor_number(value.tensor)
            if number is None:
                where = f"{self.file.path} at byte {self.base + start - HEADER_SIZE}"
                curves.unreadable.setdefault(tag, []).append(where)
            else:
                curves.add_single(tag, ordinal, position, step, number, tensor=True)


def _matches(rows: npt.NDArray[np.uint64], template: Template, width: int) -> npt.NDArray[np.bool_]:
    padding = bytes(width - template.length)
    mask = np.frombuffer(template.mask + padding, dtype="<u8")
    expected = np.frombuffer(template.expected + padding, dtype="<u8")
    differences = rows ^ expected
    differences &= mask
    return np.asarray(np.bitwise_or.reduce(differences, axis=1) == 0)


def _steps(cells: npt.NDArray[np.uint8], step: tuple[int, int] | None) -> Int64Array:
    if step is None:
        return np.zeros(cells.shape[0], dtype=np.int64)  # no step on the wire reads as 0
    offset, size = step
    result = np.zeros(cells.shape[0], dtype=np.uint64)
    for index in range(size):
        byte = cells[:, offset + index]
        # The tenth byte adds only bit 63: protobuf truncates a varint to 64 bits.
        result |= (byte & np.uint8(0x7F)).astype(np.uint64) << np.uint64(7 * index)
    # Two's complement: a step of 2**63-1 stays that number, never a float on the way.
    return result.view(np.int64)


# TensorBoard DataType -> the NumPy type of its tensor_content.
_CONTENT_TYPES = {
    1: "<f4",
    2: "<f8",
    3: "<i4",
    4: "u1",
    5: "<i2",
    6: "i1",
    9: "<i8",
    10: "?",
    17: "<u2",
    19: "<f2",
    22: "<u4",
    23: "<u8",
}
_BFLOAT16 = 14


def tensor_number(tensor: tensorboard_pb2.TensorProto) -> float | None:
    """The one number a TensorBoard tensor holds, as TensorBoard's scalars plugin reads it.

    ``None`` when the tensor holds more or fewer than one number, or numbers of
    a type that is not numeric.
    """
    shape = tensor.tensor_shape
    if shape.unknown_rank or any(dim.size != 1 for dim in shape.dim):
        return None
    dtype = tensor.dtype
    numbers: npt.NDArray[np.generic] | None
    if tensor.tensor_content:
        numbers = _content_numbers(dtype, tensor.tensor_content)
    else:
        numbers = _listed_numbers(tensor)
    return float(numbers[0]) if numbers is not None and numbers.size == 1 else None


def _content_numbers(dtype: int, content: bytes) -> npt.NDArray[np.float64] | None:
    """The numbers of a ``tensor_content``, widened to float64; None when its length is not
    whole items of its dtype (a damaged tensor: skipped, as unreadable) or the dtype is
    not numeric."""
    itemsize = 2 if dtype == _BFLOAT16 else np.dtype(_CONTENT_TYPES.get(dtype, "V1")).itemsize
    if (dtype != _BFLOAT16 and dtype not in _CONTENT_TYPES) or len(content) % itemsize:
        return None
    if dtype == _BFLOAT16:
        raw = np.frombuffer(content, dtype="<u2")
        items: npt.NDArray[Any] = (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
    else:
        items = np.frombuffer(content, dtype=_CONTENT_TYPES[dtype])
    # A signalling NaN widens to a quiet one, as on the fast path and in protobuf's
    # own conversions, never with NumPy's invalid-value warning.
    with np.errstate(invalid="ignore", over="ignore"):
        return items.astype(np.float64)


# TensorBoard DataType -> the repeated field that lists its numbers.
_LISTED_FIELDS = {
    1: "float_val",
    2: "double_val",
    3: "int_val",
    4: "int_val",
    5: "int_val",
    6: "int_val",
    17: "int_val",
    9: "int64_val",
    10: "bool_val",
}


def _listed_numbers(tensor: tensorboard_pb2.TensorProto) -> npt.NDArray[np.float64] | None:
    dtype = tensor.dtype
    if dtype in _LISTED_FIELDS:
        # protobuf widens a listed float to a Python float in C, which marks a signalling
        # NaN as an invalid operation; NumPy reports that mark on its next cast.
        with np.errstate(invalid="ignore"):
            return np.array(getattr(tensor, _LISTED_FIELDS[dtype]), dtype=np.float64)
    if dtype == 19:  # half: the 16 bits of each number, in int32 slots
        with np.errstate(invalid="ignore"):  # a signalling NaN: quiet, as above
            return np.array(tensor.half_val, dtype=np.uint16).view(np.float16).astype(np.float64)
    if dtype == _BFLOAT16:
        raw = np.array(tensor.half_val, dtype=np.uint32) << np.uint32(16)
        with np.errstate(invalid="ignore"):
            return raw.view(np.float32).astype(np.float64)
    return None
