"""The job view: one record per distributed job, built from its ranks' scalars (public).

Every rank of a job writes its own summary files into ``<job_dir>/rank_<r>/``.
This module turns the ranks' scalar series into the job's own files in
``<job_dir>`` (cross-rank curves, MindSpore and TensorBoard formats), live while the
job trains (:class:`LiveJobView`, fed up a tree of ranks) or whole at the end
(:func:`write_job_view`), and into verdicts — stragglers judged on every timing
(:data:`TIMING_TAGS`, sections), divergence from the first step, non-finite losses,
where each rank stopped — that become ``user_defined`` keys of the merged lineage,
queryable like any custom lineage (``--where "user_defined/job/straggler_rank >= 0"``).

``docs/job-view.md`` is the description this module follows: the files and their
tags ("Files", "Job tags"), what each timing measures ("Timings"), every verdict key
and its rule ("Verdicts"), the live view and the tree ("Live", "Tree"), the offline
merge ("Offline merge", "Missing ranks"). :mod:`rankscribe.jobview` exports the
public names.
"""

from __future__ import annotations

import logging
import math
import os
import time as _time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview._checks import (
    check_bool,
    check_host,
    check_int,
    check_optional_mapping,
    check_path,
    check_ranks,
    is_int,
)
from rankscribe.jobview._session import job_session
from rankscribe.jobview.errors import (
    JobViewDirNotExistError,
    JobViewParamTypeError,
    JobViewParamValueError,
)
from rankscribe.jobview.job._files import (
    Curve,
    step_table,
    summary_file_records,
    tag_curves,
    tensorboard_file_records,
    write_job_files,
)
from rankscribe.jobview.job._files import now as _now
from rankscribe.jobview.job._live import (
    LIVE_SPANS_KEY,
    read_live_state,
    state_ended,
    state_onsets,
    state_spans,
)
from rankscribe.jobview.job._samples import job_bands
from rankscribe.jobview.job._statistics import (
    FINGERPRINT_TAG,
    STEP_TIME_TAG,
    JobStatistics,
)
from rankscribe.jobview.job.verdicts._machine import evidence_keys
from rankscribe.jobview.job.verdicts._sentences import live_verdict_lines
from rankscribe.jobview.job.verdicts._straggler_verdicts import (
    VerdictSettings,
)
from rankscribe.jobview.job.verdicts._stragglers import StragglerEvidence
from rankscribe.jobview.job.verdicts._verdicts import StepTimes
from rankscribe.jobview.job.verdicts._verdicts import dense_series as _dense_series
from rankscribe.jobview.job.verdicts._verdicts import job_verdicts as _job_verdicts
from rankscribe.writer import WriterError, reader

if TYPE_CHECKING:
    import numpy.typing as npt

logger = logging.getLogger(__name__)

__all__ = [
    "JobView",
    "RankSeries",
    "holds_tensorboard_files",
    "live_lines",
    "rank_dir_arrays",
    "series_from_dir",
    "state_lines",
    "write_job_view",
]

SLOWEST_RANK_TAG = f"{STEP_TIME_TAG}/slowest_rank"
SKEW_TAG = f"{STEP_TIME_TAG}/skew"


@dataclass
class RankSeries:
    """One rank's scalars: ``tag -> [(step, value)]`` in step order.

    Small and picklable on purpose (it travels through the coordinator):
    scalars only, never tensors, histograms or images.
    """

    rank: int
    scalars: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    @property
    def last_step(self) -> int | None:
        """The largest step this rank recorded any scalar at, or ``None``."""
        steps = [points[-1][0] for points in self.scalars.values() if points]
        return max(steps) if steps else None


def series_from_dir(rank_dir: str | os.PathLike[str], rank: int) -> RankSeries:
    """Read a rank's scalars from its event files (:func:`rank_dir_arrays`) as lists.

    Each tag's points are sorted by step (a step recorded twice keeps both,
    in file order; the statistics use the last). Lenient, as
    :func:`rank_dir_arrays` is.

    Raises:
        JobViewDirNotExistError: ``rank_dir`` is not a directory.
        JobViewParamTypeError, JobViewParamValueError: ``rank_dir`` is not a
            path, or ``rank`` is not an int >= 0.
    """
    check_path("rank_dir", rank_dir)
    check_int("rank", rank, minimum=0)
    columns = rank_dir_arrays(rank_dir)
    return RankSeries(
        rank,
        {
            tag: list(zip(steps.tolist(), values.tolist(), strict=True))
            for tag, (steps, values) in columns.items()
        },
    )


def rank_dir_arrays(
    rank_dir: str | os.PathLike[str],
) -> dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]:
    """A rank's scalars, ``tag -> (steps, values)``, read by ``reader.scalar_arrays``.

    The rank's summary (``_MS``) files, or its TensorBoard files when it has
    no summary file (the rule of ``scalar_arrays`` for a directory), file by
    file in ``list_summary_files`` order; each tag's points sorted by step,
    stably (a step recorded twice keeps both, in file order: the statistics
    use the last). Tags keep their first-seen order. Lenient: a torn or
    corrupt file contributes the records that can be read (damage is logged
    as a warning naming the file), and a file that cannot be read is skipped
    with a warning (none of its points count).

    Raises:
        JobViewDirNotExistError: ``rank_dir`` is not a directory.
        JobViewParamTypeError: ``rank_dir`` is not a path.
    """
    directory = check_path("rank_dir", rank_dir)
    if not os.path.isdir(directory):
        raise JobViewDirNotExistError(f"rank_dir {directory!r} is not a directory")
    kind = "summary"
    paths = reader.list_summary_files(directory, kind)
    if not paths:
        kind = "tensorboard"
        paths = reader.list_summary_files(directory, kind)
    pieces: dict[str, list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]] = {}
    for path in paths:
        try:
            # File by file: a file that fails part-way counts for nothing, as it always has.
            columns = reader.scalar_arrays(path, kind=kind)
        except (OSError, WriterError) as error:
            logger.warning("%s: skipped, it could not be read (%s)", path, error)
            continue
        for tag, pair in columns.items():
            pieces.setdefault(tag, []).append(pair)
    return {tag: _by_step(pairs) for tag, pairs in pieces.items()}


def _by_step(
    pairs: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """One tag's columns of several files joined, sorted by step (stably: file order kept)."""
    if len(pairs) == 1:
        steps, values = pairs[0]
    else:
        steps = np.concatenate([pair[0] for pair in pairs])
        values = np.concatenate([pair[1] for pair in pairs])
    if len(steps) > 1 and not bool(np.all(steps[1:] >= steps[:-1])):
        order = np.argsort(steps, kind="stable")
        steps, values = steps[order], values[order]
    return steps, values


def holds_tensorboard_files(rank_dirs: Mapping[int, str | os.PathLike[str]]) -> bool:
    """Whether any rank dir holds TensorBoard event files (the job then gets one too)."""
    for path in rank_dirs.values():
        try:
            if reader.list_summary_files(path, "tensorboard"):
                return True
        except OSError:
            continue
    return False


@dataclass
class JobView:
    """What :func:`write_job_view` wrote and the verdicts it reached."""

    paths: list[str]
    verdicts: dict[str, float | int | str]


def _fingerprint_curves(statistics: JobStatistics) -> list[Curve]:
    dense = _dense_series(statistics.fingerprints)
    if len(dense.steps) == 0:
        return []
    present = ~np.isnan(dense.values)
    ordered = np.sort(dense.values, axis=1)  # NaN sorts last
    changes = (ordered[:, 1:] != ordered[:, :-1]) & ~np.isnan(ordered[:, 1:])
    distinct = (present.any(axis=1) + changes.sum(axis=1)).astype(np.float64)
    return [
        Curve(f"{FINGERPRINT_TAG}/ranks", dense.steps, present.sum(axis=1).astype(np.float64)),
        Curve(f"{FINGERPRINT_TAG}/distinct", dense.steps, distinct),
    ]


def _job_curves(statistics: JobStatistics, times: StepTimes) -> list[Curve]:
    curves: list[Curve] = []
    bands = job_bands(statistics)
    for tag in sorted(bands):
        curves.extend(tag_curves(tag, bands[tag]))
        if tag == STEP_TIME_TAG and len(times.steps):
            curves.append(Curve(SLOWEST_RANK_TAG, times.steps, times.slowest_rank.astype(float)))
            curves.append(Curve(SKEW_TAG, times.steps, times.skew))
    curves.extend(_fingerprint_curves(statistics))
    return curves


def _check_arguments(
    job_dir: str | os.PathLike[str],
    series: Mapping[int, RankSeries] | JobStatistics,
    world_size: int,
    missing: Sequence[int],
) -> str:
    directory = check_path("job_dir", job_dir)
    if not os.path.isdir(directory):
        raise JobViewDirNotExistError(f"job_dir {directory!r} is not a directory")
    if not is_int(world_size) or world_size < 1:
        raise JobViewParamValueError(f"world_size must be an int >= 1, got {world_size!r}")
    check_ranks("missing", missing)
    if isinstance(series, JobStatistics):
        return directory
    if not isinstance(series, Mapping):
        raise JobViewParamTypeError(
            f"series must be a mapping of rank to RankSeries (or a JobStatistics), "
            f"got {type(series).__name__}"
        )
    for rank, item in series.items():
        if not is_int(rank) or not 0 <= rank < world_size:
            raise JobViewParamValueError(
                f"series keys must be ranks in range(world_size={world_size}), got {rank!r}"
            )
        if not isinstance(item, RankSeries):
            raise JobViewParamTypeError(
                f"series[{rank!r}] must be a RankSeries, got {type(item).__name__}"
            )
        if item.rank != rank:
            raise JobViewParamValueError(
                f"series[{rank!r}] holds the series of rank {item.rank}; key it by its rank"
            )
    return directory


def _rank_items(name: str, value: object, form: str) -> list[tuple[int, object]]:
    """The items of ``value``, None or a mapping keyed by ranks (ints >= 0) whose values
    have the ``form`` its error names."""
    check_optional_mapping(name, value)
    if value is None:
        return []
    assert isinstance(value, Mapping)
    for rank in value:
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise JobViewParamValueError(
                f"{name} must map ranks (ints >= 0) to {form}, got the key {rank!r}"
            )
    return list(value.items())


def _check_raised(raised: object) -> None:
    """``raised`` is None or a mapping of ranks to exception names (str)."""
    form = "exception names (str)"
    for rank, exception in _rank_items("raised", raised, form):
        if not isinstance(exception, str):
            raise JobViewParamTypeError(
                f"raised must map ranks to {form}, got {type(exception).__name__} for rank {rank}"
            )


def _check_raised_at(raised_at: object) -> None:
    """``raised_at`` is None or a mapping of ranks to (host, finite wall time) pairs."""
    form = "(host, wall time in seconds) pairs"
    for rank, pair in _rank_items("raised_at", raised_at, form):
        host, wall = pair if isinstance(pair, tuple) and len(pair) == 2 else (None, None)
        if (
            not isinstance(host, str)
            or isinstance(wall, bool)
            or not isinstance(wall, (int, float))
            or not math.isfinite(wall)
        ):
            raise JobViewParamValueError(
                f"raised_at must map ranks to {form}, got {pair!r} for rank {rank}"
            )


def write_job_view(
    job_dir: str | os.PathLike[str],
    series: Mapping[int, RankSeries] | JobStatistics,
    *,
    world_size: int,
    missing: Sequence[int] = (),
    tensorboard: bool = False,
    hparams: Mapping[str, Any] | None = None,
    metrics: Mapping[str, float] | None = None,
    host: str | None = None,
    failed: Sequence[int] = (),
    straggler_evidence: StragglerEvidence | None = None,
    verdict_settings: VerdictSettings | None = None,
    raised: Mapping[int, str] | None = None,
    raised_at: Mapping[int, tuple[str, float]] | None = None,
    terminated: Sequence[int] = (),
    lost_peer: Sequence[int] = (),
    interrupted: Sequence[int] = (),
) -> JobView:
    """Write the job's own summary file into ``job_dir`` and return the verdicts.

    Computes per-step cross-rank statistics of every scalar tag and writes the
    job's summary file (MindSpore format; plus a TensorBoard file with a
    custom_scalars layout and the HParams session when ``tensorboard`` is
    true), atomically, replacing earlier job files. The verdicts are the
    ``user_defined`` keys of the merged lineage (see the module docstring).

    Args:
        job_dir: the job's directory (the one holding ``rank_<r>/``).
        series: each rank's series keyed by rank, or statistics already
            merged (:class:`JobStatistics`, e.g. reduced in groups of ranks).
        world_size: how many ranks the job has; ranks without series are missing.
        missing: ranks known not to have reported.
        tensorboard: also write the TensorBoard file.
        hparams, metrics: the job's hyper-parameters and final metrics, for
            the TensorBoard HParams session (no session when both are None).
        host: the host part of the file names (default this machine's name).
        failed: ranks the launcher reported as failed (its exit report), the
            one evidence that breaks a tie for the rank that stopped first.
        raised: rank -> the name of the exception its training stopped on (the
            rank's stop record, ``rankscribe.lineage.recording.read_train_stop``):
            among the ranks that may have stopped first, the one that raised, when
            one alone did, is named (``docs/job-view.md``, "Where each rank stopped").
        raised_at: rank -> (host, wall time in seconds) of its stop record: of several
            ranks on one host that raised, the first to raise is named.
        terminated: the ranks whose training a SIGTERM stopped (their stop records
            say so): each wrote every step it ran; when every rank was, none stopped
            first (``docs/job-view.md``, "Where each rank stopped").
        interrupted: the ranks whose training a Ctrl-C (SIGINT) stopped (their stop
            records, written once their files were closed, say so): as ``terminated``.
        lost_peer: the ranks whose training raised on losing its connection to
            another rank (their stop records say so): not the rank that raised first;
            where every other rank that may have stopped first did, the one rank that
            left no stop record is named.
        straggler_evidence: the straggler rule's evidence, when it was reduced
            elsewhere (blocks of steps, a tree of ranks); by default it comes
            from ``series`` (:func:`timing_evidence`).
        verdict_settings: the straggler thresholds (default ``VerdictSettings()``;
            ``docs/job-view.md``, "Straggler"). In a folder with the live view's
            state file, a straggler the live view named keeps the onset it was named
            with ("The onset").

    Raises:
        JobViewDirNotExistError: ``job_dir`` is not a directory.
        JobViewParamTypeError, JobViewParamValueError: a malformed argument.
        OSError: the files could not be written (earlier job files are kept).
    """
    directory = _check_arguments(job_dir, series, world_size, missing)
    check_ranks("failed", failed)
    check_ranks("terminated", terminated)
    check_ranks("interrupted", interrupted)
    check_ranks("lost_peer", lost_peer)
    _check_raised(raised)
    _check_raised_at(raised_at)
    check_bool("tensorboard", tensorboard)
    check_optional_mapping("hparams", hparams)
    check_optional_mapping("metrics", metrics)
    check_host("host", host)
    if straggler_evidence is not None and not isinstance(straggler_evidence, StragglerEvidence):
        raise JobViewParamTypeError(
            f"straggler_evidence must be a StragglerEvidence or None, "
            f"got {type(straggler_evidence).__name__}"
        )
    if verdict_settings is not None and not isinstance(verdict_settings, VerdictSettings):
        raise JobViewParamTypeError(
            f"verdict_settings must be a VerdictSettings or None, "
            f"got {type(verdict_settings).__name__}"
        )
    if isinstance(series, JobStatistics):
        statistics = series
    else:
        statistics = JobStatistics()
        for rank in sorted(series):
            statistics.add(series[rank])
    verdicts, times = _job_verdicts(
        statistics,
        world_size=world_size,
        missing=missing,
        failed=failed,
        raised=raised or {},
        raised_at=raised_at or {},
        terminated=terminated,
        interrupted=interrupted,
        lost_peer=lost_peer,
        evidence=straggler_evidence,
        settings=verdict_settings,
        # A job the live view watched: its straggler keeps the onset it was named with,
        # and a rank whose verdict it ended is judged from after its span where it is over.
        onsets=state_onsets(directory),
        ended=state_ended(directory),
    )
    spans = state_spans(directory)  # the verdicts the live view named, with their spans
    if spans:
        verdicts[LIVE_SPANS_KEY] = spans
    if verdicts["job/missing_ranks"]:
        logger.warning("job view of %s without ranks %s", directory, verdicts["job/missing_ranks"])
    # The named ranks' system readings (docs/system-metrics.md): from the series, else on disk.
    verdicts.update(
        evidence_keys(verdicts, directory if isinstance(series, JobStatistics) else series)
    )
    curves = _job_curves(statistics, times)
    wall_time = _now()
    table = step_table(curves)
    contents = {"summary": summary_file_records(curves, wall_time, table)}
    if tensorboard:
        margin_tags = sorted({*statistics.tags, *statistics.samples})
        contents["tensorboard"] = tensorboard_file_records(
            curves,
            wall_time,
            margin_tags=margin_tags,
            line_tags=[SKEW_TAG] if len(times.steps) else [],
            session=(
                None
                if hparams is None and metrics is None
                else job_session(hparams, metrics, wall_time)
            ),
            verdicts=verdicts,
        )
    paths = write_job_files(directory, contents, host=host)
    return JobView(paths, verdicts)


def live_lines(job_dir: str | os.PathLike[str]) -> list[str]:
    """What ``rankscribe-lineage show <job>`` prints of a job's live view (empty when none).

    Read from the live view's state file in ``job_dir`` (rank 0 replaces it
    each interval): how far the job view is written, the verdicts so far and
    each rank's last step (``docs/job-view.md``, "Live").
    """
    return state_lines(read_live_state(job_dir))


def state_lines(state: Mapping[str, Any] | None) -> list[str]:
    """:func:`live_lines` of a state read already (``show`` reads it once, warns once)."""
    if state is None or not isinstance(state.get("verdicts"), dict):
        return []
    verdicts = state["verdicts"]
    when = state.get("wall_time")
    stamp = (
        _time.strftime("%Y-%m-%d %H:%M:%S", _time.localtime(when))
        if isinstance(when, (int, float))
        else "? (unknown time)"
    )
    done = "final" if state.get("final") else "live"
    through = state.get("written_through_step", "?")
    written = "no steps written yet" if through == -1 else f"steps written through {through}"
    lines = [
        f"job view ({done}): interval {state.get('interval', '?')} at {stamp}, {written}, "
        f"{state.get('ranks_in_interval', '?')} of {state.get('world_size', '?')} ranks in it"
        + (
            f" (missing: {state['missing_in_interval']})"
            if state.get("missing_in_interval")
            else ""
        )
    ]
    records = state.get("verdict_records")
    return lines + live_verdict_lines(
        records if isinstance(records, list) else [], verdicts, final=bool(state.get("final"))
    )
