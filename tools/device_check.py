#!/usr/bin/env python3
"""The collector's accelerator paths on a machine with one GPU, in one table (under 5 minutes).

    python tools/device_check.py [--parameters 1_000_000_000] [--steps 200]
    python tools/device_check.py --dry-run      # here: a stand-in NVML, CPU tensors, small sizes

Three checks, each printed as rows of one table (check, reading, value, note):

1. **NVML**: the sampler's readings of device 0 (``rankscribe/system/gpu_*``:
   utilisation, memory used, SM clock, power, temperature, throttle reasons and
   their flags), read three times through ``pynvml`` (``nvidia-ml-py``).
2. **Forward timing on the device**: the collector's forward timer on a stack of
   linear layers, on the device's timing events (read with ``query()`` a step
   or more later, one wait at the end), against the wall time of the same
   forwards with a synchronise around each (the reference; the events should
   read a little less, as they leave out the launch).
3. **Fingerprint on the device** of ``--parameters`` float32 parameters (1 B:
   4 GB, 100 tensors): per collected step (the default 4 MiB budget's slice),
   the median time against a device copy of the same bytes, and the whole
   model once (what step 0 pays).

``--dry-run`` runs the same code with ``tools/fake_nvml.py`` as ``pynvml``, a
host-clock stand-in for the device's timing events and CPU tensors (the device
fingerprint's torch operations, run on the CPU), at small sizes: it checks the
tool, not the device.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from rankscribe.collector._fingerprint import (
    DEFAULT_FINGERPRINT_BUDGET,
    slice_bounds,
    slice_fingerprint,
)
from rankscribe.collector.adapters._torch import ForwardTimer, TorchDevicePart
from rankscribe.collector.system._readings import GpuReadings, gpu_device, load_nvml

HERE = Path(__file__).resolve().parent
COLLECT_FREQ = 10
TENSORS = 100
Row = tuple[str, str, str, str]


class HostEvent:
    """A stand-in for a device timing event (``--dry-run``): the host clock at ``record``."""

    def __init__(self) -> None:
        self.at = 0.0

    def record(self) -> None:
        self.at = time.perf_counter()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: HostEvent) -> float:
        return (end.at - self.at) * 1000.0  # milliseconds, as torch's events


def fake_nvml() -> Any:
    spec = importlib.util.spec_from_file_location("fake_pynvml", HERE / "fake_nvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.set_device(0, sm_clock_mhz=1410, reasons=0x20, temperature=87)
    return module


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def nvml_rows(nvml: Any) -> list[Row]:
    if nvml is None:
        return [("nvml", "pynvml", "absent", "pip install 'rankscribe-collector[nvml]'")]
    device = gpu_device(0)
    if device is None:
        return [("nvml", "device", "none visible", "CUDA_VISIBLE_DEVICES is empty")]
    try:
        readings = GpuReadings(nvml, device)
        samples = []
        for _ in range(3):
            samples.append(dict(readings.read()))
            time.sleep(0.1)
        readings.close()
    except Exception as error:
        return [("nvml", "error", type(error).__name__, str(error)[:60])]
    rows = []
    for tag in samples[0]:
        values = [sample.get(tag, float("nan")) for sample in samples]
        name = tag.removeprefix("rankscribe/system/")
        rows.append(("nvml", name, " / ".join(f"{value:g}" for value in values), "3 reads"))
    return rows


def forward_rows(device: torch.device, dry_run: bool, steps: int) -> list[Row]:
    width = 256 if dry_run else 4096
    module = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(4)]).to(device)
    batch = torch.randn(64 if dry_run else 512, width, device=device)
    timer = ForwardTimer(module, HostEvent if dry_run else None)
    on_device = timer.on_device
    timed: list[tuple[int, float]] = []
    walls: list[float] = []
    with torch.no_grad():
        for _ in range(3):  # warm-up, not timed
            module(batch)
        timer.reset()
        for step in range(1, steps + 1):
            synchronize(device)
            began = time.perf_counter()
            module(batch)
            synchronize(device)
            walls.append(time.perf_counter() - began)
            timed.extend(timer.take(step))
    timed.extend(timer.finish())
    timer.remove()
    seconds = [value for _, value in timed]
    event_ms = statistics.median(seconds) * 1e3 if seconds else float("nan")
    wall_ms = statistics.median(walls) * 1e3
    path = "device events" if on_device else "host clock (no device events)"
    return [
        ("forward", "path", path, "host stand-in events" if dry_run else str(device)),
        ("forward", "steps timed", f"{len(seconds)} of {steps}", "one wait at the end"),
        ("forward", "median (events)", f"{event_ms:.3f} ms", ""),
        ("forward", "median (synchronised wall)", f"{wall_ms:.3f} ms", "reference"),
        ("forward", "events / wall", f"{event_ms / wall_ms:.2f}", "expect <= 1"),
    ]


def fingerprint_rows(device: torch.device, parameters: int, budget: int, steps: int) -> list[Row]:
    per_tensor = parameters // TENSORS
    generator = torch.Generator(device=device).manual_seed(0)
    tensors = [torch.rand(per_tensor, device=device, generator=generator) for _ in range(TENSORS)]
    parts = [TorchDevicePart(tensor) for tensor in tensors]
    total = sum(part.nbytes for part in parts)
    flat = [tensor.view(torch.uint8) for tensor in tensors]
    target = torch.empty(budget, dtype=torch.uint8, device=device)
    slices = -(-total // budget)
    fingerprints, copies = [], []
    for index in range(min(steps, slices)):
        start, stop = slice_bounds(total, budget, index * COLLECT_FREQ, COLLECT_FREQ)
        synchronize(device)
        began = time.perf_counter()
        slice_fingerprint(parts, start, stop)  # brings the 8-byte sums to the host: a wait
        fingerprints.append(time.perf_counter() - began)
        synchronize(device)
        began = time.perf_counter()
        copy_slice(flat, target, start, stop)
        synchronize(device)
        copies.append(time.perf_counter() - began)
    synchronize(device)
    began = time.perf_counter()
    slice_fingerprint(parts, 0, total)
    whole = time.perf_counter() - began
    fingerprint, copy = statistics.median(fingerprints), statistics.median(copies)
    return [
        ("fingerprint", "parameters", f"{parameters:,} float32", f"{total / 1e6:,.0f} MB"),
        ("fingerprint", "per collected step", f"{fingerprint * 1e3:.3f} ms", f"{budget} B slice"),
        ("fingerprint", "copy of the same bytes", f"{copy * 1e3:.3f} ms", "baseline"),
        ("fingerprint", "fingerprint / copy", f"{fingerprint / copy:.1f}", ""),
        ("fingerprint", "whole model (step 0)", f"{whole:.3f} s", "once"),
    ]


def copy_slice(flat: list[torch.Tensor], target: torch.Tensor, start: int, stop: int) -> None:
    offset = written = 0
    for raw in flat:
        low, high = max(start - offset, 0), min(stop - offset, raw.numel())
        if low < high:
            target[written : written + high - low].copy_(raw[low:high])
            written += high - low
        offset += raw.numel()
        if offset >= stop:
            break


def table(rows: list[Row]) -> str:
    header: Row = ("check", "reading", "value", "note")
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="stand-in NVML, CPU, small sizes")
    parser.add_argument("--parameters", type=int, default=None, help="default 1e9 (dry run 1e6)")
    parser.add_argument("--steps", type=int, default=200, help="forward steps and slices timed")
    arguments = parser.parse_args(argv)
    if arguments.dry_run:
        device, nvml = torch.device("cpu"), fake_nvml()
        parameters = arguments.parameters or 1_000_000
        budget, steps = 64 * 1024, min(arguments.steps, 20)
    else:
        if not torch.cuda.is_available():
            print("no GPU here: run with --dry-run to check the tool", file=sys.stderr)
            return 2
        device, nvml = torch.device("cuda", 0), load_nvml()
        parameters = arguments.parameters or 1_000_000_000
        budget, steps = DEFAULT_FINGERPRINT_BUDGET, arguments.steps
    began = time.perf_counter()
    rows = nvml_rows(nvml)
    rows += forward_rows(device, arguments.dry_run, steps)
    rows += fingerprint_rows(device, parameters, budget, steps)
    rows.append(("total", "wall time", f"{time.perf_counter() - began:.1f} s", "limit 300 s"))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
