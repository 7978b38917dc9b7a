"""Rank 0's live job view: intervals of merged points appended to the job files.

Each interval, the ranks' new points reach rank 0 up a tree as one merged
:class:`~rankscribe.lineage.job._partials.Partial`. :class:`LiveJobView`
keeps what has arrived but cannot be written yet, writes the steps every
rank of the interval has passed, and folds them into bounded verdict state
(:class:`LiveVerdicts`): per rank a few counters and a fixed histogram, never
a series. Its memory is bounded by what one interval brings (and by the
skew between the fastest and the slowest rank), not by ranks x steps.
Semantics: ``docs/job-view.md``, "Live" and "Tree".

Where a step is cut: the smallest last step over the ranks the view waits
for — every rank that has not finished and was heard from in the last
:data:`PATIENCE` intervals (a rank not heard from yet counts as heard at the
start). A step at or below it is complete and is written once; a rank
silent for longer is left behind (and named missing), and points that
arrive later for a step already written are dropped from the live file
with a warning and counted — the offline merge counts them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.lineage._hparams import HParamsRun, hparam_value, metric_value
from rankscribe.lineage.job._files import STATISTIC_SUFFIXES, AppendedJobFiles, Curve, now
from rankscribe.lineage.job._partials import Partial, is_timing_tag
from rankscribe.lineage.job._ranges import missing_ranges, ranges_text
from rankscribe.lineage.job._statistics import FINGERPRINT_TAG, STEP_TIME_TAG, TagStatistics
from rankscribe.lineage.job._verdicts import (
    STRAGGLER_MARGIN,
    STRAGGLER_SHARE,
    DenseSeries,
    dense_series,
)
from rankscribe.writer import files

if TYPE_CHECKING:
    import numpy.typing as npt

logger = logging.getLogger(__name__)

__all__ = ["LIVE_STATE_NAME", "LiveJobView", "LiveVerdicts", "read_live_state"]

#: Intervals a silent rank holds the live file back before it is left behind.
PATIENCE = 3
#: The live view's state beside the job files: the verdicts so far, each rank's last step.
LIVE_STATE_NAME = ".rankscribe-live.json"
#: A state file larger than this is not read (it holds one entry per rank).
_MAX_STATE_BYTES = 32 << 20
# log2(ratio) histogram: 0.02 wide bins (1.4 % of a ratio) from 1/16x to 16x.
_BIN_WIDTH = 0.02
_BIN_LIMIT = 4.0
_BINS = int(2 * _BIN_LIMIT / _BIN_WIDTH) + 1
SLOWEST_RANK_TAG = f"{STEP_TIME_TAG}/slowest_rank"
SKEW_TAG = f"{STEP_TIME_TAG}/skew"
NONE = -1


def _bin_of(log_ratio: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    clipped = np.clip(np.nan_to_num(log_ratio, nan=0.0, posinf=_BIN_LIMIT, neginf=-_BIN_LIMIT),
                      -_BIN_LIMIT, _BIN_LIMIT)
    return np.rint((clipped + _BIN_LIMIT) / _BIN_WIDTH).astype(np.int64)


def _histogram_median(histogram: npt.NDArray[np.int64]) -> float | None:
    total = int(histogram.sum())
    if total == 0:
        return None
    index = int(np.searchsorted(np.cumsum(histogram), (total + 1) / 2))
    return float(2.0 ** (index * _BIN_WIDTH - _BIN_LIMIT))


def _ratio(values: npt.NDArray[np.float64], reference: npt.NDArray[np.float64]
           ) -> npt.NDArray[np.float64]:
    """values / reference, where 0/0 is a ratio of 1 and x/0 is infinite."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(reference > 0, values / reference,
                        np.where(values > 0, np.inf, 1.0))


def median_of_others(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """For each cell of a (steps, ranks) array: the median of the other ranks' values at its step.

    NaN (absent) cells are ignored, and get NaN; so does a cell alone at its step.
    """
    order = np.argsort(values, axis=1)  # NaN sorts last
    ordered = np.take_along_axis(values, order, axis=1)
    present = (~np.isnan(values)).sum(axis=1, keepdims=True)
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(values.shape[1])[None, :], axis=1)
    others = present - 1
    low = np.maximum(others - 1, 0) // 2
    high = np.maximum(others, 0) // 2
    low_index = np.minimum(low + (low >= position), values.shape[1] - 1)
    high_index = np.minimum(high + (high >= position), values.shape[1] - 1)
    result = (np.take_along_axis(ordered, low_index, axis=1)
              + np.take_along_axis(ordered, high_index, axis=1)) / 2
    return np.where((others >= 1) & ~np.isnan(values), result, np.nan)


@dataclass
class _TimingEvidence:
    """One timing tag's straggler evidence: bounded per rank (a count and a histogram)."""

    contested: int = 0
    slowest: dict[int, int] = field(default_factory=dict)
    ratios: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)
    skews: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(_BINS, np.int64))

    def add(self, dense: DenseSeries) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64],
                                              npt.NDArray[np.int64]]:
        """Fold in these steps; return (steps, skew, slowest rank) of the contested ones."""
        values = dense.values
        present = ~np.isnan(values)
        contested = present.sum(axis=1) >= 2
        values, steps = values[contested], dense.steps[contested]
        if len(values) == 0:
            empty = np.empty(0, dtype=np.int64)
            return empty, np.empty(0), empty
        self.contested += len(values)
        column = np.argmax(np.where(np.isnan(values), -np.inf, values), axis=1)
        slowest = dense.ranks[column]
        for rank, wins in zip(*np.unique(slowest, return_counts=True), strict=True):
            self.slowest[int(rank)] = self.slowest.get(int(rank), 0) + int(wins)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_ratio = np.log2(_ratio(values, median_of_others(values)))
        for index, rank in enumerate(dense.ranks.tolist()):
            usable = ~np.isnan(values[:, index])
            if not bool(np.any(usable)):
                continue
            histogram = self.ratios.setdefault(rank, np.zeros(_BINS, np.int64))
            np.add.at(histogram, _bin_of(log_ratio[usable, index]), 1)
        top = values[np.arange(len(values)), column]
        skew = _ratio(top, np.nanmedian(values, axis=1))
        with np.errstate(divide="ignore"):
            np.add.at(self.skews, _bin_of(np.log2(skew)), 1)
        return steps, skew, slowest

    def straggler(self) -> tuple[int, float, float] | None:
        """(rank, slowest share, excess) of the chronic straggler of this timing, if any."""
        if not self.contested or not self.slowest:
            return None
        rank, wins = min(self.slowest.items(), key=lambda item: (-item[1], item[0]))
        share = wins / self.contested
        median = _histogram_median(self.ratios.get(rank, np.zeros(_BINS, np.int64)))
        if median is None:
            return None
        excess = median - 1.0
        if share > STRAGGLER_SHARE and excess >= STRAGGLER_MARGIN - _BIN_WIDTH / 4:
            return rank, share, excess
        return None


@dataclass
class LiveVerdicts:
    """The verdicts so far, from bounded state (``docs/job-view.md``, "Live")."""

    world_size: int
    last_steps: dict[int, int] = field(default_factory=dict)
    nonfinite_loss: dict[int, int] = field(default_factory=dict)
    timings: dict[str, _TimingEvidence] = field(default_factory=dict)
    divergence: str = "no_fingerprints"
    fingerprint_ranks: set[int] = field(default_factory=set)
    diverged: dict[int, int] = field(default_factory=dict)
    missing_now: list[int] = field(default_factory=list)

    def add(self, written: Partial) -> list[Curve]:
        """Fold in the written part of an interval; return its per-step derived curves."""
        for rank, step in written.last_steps.items():
            self.last_steps[rank] = max(step, self.last_steps.get(rank, -1))
        for rank, step in written.nonfinite_loss.items():
            self.nonfinite_loss[rank] = min(step, self.nonfinite_loss.get(rank, step))
        curves: list[Curve] = []
        for tag, ranks in written.per_rank.items():
            if tag == FINGERPRINT_TAG:
                curves.extend(self._add_fingerprints(dense_series(ranks)))
            elif is_timing_tag(tag):
                evidence = self.timings.setdefault(tag, _TimingEvidence())
                steps, skew, slowest = evidence.add(dense_series(ranks))
                if tag == STEP_TIME_TAG and len(steps):
                    curves.append(Curve(SLOWEST_RANK_TAG, steps, slowest.astype(np.float64)))
                    curves.append(Curve(SKEW_TAG, steps, skew))
        return curves

    def _add_fingerprints(self, dense: DenseSeries) -> list[Curve]:
        if len(dense.steps) == 0:
            return []
        self.fingerprint_ranks.update(dense.ranks.tolist())
        values = dense.values
        present = ~np.isnan(values)
        ordered = np.sort(values, axis=1)
        changes = (ordered[:, 1:] != ordered[:, :-1]) & ~np.isnan(ordered[:, 1:])
        distinct = (present.any(axis=1) + changes.sum(axis=1)).astype(np.float64)
        curves = [
            Curve(f"{FINGERPRINT_TAG}/ranks", dense.steps, present.sum(axis=1).astype(float)),
            Curve(f"{FINGERPRINT_TAG}/distinct", dense.steps, distinct),
        ]
        rows = np.arange(len(values))
        if self.divergence in ("no_fingerprints", "one_rank", "no_common_step"):
            if len(self.fingerprint_ranks) < 2:
                self.divergence = "one_rank"
                return curves
            complete = np.flatnonzero(present.all(axis=1))
            if values.shape[1] < 2 or len(complete) == 0:
                self.divergence = "no_common_step"
                return curves
            start = int(complete[0])
            first = values[start]
            if not bool(np.all(first == first[0])):
                self.divergence = "ranks_differ_at_start"
                return curves
            self.divergence = "checked"
            rows = rows[start + 1 :]
        if self.divergence == "checked" and len(rows):
            self._majority(dense, rows)
        return curves

    def _majority(self, dense: DenseSeries, rows: npt.NDArray[np.int64]) -> None:
        values = dense.values[rows]
        present = ~np.isnan(values)
        counts = present.sum(axis=1)
        ordered = np.sort(values, axis=1)
        middle = ordered[np.arange(len(ordered)), np.maximum(counts - 1, 0) // 2]
        agree = values == middle[:, None]
        has_majority = 2 * agree.sum(axis=1) > counts
        left = present & ~(agree & has_majority[:, None])
        for column in np.flatnonzero(left.any(axis=0)).tolist():
            rank = int(dense.ranks[column])
            if rank not in self.diverged:
                self.diverged[rank] = int(dense.steps[rows[int(np.argmax(left[:, column]))]])

    def verdicts(self) -> dict[str, float | int | str]:
        """The ``user_defined`` keys of the job so far (as in ``docs/job-view.md``)."""
        reported = sorted(rank for rank, step in self.last_steps.items() if step >= 0)
        absent = missing_ranges(reported, self.world_size)
        absent_text = ranges_text(_merge_runs(absent, self.missing_now))
        verdicts: dict[str, float | int | str] = {
            "job/ranks_reported": len(reported),
            "job/missing_ranks": absent_text,
            "job/straggler_rank": NONE,
        }
        step_times = self.timings.get(STEP_TIME_TAG)
        if step_times is not None:
            skew = _histogram_median(step_times.skews)
            if skew is not None:
                verdicts["job/step_time_skew"] = skew
        flagged = [(found, tag) for tag, evidence in sorted(self.timings.items())
                   if (found := evidence.straggler()) is not None]
        if flagged:
            (rank, share, excess), tag = max(flagged, key=lambda item: item[0][2])
            verdicts["job/straggler_rank"] = rank
            verdicts["job/straggler_slowest_share"] = share
            verdicts["job/straggler_excess"] = excess
            verdicts["job/straggler_timing"] = tag
        verdicts["job/divergence_check"] = self.divergence
        verdicts["job/diverged_ranks"] = ranges_text(sorted(self.diverged))
        verdicts["job/diverged_first_step"] = min(self.diverged.values(), default=NONE)
        for rank, step in sorted(self.diverged.items()):
            verdicts[f"job/diverged_step/{rank}"] = step
        verdicts["job/nonfinite_loss_ranks"] = ranges_text(sorted(self.nonfinite_loss))
        verdicts["job/nonfinite_loss_first_step"] = min(self.nonfinite_loss.values(),
                                                        default=NONE)
        for rank, step in sorted(self.nonfinite_loss.items()):
            verdicts[f"job/nonfinite_loss_step/{rank}"] = step
        last = {rank: self.last_steps[rank] for rank in reported}
        for rank, step in last.items():
            verdicts[f"job/last_step/{rank}"] = step
        verdicts["job/stopped_first_rank"] = NONE
        verdicts["job/stopped_first_step"] = NONE
        verdicts["job/stopped_early_ranks"] = ""
        if len(set(last.values())) > 1:
            earliest, latest = min(last.values()), max(last.values())
            verdicts["job/stopped_first_rank"] = min(r for r, s in last.items() if s == earliest)
            verdicts["job/stopped_first_step"] = earliest
            verdicts["job/stopped_early_ranks"] = ranges_text(
                sorted(r for r, s in last.items() if s < latest))
        return {key: _int32(value) for key, value in verdicts.items()}


def _int32(value: float | int | str) -> float | int | str:
    """A user_defined int is int32 on the wire: a larger step is kept as a float."""
    if isinstance(value, int) and not -(2**31) <= value <= 2**31 - 1:
        return float(value)
    return value


def _merge_runs(runs: list[tuple[int, int]], extra: Sequence[int]) -> list[tuple[int, int]]:
    merged = sorted(runs + [(rank, rank) for rank in extra])
    result: list[tuple[int, int]] = []
    for first, last in merged:
        if result and first <= result[-1][1] + 1:
            result[-1] = (result[-1][0], max(result[-1][1], last))
        else:
            result.append((first, last))
    return result


def _tag_curves(tag: str, statistics: TagStatistics) -> list[Curve]:
    columns = {
        "mean": statistics.mean, "min": statistics.minimum, "max": statistics.maximum,
        "std": statistics.std, "ranks": statistics.count,
        "min_rank": statistics.min_rank, "max_rank": statistics.max_rank,
    }
    return [Curve(f"{tag}/{suffix}", statistics.steps, columns[suffix].astype(np.float64))
            for suffix in STATISTIC_SUFFIXES]


class LiveJobView:
    """Rank 0's live job view of ``job_dir`` (see the module docstring).

    :meth:`add` takes each interval's merged partial (from the thread that
    receives them); :meth:`write` appends what is complete (from the thread
    that writes; the two may differ, so a slow filesystem never holds up the
    tree); :meth:`finish` writes everything left and closes the files.
    """

    def __init__(self, job_dir: str | os.PathLike[str], *, world_size: int,
                 tensorboard: bool = False, host: str | None = None) -> None:
        self.directory = os.fspath(job_dir)
        self.world_size = world_size
        self.tensorboard = tensorboard
        self.host = host
        self.state = LiveVerdicts(world_size)
        self.written_through = -(2**63)
        self.intervals = 0
        self.dropped_points = 0
        self._pending = Partial()
        self._round_ranks: list[int] = []
        self._heard: dict[int, int] = {}  # rank -> the last interval it was heard in
        self._finished: set[int] = set()
        self._round_missing: list[int] = []
        self._received = 0
        self._written_round = 0
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._files: AppendedJobFiles | None = None
        self._margin_tags: list[str] = []
        self._line_tags: list[str] = []
        self._laid_out = 0

    @property
    def paths(self) -> list[str]:
        return list(self._files.paths.values()) if self._files is not None else []

    def add(self, partial: Partial, *, missing: Sequence[int] = ()) -> None:
        """One interval's merged partial; ``missing``: ranks whose points did not arrive."""
        with self._lock:
            late = partial.drop_through(self.written_through)
            if late:
                self.dropped_points += late
                logger.warning(
                    "live job view of %s: %d points arrived for steps already written "
                    "(ranks that missed intervals); the offline merge counts them",
                    self.directory, late)
            self._pending.merge(partial)
            self._round_ranks = partial.ranks
            self._round_missing = list(missing)
            self._received += 1
            for rank in partial.ranks:
                self._heard[rank] = self._received
            self._finished |= partial.finished

    def write(self, *, final: bool = False) -> bool:
        """Append the steps every rank of the latest interval passed (all of them if ``final``).

        Returns False when there was nothing new to write.
        """
        with self._write_lock:
            return self._write(final)

    def _write(self, final: bool) -> bool:
        with self._lock:
            if self._received == self._written_round and not final:
                return False
            if self._received - self._written_round > 1:
                logger.warning(
                    "live job view of %s fell behind (a slow filesystem?): intervals %d-%d "
                    "are written together", self.directory, self._written_round + 1,
                    self._received)
            self._written_round = self._received
            cut = (2**63 - 1) if final else self._cut()
            written, self._pending = self._pending.split(cut)
            self._pending.last_steps = dict(written.last_steps)
            missing = list(self._round_missing)
        if cut <= self.written_through and not final:
            return False
        self.state.missing_now = missing
        curves = self._curves(written)
        verdict_step = max((int(curve.steps[-1]) for curve in curves if len(curve.steps)),
                           default=None)
        # Later points at or below the cut are late (every rank waited for had passed it).
        self.written_through = max(self.written_through, cut)
        verdicts = self.state.verdicts()
        if verdict_step is not None:
            curves.extend(_verdict_curves(verdicts, verdict_step, len(self._round_ranks)))
        self.intervals += 1
        self._append(curves)
        self._write_state(verdicts, final=final)
        return bool(curves) or final

    def _cut(self) -> int:
        """The last step every rank the view waits for has passed (-1: none yet)."""
        waiting = [
            rank for rank in range(self.world_size)
            if rank not in self._finished
            and self._received - self._heard.get(rank, 0) < PATIENCE
        ]
        steps = [self._pending.last_steps.get(rank, -1) for rank in waiting]
        if not steps:  # every rank finished or fell silent: what arrived is complete
            known = [step for step in self._pending.last_steps.values() if step >= 0]
            return max(known, default=-1)
        return min(steps)

    def _curves(self, written: Partial) -> list[Curve]:
        curves: list[Curve] = []
        for tag in sorted(written.tags):
            curves.extend(_tag_curves(tag, written.tags[tag]))
            if tag not in self._margin_tags:
                self._margin_tags.append(tag)
        curves.extend(self.state.add(written))
        if any(curve.tag == SKEW_TAG for curve in curves) and SKEW_TAG not in self._line_tags:
            self._line_tags.append(SKEW_TAG)
        return curves

    def _append(self, curves: list[Curve], session: HParamsRun | None = None) -> None:
        if not curves and session is None:
            return
        layout_grew = False
        if self._files is None:
            self._files = AppendedJobFiles(self.directory, tensorboard=self.tensorboard,
                                           host=self.host)
            layout_grew = True
        layout_grew = layout_grew or len(self._margin_tags) != self._laid_out
        self._laid_out = len(self._margin_tags)
        layout = (sorted(self._margin_tags), list(self._line_tags)) if layout_grew else None
        self._files.append(curves, now(), layout=layout, session=session)

    def _write_state(self, verdicts: Mapping[str, Any], *, final: bool) -> None:
        state = {
            "interval": self._received,
            "wall_time": now(),
            "final": final,
            "written_through_step": self.written_through,
            "ranks_in_interval": len(self._round_ranks),
            "missing_in_interval": ranges_text(self.state.missing_now),
            "dropped_points": self.dropped_points,
            "world_size": self.world_size,
            "verdicts": dict(verdicts),
        }
        data = json.dumps(state, allow_nan=True).encode("utf-8")
        files.atomic_write(os.path.join(self.directory, LIVE_STATE_NAME), [data],
                           mode=files.file_mode(True))

    def finish(
        self,
        *,
        hparams: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> dict[str, float | int | str]:
        """Write everything left, and the HParams session to TensorBoard; return the verdicts.

        ``hparams``/``metrics``: the job's hyper-parameters and final metrics
        (from the merged lineage), as :func:`~rankscribe.lineage.jobview.write_job_view` takes.
        """
        self.write(final=True)
        with self._write_lock:
            if (self._files is not None and self._files.tensorboard
                    and (hparams is not None or metrics is not None)):
                self._append([], _session(hparams, metrics, now()))
            if self._files is not None:
                self._files.close()
        return self.state.verdicts()


def _session(hparams: Mapping[str, Any] | None, metrics: Mapping[str, float] | None,
             wall_time: float) -> HParamsRun:
    values = {str(name): converted for name, raw in (hparams or {}).items()
              if (converted := hparam_value(raw)) is not None}
    finals = {str(name): number for name, raw in (metrics or {}).items()
              if (number := metric_value(raw)) is not None}
    # An empty group name makes TensorBoard group the session by its run: the job dir.
    return HParamsRun(name="", hparams=values, metrics=finals, start_time=wall_time)


def _verdict_curves(verdicts: Mapping[str, Any], step: int, ranks: int) -> list[Curve]:
    """The numeric verdicts so far as job scalars at ``step`` (per-rank keys left out)."""
    steps = np.asarray([step], dtype=np.int64)
    curves = [Curve("job/ranks_in_interval", steps, np.asarray([float(ranks)]))]
    for key, value in sorted(verdicts.items()):
        if key.count("/") != 1 or isinstance(value, (str, bool)):
            continue
        if not math.isfinite(float(value)):
            continue
        curves.append(Curve(key, steps, np.asarray([float(value)])))
    return curves


def read_live_state(job_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The live view's state file of ``job_dir`` (None when there is none or it is unreadable)."""
    path = os.path.join(os.fspath(job_dir), LIVE_STATE_NAME)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError:
        return None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            data = handle.read(_MAX_STATE_BYTES + 1)
    except OSError:
        return None
    if len(data) > _MAX_STATE_BYTES:
        return None
    try:
        state = json.loads(data.decode("utf-8"))
    except ValueError:
        return None
    return state if isinstance(state, dict) else None
