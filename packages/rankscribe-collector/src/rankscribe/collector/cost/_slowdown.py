"""How much the collector's work slows the training's own steps, read from their step times.

What the collector costs a step is more than its own time on the training thread. Its
background threads (the record's encoders bucketing histograms and encoding images, the
writer) run while the next steps train, and on a machine whose cores the training uses
(torch's intra-op threads, a NumPy step sharing the interpreter) those steps take longer:
a parallel step waits for its slowest thread, and a core taken from it makes the whole
step wait, so the step loses more than the CPU the threads spend. Caches the collected
step evicted slow the step after it the same way. None of that is on the collector's
clock, and it can be the larger part: on the 2-core machine, a torch model whose
histograms the encoders take about 3 ms a step to bucket (tools/bench/collector.py, the
``budget-off`` row) had the three steps after each collected step take 24-189 % longer.

It is measured from the run's own step times, against the run itself: the collector's
work comes at its *busy* steps (collected steps, timings' writes, landscape saves) and
its threads are done with it some steps later, so within a window the steps in the
*near* half after a busy step are compared with the steps in the *far* half before the
next busy step. A step that records values counts its own time among the near ones (the
summary operators copy their values in it); a step that only wrote timings does not (it
may be busy *because* it was long: a step of a quarter second or more writes its time at
once). Per kind of busy step (:data:`WROTE`, :data:`RECORDED`, :data:`HEAVY`: histograms
or images recorded, whose threads' work costs far more) and per place in the near half
(the first near step, the second, ...), the median of the steps' times at that place
after the window's busy steps of the kind, over the far steps' median; their sum is what
one busy step of the kind costs, times the kind's number of busy steps (a busy step whose
near half the next one cut short is taken to cost the same). Medians, so that a step the
machine stalled in counts as noise, not as the collector's; and medians on both sides: a
near half's sum against the far steps' median read the steps' skew as a slowdown (on a
loaded machine, where a step's mean time is 10 % over its median, at the ~7 ms budget row
of tools/bench/step_cost.py, 2-10 % of the step after the collector had shed all it
could). Where the loop counts the callbacks' time in the next
step's time (``TrainSession``: a step is the time between two ``session.step`` calls),
the collector's own seconds at a busy step (*carried*) are taken out of the next step's:
they are on its own clock already.

What it cannot see: a slowdown that lasts beyond the near half (the far steps are then
slower too, and the excess reads low), and what costs every step alike (a callback's
dispatch by the loop, the shortest path's time: the collector's own clock counts that,
and a ``TrainSession``'s dispatch where the collector is its only callback).
What it cannot tell apart: the script's own work at the same steps (a log line every
``collect_freq`` steps) counts as the collector's.
A window with too few far steps, or no busy step, measures nothing (None): at
``collect_freq=1`` every step is busy. docs/collector-cost.md, "The cost budget".
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["HEAVY", "MIN_FAR_STEPS", "RECORDED", "WROTE", "Slowed", "StepTimes", "slowed_seconds"]

#: Far steps a window needs for their median to be the steps' time without the collector.
MIN_FAR_STEPS = 5
#: Kinds of busy step: wrote timings or saved landscape parameters only; recorded values;
#: recorded histograms or input images.
WROTE, RECORDED, HEAVY = 0, 1, 2


@dataclass(frozen=True)
class Slowed:
    """Seconds the window's steps were slowed: in all, and after the heavy busy steps."""

    total: float
    heavy: float


@dataclass(frozen=True)
class StepTimes:
    """A run's kept step times and data waits (each in step order, as kept)."""

    steps: Sequence[int]
    seconds: Sequence[float]
    wait_steps: Sequence[int] = ()
    waits: Sequence[float] = ()


def slowed_seconds(
    busy: Mapping[int, int],
    times: StepTimes,
    first: int,
    end: int,
    carried: Mapping[int, float] | None = None,
) -> Slowed | None:
    """Seconds by which the steps ``first`` to ``end - 1`` were slowed by the collector's
    busy steps among them (``busy``: step -> its kind); None where it cannot be measured.
    Neither part is below 0 (a window whose near steps happened to be the quicker: 0).

    A step's time is its step time plus its data wait (the wait before it), where kept,
    less the collector's own seconds the loop counted in it (``carried``: step -> them).
    """
    if not busy:
        return None
    took = _took(times, first, end)
    for step, counted in (carried or {}).items():
        if step in took:
            took[step] -= counted
    marks = sorted(step for step in busy if first <= step < end)
    far: list[float] = []
    # kind -> place in the near half (0: its first step) -> the times there.
    near: dict[int, list[list[float]]] = {}
    counts: dict[int, int] = {}
    for index, mark in enumerate(marks):
        gap = (marks[index + 1] if index + 1 < len(marks) else end) - mark
        half = (gap + 1) // 2
        start = mark + (0 if busy[mark] != WROTE else 1)
        places = near.setdefault(busy[mark], [])
        seen = [step for step in range(start, mark + half) if step in took]
        if seen:  # (a busy step with no near step in the window counts for nothing)
            counts[busy[mark]] = counts.get(busy[mark], 0) + 1
        for step in seen:
            while len(places) <= step - start:
                places.append([])
            places[step - start].append(took[step])
        far.extend(took[s] for s in range(mark + half, mark + gap) if s in took)
    if len(far) < MIN_FAR_STEPS:
        return None
    base = statistics.median(far)
    # Each busy step of a kind is taken to slow the steps after it alike, those whose near
    # half the next busy step cut short too: the kind's count times its places' excesses.
    by_kind = {
        kind: counts[kind] * sum(statistics.median(times) - base for times in places if times)
        for kind, places in near.items()
        if any(places)
    }
    if not by_kind:
        return None
    return Slowed(max(sum(by_kind.values()), 0.0), max(by_kind.get(HEAVY, 0.0), 0.0))


def _took(times: StepTimes, first: int, end: int) -> dict[int, float]:
    """Step -> its time and its wait, for the steps in ``[first, end)``."""
    took = _slice(times.steps, times.seconds, first, end)
    for step, wait in _slice(times.wait_steps, times.waits, first, end).items():
        if step in took:
            took[step] += wait
    return took


def _slice(steps: Sequence[int], values: Sequence[float], first: int, end: int) -> dict[int, float]:
    # Kept in step order (a step a loop kept out of order may be missed: one step).
    found: dict[int, float] = {}
    for index in range(bisect_left(steps, first), len(steps)):
        step = steps[index]
        if step >= end:
            break
        found[step] = values[index]
    return found
