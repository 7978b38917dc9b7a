"""One rank of a job that samples its machine, run by ``mpiexec -n 2 python -m mpi4py``.

    python -m mpi4py system_scenarios.py <scenario> <out_dir>

Every step computes (CPU-bound NumPy, marked with ``collector.section("compute")``)
and then averages with ``comm.Allreduce``, as data-parallel training does.
Scenarios (the pytest side is test_mpi_system.py):

- ``bands``: ``RANKSCRIBE_SYSTEM_INTERVAL=0.5`` (the environment variable), a
  live view every second, TRAIN_SECONDS of training; each rank writes how long
  it trained into ``<out>/seconds_<rank>.txt``;
- ``hog``: each rank pinned to a core of its own (``os.sched_setaffinity``);
  rank HOG_RANK shares its core with a busy-looping process pinned there too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    SummaryCollector,
    TrainSession,
)
from rankscribe.ranks import detect

TRAIN_SECONDS = 4.0
HOG_RANK = 1
HOG_STEPS = 50
BATCH = 4
_HOG = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def make_run(rank: int, world_size: int, steps: int) -> tuple[ArrayNetwork, ArrayOptimizer, Any]:
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"w": rng.normal(size=(16, 3)).astype(np.float32)}, name="Linear")
    optimizer = ArrayOptimizer(network, learning_rate=0.1, name="SGD")
    rows = steps * BATCH * world_size
    full = ArrayDataset(
        rng.random((rows, 16)).astype(np.float32), rng.integers(0, 3, rows), batch_size=BATCH
    )
    return network, optimizer, full.shard(world_size, rank)


def compute(collector: SummaryCollector, size: int) -> float:
    """CPU-bound work of a fixed amount (no sleep: a shared core makes it slower)."""
    with collector.section("compute"):
        matrix = np.full((size, size), 0.5, dtype=np.float64)
        for _ in range(4):
            matrix = np.tanh(matrix @ matrix / size)
        return float(matrix[0, 0])


def train(out: Path, steps: int | None, size: int, interval: float | None) -> float:
    info = detect()
    comm = MPI.COMM_WORLD
    network, optimizer, shard = make_run(info.rank, info.world_size, steps or 10_000)
    collector = SummaryCollector(
        out,
        collect_freq=50,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=60.0,
        job_view_interval=1.0,
        system_interval=interval,
    )
    started = time.monotonic()
    with TrainSession(
        [collector], network=network, optimizer=optimizer, train_dataset=shard, epochs=1
    ) as running:
        for _ in running.epochs():
            for number, _batch in enumerate(shard):
                value = np.array([compute(collector, size)])
                total = np.empty_like(value)
                comm.Allreduce(value, total)
                running.step(_batch, float(total[0]))
                # Every rank stops at the same step: rank 0's clock decides.
                done = np.array([time.monotonic() - started >= TRAIN_SECONDS], dtype=np.int32)
                if steps is None:
                    comm.Bcast(done, root=0)
                    if done[0]:
                        break
                elif number + 1 >= steps:
                    break
    seconds = time.monotonic() - started
    collector.close()
    return seconds


def scenario_bands(out: Path) -> None:
    os.environ["RANKSCRIBE_SYSTEM_INTERVAL"] = "0.5"
    seconds = train(out / "bands", None, 48, None)
    (out / f"seconds_{detect().rank}.txt").write_text(f"{seconds}\n")


def scenario_hog(out: Path) -> None:
    info = detect()
    cores = sorted(os.sched_getaffinity(0))
    core = cores[info.rank % len(cores)]
    os.sched_setaffinity(0, {core})
    hog = None
    if info.rank == HOG_RANK:
        hog = subprocess.Popen([sys.executable, "-c", _HOG, str(core)])
    try:
        MPI.COMM_WORLD.Barrier()
        train(out / "hog", HOG_STEPS, 600, 0.25)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait(timeout=10)


def main() -> None:
    scenario, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    globals()[f"scenario_{scenario}"](out)
    print(f"rank {detect().rank}: {scenario} done", flush=True)


if __name__ == "__main__":
    main()
