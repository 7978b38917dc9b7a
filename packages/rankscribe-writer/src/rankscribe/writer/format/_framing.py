"""Record framing shared by summary and lineage files (identical to TFRecord).

Each record on disk is::

    u64 LE   payload length n
    u32 LE   masked CRC-32C of those 8 length bytes
    n bytes  payload (one serialized protobuf message)
    u32 LE   masked CRC-32C of the payload

There is no file header, footer, padding or index: a file is its records back
to back, so a record costs exactly ``len(payload) + 16`` bytes.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from crc32c import crc32c as _crc32c_value

from rankscribe.ranks.files import open_regular
from rankscribe.writer._arguments import check_bool, check_path
from rankscribe.writer.errors import CorruptRecordError
from rankscribe.writer.format._crc import mask, masked_crc32c

HEADER_SIZE = 12
FOOTER_SIZE = 4
RECORD_OVERHEAD = HEADER_SIZE + FOOTER_SIZE

#: The largest payload a record can hold: one protobuf message is at most 2 GiB - 1 bytes,
#: so no writer ever framed a longer one and a longer length field is damage.
MAX_PAYLOAD_SIZE = 2_147_483_647

# A payload is read in pieces of at most this size, so that a length field larger than what
# the file (or a stream of unknown size) still holds never allocates more than is there.
_READ_CHUNK = 16 << 20

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")


def frame_parts(payload: bytes) -> tuple[bytes, bytes]:
    """Return the (header, footer) that surround ``payload`` on disk.

    Kept apart from the payload so that a large payload is written without
    being copied into a new buffer first. The mask is inlined: this runs once
    per record, and per-call overhead is most of a small record's cost.
    """
    length = _LENGTH.pack(len(payload))
    crc = _crc32c_value(length)
    length_crc = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    crc = _crc32c_value(payload)
    payload_crc = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    return length + _CRC.pack(length_crc), _CRC.pack(payload_crc)


def frame_many(payloads: list[bytes]) -> bytearray:
    """Every payload framed, back to back: what :func:`frame_parts` gives each, in one
    buffer (a batch of small events, the collector's kept timings).

    Payloads of one length share their header (the length and its checksum, made once),
    so each costs one checksum of its own bytes.
    """
    framed = bytearray()
    headers: dict[int, bytes] = {}
    pack = _CRC.pack
    for payload in payloads:
        size = len(payload)
        header = headers.get(size)
        if header is None:
            header, footer = frame_parts(payload)
            headers[size] = header
        else:
            footer = pack(mask(_crc32c_value(payload)))
        framed += header
        framed += payload
        framed += footer
    return framed


def chunk_size(chunk: bytes | bytearray | memoryview) -> int:
    return chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)


def frame_chunks(chunks: list[bytes | memoryview]) -> tuple[int, bytes, bytes]:
    """Like :func:`frame_parts` for a payload given in pieces: (length, header, footer).

    A large payload (a tensor) is assembled as pieces that point into the
    array's memory; checksumming them one after another spares the copy that
    joining them first would cost.
    """
    total = sum(chunk_size(chunk) for chunk in chunks)
    length = _LENGTH.pack(total)
    crc = 0
    for chunk in chunks:
        crc = _crc32c_value(chunk, value=crc)
    return total, length + _CRC.pack(mask(_crc32c_value(length))), _CRC.pack(mask(crc))


def frame(payload: bytes) -> bytes:
    """Return ``payload`` framed as one record."""
    header, footer = frame_parts(payload)
    return header + payload + footer


@dataclass(frozen=True)
class TornTail:
    """An incomplete last record: what a crash in the middle of a write leaves."""

    offset: int
    reason: str


@dataclass(frozen=True)
class RawRecord:
    """One framed record as found in a file."""

    offset: int
    payload: bytes

    @property
    def record_length(self) -> int:
        return len(self.payload) + RECORD_OVERHEAD


class RecordReader:
    """Iterate the records of one file, checking both CRCs of each.

    An incomplete record at the end of the file (the writer died mid-write) ends
    the iteration and is reported in :attr:`torn_tail`, never raised: every
    record before it is still returned. Damage before the end raises
    :class:`CorruptRecordError` when ``strict``; otherwise the reader reports it
    in :attr:`corruptions` and stops, since without a valid length the next
    record boundary is unknown.
    """

    def __init__(self, source: str | os.PathLike[str] | BinaryIO, *, strict: bool = True) -> None:
        if not callable(getattr(source, "read", None)):  # a stream is read as it is
            check_path("source", source, owner="RecordReader")
        check_bool("strict", strict, owner="RecordReader")
        self._source = source
        self._strict = strict
        self.torn_tail: TornTail | None = None
        self.corruptions: list[CorruptRecordError] = []

    @property
    def name(self) -> str:
        if isinstance(self._source, (str, os.PathLike)):
            return os.fspath(self._source)
        return str(getattr(self._source, "name", "<stream>"))

    def __iter__(self) -> Iterator[RawRecord]:
        if isinstance(self._source, (str, os.PathLike)):
            # A regular file only, never waiting on a FIFO named like an event file; the
            # name is the caller's (listings skip links), so a link given is followed.
            with open_regular(self._source, follow_link=True) as stream:
                yield from self._records(stream)
        else:
            yield from self._records(self._source)

    def _records(self, stream: BinaryIO) -> Iterator[RawRecord]:
        offset = 0
        while True:
            header = stream.read(HEADER_SIZE)
            if not header:
                return
            if len(header) < HEADER_SIZE:
                self.torn_tail = TornTail(offset, f"{len(header)} of {HEADER_SIZE} header bytes")
                return
            length_bytes = header[:8]
            if _CRC.unpack_from(header, 8)[0] != masked_crc32c(length_bytes):
                self._corrupt(offset, "length CRC mismatch", stream)
                return
            (length,) = _LENGTH.unpack(length_bytes)
            if length > MAX_PAYLOAD_SIZE:
                self._corrupt(
                    offset,
                    f"length field {length:,} exceeds the largest record payload "
                    f"({MAX_PAYLOAD_SIZE:,} bytes)",
                    stream,
                )
                return
            body = _read_at_most(stream, length + FOOTER_SIZE)
            if len(body) < length + FOOTER_SIZE:
                self.torn_tail = TornTail(
                    offset, f"{len(body)} of {length + FOOTER_SIZE} payload bytes"
                )
                return
            payload = body[:length]
            if _CRC.unpack_from(body, length)[0] != masked_crc32c(payload):
                if self._corrupt(offset, "payload CRC mismatch", stream):
                    return
                offset += length + RECORD_OVERHEAD
                continue
            yield RawRecord(offset, payload)
            offset += length + RECORD_OVERHEAD

    def _corrupt(self, offset: int, reason: str, stream: BinaryIO) -> bool:
        """Record or raise a corruption; return True when reading must stop."""
        error = CorruptRecordError(self.name, offset, reason)
        if self._strict:
            raise error
        self.corruptions.append(error)
        # A bad payload CRC still leaves a trustworthy length, so the next
        # record can be found; a bad length CRC cannot be stepped over.
        return reason.startswith("length")


def _read_at_most(stream: BinaryIO, size: int) -> bytes:
    """Read ``size`` bytes, or fewer at the end of the stream, never allocating past its end."""
    if size <= _READ_CHUNK:
        return stream.read(size)
    pieces: list[bytes] = []
    left = size
    while left > 0:
        piece = stream.read(min(left, _READ_CHUNK))
        if not piece:
            break
        pieces.append(piece)
        left -= len(piece)
    return b"".join(pieces)


def read_records(
    source: str | os.PathLike[str] | BinaryIO, *, strict: bool = True
) -> Iterator[bytes]:
    """Yield the payload of every complete record in ``source`` (arguments checked now)."""
    reader = RecordReader(source, strict=strict)
    return (record.payload for record in reader)
