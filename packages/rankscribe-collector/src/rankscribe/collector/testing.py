"""Seams for tests of training code: the clock the collector's timings read, and the
device its values are read from.

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
the real clock meanwhile.

    from rankscribe.collector.testing import device_backend

    with device_backend(fake):
        ...  # a training loop whose tensors ``fake`` calls an accelerator's

Values the collector reads from an accelerator (the loss, histograms, fingerprints:
docs/collector-schedule.md, "Values read from a device") leave it through a backend:
``on_device(tensor)``, ``start_copy(tensor) -> (host tensor, event)``, ``event(device)``
(recorded on the current stream; None: nothing to wait for) and ``side_stream(device)``
(a context manager); events have ``query()`` and ``synchronize()``. Inside the block
the torch adapter uses ``fake`` instead of torch's devices, so a test on a machine
without one can count the waits on the training thread (the project's fake:
``tests/_support/fake_device.py``). Sibling-facing (docs/contributing.md, "Sibling
modules").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rankscribe.collector import _clock
from rankscribe.collector.errors import CollectorTypeError

__all__ = ["device_backend", "timing_clock"]


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


_BACKEND_METHODS = ("on_device", "start_copy", "event", "side_stream")


@contextmanager
def device_backend(backend: Any) -> Iterator[None]:
    """Inside the block, the torch adapter reads device values through ``backend``."""
    missing = [name for name in _BACKEND_METHODS if not callable(getattr(backend, name, None))]
    if missing:
        raise CollectorTypeError(
            f"For 'device_backend', the argument 'backend' must have the methods "
            f"{', '.join(_BACKEND_METHODS)}, but {type(backend).__name__} lacks "
            f"{', '.join(missing)}."
        )
    from rankscribe.collector.adapters import _device_reads  # noqa: PLC0415 - torch on demand

    saved = _device_reads.backend
    _device_reads.backend = backend
    try:
        yield
    finally:
        _device_reads.backend = saved
