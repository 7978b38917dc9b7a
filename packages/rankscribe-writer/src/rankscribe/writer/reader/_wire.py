"""The shape of one scalar event, read straight off the protobuf wire format.

:func:`scalar_template` walks the bytes of one serialized ``Event`` (MindSpore's
summary schema or TensorBoard's) without building a message, and returns a
:class:`Template`: where its step and its scalar numbers lie, and which bytes
any other record must share with it to have the same shape. Records of the same
shape (every step of a training loop writes one) are then read together with
NumPy (see ``_record_groups.py``), and docs/reading.md says why that is exact.

The walk accepts only what it fully understands: the fields of the schema with
their declared wire types, each singular field at most once, at most one member
of each oneof, canonical keys and lengths, and (TensorBoard's proto3 strings)
text that is UTF-8. Anything else — a graph, an image, a histogram, an unknown
field, a tensor it cannot read as one number — returns ``None``, and the record
is read by protobuf instead. So a record the walk accepts is one protobuf parses
without error, to the same values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

# Wire types (protobuf encoding).
_VARINT = 0
_FIXED64 = 1
_LENGTH_DELIMITED = 2
_FIXED32 = 5

# TensorBoard DataType numbers whose one-element tensors are read here; the
# others (half, integers, ...) are left to protobuf.
_DT_FLOAT = 1
_DT_DOUBLE = 2

_VARINT_MAX_BYTES = 10


class Schema(Enum):
    """Which ``Event`` a file holds: MindSpore's summary (proto2) or TensorBoard's (proto3)."""

    SUMMARY = "summary"
    TENSORBOARD = "tensorboard"


@dataclass(frozen=True)
class ScalarSlot:
    """One number of the event: the ``position``-th value, ``width`` bytes at ``offset``.

    ``tensor`` marks TensorBoard's tensor form, which is a scalar only when the
    tag's first metadata names the ``scalars`` plugin.
    """

    tag: bytes
    position: int
    offset: int
    width: int
    tensor: bool


@dataclass(frozen=True)
class MetadataSlot:
    """TensorBoard: the ``position``-th value carries metadata naming ``plugin``."""

    tag: bytes
    position: int
    plugin: bytes


@dataclass(frozen=True)
class Template:
    """The shape of one record: what every record of that shape shares with it.

    A record of the same length has this shape when ``record & mask ==
    expected`` bytewise. ``mask`` is 0xFF on every byte that decides the walk
    (keys, lengths, text), 0x80 on the bytes of the step (their continuation
    bits fix where the varint ends) and 0 on bytes that may differ freely
    (wall time, the numbers, opaque ``bytes`` fields).
    """

    length: int
    mask: bytes
    expected: bytes
    step: tuple[int, int] | None
    scalars: tuple[ScalarSlot, ...]
    metadata: tuple[MetadataSlot, ...]


class _UnusualError(Exception):
    """The record is outside what the walk reads; protobuf reads it instead."""


class _Walk:
    def __init__(self, data: bytes, schema: Schema) -> None:
        self.data = data
        self.schema = schema
        self.mask = bytearray(b"\xff" * len(data))
        self.step: tuple[int, int] | None = None
        self.scalars: list[ScalarSlot] = []
        self.metadata: list[MetadataSlot] = []

    # -- primitives -------------------------------------------------------

    def varint(self, position: int, end: int) -> tuple[int, int]:
        """Any varint protobuf accepts (up to 10 bytes, truncated to 64 bits)."""
        data = self.data
        result = 0
        for index in range(_VARINT_MAX_BYTES):
            if position + index >= end:
                raise _UnusualError
            byte = data[position + index]
            result |= (byte & 0x7F) << (7 * index)
            if byte < 0x80:
                return result & 0xFFFF_FFFF_FFFF_FFFF, position + index + 1
        raise _UnusualError

    def canonical_varint(self, position: int, end: int) -> tuple[int, int]:
        """Keys and lengths: only the shortest encoding, so equal bytes mean equal shape."""
        value, after = self.varint(position, end)
        if after - position > 1 and self.data[after - 1] == 0:
            raise _UnusualError
        return value, after

    def free(self, start: int, stop: int) -> None:
        self.mask[start:stop] = bytes(stop - start)

    def fields(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """(number, wire type, start of value, end of value) of each field, in wire order."""
        found = []
        position = start
        while position < end:
            key, position = self.canonical_varint(position, end)
            number, wire_type = key >> 3, key & 7
            if number == 0:
                raise _UnusualError
            if wire_type == _VARINT:
                _, after = self.varint(position, end)
            elif wire_type == _FIXED64:
                after = position + 8
            elif wire_type == _FIXED32:
                after = position + 4
            elif wire_type == _LENGTH_DELIMITED:
                size, position = self.canonical_varint(position, end)
                after = position + size
            else:
                raise _UnusualError
            if after > end:
                raise _UnusualError
            found.append((number, wire_type, position, after))
            position = after
        return found

    def text(self, start: int, stop: int) -> bytes:
        raw = self.data[start:stop]
        if self.schema is Schema.TENSORBOARD:
            # proto3 strings must be UTF-8; protobuf refuses the record otherwise.
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raise _UnusualError from None
        return raw

    @staticmethod
    def once(
        fields: list[tuple[int, int, int, int]], allowed: dict[int, int]
    ) -> dict[int, tuple[int, int]]:
        """Check every field is known with its wire type and appears once; map number -> span."""
        spans: dict[int, tuple[int, int]] = {}
        for number, wire_type, start, stop in fields:
            if allowed.get(number) != wire_type or number in spans:
                raise _UnusualError
            spans[number] = (start, stop)
        return spans

    # -- messages ---------------------------------------------------------

    def event(self) -> None:
        fields = self.fields(0, len(self.data))
        if self.schema is Schema.SUMMARY:
            allowed = {1: _FIXED64, 2: _VARINT, 3: _LENGTH_DELIMITED, 5: _LENGTH_DELIMITED}
        else:
            allowed = {
                1: _FIXED64,
                2: _VARINT,
                3: _LENGTH_DELIMITED,
                4: _LENGTH_DELIMITED,
                5: _LENGTH_DELIMITED,
            }
        spans = self.once(fields, allowed)
        if sum(number in spans for number in (3, 4, 5)) > 1:  # the `what` oneof
            raise _UnusualError
        if 1 in spans:
            self.free(*spans[1])
        if 2 in spans:
            start, stop = spans[2]
            self.mask[start:stop] = b"\x80" * (stop - start)
            self.step = (start, stop - start)
        if 3 in spans:
            self.text(*spans[3])  # version / file_version: read for its validity only
        if 4 in spans:
            self.free(*spans[4])  # TensorBoard's graph_def is opaque bytes
        if 5 in spans:
            self.summary(*spans[5])

    def summary(self, start: int, end: int) -> None:
        for position, (number, wire_type, value_start, value_end) in enumerate(
            self.fields(start, end)
        ):
            if number != 1 or wire_type != _LENGTH_DELIMITED:
                raise _UnusualError
            if self.schema is Schema.SUMMARY:
                self.summary_value(position, value_start, value_end)
            else:
                self.tensorboard_value(position, value_start, value_end)

    def summary_value(self, position: int, start: int, end: int) -> None:
        spans = self.once(self.fields(start, end), {1: _LENGTH_DELIMITED, 3: _FIXED32})
        tag = self.text(*spans[1]) if 1 in spans else b""
        if 3 in spans:
            number_start, number_stop = spans[3]
            self.free(number_start, number_stop)
            self.scalars.append(ScalarSlot(tag, position, number_start, 4, tensor=False))

    def tensorboard_value(self, position: int, start: int, end: int) -> None:
        spans = self.once(
            self.fields(start, end),
            {
                1: _LENGTH_DELIMITED,
                2: _FIXED32,
                7: _LENGTH_DELIMITED,
                8: _LENGTH_DELIMITED,
                9: _LENGTH_DELIMITED,
            },
        )
        if 2 in spans and 8 in spans:  # two members of the `value` oneof
            raise _UnusualError
        tag = self.text(*spans[1]) if 1 in spans else b""
        if 7 in spans:
            self.text(*spans[7])  # node_name
        if 9 in spans:
            self.metadata.append(MetadataSlot(tag, position, self.summary_metadata(*spans[9])))
        if 2 in spans:
            number_start, number_stop = spans[2]
            self.free(number_start, number_stop)
            self.scalars.append(ScalarSlot(tag, position, number_start, 4, tensor=False))
        if 8 in spans:
            offset, width = self.scalar_tensor(*spans[8])
            self.free(offset, offset + width)
            self.scalars.append(ScalarSlot(tag, position, offset, width, tensor=True))

    def summary_metadata(self, start: int, end: int) -> bytes:
        spans = self.once(
            self.fields(start, end),
            {1: _LENGTH_DELIMITED, 2: _LENGTH_DELIMITED, 3: _LENGTH_DELIMITED, 4: _VARINT},
        )
        for number in (2, 3):  # display_name, summary_description
            if number in spans:
                self.text(*spans[number])
        plugin = b""
        if 1 in spans:
            plugin_spans = self.once(
                self.fields(*spans[1]), {1: _LENGTH_DELIMITED, 2: _LENGTH_DELIMITED}
            )
            if 1 in plugin_spans:
                plugin = self.text(*plugin_spans[1])
            if 2 in plugin_spans:
                self.free(*plugin_spans[2])  # the plugin's content: opaque bytes
        return plugin

    def scalar_tensor(self, start: int, end: int) -> tuple[int, int]:
        """A float or double tensor of one element: (offset, width) of its number."""
        spans = self.once(
            self.fields(start, end),
            {
                1: _VARINT,
                2: _LENGTH_DELIMITED,
                3: _VARINT,
                4: _LENGTH_DELIMITED,
                5: _LENGTH_DELIMITED,
                6: _LENGTH_DELIMITED,
            },
        )
        if 1 not in spans:
            raise _UnusualError
        dtype, _ = self.varint(spans[1][0], spans[1][1])
        width = {_DT_FLOAT: 4, _DT_DOUBLE: 8}.get(dtype)
        if width is None:
            raise _UnusualError
        if 2 in spans:
            self.check_one_element_shape(*spans[2])
        # Exactly one place holds the number, with exactly one number in it.
        sources = [number for number in (4, 5, 6) if number in spans]
        expected_source = 5 if dtype == _DT_FLOAT else 6
        if len(sources) != 1 or sources[0] not in (4, expected_source):
            raise _UnusualError
        number_start, number_stop = spans[sources[0]]
        if number_stop - number_start != width:
            raise _UnusualError
        return number_start, width

    def check_one_element_shape(self, start: int, end: int) -> None:
        spans: dict[int, tuple[int, int]] = {}
        for number, wire_type, value_start, value_end in self.fields(start, end):
            if number == 2 and wire_type == _LENGTH_DELIMITED:  # dim (repeated)
                dim = self.once(
                    self.fields(value_start, value_end), {1: _VARINT, 2: _LENGTH_DELIMITED}
                )
                if 1 not in dim or self.varint(*dim[1])[0] != 1:
                    raise _UnusualError
                if 2 in dim:
                    self.text(*dim[2])
            elif number == 3 and wire_type == _VARINT and number not in spans:
                spans[number] = (value_start, value_end)
                if self.varint(value_start, value_end)[0] != 0:  # unknown_rank
                    raise _UnusualError
            else:
                raise _UnusualError


def scalar_template(payload: bytes, schema: Schema) -> Template | None:
    """Return the shape of the serialized ``Event`` in ``payload``, or ``None`` if unusual."""
    walk = _Walk(payload, schema)
    try:
        walk.event()
    except _UnusualError:
        return None
    mask = bytes(walk.mask)
    expected = np.frombuffer(payload, dtype=np.uint8) & np.frombuffer(mask, dtype=np.uint8)
    return Template(
        length=len(payload),
        mask=mask,
        expected=expected.tobytes(),
        step=walk.step,
        scalars=tuple(walk.scalars),
        metadata=tuple(walk.metadata),
    )
