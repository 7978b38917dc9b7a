# ruff: noqa: N802, N816 - the names are NVML's own (pynvml)
"""A stand-in for NVIDIA's ``pynvml`` module (``nvidia-ml-py``), for machines without a GPU.

It mirrors the part of the real API the collector's sampler and
``tools/device_check.py --dry-run`` call, with the real names, units and
constant values (``nvml.h``): ``nvmlInit``, ``nvmlShutdown``,
``nvmlDeviceGetCount``, ``nvmlDeviceGetHandleByIndex``,
``nvmlDeviceGetHandleByUUID``, ``nvmlDeviceGetUtilizationRates`` (``.gpu``, %),
``nvmlDeviceGetMemoryInfo`` (``.used``, bytes), ``nvmlDeviceGetClockInfo(handle,
NVML_CLOCK_SM)`` (MHz), ``nvmlDeviceGetPowerUsage`` (milliwatts),
``nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU)`` (C),
``nvmlDeviceGetCurrentClocksEventReasons`` and its older name
``nvmlDeviceGetCurrentClocksThrottleReasons`` (a bit mask), and ``NVMLError``.

Each device's readings are set with :func:`set_device`; :func:`fail` makes the
next calls raise ``NVMLError`` (a driver that went away).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
NVML_TEMPERATURE_GPU = 0

nvmlClocksEventReasonGpuIdle = nvmlClocksThrottleReasonGpuIdle = 0x1
nvmlClocksEventReasonApplicationsClocksSetting = 0x2
nvmlClocksThrottleReasonApplicationsClocksSetting = 0x2
nvmlClocksEventReasonSwPowerCap = nvmlClocksThrottleReasonSwPowerCap = 0x4
nvmlClocksThrottleReasonHwSlowdown = 0x8
nvmlClocksEventReasonSyncBoost = nvmlClocksThrottleReasonSyncBoost = 0x10
nvmlClocksEventReasonSwThermalSlowdown = nvmlClocksThrottleReasonSwThermalSlowdown = 0x20
nvmlClocksThrottleReasonHwThermalSlowdown = 0x40
nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80
nvmlClocksEventReasonDisplayClockSetting = nvmlClocksThrottleReasonDisplayClockSetting = 0x100
nvmlClocksEventReasonNone = nvmlClocksThrottleReasonNone = 0x0


class NVMLError(Exception):
    """As the real module's: ``value`` is NVML's return code."""

    def __init__(self, value: int = 999) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class Device:
    utilization: int = 80
    memory_used: int = 30 * 2**30
    sm_clock_mhz: int = 1980
    power_mw: int = 650_000
    temperature: int = 65
    reasons: int = 0
    reads: int = 0  # calls of nvmlDeviceGetUtilizationRates: a test waits on it


devices: list[Device] = [Device()]
_state = {"initialised": False, "failing": False}


def set_device(index: int, **readings: int) -> None:
    """Set device ``index``'s readings (adding devices up to it)."""
    while len(devices) <= index:
        devices.append(Device())
    for name, value in readings.items():
        setattr(devices[index], name, value)


def fail(failing: bool = True) -> None:
    _state["failing"] = failing


def reset() -> None:
    """One device with the default readings; not failing."""
    devices[:] = [Device()]
    _state.update(initialised=False, failing=False)


def _check() -> None:
    if _state["failing"]:
        raise NVMLError(15)  # NVML_ERROR_GPU_IS_LOST
    if not _state["initialised"]:
        raise NVMLError(1)  # NVML_ERROR_UNINITIALIZED


def nvmlInit() -> None:
    if _state["failing"]:
        raise NVMLError(9)  # NVML_ERROR_DRIVER_NOT_LOADED
    _state["initialised"] = True


def nvmlShutdown() -> None:
    _state["initialised"] = False


def nvmlDeviceGetCount() -> int:
    _check()
    return len(devices)


def nvmlDeviceGetHandleByIndex(index: int) -> Device:
    _check()
    if not 0 <= index < len(devices):
        raise NVMLError(2)  # NVML_ERROR_INVALID_ARGUMENT
    return devices[index]


def nvmlDeviceGetHandleByUUID(uuid: str) -> Device:
    _check()
    for index, device in enumerate(devices):
        if uuid == f"GPU-{index:08d}":
            return device
    raise NVMLError(6)  # NVML_ERROR_NOT_FOUND


def nvmlDeviceGetUtilizationRates(handle: Device) -> SimpleNamespace:
    _check()
    handle.reads += 1
    return SimpleNamespace(gpu=handle.utilization, memory=handle.utilization // 2)


def nvmlDeviceGetMemoryInfo(handle: Device) -> SimpleNamespace:
    _check()
    return SimpleNamespace(total=80 * 2**30, used=handle.memory_used, free=0)


def nvmlDeviceGetClockInfo(handle: Device, clock: int) -> int:
    _check()
    return handle.sm_clock_mhz if clock == NVML_CLOCK_SM else 1593


def nvmlDeviceGetPowerUsage(handle: Device) -> int:
    _check()
    return handle.power_mw


def nvmlDeviceGetTemperature(handle: Device, sensor: int) -> int:
    _check()
    return handle.temperature


def nvmlDeviceGetCurrentClocksEventReasons(handle: Device) -> int:
    _check()
    return handle.reasons


nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons
