"""One rank of a NumPy job that averages its gradients with ``collector.allreduce_gradients``.

    mpiexec -n 4 python -m mpi4py gradient_scenarios.py <out_dir> <steps>

Two jobs in one launch, each a ``TrainLoop`` of a two-layer NumPy network whose
step hands its two gradient arrays (two buckets) to
``SummaryCollector.allreduce_gradients``: ``clean``, and ``corrupt``, where rank
CORRUPT_RANK multiplies one element of its first gradient by 2**16 at step
CORRUPT_STEP, before the call (a flipped exponent in its backward). Rank 0 runs
the live view every LIVE_INTERVAL seconds; what its ``on_verdict`` received is
in ``<job>/rank_0.json``. Each step's
forward and backward work is stood for by a WORK_SECONDS sleep, as in
verdict_scenarios.py: the network's own arithmetic takes microseconds, and a step
that short is all collective and scheduling, where 4 ranks sharing 2 cores arrive
tens of microseconds apart (a straggler verdict on the clean job under coverage's
tracer), which is no job anyone runs. The pytest side is test_mpi_gradients.py.
"""

from __future__ import annotations

import json
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
    TrainLoop,
)
from rankscribe.ranks import detect

BATCH, COLLECT_FREQ = 8, 10
LIVE_INTERVAL = 0.5  # seconds between the live view's rounds
WORK_SECONDS = 0.004
CORRUPT_RANK, CORRUPT_STEP, CORRUPT_FACTOR = 2, 30, np.float32(2.0**16)


def job(out: Path, steps: int, corrupt: bool) -> None:
    info = detect()
    rng = np.random.default_rng(0)  # the same parameters on every rank
    parameters = {
        "w1": (0.3 * rng.standard_normal((16, 32))).astype(np.float32),
        "w2": (0.3 * rng.standard_normal((32, 3))).astype(np.float32),
    }
    network = ArrayNetwork(parameters, name="TwoLayer")
    optimizer = ArrayOptimizer(network, learning_rate=0.05, name="SGD")
    rows = steps * BATCH * info.world_size
    data = ArrayDataset(
        rng.standard_normal((rows, 16)).astype(np.float32),
        rng.integers(0, 3, rows),
        batch_size=BATCH,
    ).shard(info.world_size, info.rank)
    verdicts: list[Any] = []  # what rank 0's live view hands on_verdict
    collector = SummaryCollector(
        out,
        collect_freq=COLLECT_FREQ,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=60.0,
        job_view_interval=LIVE_INTERVAL,
        on_verdict=verdicts.append,
    )
    comm = MPI.COMM_WORLD
    done = [0]

    def step(batch: Any) -> float:
        done[0] += 1
        time.sleep(WORK_SECONDS)  # the forward and backward's work
        images, labels = batch
        w1, w2 = parameters["w1"], parameters["w2"]
        hidden = np.maximum(images @ w1, 0.0)
        error = hidden @ w2 - np.eye(3, dtype=np.float32)[labels]
        grad_w2 = (hidden.T @ error / len(images)).astype(np.float32)
        grad_hidden = (error @ w2.T) * (hidden > 0)
        grad_w1 = (images.T @ grad_hidden / len(images)).astype(np.float32)
        if corrupt and done[0] == CORRUPT_STEP and info.rank == CORRUPT_RANK:
            grad_w1.reshape(-1)[5] *= CORRUPT_FACTOR
        gradients = [grad_w1, grad_w2]
        collector.allreduce_gradients(comm, gradients)
        w1 -= np.float32(0.05) * gradients[0]
        w2 -= np.float32(0.05) * gradients[1]
        return float(np.mean(error**2))

    TrainLoop(step, network=network, optimizer=optimizer).train(1, data, callbacks=[collector])
    collector.close()
    (out / f"rank_{info.rank}.json").write_text(json.dumps({"verdicts": verdicts}))


def main() -> None:
    out, steps = Path(sys.argv[1]), int(sys.argv[2])
    job(out / "clean", steps, corrupt=False)
    job(out / "corrupt", steps, corrupt=True)
    print(f"rank {detect().rank}: done", flush=True)


if __name__ == "__main__":
    main()
