"""The job view: one record per distributed job, built from its ranks' scalars.

Every rank of a job writes its own summary files into ``<job_dir>/rank_<r>/``.
This module turns the ranks' scalar series into the job's own files in
``<job_dir>`` and into verdicts for the merged lineage. ``docs/job-view.md``
is the full description; the rules in short:

Job files (written whole with ``files.atomic_write``: 0400, never through a
planted link; a rerun writes new files and then removes the old ones, so no
point is ever duplicated):

- ``events.out.events.summary.<T>.job.<host>_MS`` (MindSpore format);
- with ``tensorboard=True``, ``events.out.tfevents.<T>.<host>.job``: the same
  scalars, a Custom Scalars layout (per tag, a margin chart of the mean within
  min..max, and a line chart of the step-time skew) and the job's HParams
  session (hyper-parameters and final metrics), so TensorBoard's HParams tab
  links the job to its own curves.

Job tags, per step, over the ranks that recorded the tag at that step:
``<tag>/mean``, ``<tag>/min``, ``<tag>/max``, ``<tag>/std`` (population),
``<tag>/ranks`` (how many ranks had the point), ``<tag>/min_rank``,
``<tag>/max_rank`` (a tie goes to the lowest rank); and
``rankscribe/step_time/slowest_rank`` and ``rankscribe/step_time/skew``
(slowest / median over the ranks). The fingerprint is an id, not a
quantity: it gets only ``rankscribe/param_fingerprint/ranks`` and
``rankscribe/param_fingerprint/distinct`` (distinct values at the step; 1
when all ranks agree). A NaN point makes that step's mean and std NaN; the
min and max are those of the other points.

Verdicts (``user_defined`` keys of the merged lineage; "none" is -1 for an
int and "" for a list, which is comma-separated rank numbers):

- ``job/ranks_reported`` (int), ``job/missing_ranks`` (list): ranks of
  ``range(world_size)`` with no scalar at all, and those passed as missing.
- ``job/step_time_skew`` (float): the median over steps where >= 2 ranks
  reported a step time of slowest / median. Absent without such steps.
- ``job/straggler_ranks`` (list), ``job/straggler_rank`` (int, the worst),
  ``job/straggler_timing`` (str): the straggler rule runs on every timing tag
  (:data:`TIMING_TAGS` and ``rankscribe/section/<name>``). Per timing and
  step, each rank's value over the median of the ranks at that step (both
  plus 5 % of the step's median step time, at least 100 us; 0/0 is 1):
  :func:`paired_ratios`.
  Per (timing, rank) a bounded, mergeable histogram of those ratios
  (:class:`StragglerEvidence`) gives the rank's level, its median ratio. A
  rank whose level is >= 1.2 times the median level of the faster half of the
  ranks is named (:func:`straggler_verdicts`), so a slow node is named whole;
  the timing with its largest factor is the one that named it. Collectives
  (DDP, an Allreduce) make the wall step time equal on every rank; the forward
  time, data wait and sections still tell the ranks apart. When flagged,
  ``job/straggler_slowest_share`` (float, 0..1), ``job/straggler_excess``
  (float: 0.45 means 45 % slower than the faster half) and per named rank
  ``job/straggler_timing/<rank>`` and ``job/straggler_excess/<rank>``.
- ``job/divergence_check`` (str): ``checked``, ``ranks_differ_at_start``
  (model parallel: shards differ by design, so nothing is flagged),
  ``no_common_step``, ``one_rank`` or ``no_fingerprints``. At the first step
  where every rank that recorded a fingerprint has one, all must be equal for
  the check to apply. After it, at each step, the majority is the value held
  by more than half of the ranks with a fingerprint there; a rank that differs
  from it is diverged from the first such step on (when no value has a
  majority, every rank there that was not diverged yet is). Reported as
  ``job/diverged_ranks`` (list), ``job/diverged_first_step`` (int) and
  ``job/diverged_step/<rank>`` (int) per diverged rank.
- ``job/nonfinite_loss_ranks`` (list), ``job/nonfinite_loss_first_step``
  (int), ``job/nonfinite_loss_step/<rank>`` (int): ranks whose loss (tag
  ``loss/auto`` as SummaryCollector writes it, or ``loss``) was NaN or
  infinite, with the first such step.
- ``job/last_step/<rank>`` (int) for each rank with a scalar; when they
  differ, ``job/stopped_first_step`` (int, the smallest) and
  ``job/stopped_early_ranks`` (list: every rank that stopped before the last
  one); ``job/stopped_first_rank`` (int) only when the evidence decides
  (``job/stopped_first_evidence``: ``last_step`` when one rank alone has the
  smallest last step, ``launcher`` when the launcher's report (``failed``)
  names one of the tied ranks, else ``undetermined`` with
  ``job/stopped_first_tied_ranks``); never a tie broken toward the lowest rank.

Query them like any custom lineage, e.g.
``rankscribe-lineage query runs --where "user_defined/job/straggler_rank >= 0"``.
"""

from __future__ import annotations

import logging
import operator
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.lineage._checks import (
    check_bool,
    check_host,
    check_int,
    check_optional_mapping,
    check_path,
    check_ranks,
    is_int,
)
from rankscribe.lineage._hparams import (
    HPARAM_FIELDS,
    HParamsRun,
    hparam_value,
    metric_value,
    split_user_defined,
)
from rankscribe.lineage.errors import (
    LineageDirNotExistError,
    LineageParamTypeError,
    LineageParamValueError,
)
from rankscribe.lineage.job._files import (
    STATISTIC_SUFFIXES,
    Curve,
    step_table,
    summary_file_bytes,
    tensorboard_file_bytes,
    write_job_files,
)
from rankscribe.lineage.job._files import now as _now
from rankscribe.lineage.job._sentences import timing_name, verdict_lines
from rankscribe.lineage.job._statistics import (
    DATA_WAIT_TAG,
    FINGERPRINT_TAG,
    FORWARD_TIME_TAG,
    LOSS_TAGS,
    SECTION_TAG_PREFIX,
    STEP_TIME_TAG,
    TIMING_TAGS,
    JobStatistics,
    SeriesLike,
    TagStatistics,
    is_timing_tag,
)
from rankscribe.lineage.job._stragglers import (
    STEP_FLOOR_SECONDS,
    STEP_FLOOR_SHARE,
    STRAGGLER_MARGIN,
    StragglerEvidence,
    paired_ratios,
    straggler_verdicts,
)
from rankscribe.lineage.job._verdicts import STRAGGLER_SHARE, StepTimes, timing_evidence
from rankscribe.lineage.job._verdicts import dense_series as _dense_series
from rankscribe.lineage.job._verdicts import job_verdicts as _job_verdicts
from rankscribe.lineage.query._conditions import FIELD_MAPPING
from rankscribe.lineage.record._parser import RunLineage
from rankscribe.writer import WriterError, reader

if TYPE_CHECKING:
    import numpy.typing as npt

logger = logging.getLogger(__name__)

__all__ = [
    "DATA_WAIT_TAG",
    "FINGERPRINT_TAG",
    "FORWARD_TIME_TAG",
    "LOSS_TAGS",
    "SECTION_TAG_PREFIX",
    "STEP_FLOOR_SECONDS",
    "STEP_FLOOR_SHARE",
    "STEP_TIME_TAG",
    "STRAGGLER_MARGIN",
    "STRAGGLER_SHARE",
    "TIMING_TAGS",
    "JobStatistics",
    "JobView",
    "RankSeries",
    "SeriesLike",
    "StragglerEvidence",
    "is_timing_tag",
    "paired_ratios",
    "series_from_dir",
    "session_values",
    "straggler_verdicts",
    "timing_evidence",
    "timing_name",
    "verdict_lines",
    "write_job_view",
]

_step_of = operator.itemgetter(0)
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
    """Read a rank's scalars from the summary (``_MS``) files of ``rank_dir``.

    Lenient: a torn or corrupt file contributes the records that can be read
    (damage is logged as a warning), and a file that cannot be opened is
    skipped with a warning. Each tag's points are sorted by step (a step
    recorded twice keeps both, in file order; the statistics use the last).

    Raises:
        LineageDirNotExistError: ``rank_dir`` is not a directory.
        LineageParamTypeError, LineageParamValueError: ``rank_dir`` is not a
            path, or ``rank`` is not an int >= 0.
    """
    directory = check_path("rank_dir", rank_dir)
    check_int("rank", rank, minimum=0)
    if not os.path.isdir(directory):
        raise LineageDirNotExistError(f"rank_dir {directory!r} is not a directory")
    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in reader.list_summary_files(directory, "summary"):
        try:
            curves = reader.scalars(path)
        except (OSError, WriterError) as error:
            logger.warning("%s: skipped, it could not be read (%s)", path, error)
            continue
        for tag, points in curves.items():
            scalars.setdefault(tag, []).extend(points)
    for points in scalars.values():
        points.sort(key=_step_of)
    return RankSeries(rank, scalars)


def read_rank_series(rank_dirs: Mapping[int, str | os.PathLike[str]]) -> dict[int, RankSeries]:
    """:func:`series_from_dir` of each ``rank -> rank_dir``."""
    return {rank: series_from_dir(path, rank) for rank, path in sorted(rank_dirs.items())}


def holds_tensorboard_files(rank_dirs: Mapping[int, str | os.PathLike[str]]) -> bool:
    """Whether any rank dir holds TensorBoard event files (the job then gets one too)."""
    for path in rank_dirs.values():
        try:
            if reader.list_summary_files(path, "tensorboard"):
                return True
        except OSError:
            continue
    return False


def session_values(lineage: RunLineage) -> tuple[dict[str, Any], dict[str, float]]:
    """The HParams session of a merged lineage: hyper-parameters and final metrics.

    The same names as ``rankscribe-lineage hparams`` uses: the search fields
    that describe a setup and the user's ``user_defined/<k>`` as hyper-parameters;
    ``loss``, ``metric/<k>`` and the merge's numeric notes (``user_defined/loss_min``,
    ...) as metrics; the merge's text notes and the verdicts are neither.
    """
    hparams: dict[str, Any] = {}
    for name in HPARAM_FIELDS:
        section, key = FIELD_MAPPING.get(name, (name, None))
        value = lineage.section(section).get(key) if key is not None else None
        if value is not None:
            hparams[name] = value
    user_hparams, notes = split_user_defined(lineage.section("user_defined"))
    hparams.update(user_hparams)
    metrics: dict[str, float] = {}
    loss = metric_value(lineage.section("algorithm").get("loss"))
    if loss is not None:
        metrics["loss"] = loss
    for key, value in lineage.section("metric").items():
        number = metric_value(value)
        if number is not None:
            metrics[f"metric/{key}"] = number
    metrics.update(notes)
    return hparams, metrics


@dataclass
class JobView:
    """What :func:`write_job_view` wrote and the verdicts it reached."""

    paths: list[str]
    verdicts: dict[str, float | int | str]


def _tag_curves(tag: str, statistics: TagStatistics) -> list[Curve]:
    columns: dict[str, npt.NDArray[Any]] = {
        "mean": statistics.mean,
        "min": statistics.minimum,
        "max": statistics.maximum,
        "std": statistics.std,
        "ranks": statistics.count,
        "min_rank": statistics.min_rank,
        "max_rank": statistics.max_rank,
    }
    return [
        Curve(f"{tag}/{suffix}", statistics.steps, columns[suffix].astype(np.float64))
        for suffix in STATISTIC_SUFFIXES
    ]


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
    for tag in sorted(statistics.tags):
        curves.extend(_tag_curves(tag, statistics.tags[tag]))
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
        raise LineageDirNotExistError(f"job_dir {directory!r} is not a directory")
    if not is_int(world_size) or world_size < 1:
        raise LineageParamValueError(f"world_size must be an int >= 1, got {world_size!r}")
    check_ranks("missing", missing)
    if isinstance(series, JobStatistics):
        return directory
    if not isinstance(series, Mapping):
        raise LineageParamTypeError(
            f"series must be a mapping of rank to RankSeries (or a JobStatistics), "
            f"got {type(series).__name__}"
        )
    for rank, item in series.items():
        if not is_int(rank) or not 0 <= rank < world_size:
            raise LineageParamValueError(
                f"series keys must be ranks in range(world_size={world_size}), got {rank!r}"
            )
        if not isinstance(item, RankSeries):
            raise LineageParamTypeError(
                f"series[{rank!r}] must be a RankSeries, got {type(item).__name__}"
            )
        if item.rank != rank:
            raise LineageParamValueError(
                f"series[{rank!r}] holds the series of rank {item.rank}; key it by its rank"
            )
    return directory


def _session(
    hparams: Mapping[str, Any] | None, metrics: Mapping[str, float] | None, wall_time: float
) -> HParamsRun | None:
    if hparams is None and metrics is None:
        return None
    values = {
        str(name): converted
        for name, raw in (hparams or {}).items()
        if (converted := hparam_value(raw)) is not None
    }
    finals = {
        str(name): number
        for name, raw in (metrics or {}).items()
        if (number := metric_value(raw)) is not None
    }
    # An empty group name makes TensorBoard group the session by its run: the job dir.
    return HParamsRun(name="", hparams=values, metrics=finals, start_time=wall_time)


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
        straggler_evidence: the straggler rule's evidence, when it was reduced
            elsewhere (blocks of steps, a tree of ranks); by default it comes
            from ``series`` (:func:`timing_evidence`).

    Raises:
        LineageDirNotExistError: ``job_dir`` is not a directory.
        LineageParamTypeError, LineageParamValueError: a malformed argument.
        OSError: the files could not be written (earlier job files are kept).
    """
    directory = _check_arguments(job_dir, series, world_size, missing)
    check_ranks("failed", failed)
    check_bool("tensorboard", tensorboard)
    check_optional_mapping("hparams", hparams)
    check_optional_mapping("metrics", metrics)
    check_host("host", host)
    if straggler_evidence is not None and not isinstance(straggler_evidence, StragglerEvidence):
        raise LineageParamTypeError(
            f"straggler_evidence must be a StragglerEvidence or None, "
            f"got {type(straggler_evidence).__name__}"
        )
    if isinstance(series, JobStatistics):
        statistics = series
    else:
        statistics = JobStatistics()
        for rank in sorted(series):
            statistics.add(series[rank])
    verdicts, times = _job_verdicts(statistics, world_size=world_size, missing=missing,
                                    failed=failed, evidence=straggler_evidence)
    if verdicts["job/missing_ranks"]:
        logger.warning("job view of %s without ranks %s", directory, verdicts["job/missing_ranks"])
    curves = _job_curves(statistics, times)
    wall_time = _now()
    table = step_table(curves)
    contents = {"summary": summary_file_bytes(curves, wall_time, table)}
    if tensorboard:
        margin_tags = [tag for tag in sorted(statistics.tags)]
        contents["tensorboard"] = tensorboard_file_bytes(
            curves,
            wall_time,
            margin_tags=margin_tags,
            line_tags=[SKEW_TAG] if len(times.steps) else [],
            session=_session(hparams, metrics, wall_time),
            table=table,
        )
    paths = write_job_files(directory, contents, host=host)
    return JobView(paths, verdicts)
