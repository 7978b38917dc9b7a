"""One rank's side of the uneven-shards jobs, run by ``mpiexec -n N python -m mpi4py``.

    python -m mpi4py uneven_shards.py <out_dir>

Each rank trains a tiny NumPy model for one epoch on its ``ArrayDataset.shard``
of every case in CASES (one batch a step, so shards of 75 rows over 2 ranks run
38 and 37 steps), with a SummaryCollector writing into ``<out_dir>/<case>``
and a ``tensor_summary`` at every step; in the ``stop`` case the last rank
requests the stop after STOP_AFTER[world_size] steps. The pytest side
(test_mpi_uneven_shards.py) reads the ranks' summary files.
"""

from __future__ import annotations

import sys
from pathlib import Path
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
from rankscribe.ranks import detect
from rankscribe.writer import tensor_summary

#: case -> (rows of the whole dataset, collect_tensor_freq, whether the last rank stops early)
CASES: dict[str, tuple[int, int | None, bool]] = {
    "rows_75": (75, None, False),
    "rows_76": (76, None, False),
    "rows_76_tensor_freq_2": (76, 2, False),
    "stop": (75, None, True),
}
#: The step after which the last rank stops in the ``stop`` case, by world size.
STOP_AFTER = {2: 25, 3: 17}


class StopAfter(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def step_end(self, run_context: RunContext) -> None:
        if run_context.original_args().cur_step_num == self.step:
            run_context.request_stop()


def train(out: Path, rows: int, tensor_freq: int | None, stop: bool) -> None:
    info = detect()
    rng = np.random.default_rng(0)  # the same model and data on every rank
    network = ArrayNetwork({"fc.weight": rng.normal(size=(4, 3)).astype(np.float32)})
    optimizer = ArrayOptimizer(network, learning_rate=0.05)
    whole = ArrayDataset(rng.random((rows, 4)).astype(np.float32), batch_size=1)
    shard = whole.shard(info.world_size, info.rank)

    def step(batch: Any) -> float:
        tensor_summary("weights", network["fc.weight"])
        return 1.0

    collector = SummaryCollector(
        out,
        collect_freq=1,
        collect_tensor_freq=tensor_freq,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=30.0,
    )
    callbacks: list[Callback] = []
    if stop and info.rank == info.world_size - 1:
        callbacks.append(StopAfter(STOP_AFTER[info.world_size]))
    TrainLoop(step, network=network, optimizer=optimizer).train(
        1, shard, callbacks=[*callbacks, collector]
    )
    collector.close()


def main() -> None:
    out = Path(sys.argv[1])
    for case, (rows, tensor_freq, stop) in CASES.items():
        train(out / case, rows, tensor_freq, stop)
    info = detect()
    print(f"rank {info.rank} of {info.world_size}: done", flush=True)


if __name__ == "__main__":
    main()
