"""The scalars this rank's collector recorded, kept for the job view at the end of a run.

At the end of training (and of evaluation) every rank hands its series to rank 0,
which writes the job's cross-rank curves (:func:`rankscribe.jobview.write_job_view`).
Only what the collector itself records is kept, as it records it: its scalars
(``loss/auto``), its timings (step time and data wait of every step, forward
time, sections: ``docs/job-view.md``, "Timings") and the parameter fingerprint
(step 0 and every collected step). Never tensors, histograms or images, so the memory is
12 bytes per point (two flat arrays per tag, not a Python object per point).
Values are kept as float32, the summary scalar type: the job view rank 0 writes
from them is the one the offline merge computes from the rank files.
Scalars that summary operators record go into the rank's files only; the offline
merge (``rankscribe-lineage merge``) reads those too.
"""

from __future__ import annotations

import logging
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rankscribe.collector import _clock
from rankscribe.collector._fingerprint import (
    DEFAULT_FINGERPRINT_BUDGET,
    FingerprintPart,
    LateFingerprint,
    late_slice_fingerprint,
    slice_bounds,
)
from rankscribe.jobview import RankSeries
from rankscribe.jobview.feed import (
    DATA_WAIT_TAG,
    FINGERPRINT_TAG,
    STEP_TIME_TAG,
    STEP_TIME_WRITE_AT_ONCE,
    STEP_TIME_WRITE_COUNT,
    STEP_TIME_WRITE_INTERVAL,
)
from rankscribe.writer.deferred import DeferredValue

if TYPE_CHECKING:
    from rankscribe.collector.collection._extractor import ValueSink
    from rankscribe.collector.landscape._saver import LandscapeSaver
    from rankscribe.writer import SummaryRecord

logger = logging.getLogger(__name__)

__all__ = [
    "STEP_TIME_WRITE_AT_ONCE",
    "STEP_TIME_WRITE_COUNT",
    "STEP_TIME_WRITE_INTERVAL",
    "ScalarSeries",
    "SeriesRecorder",
]

# Step times kept before they are written, at most (STEP_TIME_WRITE_COUNT steps,
# STEP_TIME_WRITE_INTERVAL seconds: the job view's, which reads a killed rank's last step
# against them). The second bounds every step of 0.25 ms or more; the count, quicker
# steps. Each write costs the writer thread about 0.5 ms however few steps it holds (its
# NumPy calls, woken with cold caches), time the training thread of a step that holds the
# interpreter waits for: at 256 steps of a 66 us step (the digits example's) that was 1.5
# us a step, at 4,096 steps it is about 0.1 us (tools/bench/collector.py, the digits row).
# A step of STEP_TIME_WRITE_AT_ONCE seconds or more writes its step time at once, and a
# crash then loses no step time of it. A write costs the training thread 0.1-0.3 ms and
# the writer about as much (measured on a 2-core machine): at 0.25 s that is under 0.25 %
# of the step. Shorter steps wait for the next step recorded through the record, the
# second or the 4,096 steps above.


class ScalarSeries:
    """``tag -> (steps, values)`` of one rank, appended in step order."""

    def __init__(self) -> None:
        self._tags: dict[str, tuple[array[int], array[float]]] = {}

    def __len__(self) -> int:
        """The number of points over all tags."""
        return sum(len(steps) for steps, _ in self._tags.values())

    def clear(self) -> None:
        """Empty every tag, in place: arrays handed out by :meth:`column` stay in use."""
        for steps, values in self._tags.values():
            del steps[:]
            del values[:]

    def column(self, tag: str) -> tuple[array[int], array[float]]:
        """The (steps, values) arrays of ``tag``, made empty the first time.

        The collector keeps the arrays of its hot tags and appends to them
        directly: a step that collects nothing then pays two appends.
        """
        found = self._tags.get(tag)
        if found is None:
            found = self._tags[tag] = (array("q"), array("f"))
        return found

    def add(self, tag: str, step: int, value: float) -> None:
        steps, values = self.column(tag)
        steps.append(step)
        values.append(value)

    def payload(self) -> dict[str, tuple[array[int], array[float]]]:
        """A picklable copy (flat arrays pickle as bytes, not as one object per point)."""
        return {
            tag: (array("q", steps), array("f", values))
            for tag, (steps, values) in self._tags.items()
            if steps
        }

    @staticmethod
    def rank_series(rank: int, payload: object) -> RankSeries | None:
        """The :class:`RankSeries` of a :meth:`payload` that arrived, or None if malformed."""
        if not isinstance(payload, dict):
            return None
        scalars: dict[str, list[tuple[int, float]]] = {}
        for tag, column in payload.items():
            if not (isinstance(tag, str) and isinstance(column, tuple) and len(column) == 2):
                return None
            steps, values = column
            if not (
                isinstance(steps, array) and isinstance(values, array) and len(steps) == len(values)
            ):
                return None
            scalars[tag] = list(zip(steps, values, strict=True))
        return RankSeries(rank=rank, scalars=scalars)


class SampleSource(Protocol):
    """Samples taken off the training thread (``system/_sampler.py``), to be recorded."""

    @property
    def pending(self) -> bool: ...

    @property
    def latest_step(self) -> int: ...

    def take(self) -> list[tuple[int, list[tuple[str, float]]]]: ...


class _TimingColumn:
    """One timing tag's kept points, and how many of them are written."""

    __slots__ = ("steps", "tag", "values", "written")

    def __init__(self, tag: str, series: ScalarSeries) -> None:
        self.tag = tag
        self.steps, self.values = series.column(tag)
        self.written = 0


class SeriesRecorder:
    """Records the job-view scalars into a rank's summary record, and keeps its series.

    The collector calls, at a step that collects nothing, :meth:`after_quiet_step`
    (or, on its shortest path, the appends of :meth:`step_time_appenders` and
    :meth:`keep_timing`); at a collected step of the loss alone
    :meth:`keep_collected_step`; at another collected step :meth:`write_kept_step_times`, then
    :meth:`collected_step_sink` and :meth:`add_fingerprint` while it adds the
    step's values, then :meth:`record_collected_step` instead of ``record.record``.

    Timings (``docs/job-view.md``, "Timings"): the step time of every step,
    and, when known, the data wait, the forward time and each section's time
    (:meth:`keep_timing`). Why they wait: a step written alone wakes the
    writer thread, which costs a step that collects nothing several times what
    the rest of the collector does (measured by tools/bench/collector.py).
    Written in a run, the steps join one batch of the writer. A collected step
    whose only value is the loss keeps it here too (:meth:`keep_collected_step`).
    The collector writes them before the next step it records through the
    record (so the file stays in step order), at the end of an epoch and of
    training (an exception's too), and at least every
    :data:`STEP_TIME_WRITE_INTERVAL` seconds or :data:`STEP_TIME_WRITE_COUNT`
    steps, so a rank that dies loses at most that; a step of
    :data:`STEP_TIME_WRITE_AT_ONCE` seconds or more is written at once. A
    forward time read from device events a step or more later is written
    with the step it belongs to.

    Args:
        fingerprints: record ``rankscribe/param_fingerprint`` at the start of
            training and at collected steps.
        fingerprint_parts: how the collector's adapters read a network's
            parameters as raw bytes (``_fingerprint.py``).
        budget: bytes hashed at most per collected step.
        collect_freq: the collector's, for the rotation of the slices.
        step_times: keep and write the step time and data wait of every step;
            False: neither (the collector's ``step_times=False``), other timings stay.
    """

    def __init__(
        self,
        *,
        fingerprints: bool,
        fingerprint_parts: Callable[[object], list[FingerprintPart] | None],
        budget: int = DEFAULT_FINGERPRINT_BUDGET,
        collect_freq: int = 1,
        step_times: bool = True,
    ) -> None:
        self.series = ScalarSeries()
        #: Timing tags neither kept nor written (the step time and data wait when off).
        self._dropped: frozenset[str] = (
            frozenset() if step_times else frozenset({STEP_TIME_TAG, DATA_WAIT_TAG})
        )
        self.fingerprints = fingerprints
        self._fingerprint_parts = fingerprint_parts
        self.budget = budget
        self.collect_freq = collect_freq
        self._fingerprint_failed = False
        self._step_column = _TimingColumn(STEP_TIME_TAG, self.series)
        self._time_steps, self._time_values = self._step_column.steps, self._step_column.values
        wait_column = _TimingColumn(DATA_WAIT_TAG, self.series)
        self._wait_steps, self._wait_values = wait_column.steps, wait_column.values
        self._columns: dict[str, _TimingColumn] = {
            STEP_TIME_TAG: self._step_column,
            DATA_WAIT_TAG: wait_column,
        }
        self.last_write = 0.0
        #: The system sampler, whose samples join the timings' writes (None: none).
        self.samples: SampleSource | None = None
        #: Samples that raced the write of their step, held until a step takes them.
        self._held_samples: list[tuple[int, list[tuple[str, float]]]] = []
        self._last_written_step = -1
        # Scalars read from a device, still on their way: (tag, step, value), in step order.
        self._late: deque[tuple[str, int, Any]] = deque()
        #: The values of collected steps kept to be written with the timings, by tag
        #: (:meth:`keep_collected_step`): handed to the record whole when written.
        self._kept: dict[str, tuple[array[int], array[float]]] = {}
        #: The losses of collected steps taken on the quiet path (:meth:`light_appenders`),
        #: under ``_light_tag``: joined to the series and to ``_kept`` when written.
        self._light_tag = ""
        self._light_steps: array[int] = array("q")
        self._light_values: array[float] = array("d")

    def start_run(self) -> None:
        """A new training run: the series starts empty (the job view is of one run)."""
        self.series.clear()
        self._late.clear()
        self._kept.clear()
        del self._light_steps[:], self._light_values[:]
        for column in self._columns.values():
            column.written = 0
        self._fingerprint_failed = False
        self._last_written_step = -1
        self._held_samples.clear()

    @property
    def has_unwritten_step_times(self) -> bool:
        samples = self.samples
        return (
            (samples is not None and (samples.pending or bool(self._held_samples)))
            or bool(self._kept)
            or bool(self._light_steps)
            or any(column.written < len(column.steps) for column in self._columns.values())
        )

    def _keep_samples(self) -> None:
        """Keep the system samples taken since the last write, each at its step.

        A sample's step is the one running when it was taken. One that raced the
        write of its step goes in at the step after the last one written (the
        step running by then): a step written is never written to again, so the
        live view, which cuts the job's steps at each rank's last, loses nothing.
        Where that step has not started yet (a sample taken after a step's write and
        before the next step, written at an epoch's end), the sample is held for a
        later write, so that the sample as training ends, at the step after the
        last, joins it there instead of going one step further.
        """
        samples = self.samples
        if samples is None or not (samples.pending or self._held_samples):
            return
        latest = samples.latest_step
        taken, self._held_samples = self._held_samples + samples.take(), []
        # Two samples in one step (a step longer than the interval): the later one's
        # readings, and the earlier's of what it lacks (a CPU share is read over 0.1 s at
        # least, so at a shorter interval only some samples carry one).
        by_step: dict[int, dict[str, float]] = {}
        for step, readings in taken:
            at = max(step, self._last_written_step + 1)
            if at > latest:
                self._held_samples.append((step, readings))
            else:
                by_step.setdefault(at, {}).update(readings)
        for step, kept in by_step.items():
            for tag, value in kept.items():
                self.keep_timing(tag, step, value)

    def step_time_appenders(self) -> tuple[Callable[[int], None], Callable[[float], None]]:
        """Appends that keep a step time, for a step the caller knows writes nothing now.

        They stay valid across runs (:meth:`start_run` empties the arrays in place).
        With step times off they keep nothing.
        """
        if STEP_TIME_TAG in self._dropped:
            return _discard, _discard
        return self._time_steps.append, self._time_values.append

    def step_time_extenders(
        self,
    ) -> tuple[Callable[[Iterable[int]], None], Callable[[Iterable[float]], None]]:
        """Extends that keep several step times at once, in step order (as
        :meth:`step_time_appenders`)."""
        if STEP_TIME_TAG in self._dropped:
            return _discard, _discard
        return self._time_steps.extend, self._time_values.extend

    def step_time_columns(
        self,
    ) -> tuple[Sequence[int], Sequence[float], Sequence[int], Sequence[float]]:
        """The step times and data waits kept in this run (steps, seconds; steps, waits),
        the arrays themselves: read them before the next step is kept."""
        return self._time_steps, self._time_values, self._wait_steps, self._wait_values

    def data_wait_appenders(self) -> tuple[Callable[[int], None], Callable[[float], None]]:
        """Appends that keep a data wait (as :meth:`step_time_appenders`)."""
        if DATA_WAIT_TAG in self._dropped:
            return _discard, _discard
        return self._wait_steps.append, self._wait_values.append

    def data_wait_extenders(
        self,
    ) -> tuple[Callable[[Iterable[int]], None], Callable[[Iterable[float]], None]]:
        """Extends that keep several data waits at once (as :meth:`step_time_extenders`)."""
        if DATA_WAIT_TAG in self._dropped:
            return _discard, _discard
        return self._wait_steps.extend, self._wait_values.extend

    def timing_appenders(self, tag: str) -> tuple[Callable[[int], None], Callable[[float], None]]:
        """Appends that keep a timing of ``tag`` (as :meth:`step_time_appenders`)."""
        column = self._columns.get(tag)
        if column is None:
            column = self._columns[tag] = _TimingColumn(tag, self.series)
        return column.steps.append, column.values.append

    def timing_extenders(
        self, tag: str
    ) -> tuple[Callable[[Iterable[int]], None], Callable[[Iterable[float]], None]]:
        """Extends that keep several timings of ``tag`` at once, in step order (as
        :meth:`timing_appenders`)."""
        column = self._columns.get(tag)
        if column is None:
            column = self._columns[tag] = _TimingColumn(tag, self.series)
        return column.steps.extend, column.values.extend

    def keep_timing(self, tag: str, step: int, seconds: float) -> None:
        """Keep a timing other than the step time (written with the step times)."""
        if tag in self._dropped:
            return
        column = self._columns.get(tag)
        if column is None:
            column = self._columns[tag] = _TimingColumn(tag, self.series)
        column.steps.append(step)
        column.values.append(seconds)

    def keep_timings(self, step: int, timings: Sequence[tuple[str, float]]) -> None:
        """Keep several timings of ``step``: ``(tag, seconds)`` pairs."""
        for tag, seconds in timings:
            self.keep_timing(tag, step, seconds)

    def keep_timings_unwritten(self, step: int, timings: Sequence[tuple[str, float]]) -> bool:
        """Keep timings of ``step`` unless that step is written already (a step written is
        never written to again: the live view has cut it); True when kept."""
        if step <= self._last_written_step:
            return False
        self.keep_timings(step, timings)
        return True

    def quiet_limit(self, step: int, landscape: LandscapeSaver | None) -> int:
        """The first step after ``step`` that writes the kept timings (at the count of step
        times kept: a light step keeps none) or saves landscape files: the collector's
        shortest path ends before it at the latest."""
        unwritten = len(self._time_steps) - self._step_column.written
        limit = step + STEP_TIME_WRITE_COUNT - unwritten
        wanted = landscape.next_wanted(step) if landscape is not None else None
        return limit if wanted is None else min(limit, wanted)

    def light_appenders(self, tag: str) -> tuple[Callable[[int], None], Callable[[float], None]]:
        """Appends that keep a light step's loss (a collected step on the quiet path whose
        only value is the loss, read on the host), under ``tag``: as a step time is kept,
        joined to the series and written with the timings (as :meth:`keep_collected_step`
        writes a loss) when they are written."""
        self._light_tag = tag
        return self._light_steps.append, self._light_values.append

    def _take_light(self) -> None:
        """The light steps' losses kept since the last write: into the series, and after
        the collected values kept before them (the steps in order)."""
        steps, values = self._light_steps, self._light_values
        if not steps:
            return
        tag = self._light_tag
        for step, value in zip(steps, values, strict=True):
            self.series.add(tag, step, value)
        kept_steps, kept_values = self._kept_column(tag)
        kept_steps.extend(steps)
        kept_values.extend(values)
        del steps[:], values[:]

    def _kept_column(self, tag: str) -> tuple[array[int], array[float]]:
        """The steps and values of ``tag`` kept to be written with the timings."""
        kept = self._kept.get(tag)
        if kept is None:
            kept = self._kept[tag] = (array("q"), array("d"))
        return kept

    def after_quiet_step(
        self, record: SummaryRecord, step: int, seconds: float | None, *, write_now: bool
    ) -> None:
        """Keep the step time of a step that collected nothing; write those kept when due.

        ``write_now``: write them now (every unit is an epoch).
        """
        if seconds is None:
            return
        if STEP_TIME_TAG not in self._dropped:
            self._time_steps.append(step)
            self._time_values.append(seconds)
        self._write_when_due(record, seconds, write_now=write_now)

    def keep_collected_step(
        self,
        record: SummaryRecord,
        step: int,
        seconds: float | None,
        values: Sequence[tuple[str, float]],
        timings: Sequence[tuple[str, float]] = (),
    ) -> None:
        """A collected step whose values are scalars alone (the loss, on the host): kept,
        in the series at once and for the record with the timings, as a quiet step's step
        time is, and written with them when due (:meth:`after_quiet_step`); its step time
        (``seconds``) and other ``timings`` with it.

        What ``record.record`` of the step would write (one event of the step holding
        its values and timings), without the training thread's work of a record at every
        collected step: a few appends. The caller sees that the step has nothing else to
        record (no histogram, image, fingerprint, tensor, value added to the record or
        by the summary operators, nor a device value on its way).
        """
        self._take_light()  # the earlier steps' first
        for tag, value in values:
            self.series.add(tag, step, value)
            kept_steps, kept_values = self._kept_column(tag)
            kept_steps.append(step)
            kept_values.append(value)
        self.keep_timings(step, timings)
        if seconds is None:
            self._write_when_due(record, 0.0, write_now=False)
        else:
            self.after_quiet_step(record, step, seconds, write_now=False)

    def _write_when_due(self, record: SummaryRecord, seconds: float, *, write_now: bool) -> None:
        """Write what is kept when it is due: ``write_now``, a step of ``seconds`` at
        least :data:`STEP_TIME_WRITE_AT_ONCE`, :data:`STEP_TIME_WRITE_INTERVAL` seconds
        since the last write, or :data:`STEP_TIME_WRITE_COUNT` step times kept."""
        if (
            write_now
            or seconds >= STEP_TIME_WRITE_AT_ONCE
            or _clock.now() - self.last_write >= STEP_TIME_WRITE_INTERVAL
            or len(self._time_steps) - self._step_column.written >= STEP_TIME_WRITE_COUNT
        ):
            self.write_step_times(record)

    def _unwritten(self) -> dict[str, tuple[Sequence[int], Sequence[float]]]:
        """The kept timings not written yet, by tag; they count as written from now."""
        self._keep_samples()
        self._take_light()
        columns: dict[str, tuple[Sequence[int], Sequence[float]]] = {}
        for column in self._columns.values():
            steps, written = column.steps, column.written
            if written < len(steps):
                columns[column.tag] = (steps[written:], column.values[written:])
                column.written = len(steps)
        # The record keeps arrays it is handed as they are: these go whole, new ones follow.
        columns.update(self._kept)
        self._kept = {}
        return columns

    def write_step_times(self, record: SummaryRecord) -> None:
        """Write the kept timings, each step as its own step of ``record``.

        Written apart (``SummaryRecord.write_scalar_columns``: the steps are made on
        the writer thread): the script's pending ``add_value`` values and the summary
        operators' stay for its own ``record``.
        """
        columns = self._unwritten()
        if columns:
            record.write_scalar_columns(columns)
            last = max(max(steps) for steps, _ in columns.values())
            self._last_written_step = max(self._last_written_step, last)
        self.last_write = _clock.now()

    def write_kept_step_times(self, record: SummaryRecord) -> None:
        """Write timings still kept: before a collected step's values are added (only
        a step that came out of order leaves any), at the end of an epoch and of training."""
        if self.has_unwritten_step_times:
            self.write_step_times(record)

    def collected_step_sink(self, record: ValueSink, step: int) -> ValueSink:
        """A sink for a collected step's values that also keeps their scalars."""
        return _KeepingSink(record, self.series, step, self.keep_late)

    def _parts(self, network: object) -> list[FingerprintPart] | None:
        if not self.fingerprints or self._fingerprint_failed or network is None:
            return None
        try:
            parts = self._fingerprint_parts(network)
            if parts is None:
                raise TypeError(f"no parameters can be read from a {type(network).__name__}")
        except (TypeError, ValueError, RuntimeError) as error:
            self._fail(error)
            return None
        return parts

    def _fail(self, error: Exception) -> None:
        self._fingerprint_failed = True
        logger.warning(
            "The parameter fingerprint (%s) is not recorded in this run: %s", FINGERPRINT_TAG, error
        )

    @property
    def has_late(self) -> bool:
        """Whether scalars read from a device are still on their way."""
        return bool(self._late)

    def keep_late(self, tag: str, step: int, value: Any) -> None:
        """Keep ``value`` (a deferred value with ``ready()``) in the series once it arrives."""
        self._late.append((tag, step, value))

    def keep_arrived(self, *, wait: bool = False) -> None:
        """Keep the scalars read from a device that have arrived (``ready()``: no wait),
        in step order; ``wait``: all of them (the end of training, not a step)."""
        late = self._late
        while late and (wait or late[0][2].ready()):
            tag, step, value = late.popleft()
            try:
                number = float(value.resolve())
            except (RuntimeError, TypeError, ValueError) as error:
                logger.warning("%s of step %d was not read from its device: %s", tag, step, error)
                continue
            self.series.add(tag, step, number)

    def _fingerprint(
        self, parts: list[FingerprintPart], bounds: tuple[int, int]
    ) -> int | LateFingerprint | None:
        try:
            return late_slice_fingerprint(parts, *bounds)
        except (TypeError, ValueError, RuntimeError) as error:
            self._fail(error)
            return None

    def add_start_fingerprint(self, record: SummaryRecord, network: object) -> None:
        """The fingerprint of every parameter byte when training begins, at step 0.

        Before any update: ranks that start identical and then part are told
        apart at the first collected step (``docs/job-view.md``, "Divergence").
        """
        parts = self._parts(network)
        if parts is None:
            return
        fingerprint = self._fingerprint(parts, (0, sum(part.nbytes for part in parts)))
        if fingerprint is None:
            return
        # Eval mode: summary operators' values (none yet, normally) stay where they are.
        record.set_mode("eval")
        if isinstance(fingerprint, LateFingerprint):  # its device sums arrive later
            record.add_value("scalar", FINGERPRINT_TAG, fingerprint)
            self.keep_late(FINGERPRINT_TAG, 0, fingerprint)
        else:
            record.add_value("scalar", FINGERPRINT_TAG, float(fingerprint))
            self.series.add(FINGERPRINT_TAG, 0, float(fingerprint))
        record.record(0)
        record.set_mode("train")

    def add_fingerprint(self, sink: ValueSink, network: object, step: int) -> None:
        """The fingerprint of this step's slice of ``network``'s parameters (at most the budget).

        Off for the run after one failure.
        """
        parts = self._parts(network)
        if parts is None:
            return
        total = sum(part.nbytes for part in parts)
        fingerprint = self._fingerprint(
            parts, slice_bounds(total, self.budget, step, self.collect_freq)
        )
        if isinstance(fingerprint, LateFingerprint):
            sink.add_value("scalar", FINGERPRINT_TAG, fingerprint)
        elif fingerprint is not None:
            sink.add_value("scalar", FINGERPRINT_TAG, float(fingerprint))

    def record_collected_step(
        self,
        record: SummaryRecord,
        step: int,
        seconds: float | None,
        plugin_filter: Callable[[str], bool] | None,
        extras: Sequence[tuple[str, float]] = (),
    ) -> None:
        """``record.record(step, plugin_filter=...)``, with the step's timings.

        ``extras``: the step's other timings (data wait, forward time, sections),
        recorded in the same event as its step time.
        """
        self._last_written_step = max(self._last_written_step, step)
        timings = [(STEP_TIME_TAG, seconds)] if seconds is not None else []
        timings.extend(extras)
        timings = [(tag, value) for tag, value in timings if tag not in self._dropped]
        if timings and (plugin_filter is None or plugin_filter("scalar")):
            self._add_timings(record, step, timings)
            timings = []
        record.record(step, plugin_filter=plugin_filter)
        if timings:
            # The filter keeps only some plugins (tensors) at this step: the timings
            # are a second event of the same step, so the filter cannot drop them.
            self._add_timings(record, step, timings)
            record.record(step)

    def _add_timings(
        self, record: SummaryRecord, step: int, timings: Sequence[tuple[str, float]]
    ) -> None:
        # Everything kept before was written just before (write_kept_step_times).
        for tag, seconds in timings:
            record.add_value("scalar", tag, seconds)
            self.keep_timing(tag, step, seconds)
            column = self._columns[tag]
            column.written = len(column.steps)


def _discard(value: object) -> None:
    """An append that keeps nothing (a timing that is off)."""


class _KeepingSink:
    """Passes values on to the record and keeps the scalars in the series."""

    def __init__(
        self,
        record: ValueSink,
        series: ScalarSeries,
        step: int,
        late: Callable[[str, int, Any], None],
    ) -> None:
        self._record, self._series, self._step, self._late = record, series, step, late

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        self._record.add_value(plugin, name, value)
        if plugin == "scalar" and isinstance(value, DeferredValue):
            self._late(name, self._step, value)  # read from a device: kept when it arrives
        elif plugin == "scalar":
            try:
                number = float(value)
            except (TypeError, ValueError):
                return  # the record took it (an array of one); the series needs a number
            self._series.add(name, self._step, number)
