"""One rank of a torch.distributed (gloo) job, started by test_store_torch.py as a process.

    python store_worker.py <scenario> <port> <rank> <world_size> <out_dir> <timeout>

No launcher variable is set: the rank comes from ``init_process_group`` (rank 0
hosts the TCPStore on localhost:<port>), so ``detect()`` reads it from torch
and ``create_coordinator()`` picks the store backend. Each rank writes what it
observed to <out_dir>/rank_<r>.json.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from rankscribe.ranks import Coordinator, RankInfo, StoreCoordinator, create_coordinator, detect

torch.set_num_threads(1)


def collectives(coordinator: Coordinator, info: RankInfo, timeout: float) -> dict[str, Any]:
    # Objects travel as data: a tensor goes as its numpy array.
    gathered = coordinator.gather(
        {"rank": info.rank, "tensor": (torch.arange(3) * info.rank).numpy()}
    )
    word = coordinator.bcast(f"hello from {info.rank}", root=1)
    coordinator.barrier()
    # The gather's and the bcast's keys are gone once every rank passed the barrier.
    assert isinstance(coordinator, StoreCoordinator)
    store = dist.distributed_c10d._get_default_store()
    names = ["1/rank_1", "1/out", "2/root", "2/taken_0", "2/rank_0"]
    leftover = [name for name in names if store.check([f"{coordinator.namespace}/{name}"])]
    return {
        "values": {
            r: {"rank": v["rank"], "tensor": v["tensor"].tolist()}
            for r, v in gathered.values.items()
        },
        "missing": gathered.missing,
        "word": word,
        "leftover": leftover,
        "namespace": coordinator.namespace,
    }


def skip(coordinator: Coordinator, info: RankInfo, timeout: float) -> dict[str, Any]:
    """The last rank skips the gather; the root must return at its timeout naming it."""
    if info.rank == info.world_size - 1:
        return {}  # and never touches the store again
    result = coordinator.gather(f"object of {info.rank}", timeout=timeout)
    return {"values": result.values, "missing": result.missing}


def main() -> None:
    scenario, port, rank, world_size = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    out, timeout = Path(sys.argv[5]), float(sys.argv[6])
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=60),
    )
    info = detect()
    coordinator = create_coordinator(info, timeout=30.0)
    assert isinstance(coordinator, StoreCoordinator), coordinator
    record = globals()[scenario](coordinator, info, timeout)
    record.update(
        rank=info.rank,
        world_size=info.world_size,
        launcher=info.launcher,
        backend=coordinator.backend,
    )
    temporary = out / f".rank_{info.rank}.json.tmp"
    temporary.write_text(json.dumps(record, default=repr))
    os.replace(temporary, out / f"rank_{info.rank}.json")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
