"""Helpers shared by the writer tests: reading back what a SummaryRecord left on disk.

Everything here reads files the way a user's tool would: framed records with both
CRCs checked (strict), then the protobuf messages of docs/file-format.md.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import re
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rankscribe.writer.files import RecordReader
from rankscribe.writer.pb import lineage_pb2, summary_pb2, tensorboard_pb2

HOST = platform.node() or "localhost"

# events.out.events.summary.<T>.<rank>.<host><suffix>
NAME = re.compile(
    r"^(?P<prefix>\w+[0-9a-zA-Z_.]*)\.out\.events\.summary\.(?P<t>\d+)\.(?P<rank>[^.]+)\."
    r"(?P<host>.+?)(?P<suffix>_MS|_lineage|_\w+)$"
)


def mode_of(path: str | os.PathLike[str]) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def timestamp_of(path: str | os.PathLike[str]) -> int:
    match = NAME.match(os.path.basename(path))
    assert match, f"not a summary file name: {path}"
    return int(match.group("t"))


def files_with_suffix(directory: str | os.PathLike[str], suffix: str) -> list[Path]:
    """Summary files of ``directory`` ending in ``suffix``, oldest T first."""
    found = [
        Path(directory, name)
        for name in os.listdir(directory)
        if name.endswith(suffix) and ".out.events.summary." in name
    ]
    return sorted(found, key=timestamp_of)


def summary_files(directory: str | os.PathLike[str]) -> list[Path]:
    return files_with_suffix(directory, "_MS")


def lineage_files(directory: str | os.PathLike[str]) -> list[Path]:
    return files_with_suffix(directory, "_lineage")


def tensorboard_files(directory: str | os.PathLike[str]) -> list[Path]:
    return sorted(
        Path(directory, name)
        for name in os.listdir(directory)
        if name.startswith("events.out.tfevents.")
    )


def raw_payloads(path: str | os.PathLike[str], *, allow_torn_tail: bool = False) -> list[bytes]:
    """Every record's payload, both CRCs checked; a torn tail fails unless allowed."""
    reader = RecordReader(path, strict=True)
    payloads = [record.payload for record in reader]
    if not allow_torn_tail:
        assert reader.torn_tail is None, f"{path}: torn tail {reader.torn_tail}"
    return payloads


def read_events(path: str | os.PathLike[str], **options: Any) -> list[summary_pb2.Event]:
    return [summary_pb2.Event.FromString(payload) for payload in raw_payloads(path, **options)]


def read_lineage(path: str | os.PathLike[str]) -> list[lineage_pb2.LineageEvent]:
    return [lineage_pb2.LineageEvent.FromString(payload) for payload in raw_payloads(path)]


def read_tensorboard(path: str | os.PathLike[str]) -> list[tensorboard_pb2.Event]:
    return [tensorboard_pb2.Event.FromString(payload) for payload in raw_payloads(path)]


def all_summary_events(directory: str | os.PathLike[str]) -> list[summary_pb2.Event]:
    """Events of every _MS file of ``directory`` in file order, version events included."""
    return [event for path in summary_files(directory) for event in read_events(path)]


def summary_steps(directory: str | os.PathLike[str]) -> list[summary_pb2.Event]:
    """Only the events that carry a summary (no version, no graph)."""
    return [e for e in all_summary_events(directory) if e.WhichOneof("what") == "summary"]


def all_lineage_events(directory: str | os.PathLike[str]) -> list[lineage_pb2.LineageEvent]:
    return [event for path in lineage_files(directory) for event in read_lineage(path)]


def scalars_of(event: summary_pb2.Event) -> dict[str, float]:
    return {
        value.tag: value.scalar_value
        for value in event.summary.value
        if value.WhichOneof("value") == "scalar_value"
    }


def tags_of(event: summary_pb2.Event) -> list[tuple[str, str]]:
    """(kind, tag) of every value of an event, in file order."""
    return [(value.WhichOneof("value"), value.tag) for value in event.summary.value]


def value_of(event: summary_pb2.Event, tag: str) -> summary_pb2.Summary.Value:
    matches = [value for value in event.summary.value if value.tag == tag]
    assert len(matches) == 1, f"{len(matches)} values tagged {tag!r}"
    return matches[0]


def run_with_timeout(function: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Run ``function`` in a daemon thread; fail the test if it has not returned in time.

    Returns its result or re-raises its exception on the test's thread, so a call
    that should raise can be checked with pytest.raises around this helper.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = function()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"{getattr(function, '__name__', function)} did not return within {timeout} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


@pytest.fixture
def disk():
    """The reading helpers above (a conftest cannot be imported by name under importlib)."""
    return sys.modules[__name__]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
def make_record(log_dir: Path):
    """Build SummaryRecords (default directory: ``log_dir``); all are closed at teardown."""
    from rankscribe.writer import SummaryRecord

    made: list[Any] = []

    def make(directory: str | os.PathLike[str] | None = None, *args: Any, **options: Any) -> Any:
        record = SummaryRecord(log_dir if directory is None else directory, *args, **options)
        made.append(record)
        return record

    yield make
    for record in made:
        # A test that provoked a write failure has checked it already.
        with contextlib.suppress(Exception):
            record.close()


# ---------------------------------------------------------------- a disk of a chosen size


class SmallDisk:
    """The writer's write calls, with room for ``room`` bytes in each file (None: no limit)."""

    def __init__(self, room: int | None) -> None:
        self.room = room
        self.refusals = 0

    def _allowed(self, fd: int, wanted: int) -> int:
        if self.room is None:
            return wanted
        position = os.lseek(fd, 0, os.SEEK_CUR)
        allowed = max(0, min(wanted, self.room - position))
        if allowed == 0 and wanted:
            self.refusals += 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return allowed

    def writev(self, fd: int, parts: list[bytes | bytearray | memoryview]) -> int:
        data = b"".join(bytes(part) for part in parts)
        return os.write(fd, data[: self._allowed(fd, len(data))])

    def write(self, fd: int, data: bytes | memoryview) -> int:
        return os.write(fd, bytes(data)[: self._allowed(fd, len(data))])


def _event_file_module() -> Any:
    # The one place a failing disk can be injected, and the rotation rule tested under it.
    # private: the event file's writes and its rotation, under a failing disk
    from rankscribe.writer.format import _eventfile

    return _eventfile


@pytest.fixture
def event_files() -> Any:
    """The event file module itself, for the tests of its open/rotate rule under faults."""
    return _event_file_module()


@pytest.fixture
def small_disk(monkeypatch: pytest.MonkeyPatch) -> SmallDisk:
    """Every write of an event file goes through a :class:`SmallDisk` (no limit at first)."""
    eventfile = _event_file_module()
    disk = SmallDisk(None)
    monkeypatch.setattr(eventfile, "_writev", disk.writev)
    monkeypatch.setattr(eventfile, "_write", disk.write)
    return disk


class BrokenAppends:
    """Every record handed to an event file raises ``error``: a failure no disk error covers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self.calls: list[int] = []  # the size of each record refused

    def fail_with(self, error: BaseException) -> None:
        def broken_append(_event_file: object, payload: bytes) -> None:
            self.calls.append(len(payload))
            raise error

        eventfile = _event_file_module()
        self._monkeypatch.setattr(eventfile.EventFile, "append", broken_append)


@pytest.fixture
def broken_appends(monkeypatch: pytest.MonkeyPatch) -> BrokenAppends:
    return BrokenAppends(monkeypatch)


class NameClaims:
    """This process's claims on file-name timestamps: their lock and their table."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # A test plays a rotating writer or another process with them: no public door.
        # private: the file-name claims (their lock, their table) of this process
        from rankscribe.writer.format import _names

        self._names = _names
        self._monkeypatch = monkeypatch

    def lock(self) -> Any:
        """The lock a writer holds while it claims a timestamp (read at each call: a fork
        makes a new one in the child)."""
        return self._names._claim_lock

    def forget(self) -> None:
        """Claims of this process forgotten, as a second process would know none of them."""
        self._monkeypatch.setattr(self._names, "_claimed", {})


@pytest.fixture
def name_claims(monkeypatch: pytest.MonkeyPatch) -> NameClaims:
    return NameClaims(monkeypatch)
