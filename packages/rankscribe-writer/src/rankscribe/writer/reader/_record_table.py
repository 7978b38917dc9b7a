"""The records of a stretch of file, found and checked in bulk.

:func:`record_table` finds the record boundaries of a buffer read from an event
file, checks both CRCs of every record and says why it stopped, with the same
verdicts and messages as :class:`~rankscribe.writer.files.RecordReader` (framing
in docs/file-format.md). It exists for speed: a file of a million small records
is walked in a few NumPy calls where the records have the same length (a
training loop writes runs of them), and the payload CRCs cost one call each to
the native crc32c package.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from crc32c import crc32c

from rankscribe.writer.format._crc import masked_crc32c
from rankscribe.writer.format._framing import HEADER_SIZE, MAX_PAYLOAD_SIZE, RECORD_OVERHEAD

_LENGTH = struct.Struct("<Q")
_U32 = 0xFFFF_FFFF
_MASK_DELTA = 0xA282EAD8

# After this many records of one length in a row, the next ones are looked for in
# bulk; the first bulk probe covers this many records and doubles while it holds.
_RUN_BEFORE_PROBE = 8
_FIRST_PROBE = 64


@dataclass
class Damage:
    """A damaged record: where and why (the reason text is RecordReader's)."""

    offset: int
    reason: str


@dataclass
class RecordTable:
    """The complete records at the start of a buffer.

    ``offsets`` and ``lengths`` are those of the records whose CRCs hold, in
    file order (offsets are buffer positions). ``damage`` lists the records
    skipped for a payload CRC mismatch and, last, the damage that ended the
    walk, if any. ``stop`` is where the walk stopped; ``stopped_by_damage``
    says the rest of the file cannot be read, ``wanted`` how many bytes from
    ``stop`` the next record needs (0 when ``stop`` is the end of the buffer).
    """

    offsets: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]
    damage: list[Damage] = field(default_factory=list)
    stop: int = 0
    stopped_by_damage: bool = False
    wanted: int = 0


def _overlapping(buffer: bytes | memoryview, dtype: str, width: int) -> npt.NDArray[np.generic]:
    """Every ``width``-byte window of ``buffer`` as one element, so a fancy index gathers them."""
    count = max(len(buffer) - width + 1, 0)
    return np.ndarray((count,), dtype=dtype, buffer=buffer, offset=0, strides=(1,))


def _mask(crcs: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    return (((crcs >> np.uint64(15)) | (crcs << np.uint64(17))) + np.uint64(_MASK_DELTA)) & (
        np.uint64(_U32)
    )


def _boundaries(buffer: bytes | memoryview) -> tuple[list[npt.NDArray[np.int64]], int]:
    """Follow the length fields from the start; return the offsets found and where it stopped.

    The lengths are not trusted yet (their CRCs are checked afterwards); the
    walk only stops where a record would not fit in the buffer.
    """
    size = len(buffer)
    pieces: list[npt.NDArray[np.int64]] = []
    single: list[int] = []
    unpack = _LENGTH.unpack_from
    position = 0
    previous = -1
    same = 0
    probe = _FIRST_PROBE
    while size - position >= HEADER_SIZE:
        (length,) = unpack(buffer, position)
        end = position + length + RECORD_OVERHEAD
        if length > MAX_PAYLOAD_SIZE or end > size:
            break
        single.append(position)
        position = end
        if length != previous:
            previous, same, probe = length, 0, _FIRST_PROBE
            continue
        same += 1
        if same < _RUN_BEFORE_PROBE:
            continue
        # A run: read the next length fields at a fixed stride in one go. The
        # chain is followed exactly as long as every length equals this one.
        stride = length + RECORD_OVERHEAD
        count = min((size - position) // stride, probe)
        if count == 0:
            continue
        lengths = np.ndarray(
            (count,), dtype="<u8", buffer=buffer, offset=position, strides=(stride,)
        )
        equal = lengths == length
        run = count if bool(equal.all()) else int(equal.argmin())
        if run:
            if single:
                pieces.append(np.array(single, dtype=np.int64))
                single = []
            pieces.append(position + stride * np.arange(run, dtype=np.int64))
            position += stride * run
        if run == count:
            probe *= 2
        else:
            same, probe = 0, _FIRST_PROBE
    if single:
        pieces.append(np.array(single, dtype=np.int64))
    return pieces, position


def record_table(buffer: bytes | memoryview) -> RecordTable:
    """Find and check the complete records at the start of ``buffer`` (see :class:`RecordTable`)."""
    pieces, stop = _boundaries(buffer)
    offsets = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    lengths = _overlapping(buffer, "<u8", 8)[offsets].astype(np.int64)
    table = RecordTable(offsets, lengths, stop=stop)

    # Length CRCs: one CRC per distinct length, compared with every header.
    distinct, which = np.unique(lengths, return_inverse=True)
    expected = np.array(
        [masked_crc32c(_LENGTH.pack(int(length))) for length in distinct], dtype=np.uint32
    )
    stored = _overlapping(buffer, "<u4", 4)[offsets + 8]
    bad = np.flatnonzero(stored != expected[which])
    if bad.size:
        # Past a damaged length the boundaries found are guesses: drop them.
        first = int(bad[0])
        table.offsets, table.lengths = offsets[:first], lengths[:first]
        table.stop, table.stopped_by_damage = int(offsets[first]), True
        table.damage.append(Damage(table.stop, "length CRC mismatch"))
    else:
        _classify_stop(buffer, table)

    _check_payloads(buffer, table)
    return table


def _classify_stop(buffer: bytes | memoryview, table: RecordTable) -> None:
    """Say why the walk stopped where it did, in RecordReader's order of checks."""
    left = len(buffer) - table.stop
    if left < HEADER_SIZE:
        table.wanted = HEADER_SIZE if left else 0
        return
    header = buffer[table.stop : table.stop + HEADER_SIZE]
    if struct.unpack_from("<I", header, 8)[0] != masked_crc32c(header[:8]):
        table.stopped_by_damage = True
        table.damage.append(Damage(table.stop, "length CRC mismatch"))
        return
    (length,) = _LENGTH.unpack_from(header)
    if length > MAX_PAYLOAD_SIZE:
        table.stopped_by_damage = True
        table.damage.append(
            Damage(
                table.stop,
                f"length field {length:,} exceeds the largest record payload "
                f"({MAX_PAYLOAD_SIZE:,} bytes)",
            )
        )
        return
    table.wanted = length + RECORD_OVERHEAD


def _check_payloads(buffer: bytes | memoryview, table: RecordTable) -> None:
    """Drop the records whose payload CRC does not hold, noting each as damage."""
    if not table.offsets.size:
        return
    starts = table.offsets + HEADER_SIZE
    ends = starts + table.lengths
    view = memoryview(buffer)
    # map() all the way: no Python frame per record, the CRC call is most of the cost.
    slices = map(slice, starts.tolist(), ends.tolist())
    computed = np.fromiter(
        map(crc32c, map(view.__getitem__, slices)),
        dtype=np.uint64,
        count=starts.size,
    )
    stored = _overlapping(buffer, "<u4", 4)[ends]
    bad = np.flatnonzero(_mask(computed) != stored)
    if not bad.size:
        return
    before_stop = table.damage
    table.damage = [Damage(int(table.offsets[index]), "payload CRC mismatch") for index in bad]
    table.damage.extend(before_stop)
    keep = np.ones(table.offsets.size, dtype=bool)
    keep[bad] = False
    table.offsets, table.lengths = table.offsets[keep], table.lengths[keep]
