"""One rank's side of the live job-view scenario, run by ``mpiexec -n 3 python -m mpi4py``.

    python -m mpi4py live_scenarios.py <out_dir> <steps> <interval> [<rank> <step> <seconds>]

Each rank trains a tiny NumPy model with TrainLoop + SummaryCollector
(``job_view_interval=<interval>`` seconds), every step collected, and records
a scalar of the script's own through the collector's record
(``script/rank_value``: rank + step / 1000), so the live view must carry a
tag the collector knows nothing of. The pytest side (test_mpi_live.py) reads
the job's files while this runs and kills the job with SIGKILL.

With the last three arguments, rank ``<rank>``'s training thread stalls: it
sleeps ``<seconds>`` inside step ``<step>`` (its live-view thread runs on),
then trains on (test_mpi_live.py). Each rank that ends writes how long its end of
training took (from its last step's end to the collector closed) into
``<out_dir>/../ended-<rank>``.
"""

from __future__ import annotations

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

STEP_SECONDS = 0.02
SCRIPT_TAG = "script/rank_value"


def main() -> None:
    out, steps, interval = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    stall_rank, stall_step, stall_seconds = (
        (int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
        if len(sys.argv) > 6
        else (-1, 0, 0)
    )
    info = detect()
    rng = np.random.default_rng(0)
    network = ArrayNetwork(
        {"fc.weight": rng.normal(size=(4, 3)).astype(np.float32)}, name="TinyNet"
    )
    optimizer = ArrayOptimizer(network, learning_rate=0.05, name="SGD")
    rows = steps * info.world_size
    data = ArrayDataset(
        rng.random((rows, 1, 4, 4)).astype(np.float32), rng.integers(0, 3, rows), batch_size=1
    ).shard(info.world_size, info.rank)
    collector = SummaryCollector(
        out,
        collect_freq=1,
        merge_timeout=12.0,
        collect_specified_data={"collect_landscape": None},
        job_view_interval=interval,
    )
    done = [0]
    last_step_end = [0.0]

    def step(batch: Any) -> np.float32:
        done[0] += 1
        network["fc.weight"][:] *= np.float32(0.99)
        record = collector.record
        assert record is not None
        record.add_value("scalar", SCRIPT_TAG, float(info.rank + done[0] / 1000))
        time.sleep(STEP_SECONDS)
        if info.rank == stall_rank and done[0] == stall_step:
            print(f"rank {info.rank}: stalls at step {done[0]}", flush=True)
            time.sleep(stall_seconds)
            print(f"rank {info.rank}: resumes", flush=True)
        last_step_end[0] = time.monotonic()
        return np.float32(1.0 + info.rank)

    TrainLoop(step, network=network, optimizer=optimizer).train(1, data, callbacks=[collector])
    collector.close()
    ended = time.monotonic() - last_step_end[0]
    (out.parent / f"ended-{info.rank}").write_text(f"{ended:.3f}")
    print(f"rank {info.rank}: live done (its end took {ended:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
