"""One rank's side of an MPI scenario, run as ``mpiexec -n N python -m mpi4py mpi_scenarios.py``.

    python -m mpi4py mpi_scenarios.py <scenario> <out_dir>

Each rank writes what it observed to ``<out_dir>/rank_<r>.json``; the pytest
side (test_mpi.py) asserts on those files and on the exit code.

Assertions are collective: ``check`` raises AssertionError, and ``python -m
mpi4py`` turns an uncaught exception on any rank into ``MPI_Abort`` on
``COMM_WORLD``, which ends every rank at once, so a failing rank never leaves
the others waiting. Every wait in the scenarios is bounded by a timeout, and
the pytest side kills the whole process group if the job outlives its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from rankscribe.ranks import (
    MpiCoordinator,
    RankInfo,
    create_coordinator,
    detect,
    rank_dir,
    split_evenly,
)
from rankscribe.ranks.errors import BarrierTimeoutError

#: The most elements one MPI message may count: MPI counts are C ints (INT_MAX), the
#: limit every chunk must stay under whatever this project's own constant says.
MPI_COUNT_LIMIT = 2**31 - 1
#: The timeout of the collective that a rank misses, in seconds.
MISSED_TIMEOUT = 3.0
#: A generous timeout for collectives that every rank reaches.
AMPLE_TIMEOUT = 30.0
#: The scaled-down chunk size of the large-object scenario (1 GiB / 1024).
SCALED_CHUNK = 1 << 20


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def last_rank(info: RankInfo) -> int:
    return info.world_size - 1


def scenario_detect(info: RankInfo, out: Path) -> dict[str, Any]:
    """detect(), rank_dir and split_evenly agree across the real ranks."""
    directory = rank_dir(out / "summary", info)
    steps = split_evenly(range(0, 100, 3), info.world_size, info.rank)
    # job_dir is what the collector passes: an MPI launcher still wins.
    coordinator = create_coordinator(info, timeout=AMPLE_TIMEOUT, job_dir=out / "summary")
    check(coordinator.backend == "mpi", f"auto chose {coordinator.backend}")
    # Objects travel as data: the RankInfo goes as the dict of its fields.
    result = coordinator.gather((dataclasses.asdict(info), steps))
    if result.is_root:
        check(result.complete, f"missing {result.missing}")
        infos = [value[0] for value in result.in_rank_order()]
        check([i["rank"] for i in infos] == list(range(info.world_size)), f"ranks {infos}")
        check({i["world_size"] for i in infos} == {info.world_size}, f"sizes {infos}")
        joined = [step for value in result.in_rank_order() for step in value[1]]
        check(joined == list(range(0, 100, 3)), f"steps {joined}")
    coordinator.barrier(timeout=AMPLE_TIMEOUT)
    coordinator.close()
    return {
        "info": dataclasses.asdict(info),
        "rank_dir": str(directory),
        "rank_dir_mode": oct(directory.stat().st_mode & 0o777),
        "steps": steps,
    }


def scenario_gather(info: RankInfo, out: Path) -> dict[str, Any]:
    """gather, bcast and barrier of Python objects with every rank present."""
    coordinator = create_coordinator(info, timeout=AMPLE_TIMEOUT)
    mine = {
        "rank": info.rank,
        "loss": 1.0 / (info.rank + 1),
        "tags": {f"t{info.rank}"},
        "shape": (info.rank, 2),
        "text": "é" * info.rank,
    }
    result = coordinator.gather(mine)
    config = coordinator.bcast(
        {"lr": 0.1, "seen": sorted(result.values)} if result.is_root else None
    )
    coordinator.barrier()
    on_root = coordinator.gather(info.rank * 10, root=info.world_size - 1)
    coordinator.close()
    return {
        "is_root": result.is_root,
        "values": {str(k): {**v, "tags": sorted(v["tags"])} for k, v in result.values.items()},
        "missing": list(result.missing),
        "config": config,
        "last_root_values": {str(k): v for k, v in on_root.values.items()},
    }


def scenario_gather_missing(info: RankInfo, out: Path) -> dict[str, Any]:
    """The last rank never reaches the gather; rank 0 returns at its timeout."""
    coordinator = create_coordinator(info, timeout=AMPLE_TIMEOUT)
    coordinator.barrier()
    if info.rank == last_rank(info):
        time.sleep(MISSED_TIMEOUT + 1.0)  # stuck elsewhere; then leaves without gathering
        return {"skipped": True}
    started = time.monotonic()
    result = coordinator.gather({"rank": info.rank}, timeout=MISSED_TIMEOUT)
    elapsed = time.monotonic() - started
    return {
        "is_root": result.is_root,
        "elapsed": elapsed,
        "timeout": MISSED_TIMEOUT,
        "values": {str(k): v for k, v in result.values.items()},
        "missing": list(result.missing),
    }


def scenario_barrier_skip(info: RankInfo, out: Path) -> dict[str, Any]:
    """The last rank skips a barrier: every other rank raises, naming it."""
    coordinator = create_coordinator(info, timeout=AMPLE_TIMEOUT)
    coordinator.barrier()
    if info.rank == last_rank(info):
        time.sleep(MISSED_TIMEOUT + 2.0)
        return {"skipped": True}
    started = time.monotonic()
    try:
        coordinator.barrier(timeout=MISSED_TIMEOUT)
    except BarrierTimeoutError as error:
        return {
            "raised": type(error).__name__,
            "missing": list(error.missing),
            "message": str(error),
            "elapsed": time.monotonic() - started,
            "is_timeout_error": isinstance(error, TimeoutError),
        }
    return {"raised": None}


def scenario_late_rank(info: RankInfo, out: Path) -> dict[str, Any]:
    """The last rank reaches a gather after the root gave up; the next collectives still work."""
    coordinator = create_coordinator(info, timeout=AMPLE_TIMEOUT)
    coordinator.barrier()
    if info.rank == last_rank(info):
        time.sleep(MISSED_TIMEOUT + 1.0)
    first = coordinator.gather(f"first from {info.rank}", timeout=MISSED_TIMEOUT)
    word = coordinator.bcast("second" if info.rank == 0 else None)
    second = coordinator.gather(f"{word} from {info.rank}")
    coordinator.barrier()
    coordinator.close()
    return {
        "first": {
            "values": {str(k): v for k, v in first.values.items()},
            "missing": list(first.missing),
        },
        "word": word,
        "second": {
            "values": {str(k): v for k, v in second.values.items()},
            "missing": list(second.missing),
        },
    }


def scenario_early_exit(info: RankInfo, out: Path) -> dict[str, Any]:
    """The last rank finalises MPI and exits before the gather; the others carry on."""
    coordinator = create_coordinator(info, timeout=AMPLE_TIMEOUT)
    coordinator.barrier()
    if info.rank == last_rank(info):
        from mpi4py import MPI

        # Finalize returns once every rank has finalised (MPICH). The process then
        # ends normally: os._exit right after it makes Hydra kill the job now and then.
        MPI.Finalize()
        return {"exited_early": True}
    started = time.monotonic()
    result = coordinator.gather(info.rank, timeout=MISSED_TIMEOUT)
    return {
        "is_root": result.is_root,
        "elapsed": time.monotonic() - started,
        "values": {str(k): v for k, v in result.values.items()},
        "missing": list(result.missing),
    }


def scenario_crash(info: RankInfo, out: Path) -> dict[str, Any]:
    """The last rank dies before the gather; mpiexec ends the job instead of a hang."""
    coordinator = create_coordinator(info, timeout=AMPLE_TIMEOUT)
    coordinator.barrier()
    if info.rank == last_rank(info):
        write(out, info, {"crashed": True})
        os._exit(3)
    coordinator.gather(info.rank, timeout=AMPLE_TIMEOUT)
    return {"survived": True}


def scenario_fail(info: RankInfo, out: Path) -> dict[str, Any]:
    """Rank 1 fails an assertion while rank 0 waits: the whole job ends at once."""
    coordinator = create_coordinator(info, timeout=AMPLE_TIMEOUT)
    if info.rank == 1:
        # The launcher may cut the traceback short as it ends the job: the file says it.
        write(out, info, {"failing": "rank 1 fails on purpose"})
        check(False, "rank 1 fails on purpose")
    coordinator.gather(info.rank, timeout=AMPLE_TIMEOUT)
    return {"survived": True}


class CountingComm:
    """Forwards to a real communicator, recording the byte count of every send and receive."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.counts: list[int] = []

    def Isend(self, message: list[Any], **kwargs: Any) -> Any:
        self.counts.append(memoryview(message[0]).nbytes)
        return self.comm.Isend(message, **kwargs)

    def Irecv(self, message: list[Any], **kwargs: Any) -> Any:
        self.counts.append(memoryview(message[0]).nbytes)
        return self.comm.Irecv(message, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.comm, name)


def scenario_large(info: RankInfo, out: Path) -> dict[str, Any]:
    """A 3 GiB-equivalent object: 3 chunk-sizes of payload through the real MPI transport.

    The chunk size is scaled down 1024 times (1 MiB for 1 GiB) and so is the
    payload (3 MiB for 3 GiB); the messages go through real MPI. Every MPI
    count recorded must stay within one chunk, as it would stay within 1 GiB
    (under MPI's 2 GiB int limit) for a real 3 GiB object.
    """
    coordinator = MpiCoordinator(info, timeout=AMPLE_TIMEOUT, chunk_size=SCALED_CHUNK)
    spy = CountingComm(coordinator._comm)
    coordinator._comm = spy
    payload = bytes([info.rank + 1]) * (3 * SCALED_CHUNK) + info.rank.to_bytes(2, "little")
    result = coordinator.gather(payload)
    echoed = coordinator.bcast(payload if info.rank == 0 else None)
    check(echoed == bytes([1]) * (3 * SCALED_CHUNK) + b"\0\0", "bcast payload differs")
    if result.is_root:
        for rank, value in result.values.items():
            expected = bytes([rank + 1]) * (3 * SCALED_CHUNK) + rank.to_bytes(2, "little")
            check(value == expected, f"payload of rank {rank} differs")
    coordinator.close()
    return {
        "is_root": result.is_root,
        "sizes": {str(k): len(v) for k, v in result.values.items()},
        "max_count": max(spy.counts),
        "full_chunks": sum(1 for count in spy.counts if count == SCALED_CHUNK),
        "count_limit": MPI_COUNT_LIMIT,
    }


def write(out: Path, info: RankInfo, record: dict[str, Any]) -> None:
    """Write this rank's record atomically: the launcher may kill a rank mid-write."""
    record = {"rank": info.rank, "world_size": info.world_size, **record}
    temporary = out / f".rank_{info.rank}.json.tmp"
    temporary.write_text(json.dumps(record, default=repr))
    os.replace(temporary, out / f"rank_{info.rank}.json")


def main() -> None:
    scenario, out = sys.argv[1], Path(sys.argv[2])
    info = detect()
    record = globals()[f"scenario_{scenario}"](info, out)
    write(out, info, record)
    print(f"rank {info.rank} of {info.world_size}: {scenario} done", flush=True)


if __name__ == "__main__":
    main()
