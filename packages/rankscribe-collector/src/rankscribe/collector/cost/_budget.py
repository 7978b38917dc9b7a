"""The collector's cost budget: what it measures, when it sheds work, and what it says.

The collector times its own work on the training thread at every step (its ``step_end``;
the shortest path of a step that collects nothing with one more clock read; a collected step,
a step that writes timings or saves landscape parameters from its first clock read to its last;
in a ``TrainSession`` whose only callback is the collector, from the session's ``step`` call),
and within that the histograms, the input images, the fingerprint and the landscape save
apart. Here those seconds are added up over a *window* of steps, with the CPU time its
background threads spent meanwhile (``_threads``) and the time by which its work slowed
the training's own steps (``_slowdown``, read from the window's step times), and at each
window's end:

- recorded, per step of the window, as :data:`TRAINING_COST_TAG`,
  :data:`THREADS_COST_TAG` and :data:`WALL_COST_TAG` (the training thread's time plus
  the slowdown: what the step's wall clock pays; seconds per step, docs/job-view.md,
  "Timings");
- compared with the budget, a share of the step: the larger of (training thread +
  threads' CPU) and the wall cost, over the window's wall time less the collector's
  own and the slowdown (the first window: the first alone; below). Over it, optional
  work is shed, in
  :data:`SHED_ORDER`: histograms at fewer collected steps (every k-th, k chosen to bring
  the measured cost down to half the budget), then the input images the same way, then
  the parameter fingerprint of collected steps, then the landscape sets not saved yet.
  Loss, timings and lineage are never shed. The first decision is said once, on rank 0,
  as a warning; a later one in the same run at INFO. Where what is never shed is over
  :data:`FLOOR_MARGIN` times the budget by itself in :data:`FLOOR_WINDOWS` full windows in
  a row, that is said once a run as well: no shedding keeps the budget there.

The first :data:`WARMUP_STEPS` steps are not measured: they hold what a run pays once (the
first collected step's graph and dataset graph, the default landscape's saves at steps 1-19,
torch's first steps). Nor are ``begin`` and the end of training. One look is taken in them
(the *first look*): from the first collected step to the first collected step after it by
which :data:`MIN_WINDOW_SECONDS` have passed (the first step's histograms pay for first
calls, about 1.2 ms for a small network here, which that much of the steps holds near 1 %,
under the margin), the histograms and input images of its collected steps on the collector's
clocks, against its steps. Where they cost the budget times :data:`FIRST_WINDOW_MARGIN` or
more, they are shed from that collected step on, all of them, and nothing else (the look
measures nothing else). All of them: the look cannot read what their encoding slows the
next steps by, which a full window's slowdown reads and which can
be more than the work itself (the rest waits for the windows: what a first step costs
besides them is paid once). A look that has not taken that long by the warm-up's end decides
nothing. So a model whose histograms cost a fifth of its ~10 ms step pays for them at step 1
alone where its steps up to 10 take 0.1 s (at step 10 too where they do not), not at each
collected step of the warm-up. Not where the forward is timed on an accelerator, whose host
runs ahead of the device most in a run's first steps (below; :meth:`CostBudget.start_run`'s
``first_look``), and not where the budget is off. The first
window opens at the first step after them that the collector works at (at the default
frequency the collected step 20), and is one collected step long (at least
:data:`FIRST_WINDOW_STEPS`): a model whose defaults cost many times the budget pays for
them at no collected step after the warm-up. Being short, it decides only
a cost of :data:`FIRST_WINDOW_MARGIN` times the budget or more, and on the collector's own
clocks alone (its time on the training thread and its threads' CPU): a slowdown read from
the steps around one collected step would count one stall of the machine there as the
collector's, which a full window's median over its collected steps leaves out.

On an accelerator the host runs ahead of the device, by up to the device's queue, most of
all in a run's first steps: a window's time on the host's clock is then shorter than the
steps it holds take, and a share of it reads too high (on an H200, 18-22 % on the host's
clock, 7.4-15.6 % on the device's, where the unshed histograms cost the job's device
steps 1.7 %: the rest is the host's accounting, which a device-bound step hides;
docs/collector-cost.md). So where the collector is given a *mark* at each
window's ends (a timing event recorded on the device's stream: :class:`DeviceMark`), the
window's time is the longer of the host's and the device's between its two marks, and
the decision waits until the device has passed the window's end (:meth:`CostBudget.settle`,
at a later step; ``query()``, never a wait). A decision still waiting when the next window
closes is made on the host's clock. The cost tags do not wait: they are seconds per step,
not shares.

Each rank decides for itself. That is safe because nothing shed is compared across
ranks step by step in a way a missing point breaks: histograms, images and landscape
files are each rank's own; a fingerprint a rank no longer records leaves the ranks that
still record one comparing the same slice (the slice is chosen by the step, not by the
rank), so the divergence rule counts fewer ranks there and names no one falsely; the
tensor-collection steps shared among the ranks are never touched.
docs/collector-cost.md, "The cost budget".
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import Protocol

from rankscribe.collector import _clock
from rankscribe.collector.cost._slowdown import WROTE, Slowed, StepTimes, slowed_seconds
from rankscribe.collector.cost._threads import (
    ENCODER,
    LANDSCAPE,
    WRITER,
    ThreadKind,
    collector_threads_cpu,
    cpu_since,
)
from rankscribe.collector.errors import CollectorValueError

logger = logging.getLogger(__name__)

__all__ = [
    "COST_BUDGET_ENV",
    "DEFAULT_COST_BUDGET",
    "SHED_ORDER",
    "THREADS_COST_TAG",
    "TRAINING_COST_TAG",
    "WALL_COST_TAG",
    "WARMUP_STEPS",
    "CostBudget",
    "check_cost_budget",
]

#: The budget when neither the argument nor the variable gives one: 2 % of the step.
DEFAULT_COST_BUDGET = 0.02
#: The environment variable read when ``cost_budget`` is not given.
COST_BUDGET_ENV = "RANKSCRIBE_COST_BUDGET"
#: Seconds per step of the collector's work on the training thread, over a window.
TRAINING_COST_TAG = "rankscribe/collector_cost/training"
#: CPU seconds per step of the collector's background threads, over a window.
THREADS_COST_TAG = "rankscribe/collector_cost/threads"
#: Seconds per step the collector costs the step's wall clock: its training thread's,
#: plus the slowdown of the training's own steps after its busy steps (``_slowdown``).
WALL_COST_TAG = "rankscribe/collector_cost/wall"
#: Steps of a run not measured (what a run pays once falls in them: the landscape's default
#: saves are at steps 1-19).
WARMUP_STEPS = 19
#: A window is at least this many steps, and holds this many collected steps at least...
MIN_WINDOW_STEPS = 100
COLLECTED_PER_WINDOW = 5
#: ... and at least this many seconds, by the steps of the window before it. 100 steps
#: of 66 us (the digits example's) are 7 ms: one stall of the machine of a millisecond
#: would read as a sixth of the collector's share, and each window's closing (a step off
#: the shortest path, the slowdown read, the threads' CPU read) cost 2 us a step there.
#: Steps of 1 ms or more are unchanged.
MIN_WINDOW_SECONDS = 0.1
#: The first window is shorter, so that a model whose defaults cost far more than the
#: budget is not paid for over 100 steps: at least this many steps and collected steps
#: (one: the collected step that opens it)...
FIRST_WINDOW_STEPS = 10
FIRST_WINDOW_COLLECTED = 1
#: ... and it decides only a cost at least this many times the budget (a short window is
#: noisier; a cost nearer the budget waits for the next, full-length window).
FIRST_WINDOW_MARGIN = 2.0
#: Histograms (and images) are kept at every k-th collected step up to this k; beyond, none.
MAX_HISTOGRAM_EVERY = 64
#: A decision aims at this share of the budget, so that noise does not call for another.
TARGET_SHARE = 0.5
#: What is never shed is said to keep the budget from holding from this many times the
#: budget: at the torch MLP rows of tools/bench/collector.py (steps of 5.7 and 6.6 ms) full
#: windows read 2.0 to 2.3 % with the fingerprint still kept, near the budget, where a
#: window's noise decides; the digits example's unshed remainder read 17.7 %.
FLOOR_MARGIN = 2.0
#: ... in this many full windows in a row: a stall of the machine read as the collector's
#: slowdown can fill one. Said from one window, tools/bench/collector.py's ~1 ms MLP row
#: said 27.6 % (in a run the machine slowed by 77 %) and its budget row 8.9 %; from two in
#: a row, none of 12 runs of its torch rows, and one of 3 of its digits row (the others
#: ended before a second full window), where the unshed remainder read 14.6 %.
FLOOR_WINDOWS = 2
SHED_ORDER = ("histograms", "images", "fingerprints", "landscape")
_OFF = "off"

#: Stops the landscape's saves; returns the numbers (steps or epochs) left out.
StopLandscape = Callable[[], list[int]]


class DeviceMark(Protocol):
    """A point in the device's stream, recorded at a window's end (a timing event)."""

    def query(self) -> bool:
        """Whether the device has passed it (never waits)."""
        ...

    def elapsed_time(self, end: DeviceMark) -> float:
        """Milliseconds the device took from this mark to ``end`` (both passed)."""
        ...


def check_cost_budget(value: object, environ: Mapping[str, str] | None = None) -> float:
    """The budget as a share of the step (0: measure, never shed): ``value``, else the
    variable, else :data:`DEFAULT_COST_BUDGET`.

    Raises:
        CollectorValueError: not a finite number >= 0 and < 1, nor ``'off'``.
    """
    environ = os.environ if environ is None else environ
    expected = (
        "a share of the step: a finite number >= 0 and < 1 (0.02 is 2 %; 0 or 'off' "
        "turns the shedding off)"
    )
    source, shown = "'cost_budget'", repr(value)
    if value is None:
        text = environ.get(COST_BUDGET_ENV)
        if text is None or not text.strip():
            return DEFAULT_COST_BUDGET
        source, shown = f"the environment variable {COST_BUDGET_ENV}", repr(text)
        value = text.strip()
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, str) and value.strip().lower() == _OFF:
        return 0.0
    share = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            share = float(value)
        except OverflowError:
            share = math.inf
    if not (math.isfinite(share) and 0 <= share < 1):
        raise CollectorValueError(f"For {source}, the value should be {expected}, but got {shown}.")
    return share


@dataclass
class Shedding:
    """What the budget has shed in this run (everything kept at the start of each)."""

    #: Histograms at every k-th collected step (1: every one; 0: none).
    histogram_every: int = 1
    #: The input images at every k-th collected step (as histograms).
    image_every: int = 1
    fingerprints: bool = True
    landscape: bool = True
    #: What was shed, in words, in the order it was shed.
    said: list[str] = field(default_factory=list)


@dataclass
class _Window:
    step: int
    start: float
    threads: dict[int, tuple[ThreadKind, float]]
    first: bool = False
    training: float = 0.0
    histograms: float = 0.0
    images: float = 0.0
    fingerprints: float = 0.0
    landscape: float = 0.0
    #: The steps that did more than the shortest path -> their kind (_slowdown's:
    #: wrote timings, recorded values, recorded histograms or images).
    busy: dict[int, int] = field(default_factory=dict)
    #: Step -> the collector's seconds the loop counted in that step's time.
    carried: dict[int, float] = field(default_factory=dict)
    #: The device's mark at the window's start (None: timed on the host's clock only).
    mark: DeviceMark | None = None
    #: Its steps at least, for :data:`MIN_WINDOW_SECONDS` (0: none).
    timed_steps: int = 0
    #: The first look (module docstring): from the first collected step to the first
    #: after it by which MIN_WINDOW_SECONDS passed, deciding the histograms and images
    #: alone; no cost tags.
    look: bool = False


@dataclass
class _Decision:
    """What a closed window's decision needs: made when the window closes, or, where its
    ends are marked on a device, once the device has passed its end mark."""

    window: _Window
    end: int  # the step that closed it
    spent: dict[ThreadKind, float]
    slowed: Slowed | None
    host_seconds: float
    end_mark: DeviceMark | None

    def passed(self) -> bool:
        """Whether the device has passed the window's end (never waits)."""
        return self.end_mark is not None and self.end_mark.query()


class CostBudget:
    """One collector's cost: measured per window, recorded, and kept within ``budget``.

    The collector calls :meth:`start_run` when training begins, :meth:`window_due` and
    :meth:`close_window` at the start of a step's work, :meth:`add` with the step's
    seconds at its end and :meth:`busy` with its number, the ``*_at``/``keeps_*``
    questions before optional work, and :meth:`finish` at the end of training.
    ``stop_landscape`` is how the landscape is shed (it returns the numbers left out,
    for the message).
    """

    def __init__(self, budget: float, collect_freq: int) -> None:
        self.budget = budget
        self.collect_freq = collect_freq
        self.shedding = Shedding()
        self.rank = 0
        self.last_step = 0
        self._window: _Window | None = None
        self._waiting: _Decision | None = None
        self._warned = False
        self._said_floor = False
        self._floor_windows = 0
        self._looked = False

    # ------------------------------------------------------------------ questions

    def histograms_at(self, step: int) -> bool:
        """Whether the collected ``step`` records histograms (the same on every rank
        that keeps the same k: chosen by the step's number)."""
        return self._kept_at(step, self.shedding.histogram_every)

    def images_at(self, step: int) -> bool:
        """Whether the collected ``step`` records the input images (as histograms)."""
        return self._kept_at(step, self.shedding.image_every)

    def _kept_at(self, step: int, every: int) -> bool:
        if every == 1:
            return True
        return every > 0 and (step // self.collect_freq) % every == 0

    @property
    def keeps_fingerprints(self) -> bool:
        return self.shedding.fingerprints

    # ------------------------------------------------------------------ measuring

    def start_run(self, rank: int, *, last_step: int = 0, first_look: bool = True) -> None:
        """A new training run: measured afresh, with everything kept. ``last_step``: the
        run's last step, which closes a window (0: not known). ``first_look``: whether the
        first collected step's histograms and images are judged in the warm-up (module
        docstring; False on an accelerator, whose host runs ahead of the device most in
        the first steps: the device's marks time the windows after the warm-up)."""
        self.rank = rank
        self.last_step = last_step
        self.shedding = Shedding()
        self._window = None
        self._waiting = None
        self._warned = False
        self._said_floor = False
        self._floor_windows = 0
        self._looked = self.budget <= 0 or not first_look

    def window_steps(self, *, first: bool = False, timed: int = 0) -> int:
        """Steps in a window: enough for a few of the steps that still record histograms
        or images, and ``timed`` (its steps for :data:`MIN_WINDOW_SECONDS`); ``first``:
        the run's first window, shorter."""
        if first:
            return max(FIRST_WINDOW_STEPS, FIRST_WINDOW_COLLECTED * self.collect_freq)
        every = max(1, self.shedding.histogram_every, self.shedding.image_every)
        return max(MIN_WINDOW_STEPS, COLLECTED_PER_WINDOW * self.collect_freq * every, timed)

    def window_due(self, step: int) -> bool:
        """Whether a window opens or closes at ``step`` (cheap: a few comparisons)."""
        window = self._window
        if window is None:
            return step > WARMUP_STEPS or not self._looked
        if window.look:  # at each collected step on the frequency, and after the warm-up
            return (step > window.step and step % self.collect_freq == 0) or step > WARMUP_STEPS
        length = self.window_steps(first=window.first, timed=window.timed_steps)
        return step - window.step >= length or step == self.last_step

    def add(
        self,
        training: float,
        *,
        histograms: float = 0.0,
        images: float = 0.0,
        fingerprints: float = 0.0,
        landscape: float = 0.0,
    ) -> None:
        """A step's seconds on the training thread (all of them; some of it the parts)."""
        window = self._window
        if window is None:
            return
        window.training += training
        window.histograms += histograms
        window.images += images
        window.fingerprints += fingerprints
        window.landscape += landscape

    def busy(self, step: int, kind: int = WROTE) -> None:
        """``step`` did more than the shortest path (``kind``: ``_slowdown``'s; the
        step's largest counts); the steps after it are compared with the window's others."""
        window = self._window
        if window is not None:
            window.busy[step] = max(kind, window.busy.get(step, WROTE))

    def carry(self, step: int, seconds: float) -> None:
        """The loop counts ``seconds`` of the collector's work in ``step``'s time
        (``TrainSession``'s step is the time between two of its calls): the slowdown
        leaves them out of it, as the training thread's time counts them already."""
        window = self._window
        if window is not None:
            window.carried[step] = seconds

    def close_window(
        self,
        step: int,
        now: float,
        stop_landscape: StopLandscape | None = None,
        times: StepTimes | None = None,
        mark: DeviceMark | None = None,
    ) -> list[tuple[str, float]]:
        """At a step where :meth:`window_due`: the window's cost tags (none for the first),
        after shedding what the budget calls for; a new window opens. ``times``: the run's
        kept step times (the window's steps before ``step`` are read; None: no slowdown).
        ``mark``: the device's, recorded now (module docstring): the window's decision then
        waits for the device to pass it (:meth:`settle`)."""
        if self._waiting is not None:  # the last window's, on the host's clock if need be
            self._decide(self._waiting, stop_landscape, on_host=not self._waiting.passed())
        window = self._window
        if window is not None and window.look:
            # The training's own steps (the collector's work at them left out).
            judged = now - window.start - window.training >= MIN_WINDOW_SECONDS
            if step <= WARMUP_STEPS and not judged:
                return []  # too short to judge: the look goes on to the next collected step
            self._window = None
            if judged:
                spent = cpu_since(window.threads, _threads_now())
                decision = _Decision(window, step, spent, None, now - window.start, None)
                self._keep_within(decision, decision.host_seconds, stop_landscape)
            if step <= WARMUP_STEPS:
                return []  # the warm-up goes on: the first window opens after it
            window = None  # the first window opens at this step, as after the warm-up
        if not self._looked:
            self._looked = True
            if step <= WARMUP_STEPS:
                self._window = _Window(step, now, _threads_now(), first=True, look=True)
                return []
        self._window = _Window(
            step,
            now,
            _threads_now(),
            first=window is None,
            mark=mark,
            timed_steps=_timed_steps(window, step, now),
        )
        if window is None or step <= window.step:
            return []
        spent = cpu_since(window.threads, self._window.threads)
        slowed = _slowed(window, times, step, now)
        # Not one the run's last step closed (before its work): a shorter one never
        # decides, and a full one's decision would save that step's work alone, the
        # run's last values, which are the ones most often looked at.
        length = self.window_steps(first=window.first, timed=window.timed_steps)
        if step - window.step >= length and step != self.last_step:
            decision = _Decision(window, step, spent, slowed, now - window.start, mark)
            if window.mark is None or mark is None:
                self._decide(decision, stop_landscape, on_host=True)
            else:
                self._waiting = decision
        return _tags(window, step, spent, slowed)

    @property
    def waiting(self) -> bool:
        """Whether a window's decision waits for the device (:meth:`settle`)."""
        return self._waiting is not None

    def settle(self, stop_landscape: StopLandscape | None = None) -> None:
        """The waiting window's decision, once the device has passed the window's end
        (else nothing: a later step asks again)."""
        waiting = self._waiting
        if waiting is not None and waiting.passed():
            self._decide(waiting, stop_landscape, on_host=False)

    def _decide(
        self, decision: _Decision, stop_landscape: StopLandscape | None, *, on_host: bool
    ) -> None:
        self._waiting = None
        seconds = decision.host_seconds
        start, end = decision.window.mark, decision.end_mark
        if not on_host and start is not None and end is not None:
            # (RuntimeError: not timing events of one device; the host's clock stays.)
            with contextlib.suppress(RuntimeError):
                seconds = max(seconds, start.elapsed_time(end) / 1000.0)
        self._keep_within(decision, seconds, stop_landscape)

    def finish(
        self, step: int, now: float, times: StepTimes | None = None
    ) -> list[tuple[str, float]]:
        """The end of training: the last window's cost tags, with no decision (``times``:
        as :meth:`close_window`'s, ``step``'s own included)."""
        window, self._window = self._window, None
        self._waiting = None  # the run is over: nothing left to shed
        if window is None or window.look or step <= window.step:
            return []  # (a first look: in the warm-up, which is not recorded)
        spent = cpu_since(window.threads, _threads_now())
        slowed = _slowed(window, times, step + 1, now)
        return _tags(window, step, spent, slowed)

    # ------------------------------------------------------------------- shedding

    def _keep_within(
        self, decision: _Decision, seconds: float, stop_landscape: StopLandscape | None
    ) -> None:
        """Shed what the window's cost over its ``seconds`` (its time, on the host's clock
        or the device's) calls for."""
        window, spent, slowed = decision.window, decision.spent, decision.slowed
        if window.first:
            slowed = None  # on the collector's own clocks alone (module docstring)
        user = seconds - window.training - (slowed.total if slowed else 0.0)
        if self.budget <= 0 or user <= 0:
            return
        if window.look:
            share, parts = _first_look(window, spent, user, decision.end, self.collect_freq)
        else:
            share, parts = self._shares(window, spent, slowed, user)
        bar = self.budget * (FIRST_WINDOW_MARGIN if window.first else 1.0)
        # What no shedding brings down: the window's cost less the parts it may shed (the
        # loss, the timings and the lineage, and the record's work for them). Where that
        # alone is clearly over the budget in full windows in a row, it cannot hold at
        # these steps: said once a run. Read on full windows only: the first is one
        # collected step long, and its steps still pay for the run's start (in the digits
        # example in one process, 428 us a step there against 119 us in the next window).
        full = not window.look and not window.first
        if share <= bar:
            if full:
                self._floor_windows = 0
            return
        floor = share - sum(parts.values())
        if full:
            over = floor > self.budget * FLOOR_MARGIN
            self._floor_windows = self._floor_windows + 1 if over else 0
        floor_over = full and self._floor_windows >= FLOOR_WINDOWS and not self._said_floor
        # The first look reads the histograms' and images' work on the collector's clocks,
        # not what it slows the steps after it by where the training uses every core (at the
        # ~10 ms torch MLP row a histogram step read 27-85 ms there, and cost the run 35-116
        # ms): an every-k-th chosen from it would keep more than the budget. It sheds them
        # all, as the first window did for such models, before the warm-up's collected steps.
        excess = share if window.look else share - self.budget * TARGET_SHARE
        shedding, dropped = self.shedding, list[str]()
        if shedding.histogram_every and excess > 0 and parts["histograms"] > 0:
            shedding.histogram_every, saved = self._shed_every(
                "the parameter histograms",
                shedding.histogram_every,
                parts["histograms"],
                excess,
                dropped,
            )
            excess -= saved
        if shedding.image_every and excess > 0 and parts["images"] > 0:
            shedding.image_every, saved = self._shed_every(
                "the input images", shedding.image_every, parts["images"], excess, dropped
            )
            excess -= saved
        # The first look measures the histograms and images alone, and sheds them alone:
        # what rounding leaves of its share less those two parts (a few 1e-17) is no cost
        # of the fingerprint or the landscape.
        measured_all = not window.look
        if measured_all and shedding.fingerprints and excess > 0 and parts["fingerprints"] > 0:
            shedding.fingerprints = False
            excess -= parts["fingerprints"]
            dropped.append("the parameter fingerprint at collected steps (step 0's stays)")
        if measured_all and shedding.landscape and excess > 0 and stop_landscape is not None:
            shedding.landscape = False
            left_out = stop_landscape()
            if left_out:
                dropped.append(f"the loss landscape's unsaved sets ({_numbers(left_out)})")
        shedding.said.extend(dropped)
        self._tell(share, window, decision.end, dropped, floor if floor_over else None, user)

    def _tell(
        self,
        share: float,
        window: _Window,
        end: int,
        dropped: list[str],
        floor: float | None,
        user: float,
    ) -> None:
        """Say what a decision shed, and ``floor`` (the share of what is never shed, over
        the budget by itself; None: not, or said already this run)."""
        if dropped:
            self._say(share, window, end, dropped)
        if floor is not None:
            self._said_floor = True
            self._say_floor(share, floor, window, end, user / max(end - window.step, 1))

    def _shares(
        self,
        window: _Window,
        spent: dict[ThreadKind, float],
        slowed: Slowed | None,
        user: float,
    ) -> tuple[float, dict[str, float]]:
        """A window's cost as a share of the ``user``'s time, and each sheddable part's."""
        # The threads' work as the step pays for it: their CPU, or the slowdown of the
        # steps after the collector's where that is larger (cost/_slowdown.py). Either
        # is mostly the record's threads bucketing histograms and encoding images: it
        # counts as the histograms' while any are recorded (an over-estimate that sheds
        # them rather than what comes after), else as the images' if any are (never as
        # what the run does not record: nothing would be saved by shedding it).
        # The landscape thread's CPU counts where the window saved a set: in one that
        # saved none it is the writing of sets saved before it (the warm-up's default
        # saves, whose writing runs into the first window), which shedding now saves
        # nothing of.
        if window.landscape <= 0:
            spent = {kind: cpu for kind, cpu in spent.items() if kind != LANDSCAPE}
        on_threads = sum(spent.values())
        if slowed is not None and slowed.total > on_threads:
            share = (window.training + slowed.total) / user
            recording, landscape_threads = slowed.heavy, 0.0
        else:
            share = (window.training + on_threads) / user
            recording = spent.get(WRITER, 0.0) + spent.get(ENCODER, 0.0)
            landscape_threads = spent.get(LANDSCAPE, 0.0)
        shedding = self.shedding
        histograms_kept = shedding.histogram_every > 0 and window.histograms > 0
        images_kept = shedding.image_every > 0 and window.images > 0
        parts = {
            "histograms": (window.histograms + (recording if histograms_kept else 0.0)) / user,
            "images": (window.images + (recording if images_kept and not histograms_kept else 0.0))
            / user,
            "fingerprints": window.fingerprints / user,
            "landscape": (window.landscape + landscape_threads) / user,
        }
        return share, parts

    def _shed_every(
        self, what: str, every: int, part: float, excess: float, dropped: list[str]
    ) -> tuple[int, float]:
        """``what`` (recorded at every ``every``-th collected step, costing ``part``) at
        fewer collected steps: the new k (0: none) and the share this saves (projected)."""
        kept = part - excess
        factor = math.ceil(part / kept) if kept > 0 else 0
        if factor == 0 or every * factor > MAX_HISTOGRAM_EVERY:
            dropped.append(f"{what} (none from now on)")
            return 0, part
        every *= factor
        dropped.append(
            f"{what} but at every {_nth(every)} collected step "
            f"(every {every * self.collect_freq} steps)"
        )
        return every, part - part / factor

    def _say(self, share: float, window: _Window, end: int, dropped: list[str]) -> None:
        first = not self._warned
        self._warned = True
        level = logging.WARNING if first and self.rank == 0 else logging.INFO
        suggested = _suggested(share)
        how = (
            f"raise the budget above the cost measured (SummaryCollector(..., "
            f"cost_budget={suggested}) or {COST_BUDGET_ENV}={suggested}), or turn shedding off "
            f"with cost_budget='off'"
            if suggested is not None
            else f"turn shedding off with SummaryCollector(..., cost_budget='off') or "
            f"{COST_BUDGET_ENV}=off (no budget under 1 holds the cost measured)"
        )
        # The first look measures one collected step's histograms and images, over the
        # steps up to the next: said as what it is.
        what = (
            f"The collector's histograms and images of step {window.step} cost"
            if window.look
            else "The collector cost"
        )
        logger.log(
            level,
            "%s %.1f %% of the training step over steps %d-%d (over its cost budget of %g %%): "
            "it sheds %s. The loss, the timings and the lineage are all still recorded. To "
            'keep everything, %s (docs/collector-cost.md, "The cost budget").',
            what,
            100 * share,
            window.step + 1,
            end,
            100 * self.budget,
            "; ".join(dropped),
            how,
        )

    def _say_floor(
        self, share: float, floor: float, window: _Window, end: int, step_seconds: float
    ) -> None:
        """The window's cost is over the budget with nothing it may shed to bring it down:
        ``floor``, the share of the loss, the timings and the lineage, is over by itself
        (once a run; on rank 0 a warning, on the others at INFO)."""
        suggested = _suggested(share)
        quiet = (
            f"raise the budget above the cost (SummaryCollector(..., cost_budget={suggested}) "
            f"or {COST_BUDGET_ENV}={suggested})"
            if suggested is not None
            else f"turn the budget off (SummaryCollector(..., cost_budget='off') or "
            f"{COST_BUDGET_ENV}=off)"
        )
        logger.log(
            logging.WARNING if self.rank == 0 else logging.INFO,
            "The work the collector never sheds (the loss, the timings and the lineage) cost "
            "%.1f %% of the training step over steps %d-%d (and over twice the budget in the "
            "window before), over its cost budget of %g %% by itself, at steps of %s there: no "
            "shedding keeps the budget here. It keeps "
            'recording them (%s); to be told no more, %s (docs/collector-cost.md, "The cost '
            'budget").',
            100 * floor,
            window.step + 1,
            end,
            100 * self.budget,
            _duration(step_seconds),
            _LESS,
            quiet,
        )


def _first_look(
    window: _Window, spent: dict[ThreadKind, float], user: float, end: int, collect_freq: int
) -> tuple[float, dict[str, float]]:
    """The first look's cost (module docstring): its collected steps' histograms and images
    as a share of the ``user``'s time in its steps, per collect period, and their parts.
    The look opens before its first collected step's work and closes (at step ``end``)
    before the last one's: its steps hold the first and the multiples of ``collect_freq``
    before ``end``, one period of steps for each. The record's encoder threads' CPU counts
    as theirs: they encode the steps that hold histograms, images or large tensors (the
    first step's graph is the training thread's, its other values the writer thread's)."""
    collected = 1 + (end - 1) // collect_freq - window.step // collect_freq
    period = user * collected * collect_freq / (end - window.step)
    recording = spent.get(ENCODER, 0.0)
    histograms = window.histograms + (recording if window.histograms > 0 else 0.0)
    images = window.images + (recording if window.images > 0 and window.histograms <= 0 else 0.0)
    parts = {
        "histograms": histograms / period,
        "images": images / period,
        "fingerprints": 0.0,
        "landscape": 0.0,
    }
    return parts["histograms"] + parts["images"], parts


def _timed_steps(window: _Window | None, step: int, now: float) -> int:
    """The steps of :data:`MIN_WINDOW_SECONDS` at the mean step of ``window``, which
    ``step`` closes ``now`` (0: none closed, or no time passed on the clock)."""
    if window is None or step <= window.step or now <= window.start:
        return 0
    return math.ceil(MIN_WINDOW_SECONDS * (step - window.step) / (now - window.start))


def _slowed(window: _Window, times: StepTimes | None, end: int, now: float) -> Slowed | None:
    """The window's slowdown (cost/_slowdown.py); None where it cannot be measured, and
    where it reads as long as the window's time beside the collector's own or longer: a
    median over busy steps times their count, when most but not all of them were followed
    by a stall, is no measure of what passed. The window then records no wall point and
    its budget decides on the training thread and the threads' CPU, as without step times."""
    if times is None:
        return None
    slowed = slowed_seconds(window.busy, times, window.step, end, window.carried)
    if slowed is not None and slowed.total >= (now - window.start) - window.training:
        return None
    return slowed


def _tags(
    window: _Window, step: int, spent: dict[ThreadKind, float], slowed: Slowed | None
) -> list[tuple[str, float]]:
    """The window's cost points, per step (the wall cost only where the slowdown was
    measured: without it the training thread's alone would read as the whole)."""
    steps = step - window.step
    tags = [
        (TRAINING_COST_TAG, window.training / steps),
        (THREADS_COST_TAG, sum(spent.values()) / steps),
    ]
    if slowed is not None:
        tags.append((WALL_COST_TAG, (window.training + slowed.total) / steps))
    return tags


def _nth(number: int) -> str:
    suffix = (
        "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    )
    return f"{number}{suffix}"


@dataclass(frozen=True)
class SaidInShort:
    """One of the budget's messages in short, for the tools that list what it said
    (``tools/bench/collector.py``, ``tools/device_check.py``): the share measured (``"20.0
    %"``), the steps (``"21-30"``), whether the first look measured it, and what it shed
    (or that what it never sheds is over the budget by itself)."""

    share: str
    steps: str
    first_look: bool
    what: str


_SHED_SAID = re.compile(
    r"The collector(?P<look>'s histograms and images of step \d+)? cost (?P<share>\S+ %) "
    r"of the training step over steps (?P<steps>\d+-\d+) .*?: it sheds (?P<what>.*?)\. "
    r"The loss",
    re.DOTALL,
)
_FLOOR_SAID = re.compile(
    r"The work the collector never sheds .*? cost (?P<share>\S+ %) of the training step "
    r"over steps (?P<steps>\d+-\d+)",
    re.DOTALL,
)
#: :attr:`SaidInShort.what` of the message of :meth:`CostBudget._say_floor`.
FLOOR_SAID = "over by what is never shed"


def said_in_short(message: str) -> SaidInShort | None:
    """``message`` (a message of this module's logger) in short; None for another."""
    floor = _FLOOR_SAID.match(message)
    if floor is not None:
        return SaidInShort(floor["share"], floor["steps"], False, FLOOR_SAID)
    shed = _SHED_SAID.match(message)
    if shed is not None:
        return SaidInShort(shed["share"], shed["steps"], bool(shed["look"]), shed["what"])
    return None


#: What makes the work the budget never sheds cheaper, in the warnings that say it is over.
_LESS = (
    "to record less of it: a larger collect_freq, fewer sections a step, system_interval=0 "
    "or gradient_probe=False"
)


def _duration(seconds: float) -> str:
    """``seconds`` in the unit that suits it (a step's length in a warning)."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def _suggested(share: float) -> str | None:
    """A budget a little over ``share``, in two significant digits; None: none under 1."""
    above = share * 1.25
    if above >= 1:
        return None
    digits = max(2, 1 - math.floor(math.log10(above)))
    return f"{math.ceil(above * 10**digits) / 10**digits:g}"


def _numbers(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:8]))
    return shown + (f", ... {len(numbers) - 8} more" if len(numbers) > 8 else "")


def _threads_now() -> dict[int, tuple[ThreadKind, float]]:
    # The threads' CPU is in real seconds: under a test's clock (testing.timing_clock)
    # it would not add up with that clock's, so it is not read.
    if _clock.now is not perf_counter:
        return {}
    return collector_threads_cpu()
