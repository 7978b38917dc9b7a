#!/usr/bin/env python3
"""The collector's accelerator paths on a machine with one GPU, in one table (under 5 minutes).

    python tools/device_check.py [--parameters 1_000_000_000] [--steps 200]
    python tools/device_check.py --dry-run      # here: a stand-in NVML, CPU tensors, small sizes

Seven checks, each printed as rows of one table (check, reading, value, note):

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
   the median time against a device copy of the same bytes, the whole
   model once (what step 0 pays), and whether the device's sum equals the
   same sum of a host copy (the fingerprint must not depend on where the
   tensors live).
4. **Histograms on the device**: the buckets of five tensors counted on
   the device (what a collected step does for a model's first five
   parameters) against the host's count of a copy: equal, and how long each
   takes.
5. **A training run** on the device through ``TrainSession`` and
   ``SummaryCollector`` (0.1 s system interval), against the same loop
   without the collector, alternated (``SESSION_PAIRS`` of each, the best of
   each compared): the share of the run the collector added, the median time
   of a collected and of a quiet step on the host (a collected step that
   waits for the device shows there), what the cost budget decided in each run
   (the share it measured, its windows timed on the device's clock too, and what
   it shed), what the run's files hold (forward
   times, the collector's record of its own cost, the ``gpu_*`` readings), and
   the synchronising calls made on the training thread during its steps
   (torch's ``set_sync_debug_mode("warn")``, its "called a synchronizing"
   warnings counted on that thread: expect 0; the device values are read by
   the writer's thread, docs/collector-schedule.md, "Values read from a
   device").
6. **The gradient probe** on a ``DistributedDataParallel`` network of one
   rank (NCCL; an in-process store), against the same network without it,
   in alternated blocks of steps (the device synchronised at each block's
   ends only): what it adds to a small step (a 4-layer MLP of width 1024,
   batch 32, whose step is the host's launching) and to a step of the
   session's size (width 4096, batch 2048), and the synchronising calls in
   the probed steps (expect 0; docs/gradients.md, "What it costs").
7. **Summary operators on the device**: a ``TrainSession`` whose steps call
   ``tensor_summary``, ``histogram_summary`` and ``scalar_summary`` of device tensors
   (``OPERATOR_STEPS`` steps): the synchronising calls on the training thread in
   its steps (expect 0: each value's copy to the host is started at the steps that
   keep its kind and read by the writer's thread), and whether the files hold each
   value at its steps, equal to a host copy taken there.

``--dry-run`` runs the same code with ``tools/fake_nvml.py`` as ``pynvml``, a
host-clock stand-in for the device's timing events and CPU tensors (the device
fingerprint's torch operations, run on the CPU), at small sizes, and the training
run's model on the tests' fake device (``tests/_support/fake_device.py``, which
counts the waits on the training thread as the sync debug mode does on a GPU): it
checks the tool, not the device.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import statistics
import sys
import tempfile
import threading
import time
import warnings
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rankscribe.collector._fingerprint import (
    DEFAULT_FINGERPRINT_BUDGET,
    slice_bounds,
    slice_fingerprint,
)
from rankscribe.collector.adapters._torch import ForwardTimer, TorchDevicePart
from rankscribe.collector.adapters._torch_histogram import device_histograms
from rankscribe.collector.cost._budget import (
    THREADS_COST_TAG,
    TRAINING_COST_TAG,
    WALL_COST_TAG,
    said_in_short,
)
from rankscribe.collector.system._readings import GpuReadings, gpu_device, load_nvml

HERE = Path(__file__).resolve().parent
COLLECT_FREQ = 10
#: Bare and collected training runs of the session check, alternated (best of each).
SESSION_PAIRS = 2
#: The logger the cost budget's decisions are said on.
BUDGET_LOGGER = "rankscribe.collector.cost._budget"
#: The gradient probe's check: alternated blocks of each copy, and steps in a block.
PROBE_BLOCKS, PROBE_STEPS = 4, 50
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


class SyncCounter:
    """Synchronising CUDA calls made on the training thread (torch's sync debug mode)."""

    def __init__(self) -> None:
        self.count = 0
        self._thread = threading.get_ident()
        self._saved: Any = None
        self._caught = warnings.catch_warnings()  # restores the filters and showwarning

    def __enter__(self) -> SyncCounter:
        self._caught.__enter__()
        warnings.simplefilter("always")  # every call, not the first of each place
        self._saved = warnings.showwarning
        warnings.showwarning = self._show
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def _show(self, message: Any, *args: Any, **kwargs: Any) -> None:
        text = str(message)
        if "called a synchronizing" in text:  # torch's words for each synchronising call
            if threading.get_ident() == self._thread:
                self.count += 1
            return
        if "debug mode is a prototype" in text:  # said when the mode is set: not a call
            return
        self._saved(message, *args, **kwargs)

    def __exit__(self, *exc: object) -> None:
        torch.cuda.set_sync_debug_mode(0)
        self._caught.__exit__(None, None, None)


def fake_device() -> Any:
    """The tests' fake device (``--dry-run``): it counts the waits on the training thread."""
    path = HERE.parent / "tests" / "_support" / "fake_device.py"
    spec = importlib.util.spec_from_file_location("fake_device", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.FakeDevice()


def fake_nvml() -> Any:
    spec = importlib.util.spec_from_file_location("fake_pynvml", HERE / "fake_nvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    sys.modules["pynvml"] = module  # the collector's sampler (session check) loads it by name
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
        parity_row(parts[0], min(budget, parts[0].nbytes)),
    ]


def parity_row(part: TorchDevicePart, length: int) -> Row:
    """The device's sum of a slice against the same sum over a host copy of those bytes."""
    on_device = slice_fingerprint([part], 0, length)
    host = TorchDevicePart(part._bytes[:length].cpu())
    same = on_device == slice_fingerprint([host], 0, length)
    return ("fingerprint", "device sum == host sum", "yes" if same else "NO", f"{length} B")


def histogram_rows(device: torch.device, dry_run: bool) -> list[Row]:
    """Five tensors' histograms counted on the device against the host's count of a copy."""
    from rankscribe.writer.histograms import compute_histogram

    size = 1 << (14 if dry_run else 24)
    generator = torch.Generator(device=device).manual_seed(1)
    tensors = [torch.randn(size, device=device, generator=generator) for _ in range(5)]
    tensors[1][::1000] = float("nan")  # one with non-finite values: the second pass
    tensors[2] = tensors[2].half()
    device_times, host_times = [], []
    for _ in range(5):
        synchronize(device)
        began = time.perf_counter()
        counted = device_histograms(tensors)
        device_times.append(time.perf_counter() - began)
        began = time.perf_counter()
        expected = [compute_histogram(tensor.cpu().numpy()) for tensor in tensors]
        host_times.append(time.perf_counter() - began)
    same = all(
        got.counts.tolist() == want.counts.tolist()
        and got.edges.tolist() == want.edges.tolist()
        and got.widths.tolist() == want.widths.tolist()
        and (got.count, got.nan_count, got.min, got.max)
        == (want.count, want.nan_count, want.min, want.max)
        for got, want in zip(counted, expected, strict=True)
    )
    on_device, on_host = statistics.median(device_times), statistics.median(host_times)
    return [
        ("histogram", "tensors", f"5 x {size:,}", "float32, one with NaN, one float16"),
        ("histogram", "device == host", "yes" if same else "NO", "edges, widths, counts"),
        ("histogram", "on the device", f"{on_device * 1e3:.2f} ms", "two waits"),
        ("histogram", "copy + host count", f"{on_host * 1e3:.2f} ms", "what it replaces"),
    ]


def session_rows(device: torch.device, dry_run: bool, steps: int) -> list[Row]:
    """Training runs with and without the collector, alternated; what their files hold."""
    training = Training(device, dry_run)
    training.bare_loop(5)  # warm-up
    # Past the cost budget's first window (steps 20-29 at collect_freq 10, decided at step
    # 30), with collected and quiet steps after the warm-up to time, however slow the
    # machine.
    steps = max(steps, 5 * COLLECT_FREQ)
    bare = [training.bare_loop(steps)]
    if bare[0] < 2.0:  # long enough for the sampler's readings (every 0.1 s) to reach the files
        steps = max(steps, int(steps * 2.0 / max(bare[0], 1e-6)))
        bare = [training.bare_loop(steps)]
    runs = []
    for pair in range(SESSION_PAIRS):  # bare, collected, bare, collected, ...
        if pair:
            bare.append(training.bare_loop(steps))
        runs.append(training.collected_loop(steps))
    best = min(runs, key=lambda run: run.seconds)
    collected = [best.host[step - 1] for step in range(COLLECT_FREQ, steps + 1, COLLECT_FREQ)]
    quiet = [best.host[step - 1] for step in range(21, steps + 1) if step % COLLECT_FREQ]
    forward = best.curves.get("rankscribe/forward_time")
    synchronising = sum(run.synchronising for run in runs)
    rows: list[Row] = [
        (
            "session",
            "steps",
            f"{steps}",
            f"collect_freq {COLLECT_FREQ}, system 0.1 s, no landscape",
        ),
        (
            "session",
            "bare loop",
            f"{min(bare):.3f} s",
            f"{min(bare) / steps * 1e3:.2f} ms a step, no collector; best of {len(bare)}",
        ),
        (
            "session",
            "with the collector",
            f"{best.seconds:.3f} s",
            f"once costs included; best of {len(runs)}, alternated with the bare loop",
        ),
        ("session", "added", f"{(best.seconds / min(bare) - 1) * 100:+.1f} %", ""),
        ("session", "host: collected step", f"{_median_ms(collected)} ms", "median, host clock"),
        ("session", "host: quiet step", f"{_median_ms(quiet)} ms", "median from step 21"),
        ("session", "forward_time points", str(0 if forward is None else len(forward[0])), ""),
        (
            "session",
            "training-thread syncs",
            str(synchronising),
            "in the steps; fake device" if dry_run else "in the steps; expect 0",
        ),
    ]
    return rows + budget_rows(runs) + file_rows(best.curves, min(bare) / steps)


def budget_rows(runs: list[CollectedRun]) -> list[Row]:
    """What the cost budget decided in each run: the share it measured (the window's time
    on the device's clock as well as the host's: docs/collector-cost.md) and what it shed."""
    rows: list[Row] = []
    for number, run in enumerate(runs, 1):
        for message in run.said or ["(nothing shed)"]:
            said = said_in_short(message)
            value, note = (
                (f"{said.share}, steps {said.steps}", said.what) if said else (message, "")
            )
            rows.append(("session", f"budget, run {number}", value, note))
    return rows


def _median_ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e3:.3f}" if seconds else "-"


@dataclass
class CollectedRun:
    """One training run with the collector: its wall time (once costs included), the
    synchronising calls in its steps, each step's time on the host (from before
    the step's work to after ``session.step``), what its files hold and what its cost
    budget said."""

    seconds: float
    synchronising: int
    host: list[float]
    curves: dict[str, Any]
    #: What the cost budget said in the run (its decisions' messages).
    said: list[str]


class Training:
    """The session check's model and loop (about 0.4 TFLOP a step in float32 on the device:
    a step of a few ms to 10 ms), bare or with the collector at ``COLLECT_FREQ``."""

    def __init__(self, device: torch.device, dry_run: bool) -> None:
        width, batch = (256, 256) if dry_run else (4096, 2048)
        torch.manual_seed(0)
        self.device = device
        self.model = torch.nn.Sequential(
            torch.nn.Linear(width, width),
            torch.nn.ReLU(),
            torch.nn.Linear(width, width),
            torch.nn.ReLU(),
            torch.nn.Linear(width, 10),
        ).to(device)
        self.fake = fake_device() if dry_run else None
        if self.fake is not None:
            for layer in self.model:
                if isinstance(layer, torch.nn.Linear):
                    layer.weight = torch.nn.Parameter(self.fake.tensor(layer.weight.detach()))
                    layer.bias = torch.nn.Parameter(self.fake.tensor(layer.bias.detach()))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.inputs = torch.randn(batch, width, device=device)
        self.labels = torch.randint(0, 10, (batch,), device=device)

    def one_step(self) -> torch.Tensor:
        self.optimizer.zero_grad()
        loss: torch.Tensor = self.loss_fn(self.model(self.inputs), self.labels)
        loss.backward()  # type: ignore[no-untyped-call, unused-ignore]  # typed torch only
        self.optimizer.step()
        return loss.detach()

    def bare_loop(self, count: int) -> float:
        synchronize(self.device)
        began = time.perf_counter()
        for _ in range(count):
            self.one_step()
        synchronize(self.device)
        return time.perf_counter() - began

    def collected_loop(self, count: int) -> CollectedRun:
        from rankscribe.collector import SummaryCollector, TrainSession
        from rankscribe.writer.reader import scalar_arrays

        fake, host = self.fake, []
        said = Said()
        budget = logging.getLogger(BUDGET_LOGGER)
        budget.addHandler(said)
        with tempfile.TemporaryDirectory() as folder, ExitStack() as listening:
            listening.callback(budget.removeHandler, said)
            collector = SummaryCollector(
                folder,
                collect_freq=COLLECT_FREQ,
                system_interval=0.1,
                collect_specified_data={"collect_landscape": None},  # 19 copies of the model
            )
            synchronize(self.device)
            began = time.perf_counter()
            with ExitStack() as stack:
                if fake is not None:
                    fake.counting = True
                waits = watch_waits(stack, fake)
                before = waits()
                with TrainSession(
                    [collector],
                    network=self.model,
                    optimizer=self.optimizer,
                    loss_fn=self.loss_fn,
                    epochs=1,
                ) as session:
                    for _ in session.epochs():
                        for _ in range(count):
                            if fake is not None:
                                fake.tick()
                            stepped = time.perf_counter()
                            session.step((self.inputs, self.labels), self.one_step())
                            host.append(time.perf_counter() - stepped)
                        # Counted over the steps; the end of training may wait (not a step).
                        synchronising = waits() - before
                        if fake is not None:
                            fake.counting = False  # the device finishes its queue
            synchronize(self.device)
            seconds = time.perf_counter() - began
            curves = scalar_arrays(folder)
        return CollectedRun(seconds, synchronising, host, curves, said.messages)


class Said(logging.Handler):
    """The messages of a logger, as the user would read them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def probe_rows(device: torch.device, dry_run: bool) -> list[Row]:
    """The gradient probe on a DDP network of one rank, against the same network without
    it (alternated blocks of steps, the device synchronised at each block's ends only):
    what it adds to a step too small for the device's work to hide the host's launches,
    and to the session check's step; and the synchronising calls in the probed blocks."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from rankscribe.collector.adapters._torch_gradients import gradient_probe

    backend = "nccl" if device.type == "cuda" else "gloo"
    # (torch's stubs do not export it; where torch is absent, the type env, it is Any)
    store = dist.HashStore()  # type: ignore[attr-defined, unused-ignore]
    dist.init_process_group(backend, store=store, rank=0, world_size=1)
    rows: list[Row] = []
    try:
        sizes = ((64, 16), (256, 64)) if dry_run else ((1024, 32), (4096, 2048))
        for (width, batch), name in zip(sizes, ("small step", "session step"), strict=True):
            torch.manual_seed(0)
            inputs = torch.randn(batch, width, device=device)
            labels = torch.randint(0, 10, (batch,), device=device)
            copies = []
            for probed in (False, True):
                network = DistributedDataParallel(_mlp(width).to(device))
                probe = gradient_probe(network) if probed else None
                optimizer = torch.optim.SGD(network.parameters(), lr=1e-4)
                copies.append((network, optimizer, probe))
            times: list[list[float]] = [[], []]
            synchronising = 0
            for _ in range(PROBE_BLOCKS):
                for which, (network, optimizer, probe) in enumerate(copies):
                    seconds, waited = _probe_block(
                        device, network, optimizer, probe, inputs, labels
                    )
                    times[which].append(seconds)
                    synchronising += waited
            bare, probed_step = min(times[0]), min(times[1])
            rows += [
                ("probe", f"{name}: bare", f"{bare * 1e3:.3f} ms", f"width {width}, batch {batch}"),
                ("probe", f"{name}: probed", f"{probed_step * 1e3:.3f} ms", ""),
                ("probe", f"{name}: added", f"{(probed_step / bare - 1) * 100:+.1f} %", ""),
            ]
            for _, _, probe in copies:
                if probe is not None:
                    probe.finish()
        rows.append(
            ("probe", "training-thread syncs", str(synchronising), "in the probed steps; expect 0")
        )
    finally:
        dist.destroy_process_group()
    return rows


def _mlp(width: int) -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def _probe_block(
    device: torch.device,
    network: Any,
    optimizer: Any,
    probe: Any,
    inputs: torch.Tensor,
    labels: torch.Tensor,
) -> tuple[float, int]:
    """Seconds a step over ``PROBE_STEPS`` steps (the probe's ``take`` at each step's end,
    as the collector's ``step_end`` calls it), and the synchronising calls in the probed
    steps (the block's own two synchronisations not counted)."""
    loss_fn = torch.nn.CrossEntropyLoss()
    synchronize(device)
    began = time.perf_counter()
    with ExitStack() as stack:
        waits = watch_waits(stack, None) if probe is not None else None
        for step in range(PROBE_STEPS):
            started = time.perf_counter()
            optimizer.zero_grad()
            loss_fn(network(inputs), labels).backward()
            optimizer.step()
            if probe is not None:
                probe.take(step, started)
        synchronising = waits() if waits is not None else 0
    synchronize(device)
    return (time.perf_counter() - began) / PROBE_STEPS, synchronising


def file_rows(curves: dict[str, Any], step: float) -> list[Row]:
    """What the run's files hold: the forward times, the collector's own record of its
    cost (the median of its windows, as a share of the bare ``step``: what the cost
    budget compared with the budget) and the ``gpu_*`` readings."""
    rows: list[Row] = []
    forward = curves.get("rankscribe/forward_time")
    if forward is not None and len(forward[1]):
        median = float(statistics.median(forward[1].tolist())) * 1e3
        rows.append(("session", "forward_time median", f"{median:.3f} ms", "from the files"))
    for tag, what in (
        (TRAINING_COST_TAG, "the training thread's time"),
        (THREADS_COST_TAG, "its threads' CPU"),
        (WALL_COST_TAG, "training thread + the slowdown after"),
    ):
        points = curves.get(tag)
        if points is not None and len(points[1]):
            share = float(statistics.median(points[1].tolist())) / step * 100
            name = f"recorded {tag.rsplit('/', 1)[-1]} cost"
            rows.append(("session", name, f"{share:.1f} %", what))
    gpu = sorted(tag.removeprefix("rankscribe/system/") for tag in curves if "/gpu_" in tag)
    rows.append(("session", "gpu tags", str(len(gpu)), ", ".join(gpu)))
    return rows


def watch_waits(stack: ExitStack, fake: Any) -> Any:
    """A function counting the waits for the device made so far on the training thread."""
    if fake is not None:
        from rankscribe.collector.testing import device_backend

        stack.enter_context(fake.installed())
        backend: AbstractContextManager[None] = device_backend(fake)
        stack.enter_context(backend)
        return lambda: len(fake.waits)
    if not torch.cuda.is_available():
        return lambda: 0
    counter = stack.enter_context(SyncCounter())
    return lambda: counter.count


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


OPERATOR_STEPS = 40


def operator_rows(device: torch.device, dry_run: bool) -> list[Row]:
    """Summary operators given device tensors at every step of a session: the waits for
    the device on the training thread, and whether the files hold each step's values."""
    from rankscribe.collector import SummaryCollector, TrainSession
    from rankscribe.writer import histogram_summary, scalar_summary, tensor_summary
    from rankscribe.writer.events import Histogram, load_dir

    fake = fake_device() if dry_run else None
    expected: dict[int, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
        collector = SummaryCollector(
            folder,
            collect_freq=COLLECT_FREQ,
            collect_tensor_freq=8,
            collect_specified_data={"collect_landscape": None},
            system_interval=0,
        )
        waits = watch_waits(stack, fake)
        before = waits()
        with TrainSession([collector], epochs=1, steps_per_epoch=OPERATOR_STEPS) as session:
            for _ in session.epochs():
                for step in range(1, OPERATOR_STEPS + 1):
                    if fake is not None:
                        fake.tick()
                    values = torch.arange(12, dtype=torch.float32, device=device) * step
                    if fake is not None:
                        values = fake.tensor(values)
                    expected[step] = np.arange(12, dtype=np.float32) * step  # (not read back)
                    tensor_summary("operator/tensor", values.reshape(3, 4))
                    histogram_summary("operator/histogram", values)
                    scalar_summary("operator/peak", values.amax())
                    session.step(None, 1.0 / step)
                synchronising = waits() - before
                if fake is not None:
                    fake.counting = False
        found: dict[str, dict[int, Any]] = {}
        for event in load_dir(folder):
            for value in getattr(event, "values", ()):
                if value.tag.startswith("operator/") and event.step is not None:
                    found.setdefault(value.tag, {})[event.step] = value.value
    tensors, histograms = found.get("operator/tensor", {}), found.get("operator/histogram", {})
    peaks = found.get("operator/peak", {})
    equal = (
        bool(tensors)
        and all(np.array_equal(np.ravel(array), expected[step]) for step, array in tensors.items())
        and bool(histograms)
        and all(
            isinstance(h, Histogram) and (h.min, h.max) == (0.0, 11.0 * step)
            for step, h in histograms.items()
        )
        and bool(peaks)
        and all(peak == 11.0 * step for step, peak in peaks.items())
    )
    return [
        ("operators", "steps with a tensor", ", ".join(map(str, sorted(tensors))), "tensor steps"),
        (
            "operators",
            "steps with a histogram",
            str(len(histograms)),
            f"collect_freq {COLLECT_FREQ}",
        ),
        ("operators", "files == host copies", "yes" if equal else "NO", "each at its step"),
        ("operators", "training-thread syncs", str(synchronising), "expect 0"),
    ]


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
    rows += histogram_rows(device, arguments.dry_run)
    rows += session_rows(device, arguments.dry_run, steps)
    rows += probe_rows(device, arguments.dry_run)
    rows += operator_rows(device, arguments.dry_run)
    rows.append(("total", "wall time", f"{time.perf_counter() - began:.1f} s", "limit 300 s"))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
