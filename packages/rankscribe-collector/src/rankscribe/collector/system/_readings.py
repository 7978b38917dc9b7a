"""One sample of a rank's process, host and accelerator, as ``(tag, value)`` pairs.

``docs/system-metrics.md`` lists every tag and what it means. The process and
host come from psutil (never a ``/proc`` parser of our own); the accelerator
from NVML through NVIDIA's ``nvidia-ml-py`` (the ``pynvml`` module), imported
only when a sample is first wanted and only when installed. A reading the
platform does not offer (an I/O counter on macOS, the core a process runs on
outside Linux and FreeBSD) is left out from then on; an NVML error turns GPU
sampling off with one warning.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from rankscribe.jobview.feed import SYSTEM_TAG_PREFIX

logger = logging.getLogger(__name__)

__all__ = [
    "SHORTEST_RATE_SPAN",
    "THROTTLE_FLAGS",
    "GpuReadings",
    "ProcessReadings",
    "gpu_device",
    "load_nvml",
]

Reading = tuple[str, float]

#: The shortest span, in seconds, a share or rate "since the last sample" is read over. The
#: kernel counts a process's CPU time in ticks (10 ms at the usual 100 a second): over 3 ms a
#: busy process reads 0 % or several hundred percent of a core (556 % was measured on two
#: cores), over 0.1 s within about 10 % of a core of the truth. A sample taken sooner after
#: the last span's start (training ending just after a tick, an interval below this) leaves
#: the shares and rates out, and the next sample's span starts where the last one did.
SHORTEST_RATE_SPAN = 0.1

# NVML's clock event (throttle) reason bits, as nvml.h defines them; read from the
# module when it names them (``nvmlClocksEventReason*`` in newer releases,
# ``nvmlClocksThrottleReason*`` in older ones), else these values.
_REASON_BITS = {
    "SwPowerCap": 0x4,
    "HwSlowdown": 0x8,
    "SwThermalSlowdown": 0x20,
    "HwThermalSlowdown": 0x40,
    "HwPowerBrakeSlowdown": 0x80,
}
#: Flag tag -> the reasons (names above) that set it.
THROTTLE_FLAGS = {
    "gpu_throttle_thermal": ("SwThermalSlowdown", "HwThermalSlowdown"),
    "gpu_throttle_power": ("SwPowerCap", "HwPowerBrakeSlowdown"),
    "gpu_throttle_hw_slowdown": ("HwSlowdown",),
}


class ProcessReadings:
    """This process's CPU, memory, threads, files and I/O; the host's load and memory."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        import psutil  # type: ignore[import-untyped]  # noqa: PLC0415 - loaded with the sampler

        self._psutil = psutil
        self._process = psutil.Process()
        self._clock = clock
        self._missing: set[str] = set()
        # The first cpu_percent call primes the process's counters (it returns 0.0). The
        # cores' busy share comes from cpu_times deltas of our own, not psutil.cpu_percent,
        # whose module-wide baseline the training script may be using itself.
        self._process.cpu_percent(None)
        self._cores = self._core_times()
        self._switches = self._involuntary()
        self._rates_at = clock()  # where the span of the next shares and rates starts

    def _involuntary(self) -> int | None:
        try:
            return int(self._process.num_ctx_switches().involuntary)
        except (self._psutil.Error, AttributeError, NotImplementedError, OSError):
            return None

    def _try(self, name: str, read: Callable[[], float], found: list[Reading]) -> None:
        if name in self._missing:
            return
        try:
            found.append((SYSTEM_TAG_PREFIX + name, float(read())))
        except (self._psutil.Error, AttributeError, NotImplementedError, OSError, IndexError):
            self._missing.add(name)  # not on this platform (or not allowed): left out

    def read(self, *, rates: bool = True) -> list[Reading]:
        """One sample; ``rates=False`` leaves out the shares and rates "since the last sample".

        The sample taken as training starts has no span behind it (the counters
        were primed a moment before): its CPU shares and switch rate would say
        nothing, and leaving them out keeps their span for the next sample. So
        does a sample less than :data:`SHORTEST_RATE_SPAN` after the last span's start.
        """
        now = self._clock()
        elapsed = now - self._rates_at
        rates = rates and elapsed >= SHORTEST_RATE_SPAN
        if rates:
            self._rates_at = now
        found: list[Reading] = []
        process, psutil = self._process, self._psutil
        with process.oneshot():
            if rates:
                self._try("cpu_percent", lambda: process.cpu_percent(None), found)
            self._try("rss_bytes", lambda: process.memory_info().rss, found)
            self._try("threads", process.num_threads, found)
            # Descriptors (every open file, socket and pipe): psutil's open_files() lists
            # paths, which costs a readlink per descriptor.
            self._try("open_files", process.num_fds, found)
            self._try("io_read_bytes", lambda: process.io_counters().read_bytes, found)
            self._try("io_write_bytes", lambda: process.io_counters().write_bytes, found)
            if rates:
                self._try("core_percent", lambda: self._core_percent(process.cpu_num()), found)
                self._switch_rate(found, elapsed)
        self._try("load_1m", lambda: psutil.getloadavg()[0], found)
        self._try("memory_available_bytes", lambda: psutil.virtual_memory().available, found)
        return found

    def _core_times(self) -> list[tuple[float, float]]:
        """Per core: (total, idle) CPU seconds so far (idle counts I/O wait too)."""
        try:
            times = self._psutil.cpu_times(percpu=True)
        except (self._psutil.Error, AttributeError, NotImplementedError, OSError):
            return []
        return [(sum(one), one.idle + getattr(one, "iowait", 0.0)) for one in times]

    def _core_percent(self, core: int) -> float:
        """How busy ``core`` was since the last sample, in percent."""
        before, self._cores = self._cores, self._core_times()
        (total, idle), (total_before, idle_before) = self._cores[core], before[core]
        elapsed = total - total_before
        return 0.0 if elapsed <= 0 else 100.0 * (1.0 - (idle - idle_before) / elapsed)

    def _switch_rate(self, found: list[Reading], elapsed: float) -> None:
        """Involuntary context switches a second over the ``elapsed`` seconds since the last
        sample with rates (the CPU taken away)."""
        count = self._involuntary()
        before, self._switches = self._switches, count
        if count is not None and before is not None:
            found.append(
                (SYSTEM_TAG_PREFIX + "ctx_switches_involuntary", (count - before) / elapsed)
            )


def load_nvml() -> Any | None:
    """The ``pynvml`` module (``nvidia-ml-py``), or None when it is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def gpu_device(local_rank: int, environ: Mapping[str, str] | None = None) -> int | str | None:
    """Which device this rank uses: an NVML index, a UUID, or None (no device visible).

    The rank uses the device at its local rank among those visible, as DDP and
    torchrun do (``cuda:<local_rank>``). ``CUDA_VISIBLE_DEVICES`` lists them
    (indices or ``GPU-``/``MIG-`` UUIDs; NVML numbers every device, whatever
    it says); a list shorter than the local ranks (a launcher that gives each
    rank one device) is indexed modulo its length. An empty list: no device.
    """
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return local_rank
    entries = [item.strip() for item in visible.split(",") if item.strip()]
    if not entries:
        return None
    entry = entries[local_rank % len(entries)]
    if entry.isdigit():
        return int(entry)
    if entry.startswith(("GPU-", "MIG-")):
        return entry
    return None  # "-1", a name NVML does not know: no device


class GpuReadings:
    """One device's utilisation, memory, SM clock, power, temperature and throttle reasons.

    Raises the module's ``NVMLError`` when NVML cannot start or the device is
    not found (the sampler then warns once and samples no GPU).
    """

    def __init__(self, nvml: Any, device: int | str) -> None:
        self._nvml = nvml
        nvml.nvmlInit()
        if isinstance(device, str):
            self._handle = nvml.nvmlDeviceGetHandleByUUID(device)
        else:
            count = nvml.nvmlDeviceGetCount()
            self._handle = nvml.nvmlDeviceGetHandleByIndex(device % max(count, 1))
        self._reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        self._bits = {
            name: int(
                getattr(
                    nvml,
                    f"nvmlClocksEventReason{name}",
                    getattr(nvml, f"nvmlClocksThrottleReason{name}", bit),
                )
            )
            for name, bit in _REASON_BITS.items()
        }

    def read(self) -> list[Reading]:
        nvml, handle, prefix = self._nvml, self._handle, SYSTEM_TAG_PREFIX
        found: list[Reading] = [
            (prefix + "gpu_utilization", float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)),
            (prefix + "gpu_memory_used_bytes", float(nvml.nvmlDeviceGetMemoryInfo(handle).used)),
            (
                prefix + "gpu_sm_clock_mhz",
                float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            ),
            # NVML reports milliwatts.
            (prefix + "gpu_power_watts", nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
            (
                prefix + "gpu_temperature_c",
                float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
            ),
        ]
        if self._reasons is not None:
            reasons = int(self._reasons(handle))
            # The bits NVML defines fit in 24 bits: exact in the float32 of a summary scalar.
            found.append((prefix + "gpu_throttle_reasons", float(reasons & 0xFFFFFF)))
            for tag, names in THROTTLE_FLAGS.items():
                flag = any(reasons & self._bits[name] for name in names)
                found.append((prefix + tag, 1.0 if flag else 0.0))
        return found

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            logger.debug("nvmlShutdown failed", exc_info=True)
