"""The offline merge's job statistics: rank dirs read in worker processes, merged as they come.

Each worker reads one rank directory at a time (:mod:`._rankfiles`) and
sends back that rank's statistics as a data-only
:class:`~rankscribe.lineage.job._partials.Partial`; the main process merges
each one as it arrives (Chan's update) and lets it go. Memory: the merged
per-step statistics of the job, plus each rank's own points of the tags the
straggler and divergence rules need (timings, fingerprints) — never every
rank's every series at once. ``docs/job-view.md``, "Offline merge".
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait

from rankscribe.lineage.job._partials import Partial
from rankscribe.lineage.job._statistics import JobStatistics
from rankscribe.lineage.merge._rankfiles import rank_dir_scalars

__all__ = ["DEFAULT_WORKERS", "job_statistics_of_dirs"]

#: Worker processes at most (fewer with fewer CPUs or ranks).
DEFAULT_WORKERS = 8
#: Fewer rank dirs than this are read in this process: starting workers would cost more.
_IN_PROCESS_BELOW = 4


def rank_partial(rank: int, directory: str) -> bytes:
    """One rank's statistics, encoded (what a worker sends back)."""
    return Partial.of_rank(rank, rank_dir_scalars(directory)).to_bytes()


def _executor(workers: int) -> Executor:
    # fork is the cheapest start, but forking a process with threads can copy a held lock.
    method = "fork" if threading.active_count() == 1 and os.name == "posix" else "spawn"
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method))


def job_statistics_of_dirs(
    rank_dirs: Mapping[int, str], *, workers: int | None = None
) -> JobStatistics:
    """The :class:`JobStatistics` of every scalar in ``rank -> rank_dir`` (see the module)."""
    count = min(workers or min(DEFAULT_WORKERS, os.cpu_count() or 1), len(rank_dirs))
    merged = Partial()
    if count <= 1 or len(rank_dirs) < _IN_PROCESS_BELOW:
        for rank, directory in sorted(rank_dirs.items()):
            merged.merge(Partial.of_rank(rank, rank_dir_scalars(directory)))
    else:
        waiting = sorted(rank_dirs.items(), reverse=True)
        running: set[Future[bytes]] = set()
        with _executor(count) as pool:
            while waiting or running:
                # A few ranks in flight per worker: finished results never pile up here.
                while waiting and len(running) < 2 * count:
                    rank, directory = waiting.pop()
                    running.add(pool.submit(rank_partial, rank, os.fspath(directory)))
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    merged.merge(Partial.from_bytes(future.result()))
                del done
    return merged.job_statistics()
