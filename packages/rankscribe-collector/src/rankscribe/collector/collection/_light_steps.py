"""The light steps ahead of the collector's short path that a loop finishes itself.

A light step is a collected step whose only value is the loss, read on the host (or a
tensor step off the frequency that no tensor came to). Where the loop logs the quiet
steps (``QuietSteps``), the collector plans up to :data:`LIGHT_AHEAD` of them at once
and the loop logs each as a quiet step once the collector has kept its loss
(``QuietSteps.keep_light``): a light step then costs a few reads and appends on the
training thread, not a call of the collector's ``step_end`` on a CPU whose caches the
step evicted. What the collector's own light path does at such a step besides keeping
the loss (the schedule moved past it, the cost budget told it recorded) waits for its
next call (:meth:`LightSteps.take_logged`). docs/collector-cost.md, "Quiet steps".
"""

from __future__ import annotations

from collections.abc import Callable

#: The most light steps planned at once (the plan's limit, the next write of the timings,
#: bounds them too). Planning costs a few microseconds a light step, warm; past the
#: last one planned the collector's next call plans again.
LIGHT_AHEAD = 64

Filter = Callable[[str], bool] | None


def _no_filter(unit: int) -> Filter:
    return None


class LightSteps:
    """The light steps of the collector's plan, in order, and those the loop logged.

    ``steps[at]`` is the next one not logged; ``extracts[i]``: whether ``steps[i]``
    records the loss (else it is a tensor step off the frequency, with nothing to
    record); ``until``: the plan's end; ``filter_at(unit)``: the plugin filter of the
    record at ``unit``, found when the loop reaches it (what the summary operators are
    told while they skip the steps before it).
    """

    __slots__ = ("after", "at", "extracts", "filter_at", "logged", "steps", "until")

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.extracts: list[bool] = []
        self.until = 0
        self.filter_at: Callable[[int], Filter] = _no_filter
        self.at = 0
        #: ``(step, recorded)`` of the steps the loop logged since the last take.
        self.logged: list[tuple[int, bool]] = []
        #: The step after each logged one -> the collector's seconds at the logged one,
        #: after its end, until taken: the next step's time holds them where a step runs
        #: from one call to the next (a session's), else its wait for its batch (a
        #: ``TrainLoop``'s).
        self.after: dict[int, float] = {}

    def plan(
        self,
        steps: list[int],
        extracts: list[bool],
        until: int,
        filter_at: Callable[[int], Filter],
    ) -> None:
        """A new plan (the logged steps stay until taken)."""
        self.steps, self.extracts, self.until, self.filter_at = steps, extracts, until, filter_at
        self.at = 0

    def clear(self) -> None:
        """No light step planned."""
        self.plan([], [], 0, _no_filter)

    def logged_one(self, step: int, recorded: bool, seconds: float) -> tuple[int, Filter]:
        """``step``, the next planned, logged by the loop (``recorded``: its loss kept, in
        ``seconds`` of the collector's): the next planned light step (-1: none) and the
        filter of the record at the next step that records (that light step, else the
        plan's end)."""
        self.logged.append((step, recorded))
        self.after[step + 1] = seconds
        at = self.at = self.at + 1
        steps = self.steps
        if at < len(steps):
            following = steps[at]
            return following, self.filter_at(following)
        return -1, self.filter_at(self.until)

    def take_after(self) -> dict[int, float]:
        """The steps after the logged ones -> the collector's seconds at those, since the
        last call (the map is empty after it)."""
        after = self.after
        self.after = {}
        return after

    def take_logged(self) -> list[tuple[int, bool]]:
        """The steps logged since the last call, in order (the log is empty after it)."""
        logged = self.logged
        self.logged = []
        return logged
