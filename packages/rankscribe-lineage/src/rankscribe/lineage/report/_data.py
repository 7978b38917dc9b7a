"""What the report shows, read from a base dir through the lineage and writer APIs.

- The runs: the base dir, its direct subdirectories and the deeper runs
  ``rankscribe-lineage query`` finds (docs/lineage-queries.md) that hold a
  lineage, summary files or ``rank_<n>`` directories. A directory with
  ``rank_<n>`` subdirectories is a job; its ``rank_<n>`` directories are its
  ranks, not runs of their own.
- Each run's lineage fields: :func:`rankscribe.lineage.filter_runs`.
- A job's curves: each rank's scalars (:func:`rankscribe.jobview.rank_dir_arrays`:
  NumPy columns from ``rankscribe.writer.reader.scalar_arrays``),
  reduced across ranks with :class:`rankscribe.jobview.JobStatistics`
  (the statistics the job view writes into the job's own summary file), and
  its verdicts: the ``job/...`` keys of its merged lineage's ``user_defined``.
- A single-process run's curves: its scalars, read as a rank's.

Reading the event files is most of the work, so the files are read in worker
processes, one task per rank
directory and one per batch of single runs, and each curve is thinned for
drawing (:mod:`rankscribe.lineage.report._downsample`) before it travels back.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview import JobStatistics, rank_dir_arrays
from rankscribe.jobview.parts import LOSS_TAGS, STEP_TIME_TAG, job_bands
from rankscribe.lineage import filter_runs
from rankscribe.lineage.errors import LineageError, LineageFileNotFoundError
from rankscribe.lineage.record._discovery import find_runs
from rankscribe.lineage.report._downsample import downsample
from rankscribe.ranks.files import parse_rank_dir_name
from rankscribe.writer import WriterError, reader

if TYPE_CHECKING:
    import numpy.typing as npt

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_TAGS",
    "DrawnCurve",
    "JobData",
    "ReportData",
    "RunInfo",
    "collect_runs",
    "default_workers",
    "drawn_tags",
    "lead_tag",
    "read_report_data",
    "tag_order",
]

#: Single runs read per worker task: small runs cost more in messages than in reading.
_RUNS_PER_TASK = 32
#: Points of all the traces of one chart of single runs together (one trace per run).
_SINGLE_RUNS_POINT_BUDGET = 200_000
_MIN_POINTS = 64
#: Scalar tags drawn per job, and for the single-process runs together (in
#: :func:`tag_order`; a job's step time besides). Every chart is a plotly figure the
#: browser builds on load: past a few dozen the page grows and slows with the tag count,
#: so the rest are named in a note instead (docs/report.md, "Many tags").
MAX_TAGS = 50


@dataclass
class DrawnCurve:
    """Points to draw: steps ascending, and the value at each."""

    steps: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]
    #: How many points the curve had before it was thinned for drawing.
    recorded: int = 0


@dataclass
class RunInfo:
    """One run (or job) under the base dir."""

    name: str
    path: str
    #: ``model_lineage`` as ``filter_runs`` returns it, or None (no lineage).
    lineage: dict[str, Any] | None
    #: ``rank -> rank_<n> dir`` for a job; empty for a single-process run.
    rank_dirs: dict[int, str] = field(default_factory=dict)
    #: The directory as the page names it: under the base dir as the user gave it.
    shown_path: str = ""

    @property
    def is_job(self) -> bool:
        return bool(self.rank_dirs)

    @property
    def verdicts(self) -> dict[str, Any]:
        """The job view's verdicts (the ``job/...`` keys of the merged lineage)."""
        if self.lineage is None:
            return {}
        user_defined = self.lineage.get("user_defined") or {}
        return {key: value for key, value in user_defined.items() if key.startswith("job/")}


@dataclass
class JobData:
    """A job's curves: per tag, the cross-rank band and each rank's own curve."""

    run: RunInfo
    #: ``tag -> {"mean" | "min" | "max": curve}`` over the ranks that recorded it.
    bands: dict[str, dict[str, DrawnCurve]]
    #: ``rank -> tag -> curve``.
    ranks: dict[int, dict[str, DrawnCurve]]
    #: The tags some rank recorded that are not drawn (past :data:`MAX_TAGS`), in order.
    tags_left_out: list[str] = field(default_factory=list)


@dataclass
class ReportData:
    #: The base dir as the user gave it (the page's title).
    base: str
    runs: list[RunInfo]
    jobs: list[JobData]
    #: ``run name -> tag -> curve`` of the single-process runs that recorded scalars.
    single_runs: dict[str, dict[str, DrawnCurve]]
    max_points: int
    #: The single runs' tags that are not drawn (past :data:`MAX_TAGS`), in order.
    single_tags_left_out: list[str] = field(default_factory=list)


def _rank_dirs(directory: str) -> dict[int, str]:
    found: dict[int, str] = {}
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                rank = parse_rank_dir_name(entry.name)
                if rank is not None and entry.is_dir(follow_symlinks=False):
                    found[rank] = entry.path
    except OSError as error:
        logger.warning("%s: skipped, it could not be listed (%s)", directory, error)
    return dict(sorted(found.items()))


def _has_summary_files(directory: str) -> bool:
    try:
        return bool(reader.list_summary_files(directory, "summary"))
    except OSError:
        return False


def _lineages(base: str) -> dict[str, dict[str, Any]]:
    try:
        result = filter_runs(base, lineage_type="model")
    except LineageFileNotFoundError:
        return {}
    return {
        os.path.realpath(item["summary_dir"]): item["model_lineage"] for item in result["object"]
    }


def _deeper_runs(root: str, known: set[str]) -> list[str]:
    """The runs the query finds deeper than ``root``'s direct subdirectories, jobs for ranks.

    Lightning's ``save_dir/name/version_<n>`` (docs/lineage-queries.md, "Which
    directories are runs"); the ranks of a job without its merged lineage
    stand for their job.
    """
    found: list[str] = []
    try:
        runs = find_runs(root).runs
    except OSError:
        return found
    for run in sorted(runs, key=lambda item: item.relative_path):
        if run.relative_path.count("/") < 2:
            continue
        directory = run.path
        if parse_rank_dir_name(os.path.basename(directory)) is not None:
            directory = os.path.dirname(directory)
        if directory not in known:
            known.add(directory)
            found.append(directory)
    return found


def collect_runs(base: str | os.PathLike[str]) -> list[RunInfo]:
    """The runs and jobs of ``base`` (itself, its direct subdirectories, the query's deeper runs).

    Symbolic links among the subdirectories are skipped, as the lineage
    query skips them.
    """
    root = os.path.realpath(os.fspath(base))
    lineages = _lineages(root)
    root_ranks = _rank_dirs(root)
    candidates = [root]
    with os.scandir(root) as entries:
        for entry in sorted(entries, key=lambda item: item.name):
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            if root_ranks and parse_rank_dir_name(entry.name) is not None:
                continue  # the base dir is a job: these are its ranks
            candidates.append(entry.path)
    candidates += _deeper_runs(root, set(candidates))
    runs: list[RunInfo] = []
    for directory in candidates:
        rank_dirs = root_ranks if directory == root else _rank_dirs(directory)
        lineage = lineages.get(os.path.realpath(directory))
        if lineage is None and not rank_dirs and not _has_summary_files(directory):
            continue
        given = os.fspath(base)
        if directory == root:
            name, shown = os.path.basename(root), given
        else:
            name = os.path.relpath(directory, root)
            shown = os.path.join(given, name)
        runs.append(RunInfo(name, directory, lineage, rank_dirs, shown))
    return runs


#: RankScribe's own tags (timings, fingerprints, system readings): never the lead curve.
INTERNAL_PREFIX = "rankscribe/"
#: A tag component naming held-out data: its loss is not the training loss.
_HELD_OUT = re.compile(r"(^|[/_.\-])(val|valid|validation|eval|test)([/_.\-]|$)", re.IGNORECASE)


def _is_loss_like(tag: str) -> bool:
    return "loss" in tag.lower() and not tag.startswith(INTERNAL_PREFIX)


def tag_order(tags: Sequence[str]) -> list[str]:
    """The tags in the page's order: the loss first, then the user's tags, then RankScribe's.

    1. the loss the collector records (``loss/auto``), then ``loss``;
    2. the user's other loss-like tags (a name with ``loss`` in it: ``train_loss``,
       ``loss/train``), training ones before those of held-out data (a component
       ``val``, ``valid``, ``validation``, ``eval`` or ``test``), each by name;
    3. the user's other tags by name;
    4. RankScribe's own ``rankscribe/...`` tags by name.

    The first, when it is the user's (1 to 3), is the lead curve (:func:`lead_tag`).
    """
    present = set(tags)
    losses = [tag for tag in LOSS_TAGS if tag in present]
    rest = sorted(present - set(losses))
    loss_like = sorted(
        (tag for tag in rest if _is_loss_like(tag)),
        key=lambda tag: (_HELD_OUT.search(tag) is not None, tag),
    )
    users = [tag for tag in rest if not _is_loss_like(tag) and not tag.startswith(INTERNAL_PREFIX)]
    internal = [tag for tag in rest if tag.startswith(INTERNAL_PREFIX)]
    return losses + loss_like + users + internal


def lead_tag(ordered: Sequence[str]) -> str | None:
    """The chart drawn open, of tags in :func:`tag_order`: the first, unless it is RankScribe's."""
    if ordered and not ordered[0].startswith(INTERNAL_PREFIX):
        return ordered[0]
    return None


def drawn_tags(tags: Sequence[str] | set[str]) -> tuple[list[str], list[str]]:
    """``(drawn, left out)``: the first :data:`MAX_TAGS` of :func:`tag_order`, and the rest.

    The step time is always drawn (the straggler chart). The first tags of a subset
    are among the first of the whole set, so each rank may keep only its own first
    tags and the job still has every rank's curve of each tag it draws.
    """
    ordered = tag_order(list(tags))
    drawn, rest = ordered[:MAX_TAGS], ordered[MAX_TAGS:]
    if STEP_TIME_TAG in rest:
        rest.remove(STEP_TIME_TAG)
        drawn.append(STEP_TIME_TAG)
    return drawn, rest


# ---------------------------------------------------------------- worker tasks


def _thin(steps: npt.NDArray[np.int64], values: npt.NDArray[np.float64], limit: int) -> DrawnCurve:
    drawn_steps, drawn_values = downsample(steps, values, limit)
    return DrawnCurve(drawn_steps, drawn_values, len(steps))


def _read_rank(
    path: str, rank: int, max_points: int
) -> tuple[dict[str, DrawnCurve], JobStatistics, list[str]]:
    """One rank: its curves for drawing, its statistics for the job's band, the tags not kept.

    Only the tags :func:`drawn_tags` keeps are reduced and sent back; the others
    travel as names alone.
    """
    statistics = JobStatistics()
    try:
        columns = rank_dir_arrays(path)
        kept, left_out = drawn_tags([tag for tag, (steps, _) in columns.items() if len(steps)])
        statistics.add_arrays(rank, {tag: columns[tag] for tag in kept})
    except (OSError, LineageError, WriterError) as error:
        logger.warning("%s: skipped, it could not be read (%s)", path, error)
        return {}, JobStatistics(), []
    curves = {
        # A single rank's statistics are its own points, sorted, one per step.
        tag: _thin(tagged.steps, tagged.mean, max_points)
        for tag, tagged in job_bands(statistics).items()
    }
    # The job needs only the bands of the statistics; the rest stays here.
    statistics.step_times.clear()
    statistics.fingerprints.clear()
    return curves, statistics, left_out


def _read_single_runs(
    paths: Sequence[str], max_points: int
) -> list[tuple[dict[str, DrawnCurve], list[str]]]:
    read: list[tuple[dict[str, DrawnCurve], list[str]]] = []
    for path in paths:
        curves, _, left_out = _read_rank(path, 0, max_points)
        read.append((curves, left_out))
    return read


def _run_task(task: tuple[str, Any]) -> Any:
    kind, arguments = task
    if kind == "rank":
        return _read_rank(*arguments)
    return _read_single_runs(*arguments)


def _start_method() -> str | None:
    """fork when it is safe (no other thread), else forkserver, else the platform's default.

    Forked workers start in milliseconds with everything imported; but a fork while
    another thread holds a lock (a caller's live SummaryRecord, say) can deadlock the
    child, so a multi-threaded caller gets workers that start from a clean interpreter.
    """
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else None


def _mapped(tasks: list[tuple[str, Any]], workers: int) -> list[Any]:
    if workers <= 1 or len(tasks) < 2:
        return [_run_task(task) for task in tasks]
    context = multiprocessing.get_context(_start_method())
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=context) as pool:
        return list(pool.map(_run_task, tasks))


def default_workers() -> int:
    """Worker processes for reading: one per CPU, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def _job_bands(statistics: JobStatistics, max_points: int) -> dict[str, dict[str, DrawnCurve]]:
    bands: dict[str, dict[str, DrawnCurve]] = {}
    for tag, tagged in job_bands(statistics).items():
        bands[tag] = {
            "mean": _thin(tagged.steps, tagged.mean, max_points),
            "min": _thin(tagged.steps, tagged.minimum, max_points),
            "max": _thin(tagged.steps, tagged.maximum, max_points),
        }
    return bands


def read_report_data(
    base: str | os.PathLike[str],
    *,
    max_points: int,
    workers: int | None = None,
) -> ReportData:
    """Everything the page draws, for the runs of ``base``."""
    runs = collect_runs(base)
    jobs = [run for run in runs if run.is_job]
    singles = [run for run in runs if not run.is_job]
    share = _SINGLE_RUNS_POINT_BUDGET // max(1, len(singles))
    per_run = min(max_points, max(_MIN_POINTS, share))
    tasks: list[tuple[str, Any]] = [
        ("rank", (path, rank, max_points)) for job in jobs for rank, path in job.rank_dirs.items()
    ]
    batches = [singles[at : at + _RUNS_PER_TASK] for at in range(0, len(singles), _RUNS_PER_TASK)]
    tasks += [("runs", ([run.path for run in batch], per_run)) for batch in batches]
    results = iter(_mapped(tasks, default_workers() if workers is None else workers))
    job_data: list[JobData] = []
    for job in jobs:
        statistics = JobStatistics()
        ranks: dict[int, dict[str, DrawnCurve]] = {}
        every_tag: set[str] = set()
        for rank in job.rank_dirs:
            curves, rank_statistics, rank_left_out = next(results)
            ranks[rank] = curves
            statistics.merge(rank_statistics)
            every_tag.update(curves, rank_left_out)
        drawn, left_out = drawn_tags(every_tag)
        bands = _job_bands(statistics, max_points)
        keep = set(drawn)
        job_data.append(
            JobData(
                job,
                {tag: band for tag, band in bands.items() if tag in keep},
                {
                    rank: {tag: curve for tag, curve in curves.items() if tag in keep}
                    for rank, curves in ranks.items()
                },
                left_out,
            )
        )
    single_runs: dict[str, dict[str, DrawnCurve]] = {}
    single_tags: set[str] = set()
    for batch in batches:
        for run, (curves, run_left_out) in zip(batch, next(results), strict=True):
            single_tags.update(curves, run_left_out)
            if curves:
                single_runs[run.name] = curves
    drawn, single_left_out = drawn_tags(single_tags)
    keep = set(drawn)
    single_runs = {
        name: {tag: curve for tag, curve in curves.items() if tag in keep}
        for name, curves in single_runs.items()
    }
    return ReportData(os.fspath(base), runs, job_data, single_runs, max_points, single_left_out)
