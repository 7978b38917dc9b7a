"""One rank's side of a job-view scenario, run by ``mpiexec -n 3 python -m mpi4py``.

    python -m mpi4py jobview_scenarios.py <scenario> <out_dir>

Scenarios (the pytest side is test_mpi_jobview.py):

- ``verdicts``: two training jobs, one after the other in the same launch (a
  launch costs seconds): ``<out>/clean``, where every rank does the same, and
  ``<out>/faulty``, where rank SLOW_RANK sleeps longer at every step and rank
  DIVERGED_RANK perturbs its parameters at step PERTURB_STEP. Rank 0 writes
  each job's view at the end of training, from the series the ranks send.
- ``crash``: rank DYING_RANK calls ``os._exit(1)`` at step DYING_STEP while the
  others go on; MPICH then kills the job, before any merge.

Each rank trains a tiny NumPy model with TrainLoop + SummaryCollector, and
updates its parameters the same way as every other rank (as data-parallel
training does after its gradient allreduce), so their fingerprints agree
unless a scenario perturbs them.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.ranks import detect

STEPS = 30
BATCH_SIZE = 2
#: Every rank's step sleeps this long; the slow rank sleeps SLOW_EXTRA more.
STEP_SECONDS = 0.010
SLOW_EXTRA = 0.015
SLOW_RANK = 2
DIVERGED_RANK = 1
PERTURB_STEP = 12
#: The crash: the dying rank's steps are slow, so the others are far ahead when it dies;
#: each is longer than the collector's STEP_TIME_WRITE_AT_ONCE (0.25 s), so its step
#: time is written at its end and the rank's last written step is the one before it died.
DYING_RANK = 1
DYING_STEP = 15
DYING_STEP_SECONDS = 0.3
CRASH_STEPS = 2000
CRASH_STEP_SECONDS = 0.005


def make_run(
    world_size: int, rank: int, steps: int
) -> tuple[ArrayNetwork, ArrayOptimizer, ArrayDataset]:
    rng = np.random.default_rng(0)  # the same model and data on every rank
    network = ArrayNetwork(
        {
            "fc.weight": rng.normal(size=(4, 3)).astype(np.float32),
            "fc.bias": np.zeros(3, np.float32),
        },
        name="TinyNet",
    )
    optimizer = ArrayOptimizer(network, learning_rate=0.05, name="SGD")
    rows = steps * BATCH_SIZE * world_size
    full = ArrayDataset(
        rng.random((rows, 1, 4, 4)).astype(np.float32),
        rng.integers(0, 3, rows),
        batch_size=BATCH_SIZE,
        path="/data/tiny",
    )
    return network, optimizer, full.shard(world_size, rank)


def train(
    summary: Path,
    *,
    steps: int = STEPS,
    collect_freq: int = 1,
    step_seconds: float = STEP_SECONDS,
    slow_rank: int | None = None,
    diverged_rank: int | None = None,
    dying_rank: int | None = None,
) -> None:
    info = detect()
    network, optimizer, shard = make_run(info.world_size, info.rank, steps)
    done = [0]
    if info.rank == dying_rank:
        step_seconds = DYING_STEP_SECONDS

    def step(batch: Any) -> np.float32:
        done[0] += 1
        number = done[0]
        network["fc.weight"][:] *= np.float32(0.99)  # the same update on every rank
        if info.rank == diverged_rank and number == PERTURB_STEP:
            network["fc.bias"][0] += np.float32(1e-3)
        time.sleep(step_seconds + (SLOW_EXTRA if info.rank == slow_rank else 0.0))
        if info.rank == dying_rank and number == DYING_STEP:
            os._exit(1)  # mid-step, no clean-up at all: MPICH notices and kills the others
        return np.float32(1.0 + info.rank + 0.01 * number)

    collector = SummaryCollector(
        summary,
        collect_freq=collect_freq,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=30.0,
    )
    TrainLoop(step, network=network, optimizer=optimizer).train(1, shard, callbacks=[collector])
    collector.close()


def scenario_verdicts(out: Path) -> None:
    train(out / "clean")
    train(out / "faulty", slow_rank=SLOW_RANK, diverged_rank=DIVERGED_RANK)


def scenario_crash(out: Path) -> None:
    train(
        out / "job",
        steps=CRASH_STEPS,
        collect_freq=5,
        step_seconds=CRASH_STEP_SECONDS,
        dying_rank=DYING_RANK,
    )


def main() -> None:
    scenario, out = sys.argv[1], Path(sys.argv[2])
    info = detect()
    globals()[f"scenario_{scenario}"](out)
    print(f"rank {info.rank} of {info.world_size}: {scenario} done", flush=True)


if __name__ == "__main__":
    main()
