#!/usr/bin/env python3
"""The report's time and size over a generated base of 1,000 runs.

    python tools/bench/report.py [--runs 1000] [--jobs 10] [--ranks 4] [--steps 10000]
                                 [--single-steps 100] [--repeat 3] [--keep DIR | --base DIR]

Generates a base dir of ``--runs`` runs, ``--jobs`` of them distributed jobs
(``rank_<n>`` dirs of ``--ranks`` ranks, each with ``--steps`` steps of loss
and ``rankscribe/step_time``, and a parameter fingerprint and an accuracy at
every 10th step, then merged offline: merged lineage, job view, verdicts;
one job has a straggler, one a rank that diverges, one a rank that stops
early), the rest single-process runs of ``--single-steps`` steps. Every run
has a train and an eval lineage and custom data. The files are written with
the writer's own ``SummaryRecord`` (scalars only) and the lineage with the
lineage package's messages, as a training script leaves them.

Then it times ``rankscribe-lineage report BASE -o FILE`` (in-process, median of
``--repeat``; the lineage index exists after the first, as after any query)
and prints time and file size against the targets: 5 s and 15 MB for 1,000
runs with 10 jobs of 4 ranks x 10,000 steps.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rankscribe.lineage import merge_run_dir
from rankscribe.lineage.cli import main as lineage_cli
from rankscribe.lineage.recording import (
    Algorithm,
    EvalLineageInfo,
    HyperParameters,
    TrainDataset,
    TrainLineageInfo,
    UserDefinedInfo,
)
from rankscribe.writer import SummaryRecord

TARGET_SECONDS = 5.0
TARGET_BYTES = 15_000_000
OPTIMIZERS = ("Adam", "Momentum", "SGD")
FINGERPRINT_EVERY = 10


def _lineage(
    record: SummaryRecord, index: int, rng: random.Random, *, device_num: int, final_loss: float
) -> None:
    train = TrainLineageInfo(
        hyper_parameters=HyperParameters(
            optimizer=OPTIMIZERS[index % len(OPTIMIZERS)],
            learning_rate=rng.choice((0.1, 0.05, 0.01, 0.001)),
            loss_function="SoftmaxCrossEntropyWithLogits",
            epoch=rng.randint(5, 50),
            parallel_mode="data_parallel" if device_num > 1 else "stand_alone",
            device_num=device_num,
            batch_size=rng.choice((32, 64, 128)),
        ),
        train_dataset=TrainDataset(train_dataset_path="/data/digits", train_dataset_size=1437),
        algorithm=Algorithm(network="MLP", loss=final_loss),
    )
    record.add_value("train_lineage", "train", train.to_proto())
    metrics = {"accuracy": max(0.0, min(1.0, 1.0 - final_loss / 3 + rng.gauss(0, 0.02)))}
    record.add_value("eval_lineage", "eval", EvalLineageInfo.from_metrics(metrics).to_proto())
    custom = UserDefinedInfo.from_values({"seed": index, "dropout": round(rng.random(), 2)})
    record.add_value("custom_lineage_data", "custom", custom.to_proto())


def _loss(step: int, steps: int, rate: float, rng: random.Random) -> float:
    return 2.3 * math.exp(-rate * step / steps) + 0.05 + rng.random() * 0.05


def write_single_run(directory: Path, index: int, steps: int, rng: random.Random) -> None:
    rate = rng.uniform(1.0, 5.0)
    with SummaryRecord(directory) as record:
        for step in range(1, steps + 1):
            record.add_value("scalar", "loss", _loss(step, steps, rate, rng))
            if step % FINGERPRINT_EVERY == 0:
                record.add_value("scalar", "accuracy", 1 - _loss(step, steps, rate, rng) / 2.5)
            record.record(step)
        _lineage(record, index, rng, device_num=1, final_loss=_loss(steps, steps, rate, rng))
        record.record(steps)


def write_rank(job: Path, index: int, rank: int, ranks: int, steps: int, seed: int) -> None:
    """One rank; job 0 has a straggler (the last rank), job 1 a rank that diverges at
    60 % of the steps, job 2 a rank that stops at 80 %."""
    rng = random.Random(seed)
    rate = 3.0
    slow = 1.5 if index % 10 == 0 and rank == ranks - 1 else 1.0
    diverge_at = int(steps * 0.6) if index % 10 == 1 and rank == ranks - 1 else None
    stop_at = int(steps * 0.8) if index % 10 == 2 and rank == 1 else steps
    with SummaryRecord(job / f"rank_{rank}", rank=rank) as record:
        for step in range(1, stop_at + 1):
            record.add_value("scalar", "loss", _loss(step, steps, rate, rng))
            record.add_value("scalar", "rankscribe/step_time", slow * (0.02 + rng.random() * 0.004))
            if step % FINGERPRINT_EVERY == 0:
                diverged = diverge_at is not None and step >= diverge_at
                fingerprint = float((step * 7919 + (rank + 1) * 104729 * diverged) & 0xFFFFFF)
                record.add_value("scalar", "rankscribe/param_fingerprint", fingerprint)
                record.add_value("scalar", "accuracy", 1 - _loss(step, steps, rate, rng) / 2.5)
            record.record(step)
        _lineage(
            record,
            index,
            random.Random(index),
            device_num=ranks,
            final_loss=_loss(stop_at, steps, rate, rng),
        )
        record.record(stop_at)


def generate(
    base: Path, runs: int, jobs: int, ranks: int, steps: int, single_steps: int, seed: int = 0
) -> None:
    rng = random.Random(seed)
    for index in range(jobs):
        job = base / f"job{index:02d}"
        for rank in range(ranks):
            write_rank(job, index, rank, ranks, steps, seed=index * 1000 + rank)
        merge_run_dir(job, world_size=ranks)
    for index in range(jobs, runs):
        write_single_run(base / f"run{index:04d}", index, single_steps, rng)


def _cpu_seconds() -> tuple[float, float]:
    """CPU time of this process, and of its children that have ended (the report's workers)."""
    used = os.times()
    return used.user + used.system, used.children_user + used.children_system


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--single-steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="generate under DIR and keep the base")
    parser.add_argument(
        "--base", type=Path, help="report on this base (one --keep made) instead of generating one"
    )
    args = parser.parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    generated = args.base is None
    base = Path(tempfile.mkdtemp(prefix="report-bench-", dir=args.keep)) if generated else args.base
    try:
        if generated:
            started = time.perf_counter()
            generate(base, args.runs, args.jobs, args.ranks, args.steps, args.single_steps)
            print(
                f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; generated "
                f"{args.runs} runs ({args.jobs} jobs of {args.ranks} ranks x {args.steps:,} "
                f"steps, {args.runs - args.jobs} single runs x {args.single_steps} steps) in "
                f"{time.perf_counter() - started:.1f} s under {base}"
            )
        output = base / "report.html"
        times, cpu_times = [], []
        for _ in range(max(1, args.repeat)):
            started, cpu_before = time.perf_counter(), _cpu_seconds()
            status = lineage_cli(["report", str(base), "-o", str(output)])
            times.append(time.perf_counter() - started)
            cpu_after = _cpu_seconds()
            cpu_times.append((cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]))
            if status != 0:
                print(f"rankscribe-lineage report exited {status}", file=sys.stderr)
                return status
        seconds, size = statistics.median(times), output.stat().st_size
        print(
            f"report: {seconds:.2f} s (median of {len(times)}: "
            f"{', '.join(f'{t:.2f}' for t in times)}), target {TARGET_SECONDS:.0f} s: "
            f"{'ok' if seconds <= TARGET_SECONDS else 'OVER'}"
        )
        # On a shared machine the wall time says as much about the neighbours as about
        # the report: the CPU time (this process and its reading workers) does not.
        own = statistics.median(cpu for cpu, _ in cpu_times)
        workers = statistics.median(cpu for _, cpu in cpu_times)
        cpus = os.cpu_count() or 1
        print(
            f"        CPU {own + workers:.2f} s: {own:.2f} s in the process, {workers:.2f} s in "
            f"its reading workers; load average {os.getloadavg()[0]:.1f} on {cpus} cpus"
        )
        print(
            f"        on an idle machine about {own + workers / cpus:.2f} s "
            f"(the process's CPU plus the workers' spread over {cpus} cpus; an estimate)"
        )
        print(
            f"file:   {size / 1e6:.1f} MB, target {TARGET_BYTES / 1e6:.0f} MB: "
            f"{'ok' if size <= TARGET_BYTES else 'OVER'} ({output})"
        )
        return 0
    finally:
        if generated and args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
