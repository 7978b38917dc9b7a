"""A clock a test moves by hand, in place of sleeping and reading wall-clock time.

``collector_clock`` replaces the clock the collector's timings read (step times, data
waits, sections, the CPU forward timer; ``rankscribe.collector.testing.timing_clock``): a
test advances it where the training would spend time, and asserts the exact seconds
recorded. ``ranks_clock`` gives the waits of
rankscribe.ranks a clock that their sleeps move (``rankscribe.ranks.testing.wait_clock``).
Imports only the standard library and pytest at import time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest


class ManualClock:
    """Seconds that move only when :meth:`advance` is called."""

    def __init__(self, start: float = 1000.0) -> None:
        self.seconds = start

    def __call__(self) -> float:
        return self.seconds

    def advance(self, seconds: float) -> None:
        self.seconds += seconds


@pytest.fixture
def collector_clock() -> Iterator[ManualClock]:
    """The clock the collector's timings read (``rankscribe.collector.testing.timing_clock``)."""
    from rankscribe.collector.testing import timing_clock

    clock = ManualClock()
    with timing_clock(clock):
        yield clock


class SleepingClock(ManualClock):
    """A manual clock that a sleep moves: a wait of ``seconds`` takes no real time.

    Only for waits in one thread: ranks in several threads need real time to meet, so
    a test calls :meth:`release` before it starts them.
    """

    def __init__(self) -> None:
        super().__init__()
        self.installed = contextlib.ExitStack()

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))

    def release(self) -> None:
        """Give the ranks back the real clock and sleep."""
        self.installed.close()


@pytest.fixture
def ranks_clock() -> Iterator[SleepingClock]:
    """The clock and sleep every wait of rankscribe.ranks uses, for waits in one thread."""
    from rankscribe.ranks.testing import wait_clock

    clock = SleepingClock()
    with clock.installed:
        clock.installed.enter_context(wait_clock(clock, clock.sleep))
        yield clock
