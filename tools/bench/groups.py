#!/usr/bin/env python3
"""``rankscribe-lineage group`` over 1,000 runs of 10,000 steps and 5 tags, by one key.

    python tools/bench/groups.py [--base DIR] [--runs 1000] [--steps 10000] [--repeat 3]

Generates (once; an existing base of the same shape is reused) that many
single-process runs under ``--base`` (default ``/work/bench-data/groups`` when
it exists as a folder to write in, else a temporary one): each a summary file
of ``--steps`` events holding 5 scalar tags, and a lineage file whose
learning rate is one of 4 (so ``--by learning_rate`` makes 4 groups of 250
runs, each a different seed). Then times, each in a new process:

- ``rankscribe-lineage group BASE --by learning_rate`` (the command: the
  query, reading every run's curves, the groups' statistics, writing
  ``BASE/_groups``), and the same with ``--workers 1``;
- the peer: reading the same files with ``reader.scalars`` (a Python list of
  ``(step, value)`` per tag: what a script comparing runs would do), and with
  ``reader.scalar_arrays`` (the columnar reader the command uses).

Prints wall and CPU seconds (medians of ``--repeat``), the ratios to the
peers, the load average and the target (5 s).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rankscribe.jobview.job._files import Curve, summary_file_records
from rankscribe.lineage.recording import (
    Algorithm,
    HyperParameters,
    TrainLineageInfo,
    UserDefinedInfo,
)
from rankscribe.ranks.files import atomic_write
from rankscribe.writer.eventfiles import write_event_file
from rankscribe.writer.files import frame
from rankscribe.writer.pb import lineage_pb2

TARGET_SECONDS = 5.0
TAGS = ("loss/auto", "accuracy", "rankscribe/step_time", "learning_rate", "grad_norm")
RATES = (0.1, 0.05, 0.01, 0.001)
DEFAULT_BASE = Path("/work/bench-data/groups")
STAMP = ".bench-shape"

_READ_ALL = """
import os, sys, time
from rankscribe.writer import reader
base = sys.argv[1]
read = getattr(reader, sys.argv[2])
points = 0
for name in sorted(os.listdir(base)):
    if name.startswith("run"):
        curves = read(os.path.join(base, name))
        columns = curves.values() if sys.argv[2] == "scalars" else (v[0] for v in curves.values())
        points += sum(map(len, columns))
print(points)
"""


def _run(base: Path, index: int, steps: int) -> None:
    directory = base / f"run{index:04d}"
    directory.mkdir(mode=0o700, exist_ok=True)
    rng = np.random.default_rng(index)
    rate = RATES[index % len(RATES)]
    step_numbers = np.arange(1, steps + 1, dtype=np.int64)
    decay = np.exp(-rate * 50 * step_numbers / steps)
    values = {
        "loss/auto": 2.3 * decay + 0.05 * rng.random(steps),
        "accuracy": 1 - decay / 2 + 0.01 * rng.random(steps),
        "rankscribe/step_time": 0.02 + 0.004 * rng.random(steps),
        "learning_rate": np.full(steps, rate),
        "grad_norm": 1 + rng.random(steps),
    }
    curves = [Curve(tag, step_numbers, values[tag]) for tag in TAGS]
    timestamp = 1_700_000_000 + index
    write_event_file(
        directory / f"events.out.events.summary.{timestamp}.bench_MS",
        summary_file_records(curves, float(timestamp)),
    )
    train = TrainLineageInfo(
        hyper_parameters=HyperParameters(optimizer="SGD", learning_rate=rate, epoch=10),
        algorithm=Algorithm(network="MLP", loss=float(values["loss/auto"][-1])),
    )
    events = [
        lineage_pb2.LineageEvent(wall_time=1.0, train_lineage=train.to_proto()),
        lineage_pb2.LineageEvent(
            wall_time=2.0,
            user_defined_info=UserDefinedInfo.from_values({"seed": index}).to_proto(),
        ),
    ]
    atomic_write(
        directory / f"events.out.events.summary.{timestamp}.bench_lineage",
        [b"".join(frame(event.SerializeToString()) for event in events)],
        mode=0o400,
    )


def generate(base: Path, runs: int, steps: int) -> None:
    shape = f"{runs} runs x {steps} steps x {len(TAGS)} tags v1\n"
    stamp = base / STAMP
    if stamp.is_file() and stamp.read_text() == shape:
        print(f"reusing {base} ({shape.strip()})")
        return
    base.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for index in range(runs):
        _run(base, index, steps)
    stamp.write_text(shape)
    print(f"generated {shape.strip()} in {time.perf_counter() - started:.0f} s under {base}")


def _timed(command: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``command`` in a new process (its children included)."""
    before = os.times()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu, done.stdout


def _median(command: list[str], repeat: int) -> tuple[float, float, str]:
    results = [_timed(command) for _ in range(repeat)]
    return (
        statistics.median(wall for wall, _, _ in results),
        statistics.median(cpu for _, cpu, _ in results),
        results[-1][2],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    base = args.base
    if base is None:
        writable = DEFAULT_BASE.parent.is_dir() and os.access(DEFAULT_BASE.parent, os.W_OK)
        base = DEFAULT_BASE if writable else Path(tempfile.mkdtemp(prefix="groups-bench-"))
    generate(base, args.runs, args.steps)
    script = shutil.which("rankscribe-lineage")  # the console script, as a user runs it
    command = [script] if script else [sys.executable, "-m", "rankscribe.lineage.cli"]
    group = [*command, "group", str(base)]
    group += ["--by", "learning_rate"]
    _timed(group)  # the first query writes the base's index; it and the page cache are warm after
    rows = {
        "group --by learning_rate": _median(group, args.repeat),
        "group --by learning_rate --workers 1": _median([*group, "--workers", "1"], args.repeat),
        "peer: reader.scalars of every run": _median(
            [sys.executable, "-c", _READ_ALL, str(base), "scalars"], args.repeat
        ),
        "peer: reader.scalar_arrays of every run": _median(
            [sys.executable, "-c", _READ_ALL, str(base), "scalar_arrays"], args.repeat
        ),
    }
    points = int(rows["peer: reader.scalars of every run"][2])
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average "
        f"{os.getloadavg()[0]:.1f}; {args.runs} runs, {points:,} points; medians of {args.repeat}"
    )
    wall_peer, cpu_peer, _ = rows["peer: reader.scalars of every run"]
    for name, (wall, cpu, _) in rows.items():
        print(
            f"  {name:42s} {wall:6.2f} s wall {cpu:6.2f} s CPU   "
            f"x{wall / wall_peer:.2f} wall, x{cpu / cpu_peer:.2f} CPU of reader.scalars"
        )
    wall = rows["group --by learning_rate"][0]
    verdict = "ok" if wall <= TARGET_SECONDS else "OVER"
    print(f"target {TARGET_SECONDS:.0f} s for the command: {wall:.2f} s, {verdict}")
    print(rows["group --by learning_rate"][2].strip().splitlines()[0])
    return 0 if math.isfinite(wall) else 1


if __name__ == "__main__":
    sys.exit(main())
