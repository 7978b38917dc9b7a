"""The scalars this rank's collector recorded, kept for the job view at the end of a run.

At the end of training (and of evaluation) every rank hands its series to rank 0,
which writes the job's cross-rank curves (:func:`rankscribe.lineage.jobview.write_job_view`).
Only what the collector itself records is kept, as it records it: its scalars
(``loss/auto``), the step time of every step and the parameter fingerprint of
every collected step. Never tensors, histograms or images, so the memory is
12 bytes per point (two flat arrays per tag, not a Python object per point).
Values are kept as float32, the summary scalar type: the job view rank 0 writes
from them is the one the offline merge computes from the rank files.
Scalars that summary operators record go into the rank's files only; the offline
merge (``rankscribe-lineage merge``) reads those too.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any

from rankscribe.collector._fingerprint import parameter_fingerprint
from rankscribe.lineage.jobview import FINGERPRINT_TAG, STEP_TIME_TAG, RankSeries

if TYPE_CHECKING:
    import numpy.typing as npt

    from rankscribe.collector.adapters import NetworkView
    from rankscribe.collector.collection._extractor import ValueSink
    from rankscribe.collector.collection._schedule import CollectionSchedule
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

#: Step times kept before they are written, at most (steps, seconds).
STEP_TIME_WRITE_COUNT = 256
STEP_TIME_WRITE_INTERVAL = 1.0
#: A step this long (seconds) writes its step time at once: waking the writer
#: costs it nothing that matters, and a crash then loses no step time of it.
STEP_TIME_WRITE_AT_ONCE = 0.02


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
        return {tag: (array("q", steps), array("f", values))
                for tag, (steps, values) in self._tags.items() if steps}

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
            if not (isinstance(steps, array) and isinstance(values, array)
                    and len(steps) == len(values)):
                return None
            scalars[tag] = list(zip(steps, values, strict=True))
        return RankSeries(rank=rank, scalars=scalars)


class SeriesRecorder:
    """Records the job-view scalars into a rank's summary record, and keeps its series.

    The collector calls, at a step that collects nothing, :meth:`after_quiet_step`
    (or, on its shortest path, the appends of :meth:`step_time_appenders`); at a
    collected step :meth:`write_kept_step_times`, then :meth:`collected_step_sink`
    and :meth:`add_fingerprint` while it adds the step's values, then
    :meth:`record_collected_step` instead of ``record.record``.

    Why step times wait: a step written alone wakes the writer thread, which
    costs a step that collects nothing several times what the rest of the
    collector does (measured by tools/bench/collector.py). Written in a run,
    the steps join one batch of the writer. The collector writes them before
    the next collected step (so the file stays in step order), at the end of
    an epoch, and at least every :data:`STEP_TIME_WRITE_INTERVAL` seconds or
    :data:`STEP_TIME_WRITE_COUNT` steps, so a rank that dies loses at most that;
    a step of :data:`STEP_TIME_WRITE_AT_ONCE` seconds or more is written at once.

    Args:
        fingerprints: record ``rankscribe/param_fingerprint`` at collected steps.
        network_view, to_numpy: how the collector's adapters read a network
            and a parameter.
    """

    def __init__(
        self,
        *,
        fingerprints: bool,
        network_view: Callable[[object], NetworkView | None],
        to_numpy: Callable[[object], npt.NDArray[Any]],
    ) -> None:
        self.series = ScalarSeries()
        self.fingerprints = fingerprints
        self._network_view, self._to_numpy = network_view, to_numpy
        self._network: tuple[object, NetworkView | None] | None = None
        self._fingerprint_failed = False
        self._time_steps, self._time_values = self.series.column(STEP_TIME_TAG)
        self._written = 0
        self.last_write = 0.0

    def start_run(self) -> None:
        """A new training run: the series starts empty (the job view is of one run)."""
        self.series.clear()
        self._written = 0
        self._fingerprint_failed = False

    @property
    def has_unwritten_step_times(self) -> bool:
        return self._written < len(self._time_steps)

    def step_time_appenders(self) -> tuple[Callable[[int], None], Callable[[float], None]]:
        """Appends that keep a step time, for a step the caller knows writes nothing now.

        They stay valid across runs (:meth:`start_run` empties the arrays in place).
        """
        return self._time_steps.append, self._time_values.append

    def next_busy_step(self, step: int, schedule: CollectionSchedule,
                       landscape: LandscapeSaver | None) -> int:
        """The first step after ``step`` that collects, saves landscape files or writes here.

        The steps before it may take the collector's shortest path.
        """
        if not schedule.started:
            return 0
        unwritten = len(self._time_steps) - self._written
        # The step before a collected one writes the step times kept so far.
        busy = min(schedule.next_collected(step) - 1, step + STEP_TIME_WRITE_COUNT - unwritten)
        wanted = landscape.next_wanted(step) if landscape is not None else None
        return busy if wanted is None else min(busy, wanted)

    def after_quiet_step(self, record: SummaryRecord, step: int, seconds: float | None,
                         *, write_now: bool) -> None:
        """Keep the step time of a step that collected nothing; write those kept when due.

        ``write_now``: the next step is collected (or every step is an epoch).
        """
        if seconds is None:
            return
        self._time_steps.append(step)
        self._time_values.append(seconds)
        now = perf_counter()
        if (write_now or seconds >= STEP_TIME_WRITE_AT_ONCE
                or now - self.last_write >= STEP_TIME_WRITE_INTERVAL
                or len(self._time_steps) - self._written >= STEP_TIME_WRITE_COUNT):
            self.write_step_times(record)

    def write_step_times(self, record: SummaryRecord) -> None:
        """Write the kept step times, each as its own step of ``record``."""
        steps, values = self._time_steps, self._time_values
        for index in range(self._written, len(steps)):
            record.add_value("scalar", STEP_TIME_TAG, values[index])
            record.record(steps[index])
        self._written = len(steps)
        self.last_write = perf_counter()

    def write_kept_step_times(self, record: SummaryRecord) -> None:
        """Write step times still kept, leaving summary operators' values alone.

        Before a collected step's values are added (only a step that came out
        of order leaves any), at the end of an epoch and of training. In eval
        mode the record leaves the summary operators' values where they are:
        they belong to the step being collected, or to none. The collector
        calls this in training only, so the record goes back to train mode.
        """
        if self.has_unwritten_step_times:
            record.set_mode("eval")
            self.write_step_times(record)
            record.set_mode("train")

    def collected_step_sink(self, record: ValueSink, step: int) -> ValueSink:
        """A sink for a collected step's values that also keeps their scalars."""
        return _KeepingSink(record, self.series, step)

    def add_fingerprint(self, sink: ValueSink, network: object) -> None:
        """The fingerprint of ``network``'s parameters; off for the run after one failure."""
        if not self.fingerprints or self._fingerprint_failed or network is None:
            return
        if self._network is None or self._network[0] is not network:
            self._network = (network, self._network_view(network))
        view = self._network[1]
        try:
            if view is None:
                raise TypeError(f"no parameters can be read from a {type(network).__name__}")
            fingerprint = parameter_fingerprint(view.parameters(), self._to_numpy)
        except (TypeError, ValueError, RuntimeError) as error:
            self._fingerprint_failed = True
            logger.warning("The parameter fingerprint (%s) is not recorded in this run: %s",
                           FINGERPRINT_TAG, error)
            return
        sink.add_value("scalar", FINGERPRINT_TAG, float(fingerprint))

    def record_collected_step(
        self,
        record: SummaryRecord,
        step: int,
        seconds: float | None,
        plugin_filter: Callable[[str], bool] | None,
    ) -> None:
        """``record.record(step, plugin_filter=...)``, with the step's step time."""
        if seconds is not None and (plugin_filter is None or plugin_filter("scalar")):
            self._add_step_time(record, step, seconds)
            seconds = None
        record.record(step, plugin_filter=plugin_filter)
        if seconds is not None:
            # The filter keeps only some plugins (tensors) at this step: the step
            # time is a second event of the same step, so the filter cannot drop it.
            self._add_step_time(record, step, seconds)
            record.record(step)

    def _add_step_time(self, record: SummaryRecord, step: int, seconds: float) -> None:
        record.add_value("scalar", STEP_TIME_TAG, seconds)
        self._time_steps.append(step)
        self._time_values.append(seconds)
        self._written = len(self._time_steps)


class _KeepingSink:
    """Passes values on to the record and keeps the scalars in the series."""

    def __init__(self, record: ValueSink, series: ScalarSeries, step: int) -> None:
        self._record, self._series, self._step = record, series, step

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        self._record.add_value(plugin, name, value)
        if plugin == "scalar":
            try:
                number = float(value)
            except (TypeError, ValueError):
                return  # the record took it (an array of one); the series needs a number
            self._series.add(name, self._step, number)
