"""The wire format of one point-to-point message of the MPI backend.

A message is a fixed 32-byte header followed by the encoded payload in chunks:

    header  magic b"RSR1", operation (u8), 3 pad bytes, sequence (u64),
            payload size (u64), chunk size (u64), all little-endian
    chunks  ceil(size / chunk size) MPI messages of MPI.BYTE, in order

MPI counts are C ``int``: one message of more than 2,147,483,647 elements
fails (or silently truncates on old libraries). Encoded objects larger than
that are therefore never sent whole: each chunk is at most ``chunk_size``
bytes, 1 GiB by default, half the limit. MPI keeps messages with the same
source, tag and communicator in order, so the receiver posts one receive per
chunk into consecutive slices of a single buffer.

The sequence number and operation let the receiver notice a rank that called a
different collective at the same point (a program error) instead of
misreading its bytes.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from rankscribe.ranks.errors import CollectiveMismatchError, RanksValueError

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "HEADER_SIZE",
    "MPI_COUNT_LIMIT",
    "Header",
    "Operation",
    "chunk_spans",
]

#: Largest element count of one MPI message (C ``INT_MAX``).
MPI_COUNT_LIMIT = 2**31 - 1
#: Bytes per chunk: 1 GiB, well under the count limit.
DEFAULT_CHUNK_BYTES = 1 << 30

_MAGIC = b"RSR1"
_HEADER = struct.Struct("<4sB3xQQQ")
HEADER_SIZE = _HEADER.size


class Operation(enum.IntEnum):
    """Which collective (and which phase of it) a message belongs to."""

    GATHER = 1
    BCAST = 2
    BARRIER_ARRIVAL = 3
    BARRIER_RELEASE = 4


@dataclass(frozen=True)
class Header:
    """The header in front of every message."""

    operation: Operation
    sequence: int
    size: int
    chunk_size: int

    def pack(self) -> bytes:
        return _HEADER.pack(_MAGIC, self.operation, self.sequence, self.size, self.chunk_size)

    @classmethod
    def unpack(cls, data: bytes | bytearray, source: int) -> Header:
        magic, operation, sequence, size, chunk_size = _HEADER.unpack(bytes(data))
        if magic != _MAGIC or operation not in {member.value for member in Operation}:
            raise CollectiveMismatchError(
                f"rank {source} sent a message that is not a rankscribe.ranks header "
                f"({bytes(data[:8])!r}...): another library uses the same communicator and tag"
            )
        if size and not 0 < chunk_size <= MPI_COUNT_LIMIT:
            raise CollectiveMismatchError(
                f"rank {source} sent a header with chunk size {chunk_size}"
            )
        return cls(Operation(operation), sequence, size, chunk_size)

    def expect(self, operation: Operation, sequence: int, source: int) -> None:
        """Raise :class:`CollectiveMismatchError` unless this header is for that collective."""
        if (self.operation, self.sequence) != (operation, sequence):
            raise CollectiveMismatchError(
                f"rank {source} sent {self.operation.name.lower()} #{self.sequence} while this "
                f"rank is in {operation.name.lower()} #{sequence}: every rank must call every "
                "collective in the same order"
            )


def chunk_spans(size: int, chunk_size: int = DEFAULT_CHUNK_BYTES) -> list[tuple[int, int]]:
    """``(start, stop)`` byte ranges that cut ``size`` bytes into chunks of at most ``chunk_size``.

    Every chunk fits in one MPI message (``stop - start <= MPI_COUNT_LIMIT``).
    """
    if not 0 < chunk_size <= MPI_COUNT_LIMIT:
        raise RanksValueError(
            f"chunk_size must be in 1..{MPI_COUNT_LIMIT:,} (MPI's int count limit), "
            f"got {chunk_size}"
        )
    if size < 0:
        raise RanksValueError(f"size must be >= 0, got {size}")
    return [(start, min(start + chunk_size, size)) for start in range(0, size, chunk_size)]
