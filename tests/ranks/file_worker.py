"""One rank of a file-backend job, started by test_rendezvous.py as a plain process.

    RANK=r WORLD_SIZE=n python file_worker.py <scenario> <folder> <out_dir> [timeout] [how]

The launcher variables are torchrun's, so detect() and create_coordinator()
pick the file backend exactly as they would under torchrun. ``how`` is
``rendezvous`` (the default: <folder> is the rendezvous_dir) or ``job`` (<folder>
is the job's directory, passed as job_dir, as the collector does). Each rank writes
what it observed to <out_dir>/rank_<r>.json.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from rankscribe.ranks import Coordinator, RankInfo, claim_job_dir, create_coordinator, detect
from rankscribe.ranks.errors import BarrierTimeoutError, CollectiveMismatchError


def collectives(coordinator: Coordinator, info: RankInfo, timeout: float) -> dict[str, Any]:
    result = coordinator.gather({"rank": info.rank, "steps": list(range(info.rank))})
    word = coordinator.bcast(f"hello from {info.rank}", root=1)
    coordinator.barrier()
    last = coordinator.gather(info.rank * 10, root=info.world_size - 1)
    return {
        "values": result.values,
        "missing": result.missing,
        "is_root": result.is_root,
        "word": word,
        "last_values": last.values,
    }


def missing(coordinator: Coordinator, info: RankInfo, timeout: float) -> dict[str, Any]:
    # The barrier comes first: the ranks start it together, so each of them sees the
    # others' markers and only the absent rank is missing.
    try:
        coordinator.barrier(timeout=timeout)
        barrier: dict[str, Any] = {"raised": False}
    except BarrierTimeoutError as error:
        barrier = {"raised": True, "missing": error.missing, "message": str(error)}
    result = coordinator.gather(f"object of {info.rank}", timeout=timeout)
    return {
        "values": result.values,
        "missing": result.missing,
        "barrier": barrier,
    }


def late(coordinator: Coordinator, info: RankInfo, timeout: float) -> dict[str, Any]:
    if info.rank == info.world_size - 1:
        time.sleep(timeout + 1.0)
    first = coordinator.gather(f"first from {info.rank}", timeout=timeout)
    second = coordinator.gather(f"second from {info.rank}")
    return {"first": first.values, "first_missing": first.missing, "second": second.values}


def mismatch(coordinator: Coordinator, info: RankInfo, timeout: float) -> dict[str, Any]:
    try:
        if info.rank == 1:
            coordinator.bcast("wrong collective", timeout=timeout)
        else:
            coordinator.gather(info.rank, timeout=timeout)
    except CollectiveMismatchError as error:
        return {"mismatch": str(error)}
    except Exception as error:  # reported to the test
        return {"other": f"{type(error).__name__}: {error}"}
    return {"mismatch": None}


def claim(coordinator: Coordinator, info: RankInfo, timeout: float) -> dict[str, Any]:
    """Claim the job directory (the folder's parent), then gather each rank's job tag."""
    summary_dir = Path(sys.argv[2])
    job = claim_job_dir(summary_dir, coordinator=coordinator, timeout=timeout)
    result = coordinator.gather(
        {"job": os.environ["JOB_TAG"], "claimed": str(job.directory)}, timeout=timeout
    )
    return {
        "directory": str(job.directory),
        "job_id": job.job_id,
        "values": result.values,
        "missing": result.missing,
        "job": os.environ["JOB_TAG"],
    }


def main() -> None:
    scenario, rendezvous, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 30.0
    how = sys.argv[5] if len(sys.argv) > 5 else "rendezvous"
    info = detect()
    if how == "job":
        coordinator = create_coordinator(info, job_dir=rendezvous, timeout=30.0)
    else:
        coordinator = create_coordinator(info, rendezvous_dir=rendezvous, timeout=30.0)
    record = globals()[scenario](coordinator, info, timeout)
    record.update(
        rank=info.rank,
        launcher=info.launcher,
        backend=coordinator.backend,
        folder=str(getattr(coordinator, "directory", "")),
    )
    temporary = out / f".rank_{info.rank}.json.tmp"
    temporary.write_text(json.dumps(record, default=repr))
    os.replace(temporary, out / f"rank_{info.rank}.json")


if __name__ == "__main__":
    main()
