"""Steps of scalars alone, batched so that recording one costs the caller a list append;
scalars given as columns (``SummaryRecord.write_scalar_columns``), made into steps on
the writer thread, joining the same batches; and small steps of other values, encoded
in the batch's turn (:meth:`ScalarBatches.join_step`)."""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import numpy.typing as npt

from rankscribe.writer.encoding._scalar_steps import ScalarTable
from rankscribe.writer.encoding._steps import EncodedStep, StepJob, encode_step
from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.format import _events as events
from rankscribe.writer.record._pipeline import Pipeline, Wakeup

# A batch holds at most this many points (a step of scalars given alone counts one, a
# column one per step of it, a small step joined to it one per SCALAR_POINT_BYTES of its
# values), and counts as SCALAR_BATCH_BYTES against max_pending_bytes.
MAX_SCALAR_BATCH = 1024
#: The bytes a point of a batch stands for.
SCALAR_POINT_BYTES = 64
SCALAR_BATCH_BYTES = SCALAR_POINT_BYTES * MAX_SCALAR_BATCH

#: One name's points, checked: (name, steps as int64, values as float64), or as the
#: ``array.array`` they were given in when that already holds such numbers.
ScalarColumn = tuple[
    str, "npt.NDArray[np.int64] | array[int]", "npt.NDArray[np.float64] | array[float]"
]
#: A step given alone: (wall time, step, name -> value).
ScalarEntry = tuple[float, int, dict[str, float]]
#: Steps given as columns (:func:`scalar_column`): (wall time, the columns).
ColumnsEntry = tuple[float, list[ScalarColumn]]
#: What a batch holds, in the order given: steps of scalars, columns, and small steps of
#: other values (:meth:`ScalarBatches.join_step`).
BatchEntry = ScalarEntry | ColumnsEntry | StepJob


@dataclass
class EncodedBatch:
    """A batch's events in the order given: runs of steps of scalars (``(step, event)``,
    one event each) and the small steps joined to it (:meth:`ScalarBatches.join_step`).
    A batch of scalars alone is one run."""

    parts: list[list[tuple[int, bytes]] | EncodedStep] = field(default_factory=list)


#: The writer thread, woken by a new batch, lets more steps join it for this long before
#: it takes it (unless the batch is sealed or full first): at steps of a few ms, one
#: wake-up then writes a few dozen steps instead of one or two, and a wake-up costs the
#: machine more than the steps it writes (tools/bench/collector.py, the writer thread's
#: CPU). Steps reach the OS at most this much later; a flush or close does not wait.
COALESCE_SECONDS = 0.05


class ScalarBatches:
    """The open batch of one record's steps of scalars (and the small steps joined to
    them), queued on its pipeline.

    The batch in the queue stays open, and grows, while the writer is busy,
    until the writer thread takes it (it seals it then) or a step that does not
    join it is queued (the caller seals it then, so that step is written after).
    Steps given alone, steps given as columns and small steps of other values join
    it in the order given: a collected step's kept timings and its own values wake
    the writer once, not twice (tools/bench/collector.py, the ~1 ms step), and a
    summary operator's tensor step among quiet steps does not wake it at all
    (the digits row).
    """

    #: How long the writer waits for more steps to join a batch (:data:`COALESCE_SECONDS`).
    coalesce_seconds = COALESCE_SECONDS

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self._lock = threading.Lock()
        self._open: list[BatchEntry] | None = None
        self._points = 0  # of the open batch, against MAX_SCALAR_BATCH
        # Woken when the open batch is sealed or replaced: the writer stops waiting for it.
        # Woken by the training thread at every step that is not scalars alone, so not a
        # threading.Event, whose set() a Ctrl-C can leave holding its lock (Wakeup).
        self._closed = Wakeup()

    def add(self, step: int, scalars: dict[str, float]) -> None:
        """Add a scalar-only step to the open batch, or queue a new batch holding it."""
        self._join((time.time(), step, scalars), 1)

    def add_columns(self, columns: list[ScalarColumn]) -> None:
        """Add steps given as checked, non-empty columns (made into steps by the writer)."""
        points = sum(len(steps) for _, steps, _ in columns)
        if points > MAX_SCALAR_BATCH:  # more than a batch holds: a batch of their own
            self.seal()
            self._pipeline.put(partial(encode_scalar_columns, time.time(), columns), 64 * points)
            return
        self._join((time.time(), columns), points)

    def join_step(self, job: StepJob, points: int) -> bool:
        """Add a small step to the open batch, in the order given (encoded with the batch,
        on the writer thread, not on the encoder pool), counting ``points`` against the
        batch's size; False, with nothing added, when no batch is open or it has no room
        (the caller then seals it and queues the step after it)."""
        with self._lock:
            batch = self._open
            if batch is None or self._points + points > MAX_SCALAR_BATCH:
                return False
            batch.append(job)
            self._points += points
        if self._pipeline.has_error:  # the step is in; now an earlier error may surface
            self._pipeline.raise_pending()
        return True

    def _join(self, entry: ScalarEntry | ColumnsEntry, points: int) -> None:
        batch_is_new = False
        with self._lock:
            batch = self._open
            if batch is not None and self._points + points <= MAX_SCALAR_BATCH:
                batch.append(entry)
                self._points += points
            else:
                if batch is not None:
                    self._closed.wake()  # full: the writer need not wait for it
                batch = self._open = [entry]
                self._points = points
                batch_is_new = True
        if batch_is_new:
            self._pipeline.put(partial(self._encode, batch), SCALAR_BATCH_BYTES)
        elif self._pipeline.has_error:  # the step is in; now an earlier error may surface
            self._pipeline.raise_pending()

    def seal(self) -> None:
        """Close the open batch: what comes next is written after it (and the writer
        thread takes it now)."""
        with self._lock:
            self._open = None
        self._closed.wake()

    def _encode(self, batch: list[BatchEntry]) -> EncodedBatch:
        # Writer thread: let more steps join the batch while it is open, then seal it,
        # so no step joins it while it is encoded.
        with self._lock:
            still_open = self._open is batch
            if still_open:
                self._closed.drain()
        if still_open:
            self._closed.wait(self.coalesce_seconds)
        with self._lock:
            if self._open is batch:
                self._open = None
        encoded = EncodedBatch()
        parts = encoded.parts
        run: list[tuple[int, bytes]] = []
        for entry in batch:
            if isinstance(entry, StepJob):
                if run:
                    parts.append(run)
                    run = []
                parts.append(encode_step(entry))
            elif len(entry) == 3:
                wall_time, step, scalars = entry
                run.append((step, events.scalar_event(wall_time, step, scalars.items())))
            else:
                run.extend(encode_scalar_columns(*entry))
        if run:
            parts.append(run)
        return encoded


#: The longest column from which :func:`encode_scalar_columns` makes a table: the table's
#: NumPy calls cost the writer thread about 0.5 ms woken with cold caches, whatever the
#: size, and step by step about 4 us a step of three names: three names of 256 steps
#: (the collector's kept timings of 256 quiet steps) 0.68 ms against 1.2 ms, of 4 steps
#: (a collected step's kept timings at ``collect_freq=5``) 0.57 ms against 0.14 ms.
TABLE_STEPS = 128

_INT64_MAX = np.iinfo(np.int64).max
# array.array type codes whose every value fits an int64 step, and real values.
_ARRAY_STEPS = frozenset("bBhHiIlq")
_ARRAY_VALUES = frozenset("fd")


def scalar_column(name: str, steps: Sequence[int], values: Sequence[float]) -> ScalarColumn:
    """``name``'s column checked: integer steps in int64, real values, equal lengths."""
    if (
        type(steps) is array
        and type(values) is array
        and steps.typecode in _ARRAY_STEPS
        and values.typecode in _ARRAY_VALUES
        and len(steps) == len(values)
    ):
        # Checked by their type codes alone, and kept as they are (the collector's kept
        # timings): NumPy is not called on the caller's thread.
        return name, steps, values
    what = f"For 'SummaryRecord.write_scalar_columns', the column of '{name}'"
    try:
        step_array = np.asarray(steps)
        value_array = np.asarray(values)
    except (TypeError, ValueError) as error:
        raise WriterTypeError(f"{what} must be two sequences of numbers: {error}") from None
    if step_array.ndim != 1 or value_array.ndim != 1:
        raise WriterValueError(
            f"{what} must be two flat sequences (steps, values), but got shapes "
            f"{step_array.shape} and {value_array.shape}."
        )
    if len(step_array) != len(value_array):
        raise WriterValueError(
            f"{what} has {len(step_array)} steps and {len(value_array)} values; they pair "
            f"one to one."
        )
    if not len(step_array):
        return name, np.zeros(0, np.int64), np.zeros(0, np.float64)
    if step_array.dtype.kind not in "iu" or (
        step_array.dtype.kind == "u" and int(step_array.max()) > _INT64_MAX
    ):
        raise WriterValueError(
            f"{what} must have int steps that fit in an int64 [-2**63, 2**63 - 1], but got "
            f"{step_array.dtype} steps."
        )
    if value_array.dtype.kind not in "biuf":
        raise WriterValueError(
            f"{what} must have real numbers as values, but got {value_array.dtype} values."
        )
    return name, step_array.astype(np.int64), value_array.astype(np.float64)


def scalar_steps(columns: Sequence[ScalarColumn]) -> list[tuple[int, dict[str, float]]]:
    """The steps ``columns`` hold, ascending, each with its names' values (a name twice
    at one step: its later value)."""
    by_step: dict[int, dict[str, float]] = {}
    for name, steps, values in columns:
        for step, value in zip(steps.tolist(), values.tolist(), strict=True):
            by_step.setdefault(step, {})[name] = value
    return sorted(by_step.items())


def encode_scalar_columns(
    wall_time: float, columns: Sequence[ScalarColumn]
) -> list[tuple[int, bytes]]:
    """Writer thread: the events of ``columns``' steps, all stamped ``wall_time``.

    Step by step (:func:`scalar_steps`, ``scalar_event``) when the columns are short;
    from :data:`TABLE_STEPS` points a column, as a table (``ScalarTable``: a few NumPy
    operations per group of steps of one layout, not Python work per value), the same
    bytes.
    """
    if max(len(steps) for _, steps, _ in columns) < TABLE_STEPS:
        return [
            (step, events.scalar_event(wall_time, step, scalars.items()))
            for step, scalars in scalar_steps(columns)
        ]
    table = ScalarTable.of(
        [name for name, _, _ in columns],
        # Copies: no view of a caller's array.array outlives this call.
        [np.array(steps, dtype=np.int64) for _, steps, _ in columns],
        [np.array(values, dtype=np.float64) for _, _, values in columns],
    )
    return list(zip(table.steps.tolist(), table.events(wall_time, tensorboard=False), strict=True))
