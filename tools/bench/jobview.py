#!/usr/bin/env python3
"""The job view's cost for 8 ranks x 10,000 steps x 10 scalar tags, with baselines.

    python tools/bench/jobview.py [--ranks 8] [--steps 10000] [--tags 10] [--repeat 3]

(in any env that has rankscribe-writer and rankscribe-lineage, e.g. .tox/lineage)

1. In memory (rank 0's end-of-training merge): ``write_job_view`` from the
   ranks' series to the job files on disk (summary and TensorBoard), against
   numpy computing just mean/min/max over a dense (ranks, steps, tags) array of
   the same values. Target <= 2 s.
2. Offline (``rankscribe-lineage merge <job_dir>``): ``merge_run_dir`` reading
   the rank dirs the writer filled, against plain reading of the same rank
   files with ``rankscribe.writer.reader.scalars``. Target <= 5 s.

Each is the best of --repeat runs; the ratio is ours / baseline, measured in
this same run.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rankscribe.lineage import merge_run_dir
from rankscribe.lineage.jobview import (
    FINGERPRINT_TAG,
    STEP_TIME_TAG,
    RankSeries,
    write_job_view,
)
from rankscribe.writer import SummaryRecord, reader

TARGET_IN_MEMORY = 2.0
TARGET_OFFLINE = 5.0


def _tags(count: int) -> list[str]:
    plain = [f"metric/{index}" for index in range(max(0, count - 3))]
    return ["loss/auto", STEP_TIME_TAG, FINGERPRINT_TAG, *plain][:count]


def _values(ranks: int, steps: int, tags: list[str]) -> np.ndarray:
    rng = np.random.default_rng(0)
    values = rng.random((ranks, steps, len(tags)), dtype=np.float32).astype(np.float64)
    if FINGERPRINT_TAG in tags:  # data parallel: every rank holds the same parameters
        values[:, :, tags.index(FINGERPRINT_TAG)] = np.arange(steps) % (1 << 24)
    return values


def _series(values: np.ndarray, tags: list[str]) -> dict[int, RankSeries]:
    steps = list(range(1, values.shape[1] + 1))
    return {
        rank: RankSeries(rank, {
            tag: list(zip(steps, values[rank, :, column].tolist(), strict=True))
            for column, tag in enumerate(tags)
        })
        for rank in range(values.shape[0])
    }


def _write_rank_dirs(job: Path, values: np.ndarray, tags: list[str]) -> None:
    for rank in range(values.shape[0]):
        with SummaryRecord(job / f"rank_{rank}", rank=rank,
                           formats=("mindinsight", "tensorboard")) as record:
            for index in range(values.shape[1]):
                for column, tag in enumerate(tags):
                    record.add_value("scalar", tag, float(values[rank, index, column]))
                record.record(index + 1)


def _best(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def _report(name: str, ours: float, baseline: float, baseline_name: str, target: float) -> None:
    verdict = "meets" if ours <= target else "MISSES"
    print(f"{name}: {ours:.3f} s ({verdict} the {target:.0f} s target); "
          f"{baseline_name}: {baseline:.3f} s; ratio {ours / baseline:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--tags", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # The bench's ranks write no lineage: the merge's "without ranks" warning is expected.
    logging.getLogger("rankscribe").setLevel(logging.ERROR)
    tags = _tags(args.tags)
    values = _values(args.ranks, args.steps, tags)
    series = _series(values, tags)
    points = args.ranks * args.steps * len(tags)
    print(f"{args.ranks} ranks x {args.steps} steps x {len(tags)} scalar tags = {points:,} points")
    scratch = Path(tempfile.mkdtemp(prefix="rankscribe-bench-jobview-"))
    try:
        memory_dir = scratch / "memory"
        memory_dir.mkdir()
        ours = _best(lambda: write_job_view(memory_dir, series, world_size=args.ranks,
                                            tensorboard=True), args.repeat)

        def dense_numpy() -> None:
            np.mean(values, axis=0), np.min(values, axis=0), np.max(values, axis=0)

        baseline = _best(dense_numpy, args.repeat)
        _report("in-memory job view (write_job_view, _MS + TensorBoard files)", ours, baseline,
                "numpy mean/min/max of a dense array", TARGET_IN_MEMORY)

        job = scratch / "job"
        started = time.perf_counter()
        _write_rank_dirs(job, values, tags)
        print(f"(rank files written by SummaryRecord in {time.perf_counter() - started:.1f} s, "
              f"not timed below)")
        ours = _best(lambda: merge_run_dir(job), args.repeat)

        def plain_reading() -> None:
            for rank in range(args.ranks):
                reader.scalars(job / f"rank_{rank}")

        baseline = _best(plain_reading, args.repeat)
        _report("offline merge (merge_run_dir from the rank files)", ours, baseline,
                "reader.scalars of every rank dir", TARGET_OFFLINE)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
