#!/usr/bin/env python3
"""Reading scalars back: reader.scalar_arrays against tbparse, TensorBoard and protobuf.

    python tools/bench/reader.py [--steps 100000] [--tags 10] [--big-mb 150] [--repeat 3]
                                 [--quick] [--keep DIR]

Our writer writes 10 tags x 100,000 steps (1,000,000 scalars) in both formats
(a summary ``_MS`` file and a TensorBoard file holding the same points), then
each reader reads them, in this same run:

- ``reader.scalar_arrays`` of the summary file and of the TensorBoard file (all
  tags, and one tag of ten), in this process and in a new one (import included,
  as a script that reads a run would pay it);
- ``reader.scalars`` (the same points as lists of tuples);
- plain protobuf: every record parsed into a message, every value's number read;
- tbparse's ``SummaryReader(...).scalars`` and TensorBoard's ``EventFileLoader``
  on the TensorBoard file (they do not read MindSpore's schema).

Then a summary file of --big-mb MB (same shape, more steps) is read by
``scalar_arrays`` alone. Printed: seconds (best of --repeat; the slow peers run
once), points/s, and ratios peer / ours. Targets (issue 21): >= 5 M points/s,
>= 40x tbparse, the big file in <= 1 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sized
from pathlib import Path

from rankscribe.writer import SummaryRecord, reader
from rankscribe.writer.events import read_events, read_tensorboard_events

TARGET_POINTS_PER_SECOND = 5e6
TARGET_TBPARSE_RATIO = 40.0
TARGET_BIG_SECONDS = 1.0


def _write(directory: Path, steps: int, tags: int, formats: tuple[str, ...]) -> None:
    names = [f"train/metric_{index}" for index in range(tags)]
    with SummaryRecord(directory, formats=formats) as record:
        for step in range(steps):
            for index, name in enumerate(names):
                record.add_value("scalar", name, index + 1.0 / (step + 1))
            record.record(step)


def _best(action: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def _protobuf(path: Path) -> int:
    count = 0
    tensorboard = "tfevents" in path.name
    events = read_tensorboard_events(path) if tensorboard else read_events(path)
    for event in events:
        for value in event.summary.value:
            if value.WhichOneof("value") in ("scalar_value", "simple_value"):
                count += 1
    return count


def _tbparse(path: Path) -> int:
    from tbparse import SummaryReader  # an optional peer: imported only here

    return len(SummaryReader(str(path)).scalars)


def _event_file_loader(path: Path) -> int:
    from tensorboard.backend.event_processing.event_file_loader import (
        EventFileLoader,
    )

    count = 0
    for event in EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            if value.WhichOneof("value") == "simple_value":
                count += 1
    return count


def _new_process(path: Path, repeat: int) -> tuple[float, float]:
    """Seconds of a new interpreter that imports the reader, with and without the read."""
    script = (
        "import sys; from rankscribe.writer import reader\n"
        "if sys.argv[1] == 'read': reader.scalar_arrays(sys.argv[2])\n"
    )

    def run(what: str) -> None:
        subprocess.run([sys.executable, "-c", script, what, str(path)], check=True, timeout=300)

    return _best(lambda: run("import"), repeat), _best(lambda: run("read"), repeat)


def _row(name: str, seconds: float, points: int, ours: float | None = None) -> None:
    ratio = f"{seconds / ours:8.1f}x ours" if ours else ""
    print(f"  {name:<44} {seconds:8.3f} s {points / seconds / 1e6:8.2f} M points/s  {ratio}")


def _count(curves: Mapping[str, tuple[Sized, object]]) -> int:
    return sum(len(steps) for steps, _ in curves.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--tags", type=int, default=10)
    parser.add_argument("--big-mb", type=float, default=150.0, help="0 skips the big file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10x fewer steps, no big file")
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.big_mb = args.steps // 10, 0.0
    base = args.keep or Path(tempfile.mkdtemp(prefix="rankscribe-bench-reader-"))
    try:
        return _run(args, base)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


def _run(args: argparse.Namespace, base: Path) -> int:
    run = base / "run"
    start = time.perf_counter()
    _write(run, args.steps, args.tags, ("mindinsight", "tensorboard"))
    [summary] = reader.list_summary_files(run, "summary")
    [tensorboard] = reader.list_summary_files(run, "tensorboard")
    points = args.steps * args.tags
    print(
        f"{args.tags} tags x {args.steps:,} steps = {points:,} scalars, written in "
        f"{time.perf_counter() - start:.1f} s: summary file {summary.stat().st_size / 1e6:.1f} MB, "
        f"TensorBoard file {tensorboard.stat().st_size / 1e6:.1f} MB"
    )
    assert _count(reader.scalar_arrays(summary)) == points
    assert _count(reader.scalar_arrays(tensorboard)) == points
    one_tag = ["train/metric_0"]

    ours = _best(lambda: reader.scalar_arrays(summary), args.repeat)
    ours_tb = _best(lambda: reader.scalar_arrays(tensorboard), args.repeat)
    print("\nsummary file (_MS):")
    _row("reader.scalar_arrays", ours, points)
    _row(
        "reader.scalar_arrays(tags=[one of them])",
        _best(lambda: reader.scalar_arrays(summary, tags=one_tag), args.repeat),
        points,
    )
    _row(
        "reader.scalars (lists of tuples)",
        _best(lambda: reader.scalars(summary), args.repeat),
        points,
        ours,
    )
    _row(
        "protobuf: parse every record, read every value",
        _best(lambda: _protobuf(summary), args.repeat),
        points,
        ours,
    )
    imported, read = _new_process(summary, args.repeat)
    print(f"  new process: import {imported:.3f} s, import + scalar_arrays {read:.3f} s")

    print("\nTensorBoard file (tfevents):")
    _row("reader.scalar_arrays", ours_tb, points)
    _row(
        "protobuf: parse every record, read every value",
        _best(lambda: _protobuf(tensorboard), args.repeat),
        points,
        ours_tb,
    )
    tbparse = _best(lambda: _tbparse(tensorboard), 1)
    _row("tbparse SummaryReader(...).scalars", tbparse, points, ours_tb)
    _row(
        "tensorboard EventFileLoader",
        _best(lambda: _event_file_loader(tensorboard), 1),
        points,
        ours_tb,
    )

    failures = []
    rate = points / max(ours, ours_tb)
    if rate < TARGET_POINTS_PER_SECOND:
        failures.append(f"{rate / 1e6:.2f} M points/s < {TARGET_POINTS_PER_SECOND / 1e6:.0f} M")
    if tbparse / ours_tb < TARGET_TBPARSE_RATIO:
        failures.append(f"tbparse ratio {tbparse / ours_tb:.1f}x < {TARGET_TBPARSE_RATIO:.0f}x")

    if args.big_mb > 0:
        per_step = summary.stat().st_size / args.steps
        big_steps = int(args.big_mb * 1e6 / per_step)
        big = base / "big"
        start = time.perf_counter()
        _write(big, big_steps, args.tags, ("mindinsight",))
        [big_file] = reader.list_summary_files(big, "summary")
        size = big_file.stat().st_size
        print(
            f"\nbig summary file: {size / 1e6:.0f} MB, {big_steps * args.tags:,} scalars "
            f"(written in {time.perf_counter() - start:.1f} s)"
        )
        seconds = _best(lambda: reader.scalar_arrays(big_file), args.repeat)
        _row("reader.scalar_arrays", seconds, big_steps * args.tags)
        print(f"  {size / seconds / 1e6:.0f} MB/s")
        if seconds > TARGET_BIG_SECONDS:
            failures.append(f"big file {seconds:.2f} s > {TARGET_BIG_SECONDS:.0f} s")

    print("\ntargets: " + ("met" if not failures else "MISSED: " + "; ".join(failures)))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
