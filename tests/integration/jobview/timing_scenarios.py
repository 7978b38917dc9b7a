"""One rank of a job whose steps end in an ``Allreduce``, run by ``mpiexec -n N python -m mpi4py``.

    python -m mpi4py timing_scenarios.py <scenario> <out_dir>

Every step computes (a little NumPy and a sleep that stands for the work),
marked with ``collector.section("compute")``, then averages its gradient with
``comm.Allreduce``, as data-parallel training does: every rank's wall step
time is the same, the slowest rank's. Scenarios (the pytest side is
test_mpi_timings.py):

- ``pair`` (2 ranks), three jobs in one launch, each in a ``TrainSession``
  loop of the script's own: ``clean`` (the same work everywhere), ``slow``
  (rank SLOW_RANK computes SLOW_FACTOR times longer) and ``unaveraged`` (the
  ranks start identical but apply their own gradients: nothing is averaged);
- ``node`` (4 ranks), one job in a ``TrainLoop``: ranks NODE_RANKS compute
  NODE_FACTOR times longer (a slow node).
"""

from __future__ import annotations

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
    TrainSession,
)
from rankscribe.ranks import detect

STEPS = 24
COLLECT_FREQ = 4
COMPUTE_SECONDS = 0.008
SLOW_RANK, SLOW_FACTOR = 1, 2.5
NODE_RANKS, NODE_FACTOR = (2, 3), 2.0
BATCH = 4


def make_run(rank: int, world_size: int) -> tuple[ArrayNetwork, ArrayOptimizer, ArrayDataset]:
    rng = np.random.default_rng(0)  # the same parameters on every rank
    network = ArrayNetwork(
        {"w": rng.normal(size=(16, 3)).astype(np.float32), "b": np.zeros(3, np.float32)},
        name="Linear",
    )
    optimizer = ArrayOptimizer(network, learning_rate=0.1, name="SGD")
    rows = STEPS * BATCH * world_size
    full = ArrayDataset(
        rng.random((rows, 16)).astype(np.float32),
        rng.integers(0, 3, rows),
        batch_size=BATCH,
        path="/data/synthetic",
    )
    return network, optimizer, full.shard(world_size, rank)


class Worker:
    """One rank's step: compute (marked as a section), allreduce, update."""

    def __init__(
        self, collector: SummaryCollector, network: ArrayNetwork, factor: float, average: bool
    ) -> None:
        self.collector, self.network = collector, network
        self.factor, self.average = factor, average
        self.comm = MPI.COMM_WORLD

    def step(self, batch: Any) -> float:
        images, labels = batch
        weights = self.network.parameters["w"]
        with self.collector.section("compute"):
            scores = images @ weights
            loss = float(np.mean((scores - np.eye(3, dtype=np.float32)[labels]) ** 2))
            gradient = (images.T @ (scores - np.eye(3, dtype=np.float32)[labels])).astype(
                np.float32
            ) / len(images)
            time.sleep(COMPUTE_SECONDS * self.factor)
        if self.average:
            total = np.empty_like(gradient)
            self.comm.Allreduce(gradient, total)
            gradient = total / self.comm.Get_size()
        else:
            self.comm.Barrier()  # still in lock step: only the averaging is missing
        weights -= np.float32(0.1) * gradient
        return loss


def job(
    out: Path,
    *,
    slow_ranks: tuple[int, ...] = (),
    factor: float = 1.0,
    average: bool = True,
    session: bool = True,
) -> None:
    info = detect()
    network, optimizer, shard = make_run(info.rank, info.world_size)
    collector = SummaryCollector(
        out,
        collect_freq=COLLECT_FREQ,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=60.0,
    )
    worker = Worker(collector, network, factor if info.rank in slow_ranks else 1.0, average)
    if session:
        with TrainSession(
            [collector], network=network, optimizer=optimizer, train_dataset=shard, epochs=1
        ) as running:
            for _ in running.epochs():
                for batch in shard:
                    running.step(batch, worker.step(batch))
    else:
        TrainLoop(worker.step, network=network, optimizer=optimizer).train(
            1, shard, callbacks=[collector]
        )
    collector.close()


def scenario_pair(out: Path) -> None:
    job(out / "clean")
    job(out / "slow", slow_ranks=(SLOW_RANK,), factor=SLOW_FACTOR)
    job(out / "unaveraged", average=False)


def scenario_node(out: Path) -> None:
    job(out / "node", slow_ranks=NODE_RANKS, factor=NODE_FACTOR, session=False)


def main() -> None:
    scenario, out = sys.argv[1], Path(sys.argv[2])
    globals()[f"scenario_{scenario}"](out)
    print(f"rank {detect().rank}: {scenario} done", flush=True)


if __name__ == "__main__":
    main()
