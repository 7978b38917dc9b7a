#!/usr/bin/env python3
"""What the SummaryCollector costs real training steps, against the same training without it.

    python tools/bench/collector.py [--rows mlp-1ms,mlp-10ms,...] [--steps N] [--reps 3]
                                    [--warmup 20] [--device cpu|cuda] [--quick]
                                    [--json FILE] [--collect-freq 10] [--widths W1,W10]
    mpiexec -n 2 python tools/bench/collector.py ...     # rank 0 against rank 1

Each row trains a real model twice per repetition, alternately: bare (the same
training with no RankScribe object in it) and collected (the collector at its
defaults, attached the way the README shows for that kind of loop). The rows:

==========  =================================================================
mlp-1ms     a 3-layer torch MLP (batch 64, from a DataLoader) whose step takes
            about 1 ms on the 2-core machine, in a ``TrainSession`` loop with
            ``SummaryCollector(dir, collect_freq=10)``; torch on every core
mlp-10ms    the same, wider: a step of about 10 ms
trainloop   the ~10 ms MLP trained by ``TrainLoop`` (bare: ``TrainLoop`` with
            no callback)
digits      examples/digits/train.py's NumPy MLP and step, one process, its
            collector as the example sets it (``collect_freq=5``, no landscape,
            ``collector.section`` around the work)
lightning   the ~10 ms MLP as a ``LightningModule``, a ``Trainer`` with
            ``RankScribeLogger`` (bare: ``logger=False``)
hf          a small BERT built from a config, Hugging Face ``Trainer`` with
            ``RankScribeCallback`` (bare: no callback)
waiting     the waiting step (10 ms sleep): a little NumPy work, then a sleep until
            10 ms have passed; the collector's threads run in that sleep and no
            device is waited for, so it reads lower than any real step
budget      a wide torch MLP fed small batches, whose default histograms (its
            parameters' at every collected step) would cost a fifth of its step or
            more: the cost budget's case (the collector at its defaults, which shed
            them); its own-cost column is the recorded cost where the cost is real
budget-off  the same with ``cost_budget='off'``: what those defaults cost unshed
==========  =================================================================

The torch MLPs' widths are found on the machine that runs the rows, before them: two
short bare runs per width (:func:`width_for`) give the width whose bare step takes
about 1 ms and 10 ms there; the table's header prints them. A fixed width's step moves
with the machine's speed, and the rows are defined by their step. ``--widths W1,W10``
gives them instead (to compare machines, or to repeat an earlier table). With ``--device
cuda`` the fixed widths are used unless ``--widths`` is given: the same models as on the
CPU (on a GPU their steps are the host's: launch-bound), as earlier device tables ran.

What is measured, per run: the start of every step (``time.perf_counter`` and
the process's CPU time, ``time.process_time``: every thread, the collector's
included; with ``--device cuda`` also a CUDA event recorded on the stream at
each step's start, read after the run), and the whole run from before the loop
to after its end (the collector's end of training, merge and close included).
With ``--device cuda`` the device is synchronised at the whole run's two
boundaries only; the steps are timed by the events, so a collected step that
makes the device wait shows as the gap between two events.

Printed per row (the best of the repetitions of each arm, bare and collected):

- bare ms/step: the bare run's mean step after warm-up;
- mean/step: the mean step after warm-up, collected steps included, as +% wall
  and +% CPU over bare (steps 1 to ``--warmup`` are left out: torch's first
  steps, and the collector's graph, dataset graph and landscape saves at steps
  1-19, which are once costs);
- paired (the line under the row): each collected run's mean step against the
  bare run of its pair (the two run one after the other, bare first in even
  pairs, collected first in odd ones), the median over the pairs, and how far
  apart the bare runs' mean steps were: on a machine whose speed drifts from run
  to run (a shared VM's), "best of each" compares two lucky runs, the pairs do not;
- quiet: the median of the steps that collect nothing (not step 1, not a
  multiple of the collect frequency, not an epoch's last step), +% over bare;
- whole run: the whole run's wall time, +% over bare, with the once costs and
  without them (the collected run's wall time less the time inside the once
  costs listed under the row);
- the once costs, each the time the training thread spent inside it (exclusive
  of the others; the median over the collected runs): opening the record,
  ``begin`` (the step-0 fingerprint, the lineage's start, the threads), the
  graph, the dataset graph and custom lineage, the landscape's saves and
  metadata, the end of training (train lineage, flush), the lineage merge and
  job view, and closing;
- the collector's own record of its cost (``rankscribe/collector_cost/*``, see
  ``OWN_COST_TAG_PREFIX``) as a share of the bare step, with its ratio to the overhead
  measured: its wall cost (the training thread's time plus the slowdown of the steps
  after its work) against the mean step's wall overhead, best of each and paired (the
  table's column; the training thread's alone where no wall cost is recorded), the
  training thread's alone, and with its threads' CPU against the CPU overhead (within a
  factor of 1.5 is the aim);
- what the cost budget decided in each timed collected run (the share it measured,
  over which steps, and what it shed; its messages are kept off the screen while the
  rows run), or that it shed nothing;
- the targets beside each number (``MISS`` where a number is over its target).

Before the timed repetitions each row runs both arms once for a few steps,
untimed, so that what a process pays once (imports, torch's first calls) is not
counted as a cost of either. Under ``mpiexec`` every rank runs the same rows in
one job directory (the collectors make one job of them; the live job view runs
on rank 0), the ranks start each run together (not timed), the torch rows
average their gradients over the ranks every step as a data-parallel job does
(:func:`gradient_sync`; in the collected runs of the ``TrainSession`` rows inside
``collector.section("sync")``, as docs/job-view.md asks of a loop's own
collective; the digits example averages its own), so a rank's extra work slows
the job as it would a real one's and the end of training waits for a step, not
for the other rank's drift, and rank 0 prints each rank's table and rank 0
against rank 1. ``--json FILE`` writes every
repetition's numbers.

``tools/bench/step_cost.py`` reads the torch rows' per-step cost against a bare copy
trained beside the collected one in the same process, step by step: no run-to-run drift,
without the collector's threads' share. ``tools/bench/system.py`` uses :func:`run_once`
and :func:`collects` (the waiting step) for its quiet-step measurement of the system
sampler.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import itertools
import json
import logging
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    SummaryCollector,
    TrainLoop,
    TrainSession,
)
from rankscribe.collector.cost._budget import said_in_short
from rankscribe.ranks.launchers import launcher_rank

ROOT = Path(__file__).resolve().parents[2]
#: The launchers whose ranks run under mpiexec (they meet through MPI).
MPI_LAUNCHERS = ("openmpi", "pmi", "pmix")
#: Seconds a rank waits for the others at a run's start or for their results.
RANK_TIMEOUT = 600.0

#: The waiting step's length, and its fast variant for tools/bench/system.py.
STEP_MS = 10.0
FAST_STEP_MS = 1.0
#: ``--job-view-interval``: the collectors' job_view_interval (None: the default).
JOB_VIEW_INTERVAL: float | None = None
#: The collectors' system_interval (None: their default; tools/bench/system.py sets it).
SYSTEM_INTERVAL: float | None = None
BATCH = 32
#: Steps that save landscape parameter files by default (intervals 1-9, 10-19).
LANDSCAPE_STEPS = range(1, 20)

#: The torch MLPs' hidden widths where none is found here (``--widths``): with the
#: DataLoader's batch of 64 and torch on both cores, the 2-core machine's steps of about 1
#: and 10 ms when they were chosen. A machine's speed moves a width's step (the same
#: machine type later ran width 1408 in 5.3 ms), so by default each is found on the
#: machine that runs the rows (:func:`width_for`).
WIDTH_1MS = 384
WIDTH_10MS = 1408
MLP_BATCH = 64
#: The torch MLP rows' bare steps, in seconds, by the key their rows name their width by.
MLP_STEP_SECONDS = {"w1": 0.001, "w10": 0.010}
#: The widths the torch MLP rows train (main sets them: ``--widths``, or found here).
WIDTHS = {"w1": WIDTH_1MS, "w10": WIDTH_10MS}
#: Steps of each bare run that times a width (:func:`mlp_step_seconds`), the first
#: ``WIDTH_WARMUP`` left out (torch's first calls).
WIDTH_STEPS = 60
WIDTH_WARMUP = 10
#: Found widths are a multiple of this (the step's time is not known closer).
WIDTH_GRAIN = 32
#: "About" a row's step: a width whose step is within this factor of it is kept.
WIDTH_TOLERANCE = 1.5
#: A found width is within this factor of the fixed one: near a step that is mostly the
#: loop's own overhead (the ~1 ms MLP's), two timings a little apart can put the line's
#: width anywhere (a loaded machine moved 384 to 64 once).
WIDTH_RANGE = 2.0
#: The budget rows' MLP: wide, fed small batches, so that the histograms of its
#: parameters (the collector's default: the first five, at every collected step) cost a
#: fifth of its step or more on the 2-core machine when nothing is shed.
WIDTH_BUDGET = 2048
BUDGET_BATCH = 16
#: Steps per epoch of the torch rows' data (the run's steps span whole epochs).
MLP_STEPS_PER_EPOCH = 250
#: Steps a run may take beyond those asked for (its last epoch made whole).
EXTRA_STEPS = 64

#: The collector's record of its own cost (docs/collector-cost.md, "The cost budget"):
#: seconds per step on the training thread, CPU seconds per step of its threads, and the
#: wall cost (the training thread's plus the slowdown of the steps after its work), each
#: point a window's mean. The table shows them beside the measured overhead.
OWN_COST_TAG_PREFIX = "rankscribe/collector_cost"
OWN_TRAINING_TAG = f"{OWN_COST_TAG_PREFIX}/training"
OWN_THREADS_TAG = f"{OWN_COST_TAG_PREFIX}/threads"
OWN_WALL_TAG = f"{OWN_COST_TAG_PREFIX}/wall"
#: The logger the cost budget says its decisions on (kept off the screen while rows run,
#: listed under each row instead).
BUDGET_LOGGER = "rankscribe.collector.cost._budget"
#: Where the collector's first cost window starts at the rows' frequencies (the collected
#: step after its WARMUP_STEPS, 19): each cost point is per step since the one before.
OWN_COST_WARMUP = 20

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


# ------------------------------------------------------------------------ the clocks


class StepClock:
    """The start of every step: wall, process CPU, and on a GPU an event on its stream."""

    def __init__(self, steps: int, device: str) -> None:
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self._events: list[Any] = []
        if device == "cuda":
            import torch

            # Made before the run: recording one is all a step pays. A run of whole epochs
            # may take a few steps more than asked.
            self._events = [
                torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                for _ in range(steps + EXTRA_STEPS)
            ]

    def tick(self) -> None:
        if len(self.walls) < len(self._events):
            self._events[len(self.walls)].record()
        self.walls.append(time.perf_counter())
        self.cpus.append(time.process_time())

    def step_walls(self) -> list[float]:
        """Seconds from each step's start to the next's: on the device when events were kept
        (read after the run's closing synchronisation), else on the host."""
        ticks = len(self.walls)
        if self._events and ticks > 1:
            events = self._events[: min(ticks, len(self._events))]
            return [a.elapsed_time(b) / 1000 for a, b in itertools.pairwise(events)]
        return [b - a for a, b in itertools.pairwise(self.walls)]

    def step_cpus(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.cpus)]


#: The collector's once costs: (module, class, method, the label they add up under).
ONCE_COSTS = (
    ("rankscribe.collector.run._run", "CollectorRun", "open", "open the record"),
    ("rankscribe.collector._collector", "SummaryCollector", "begin", "begin"),
    ("rankscribe.collector.collection._extractor", "Extractor", "graph", "graph"),
    (
        "rankscribe.collector.run._lineage",
        "LineageRecorder",
        "add_first_step_values",
        "dataset graph",
    ),
    ("rankscribe.collector.landscape._saver", "LandscapeSaver", "save", "landscape"),
    ("rankscribe.collector.landscape._saver", "LandscapeSaver", "finish_writes", "landscape"),
    ("rankscribe.collector.landscape._saver", "LandscapeSaver", "write_metadata", "landscape"),
    ("rankscribe.collector._collector", "SummaryCollector", "end", "end of training"),
    ("rankscribe.jobview.job._rank_view", "LiveRankView", "merge", "lineage merge"),
    ("rankscribe.collector._collector", "SummaryCollector", "_close", "close"),
)
ONCE_LABELS = tuple(dict.fromkeys(label for *_, label in ONCE_COSTS))


class OnceCosts:
    """Wall and training-thread CPU seconds inside each once cost, exclusive of the others.

    The methods of :data:`ONCE_COSTS` are wrapped on their classes for the whole process
    (a bare run never calls them). A method a newer collector lacks is left out and named
    in :attr:`missing`.
    """

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}  # label -> [wall, cpu, calls]
        self.missing: list[str] = []
        self._stack: list[list[float]] = []  # [nested wall, nested cpu] of the open calls
        self._thread = threading.main_thread()
        for module_name, class_name, method, label in ONCE_COSTS:
            owner = getattr(importlib.import_module(module_name), class_name, None)
            original = None if owner is None else owner.__dict__.get(method)
            if original is None:
                self.missing.append(f"{class_name}.{method}")
                continue
            setattr(owner, method, self._wrapped(original, label))

    def reset(self) -> None:
        self.totals = {}

    def _wrapped(self, original: Callable[..., Any], label: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not self._thread:
                return original(*args, **kwargs)  # a background thread's: not the training's
            self._stack.append([0.0, 0.0])
            began, began_cpu = time.perf_counter(), time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                wall = time.perf_counter() - began
                cpu = time.thread_time() - began_cpu
                nested = self._stack.pop()
                total = self.totals.setdefault(label, [0.0, 0.0, 0])
                total[0] += wall - nested[0]
                total[1] += cpu - nested[1]
                total[2] += 1
                if self._stack:
                    self._stack[-1][0] += wall
                    self._stack[-1][1] += cpu

        return timed


class ThreadCpu:
    """CPU seconds per thread of this process during a run (the machine may be loaded).

    The training thread is read with ``time.thread_time``; every other thread from its
    own CPU clock (``time.pthread_getcpuclockid``: nanoseconds, where a run of a few
    thousand ~1 ms steps gives a thread milliseconds), else ``/proc/self/task/<id>/stat``
    (clock ticks of 10 ms), sampled every SAMPLE seconds until it ends, so a thread that
    ends loses at most one sample's worth. Threads of one name add up (each run starts
    its own).
    """

    SAMPLE = 0.05

    def __init__(self) -> None:
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._seen: dict[int, tuple[str, float]] = {}  # native id -> (name, CPU seconds)
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample_loop, name="bench-cpu-sampler")
        self.main = 0.0

    def _cpu(self, thread: threading.Thread, native_id: int) -> float | None:
        if thread.ident is not None and hasattr(time, "pthread_getcpuclockid"):
            try:
                return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except OSError:
                return None  # it ended since threading listed it
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
            seconds = self._cpu(thread, native)
            if seconds is not None:
                self._seen[native] = (thread.name, seconds)

    def _sample_loop(self) -> None:
        while not self._stop.wait(self.SAMPLE):
            self._sample()

    def __enter__(self) -> ThreadCpu:
        self._sample()
        self._before = {native: seconds for native, (_, seconds) in self._seen.items()}
        self._main = time.thread_time()
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.main = time.thread_time() - self._main
        self._sample()
        self._stop.set()
        self._sampler.join()

    def by_name(self) -> dict[str, float]:
        """CPU seconds of each thread name (the training thread as "training")."""
        totals: dict[str, float] = {"training": self.main}
        for native, (name, seconds) in self._seen.items():
            # The record's threads carry its timestamp; Thread-1 style names are "other".
            key = re.sub(r"\d+", "#", name) if name.startswith("rankscribe") else "other"
            totals[key] = totals.get(key, 0.0) + seconds - self._before.get(native, 0.0)
        return totals


# --------------------------------------------------------------------------- the rows


@dataclass
class Arm:
    """One run of a row: bare or collected, its directory, steps, device and clock."""

    collect: bool
    directory: Path
    steps: int
    device: str
    collect_freq: int
    clock: StepClock


@dataclass(frozen=True)
class Targets:
    """The issue's bounds for a row, in percent (None: no target)."""

    mean: float | None = None
    cpu: float | None = None
    quiet: float | None = None
    whole: float | None = None


@dataclass(frozen=True)
class Row:
    key: str
    title: str
    steps: int  # default steps of a run
    build: Callable[[Arm], Callable[[], object]]  # the run's training, made untimed
    steps_per_epoch: Callable[[int], int]  # of a run of that many steps
    collect_freq: Callable[[int], int]  # the collector's, from --collect-freq
    targets: Targets
    on_device: bool = False  # --device cuda moves it to the GPU


def collector_options() -> dict[str, Any]:
    """The bench's settings of the collector (None: the collector's own default)."""
    return {"job_view_interval": JOB_VIEW_INTERVAL, "system_interval": SYSTEM_INTERVAL}


def torch_threads() -> int:
    """Every core, shared among this host's ranks under a launcher."""
    launched = launcher_rank(os.environ)  # (the ranks of one mpiexec share this machine)
    ranks = 1 if launched is None else launched.world_size or 1
    return max((os.cpu_count() or 1) // ranks, 1)


def mlp_parts(
    width: int, steps_per_epoch: int, device: str, batch: int = MLP_BATCH
) -> tuple[Any, Any, Any, Any]:
    """A 3-layer MLP, its SGD optimizer, loss function and DataLoader of random data."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 10),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    rows = steps_per_epoch * batch
    data = TensorDataset(torch.rand(rows, 784), torch.randint(0, 10, (rows,)))
    return model, optimizer, torch.nn.CrossEntropyLoss(), DataLoader(data, batch_size=batch)


def mlp_epochs(steps: int) -> int:
    return max(math.ceil(steps / MLP_STEPS_PER_EPOCH), 1)


def mlp_steps_per_epoch(steps: int) -> int:
    return math.ceil(steps / mlp_epochs(steps))


def mlp_step_seconds(width: int) -> float:
    """The bare CPU step of the torch MLP of ``width``: the median from one batch's start
    to the next's (the DataLoader's time in it, as in the rows) over :data:`WIDTH_STEPS`
    steps, the first :data:`WIDTH_WARMUP` left out. No gradient sync: under mpiexec every
    rank times its own copy at once, on its share of the cores."""
    model, optimizer, loss_fn, loader = mlp_parts(width, WIDTH_STEPS, "cpu")
    clock = StepClock(0, "cpu")
    for images, labels in loader:
        clock.tick()
        optimizer.zero_grad()
        loss_fn(model(images), labels).backward()
        optimizer.step()
    clock.tick()
    return statistics.median(clock.step_walls()[WIDTH_WARMUP:])


def _mlp_work(width: float) -> float:
    """Multiply-adds per sample of the 784-``width``-``width``-10 MLP."""
    return width * (width + 794)


def _mlp_width(work: float) -> float:
    """The width of :func:`_mlp_work` ``work`` (the positive root)."""
    return (math.sqrt(794**2 + 4 * max(work, 0.0)) - 794) / 2


def width_for(target: float, measure: Callable[[int], float], start: int) -> int:
    """The MLP width whose step takes about ``target`` seconds, by two timings.

    ``start`` stays where ``measure(start)`` is within :data:`WIDTH_TOLERANCE` of
    ``target``. Otherwise: a step costs about ``a + b * w (w + 794)`` (the per-step
    overhead, and the three layers' multiply-adds per sample). The first timing gives
    ``b`` with ``a`` taken as 0, and so a first width; ``measure`` there gives a second
    point, and the line through both gives ``a`` and ``b``, and the width. Rounded to
    :data:`WIDTH_GRAIN`, at least one grain, and kept within :data:`WIDTH_RANGE` of
    ``start``. Where the second timing is no slower than the first (noise at two close
    widths), the first width found stands.
    """
    if target <= 0:
        raise ValueError(f"target must be a step's seconds > 0, got {target!r}")
    first = measure(start)
    if target / WIDTH_TOLERANCE <= first <= target * WIDTH_TOLERANCE:
        return start
    low, high = start / WIDTH_RANGE, start * WIDTH_RANGE
    guess = min(max(_mlp_width(target * _mlp_work(start) / first), low), high)
    width = guess
    if abs(guess - start) > WIDTH_GRAIN:
        other = _grain(guess)
        slope = (measure(other) - first) / (_mlp_work(other) - _mlp_work(start))
        if slope > 0:
            width = _mlp_width((target - (first - slope * _mlp_work(start))) / slope)
    return _grain(min(max(width, low), high))


def _grain(width: float) -> int:
    return max(round(width / WIDTH_GRAIN), 1) * WIDTH_GRAIN


def find_widths(world: Any) -> dict[str, int]:
    """:data:`WIDTHS` for this machine's CPU: each found by :func:`width_for` from the fixed
    width; under mpiexec every rank times at once and rank 0's widths are used."""
    found = {
        key: width_for(MLP_STEP_SECONDS[key], mlp_step_seconds, WIDTHS[key])
        for key in MLP_STEP_SECONDS
    }
    if world is not None:
        found = json.loads(share_text(world, json.dumps(found)))
    return found


def mlp_width(width: int | str) -> int:
    """A torch MLP row's hidden width: ``width`` itself, or the width :data:`WIDTHS` holds
    under that key (found or given when main ran)."""
    return WIDTHS[width] if isinstance(width, str) else width


def session_training(
    width: int | str, batch: int = MLP_BATCH, **options: Any
) -> Callable[[Arm], Callable[[], object]]:
    """The README's TrainSession loop (bare: the same loop, no session) of the MLP of
    ``width`` (a key of :data:`WIDTHS`: its width when the run is built); ``options`` go to
    the collector beside the bench's own."""

    def build(arm: Arm) -> Callable[[], object]:
        per_epoch = mlp_steps_per_epoch(arm.steps)
        model, optimizer, loss_fn, loader = mlp_parts(
            mlp_width(width), per_epoch, arm.device, batch
        )
        epochs, tick, device = mlp_epochs(arm.steps), arm.clock.tick, arm.device
        sync = gradient_sync(model)

        def train_step(images: Any, labels: Any, section: Any = None) -> Any:
            optimizer.zero_grad()
            loss = loss_fn(model(images.to(device)), labels.to(device))
            loss.backward()
            if sync is not None:
                with section or contextlib.nullcontext():
                    sync()
            optimizer.step()
            return loss

        def bare() -> None:
            for _ in range(epochs):
                for images, labels in loader:
                    tick()
                    train_step(images, labels)

        def collected() -> None:
            collector = SummaryCollector(
                arm.directory, collect_freq=arm.collect_freq, **collector_options(), **options
            )
            # Under mpiexec the gradients' average is marked as docs/job-view.md asks of
            # a loop's own collective: each rank's arrival is recorded.
            marked = sync is not None
            with TrainSession(
                [collector],
                network=model,
                optimizer=optimizer,
                loss_fn=loss_fn,
                train_dataset=loader,
                epochs=epochs,
            ) as session:
                for _ in session.epochs():
                    for images, labels in loader:
                        tick()
                        section = collector.section("sync") if marked else None
                        loss = train_step(images, labels, section)
                        session.step((images, labels), loss.detach())

        return collected if arm.collect else bare

    return build


def gradient_sync(model: Any) -> Callable[[], None] | None:
    """Under mpiexec: a call that averages ``model``'s gradients over the ranks, as a
    data-parallel job does every step (one flat buffer, an ``Iallreduce`` polled with
    ``sleep(0)`` as examples/digits does: a rank waiting inside MPI would busy-poll the
    core another rank needs); alone: None. The same in both arms of a row."""
    world = _mpi_world()
    if world is None:
        return None
    import torch

    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    size = world.Get_size()

    def sync() -> None:
        grads = [parameter.grad for parameter in parameters]
        flat = torch.cat([grad.reshape(-1) for grad in grads]).cpu().numpy()
        total = np.empty_like(flat)
        request = world.Iallreduce(flat, total)
        while not request.Test():
            time.sleep(0)
        total /= size
        offset = 0
        for grad in grads:
            count = grad.numel()
            grad.copy_(torch.from_numpy(total[offset : offset + count]).view_as(grad))
            offset += count

    return sync


def build_trainloop(arm: Arm) -> Callable[[], object]:
    """The ~10 ms MLP trained by TrainLoop (bare: TrainLoop with no callback)."""
    per_epoch = mlp_steps_per_epoch(arm.steps)
    model, optimizer, loss_fn, loader = mlp_parts(WIDTHS["w10"], per_epoch, arm.device)
    tick, device = arm.clock.tick, arm.device
    sync = gradient_sync(model)

    def step(batch: tuple[Any, Any]) -> Any:
        tick()
        images, labels = batch
        optimizer.zero_grad()
        loss = loss_fn(model(images.to(device)), labels.to(device))
        loss.backward()
        if sync is not None:
            sync()
        optimizer.step()
        return loss.detach()

    loop = TrainLoop(step, network=model, optimizer=optimizer, loss_fn=loss_fn)
    callbacks = (
        [SummaryCollector(arm.directory, collect_freq=arm.collect_freq, **collector_options())]
        if arm.collect
        else None
    )
    return lambda: loop.train(mlp_epochs(arm.steps), loader, callbacks=callbacks)


DIGITS_STEPS_PER_EPOCH = 1437 // 32  # the example's 80 % of 1,797 digits, batch 32


def _digits_example() -> Any:
    """examples/digits/train.py as a module (its mlp.py beside it)."""
    name = "rankscribe_bench_digits"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "examples" / "digits" / "train.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def build_digits(arm: Arm) -> Callable[[], object]:
    """The digits example's model and step in this process, its collector as it sets it."""
    from rankscribe.writer import tensor_summary

    example = _digits_example()
    mlp = sys.modules["mlp"]
    data = mlp.Digits.load(0)
    full = ArrayDataset(
        data.train_images,
        data.train_labels,
        batch_size=32,
        path="sklearn.datasets.load_digits",
        description={"op_type": "DigitsShard", "shuffle": True, "batch_size": 32},
    )
    per_epoch = len(data.train_labels) // 32
    train_set = example.ShuffledShard(full, per_epoch, seed=0)
    model = mlp.MLP.create(64, 0)
    optimizer = mlp.Optimizer(model, "momentum", 0.05)
    network = ArrayNetwork(model.weights, graph=example.MLP_GRAPH, name="DigitsMLP")
    optimizer_view = ArrayOptimizer(network, learning_rate=0.05, name="Momentum")
    collector = (
        SummaryCollector(
            arm.directory,
            collect_freq=arm.collect_freq,
            collect_specified_data={"collect_landscape": None},
            custom_lineage_data={"hidden": 64, "seed": 0},
            **collector_options(),
        )
        if arm.collect
        else None
    )
    tick = arm.clock.tick

    def section(name: str) -> contextlib.AbstractContextManager[object]:
        return collector.section(name) if collector is not None else contextlib.nullcontext()

    def step(batch: tuple[np.ndarray, np.ndarray]) -> float:
        tick()
        images, labels = batch
        with section("compute"):
            loss, gradients = model.loss_and_gradients(images, labels)
            names = sorted(gradients)
            flat = np.concatenate([gradients[name].ravel() for name in names])
        # (one process: the example's allreduce of ``flat`` averages over one rank)
        with section("compute"):
            offset = 0
            for name in names:
                size = gradients[name].size
                gradients[name] = flat[offset : offset + size].reshape(gradients[name].shape)
                offset += size
            optimizer.apply(gradients)
        tensor_summary("fc2.weight", model.weights["fc2.weight"])
        return float(loss)

    loop = TrainLoop(
        step, network=network, optimizer=optimizer_view, loss_fn=example.SoftmaxCrossEntropy()
    )
    epochs = max(math.ceil(arm.steps / per_epoch), 1)
    return lambda: loop.train(
        epochs, train_set, callbacks=[collector] if collector is not None else None
    )


def build_lightning(arm: Arm) -> Callable[[], object]:
    """The ~10 ms MLP as a LightningModule; RankScribeLogger (bare: logger=False)."""
    import lightning.pytorch as pl

    # Lightning sets its loggers' levels when imported: its lines about devices and tips
    # would go between the table's lines.
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    per_epoch = mlp_steps_per_epoch(arm.steps)
    model, _, loss_fn, loader = mlp_parts(WIDTHS["w10"], per_epoch, "cpu")
    tick = arm.clock.tick

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            images, labels = batch
            return loss_fn(self.net(images), labels)

        def configure_optimizers(self) -> Any:
            import torch

            return torch.optim.SGD(self.parameters(), lr=0.01)

    class Ticker(pl.Callback):
        def on_train_batch_start(self, *args: Any) -> None:
            tick()

    logger: Any = False
    if arm.collect:
        from rankscribe.collector.lightning import RankScribeLogger

        logger = RankScribeLogger(
            arm.directory, collect_freq=arm.collect_freq, **collector_options()
        )
    trainer = pl.Trainer(
        accelerator="gpu" if arm.device == "cuda" else "cpu",
        devices=1,
        max_steps=arm.steps,
        max_epochs=mlp_epochs(arm.steps),
        logger=logger,
        callbacks=[Ticker()],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    module = Module()
    return lambda: trainer.fit(module, loader)


HF_BATCH = 16
HF_SEQUENCE = 32


def build_hf(arm: Arm) -> Callable[[], object]:
    """A small BERT from a config (nothing downloaded); RankScribeCallback (bare: none)."""
    import torch
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        PrinterCallback,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=1000,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=HF_SEQUENCE,
        num_labels=2,  # type: ignore[call-arg]
    )
    model = BertForSequenceClassification(config)
    samples = arm.steps * HF_BATCH
    ids = torch.randint(1, 1000, (samples, HF_SEQUENCE))
    labels = (ids == 7).any(dim=1).long()
    train = [{"input_ids": ids[i], "labels": labels[i]} for i in range(samples)]
    tick = arm.clock.tick

    class Ticker(TrainerCallback):
        def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
            tick()

    callbacks: list[Any] = [Ticker()]
    if arm.collect:
        from rankscribe.collector.transformers import RankScribeCallback

        callbacks.append(
            RankScribeCallback(arm.directory, collect_freq=arm.collect_freq, **collector_options())
        )
    arguments = TrainingArguments(
        output_dir=str(arm.directory.parent / f"{arm.directory.name}-hf-output"),
        max_steps=arm.steps,
        per_device_train_batch_size=HF_BATCH,
        learning_rate=5e-4,
        save_strategy="no",
        report_to=[],
        use_cpu=arm.device != "cuda",
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(model=model, args=arguments, train_dataset=train, callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)  # it prints the run's final logs
    run: Callable[[], object] = trainer.train  # typed: without transformers its names are Any
    return run


def make_array_model(steps_per_epoch: int) -> tuple[ArrayNetwork, ArrayOptimizer, ArrayDataset]:
    """The waiting step's network (a NumPy MLP's parameters), optimizer and data."""
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


def waiting_step(network: ArrayNetwork, step_ms: float, tick: Callable[[], None]) -> Any:
    """A step that changes the weights a little, then sleeps until ``step_ms`` have passed."""
    bias = network["fc2.bias"]

    def step(batch: tuple[np.ndarray, np.ndarray]) -> np.floating[Any]:
        tick()
        deadline = time.perf_counter() + step_ms / 1000
        bias[:] -= 1e-4  # the weights change between steps, as in training
        loss = np.float32(batch[0][0, 0, 0, 0])
        remaining = deadline - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)
        return loss

    return step


WAITING_STEPS_PER_EPOCH = 200


def waiting_epochs(steps: int) -> int:
    return max(math.ceil(steps / WAITING_STEPS_PER_EPOCH), 1)


def build_waiting(arm: Arm) -> Callable[[], object]:
    epochs = waiting_epochs(arm.steps)
    network, optimizer, dataset = make_array_model(math.ceil(arm.steps / epochs))
    loop = TrainLoop(
        waiting_step(network, STEP_MS, arm.clock.tick), network=network, optimizer=optimizer
    )
    callbacks = (
        [SummaryCollector(arm.directory, collect_freq=arm.collect_freq, **collector_options())]
        if arm.collect
        else None
    )
    return lambda: loop.train(epochs, dataset, callbacks=callbacks)


def run_once(
    epochs: int,
    steps_per_epoch: int,
    collect_freq: int | None,
    directory: Path,
    step_ms: float = STEP_MS,
    starts: list[float] | None = None,
) -> float:
    """One waiting-step run, bare (``collect_freq`` None) or collected: its wall seconds.

    ``starts`` receives each step's start (``time.perf_counter``).
    """
    align_ranks()
    network, optimizer, dataset = make_array_model(steps_per_epoch)
    kept = starts if starts is not None else []
    loop = TrainLoop(
        waiting_step(network, step_ms, lambda: kept.append(time.perf_counter())),
        network=network,
        optimizer=optimizer,
    )
    collector = (
        SummaryCollector(directory, collect_freq=collect_freq, **collector_options())
        if collect_freq is not None
        else None
    )
    start = time.perf_counter()
    loop.train(epochs, dataset, callbacks=[collector] if collector is not None else None)
    return time.perf_counter() - start


def collects(step: int, collect_freq: int) -> bool:
    """Whether the collector collects at ``step`` (1-based) or saves landscape files there."""
    return step == 1 or step % collect_freq == 0 or step in LANDSCAPE_STEPS


def _same(value: int) -> int:
    return value


def _digits_freq(value: int) -> int:
    return 5  # the example's collect_freq, whatever --collect-freq says


MEAN_3 = Targets(mean=3.0)
ROWS = {
    row.key: row
    for row in (
        Row(
            "mlp-1ms",
            "torch MLP ~1 ms step (width {w1}), TrainSession",
            1000,
            session_training("w1"),
            mlp_steps_per_epoch,
            _same,
            Targets(mean=2.0, cpu=3.0, quiet=2.0),
            on_device=True,
        ),
        Row(
            "mlp-10ms",
            "torch MLP ~10 ms step (width {w10}), TrainSession",
            1000,
            session_training("w10"),
            mlp_steps_per_epoch,
            _same,
            Targets(mean=2.0, cpu=3.0, quiet=1.0, whole=5.0),
            on_device=True,
        ),
        Row(
            "trainloop",
            "torch MLP ~10 ms step (width {w10}), TrainLoop",
            500,
            build_trainloop,
            mlp_steps_per_epoch,
            _same,
            MEAN_3,
            on_device=True,
        ),
        Row(
            "digits",
            "digits NumPy example (collect_freq=5, no landscape)",
            1000,
            build_digits,
            lambda steps: DIGITS_STEPS_PER_EPOCH,
            _digits_freq,
            MEAN_3,
        ),
        Row(
            "lightning",
            "Lightning Trainer, MLP width {w10}",
            500,
            build_lightning,
            mlp_steps_per_epoch,
            _same,
            MEAN_3,
        ),
        Row(
            "hf",
            f"HF Trainer, BERT 2x128 from a config, batch {HF_BATCH}",
            300,
            build_hf,
            lambda steps: steps,
            _same,
            MEAN_3,
            on_device=True,
        ),
        Row(
            "waiting",
            f"waiting step ({STEP_MS:g} ms sleep), TrainLoop",
            1000,
            build_waiting,
            lambda steps: math.ceil(steps / waiting_epochs(steps)),
            _same,
            Targets(),
        ),
        Row(
            "budget",
            f"torch MLP width {WIDTH_BUDGET}, batch {BUDGET_BATCH}: histograms >= 20 % unshed",
            1000,
            session_training(WIDTH_BUDGET, BUDGET_BATCH),
            mlp_steps_per_epoch,
            _same,
            Targets(mean=2.0),
            on_device=True,
        ),
        Row(
            "budget-off",
            "the budget row's MLP, cost_budget='off'",
            1000,
            session_training(WIDTH_BUDGET, BUDGET_BATCH, cost_budget="off"),
            mlp_steps_per_epoch,
            _same,
            Targets(),
            on_device=True,
        ),
    )
}
DEFAULT_ROWS = (
    "mlp-1ms",
    "mlp-10ms",
    "trainloop",
    "digits",
    "lightning",
    "hf",
    "waiting",
    "budget",
    "budget-off",
)
#: Rows that train the torch MLPs of :data:`WIDTHS`.
MLP_ROWS = ("mlp-1ms", "mlp-10ms", "trainloop", "lightning")
#: Rows whose frameworks start their own ranks: not run under mpiexec.
FRAMEWORK_ROWS = ("lightning", "hf")


# ---------------------------------------------------------------------- measurement


@dataclass
class RunNumbers:
    """What one run measured (seconds)."""

    wall: float
    cpu: float
    step_walls: list[float]
    step_cpus: list[float]
    once: dict[str, list[float]] = field(default_factory=dict)  # label -> [wall, cpu, calls]
    threads: dict[str, float] = field(default_factory=dict)  # CPU seconds by thread name
    own_cost: float | None = None  # the collector's own record, seconds per step
    own_threads_cost: float | None = None  # the same, its threads' CPU
    own_wall_cost: float | None = None  # the same, its wall cost (with the slowdown)
    budget: list[str] = field(default_factory=list)  # the cost budget's decisions, said


def timed_run(row: Row, arm: Arm, once: OnceCosts) -> RunNumbers:
    """One run of ``row``: built untimed, then trained and timed from start to end."""
    train = row.build(arm)
    synchronize = _synchronizer(arm.device)
    align_ranks()
    once.reset()
    with warnings.catch_warnings(), ThreadCpu() as threads, budget_said() as said:
        warnings.simplefilter("ignore")
        synchronize()
        start, start_cpu = time.perf_counter(), time.process_time()
        train()
        synchronize()
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    return RunNumbers(
        wall=wall,
        cpu=cpu,
        step_walls=arm.clock.step_walls(),
        step_cpus=arm.clock.step_cpus(),
        once={label: list(value) for label, value in once.totals.items()},
        threads=threads.by_name(),
        own_cost=recorded_cost(arm.directory, OWN_TRAINING_TAG) if arm.collect else None,
        own_threads_cost=recorded_cost(arm.directory, OWN_THREADS_TAG) if arm.collect else None,
        own_wall_cost=recorded_cost(arm.directory, OWN_WALL_TAG) if arm.collect else None,
        budget=[decision(message) for message in said],
    )


class _Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def budget_said() -> Iterator[list[str]]:
    """The cost budget's messages while the block runs (at INFO and up, kept off the
    screen: ``quiet_frameworks`` keeps the collector's log at ERROR)."""
    logger = logging.getLogger(BUDGET_LOGGER)
    said = _Said()
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(said)
    try:
        yield said.messages
    finally:
        logger.removeHandler(said)
        logger.setLevel(level)
        logger.propagate = propagate


def decision(message: str) -> str:
    """A budget message in short: the share it measured, over which steps, what it shed
    (the first look's, at the first collected step's histograms and images, says so), or
    that what it never sheds is over the budget by itself."""
    said = said_in_short(message)
    if said is None:
        return message
    first = " (first look)" if said.first_look else ""
    return f"{said.share} at steps {said.steps}{first}: {said.what}"


def _synchronizer(device: str) -> Callable[[], object]:
    if device != "cuda":
        return lambda: None
    import torch

    synchronize: Callable[[], object] = torch.cuda.synchronize  # typed: Any without torch
    return synchronize


def recorded_cost(directory: Path, tag: str) -> float | None:
    """The collector's own cost ``tag`` over the run (seconds per step), if recorded.

    Each point is a window's mean, at the window's last step; the windows are weighted by
    their steps (the gaps between the points, the first from the collector's warm-up).
    """
    from rankscribe.writer.reader import scalars

    # Under a launcher the ranks share the job dir: this rank's own files are in its rank
    # dir (the job dir's top holds rank 0's job view, whose cost tags are bands).
    launched = launcher_rank(os.environ)
    own = directory / f"rank_{launched.rank}" if launched is not None else directory
    for summary in (own if own.is_dir() else directory).rglob("*.summary.*"):
        if summary.name.endswith("_lineage") or ".job." in summary.name or not summary.is_file():
            continue
        points = sorted(scalars(summary.parent).get(tag, []))
        if not points:
            return None
        total, steps, previous = 0.0, 0, OWN_COST_WARMUP
        for step, value in points:
            total += value * (step - previous)
            steps += step - previous
            previous = step
        return total / steps if steps > 0 else None
    return None


@dataclass
class RowResult:
    """A row's runs and what the table shows of them (percentages over bare)."""

    key: str
    title: str
    steps: int
    warmup: int
    bare: list[RunNumbers]
    collected: list[RunNumbers]
    summary: dict[str, Any] = field(default_factory=dict)


def measure_row(
    row: Row, steps: int, reps: int, warmup: int, settings: Settings, once: OnceCosts
) -> RowResult:
    device = settings.device if row.on_device else "cpu"
    freq = row.collect_freq(settings.collect_freq)
    result = RowResult(row.key, row.title.format_map(WIDTHS), steps, warmup, [], [])
    if not settings.quick:  # both arms once, untimed: what a process pays once
        for collect in (False, True):
            arm = Arm(
                collect,
                settings.work / f"{row.key}-untimed-{int(collect)}",
                min(steps, warmup + 20),
                device,
                freq,
                StepClock(0, "cpu"),
            )
            timed_run(row, arm, once)
    for index in range(reps):
        # Bare first, then collected first: a machine that drifts over a pair favours
        # neither arm in the paired numbers (summarize).
        for collect in (False, True) if index % 2 == 0 else (True, False):
            arm = Arm(
                collect,
                settings.work / f"{row.key}-{index}-{'collected' if collect else 'bare'}",
                steps,
                device,
                freq,
                StepClock(steps, device),
            )
            numbers = timed_run(row, arm, once)
            (result.collected if collect else result.bare).append(numbers)
    result.summary = summarize(row, result, freq)
    return result


def steady(values: list[float], warmup: int) -> float:
    """The mean of the step intervals after ``warmup`` steps (collected steps included)."""
    kept = values[warmup:]
    return statistics.fmean(kept) if kept else float("nan")


def quiet_median(values: list[float], warmup: int, per_epoch: int, freq: int) -> float:
    """The median step (interval ``k`` is step ``k + 1``) that collects nothing."""
    quiet = [
        value
        for index, value in enumerate(values)
        if index >= warmup and (index + 1) % per_epoch != 0 and not collects(index + 1, freq)
    ]
    return statistics.median(quiet) if quiet else float("nan")


def percent(collected: float, bare: float) -> float:
    return (collected / bare - 1) * 100 if bare > 0 else float("nan")


def summarize(row: Row, result: RowResult, freq: int) -> dict[str, Any]:
    """Best of each arm, then collected over bare in percent; the once costs' medians."""
    warmup, per_epoch = result.warmup, row.steps_per_epoch(result.steps)

    def best(runs: list[RunNumbers], measure: Callable[[RunNumbers], float]) -> float:
        return min(measure(run) for run in runs)

    def mean_wall(run: RunNumbers) -> float:
        return steady(run.step_walls, warmup)

    def mean_cpu(run: RunNumbers) -> float:
        return steady(run.step_cpus, warmup)

    def quiet(run: RunNumbers) -> float:
        return quiet_median(run.step_walls, warmup, per_epoch, freq)

    def without_once(run: RunNumbers) -> float:
        return run.wall - sum(value[0] for value in run.once.values())

    bare, collected = result.bare, result.collected
    once = {
        label: {
            "ms": statistics.median(run.once.get(label, [0.0])[0] for run in collected) * 1000,
            "calls": int(statistics.median(run.once.get(label, [0, 0, 0])[2] for run in collected)),
        }
        for label in ONCE_LABELS
    }
    own = [run.own_cost for run in collected if run.own_cost is not None]
    own_wall = [run.own_wall_cost for run in collected if run.own_wall_cost is not None]
    own_all = [
        run.own_cost + run.own_threads_cost
        for run in collected
        if run.own_cost is not None and run.own_threads_cost is not None
    ]
    bare_step = best(bare, mean_wall)
    bare_cpu = best(bare, mean_cpu)
    # Each collected run against the bare run of its pair (run next to it): robust to a
    # machine whose speed drifts from run to run, which "best of each" is not.
    paired = [percent(mean_wall(c), mean_wall(b)) for b, c in zip(bare, collected, strict=True)]
    bare_means = [mean_wall(run) for run in bare]
    return {
        "bare_step_ms": bare_step * 1000,
        "mean_wall_pct": percent(best(collected, mean_wall), bare_step),
        "mean_cpu_pct": percent(best(collected, mean_cpu), best(bare, mean_cpu)),
        "mean_wall_paired_pct": statistics.median(paired),
        "mean_wall_pairs_pct": paired,
        "bare_spread_pct": percent(max(bare_means), min(bare_means)),
        "quiet_pct": percent(best(collected, quiet), best(bare, quiet)),
        "whole_pct": percent(
            best(collected, lambda run: run.wall), best(bare, lambda run: run.wall)
        ),
        "whole_cpu_pct": percent(
            best(collected, lambda run: run.cpu), best(bare, lambda run: run.cpu)
        ),
        "whole_without_once_pct": percent(
            best(collected, without_once), best(bare, lambda run: run.wall)
        ),
        "once_ms": once,
        "own_cost_pct": (statistics.median(own) / bare_step * 100) if own else None,
        "own_wall_pct": (statistics.median(own_wall) / bare_step * 100) if own_wall else None,
        "own_cpu_pct": (statistics.median(own_all) / bare_cpu * 100) if own_all else None,
        "threads_ms_per_step": thread_cpu_per_step(bare, collected, result.steps),
        "budget": [run.budget for run in collected],
        "targets": asdict(row.targets),
    }


def thread_cpu_per_step(
    bare: list[RunNumbers], collected: list[RunNumbers], steps: int
) -> dict[str, float]:
    """CPU ms per step by thread in the least-CPU collected run (training: over bare's)."""
    quietest = min(collected, key=lambda run: run.cpu)
    threads = dict(quietest.threads)
    threads["training"] = threads.get("training", 0.0) - min(
        run.threads.get("training", 0.0) for run in bare
    )
    return {name: seconds / steps * 1000 for name, seconds in threads.items()}


# --------------------------------------------------------------------------- output


def judged(value: float, target: float | None) -> str:
    """``+1.23 %`` and, with a target, ``(<= 2) ok`` or ``(<= 2) MISS``."""
    if math.isnan(value):
        return "n/a"
    text = f"{value:+.2f}%"
    if target is None:
        return text
    return f"{text} (<={target:g} {'ok' if value <= target else 'MISS'})"


COLUMNS = (
    ("row", 10),
    ("bare ms/step", 12),
    ("mean/step wall", 20),
    ("mean/step CPU", 20),
    ("quiet step", 20),
    ("whole run", 20),
    ("w/o once", 9),
    ("own cost (x measured)", 22),
)


def own_against_measured(own: float | None, measured: float) -> str:
    """The collector's recorded cost and its ratio to the overhead measured: ``+1.20% (x0.9)``."""
    if own is None:
        return "not recorded"
    if math.isnan(measured) or measured <= 0:
        return f"{own:+.2f}% (x n/a)"
    return f"{own:+.2f}% (x{own / measured:.2f})"


def table(results: list[RowResult]) -> list[str]:
    """The table's lines: a header, one line per row, each row's once costs below it."""
    lines = ["  ".join(f"{name:<{width}}" for name, width in COLUMNS)]
    for result in results:
        summary, targets = result.summary, result.summary["targets"]
        own = summary["own_cost_pct"]
        wall = summary["own_wall_pct"]
        cells = (
            result.key,
            f"{summary['bare_step_ms']:.3f}",
            judged(summary["mean_wall_pct"], targets["mean"]),
            judged(summary["mean_cpu_pct"], targets["cpu"]),
            judged(summary["quiet_pct"], targets["quiet"]),
            judged(summary["whole_pct"], targets["whole"]),
            judged(summary["whole_without_once_pct"], None),
            own_against_measured(wall if wall is not None else own, summary["mean_wall_pct"]),
        )
        lines.append(
            "  ".join(f"{cell:<{width}}" for cell, (_, width) in zip(cells, COLUMNS, strict=True))
        )
        once = summary["once_ms"]
        lines.append(
            "    once (ms): "
            + ", ".join(
                f"{label} {value['ms']:.1f}" + (f" x{value['calls']}" if value["calls"] > 1 else "")
                for label, value in once.items()
            )
            + f"; whole run CPU {summary['whole_cpu_pct']:+.2f}%"
        )
        pairs = ", ".join(f"{value:+.2f}%" for value in summary["mean_wall_pairs_pct"])
        lines.append(
            f"    paired: mean/step wall {summary['mean_wall_paired_pct']:+.2f}% (the median of "
            f"each collected run against its pair's bare run: {pairs}); the bare runs' mean "
            f"step spread {summary['bare_spread_pct']:.1f}%"
        )
        lines.append(
            "    own cost recorded: wall (training thread + the steps it slowed) "
            + own_against_measured(wall, summary["mean_wall_pct"])
            + " of the bare step vs the mean step's wall overhead (x"
            + (
                f"{wall / summary['mean_wall_paired_pct']:.2f}"
                if wall is not None and summary["mean_wall_paired_pct"] > 0
                else " n/a"
            )
            + " vs the paired); training thread alone "
            + own_against_measured(own, summary["mean_wall_pct"])
            + "; with its threads' CPU "
            + own_against_measured(summary["own_cpu_pct"], summary["mean_cpu_pct"])
            + " of the bare step's CPU vs its CPU overhead"
        )
        threads = summary["threads_ms_per_step"]
        lines.append(
            "    CPU ms/step by thread (training: over bare): "
            + ", ".join(
                f"{name} {value:.3f}"
                for name, value in sorted(threads.items(), key=lambda item: -item[1])
                if abs(value) >= 0.0005
            )
        )
        lines.append(
            "    cost budget: "
            + " | ".join(
                f"run {number}: " + (", then ".join(said) if said else "nothing shed")
                for number, said in enumerate(summary.get("budget", []), 1)
            )
        )
    return lines


def header(settings: Settings, rank: int | None) -> str:
    where = "" if rank is None else f" - rank {rank}"
    return (
        f"SummaryCollector cost{where}: {settings.reps} reps, bare and collected alternately, "
        f"best of each; steady state after {settings.warmup} warm-up steps; device "
        f"{settings.device}; torch threads {torch_threads()}"
    )


def rank_comparison(results: list[list[dict[str, Any]]]) -> list[str]:
    """Rank 0 against rank 1, row by row: rank 0 must stay within rank 1's numbers + 1 %."""
    lines = ["rank 0 against rank 1 (bound: rank 1's number + 1 %):"]
    for zero, one in zip(results[0], results[1], strict=True):
        cells = []
        for key, name in (
            ("mean_wall_pct", "mean/step"),
            ("quiet_pct", "quiet"),
            ("whole_pct", "whole"),
        ):
            a, b = zero["summary"][key], one["summary"][key]
            verdict = "ok" if a <= b + 1 else "MISS"
            cells.append(f"{name} {a:+.2f}% vs {b:+.2f}% {verdict}")
        lines.append(f"  {zero['key']:<10}  " + ", ".join(cells))
    return lines


# ------------------------------------------------------------------------ the ranks


def _mpi_world() -> Any:
    """MPI.COMM_WORLD under mpiexec with several ranks, else None."""
    launched = launcher_rank(os.environ)
    if launched is None or launched.launcher not in MPI_LAUNCHERS:
        return None
    from mpi4py import MPI

    return MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None


def _poll(request: Any, what: str) -> Any:
    deadline = time.monotonic() + RANK_TIMEOUT
    while True:
        done, value = request.test()
        if done:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other ranks did not {what} within {RANK_TIMEOUT:g} s")
        time.sleep(0.001)


def align_ranks() -> None:
    """Under mpiexec: every rank starts the next run together (not timed).

    Without it the ranks drift apart over the runs, and the collector's collective
    open and its end-of-training merge time one rank waiting for the other, which is
    no cost of the collector. A non-blocking barrier polled with sleeps: MPICH's
    blocking one busy-polls a core the other rank's run may need.
    """
    world = _mpi_world()
    if world is not None:
        _poll(world.Ibarrier(), "start the run")


def share_text(world: Any, text: str) -> str:
    """Rank 0's ``text`` on every rank."""
    if world.Get_rank() == 0:
        requests = [world.isend(text, dest=rank, tag=44) for rank in range(1, world.Get_size())]
        for request in requests:
            _poll(request, "take rank 0's directory")
        return text
    return str(_poll(world.irecv(source=0, tag=44), "send rank 0's directory"))


def gather_texts(world: Any, text: str) -> list[str]:
    """Every rank's ``text`` on rank 0 (an empty list elsewhere)."""
    if world.Get_rank() != 0:
        _poll(world.isend(text, dest=0, tag=45), "take this rank's results")
        return []
    texts = [text]
    for rank in range(1, world.Get_size()):
        deadline = time.monotonic() + RANK_TIMEOUT
        while not world.iprobe(source=rank, tag=45):
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank {rank} sent no results within {RANK_TIMEOUT:g} s")
            time.sleep(0.01)
        texts.append(world.recv(source=rank, tag=45))
    return texts


# ------------------------------------------------------------------------ arguments


@dataclass
class Settings:
    rows: list[str]
    steps: int | None
    reps: int
    warmup: int
    device: str
    collect_freq: int
    quick: bool
    json: Path | None
    widths: dict[str, int] | None = None
    work: Path = Path()


def _row_list(text: str) -> list[str]:
    rows = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in rows if name not in ROWS]
    if not rows or unknown:
        raise argparse.ArgumentTypeError(
            f"--rows must be a comma-separated list of {', '.join(ROWS)}; got {text!r}"
        )
    return rows


def parse_widths(text: str) -> dict[str, int]:
    """``--widths``' value: the ~1 ms and ~10 ms MLPs' widths by their :data:`WIDTHS` keys."""
    parts = text.split(",")
    if len(parts) != 2 or not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(
            f"--widths must be two integers >= 1, the ~1 ms and ~10 ms MLPs' widths "
            f"(e.g. 384,1408); got {text!r}"
        )
    return dict(zip(MLP_STEP_SECONDS, map(int, parts), strict=True))


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def arguments(argv: list[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows",
        type=_row_list,
        default=list(DEFAULT_ROWS),
        help=f"comma-separated, of {', '.join(ROWS)} (default: all)",
    )
    parser.add_argument("--steps", type=_positive, help="steps of every run (default: the row's)")
    parser.add_argument("--reps", type=_positive, default=3, help="bare/collected pairs per row")
    parser.add_argument(
        "--warmup", type=int, default=20, help="first steps left out of the steady state"
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--collect-freq", type=_positive, default=10)
    parser.add_argument(
        "--quick", action="store_true", help="50 steps, 1 rep, no untimed warm-up run (tests)"
    )
    parser.add_argument("--json", type=Path, help="write every run's numbers to this file")
    parser.add_argument(
        "--widths",
        type=parse_widths,
        default=None,
        help="the ~1 ms and ~10 ms torch MLPs' hidden widths, e.g. 384,1408 (default: on the "
        "CPU each found here so that the bare step takes about 1 and 10 ms; with --device "
        f"cuda {WIDTH_1MS},{WIDTH_10MS})",
    )
    parser.add_argument(
        "--job-view-interval",
        type=float,
        default=None,
        help="the collectors' job_view_interval (seconds; run under mpiexec)",
    )
    parsed = parser.parse_args(argv)
    if parsed.warmup < 0:
        parser.error(f"--warmup must be an integer >= 0, got {parsed.warmup}")
    if parsed.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: torch finds no CUDA device (torch.cuda.is_available())")
    global JOB_VIEW_INTERVAL  # noqa: PLW0603 - one setting for every run of this process
    JOB_VIEW_INTERVAL = parsed.job_view_interval
    settings = Settings(
        rows=parsed.rows,
        steps=parsed.steps,
        reps=parsed.reps,
        warmup=parsed.warmup,
        device=parsed.device,
        collect_freq=parsed.collect_freq,
        quick=parsed.quick,
        json=parsed.json,
        widths=parsed.widths,
    )
    if settings.quick:
        settings.steps = settings.steps or 50
        settings.reps = 1
    if settings.steps is not None and settings.steps <= settings.warmup + 1:
        parser.error(f"--steps must exceed --warmup + 1 ({settings.warmup + 1})")
    return settings


@contextlib.contextmanager
def quiet_frameworks() -> Iterator[None]:
    """The frameworks' and the collector's log lines off while the runs go (the table stays
    readable); errors still show."""
    names = ("rankscribe", "lightning", "lightning.pytorch", "transformers", "accelerate")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def main(argv: list[str] | None = None) -> None:
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(name, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    settings = arguments(argv)
    world = _mpi_world()
    rank = None if world is None else world.Get_rank()
    rows = settings.rows
    if world is not None:
        rows = [name for name in rows if name not in FRAMEWORK_ROWS]
    if any(name in ("mlp-1ms", "mlp-10ms", "trainloop", "lightning", "hf") for name in rows):
        import torch

        torch.set_num_threads(torch_threads())
    if settings.widths is not None:
        WIDTHS.update(settings.widths)
    elif any(name in MLP_ROWS for name in rows) and settings.device == "cpu":
        WIDTHS.update(find_widths(world))
    once = OnceCosts()
    work = tempfile.mkdtemp(prefix="rankscribe-bench-collector-") if rank in (None, 0) else ""
    settings.work = Path(work if world is None else share_text(world, work))
    load_before = os.getloadavg()
    results: list[RowResult] = []
    try:
        with quiet_frameworks():
            for name in rows:
                row = ROWS[name]
                steps = settings.steps or row.steps
                results.append(
                    measure_row(row, steps, settings.reps, settings.warmup, settings, once)
                )
    finally:
        if world is None:
            shutil.rmtree(settings.work, ignore_errors=True)
    load_after = os.getloadavg()
    document = {
        "rank": rank,
        "device": settings.device,
        "reps": settings.reps,
        "warmup": settings.warmup,
        "torch_threads": torch_threads(),
        "widths": dict(WIDTHS),
        "widths_how": (
            "given by --widths"
            if settings.widths is not None
            else "found here"
            if settings.device == "cpu"
            else "fixed: the CPU rows' models on the device"
        ),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "once_costs_not_found": once.missing,
        "rows": [
            {
                "key": result.key,
                "title": result.title,
                "steps": result.steps,
                "summary": result.summary,
                "bare": [asdict(run) for run in result.bare],
                "collected": [asdict(run) for run in result.collected],
            }
            for result in results
        ],
    }
    documents: list[dict[str, Any]] = [document]
    if world is not None:
        texts = gather_texts(world, json.dumps(document))
        if rank != 0:
            return
        documents = [json.loads(text) for text in texts]
        shutil.rmtree(settings.work, ignore_errors=True)
    report(settings, documents, [name for name in settings.rows if name not in rows])


def report(settings: Settings, documents: list[dict[str, Any]], skipped: list[str]) -> None:
    for document in documents:
        results = [
            RowResult(
                row["key"], row["title"], row["steps"], settings.warmup, [], [], row["summary"]
            )
            for row in document["rows"]
        ]
        print(header(settings, document["rank"]))
        print(
            "  load average (1, 5, 15 min) before "
            + "/".join(f"{value:.2f}" for value in document["load_average_before"])
            + ", after "
            + "/".join(f"{value:.2f}" for value in document["load_average_after"])
        )
        if any(result.key in MLP_ROWS for result in results):
            how = document["widths_how"]
            widths = document["widths"]
            print(
                f"  the torch MLPs' widths ({how}): ~1 ms step {widths['w1']}, "
                f"~10 ms step {widths['w10']}"
            )
        for result in results:
            print(f"  {result.key:<10} {result.title}, {result.steps} steps")
        for line in table(results):
            print(line)
        if document["once_costs_not_found"]:
            print(
                "  once costs not measured (no such method): "
                + ", ".join(document["once_costs_not_found"])
            )
    if skipped:
        print(
            "not run under mpiexec (their frameworks start their own ranks): " + ", ".join(skipped)
        )
    if len(documents) > 1 and documents[0]["rows"]:
        for line in rank_comparison([document["rows"] for document in documents]):
            print(line)
    if settings.json is not None:
        settings.json.write_text(json.dumps(documents, indent=1))


if __name__ == "__main__":
    main()
