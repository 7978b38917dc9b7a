"""One output stream of framed records, spread over as many files as ``max_file_size`` needs.

A file is created only when its first record arrives (0600 while written,
0400 once closed, as the original does). When the next record would push the
file past ``max_file_size``, the file is closed and a new one is started under a
fresh name, so nothing is dropped; a record that cannot fit even in an empty
file is refused whole. Bytes reach the OS in whole records: after a failed
write the file is cut back to its last complete record, so what was written
before stays readable.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from rankscribe.writer._framing import RECORD_OVERHEAD, chunk_size, frame_chunks, frame_parts
from rankscribe.writer.errors import RecordTooLargeError

logger = logging.getLogger(__name__)

# Records are gathered and handed to the OS in chunks of about this size;
# larger payloads go straight through writev without being copied.
_BUFFER_LIMIT = 1 << 20
_DIRECT_WRITE = 1 << 16
# Records kept for another try after a failed write, at most.
_RETRY_LIMIT = 64 << 20
# Names tried when files of those names exist already (made by another process).
_NAME_ATTEMPTS = 100


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
    ) -> None:
        self._on_open = on_open
        self._next_path = next_path
        self._first_payload = first_payload
        self._max_file_size = max_file_size
        self._fd: int | None = None
        self._path: str | None = None
        self._size = 0  # bytes handed to the OS in the current file
        self._opening_record: int | None = None  # framed size of the record opening each file
        self._buffer = bytearray()
        self.paths: list[str] = []

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
            self._open()
        if size >= _DIRECT_WRITE:
            self.write_buffered()
            self._write_all([header, *chunks, footer])
        else:
            self._buffer += header
            for chunk in chunks:
                self._buffer += chunk
            self._buffer += footer
            if len(self._buffer) >= _BUFFER_LIMIT:
                self.write_buffered()

    def write_buffered(self) -> None:
        """Hand every buffered record to the OS (not yet fsync'ed).

        When the write fails (a full disk), the records stay buffered, up to
        ``_RETRY_LIMIT`` bytes, and go out with the next write that succeeds:
        a disk that has room again loses nothing, and a new file keeps the
        record that opens it.
        """
        if self._buffer:
            data = bytes(self._buffer)
            try:
                self._write_all([data])
            except OSError:
                if len(self._buffer) > _RETRY_LIMIT:
                    logger.error("dropping %d buffered bytes for %s after a failed write",
                                 len(self._buffer), self._path)
                    self._buffer.clear()
                raise
            del self._buffer[: len(data)]

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
                0 if self._first_payload is None
                else len(self._first_payload()) + RECORD_OVERHEAD
            )
        return self._opening_record

    def _open(self) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        for attempt in range(_NAME_ATTEMPTS):
            path = self._next_path()
            try:
                self._fd = os.open(path, flags, 0o600)
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
        self._buffer.clear()
        if fd is None or path is None:
            return
        try:
            os.close(fd)
        finally:
            try:
                os.chmod(path, 0o400)
            except OSError as error:
                logger.warning("could not make %s read-only: %s", path, error)

    def _write_all(self, parts: list[bytes | memoryview]) -> None:
        assert self._fd is not None
        total = sum(chunk_size(part) for part in parts)
        try:
            written = os.writev(self._fd, parts)
            while written < total:
                # A short write: finish the rest byte-exact before anything else goes in.
                remaining = b"".join(parts)[written:]  # rare: only after a short write
                written += os.write(self._fd, remaining)
        except OSError:
            self._cut_back()
            raise
        self._size += total

    def _cut_back(self) -> None:
        """Remove a partly written chunk so the file ends on a complete record."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, self._size)
            os.lseek(self._fd, self._size, os.SEEK_SET)
        except OSError as error:  # pragma: no cover - the disk refused even that
            logger.error("could not cut %s back to %d bytes: %s", self._path, self._size, error)
