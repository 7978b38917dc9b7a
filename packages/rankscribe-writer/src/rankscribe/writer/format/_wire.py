"""Protobuf wire primitives for hand-written encoders, and the version each event file opens with.

Several encoders write protobuf bytes directly instead of building message objects
(an event per step, a tensor's packed floats, the job view's curves): what they share
is here, once: :func:`varint` is the project's one varint encoder. ``docs/file-format.md``
("Payloads", "What goes in each file") has the schemas; :mod:`rankscribe.writer.files`
is the public face of the version strings, :mod:`rankscribe.writer.eventfiles` the
other packages' way to write events.
"""

from __future__ import annotations

from rankscribe.writer._arguments import is_int
from rankscribe.writer.errors import WriterTypeError, WriterValueError

#: ``Event.version`` of the record that opens every summary (``_MS``) file, as
#: MindSpore writes it; MindInsight reads the file without checking it.
SUMMARY_FILE_VERSION = "MindSpore.Event:1"
#: ``Event.file_version`` of the record that opens every TensorBoard file, as
#: TensorFlow's writers state it.
TENSORBOARD_FILE_VERSION = "brain.Event:2"

_INT64_MIN = -(1 << 63)
_U64 = (1 << 64) - 1
_LENGTH_DELIMITED = 2  # wire type of strings, bytes and embedded messages


def varint(value: int) -> bytes:
    """``value`` as a protobuf base-128 varint (the encoding of int64, uint64 and lengths).

    A negative value is an int64 and takes its 64-bit two's complement (10 bytes),
    as protobuf writes it.

    Raises:
        WriterTypeError: ``value`` is not an int (or is a bool).
        WriterValueError: ``value`` is outside [-2**63, 2**64 - 1].
    """
    if type(value) is not int and not is_int(value):
        raise WriterTypeError(f"a varint encodes an int, but got {type(value).__name__}")
    if not _INT64_MIN <= value <= _U64:
        raise WriterValueError(
            f"a varint encodes an int in [-2**63, 2**64 - 1] (int64 or uint64), but got {value}"
        )
    value &= _U64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_key(field_number: int) -> bytes:
    """The key (tag) of a length-delimited field: ``varint(field_number << 3 | 2)``."""
    return varint((field_number << 3) | _LENGTH_DELIMITED)


def length_delimited(key: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its key, the payload's length as a varint, the payload."""
    return key + varint(len(payload)) + payload
