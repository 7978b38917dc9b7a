"""The files of one SummaryRecord: their names and the streams that write them.

The summary and lineage files share the record's creation time ``T``; each rotation
takes a fresh ``T``. TensorBoard reads a directory's files in name order, so a rotated
TensorBoard file needs a later ``T`` too, not just a higher counter ("...10" sorts
before "...2").
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from rankscribe.ranks.files import file_mode
from rankscribe.writer.encoding import _tensorboard as tensorboard
from rankscribe.writer.files import (
    LINEAGE_SUFFIX,
    claim_timestamp,
    summary_file_name,
    tensorboard_file_name,
)
from rankscribe.writer.format import _events as events
from rankscribe.writer.format._eventfile import EventFile


class RecordFiles:
    """The summary (if "mindinsight" is a format), lineage and TensorBoard streams."""

    def __init__(
        self,
        directory: str,
        timestamp: int,
        name: tuple[str, str, int | str, str],
        *,
        formats: tuple[str, ...],
        max_file_size: int | None,
        group_readable: bool,
    ) -> None:
        self._directory, self._timestamp = directory, timestamp
        self._prefix, self._suffix, self._rank, self._host = name
        self.created: list[str] = []  # every file opened, in order
        self._max_file_size = max_file_size
        self._modes = (file_mode(False, group_readable), file_mode(True, group_readable))
        self.summary: EventFile | None = None
        if "mindinsight" in formats:
            self.summary = self._stream(self._summary_names(self._suffix), _version_payload)
        self.lineage = self._stream(self._summary_names(LINEAGE_SUFFIX), None)
        self.board: EventFile | None = None
        if "tensorboard" in formats:
            self.board = self._stream(
                self._rotating_paths(self._board_name), _board_version_payload
            )

    def _stream(
        self, names: Callable[[], str], first_payload: Callable[[], bytes] | None
    ) -> EventFile:
        return EventFile(
            names,
            first_payload=first_payload,
            max_file_size=self._max_file_size,
            on_open=self.created.append,
            modes=self._modes,
        )

    @property
    def streams(self) -> list[EventFile]:
        return [stream for stream in (self.summary, self.lineage, self.board) if stream]

    def summary_path(self) -> str:
        """The summary file's path: the name it got, or the name it will get."""
        if self.summary is not None and self.summary.paths:
            return self.summary.paths[0]  # the name it got, if another process had T
        return os.path.join(
            self._directory,
            summary_file_name(self._prefix, self._timestamp, self._rank, self._host, self._suffix),
        )

    def disk_state(self, failures: int) -> tuple[int, int, int]:
        """(failed writes, bytes kept after a failed write, records given up)."""
        streams = self.streams
        return (
            failures,
            sum(stream.unwritten_bytes for stream in streams),
            sum(stream.lost_records for stream in streams),
        )

    def _board_name(self, timestamp: int) -> str:
        return tensorboard_file_name(timestamp, self._host)

    def _summary_names(self, suffix: str) -> Callable[[], str]:
        return self._rotating_paths(
            lambda timestamp: summary_file_name(
                self._prefix, timestamp, self._rank, self._host, suffix
            )
        )

    def _rotating_paths(self, name_for: Callable[[int], str]) -> Callable[[], str]:
        used: list[int] = []

        def next_path() -> str:
            timestamp = (
                claim_timestamp(self._directory, not_before=used[-1] + 1)
                if used
                else self._timestamp
            )
            used.append(timestamp)
            return os.path.join(self._directory, name_for(timestamp))

        return next_path


def _version_payload() -> bytes:
    return events.version_event(time.time())


def _board_version_payload() -> bytes:
    return tensorboard.version_event(time.time())
