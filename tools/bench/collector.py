#!/usr/bin/env python3
"""What the SummaryCollector costs a training step, against the same loop without it.

    python tools/bench/collector.py [--quick] [--steps N] [--collect-freq 10]

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
collected and other steps.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
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

STEP_MS = 10.0
BATCH = 32

GRAPH = {
    "name": "mlp",
    "parameters": ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"],
    "nodes": [
        {"name": "x", "op_type": "Input"},
        {"name": "fc1", "op_type": "MatMul", "scope": "Default/fc1", "inputs": ["x", "fc1.weight"]},
        {"name": "b1", "op_type": "Add", "scope": "Default/fc1", "inputs": ["fc1", "fc1.bias"]},
        {"name": "relu", "op_type": "ReLU", "scope": "Default", "inputs": ["b1"]},
        {"name": "fc2", "op_type": "MatMul", "scope": "Default/fc2",
         "inputs": ["relu", "fc2.weight"]},
        {"name": "b2", "op_type": "Add", "scope": "Default/fc2", "inputs": ["fc2", "fc2.bias"]},
    ],
    "outputs": ["b2"],
}


class TimedCollector(Callback):
    """Runs a SummaryCollector and adds up the time spent inside it, per step."""

    def __init__(self, collector: SummaryCollector) -> None:
        self.collector = collector
        self.outside_steps = 0.0  # enter, begin, end, exit
        self.per_step: list[float] = []
        self._current = 0.0

    def _timed(self, method: Any, *args: Any) -> float:
        start = time.perf_counter()
        method(*args)
        return time.perf_counter() - start

    def __enter__(self) -> TimedCollector:
        self.outside_steps += self._timed(self.collector.__enter__)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.outside_steps += self._timed(self.collector.__exit__, exc_type, exc, traceback)

    def begin(self, run_context: RunContext) -> None:
        self.outside_steps += self._timed(self.collector.begin, run_context)

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
        self.outside_steps += self._timed(self.collector.end, run_context)


def make_model(steps_per_epoch: int) -> tuple[ArrayNetwork, ArrayOptimizer, ArrayDataset]:
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
        rng.random((rows, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, rows),
        batch_size=BATCH, path="/data/mnist",
        description={"op_type": "ArrayDataset", "batch_size": BATCH, "children": []},
    )
    return network, optimizer, dataset


def make_step(network: ArrayNetwork) -> Any:
    bias = network["fc2.bias"]

    def step(batch: tuple[np.ndarray, np.ndarray]) -> np.floating[Any]:
        deadline = time.perf_counter() + STEP_MS / 1000
        bias[:] -= 1e-4  # the weights change between steps, as in training
        loss = np.float32(batch[0][0, 0, 0, 0])
        remaining = deadline - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)
        return loss

    return step


def run_once(epochs: int, steps_per_epoch: int, collect_freq: int | None,
             directory: Path) -> tuple[float, TimedCollector | None]:
    network, optimizer, dataset = make_model(steps_per_epoch)
    loop = TrainLoop(make_step(network), network=network, optimizer=optimizer)
    timed = (TimedCollector(SummaryCollector(directory, collect_freq=collect_freq))
             if collect_freq is not None else None)
    start = time.perf_counter()
    loop.train(epochs, dataset, callbacks=[timed] if timed is not None else None)
    return time.perf_counter() - start, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 epoch of 150 steps, 2 repeats")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200, help="steps per epoch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--collect-freq", type=int, default=10)
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.epochs, arguments.steps, arguments.repeat = 1, 150, 2
    total = arguments.epochs * arguments.steps
    bare: list[float] = []
    collected: list[float] = []
    last: TimedCollector | None = None
    work = Path(tempfile.mkdtemp(prefix="rankscribe-bench-collector-"))
    try:
        for index in range(arguments.repeat):
            seconds, _ = run_once(arguments.epochs, arguments.steps, None, work)
            bare.append(seconds)
            directory = work / f"run{index}"
            seconds, last = run_once(arguments.epochs, arguments.steps, arguments.collect_freq,
                                     directory)
            collected.append(seconds)
        files = sorted(path.name for path in directory.rglob("*") if path.is_file())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert last is not None
    best_bare, best_collected = min(bare), min(collected)
    per_step = (best_collected - best_bare) / total * 1000
    print(f"SummaryCollector cost, {arguments.epochs} x {arguments.steps} steps of {STEP_MS:g} ms, "
          f"collect_freq={arguments.collect_freq}, default collection, best of "
          f"{arguments.repeat}")
    print(f"  bare loop        {best_bare:8.3f} s  {best_bare / total * 1000:7.3f} ms/step")
    print(f"  with collector   {best_collected:8.3f} s  "
          f"{best_collected / total * 1000:7.3f} ms/step")
    print(f"  difference       {per_step:+8.3f} ms/step = {per_step / STEP_MS:+.2%} of a "
          f"{STEP_MS:g} ms step (target < 2%)")
    hooks = last.per_step
    freq = arguments.collect_freq
    collected_steps = [hooks[i] for i in range(total) if i == 0 or (i + 1) % freq == 0]
    other_steps = [hooks[i] for i in range(total) if not (i == 0 or (i + 1) % freq == 0)]
    inside = sum(hooks) + last.outside_steps
    print(f"  inside the collector: {inside * 1000 / total:.3f} ms/step on average "
          f"({inside / total * 1000 / STEP_MS:.2%} of a step), of which "
          f"{last.outside_steps * 1000:.1f} ms once (open, lineage, close)")
    print(f"    collected steps: median {statistics.median(collected_steps) * 1000:.3f} ms, "
          f"max {max(collected_steps) * 1000:.3f} ms ({len(collected_steps)} steps, "
          f"landscape files at steps 1-19 included)")
    print(f"    other steps:     median {statistics.median(other_steps) * 1000:.4f} ms")
    print(f"  files of the last run: {len(files)} "
          f"({sum(1 for name in files if name.endswith('.ckpt'))} landscape parameter files)")


if __name__ == "__main__":
    main()
