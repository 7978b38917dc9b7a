"""Event files for RankScribe's other packages: the writer is the only package that frames events.

``SummaryRecord`` writes a training job's files; this module writes the files the
lineage package makes from them (``docs/contributing.md``, "Event files"): the job
view's cross-rank curves, whole or appended interval by interval, the HParams export
and the merged lineage. It is public to the sibling packages and outside the
writer's top-level ``__all__``; users write with ``SummaryRecord``.

- :class:`EventRecords`: the records of one file (or of one append to it), in
  order, built in memory: the version record, protobuf events, many tags' scalars
  at once (:class:`ScalarSteps`), the TensorBoard plugins' events (Custom Scalars
  layout, HParams experiment and sessions).
- :func:`write_event_file`: a whole file, written atomically.
- :class:`EventFileAppender`: a file created now and appended to, with the rules of
  ``SummaryRecord``'s files.

Formats are named as ``SummaryRecord(formats=...)`` names them: ``"mindinsight"``
(MindSpore's ``summary.proto`` ``Event``, and ``LineageEvent`` for a ``_lineage``
file) and ``"tensorboard"`` (TensorFlow's ``Event``). Framing, the varints and the
version records are the writer's own (``docs/file-format.md``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from types import TracebackType
from typing import TYPE_CHECKING

import numpy as np

from rankscribe.ranks.files import atomic_write, file_mode
from rankscribe.writer._arguments import check_path, is_int, is_real
from rankscribe.writer.encoding import _tensorboard_plugins as plugins
from rankscribe.writer.encoding._scalar_steps import ScalarTable
from rankscribe.writer.encoding._tensorboard import version_event as tensorboard_version_event
from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.files import claim_timestamp
from rankscribe.writer.format._eventfile import EventFile
from rankscribe.writer.format._events import version_event as summary_version_event
from rankscribe.writer.format._framing import frame_parts
from rankscribe.writer.pb import lineage_pb2, summary_pb2, tensorboard_pb2

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["EventFileAppender", "EventRecords", "ScalarSteps", "write_event_file"]

# The formats an event file can have: MindSpore's (MindInsight reads it) and TensorBoard's.
_FORMATS = ("mindinsight", "tensorboard")

_INT64 = (-(1 << 63), (1 << 63) - 1)


def _check_format(value: object, caller: str) -> str:
    if value not in _FORMATS:
        raise WriterValueError(
            f"For '{caller}', the argument 'format' must be 'mindinsight' or 'tensorboard', "
            f"but got {value!r}."
        )
    return str(value)


def _check_time(value: object, argument: str, caller: str) -> float:
    if not is_real(value):
        raise WriterTypeError(
            f"For '{caller}', the argument '{argument}' must be a number (seconds), but got "
            f"{type(value).__name__}."
        )
    return float(value)


class ScalarSteps:
    """Scalars of many tags at many steps, laid out once for one event per step.

    ``columns``: ``(tag, steps, values)`` triples, ``steps`` a 1-D array of integer
    steps and ``values`` a 1-D array of the same length (float32 on disk; beyond its
    range a value becomes +-inf). A step given twice in one column keeps its last
    value. Each step's event holds the values of the columns that have the step, in
    column order. The same table gives both formats::

        steps = ScalarSteps([("loss/mean", step_array, means), ("loss/max", step_array, maxima)])
        summary.add_scalars(steps, wall_time)
        board.add_scalars(steps, wall_time)

    Raises:
        WriterTypeError, WriterValueError: a malformed column (the message names it).
    """

    def __init__(self, columns: Sequence[tuple[str, npt.ArrayLike, npt.ArrayLike]]) -> None:
        if isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence):
            raise WriterTypeError(
                "For 'ScalarSteps', the argument 'columns' must be a sequence of "
                f"(tag, steps, values) tuples, but got {type(columns).__name__}."
            )
        tags: list[str] = []
        steps: list[npt.NDArray[np.int64]] = []
        values: list[npt.NDArray[np.float64]] = []
        for index, column in enumerate(columns):
            tag, column_steps, column_values = _check_column(index, column)
            tags.append(tag)
            steps.append(column_steps)
            values.append(column_values)
        self._table = ScalarTable.of(tags, steps, values)

    @property
    def steps(self) -> npt.NDArray[np.int64]:
        """Every step that some column has, ascending (a copy)."""
        return self._table.steps.copy()

    def __len__(self) -> int:
        return len(self._table.steps)


def _check_column(
    index: int, column: object
) -> tuple[str, npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    # Called once per tag (a job view writes thousands): the checks cost a few
    # attribute reads, and the messages are made only for a column that fails one.
    if not isinstance(column, tuple) or len(column) != 3:
        raise WriterTypeError(
            f"{_where(index)} must be a (tag, steps, values) tuple, but got {column!r}."
        )
    tag, raw_steps, raw_values = column
    if not isinstance(tag, str) or not tag:
        raise WriterTypeError(f"{_where(index)}: the tag must be a non-empty str, but got {tag!r}.")
    steps = np.asarray(raw_steps)
    values = np.asarray(raw_values)
    if steps.ndim != 1 or not (steps.dtype.kind in "iu" or steps.size == 0):
        raise WriterTypeError(
            f"{_where(index)} ({tag!r}): steps must be a 1-D array of integers, but got "
            f"{steps.ndim}-D {steps.dtype}."
        )
    if values.ndim != 1 or not (values.dtype.kind in "iuf" or values.size == 0):
        raise WriterTypeError(
            f"{_where(index)} ({tag!r}): values must be a 1-D array of numbers, but got "
            f"{values.ndim}-D {values.dtype}."
        )
    if len(steps) != len(values):
        raise WriterValueError(
            f"{_where(index)} ({tag!r}): steps and values must have the same length, but got "
            f"{len(steps)} steps and {len(values)} values."
        )
    # Every signed integer and every unsigned one narrower than 64 bits fits an int64.
    if steps.dtype == np.uint64 and steps.size and int(steps.max()) > _INT64[1]:
        raise WriterValueError(
            f"{_where(index)} ({tag!r}): steps must fit an int64, but got "
            f"{int(steps.min())}..{int(steps.max())}."
        )
    return tag, steps.astype(np.int64), values.astype(np.float64)


def _where(index: int) -> str:
    return f"For 'ScalarSteps', column {index}"


class EventRecords:
    """The records of one event file, or of one append to it, in order, built in memory.

    ``format``: ``"mindinsight"`` or ``"tensorboard"``. Each ``add_*`` method adds
    records at the end; :func:`write_event_file` and :meth:`EventFileAppender.append`
    frame and write them. The plugin events (layout, HParams) exist in the
    TensorBoard format only.

    Raises:
        WriterValueError: ``format`` is neither.
    """

    def __init__(self, format: str) -> None:
        self.format = _check_format(format, "EventRecords")
        self._payloads: list[bytes] = []

    def __len__(self) -> int:
        return len(self._payloads)

    @property
    def _tensorboard(self) -> bool:
        return self.format == "tensorboard"

    def add_version(self, wall_time: float) -> None:
        """The record that opens every summary and TensorBoard file."""
        self._payloads.append(
            _version_payload(self.format, _check_time(wall_time, "wall_time", "add_version"))
        )

    def add_event(
        self, event: summary_pb2.Event | lineage_pb2.LineageEvent | tensorboard_pb2.Event
    ) -> None:
        """A protobuf event of this format: ``summary_pb2.Event`` or ``lineage_pb2.LineageEvent``
        (``"mindinsight"``), ``tensorboard_pb2.Event`` (``"tensorboard"``)."""
        expected: tuple[type, ...] = (
            (tensorboard_pb2.Event,)
            if self._tensorboard
            else (summary_pb2.Event, lineage_pb2.LineageEvent)
        )
        if not isinstance(event, expected):
            names = " or ".join(
                f"{kind.__module__.rsplit('.', 1)[-1]}.{kind.__name__}" for kind in expected
            )
            raise WriterTypeError(
                f"For 'add_event', the argument 'event' must be a {names} in a "
                f"{self.format!r} file, but got {type(event).__name__}."
            )
        self._payloads.append(bytes(event.SerializeToString()))

    def add_scalars(self, steps: ScalarSteps, wall_time: float) -> None:
        """One event per step of ``steps``, holding that step's scalars."""
        if not isinstance(steps, ScalarSteps):
            raise WriterTypeError(
                "For 'add_scalars', the argument 'steps' must be a ScalarSteps, but got "
                f"{type(steps).__name__}."
            )
        wall = _check_time(wall_time, "wall_time", "add_scalars")
        self._payloads.extend(steps._table.events(wall, tensorboard=self._tensorboard))

    def add_layout(
        self,
        wall_time: float,
        title: str,
        *,
        margin_charts: Mapping[str, tuple[str, str, str]],
        line_charts: Mapping[str, Sequence[str]],
    ) -> None:
        """A Custom Scalars layout: one category ``title`` of charts, at step 0.

        ``margin_charts``: chart title -> (value tag, lower tag, upper tag), a line
        within a band. ``line_charts``: chart title -> the tags it draws as lines.
        """
        self._plugin_only("add_layout")
        wall = _check_time(wall_time, "wall_time", "add_layout")
        self._payloads.append(plugins.layout_event(wall, title, margin_charts, line_charts))

    def add_hparams_experiment(
        self,
        wall_time: float,
        hparams: Mapping[str, Sequence[bool | float | str]],
        metrics: Sequence[str],
    ) -> None:
        """The HParams experiment: each hyper-parameter with the values the runs gave it
        (in order of appearance), and the metric tags the sessions report."""
        self._plugin_only("add_hparams_experiment")
        wall = _check_time(wall_time, "wall_time", "add_hparams_experiment")
        self._payloads.append(plugins.experiment_event(wall, hparams, metrics))

    def add_hparams_session(
        self,
        wall_time: float,
        *,
        group: str,
        start_time: float,
        end_time: float,
        hparams: Mapping[str, bool | float | str],
        metrics: Mapping[str, float],
        step: int = 0,
    ) -> None:
        """One HParams session: its start (``hparams``), ``metrics`` as scalars at
        ``step`` (no event without metrics), its end. An empty ``group`` makes
        TensorBoard group the session by its run."""
        self._plugin_only("add_hparams_session")
        wall = _check_time(wall_time, "wall_time", "add_hparams_session")
        if not is_int(step):
            raise WriterTypeError(
                "For 'add_hparams_session', the argument 'step' must be an int, but got "
                f"{type(step).__name__}."
            )
        self._payloads.extend(
            plugins.session_events(
                wall,
                group=group,
                start_time=_check_time(start_time, "start_time", "add_hparams_session"),
                end_time=_check_time(end_time, "end_time", "add_hparams_session"),
                hparams=hparams,
                metrics=metrics,
                step=step,
            )
        )

    def _plugin_only(self, caller: str) -> None:
        if not self._tensorboard:
            raise WriterValueError(
                f"For '{caller}', the records must be in the 'tensorboard' format (a "
                f"TensorBoard plugin's event), but they are in {self.format!r}."
            )

    def _framed(self) -> bytes:
        """Every record framed (``docs/file-format.md``, "Records"), back to back."""
        parts: list[bytes] = []
        for payload in self._payloads:
            header, footer = frame_parts(payload)
            parts += (header, payload, footer)
        return b"".join(parts)


def _version_payload(format: str, wall_time: float) -> bytes:
    if format == "tensorboard":
        return tensorboard_version_event(wall_time)
    return summary_version_event(wall_time)


def write_event_file(
    path: str | os.PathLike[str],
    records: EventRecords,
    *,
    final: bool = True,
    group_readable: bool | None = None,
) -> str:
    """Write ``records`` as the whole file ``path``, atomically; return the path.

    A reader sees the old file or the new one, never half of one; a link planted at
    the name or at the temporary name is never followed (``files.atomic_write``).
    The file is 0400 when ``final`` (0600 for one the next call rewrites), 0440/0640
    group-readable (``files.file_mode``). An ``OSError`` that names no file (a write or
    an fsync failing: a full disk) names ``path``: a merge on a full disk said only
    "[Errno 28] No space left on device".
    """
    target = check_path("path", path, owner="write_event_file")
    if not isinstance(records, EventRecords):
        raise WriterTypeError(
            "For 'write_event_file', the argument 'records' must be an EventRecords, but "
            f"got {type(records).__name__}."
        )
    # One write: the records are whole in memory already.
    try:
        return atomic_write(target, [records._framed()], mode=file_mode(final, group_readable))
    except OSError as error:
        if error.filename is None:
            error.filename = str(target)
        raise


class EventFileAppender:
    """An event file created now and appended to, record by record, then closed read-only.

    The rules of ``SummaryRecord``'s files (``docs/file-format.md``, "Modes", "Size
    limits and rotation", "Durability"): each file is created with ``O_EXCL |
    O_NOFOLLOW`` (a file or link at the name is never opened: the next creation time
    is tried), 0600 while written (0640 group-readable) and 0400 (0440) once closed,
    and opens with the version record. ``name(T)`` names the file of creation time
    ``T`` in ``directory``; the first file takes ``timestamp`` (default: a time no
    file of the directory uses), and when the next record would take a file past
    ``max_file_size`` bytes, a new file with a later ``T`` follows. Each
    :meth:`append` ends with ``fsync``: a reader sees every record before it whole.
    After a failed write (a full disk) the records that did not reach the file stay
    buffered for the next append, as ``SummaryRecord``'s do, and the error is raised.

    Raises:
        OSError: the first file could not be created.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        name: Callable[[int], str],
        *,
        format: str,
        timestamp: int | None = None,
        max_file_size: int | None = None,
        group_readable: bool | None = None,
    ) -> None:
        self.directory = check_path("directory", directory, owner="EventFileAppender")
        self.format = _check_format(format, "EventFileAppender")
        if not callable(name):
            raise WriterTypeError(
                "For 'EventFileAppender', the argument 'name' must be a function of the "
                f"creation time, but got {type(name).__name__}."
            )
        for argument, value in (("timestamp", timestamp), ("max_file_size", max_file_size)):
            if value is not None and (not is_int(value) or value < 1):
                raise WriterValueError(
                    f"For 'EventFileAppender', the argument '{argument}' must be None or an "
                    f"int > 0, but got {value!r}."
                )
        self._name = name
        self._used: list[int] = []
        self._first = timestamp
        self._stream: EventFile | None = EventFile(
            self._next_path,
            first_payload=lambda: _version_payload(self.format, time.time()),
            max_file_size=max_file_size,
            modes=(file_mode(False, group_readable), file_mode(True, group_readable)),
        )
        self._created = self._stream.paths  # the stream adds each file it opens
        try:
            self._stream.open()
            self._stream.sync()
        except BaseException:
            self.close()
            raise

    def _next_path(self) -> str:
        if self._used:
            timestamp = claim_timestamp(self.directory, not_before=self._used[-1] + 1)
        elif self._first is not None:
            timestamp = self._first
        else:
            timestamp = claim_timestamp(self.directory)
        self._used.append(timestamp)
        return os.path.join(self.directory, self._name(timestamp))

    @property
    def paths(self) -> list[str]:
        """Every file created, in order (one unless the files rotated)."""
        return list(self._created)

    def append(self, records: EventRecords) -> None:
        """Frame ``records``, write them and fsync the file.

        Raises:
            WriterValueError: ``records`` are of another format, or the appender is closed.
            RecordTooLargeError: a record larger than ``max_file_size`` allows.
            OSError: the write failed (what did not reach the file stays buffered).
        """
        if not isinstance(records, EventRecords):
            raise WriterTypeError(
                "For 'append', the argument 'records' must be an EventRecords, but got "
                f"{type(records).__name__}."
            )
        if records.format != self.format:
            raise WriterValueError(
                f"For 'append', the records must be in the file's format {self.format!r}, "
                f"but they are in {records.format!r}."
            )
        stream = self._stream
        if stream is None:
            raise WriterValueError(f"the event file appender of {self.directory} is closed")
        failure: OSError | None = None
        for payload in records._payloads:
            try:
                stream.append(payload)
            except OSError as error:  # the record stays buffered; so do the ones after it
                failure = failure or error
        if failure is not None:
            raise failure
        stream.sync()

    def close(self) -> None:
        """Write what is buffered, fsync, make the file read-only and close it. Idempotent.

        Raises:
            OSError: the last write or fsync failed (the file is closed all the same).
        """
        stream, self._stream = self._stream, None
        if stream is None:
            return
        try:
            stream.sync()
        finally:
            with suppress(OSError):  # the sync's error, if any, is the one raised
                stream.close()

    def __enter__(self) -> EventFileAppender:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
