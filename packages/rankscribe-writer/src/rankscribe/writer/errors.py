"""Errors raised by rankscribe.writer.

Every error derives from :class:`WriterError` and from the built-in exception it
refines, so code written for the original SummaryRecord (which raised plain
``ValueError``, ``TypeError``, ``RuntimeError`` and ``OSError``) still catches it.
"""

from __future__ import annotations

__all__ = [
    "CorruptRecordError",
    "RecordTooLargeError",
    "StepTooLargeError",
    "WriterError",
    "WriterFailedError",
    "WriterOSError",
    "WriterStateError",
    "WriterTypeError",
    "WriterValueError",
]


class WriterError(Exception):
    """Base class of every error raised by rankscribe.writer."""


class WriterValueError(WriterError, ValueError):
    """An argument has the right type but an unusable value."""


class WriterTypeError(WriterError, TypeError):
    """An argument has the wrong type."""


class WriterStateError(WriterError, RuntimeError):
    """The writer cannot do this now (closed, or a second live instance)."""


class WriterOSError(WriterError, OSError):
    """Writing to disk failed (a full disk, a file too large, ...).

    ``errno``, ``strerror`` and ``filename`` are those of the operating system's
    error, which is also the ``__cause__``.
    """


class WriterFailedError(WriterError, RuntimeError):
    """The background writer failed; the original error is the ``__cause__``."""


class StepTooLargeError(WriterError, ValueError):
    """One step's data exceeds the 2,147,483,647-byte limit of a protobuf message."""

    def __init__(self, step: int, size: int, limit: int) -> None:
        super().__init__(
            f"step {step} holds {size:,} bytes of summary data, more than the "
            f"{limit:,}-byte limit of one protobuf message; the step was not recorded"
        )
        self.step = step
        self.size = size
        self.limit = limit


class RecordTooLargeError(WriterError, ValueError):
    """A single record cannot fit in a file of ``max_file_size`` bytes."""

    def __init__(self, path: str, record_size: int, max_file_size: int) -> None:
        super().__init__(
            f"a record of {record_size:,} bytes cannot fit in {path!r}: "
            f"max_file_size is {max_file_size:,} bytes; the record was not written"
        )
        self.path = path
        self.record_size = record_size
        self.max_file_size = max_file_size


class CorruptRecordError(WriterError, ValueError):
    """A record in a summary file fails its length or payload checksum."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"corrupt record in {path!r} at byte {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason
