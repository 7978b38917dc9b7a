"""One output stream of framed records, spread over as many files as ``max_file_size`` needs.

A file is created only when its first record arrives (0600 while written, 0400 once
closed, as the original does; 0640 and 0440 group-readable). When the next record would
push the file past ``max_file_size``, the file is closed and a new one is started under
a fresh name, so nothing is dropped; a record that cannot fit even in an empty file is
refused whole. Bytes reach the OS in whole records: after a failed write (a full disk)
the file is cut back to the last complete record that reached it, so what was written
stays readable and the records that fitted are kept; the records after it stay buffered
for the next write (up to ``_RETRY_LIMIT`` bytes), and :attr:`EventFile.lost_records`
counts any that had to be given up.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from collections.abc import Callable

from rankscribe.writer.errors import RecordTooLargeError
from rankscribe.writer.format._framing import (
    RECORD_OVERHEAD,
    chunk_size,
    frame_chunks,
    frame_many,
    frame_parts,
)

logger = logging.getLogger(__name__)

# Records are gathered and handed to the OS in chunks of about this size;
# larger payloads go straight through writev without being copied.
_BUFFER_LIMIT = 1 << 20
_DIRECT_WRITE = 1 << 16
# Records kept for another try after a failed write, at most.
_RETRY_LIMIT = 64 << 20
# Names tried when files of those names exist already (made by another process).
_NAME_ATTEMPTS = 100

# The system calls that put bytes in a file, by name so that tests can give them a disk
# of a chosen size.
_writev = os.writev
_write = os.write

# The length field that starts every framed record (see _framing.py).
_LENGTH = struct.Struct("<Q")


class EventFile:
    """Append framed records to a file, rotating to a new file at ``max_file_size``.

    ``next_path`` names each new file; ``first_payload`` (if given) makes the
    record that opens every file (the summary files' version event).
    """

    def __init__(
        self,
        next_path: Callable[[], str],
        *,
        first_payload: Callable[[], bytes] | None = None,
        max_file_size: int | None = None,
        on_open: Callable[[str], None] | None = None,
        modes: tuple[int, int] = (0o600, 0o400),
    ) -> None:
        self._on_open = on_open
        self._mode_open, self._mode_closed = modes  # while written, once closed
        self._next_path = next_path
        self._first_payload = first_payload
        self._max_file_size = max_file_size
        self._fd: int | None = None
        self._path: str | None = None
        self._size = 0  # bytes handed to the OS in the current file
        self._opening_record: int | None = None  # framed size of the record opening each file
        # Whole framed records only, back to back: after a failed write, where each one ends
        # is read from their length fields (_buffered_record_ends) rather than noted for
        # every record appended, which the writer thread would pay for on every step.
        self._buffer = bytearray()
        # Bytes of the current _write_all that reached the file before it failed.
        self._partial = 0
        # Buffer size at which append hands the buffer over; raised after a failed write so
        # that a full disk is not retried with every record (idle syncs still retry).
        self._write_at = _BUFFER_LIMIT
        self.paths: list[str] = []
        #: Records given up after failed writes (or a file that could not be created).
        self.lost_records = 0

    @property
    def unwritten_bytes(self) -> int:
        """Bytes of framed records not yet handed to the OS (kept after a failed write)."""
        return len(self._buffer)

    @property
    def path(self) -> str | None:
        """The file being written, or None before the first record."""
        return self._path

    def append(self, payload: bytes | list[bytes | memoryview]) -> None:
        """Frame ``payload`` and queue it for the file, rotating first if it would not fit.

        ``payload`` is the serialized message, or the pieces it is made of.
        """
        if isinstance(payload, bytes):
            size = len(payload)
            chunks: list[bytes | memoryview] = [payload]
            header, footer = frame_parts(payload)
        else:
            chunks = payload
            size, header, footer = frame_chunks(chunks)
        needed = size + RECORD_OVERHEAD
        limit = self._max_file_size
        if limit is not None:
            if self._opening_record_size() + needed > limit:
                raise RecordTooLargeError(self._path or "<next file>", needed, limit)
            if self._fd is not None and self._pending_size() + needed > limit:
                # Hand the buffer over first: if that fails, the records stay
                # buffered for another try instead of going down with the file.
                self.write_buffered()
                self.close()
        if self._fd is None:
            try:
                self._open()
            except OSError:
                self.lost_records += 1
                raise
        if size >= _DIRECT_WRITE:
            self._write_direct([header, *chunks, footer], needed)
        else:
            self._buffer += header
            for chunk in chunks:
                self._buffer += chunk
            self._buffer += footer
            if len(self._buffer) >= self._write_at:
                self.write_buffered()

    def append_buffered(self, payloads: list[bytes]) -> bool:
        """Frame ``payloads`` into the buffer at once, if that is all :meth:`append` of
        each would do; else append none of them and return False.

        That is: the file is open, no payload goes straight to the OS, and neither the
        buffer's hand-over nor a new file comes before the last of them: nothing can
        fail, so the batch is all or nothing. A batch of small events (the collector's
        kept timings, hundreds of steps at a time) then costs the writer thread one
        checksum a record, not an append each.
        """
        if self._fd is None or not payloads:
            return False
        sizes = [len(payload) for payload in payloads]
        needed = sum(sizes) + RECORD_OVERHEAD * len(payloads)
        if (
            max(sizes) >= _DIRECT_WRITE
            or len(self._buffer) + needed >= self._write_at
            or (
                self._max_file_size is not None
                and self._pending_size() + needed > self._max_file_size
            )
        ):
            return False
        self._buffer += frame_many(payloads)
        return True

    def _write_direct(self, parts: list[bytes | memoryview], size: int) -> None:
        """Write one large record without copying it into the buffer (kept there on failure)."""
        try:
            self.write_buffered()
        except OSError:
            self._retain(parts, size)
            raise
        self._partial = 0
        try:
            self._write_all(list(parts))
        except OSError:
            # Part of this one record may have reached the file: take it back.
            self._cut_back()
            self._retain(parts, size)
            raise
        self._size += size

    def _retain(self, parts: list[bytes | memoryview], size: int) -> None:
        """Keep a record whose write failed for the next write, if the retry bound allows."""
        if len(self._buffer) + size > _RETRY_LIMIT:
            self.lost_records += 1
            logger.error(
                "dropping a record of %d bytes for %s after a failed write", size, self._path
            )
            return
        for part in parts:
            self._buffer += part

    def write_buffered(self) -> None:
        """Hand every buffered record to the OS (not yet fsync'ed).

        When the write fails (a full disk), the records stay buffered, up to
        ``_RETRY_LIMIT`` bytes, and go out with the next write that succeeds:
        a disk that has room again loses nothing, and a new file keeps the
        record that opens it.
        """
        if self._buffer:
            size = len(self._buffer)
            self._partial = 0
            try:
                # The bytearray itself, not a copy: after failed writes it can hold many MB.
                self._write_all([self._buffer])
            except OSError:
                self._keep_written_records(self._partial)
                if len(self._buffer) > _RETRY_LIMIT:
                    logger.error(
                        "dropping %d buffered bytes for %s after a failed write",
                        len(self._buffer),
                        self._path,
                    )
                    self._drop_buffer()
                self._write_at = len(self._buffer) + _BUFFER_LIMIT
                raise
            self._size += size
            self._buffer.clear()
            self._write_at = _BUFFER_LIMIT

    def _keep_written_records(self, written: int) -> None:
        """After a failed write of the buffer: keep the whole records of its first ``written``
        bytes in the file, cut the rest off the file, and leave only the rest buffered."""
        ends = self._buffered_record_ends()
        count = bisect.bisect_right(ends, written)
        kept = ends[count - 1] if count else 0
        self._size += kept
        self._cut_back()
        del self._buffer[:kept]

    def _buffered_record_ends(self) -> list[int]:
        """Where each record in the buffer ends, from the length field that starts it."""
        ends: list[int] = []
        offset, size = 0, len(self._buffer)
        while offset < size:
            (length,) = _LENGTH.unpack_from(self._buffer, offset)
            offset += length + RECORD_OVERHEAD
            ends.append(offset)
        return ends

    def _drop_buffer(self) -> None:
        self.lost_records += len(self._buffered_record_ends())
        self._buffer.clear()

    def open(self) -> None:
        """Create the file now, with its opening record buffered, instead of at the first record."""
        if self._fd is None:
            self._open()

    def sync(self) -> None:
        """Write everything buffered and fsync it: it is on disk when this returns."""
        self.write_buffered()
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Write what is buffered, close the file and make it read-only (0400)."""
        if self._fd is not None:
            try:
                self.write_buffered()
            finally:
                self._close_current()

    def _pending_size(self) -> int:
        return self._size + len(self._buffer)

    def _opening_record_size(self) -> int:
        if self._opening_record is None:
            self._opening_record = (
                0 if self._first_payload is None else len(self._first_payload()) + RECORD_OVERHEAD
            )
        return self._opening_record

    def _open(self) -> None:
        # O_EXCL never opens a file that exists, a link at the name included.
        flags = (
            os.O_WRONLY
            | os.O_CREAT
            | os.O_EXCL
            | getattr(os, "O_CLOEXEC", 0)
            | getattr(os, "O_NOFOLLOW", 0)
        )
        for attempt in range(_NAME_ATTEMPTS):
            path = self._next_path()
            try:
                self._fd = os.open(path, flags, self._mode_open)
                if self._mode_open & 0o077:  # a umask may have narrowed a group mode
                    os.fchmod(self._fd, self._mode_open)
                break
            except FileExistsError:
                # Names are chosen when the writer is created, files when the first
                # record comes: another process may have taken the name meanwhile.
                if attempt == _NAME_ATTEMPTS - 1:
                    raise
                logger.debug("%s exists already: trying the next name", path)
        self._path = path
        self._size = 0
        self.paths.append(path)
        if self._on_open is not None:
            self._on_open(path)
        logger.debug("opened %s", path)
        if self._first_payload is not None:
            header, footer = frame_parts(first := self._first_payload())
            self._buffer += header + first + footer

    def _close_current(self) -> None:
        fd, path = self._fd, self._path
        self._fd = None
        if self._buffer:
            # The failed write itself was reported (or raised) already.
            logger.warning(
                "%d records for %s could not be written before it was closed",
                len(self._buffered_record_ends()),
                path,
            )
            self._drop_buffer()
        if fd is None or path is None:
            return
        try:
            # Through the descriptor: a link put in the file's place is never followed.
            os.fchmod(fd, self._mode_closed)
        except OSError as error:
            logger.warning("could not make %s read-only: %s", path, error)
        finally:
            os.close(fd)

    def _write_all(self, parts: list[bytes | bytearray | memoryview]) -> None:
        """Write ``parts`` whole, or raise with ``_partial`` saying how much reached the file.

        The caller moves ``_size`` and cuts the file back to a record boundary.
        """
        assert self._fd is not None
        total = sum(chunk_size(part) for part in parts)
        written = _writev(self._fd, parts)
        self._partial = written
        if written == total:
            return
        # A short write: finish the rest byte-exact before anything else goes in. The
        # buffer is not copied (after failed writes it may hold many MB); joined pieces
        # are (rare: a short write of a large record).
        whole = parts[0] if len(parts) == 1 else b"".join(parts)
        with memoryview(whole) as view:
            while written < total:
                with view[written:] as rest:
                    written += _write(self._fd, rest)
                self._partial = written

    def _cut_back(self) -> None:
        """Remove a partly written chunk so the file ends on a complete record."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, self._size)
            os.lseek(self._fd, self._size, os.SEEK_SET)
        except OSError as error:  # pragma: no cover - the disk refused even that
            logger.error("could not cut %s back to %d bytes: %s", self._path, self._size, error)
