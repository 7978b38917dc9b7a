"""The collector's timings besides the step time: data wait, forward time, sections.

What each measures is in ``docs/job-view.md`` ("Timings"); in short:

- ``rankscribe/data_wait``: from the end of one step (the collector's
  ``step_end``) to the begin of the next, within an epoch; none when the loop
  tells the step's start itself (``params.step_started_at``: TrainSession);
- ``rankscribe/forward_time``: the network's ``forward``, timed by the
  adapter's hooks (:meth:`rankscribe.collector.adapters.AdapterRegistry.forward_timer`;
  on an accelerator read from device events a step or more later);
- ``rankscribe/section/<name>``: ``with collector.section(name):``;
- ``rankscribe/gradient/norm/<bucket>``, ``rankscribe/gradient/peak/<bucket>`` and
  ``rankscribe/gradient/ready_time``: each bucket's local gradient norm and peak (the
  largest norm of a row of 256 consecutive elements) before the reduce, and when the
  last bucket was ready,
  from the adapter's gradient probe of a DDP network
  (:meth:`rankscribe.collector.adapters.AdapterRegistry.gradient_probe`; on an
  accelerator the norms are read a step or more later), or from the arrays a loop
  of the user's own hands ``SummaryCollector.allreduce_gradients`` (``_reduced.py``).

:class:`StepTimings` holds that state for one collector; the collector's
``step_end`` keeps the values in its :class:`~rankscribe.collector.jobview._series.SeriesRecorder`.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from rankscribe.collector import _clock
from rankscribe.collector._callback import CallbackParams
from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.collector.jobview._series import SeriesRecorder
from rankscribe.jobview.feed import (
    ARRIVAL_TIME_TAG,
    DATA_WAIT_TAG,
    FORWARD_TIME_TAG,
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_PEAK_TAG_PREFIX,
    GRADIENT_READY_TAG,
    SECTION_TAG_PREFIX,
    SYNC_SECTION,
)

logger = logging.getLogger(__name__)

__all__ = ["Section", "StepTimings", "gradient_values", "section_tag"]

_SECTION_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def section_tag(name: object) -> str:
    """The rank tag of section ``name``, or a clear error naming the argument."""
    if not isinstance(name, str):
        raise CollectorTypeError(
            f"For 'section', the argument 'name' should be a str of letters, digits, '_', "
            f"'.' and '-', but got {type(name).__name__} {name!r:.40}."
        )
    if not _SECTION_NAME.fullmatch(name):
        raise CollectorValueError(
            f"For 'section', the argument 'name' should be a non-empty str of ASCII letters, "
            f"digits, '_', '.' and '-' (it becomes the tag '{SECTION_TAG_PREFIX}<name>'), but "
            f"got {name!r:.60}."
        )
    return SECTION_TAG_PREFIX + name


def gradient_values(
    norms: list[tuple[int, float, float]], ready: float | None, *, arrival: bool = False
) -> list[tuple[str, float]]:
    """A step's bucket norms and peaks (``(bucket, norm, peak)``) and ready time from the
    gradient probe, as ``(tag, value)``.

    ``arrival``: the ready time (the step's last bucket handed to the reduce) is the
    rank's arrival at the collective too, ``rankscribe/arrival_time``, which the straggler
    rule judges (a slow backward names its rank, although DDP makes every rank's step time
    equal): so for the DDP probe, whose ``arrival`` attribute says so.
    """
    found = [(GRADIENT_NORM_TAG_PREFIX + str(bucket), norm) for bucket, norm, _ in norms]
    found.extend((GRADIENT_PEAK_TAG_PREFIX + str(bucket), peak) for bucket, _, peak in norms)
    if ready is not None:
        found.append((GRADIENT_READY_TAG, ready))
        if arrival:
            found.append((ARRIVAL_TIME_TAG, ready))
    return found


class Section:
    """``with collector.section(name):``: logs its end and the seconds inside, which the
    step's timings add up (each entry goes to the step it ended in)."""

    __slots__ = ("_log", "_started", "_tag")

    def __init__(self, log: list[tuple[float, str, float]], tag: str) -> None:
        self._log, self._tag = log, tag
        self._started = 0.0

    def __enter__(self) -> Section:
        self._started = _clock.now()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        ended = _clock.now()
        self._log.append((ended, self._tag, ended - self._started))


class StepTimings:
    """One collector's data wait, forward timer and section totals.

    Attributes read on the collector's shortest path: ``data_wait`` (this
    step's, or None), ``last_end`` (perf_counter at the end of the last step of
    the epoch, or None), ``forward`` (the forward timer, or None) and
    ``section_log`` (each section entered since the step's timings were last taken: its
    end, its tag and its seconds) and ``gradient``
    (the gradient probe, or None; ``gradients=False``: never one).
    """

    def __init__(
        self, series: SeriesRecorder, adapters: AdapterRegistry, *, gradients: bool = True
    ) -> None:
        self._series, self._adapters = series, adapters
        #: Whether gradient norms are recorded (the collector's ``gradient_probe``).
        self.gradients_on = gradients
        self.data_wait: float | None = None
        self.last_end: float | None = None
        self.forward: Any = None
        self.gradient: Any = None
        #: Seconds the gradient probe spent on the training thread, not yet in the
        #: collector's cost (the collector takes them with :meth:`take_probe_seconds`).
        self.probe_seconds = 0.0
        self.section_log: list[tuple[float, str, float]] = []
        self._tags: dict[str, str] = {}  # validated name -> tag
        # Bound once (the arrays stay across runs): a quiet step appends with no lookup.
        self._forward_step, self._forward_seconds = series.timing_appenders(FORWARD_TIME_TAG)
        self._extend_forward_steps, self._extend_forward_seconds = series.timing_extenders(
            FORWARD_TIME_TAG
        )

    @property
    def on_device(self) -> bool:
        """Whether the forward is timed on a device (the cost budget's windows then are too:
        :meth:`device_mark`)."""
        return bool(getattr(self.forward, "on_device", False))

    @property
    def loggable(self) -> bool:
        """Whether a step's timings can be read after a loop logged the step (the
        collector's quiet steps: ``rankscribe.collector._callback.QuietSteps``): no
        gradient probe, and no forward timer or one on the CPU that files calls by their
        end (``take_logged``). Sections are filed by their end too."""
        timer = self.forward
        return self.gradient is None and (
            timer is None
            or (not getattr(timer, "on_device", True) and hasattr(timer, "take_logged"))
        )

    def keep_logged(self, first: int, starts: Sequence[float], ends: Sequence[float]) -> None:
        """Keep the forward times and sections (with the arrival a ``sync`` section gives)
        of steps ``first``, ``first + 1``, ... that a loop logged, started at ``starts``
        and ended at ``ends`` (:attr:`loggable`)."""
        timer = self.forward
        if timer is not None:
            steps, seconds = timer.take_logged(first, ends)
            if steps:
                self._extend_forward_steps(steps)
                self._extend_forward_seconds(seconds)
        log = self.section_log
        if not log or not ends:
            return
        last = ends[-1]
        by_step: dict[int, dict[str, float]] = {}
        taken = 0
        for ended, tag, seconds in log:
            if ended > last:
                break  # the step under way's
            totals = by_step.setdefault(bisect.bisect_left(ends, ended), {})
            totals[tag] = totals.get(tag, 0.0) + seconds
            taken += 1
        del log[:taken]
        keep = self._series.keep_timing
        for index, totals in by_step.items():
            step = first + index
            for tag, seconds in totals.items():
                keep(tag, step, seconds)
            arrival = _arrival(totals, ends[index] - starts[index])
            if arrival is not None:
                keep(ARRIVAL_TIME_TAG, step, arrival)

    def section(self, name: str) -> Section:
        tag = self._tags.get(name) if type(name) is str else None
        if tag is None:
            tag = self._tags[name] = section_tag(name)
        return Section(self.section_log, tag)

    def start_run(self, params: CallbackParams) -> None:
        """A run begins: nothing carries over; in training the forward hooks go on, and
        the gradient probe on ``params.gradient_network`` (else the network trained)."""
        self.last_end = self.data_wait = None
        self.section_log.clear()
        if params.mode != "train":
            if self.forward is not None:
                self.forward.reset()
            if self.gradient is not None:
                self.gradient.reset()
            return
        self.close()
        network = params.train_network if params.train_network is not None else params.network
        try:
            self.forward = self._adapters.forward_timer(network)
        except (TypeError, ValueError, RuntimeError) as error:
            logger.warning(
                "The forward time (%s) is not recorded in this run: %s", FORWARD_TIME_TAG, error
            )
            self.forward = None
        if self.gradients_on:
            wrapper = params.gradient_network
            try:
                self.gradient = self._adapters.gradient_probe(
                    wrapper if wrapper is not None else network
                )
            except (TypeError, ValueError, RuntimeError) as error:
                logger.warning("The gradient probe is off in this run: %s", error)
                self.gradient = None

    def device_mark(self) -> Any:
        """A timing event recorded now on the device the forward is timed on, or None on
        the CPU (the cost budget's windows are timed on the device too: cost/_budget.py)."""
        timer = self.forward
        mark = getattr(timer, "mark", None) if timer is not None else None
        return mark() if callable(mark) else None

    def take_probe_seconds(self) -> float:
        """The gradient probe's seconds since the last call (for the cost budget)."""
        seconds, self.probe_seconds = self.probe_seconds, 0.0
        return seconds

    def epoch_begin(self) -> None:
        """What happens between epochs (evaluation, checkpoints) is no data wait."""
        self.last_end = None
        self.section_log.clear()
        if self.forward is not None:
            self.forward.reset()
        if self.gradient is not None:
            self.gradient.reset()

    def extras(
        self,
        step: int,
        *,
        with_wait: bool = False,
        step_seconds: float | None = None,
        started: float | None = None,
    ) -> list[tuple[str, float]]:
        """The step's forward time, gradient norms and sections (and data wait,
        ``with_wait``), and its arrival: when its last gradient bucket was ready (from
        ``started``, the step's start), else, with a ``sync`` section and
        ``step_seconds``, the step time less the time in it.

        Earlier steps' forward times and norms (read from a device) are kept now.
        """
        found: list[tuple[str, float]] = []
        if with_wait and self.data_wait is not None:
            found.append((DATA_WAIT_TAG, self.data_wait))
        timer = self.forward
        if timer is not None:
            for taken, seconds in timer.take(step):
                if taken == step:
                    found.append((FORWARD_TIME_TAG, seconds))
                else:  # read from device events a step or more later
                    self._series.keep_timing(FORWARD_TIME_TAG, taken, seconds)
        probe = self.gradient
        arrived = False
        if probe is not None:
            self.probe_seconds += _spent(probe)
            arrives = bool(getattr(probe, "arrival", False))
            for taken, norms, ready in probe.take(step, started):
                values = gradient_values(norms, ready, arrival=arrives)
                if taken == step:
                    found.extend(values)
                    arrived = arrives and ready is not None
                else:  # norms read from the device a step or more later
                    self._series.keep_timings(taken, values)
        if self.section_log:
            totals = self._take_sections()
            found.extend(totals.items())
            arrival = None if arrived else _arrival(totals, step_seconds)
            if arrival is not None:
                found.append((ARRIVAL_TIME_TAG, arrival))
        return found

    def _take_sections(self) -> dict[str, float]:
        """The step's sections, added up by tag (the log is empty after it)."""
        totals: dict[str, float] = {}
        for _, tag, seconds in self.section_log:
            totals[tag] = totals.get(tag, 0.0) + seconds
        self.section_log.clear()
        return totals

    def keep_extras(
        self, step: int, step_seconds: float | None = None, started: float | None = None
    ) -> None:
        """Keep the step's forward time (and earlier ones), norms, sections and arrival
        (as :meth:`extras`): a quiet step's path."""
        timer = self.forward
        if timer is not None:
            for taken, seconds in timer.take(step):
                self._forward_step(taken)
                self._forward_seconds(seconds)
        probe = self.gradient
        arrived = False
        if probe is not None:
            self.probe_seconds += _spent(probe)
            arrives = bool(getattr(probe, "arrival", False))
            for taken, norms, ready in probe.take(step, started):
                self._series.keep_timings(taken, gradient_values(norms, ready, arrival=arrives))
                arrived = arrived or (arrives and taken == step and ready is not None)
        if self.section_log:
            totals = self._take_sections()
            for tag, seconds in totals.items():
                self._series.keep_timing(tag, step, seconds)
            arrival = None if arrived else _arrival(totals, step_seconds)
            if arrival is not None:
                self._series.keep_timing(ARRIVAL_TIME_TAG, step, arrival)

    def gradient_parameters(self, verdicts: Mapping[str, object]) -> dict[str, str]:
        """``job/gradient_parameters/<rank>``: the parameters of the bucket each named rank
        was named in (docs/job-view.md, "Gradient"), as far as the probe learnt them."""
        learnt = getattr(self.gradient, "bucket_parameters", None)
        if not isinstance(learnt, dict):
            return {}
        found: dict[str, str] = {}
        for key, bucket in verdicts.items():
            if not key.startswith(_BUCKET_KEY) or not isinstance(bucket, int):
                continue
            names = learnt.get(bucket)
            if names:
                shown = names[:_NAMES_SHOWN]
                more = len(names) - len(shown)
                text = ",".join(shown) + (f",... ({more} more)" if more else "")
                found[_PARAMETERS_KEY + key[len(_BUCKET_KEY) :]] = text
        return found

    def finish(self) -> None:
        """Training ends: forward times and gradient norms still on a device are kept."""
        if self.forward is not None:
            for taken, seconds in self.forward.finish():
                self._series.keep_timing(FORWARD_TIME_TAG, taken, seconds)
        if self.gradient is not None:
            arrives = bool(getattr(self.gradient, "arrival", False))
            for taken, norms, ready in self.gradient.finish():
                self._series.keep_timings(taken, gradient_values(norms, ready, arrival=arrives))

    def close(self) -> None:
        """Remove the forward hooks and quiet the gradient probe (DDP keeps its hook)."""
        timer, self.forward = self.forward, None
        if timer is not None:
            timer.remove()
        probe, self.gradient = self.gradient, None
        if probe is not None:
            probe.remove()


#: The verdict keys of a gradient finding's bucket, and of its parameters (``<rank>`` after).
_BUCKET_KEY = "job/gradient_bucket/"
_PARAMETERS_KEY = "job/gradient_parameters/"
#: Parameter names a verdict lists of a bucket at most (a 25 MB bucket holds hundreds).
_NAMES_SHOWN = 8

#: The tag of the section a rank's collective runs in (``with collector.section("sync"):``).
_SYNC_TAG = SECTION_TAG_PREFIX + SYNC_SECTION


def _spent(probe: Any) -> float:
    """A gradient probe's own seconds since it was last asked (0 for one that keeps none)."""
    take_spent = getattr(probe, "take_spent", None)
    return float(take_spent()) if callable(take_spent) else 0.0


def _arrival(totals: dict[str, float], step_seconds: float | None) -> float | None:
    """When the rank was ready to synchronise: the step time less its time in the ``sync``
    section (None without one, or without the step time)."""
    synced = totals.get(_SYNC_TAG)
    if synced is None or step_seconds is None:
        return None
    return max(step_seconds - synced, 0.0)
