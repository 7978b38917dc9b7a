"""Bounded waiting: a monotonic deadline and the back-off between two polls.

Every wait in this package polls a non-blocking operation (an MPI request, a
file's existence) against a :class:`Deadline`; none blocks in a call that could
wait forever. Between polls the caller sleeps, briefly at first and longer
while nothing changes, because MPICH (and a shared filesystem) would otherwise
burn a core per waiting rank.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Backoff", "Deadline"]

# The clock and the sleep every wait in this package uses, read at each call: a test
# replaces both with a clock that a sleep moves, and the waits run in no real time
# (docs/contributing.md, "Tests").
monotonic: Callable[[], float] = time.monotonic
sleep: Callable[[float], None] = time.sleep


class Deadline:
    """A point in :data:`monotonic` time, ``seconds`` from now."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = monotonic()
        self.end = self.started + seconds

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.end - monotonic())

    def expired(self) -> bool:
        return monotonic() >= self.end

    def elapsed(self) -> float:
        return monotonic() - self.started

    def extended(self, seconds: float) -> Deadline:
        """A new deadline ``seconds`` after this one."""
        later = Deadline(self.seconds + seconds)
        later.started = self.started
        later.end = self.end + seconds
        return later


class Backoff:
    """Sleeps between polls: ``shortest`` after progress, doubling up to ``longest``."""

    def __init__(self, shortest: float = 0.0001, longest: float = 0.01) -> None:
        self.shortest = shortest
        self.longest = longest
        self._next = shortest

    def reset(self) -> None:
        self._next = self.shortest

    def sleep(self, deadline: Deadline) -> None:
        """Sleep for the current interval (not past ``deadline``) and lengthen the next one."""
        sleep(min(self._next, deadline.remaining()))
        self._next = min(self._next * 2, self.longest)
