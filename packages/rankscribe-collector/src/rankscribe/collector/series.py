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
from typing import Any

from rankscribe.collector import adapters
from rankscribe.collector.adapters import NetworkView
from rankscribe.collector.extract import ValueSink
from rankscribe.collector.fingerprint import parameter_fingerprint
from rankscribe.lineage.jobview import FINGERPRINT_TAG, STEP_TIME_TAG, RankSeries
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

    - :meth:`keep_step_time` / :meth:`write_step_times`: ``rankscribe/step_time``
      of a step that collects nothing is kept first and written with the next
      ones, each as its own step (see below);
    - :meth:`add_step_time`: the step time joins the event of a collected step;
    - :meth:`collected_step_sink`: a sink for the values of a collected step
      that also keeps their scalars (the collector's ``loss/auto``);
    - :meth:`add_fingerprint`: ``rankscribe/param_fingerprint`` of a collected step.

    Why step times wait: a step written alone wakes the writer thread, which
    costs a step that collects nothing several times what the rest of the
    collector does (measured by tools/bench/collector.py). Written in a run,
    the steps join one batch of the writer. The collector writes them before
    the next collected step (so the file stays in step order), at the end of
    an epoch, and at least every :data:`STEP_TIME_WRITE_INTERVAL` seconds or
    :data:`STEP_TIME_WRITE_COUNT` steps, so a rank that dies loses at most that;
    a step of :data:`STEP_TIME_WRITE_AT_ONCE` seconds or more is written at once.
    """

    def __init__(self, *, fingerprints: bool) -> None:
        self.series = ScalarSeries()
        self.fingerprints = fingerprints
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

    def keep_step_time(self, step: int, seconds: float, now: float) -> bool:
        """Keep a step time for :meth:`write_step_times`; True when they are due now."""
        self._time_steps.append(step)
        self._time_values.append(seconds)
        return (len(self._time_steps) - self._written >= STEP_TIME_WRITE_COUNT
                or now - self.last_write >= STEP_TIME_WRITE_INTERVAL
                or seconds >= STEP_TIME_WRITE_AT_ONCE)

    @property
    def has_unwritten_step_times(self) -> bool:
        return self._written < len(self._time_steps)

    @property
    def unwritten_step_times(self) -> int:
        return len(self._time_steps) - self._written

    def step_time_appenders(self) -> tuple[Callable[[int], None], Callable[[float], None]]:
        """The appends of :meth:`keep_step_time` for a step the caller knows writes nothing.

        They stay valid across runs (:meth:`start_run` empties the arrays in place).
        """
        return self._time_steps.append, self._time_values.append

    def write_step_times(self, record: SummaryRecord, now: float) -> None:
        """Write the kept step times, each as its own step of ``record``."""
        steps, values = self._time_steps, self._time_values
        for index in range(self._written, len(steps)):
            record.add_value("scalar", STEP_TIME_TAG, values[index])
            record.record(steps[index])
        self._written = len(steps)
        self.last_write = now

    def add_step_time(self, record: ValueSink, step: int, seconds: float) -> None:
        """Add a step time to the step ``record`` is collecting (written with it)."""
        record.add_value("scalar", STEP_TIME_TAG, seconds)
        self._time_steps.append(step)
        self._time_values.append(seconds)
        self._written = len(self._time_steps)

    def collected_step_sink(self, record: ValueSink, step: int) -> ValueSink:
        return _KeepingSink(record, self.series, step)

    def add_fingerprint(self, sink: ValueSink, network: object) -> None:
        """The fingerprint of ``network``'s parameters; off for the run after one failure."""
        if not self.fingerprints or self._fingerprint_failed or network is None:
            return
        if self._network is None or self._network[0] is not network:
            self._network = (network, adapters.network_view(network))
        view = self._network[1]
        try:
            if view is None:
                raise TypeError(f"no parameters can be read from a {type(network).__name__}")
            fingerprint = parameter_fingerprint(view.parameters())
        except (TypeError, ValueError) as error:
            self._fingerprint_failed = True
            logger.warning("The parameter fingerprint (%s) is not recorded in this run: %s",
                           FINGERPRINT_TAG, error)
            return
        sink.add_value("scalar", FINGERPRINT_TAG, float(fingerprint))


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
