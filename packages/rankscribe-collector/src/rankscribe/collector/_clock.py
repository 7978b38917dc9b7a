"""The clock the collector's timings read, in one place.

Step times, data waits, sections and the CPU forward timer all read
:data:`now` (``time.perf_counter``: monotonic, the finest resolution the
platform has) through this module, so that a test can move one clock instead of
sleeping and asserting on wall-clock time (docs/contributing.md, "Tests").
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter

__all__ = ["now", "since"]

#: Seconds on a monotonic clock; only differences mean anything.
now: Callable[[], float] = perf_counter


def since(moment: float | None, start: float | None) -> float | None:
    """Seconds from ``start`` to ``moment`` (two readings of :data:`now`); None when either
    is unknown or ``moment`` came first (a hook that ran before the step it is timed from)."""
    if moment is None or start is None or moment < start:
        return None
    return moment - start
