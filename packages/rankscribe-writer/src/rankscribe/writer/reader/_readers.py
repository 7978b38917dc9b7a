"""Event readers: the decoded records of one summary, lineage or TensorBoard file.

Both CRCs of every record are checked. A torn last record (the writer died
mid-write) ends the iteration, is logged and is left in
:attr:`EventReader.torn_tail`; damage before the end raises
:class:`~rankscribe.writer.errors.CorruptRecordError` when ``strict``, and is
otherwise logged, kept in :attr:`EventReader.corruptions` and skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from google.protobuf.message import DecodeError, Message

from rankscribe.writer._arguments import check_bool, check_path
from rankscribe.writer.errors import CorruptRecordError, WriterValueError
from rankscribe.writer.files import FileKind, RecordReader, file_kind
from rankscribe.writer.format._framing import TornTail
from rankscribe.writer.format._names import coerce_kind
from rankscribe.writer.pb import lineage_pb2, summary_pb2, tensorboard_pb2

# Named after the package so that configuring "rankscribe.writer.reader" keeps working.
logger = logging.getLogger("rankscribe.writer.reader")

MessageT = TypeVar("MessageT", bound=Message)


@dataclass(frozen=True)
class EventRecord(Generic[MessageT]):
    """One decoded record: where it starts in the file and the message it holds."""

    offset: int
    payload_length: int
    event: MessageT


class EventReader(Generic[MessageT]):
    """The decoded records of one event file; iterate it for the messages.

    Every iteration reads the file again from the start. After an iteration
    has run to its end:

    - :attr:`torn_tail` is the incomplete last record, if any (a crash
      mid-write leaves one); everything before it has been returned.
    - :attr:`corruptions` lists the records that were skipped (lenient mode
      only): a CRC mismatch, or a payload that is not a valid message. After a
      damaged *length* nothing further can be read, because the next record
      boundary is unknown.

    Both are logged as warnings naming the file.
    """

    def __init__(
        self, path: str | os.PathLike[str], message_type: type[MessageT], *, strict: bool = False
    ):
        self.path = Path(path)
        self.message_type = message_type
        self.strict = strict
        self.torn_tail: TornTail | None = None
        self.corruptions: list[CorruptRecordError] = []

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({os.fspath(self.path)!r}, "
            f"{self.message_type.__name__}, strict={self.strict})"
        )

    def __iter__(self) -> Iterator[MessageT]:
        for record in self.records():
            yield record.event

    def records(self) -> Iterator[EventRecord[MessageT]]:
        """Yield every readable record with its byte offset."""
        self.torn_tail = None
        self.corruptions = []
        framing = RecordReader(self.path, strict=self.strict)
        reported = 0
        returned = 0
        for raw in framing:
            reported = self._report_framing_damage(framing, reported)
            event = self._parse(raw.offset, raw.payload)
            if event is not None:
                returned += 1
                yield EventRecord(raw.offset, len(raw.payload), event)
        self._report_framing_damage(framing, reported)
        if framing.torn_tail is not None:
            self.torn_tail = framing.torn_tail
            logger.warning(
                "%s: the last record, at byte %d, is incomplete (%s), as a writer that "
                "stopped mid-write leaves it; the %d records before it were read",
                self.path,
                framing.torn_tail.offset,
                framing.torn_tail.reason,
                returned,
            )

    def _report_framing_damage(self, framing: RecordReader, reported: int) -> int:
        for error in framing.corruptions[reported:]:
            self._skip(error)
        return len(framing.corruptions)

    def _parse(self, offset: int, payload: bytes) -> MessageT | None:
        try:
            return self.message_type.FromString(payload)
        except (DecodeError, UnicodeDecodeError) as exc:
            # protobuf raises UnicodeDecodeError for a map key that is not UTF-8.
            error = CorruptRecordError(
                os.fspath(self.path),
                offset,
                f"payload of {len(payload)} bytes is not a valid "
                f"{self.message_type.DESCRIPTOR.full_name}: {exc}",
            )
            if self.strict:
                raise error from exc
            self._skip(error)
            return None

    def _skip(self, error: CorruptRecordError) -> None:
        self.corruptions.append(error)
        logger.warning("%s; skipped", error)


def _refuse_other_kind(path: str | os.PathLike[str], expected: FileKind, reader_name: str) -> None:
    kind = file_kind(path)
    if kind is not None and kind is not expected:
        raise WriterValueError(
            f"{os.fspath(path)!r} is a {kind.value} file by its name, not a "
            f"{expected.value} file; read it with {reader_name}() or open_events()"
        )


def read_events(
    path: str | os.PathLike[str], *, strict: bool = False
) -> EventReader[summary_pb2.Event]:
    """Return a reader of the ``summary_pb2.Event`` records of a summary (``_MS``) file.

    Raises:
        WriterValueError: the name says the file holds lineage or TensorBoard events.
    """
    check_path("path", path, owner="read_events")
    check_bool("strict", strict, owner="read_events")
    _refuse_other_kind(path, FileKind.SUMMARY, "read_lineage_events or read_tensorboard_events")
    return EventReader(path, summary_pb2.Event, strict=strict)


def read_lineage_events(
    path: str | os.PathLike[str], *, strict: bool = False
) -> EventReader[lineage_pb2.LineageEvent]:
    """Return a reader of the ``lineage_pb2.LineageEvent`` records of a ``_lineage`` file.

    Raises:
        WriterValueError: the name says the file holds summary or TensorBoard events.
    """
    check_path("path", path, owner="read_lineage_events")
    check_bool("strict", strict, owner="read_lineage_events")
    _refuse_other_kind(path, FileKind.LINEAGE, "read_events or read_tensorboard_events")
    return EventReader(path, lineage_pb2.LineageEvent, strict=strict)


def read_tensorboard_events(
    path: str | os.PathLike[str], *, strict: bool = False
) -> EventReader[tensorboard_pb2.Event]:
    """Return a reader of the ``tensorboard_pb2.Event`` records of a TensorBoard file.

    Raises:
        WriterValueError: the name says the file holds summary or lineage events.
    """
    check_path("path", path, owner="read_tensorboard_events")
    check_bool("strict", strict, owner="read_tensorboard_events")
    _refuse_other_kind(path, FileKind.TENSORBOARD, "read_events or read_lineage_events")
    return EventReader(path, tensorboard_pb2.Event, strict=strict)


_MESSAGE_TYPES: dict[FileKind, type[Message]] = {
    FileKind.SUMMARY: summary_pb2.Event,
    FileKind.LINEAGE: lineage_pb2.LineageEvent,
    FileKind.TENSORBOARD: tensorboard_pb2.Event,
}


def open_events(
    path: str | os.PathLike[str], *, kind: FileKind | str | None = None, strict: bool = False
) -> EventReader[Message]:
    """Return a reader for any event file, choosing the message type by ``kind``.

    ``kind`` defaults to what :func:`file_kind` says of the name.

    Raises:
        WriterValueError: no ``kind`` was given and the name is not an event file name.
    """
    check_path("path", path, owner="open_events")
    check_bool("strict", strict, owner="open_events")
    resolved = coerce_kind(kind) or file_kind(path)
    if resolved is None:
        raise WriterValueError(
            f"cannot tell what {os.fspath(path)!r} holds from its name; "
            "pass kind='summary', 'lineage' or 'tensorboard'"
        )
    return EventReader(path, _MESSAGE_TYPES[resolved], strict=strict)
