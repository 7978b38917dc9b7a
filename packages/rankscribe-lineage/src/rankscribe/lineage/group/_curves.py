"""Each run's curves, reduced over the runs of its group (docs/groups.md, "Curves").

A single-process run's curves are its scalars (``rank_dir_arrays``: the
writer's columnar reader). A job counts as one run: its curve of a tag is the
mean over its ranks at each step, read from the job view's own summary file
(its ``<tag>/mean`` curves) or, when the job has none yet, computed from its
rank directories with :class:`JobStatistics`. Each run's points then enter
its group's :class:`TagStatistics` (the job view's mergeable statistics, a run
in the place of a rank): runs of different lengths, steps some runs lack and
non-finite values are counted as the job view counts ranks.

Reading is most of the work: runs are read in worker processes (each folds
its runs into one partial per group and tag; the partials merge exactly in
any order), as the offline merge reads ranks.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview import JobStatistics, rank_dir_arrays
from rankscribe.jobview.parts import (
    FINGERPRINT_TAG,
    TagStatistics,
    job_bands,
    job_file_names,
    merge_all,
    sorted_arrays,
)
from rankscribe.jobview.parts import reduced_rows as _reduced_rows
from rankscribe.lineage.errors import LineageError
from rankscribe.ranks.files import parse_rank_dir_name
from rankscribe.writer import WriterError, reader
from rankscribe.writer.files import SUMMARY_SUFFIX

if TYPE_CHECKING:
    import numpy.typing as npt

    Columns = dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]

logger = logging.getLogger(__name__)

__all__ = ["GroupCurves", "default_workers", "group_statistics", "run_curves", "start_method"]

#: ``group index -> tag -> statistics over the group's runs``.
GroupCurves = dict[int, dict[str, TagStatistics]]
#: Partials of one (group, tag) kept before they are combined in one pass.
_PENDING = 32
#: Runs with the same steps reduced together (a block of 64 x 10,000 steps is 5 MB).
_BLOCK_ROWS = 64
#: Below this many runs the reading stays in the calling process.
_PARALLEL_FROM = 8
_MEAN, _COUNT = "/mean", "/ranks"


def _rank_dirs(directory: str) -> dict[int, str]:
    found: dict[int, str] = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            rank = parse_rank_dir_name(entry.name)
            if rank is not None and entry.is_dir(follow_symlinks=False):
                found[rank] = entry.path
    return dict(sorted(found.items()))


def _job_file_means(directory: str) -> Columns:
    """The ``<tag>/mean`` curves of the job view's summary file(s) in ``directory``."""
    columns: Columns = {}
    for name in job_file_names(directory):
        if not name.endswith(SUMMARY_SUFFIX):
            continue
        try:
            curves = reader.scalar_arrays(os.path.join(directory, name), kind="summary")
        except (OSError, WriterError) as error:
            logger.warning("%s: skipped, it could not be read (%s)", name, error)
            continue
        for tag, pair in curves.items():
            base = tag[: -len(_MEAN)]
            if tag.endswith(_MEAN) and base + _COUNT in curves and base != FINGERPRINT_TAG:
                columns[base] = pair
    return columns


def _rank_means(rank_dirs: dict[int, str]) -> Columns:
    """The cross-rank mean of each tag, computed from the rank directories."""
    statistics = JobStatistics()
    for rank, path in rank_dirs.items():
        statistics.add_arrays(rank, rank_dir_arrays(path))
    return {tag: (tagged.steps, tagged.mean) for tag, tagged in job_bands(statistics).items()}


def run_curves(directory: str) -> Columns:
    """The curves of the run in ``directory``: ``tag -> (steps, values)``, sorted unique steps.

    A job (a directory with ``rank_<n>`` directories) gives its cross-rank
    mean of each tag. The parameter fingerprint (an id) is left out.
    """
    rank_dirs = _rank_dirs(directory)
    if rank_dirs:
        columns = _job_file_means(directory) or _rank_means(rank_dirs)
    else:
        columns = rank_dir_arrays(directory)
    return {
        tag: sorted_arrays(*pair)
        for tag, pair in columns.items()
        if tag != FINGERPRINT_TAG and len(pair[0])
    }


class _Block:
    """Runs of one group and tag with the very same steps, their values as rows."""

    def __init__(self, steps: npt.NDArray[np.int64]) -> None:
        self.steps = steps
        self.numbers: list[int] = []
        self.rows: list[npt.NDArray[np.float64]] = []

    def statistics(self) -> TagStatistics:
        """The rows' statistics, as merging each run's own (Chan's update, all rows at once)."""
        order = np.argsort(self.numbers, kind="stable")  # ties of the extremes: the lowest run
        values = np.stack([self.rows[at] for at in order])
        numbers = np.asarray(self.numbers, dtype=np.int64)[order]
        finite = np.isfinite(values)
        if bool(finite.all()):
            return _finite_block(self.steps, numbers, values)
        numbers = numbers[:, None]
        shape = values.shape

        def single(name: str, _absent: float) -> npt.NDArray[Any]:
            """Field ``name`` of each row's own statistics (TagStatistics.of_rank's)."""
            if name == "count":
                return np.ones(shape, dtype=np.int64)
            if name == "finite_mean":
                return np.where(finite, values, 0.0)
            if name == "m2":
                return np.zeros(shape)
            if name in ("minimum", "maximum"):
                return values
            if name in ("min_rank", "max_rank"):
                return np.broadcast_to(numbers, shape)
            infinity = {"posinf": np.inf, "neginf": -np.inf}.get(name)
            held: npt.NDArray[np.bool_] = (
                np.isnan(values) if infinity is None else np.equal(values, infinity)
            )
            return held.astype(np.int64)

        return TagStatistics(steps=self.steps, **_reduced_rows(single))


def _finite_block(
    steps: npt.NDArray[np.int64], numbers: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
) -> TagStatistics:
    """A block of finite rows in a few passes: the moments and extremes numpy computes directly.

    The same statistics as combining each row's own (every point finite: no
    NaN or infinity to count); ``numbers`` ascending, so ``argmin``'s first
    row is the lowest run of a tie.
    """
    size = values.shape[1]
    mean = values.mean(axis=0)
    deviation = values - mean
    m2 = np.einsum("ij,ij->j", deviation, deviation)
    low, high = values.argmin(axis=0), values.argmax(axis=0)
    column = np.arange(size)
    zeros = np.zeros(size, dtype=np.int64)
    return TagStatistics(
        steps=steps,
        count=np.full(size, len(numbers), dtype=np.int64),
        finite_mean=mean,
        m2=m2,
        minimum=values[low, column],
        min_rank=numbers[low],
        maximum=values[high, column],
        max_rank=numbers[high],
        nan=zeros,
        posinf=zeros.copy(),
        neginf=zeros.copy(),
    )


class _Folder:
    """Partial statistics per (group, tag), combined in batches as they come.

    A run whose steps are those of the block of its group and tag (the usual
    case: runs of one configuration record the same steps) joins the block as
    a row; blocks and the other runs become :class:`TagStatistics` partials,
    combined :data:`_PENDING` at a time.
    """

    def __init__(self) -> None:
        self.pending: dict[tuple[int, str], list[TagStatistics]] = {}
        self.blocks: dict[tuple[int, str], _Block] = {}

    def add(self, key: tuple[int, str], part: TagStatistics) -> None:
        parts = self.pending.setdefault(key, [])
        parts.append(part)
        if len(parts) >= _PENDING:
            self.pending[key] = [merge_all(parts)]

    def add_run(
        self,
        key: tuple[int, str],
        number: int,
        steps: npt.NDArray[np.int64],
        values: npt.NDArray[np.float64],
    ) -> None:
        block = self.blocks.get(key)
        if block is None:
            block = self.blocks[key] = _Block(steps)
        elif not np.array_equal(block.steps, steps):
            self.add(key, TagStatistics.of_rank(number, steps, values))
            return
        block.numbers.append(number)
        block.rows.append(values)
        if len(block.rows) >= _BLOCK_ROWS:
            self.add(key, block.statistics())
            del self.blocks[key]

    def result(self) -> GroupCurves:
        for key, block in self.blocks.items():
            self.add(key, block.statistics())
        self.blocks.clear()
        curves: GroupCurves = {}
        for (group, tag), parts in self.pending.items():
            curves.setdefault(group, {})[tag] = merge_all(parts)
        return curves


def _read_runs(task: Sequence[tuple[int, int, str]]) -> GroupCurves:
    """``(group, run number, directory)`` of several runs, folded into partials per group."""
    folder = _Folder()
    for group, number, directory in task:
        try:
            columns = run_curves(directory)
        except (OSError, LineageError, WriterError) as error:
            logger.warning("%s: skipped, it could not be read (%s)", directory, error)
            continue
        for tag, (steps, values) in columns.items():
            folder.add_run((group, tag), number, steps, values)
    return folder.result()


def start_method() -> str | None:
    """fork when no other thread runs (a fork then cannot inherit a held lock), else forkserver."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else None


def default_workers() -> int:
    """Worker processes for reading: one per CPU, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def group_statistics(
    members: Sequence[Sequence[tuple[int, str]]], workers: int | None = None
) -> GroupCurves:
    """Per group (``members[g]``: its runs' ``(run number, directory)``), each tag's statistics.

    The run number stands where the job view puts a rank (the min/max
    holders). Runs are read in ``workers`` processes (default
    :func:`default_workers`), two tasks per worker.
    """
    runs = [(group, number, path) for group, held in enumerate(members) for number, path in held]
    count = default_workers() if workers is None else workers
    if count <= 1 or len(runs) < _PARALLEL_FROM:
        return _read_runs(runs)
    tasks = [runs[start :: 2 * count] for start in range(min(2 * count, len(runs)))]
    folder = _Folder()
    context = multiprocessing.get_context(start_method())
    with ProcessPoolExecutor(max_workers=min(count, len(tasks)), mp_context=context) as pool:
        for partial in pool.map(_read_runs, tasks):
            for group, tags in partial.items():
                for tag, statistics in tags.items():
                    folder.add((group, tag), statistics)
    return folder.result()
