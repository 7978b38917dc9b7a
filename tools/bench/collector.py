#!/usr/bin/env python3
"""What the SummaryCollector costs a training step, against the same loop without it.

    python tools/bench/collector.py [--quick] [--steps N] [--collect-freq 10] [--fast-steps N]
                                    [--torch]

The training step stands for a step whose compute runs elsewhere (an
accelerator, or BLAS threads): it does a little NumPy work on the host, then
waits until STEP_MS milliseconds have passed since it started. So whatever the
collector does on the training thread between steps lengthens the run, and its
background writing (encoding histograms and PNGs, file I/O) overlaps the wait,
as it would in a real job.

Each repetition runs TrainLoop twice over the same data, alternately: bare (no
callback) and with ``SummaryCollector(collect_freq=10)`` collecting its
defaults (loss, five parameter histograms, input images, graph, dataset graph,
landscape parameter files at steps 1-19, train lineage). The run with the
collector is timed from ``__enter__`` to the end of ``__exit__``, so opening
the record and writing everything to disk are included. Printed: the best
wall time of each, the difference per step and as a share of the step (target
< 2%), and the time spent inside the collector's own hooks, split into
collected and other steps. The job view's timings (step time and data wait,
every step; with ``--torch`` the forward time too) and parameter fingerprints
(at step 0 and every collected step, within the default budget) are on, as
they are by default.

``--torch``: the network is a small torch MLP (the same shapes) whose
``forward`` every step calls, in the bare loop too, so the collector's forward
hooks (``rankscribe/forward_time``) are part of what is measured.

A second part measures a step that collects nothing, where a fast step (a
small model trains in about 1 ms) feels the collector most: FAST_STEP_MS
steps, bare and with the collector, alternately; in each run the wall time
from the start of one step to the start of the next, median over the steps
that collect nothing (target: the collector adds <= 40 us, <= 4 % of the
step), and the median time inside the collector's hooks on those steps.

With ``--job-view-interval S`` the collectors get ``job_view_interval=S``. The
live job view runs only in a job of several ranks, so measure it under MPI,
e.g. ``mpiexec -n 2 python tools/bench/collector.py --quick
--job-view-interval 1`` against the same with ``--job-view-interval 0`` (every
rank runs the same loops; rank 0's numbers include its live writer thread).
Under mpiexec the ranks start each run together (a non-blocking barrier,
not timed): without it they drift apart over the runs, and the collector's
collective open and end-of-training round time one rank waiting for the other.

Wall times on a machine other programs load mix in their CPU, so each run
also reports CPU time (:class:`ThreadCpu`): the whole process's, the
training thread's (``time.thread_time``) and every other thread's by name
(``/proc/self/task``, 10 ms ticks), and the live job view's threads as they
measure themselves (``time.thread_time``, exact). A background thread costs
the training thread wall time only through the GIL and busy cores, so its
CPU bounds what it can add to a step.

A third part times the fingerprint of 10 MB of parameters (target: well
under 1 ms) against a plain copy of the same bytes, in the same run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    Callback,
    RunContext,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.collector._fingerprint import parameter_fingerprint
from rankscribe.ranks.launchers import launcher_rank

#: The launchers whose ranks run under mpiexec (they meet through MPI).
MPI_LAUNCHERS = ("openmpi", "pmi", "pmix")

STEP_MS = 10.0
#: ``--job-view-interval``: the collectors' job_view_interval (None: the default).
JOB_VIEW_INTERVAL: float | None = None
#: The collectors' system_interval (None: their default; tools/bench/system.py sets it).
SYSTEM_INTERVAL: float | None = None
FAST_STEP_MS = 1.0
BATCH = 32
#: Steps that save landscape parameter files by default (intervals 1-9, 10-19).
LANDSCAPE_STEPS = range(1, 20)

GRAPH = {
    "name": "mlp",
    "parameters": ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"],
    "nodes": [
        {"name": "x", "op_type": "Input"},
        {"name": "fc1", "op_type": "MatMul", "scope": "Default/fc1", "inputs": ["x", "fc1.weight"]},
        {"name": "b1", "op_type": "Add", "scope": "Default/fc1", "inputs": ["fc1", "fc1.bias"]},
        {"name": "relu", "op_type": "ReLU", "scope": "Default", "inputs": ["b1"]},
        {
            "name": "fc2",
            "op_type": "MatMul",
            "scope": "Default/fc2",
            "inputs": ["relu", "fc2.weight"],
        },
        {"name": "b2", "op_type": "Add", "scope": "Default/fc2", "inputs": ["fc2", "fc2.bias"]},
    ],
    "outputs": ["b2"],
}


class TimedCollector(Callback):
    """Runs a SummaryCollector and adds up the time spent inside it, per step."""

    def __init__(self, collector: SummaryCollector) -> None:
        self.collector = collector
        self.outside_steps = 0.0  # enter, begin, end, exit
        self.outside_cpu = 0.0  # the same, CPU seconds of the training thread
        self.end_seconds = 0.0  # end(): the last round, the lineage gather, rank 0's writing
        self.live_cpu: dict[str, float] = {}  # the live job view's threads, CPU seconds
        self.per_step: list[float] = []
        self._current = 0.0

    def _timed(self, method: Any, *args: Any) -> float:
        start = time.perf_counter()
        method(*args)
        return time.perf_counter() - start

    def _once(self, method: Any, *args: Any) -> float:
        cpu = time.thread_time()
        seconds = self._timed(method, *args)
        self.outside_cpu += time.thread_time() - cpu
        return seconds

    def __enter__(self) -> TimedCollector:
        self.outside_steps += self._once(self.collector.__enter__)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.outside_steps += self._once(self.collector.__exit__, exc_type, exc, traceback)

    def begin(self, run_context: RunContext) -> None:
        self.outside_steps += self._once(self.collector.begin, run_context)

    def step_begin(self, run_context: RunContext) -> None:
        self._current = self._timed(self.collector.step_begin, run_context)

    def step_end(self, run_context: RunContext) -> None:
        self._current += self._timed(self.collector.step_end, run_context)
        self.per_step.append(self._current)

    def epoch_begin(self, run_context: RunContext) -> None:
        self.outside_steps += self._timed(self.collector.epoch_begin, run_context)

    def epoch_end(self, run_context: RunContext) -> None:
        # The epoch's last step pays for it, as in a real loop.
        self.per_step[-1] += self._timed(self.collector.epoch_end, run_context)

    def end(self, run_context: RunContext) -> None:
        self.end_seconds = self._once(self.collector.end, run_context)
        # The live view's threads have stopped: their CPU, each by time.thread_time.
        self.live_cpu = dict(self.collector._live.thread_cpu)
        self.outside_steps += self.end_seconds


class ThreadCpu:
    """CPU seconds per thread of this process during a run (the machine may be loaded).

    Wall time on a shared machine mixes in the other processes; CPU time does not.
    The training thread is read with ``time.thread_time``; every other thread from
    ``/proc/self/task/<id>/stat`` (clock ticks), sampled every SAMPLE seconds until it
    ends, so a thread that ends loses at most one sample's worth. Threads of one name
    add up (each run starts its own).
    """

    SAMPLE = 0.05

    def __init__(self) -> None:
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._seen: dict[int, tuple[str, float]] = {}  # native id -> (name, CPU seconds)
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample_loop, name="bench-cpu-sampler")
        self.main = 0.0
        self.process = 0.0

    def _cpu(self, native_id: int) -> float | None:
        try:
            with open(f"/proc/self/task/{native_id}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self._tick  # utime, stime

    def _sample(self) -> None:
        for thread in threading.enumerate():
            native = thread.native_id
            if native is None or thread is threading.main_thread() or thread is self._sampler:
                continue
            seconds = self._cpu(native)
            if seconds is not None:
                self._seen[native] = (thread.name, seconds)

    def _sample_loop(self) -> None:
        while not self._stop.wait(self.SAMPLE):
            self._sample()

    def __enter__(self) -> ThreadCpu:
        self._sample()
        self._before = {native: seconds for native, (_, seconds) in self._seen.items()}
        self._main, self._process = time.thread_time(), time.process_time()
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.main = time.thread_time() - self._main
        self._sample()
        self._stop.set()
        self._sampler.join()
        self.process = time.process_time() - self._process

    def by_name(self) -> dict[str, float]:
        """CPU seconds of each thread name (the training thread as "training")."""
        totals: dict[str, float] = {"training": self.main}
        for native, (name, seconds) in self._seen.items():
            # The record's threads carry its timestamp; Thread-1 style names are "other".
            key = re.sub(r"\d+", "#", name) if name.startswith("rankscribe") else "other"
            totals[key] = totals.get(key, 0.0) + seconds - self._before.get(native, 0.0)
        return totals


TORCH = [False]  # --torch: the network is a torch module whose forward each step calls


def make_torch_model(steps_per_epoch: int) -> tuple[Any, Any, ArrayDataset]:
    import torch  # only with --torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    network = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    )
    optimizer = torch.optim.SGD(network.parameters(), lr=0.01)
    _, _, dataset = make_array_model(steps_per_epoch)
    return network, optimizer, dataset


def make_model(steps_per_epoch: int) -> tuple[Any, Any, ArrayDataset]:
    return make_torch_model(steps_per_epoch) if TORCH[0] else make_array_model(steps_per_epoch)


def make_array_model(steps_per_epoch: int) -> tuple[ArrayNetwork, ArrayOptimizer, ArrayDataset]:
    rng = np.random.default_rng(0)
    network = ArrayNetwork(
        {
            "fc1.weight": rng.normal(size=(784, 128)).astype(np.float32),
            "fc1.bias": np.zeros(128, np.float32),
            "fc2.weight": rng.normal(size=(128, 10)).astype(np.float32),
            "fc2.bias": np.zeros(10, np.float32),
        },
        graph=GRAPH,
        name="MLP",
    )
    optimizer = ArrayOptimizer(network, learning_rate=0.01, name="SGD")
    rows = steps_per_epoch * BATCH
    dataset = ArrayDataset(
        rng.random((rows, 1, 28, 28), dtype=np.float32),
        rng.integers(0, 10, rows),
        batch_size=BATCH,
        path="/data/mnist",
        description={"op_type": "ArrayDataset", "batch_size": BATCH, "children": []},
    )
    return network, optimizer, dataset


def make_step(network: Any, step_ms: float = STEP_MS, starts: list[float] | None = None) -> Any:
    if TORCH[0]:
        import torch  # only with --torch

        bias = network[3].bias.data.numpy()
        forward: Any = network
        as_tensor: Any = torch.from_numpy
    else:
        bias, forward, as_tensor = network["fc2.bias"], None, None

    def step(batch: tuple[np.ndarray, np.ndarray]) -> np.floating[Any]:
        started = time.perf_counter()
        if starts is not None:
            starts.append(started)
        deadline = started + step_ms / 1000
        bias[:] -= 1e-4  # the weights change between steps, as in training
        if forward is not None:
            forward(as_tensor(batch[0][:1]))  # the hooks time it (the bare loop runs it too)
        loss = np.float32(batch[0][0, 0, 0, 0])
        remaining = deadline - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)
        return loss

    return step


def run_once(
    epochs: int,
    steps_per_epoch: int,
    collect_freq: int | None,
    directory: Path,
    step_ms: float = STEP_MS,
    starts: list[float] | None = None,
    timed: bool = True,
) -> tuple[float, TimedCollector | None, ThreadCpu]:
    """One training run: bare (``collect_freq`` None) or with a collector, timed or not."""
    align_ranks()
    network, optimizer, dataset = make_model(steps_per_epoch)
    loop = TrainLoop(make_step(network, step_ms, starts), network=network, optimizer=optimizer)
    collector = (
        SummaryCollector(
            directory,
            collect_freq=collect_freq,
            job_view_interval=JOB_VIEW_INTERVAL,
            system_interval=SYSTEM_INTERVAL,
        )
        if collect_freq is not None
        else None
    )
    wrapper = TimedCollector(collector) if collector is not None and timed else None
    callback: Callback | None = wrapper if wrapper is not None else collector
    with ThreadCpu() as cpu:
        start = time.perf_counter()
        loop.train(epochs, dataset, callbacks=[callback] if callback is not None else None)
        seconds = time.perf_counter() - start
    return seconds, wrapper, cpu


def align_ranks() -> None:
    """Under mpiexec: every rank starts the next run together (not timed).

    Without it the ranks drift apart over the runs, and the collector's collective
    open and its end-of-training merge time one rank waiting for the other, which is
    no cost of the collector. A non-blocking barrier polled with sleeps: MPICH's
    blocking one busy-polls a core the other rank's run may need.
    """
    launched = launcher_rank(os.environ)
    if launched is None or launched.launcher not in MPI_LAUNCHERS:
        return
    from mpi4py import MPI  # only under mpiexec

    if MPI.COMM_WORLD.Get_size() < 2:
        return
    request = MPI.COMM_WORLD.Ibarrier()
    while not request.Test():
        time.sleep(0.001)


def collects(step: int, collect_freq: int) -> bool:
    """Whether the collector collects at ``step`` (1-based) or saves landscape files there."""
    return step == 1 or step % collect_freq == 0 or step in LANDSCAPE_STEPS


def quiet_step_medians(
    steps: int, collect_freq: int, repeat: int, work: Path
) -> tuple[float, float, float]:
    """Best medians (s) of a quiet step: bare loop, with the collector, inside its hooks."""
    bare: list[float] = []
    with_collector: list[float] = []
    inside: list[float] = []
    quiet = [step for step in range(1, steps) if not collects(step, collect_freq)]
    for index in range(repeat):
        # The loop-level runs have no timing wrapper around the collector: its own
        # calls would count as the collector's. A third run times the hooks alone.
        for collect, timed in ((None, False), (collect_freq, False), (collect_freq, True)):
            starts: list[float] = []
            _, wrapper, _ = run_once(
                1, steps, collect, work / f"fast{index}-{timed}", FAST_STEP_MS, starts, timed
            )
            # starts[s] - starts[s - 1]: step s, the hooks after it and before step s + 1
            median = statistics.median(starts[step] - starts[step - 1] for step in quiet)
            if wrapper is not None:
                inside.append(statistics.median(wrapper.per_step[step - 1] for step in quiet))
            elif collect is None:
                bare.append(median)
            else:
                with_collector.append(median)
    return min(bare), min(with_collector), min(inside)


def fingerprint_seconds(megabytes: int = 10, repeat: int = 20) -> tuple[float, float]:
    """Best seconds of the fingerprint of ``megabytes`` MB of parameters, and of copying them."""
    rng = np.random.default_rng(0)
    count = megabytes * (1 << 20) // 4 // 4
    parameters = [
        (f"layer{index}.weight", rng.random(count, dtype=np.float32)) for index in range(4)
    ]
    target = [np.empty_like(value) for _, value in parameters]
    fingerprints: list[float] = []
    copies: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        parameter_fingerprint(parameters)
        fingerprints.append(time.perf_counter() - start)
        start = time.perf_counter()
        for destination, (_, value) in zip(target, parameters, strict=True):
            np.copyto(destination, value)
        copies.append(time.perf_counter() - start)
    return min(fingerprints), min(copies)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 epoch of 150 steps, 2 repeats")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200, help="steps per epoch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--collect-freq", type=int, default=10)
    parser.add_argument(
        "--fast-steps",
        type=int,
        default=1000,
        help=f"steps of {FAST_STEP_MS:g} ms for the quiet-step measurement",
    )
    parser.add_argument(
        "--torch",
        action="store_true",
        help="a torch network whose forward the collector times with hooks",
    )
    parser.add_argument(
        "--job-view-interval",
        type=float,
        default=None,
        help="the collectors' job_view_interval (seconds; run under mpiexec)",
    )
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.epochs, arguments.steps, arguments.repeat = 1, 150, 2
        arguments.fast_steps = 400
    return arguments


def main() -> None:
    arguments = _arguments()
    TORCH[0] = arguments.torch
    global JOB_VIEW_INTERVAL  # noqa: PLW0603 - one setting for every run of this process
    JOB_VIEW_INTERVAL = arguments.job_view_interval
    total = arguments.epochs * arguments.steps
    bare: list[float] = []
    collected: list[float] = []
    bare_cpu: list[ThreadCpu] = []
    collected_cpu: list[ThreadCpu] = []
    last: TimedCollector | None = None
    work = Path(tempfile.mkdtemp(prefix="rankscribe-bench-collector-"))
    try:
        for index in range(arguments.repeat):
            seconds, _, cpu = run_once(arguments.epochs, arguments.steps, None, work)
            bare.append(seconds)
            bare_cpu.append(cpu)
            directory = work / f"run{index}"
            seconds, last, cpu = run_once(
                arguments.epochs, arguments.steps, arguments.collect_freq, directory
            )
            collected.append(seconds)
            collected_cpu.append(cpu)
        files = sorted(path.name for path in directory.rglob("*") if path.is_file())
        quiet_bare, quiet_collector, quiet_inside = quiet_step_medians(
            arguments.fast_steps, arguments.collect_freq, arguments.repeat, work
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert last is not None
    best_bare, best_collected = min(bare), min(collected)
    per_step = (best_collected - best_bare) / total * 1000
    print(
        f"SummaryCollector cost, {arguments.epochs} x {arguments.steps} steps of {STEP_MS:g} ms, "
        f"collect_freq={arguments.collect_freq}, default collection, best of "
        f"{arguments.repeat}{', torch network (forward hooks on)' if arguments.torch else ''}"
    )
    print(f"  bare loop        {best_bare:8.3f} s  {best_bare / total * 1000:7.3f} ms/step")
    print(
        f"  with collector   {best_collected:8.3f} s  {best_collected / total * 1000:7.3f} ms/step"
    )
    print(
        f"  difference       {per_step:+8.3f} ms/step = {per_step / STEP_MS:+.2%} of a "
        f"{STEP_MS:g} ms step (target < 2%); with / bare = "
        f"{best_collected / best_bare:.4f}"
    )
    # The once costs (open, end of training, close) do not grow with the steps; under
    # mpiexec the end also waits for the other ranks to end training (their skew).
    steady = per_step - last.outside_steps / total * 1000
    print(
        f"  difference per step, the once costs ({last.outside_steps * 1000:.1f} ms of the "
        f"last run) left out: {steady:+.3f} ms/step = {steady / STEP_MS:+.2%} of a step"
    )
    hooks = last.per_step
    freq = arguments.collect_freq
    collected_steps = [hooks[i] for i in range(total) if i == 0 or (i + 1) % freq == 0]
    other_steps = [hooks[i] for i in range(total) if not (i == 0 or (i + 1) % freq == 0)]
    inside = sum(hooks) + last.outside_steps
    print(
        f"  inside the collector: {inside * 1000 / total:.3f} ms/step on average "
        f"({inside / total * 1000 / STEP_MS:.2%} of a step), of which "
        f"{last.outside_steps * 1000:.1f} ms once (open, lineage, close; "
        f"{last.outside_cpu * 1000:.1f} ms of CPU; end() {last.end_seconds * 1000:.1f} ms)"
    )
    print(
        f"    collected steps: median {statistics.median(collected_steps) * 1000:.3f} ms, "
        f"max {max(collected_steps) * 1000:.3f} ms ({len(collected_steps)} steps, "
        f"landscape files at steps 1-19 included)"
    )
    print(f"    other steps:     median {statistics.median(other_steps) * 1000:.4f} ms")
    print(
        f"  files of the last run: {len(files)} "
        f"({sum(1 for name in files if name.endswith('.ckpt'))} landscape parameter files)"
    )
    print_thread_cpu(total, bare_cpu, collected_cpu)
    if last.live_cpu:
        print(
            "    live job view threads (time.thread_time, ms/step): "
            + ", ".join(f"{name} {cpu / total * 1000:.4f}" for name, cpu in last.live_cpu.items())
        )
    print_quiet_step(
        arguments.fast_steps, arguments.repeat, quiet_bare, quiet_collector, quiet_inside
    )
    fingerprint, copy = fingerprint_seconds()
    print(
        f"Parameter fingerprint of 10 MB: {fingerprint * 1000:.3f} ms (target well under 1 ms); "
        f"a copy of the same bytes {copy * 1000:.3f} ms; fingerprint / copy = "
        f"{fingerprint / copy:.2f}"
    )


def print_thread_cpu(total: int, bare: list[ThreadCpu], collected: list[ThreadCpu]) -> None:
    """CPU per step by thread: the collector's runs against the bare ones (least of each)."""
    best_bare = min(bare, key=lambda cpu: cpu.process)
    best = min(collected, key=lambda cpu: cpu.process)
    added = (best.process - best_bare.process) / total * 1000
    print(
        f"  CPU (not wall) per step, least of {len(collected)}: process "
        f"{best.process / total * 1000:.3f} ms with the collector, "
        f"{best_bare.process / total * 1000:.3f} ms bare: "
        f"{added:+.3f} ms = {added / STEP_MS:+.2%} of a {STEP_MS:g} ms step of a core"
    )
    threads = best.by_name()
    threads["training"] -= best_bare.main
    print(
        "    by thread (ms/step; training: over the bare loop's): "
        + ", ".join(
            f"{name} {seconds / total * 1000:.3f}"
            for name, seconds in sorted(threads.items(), key=lambda item: -item[1])
            if abs(seconds) / total * 1000 >= 0.0005
        )
    )


def print_quiet_step(
    steps: int, repeat: int, bare: float, with_collector: float, inside: float
) -> None:
    added = (with_collector - bare) * 1e6
    print(
        f"A step that collects nothing, {steps} steps of {FAST_STEP_MS:g} ms, "
        f"median over those steps, best of {repeat}"
    )
    print(f"  bare loop        {bare * 1e6:8.1f} us/step")
    print(
        f"  with collector   {with_collector * 1e6:8.1f} us/step  (with / bare = "
        f"{with_collector / bare:.4f})"
    )
    print(
        f"  difference       {added:+8.1f} us/step = {added / (FAST_STEP_MS * 1000):+.2%} of a "
        f"{FAST_STEP_MS:g} ms step (target <= 40 us, <= 4%)"
    )
    print(f"  inside the collector's hooks: median {inside * 1e6:.1f} us")


if __name__ == "__main__":
    main()
