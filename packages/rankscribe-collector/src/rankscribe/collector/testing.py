"""A seam for tests of training code: the clock the collector's timings read.

    from rankscribe.collector.testing import timing_clock

    seconds = [1000.0]
    with timing_clock(lambda: seconds[0]):
        ...  # a training loop whose step advances seconds[0] by what it "takes"

Step times, data waits, sections and the CPU forward timer all read one clock
(``time.perf_counter`` by default). Inside the ``with`` block they read ``clock``
instead, so a test moves time by hand rather than sleeping, and asserts the exact
seconds recorded (docs/contributing.md, "Tests"). The project's tests use it; so can a
script's own tests (for example of an ``on_verdict`` callback, with a rank made slow by a
known number of seconds). Not thread-safe with other collectors of the process timed on
the real clock meanwhile. Sibling-facing (docs/contributing.md, "Sibling modules").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rankscribe.collector import _clock
from rankscribe.collector.errors import CollectorTypeError

__all__ = ["timing_clock"]


@contextmanager
def timing_clock(clock: Callable[[], float]) -> Iterator[None]:
    """Inside the block, the collector's timings read ``clock`` (seconds, monotonic)."""
    if not callable(clock):
        raise CollectorTypeError(
            f"For 'timing_clock', the argument 'clock' must be a function returning seconds, "
            f"but got {type(clock).__name__}."
        )
    saved = _clock.now
    _clock.now = clock
    try:
        yield
    finally:
        _clock.now = saved
