"""A clock a test moves by hand, in place of sleeping and reading wall-clock time.

``collector_clock`` replaces the clock the collector's timings read (step times, data
waits, sections, the CPU forward timer): a test advances it where the training would
spend time, and asserts the exact seconds recorded. Imports only the standard library
and pytest.
"""

from __future__ import annotations

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
def collector_clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    clock = ManualClock()
    # private: the one clock the collector's timings read; no public seam to inject it
    monkeypatch.setattr("rankscribe.collector._clock.now", clock)
    return clock
