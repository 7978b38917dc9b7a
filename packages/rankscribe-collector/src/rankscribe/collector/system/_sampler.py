"""The sampler: a background thread that reads the rank's machine every ``system_interval``.

The training thread never waits for it but twice a run: a sample is taken as training
starts (at step 0, on the caller's thread), one as it ends (by :meth:`SystemSampler.stop`, at
the step after the last), so that a job shorter than the interval has two, and
one at each multiple of the interval on the wall clock between them (so the
ranks of a job, on synchronised clocks, sample together), labelled with the step
running then (the training loop's ``cur_step_num``), and queued; the
collector's training thread takes the queue when it writes its timings (at
least once a second while steps end) and records the samples as ordinary
scalars at their steps. The queue is bounded (:data:`MAX_QUEUED` samples; a
stalled training thread loses the oldest), and a sample is a fixed set of
system calls: the thread's work is bounded too. ``docs/system-metrics.md``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rankscribe.collector._checks import check_seconds_setting
from rankscribe.collector.system._readings import (
    GpuReadings,
    ProcessReadings,
    Reading,
    gpu_device,
    load_nvml,
)

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_SYSTEM_INTERVAL",
    "LONGEST_SYSTEM_INTERVAL",
    "MAX_QUEUED",
    "SHORTEST_SYSTEM_INTERVAL",
    "SYSTEM_INTERVAL_ENV",
    "SystemSampler",
    "check_system_interval",
]

#: Seconds between two samples (docs/system-metrics.md, "Cost").
DEFAULT_SYSTEM_INTERVAL = 10.0
#: The shortest interval other than 0: about twenty times what the thread spends on a
#: sample (0.6 ms of CPU, docs/system-metrics.md "Cost"), so it never samples back to back.
SHORTEST_SYSTEM_INTERVAL = 0.01
#: The longest: a day. The thread waits up to an interval, and a wait of 1e13 seconds
#: overflows the platform's timeout (threading.TIMEOUT_MAX).
LONGEST_SYSTEM_INTERVAL = 86_400.0
#: The environment variable that sets ``system_interval`` when the argument is not given.
SYSTEM_INTERVAL_ENV = "RANKSCRIBE_SYSTEM_INTERVAL"
#: Samples waiting for the training thread, at most (the oldest go first).
MAX_QUEUED = 1024
_OFF_WORDS = ("off", "none")


def check_system_interval(value: object) -> float:
    """The interval in seconds (0: off): the argument, else the variable, else the default."""
    return check_seconds_setting(
        value,
        argument="system_interval",
        variable=SYSTEM_INTERVAL_ENV,
        default=DEFAULT_SYSTEM_INTERVAL,
        off="the system sampling off",
        off_words=_OFF_WORDS,
        shortest=SHORTEST_SYSTEM_INTERVAL,
        longest=LONGEST_SYSTEM_INTERVAL,
    )


Sample = tuple[int, list[Reading]]


class SystemSampler:
    """One collector's sampler: :meth:`start` in training, :meth:`stop` at its end.

    Args:
        interval: seconds between samples; 0 samples nothing.
        nvml_loader: returns the ``pynvml`` module or None (tests pass a fake).
        wall_clock: the clock the samples are aligned to.
    """

    def __init__(
        self,
        interval: float,
        *,
        nvml_loader: Callable[[], Any | None] = load_nvml,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.interval = interval
        self._nvml_loader = nvml_loader
        self._wall_clock = wall_clock
        self._queue: collections.deque[Sample] = collections.deque(maxlen=MAX_QUEUED)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process: ProcessReadings | None = None
        self._gpu: GpuReadings | None = None
        self._step: Callable[[], int] = lambda: 0
        self._failed = False  # the thread stopped on an error: no last sample
        #: Samples taken, and the sampler thread's CPU seconds (tools/bench/collector.py).
        self.samples = 0
        self.thread_cpu = 0.0

    @property
    def pending(self) -> bool:
        """Samples wait for the training thread."""
        return bool(self._queue)

    @property
    def latest_step(self) -> int:
        """The latest step a sample may be recorded at now: the step running, or once
        sampling stopped, the step after the last (the last sample's)."""
        return self._step() + self._stop.is_set()

    def take(self) -> list[Sample]:
        """The samples taken since the last call, oldest first (the training thread's)."""
        queue, taken = self._queue, []
        while queue:
            taken.append(queue.popleft())
        return taken

    def start(self, step: Callable[[], int], local_rank: int = 0) -> None:
        """Training starts: open the readings and sample every interval until :meth:`stop`.

        ``step``: the step running now (read from the sampler's thread).
        """
        self.stop()
        if self.interval <= 0:
            return
        self._step = step
        self._queue.clear()
        try:
            self._process = ProcessReadings()
        except Exception as error:
            logger.warning("The process is not sampled in this run (psutil: %s)", error)
            self._process = None
        self._gpu = self._open_gpu(local_rank)
        self._stop.clear()
        self._failed = False
        try:
            # On the caller's thread, as training starts: the collector writes it at step
            # 0 with the start fingerprint, before any value of the first step is added.
            self.sample(rates=False)
        except Exception:
            logger.exception("System sampling failed; it stops for this run")
            self._failed = True
            return
        self._thread = threading.Thread(target=self._run, name="rankscribe-system", daemon=True)
        self._thread.start()

    def _open_gpu(self, local_rank: int) -> GpuReadings | None:
        nvml = self._nvml_loader()
        if nvml is None:
            return None  # no nvidia-ml-py: no GPU tags
        device = gpu_device(local_rank)
        if device is None:
            return None
        try:
            return GpuReadings(nvml, device)
        except Exception as error:
            logger.warning("The GPU is not sampled in this run (NVML: %s)", error)
            return None

    def sample(self, *, rates: bool = True, after: bool = False) -> None:
        """Take one sample now (the thread's work; also callable directly).

        ``rates=False``: the sample as training starts, without the readings
        "since the last sample" (there is none). ``after``: the sample as
        training ends, labelled with the step after the last.
        """
        step = self._step() + after
        readings: list[Reading] = []
        if self._process is not None:
            readings.extend(self._process.read(rates=rates))
        gpu = self._gpu
        if gpu is not None:
            try:
                readings.extend(gpu.read())
            except Exception as error:
                logger.warning("GPU sampling stops in this run (NVML: %s)", error)
                self._gpu = None
                gpu.close()
        if readings:
            self._queue.append((step, readings))
        self.samples += 1

    def _run(self) -> None:
        interval = self.interval
        # One sample at each tick of the grid (the first was taken as training started).
        while not self._stop.wait(interval - self._wall_clock() % interval):
            try:
                self.sample()
            except Exception:
                logger.exception("System sampling failed; it stops for this run")
                self._failed = True
                return
            self.thread_cpu = time.thread_time()

    def stop(self) -> None:
        """Stop the thread (a sample under way finishes first), then take the last sample.

        The last sample, as training ends, is taken here on the caller's thread,
        so a job shorter than the interval still has a sample at either end. It
        is labelled with the step after the last on every rank (the last step's
        timings may be written already on one rank and not on another, and a
        sample never goes to a step written: docs/system-metrics.md). Queued
        samples stay.
        """
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=10.0)
            if thread.is_alive():
                logger.warning("The system sampler's thread did not stop in time")
            elif not self._failed:
                try:
                    self.sample(after=True)
                except Exception:
                    logger.exception("The system's last sample failed")
        gpu, self._gpu = self._gpu, None
        if gpu is not None:
            gpu.close()
