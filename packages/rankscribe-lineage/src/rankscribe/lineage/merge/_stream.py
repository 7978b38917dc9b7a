"""The offline merge's job statistics: rank dirs read in worker processes, merged as they come.

Each worker reads a batch of rank directories
(:func:`rankscribe.jobview.rank_dir_arrays`: NumPy columns from
``rankscribe.writer.reader.scalar_arrays``), merges their statistics into one
data-only :class:`~rankscribe.jobview.job._partials.Partial` and sends it
back; the main process merges each one as it arrives (Chan's update) and lets
it go. Memory: the merged per-step statistics of the job, plus each rank's
own points of the tags the straggler and divergence rules need (timings,
fingerprints) — never every rank's every series at once.
``docs/job-view.md``, "Offline merge".
"""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, ProcessPoolExecutor, wait

from rankscribe.jobview import JobStatistics, rank_dir_arrays
from rankscribe.jobview.parts import Partial, PartialFormatError
from rankscribe.lineage.errors import LineageMergeError

__all__ = ["DEFAULT_WORKERS", "job_statistics_of_dirs"]

#: Worker processes at most (fewer with fewer CPUs or ranks).
DEFAULT_WORKERS = 8
#: Fewer rank dirs than this are read in this process: starting workers would cost more.
_IN_PROCESS_BELOW = 4
#: Tasks per worker: each a batch of ranks, so that a slow batch holds up only a few.
_TASKS_PER_WORKER = 2


def ranks_partial(batch: Sequence[tuple[int, str]]) -> bytes:
    """The statistics of a batch of ranks, merged and encoded (what a worker sends back).

    Merged in the worker: a partial's size is the job's steps x tags whatever
    the number of ranks in it, and sending one per rank cost more than reading
    the rank (9 MB per rank of 10,000 steps x 10 tags; measured).
    """
    return _merged(batch).to_bytes()


def _merged(batch: Sequence[tuple[int, str]]) -> Partial:
    merged = Partial()
    for rank, directory in batch:
        merged.merge(Partial.of_rank(rank, rank_dir_arrays(directory)))
    return merged


def _received(data: bytes, batch: Sequence[tuple[int, str]]) -> Partial:
    """A worker's partial; a damaged one is refused naming the worker's ranks."""
    try:
        return Partial.from_bytes(data)
    except PartialFormatError as error:
        ranks = f"{batch[0][0]}" if len(batch) == 1 else f"{batch[0][0]}-{batch[-1][0]}"
        raise LineageMergeError(
            f"the merge worker of ranks {ranks} sent a damaged job-view partial: {error}"
        ) from error


def _executor(workers: int) -> Executor:
    # fork is the cheapest start, but forking a process with threads can copy a held lock.
    method = "fork" if threading.active_count() == 1 and os.name == "posix" else "spawn"
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method))


def job_statistics_of_dirs(
    rank_dirs: Mapping[int, str], *, workers: int | None = None
) -> JobStatistics:
    """The :class:`JobStatistics` of every scalar in ``rank -> rank_dir`` (see the module)."""
    count = min(workers or min(DEFAULT_WORKERS, os.cpu_count() or 1), len(rank_dirs))
    ordered = [(rank, os.fspath(directory)) for rank, directory in sorted(rank_dirs.items())]
    if count <= 1 or len(ordered) < _IN_PROCESS_BELOW:
        return _merged(ordered).job_statistics()
    size = math.ceil(len(ordered) / (count * _TASKS_PER_WORKER))
    batches = [ordered[at : at + size] for at in range(0, len(ordered), size)]
    merged = Partial()
    with _executor(count) as pool:
        # Every batch is in flight at once (a few per worker), and each result is
        # merged as it arrives and let go: results never pile up here.
        running = {pool.submit(ranks_partial, batch): batch for batch in batches}
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                merged.merge(_received(future.result(), running.pop(future)))
            del done
    return merged.job_statistics()
