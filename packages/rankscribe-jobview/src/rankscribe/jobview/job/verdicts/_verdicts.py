"""The job's verdicts: straggler, step-time skew, divergence, gradient, non-finite loss, stops.

Each rule is documented in :mod:`rankscribe.jobview` and in
``docs/job-view.md``; the values become ``user_defined`` keys of the merged
lineage, so they are int, float or str (lists are comma-separated text).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from rankscribe.jobview.job._ranges import missing_ranges, ranges_text
from rankscribe.jobview.job._statistics import (
    STEP_TIME_WRITE_AT_ONCE,
    STEP_TIME_WRITE_COUNT,
    STEP_TIME_WRITE_INTERVAL,
    JobStatistics,
    RankArrays,
    float32_numbers,
    shared_steps,
)
from rankscribe.jobview.job.verdicts._gradient_verdicts import GradientVerdicts
from rankscribe.jobview.job.verdicts._straggler_verdicts import (
    VerdictSettings,
    straggler_verdicts_since,
)
from rankscribe.jobview.job.verdicts._stragglers import (
    StragglerEvidence,
    add_timings_with_middle,
    middle_medians,
    row_medians,
    row_middles,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "SKEW_BINS",
    "STRAGGLER_SHARE",
    "DenseSeries",
    "StepTimes",
    "Verdicts",
    "add_timing_evidence",
    "dense_series",
    "job_verdicts",
    "recent_step_seconds",
    "skew_histogram",
    "skew_median",
    "skew_ratio",
    "step_times",
    "timing_evidence",
    "untimed_ranks",
    "unwritten_steps",
]

#: Kept for the readers of earlier verdicts: the old rule's "slowest in more than half".
STRAGGLER_SHARE = 0.5

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
NONE = -1

Verdicts = dict[str, "float | int | str"]


def _ranks_text(ranks: Iterable[int]) -> str:
    return ",".join(str(rank) for rank in sorted(ranks))


def _int_value(value: int) -> int | float:
    """A user_defined int is int32 on the wire: a larger step is kept as a float."""
    return value if _INT32_MIN <= value <= _INT32_MAX else float(value)


def _int_or_number(value: float | int | str) -> float | int | str:
    return _int_value(value) if isinstance(value, int) else value


#: Ranks stacked at once by :func:`dense_series` (a block of 300 steps: 600 KB).
_STACKED_RANKS = 256


@dataclass
class DenseSeries:
    """Series of several ranks aligned on the union of their steps (NaN where absent)."""

    steps: npt.NDArray[np.int64]
    ranks: npt.NDArray[np.int64]
    values: npt.NDArray[np.floating[Any]]  # shape (steps, ranks); float32 where asked and kept


def dense_series(series: Mapping[int, RankArrays], *, keep_float32: bool = False) -> DenseSeries:
    """``series``' ranks aligned on their steps. ``keep_float32``: where every rank's
    values are float32 numbers (a timing read from summary files: they arrive from other
    ranks as float32, a rank's own read back as float64) and share their steps, the table
    is float32 (half its memory, the same numbers; its reader widens what it computes with)."""
    ranks = sorted(series)
    if not ranks:
        empty = np.empty(0, dtype=np.int64)
        return DenseSeries(empty, empty.copy(), np.empty((0, 0), dtype=np.float64))
    columns = [series[rank] for rank in ranks]
    shared = shared_steps(columns)
    if shared is not None:  # every rank at the same steps (the usual case): stacked
        # A few hundred ranks at a time, each block stacked by rank (a copy of each rank's
        # points as they lie) and transposed into place while it is in the cache: one
        # np.stack along the steps writes each point to a cache line of its own (16,384
        # ranks x 300 steps: 0.06 s, this 0.02 s).
        narrow = keep_float32 and all(float32_numbers(points) for _, points in columns)
        values = np.empty((len(shared), len(ranks)), dtype=np.float32 if narrow else np.float64)
        for start in range(0, len(ranks), _STACKED_RANKS):
            block = columns[start : start + _STACKED_RANKS]
            values[:, start : start + len(block)] = np.stack([points for _, points in block]).T
        return DenseSeries(shared, np.asarray(ranks, dtype=np.int64), values)
    steps = np.unique(np.concatenate([rank_steps for rank_steps, _ in columns]))
    values = np.full((len(steps), len(ranks)), np.nan)
    for column, rank in enumerate(ranks):
        rank_steps, rank_values = series[rank]
        values[np.searchsorted(steps, rank_steps), column] = rank_values
    return DenseSeries(steps, np.asarray(ranks, dtype=np.int64), values)


@dataclass
class StepTimes:
    """Per step (where any rank reported a step time): the slowest rank and the skew."""

    steps: npt.NDArray[np.int64]
    slowest_rank: npt.NDArray[np.int64]
    skew: npt.NDArray[np.float64]
    reporting: npt.NDArray[np.int64]
    dense: DenseSeries


def step_times(statistics: JobStatistics) -> StepTimes:
    """The slowest rank of each step and its skew (slowest / median over the ranks)."""
    dense = dense_series(statistics.step_times)
    present = ~np.isnan(dense.values)
    reporting = present.sum(axis=1)
    keep = reporting > 0
    values = dense.values[keep]
    if len(values) == 0:
        empty_int = np.empty(0, dtype=np.int64)
        return StepTimes(empty_int, empty_int, np.empty(0), empty_int, dense)
    # argmax over a row with NaN -> -inf picks the first (lowest) rank of a tie.
    slowest_column = np.argmax(np.where(np.isnan(values), -np.inf, values), axis=1)
    slowest = values[np.arange(len(values)), slowest_column]
    skew = skew_ratio(slowest, row_medians(values))
    return StepTimes(
        steps=dense.steps[keep],
        slowest_rank=dense.ranks[slowest_column],
        skew=skew,
        reporting=reporting[keep].astype(np.int64),
        dense=dense,
    )


def skew_ratio(
    slowest: npt.NDArray[np.float64], median: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Each step's skew, slowest / median, where 0/0 is 1 and x/0 is infinite."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio: npt.NDArray[np.float64] = np.where(
            median > 0, slowest / median, np.where(slowest > 0, np.inf, 1.0)
        )
    return ratio


# The step-time skew's median is taken from a histogram of log2(skew): bins 0.02 wide
# (1.4 % of a ratio) from 1/16x to 16x, so that a live view, which keeps only the
# histogram (bounded whatever the steps), and the offline merge give one number.
_SKEW_BIN_WIDTH = 0.02
_SKEW_BIN_LIMIT = 4.0
SKEW_BINS = int(2 * _SKEW_BIN_LIMIT / _SKEW_BIN_WIDTH) + 1


def skew_bins(skew: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """The histogram bin of each skew (a ratio; NaN: 1x, beyond 16x or 1/16x: the last)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log2(skew)
    clipped = np.clip(
        np.nan_to_num(log_ratio, nan=0.0, posinf=_SKEW_BIN_LIMIT, neginf=-_SKEW_BIN_LIMIT),
        -_SKEW_BIN_LIMIT,
        _SKEW_BIN_LIMIT,
    )
    bins: npt.NDArray[np.int64] = np.rint((clipped + _SKEW_BIN_LIMIT) / _SKEW_BIN_WIDTH).astype(
        np.int64
    )
    return bins


def skew_histogram(skew: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """The count of ``skew`` in each of the ``SKEW_BINS`` bins (:func:`skew_bins`)."""
    counts: npt.NDArray[np.int64] = np.bincount(skew_bins(skew), minlength=SKEW_BINS)
    return counts


def skew_median(histogram: npt.NDArray[np.int64]) -> float | None:
    """The median of a histogram of :func:`skew_bins` (its bin's ratio; None: empty)."""
    total = int(histogram.sum())
    if total == 0:
        return None
    index = int(np.searchsorted(np.cumsum(histogram), (total + 1) / 2))
    return float(2.0 ** (index * _SKEW_BIN_WIDTH - _SKEW_BIN_LIMIT))


def _skew(times: StepTimes) -> Verdicts:
    """The median skew of the steps two ranks or more reported (none: no key)."""
    median = skew_median(skew_histogram(times.skew[times.reporting >= 2]))
    return {} if median is None else {"job/step_time_skew": median}


def timing_evidence(statistics: JobStatistics) -> StragglerEvidence:
    """The straggler evidence of every timing tag of ``statistics`` (one block: all its steps).

    Each step's excess is a share of that step's median step time over the
    ranks; a step no rank timed is not judged (``docs/job-view.md``, "Straggler").
    """
    evidence = StragglerEvidence()
    add_timing_evidence(evidence, statistics)
    return evidence


def add_timing_evidence(
    evidence: StragglerEvidence,
    statistics: JobStatistics,
    each: Callable[[str, DenseSeries, npt.NDArray[np.float64] | None], object] | None = None,
    *,
    release: bool = False,
) -> None:
    """Add the straggler evidence of ``statistics`` to ``evidence`` (as :func:`timing_evidence`
    makes it; a live view's interval goes straight into the blocks the run has so far).

    ``each``: called with every timing tag, its :func:`dense_series` and, for the step
    time, its :func:`row_medians` (each step's median over the ranks; None for the
    others), once its evidence is added: for a caller that needs the tables too (one
    table each, not two; and one at a time, the step time's beside it, not one per
    timing tag: 40 MB each at 16,384 ranks and 300 steps).

    ``release``: each timing's per-rank points are taken out of ``statistics.timings``
    (its tag left with none) once its table is made: a caller that holds them nowhere
    else (a live view's written interval) never has a timing's points and its table in
    memory together."""
    step_tag = statistics.step_time_tag
    # Timings read from summary files are float32: their tables are kept so (half the
    # memory: 79 MB at 65,536 ranks x 300 steps); the rule widens each chunk it reads.
    step_dense = dense_series(_taken(statistics, step_tag, release), keep_float32=True)
    # The step time's middle order statistics: its medians (every timing's scale) and its
    # own others' medians, from one partition of its table.
    step_middle = row_middles(step_dense.values)
    step_median = (
        middle_medians(step_middle) if step_middle is not None else row_medians(step_dense.values)
    )
    for tag in sorted(statistics.timings):
        is_step_time = tag == step_tag
        dense = (
            step_dense
            if is_step_time
            else dense_series(_taken(statistics, tag, release), keep_float32=True)
        )
        if len(dense.ranks) >= 2 and len(dense.steps):
            scale = np.full(len(dense.steps), np.nan)
            if len(step_dense.steps):
                where = np.searchsorted(step_dense.steps, dense.steps)
                inside = where < len(step_dense.steps)
                matched = np.zeros(len(dense.steps), dtype=bool)
                matched[inside] = step_dense.steps[where[inside]] == dense.steps[inside]
                scale[matched] = step_median[where[matched]]
            add_timings_with_middle(
                evidence,
                tag,
                dense.steps,
                dense.ranks.tolist(),
                dense.values,
                scale,
                step_middle if is_step_time else None,
            )
        if each is not None:
            each(tag, dense, step_median if is_step_time else None)
        del dense  # before the next tag's table is made


def _taken(statistics: JobStatistics, tag: str, release: bool) -> Mapping[int, RankArrays]:
    """``tag``'s per-rank points in ``statistics.timings``; ``release``: left with none."""
    series = statistics.timings.get(tag, {})
    if release and tag in statistics.timings:
        statistics.timings[tag] = {}
    return series


def _divergence(fingerprints: Mapping[int, RankArrays]) -> Verdicts:
    verdicts: Verdicts = {
        "job/diverged_ranks": "",
        "job/diverged_first_step": NONE,
    }
    dense = dense_series(fingerprints)
    if len(dense.ranks) == 0:
        verdicts["job/divergence_check"] = "no_fingerprints"
        return verdicts
    if len(dense.ranks) == 1:
        verdicts["job/divergence_check"] = "one_rank"
        return verdicts
    present = ~np.isnan(dense.values)
    complete = np.flatnonzero(present.all(axis=1))
    if len(complete) == 0:
        verdicts["job/divergence_check"] = "no_common_step"
        return verdicts
    start = int(complete[0])
    first_row = dense.values[start]
    if not bool(np.all(first_row == first_row[0])):
        # Shards of a model-parallel job differ by design: nothing to compare.
        verdicts["job/divergence_check"] = "ranks_differ_at_start"
        return verdicts
    verdicts["job/divergence_check"] = "checked"
    diverged = _diverged_ranks(dense, start)
    if diverged:
        verdicts["job/diverged_ranks"] = _ranks_text(diverged)
        verdicts["job/diverged_first_step"] = _int_value(min(diverged.values()))
        for rank, step in sorted(diverged.items()):
            verdicts[f"job/diverged_step/{rank}"] = _int_value(step)
    return verdicts


def _diverged_ranks(dense: DenseSeries, start: int) -> dict[int, int]:
    """rank -> first step at which its fingerprint left the majority (steps after ``start``)."""
    values = dense.values[start + 1 :]
    steps = dense.steps[start + 1 :]
    present = ~np.isnan(values)
    counts = present.sum(axis=1)
    keep = counts > 0
    values, steps, present, counts = values[keep], steps[keep], present[keep], counts[keep]
    if len(values) == 0:
        return {}
    # A value held by more than half of a row is its middle value once sorted (NaN last).
    ordered = np.sort(values, axis=1)
    middle = ordered[np.arange(len(ordered)), (counts - 1) // 2]
    votes = (values == middle[:, None]).sum(axis=1)
    has_majority = 2 * votes > counts
    # Without a strict majority no rank can be singled out: all of them left it.
    left = present & ~((values == middle[:, None]) & has_majority[:, None])
    diverged: dict[int, int] = {}
    for column in np.flatnonzero(left.any(axis=0)).tolist():
        first_row = int(np.argmax(left[:, column]))
        diverged[int(dense.ranks[column])] = int(steps[first_row])
    return diverged


def _nonfinite_loss(statistics: JobStatistics) -> Verdicts:
    first = statistics.nonfinite_loss
    verdicts: Verdicts = {
        "job/nonfinite_loss_ranks": _ranks_text(first),
        "job/nonfinite_loss_first_step": _int_value(min(first.values())) if first else NONE,
    }
    for rank, step in sorted(first.items()):
        verdicts[f"job/nonfinite_loss_step/{rank}"] = _int_value(step)
    return verdicts


#: The longest exception name a verdict keeps (a class name; a longer one is cut).
MAX_EXCEPTION_NAME = 200
#: The step times a rank's recent step time is read from (:func:`recent_step_seconds`).
RECENT_STEPS = 64


def unwritten_steps(step_seconds: float | None) -> int:
    """How many of its last steps a rank whose steps take ``step_seconds`` may have kept
    unwritten when it was killed: the steps that end within
    :data:`STEP_TIME_WRITE_INTERVAL` seconds, at most :data:`STEP_TIME_WRITE_COUNT`; none
    where each step is written at its end (:data:`STEP_TIME_WRITE_AT_ONCE` seconds or
    more: a kill loses only the few milliseconds the writer thread takes); none when its
    step time is unknown (nothing says it kept any)."""
    if step_seconds is None or not math.isfinite(step_seconds) or step_seconds <= 0:
        return 0
    if step_seconds >= STEP_TIME_WRITE_AT_ONCE:
        return 0
    return min(STEP_TIME_WRITE_COUNT, math.ceil(STEP_TIME_WRITE_INTERVAL / step_seconds))


def recent_step_seconds(step_times: DenseSeries) -> dict[int, float]:
    """Each rank's quicker recent steps: the 10th percentile of its step times over its
    last :data:`RECENT_STEPS` steps (more of its steps fit in a second than its median
    says), from the step times' table; a rank with none finite is left out. One pass over
    the table's last rows of each rank, not a call per rank (0.9 s at 16,384 ranks)."""
    values = step_times.values
    finite = np.isfinite(values)
    timed = finite.any(axis=0) if values.size else np.zeros(values.shape[1], dtype=bool)
    if not timed.any():
        return {}
    columns = np.flatnonzero(timed)
    # Each rank's last timed row, and the RECENT_STEPS rows up to it (before row 0: none).
    last_row = len(values) - 1 - np.argmax(finite[::-1, columns], axis=0)
    rows = last_row[None, :] - np.arange(RECENT_STEPS)[:, None]
    recent = values[np.maximum(rows, 0), columns[None, :]].astype(np.float64)
    recent[(rows < 0) | ~np.isfinite(recent)] = np.nan
    # np.percentile's linear rule over each column's finite values, sorted first (NaN
    # sorts last): nanpercentile takes a Python call per column.
    ordered = np.sort(recent, axis=0)
    position = 0.1 * (np.isfinite(ordered).sum(axis=0) - 1)
    low = np.floor(position).astype(np.int64)
    high = np.ceil(position).astype(np.int64)
    below = np.take_along_axis(ordered, low[None, :], axis=0)[0]
    above = np.take_along_axis(ordered, high[None, :], axis=0)[0]
    quick = below + (position - low) * (above - below)
    return dict(zip(step_times.ranks[columns].tolist(), quick.tolist(), strict=True))


def _stops(
    statistics: JobStatistics,
    failed: Sequence[int] = (),
    unwritten: Mapping[int, int] | None = None,
    *,
    raised: Mapping[int, str] | None = None,
    raised_at: Mapping[int, tuple[str, float]] | None = None,
    terminated: Collection[int] = (),
    lost_peer: Collection[int] = (),
    interrupted: Collection[int] = (),
) -> Verdicts:
    """Each rank's last step, and the rank that stopped first when the evidence decides.

    ``unwritten``: rank -> how many of its last steps it may not have written when it
    was killed (:func:`unwritten_steps`; from its step times when not given). The last
    step names a rank only when no other rank may have stopped first: the rank's last
    step and all it may not have written come before every other rank's last step. A
    rank killed within a second of another does not come first by its files: the
    collector keeps up to a second of steps before writing them, and a rank whose
    exception wrote them while the launcher killed the others has the largest last step
    of all. Where several ranks may have stopped first, the one whose training raised
    (``raised``: rank -> the exception's name, from its stop record) is named when it
    alone of them did, or when it raised first of them all on one host (``raised_at``:
    rank -> its record's host and wall time; a peer's own exception, a connection its
    dead rank closed, comes after); else the launcher's report
    (``failed``: ranks it saw fail) decides when exactly one of them is in it; otherwise
    the verdict is "undetermined" (rank -1), never a guess toward the lowest rank. The
    last write time of the files does not decide either: in lock-step training the
    innocent ranks wait, without writing, for the one that dies.

    ``terminated``: the ranks whose training a SIGTERM stopped (their stop records): each
    wrote every step it ran, so none of its steps is unwritten, and it did not raise on
    its own. When every rank was sent SIGTERM (a scheduler's time limit, a preemption),
    none stopped first: the evidence is ``sigterm`` and no rank is named. Where only some
    were, they are listed (``job/sigterm_ranks``) and the rule above decides: a launcher
    sends SIGTERM to the ranks left when one dies (torchrun), and a scheduler may send it
    to one node's ranks, whose peers the launcher then kills.

    ``interrupted``: the ranks whose training a Ctrl-C (SIGINT) stopped (their stop
    records, written once the rank's files were closed): as ``terminated``, listed in
    ``job/sigint_ranks``; when every rank was (``mpiexec`` hands Ctrl-C to each), the
    evidence is ``sigint`` (``signal`` when some were sent SIGTERM and the rest SIGINT).

    ``lost_peer``: the ranks whose training raised on losing its connection to another
    rank (their stop records): their exceptions are consequences, not in ``raised``.
    Where the ranks that may have stopped first are such ranks and exactly one rank that
    left no stop record at all (not in ``raised``, ``terminated`` or ``lost_peer``: killed,
    as torchrun's workers are by the out-of-memory killer), that one is named
    (``lost_peer`` evidence, at its last recorded step): the others lost it.
    """
    last = {rank: step for rank, step in statistics.last_steps.items() if step is not None}
    raised = {} if raised is None else raised
    raised_at = {} if raised_at is None else raised_at
    if unwritten is None:
        quick = recent_step_seconds(dense_series(statistics.step_times))
        unwritten = {rank: unwritten_steps(seconds) for rank, seconds in quick.items()}
    signals = {**dict.fromkeys(terminated, "SIGTERM"), **dict.fromkeys(interrupted, "SIGINT")}
    sent = sorted(set(signals) & set(last))
    if sent:
        unwritten = {**unwritten, **dict.fromkeys(sent, 0)}
    verdicts: Verdicts = {
        f"job/last_step/{rank}": _int_value(step) for rank, step in sorted(last.items())
    }
    verdicts["job/stopped_first_rank"] = NONE
    verdicts["job/stopped_first_step"] = NONE
    verdicts["job/stopped_early_ranks"] = ""
    verdicts["job/stopped_first_evidence"] = ""
    stops = _StopRecords(raised, raised_at, set(signals), lost_peer)
    losing = sorted(set(lost_peer) & set(last))
    if losing:
        verdicts["job/lost_peer_ranks"] = ranges_text(losing)
    if sent:
        by_signal = {
            name: [rank for rank in sent if signals[rank] == name] for name in ("SIGTERM", "SIGINT")
        }
        for name, ranks in by_signal.items():
            if ranks:
                verdicts[f"job/{name.lower()}_ranks"] = ranges_text(ranks)
        if len(sent) == len(last):
            alone = [name for name, ranks in by_signal.items() if len(ranks) == len(sent)]
            verdicts["job/stopped_first_evidence"] = alone[0].lower() if alone else "signal"
            return verdicts
    if len(set(last.values())) > 1:
        earliest = min(last.values())
        latest = max(last.values())
        reach = {rank: step + unwritten.get(rank, 0) for rank, step in last.items()}
        # A rank may have stopped first unless another's last step is surely past its own:
        # unless its last step is past the least reach (the least-reaching rank's own last
        # step never is), one pass rather than a comparison per pair of ranks.
        least = min(reach.values())
        first = sorted(rank for rank, step in last.items() if step <= least)
        verdicts["job/stopped_first_step"] = _int_value(earliest)
        # Surely early: before the latest last step with all it may not have written.
        verdicts["job/stopped_early_ranks"] = _ranks_text(r for r in last if reach[r] < latest)
        if len(first) == 1:
            verdicts["job/stopped_first_rank"] = first[0]
            verdicts["job/stopped_first_evidence"] = "last_step"
        elif (named := _named(first, last, failed, stops)) is not None:
            verdicts.update(named)
        else:
            verdicts["job/stopped_first_evidence"] = "undetermined"
            verdicts["job/stopped_first_tied_ranks"] = ranges_text(first)
    elif last and (named := _named(sorted(last), last, failed, stops)) is not None:
        # Every rank reached the same step (lock-step launchers kill everyone within
        # a step, and a clean run looks the same): only the ranks' stop records, or the
        # launcher, can tell.
        verdicts.update(named)
    return verdicts


class _StopRecords(NamedTuple):
    """What the ranks' stop records say (:func:`_stops`' arguments of the same names)."""

    raised: Mapping[int, str]
    raised_at: Mapping[int, tuple[str, float]]
    signalled: Collection[int]  # ``terminated`` and ``interrupted``
    lost_peer: Collection[int]


def _named(
    first: Sequence[int], last: Mapping[int, int], failed: Sequence[int], stops: _StopRecords
) -> Verdicts | None:
    """The verdict naming one rank of ``first`` (the ranks that may have stopped first) by
    the ranks' stop records, else the launcher's report; None when none decides."""
    raising = [rank for rank in first if rank in stops.raised]
    named = _raised_first(raising, last, stops.raised, stops.raised_at)
    if named is not None:
        return named
    lost = _lost_by_the_others(first, stops.raised, stops.signalled, stops.lost_peer)
    if lost is not None:
        return {
            "job/stopped_first_rank": lost,
            "job/stopped_first_step": _int_value(last[lost]),
            "job/stopped_first_evidence": "lost_peer",
        }
    reported = [rank for rank in first if rank in set(failed)]
    if len(reported) == 1:
        return {
            "job/stopped_first_rank": reported[0],
            "job/stopped_first_step": _int_value(last[reported[0]]),
            "job/stopped_first_evidence": "launcher",
        }
    return None


def _lost_by_the_others(
    first: Sequence[int],
    raised: Mapping[int, str],
    signalled: Collection[int],
    lost_peer: Collection[int],
) -> int | None:
    """The one rank of ``first`` (the ranks that may have stopped first) that left no stop
    record, when each of the others raised on losing its connection to another rank; None
    when that does not decide (a rank of them raised on its own or was sent SIGTERM or
    SIGINT: either may have been the cause; two left no record; none lost a rank)."""
    losing = set(lost_peer)
    silent = [
        rank
        for rank in first
        if rank not in raised and rank not in signalled and rank not in losing
    ]
    if len(silent) != 1 or not any(rank in losing for rank in first):
        return None
    others = [rank for rank in first if rank != silent[0]]
    return silent[0] if all(rank in losing for rank in others) else None


def _raised_first(
    raising: Sequence[int],
    last: Mapping[int, int],
    raised: Mapping[int, str],
    raised_at: Mapping[int, tuple[str, float]],
) -> Verdicts | None:
    """The verdict naming the rank of ``raising`` (ranks that raised and may have stopped
    first) that raised first: the one rank, or of several on one host whose stop records
    give their times, the one whose record came first (``job/stopped_first_lead_seconds``
    before the next). None when that does not decide."""
    lead: float | None = None
    if len(raising) == 1:
        rank = raising[0]
    else:
        timed = [raised_at.get(rank) for rank in raising]
        hosts = {pair[0] for pair in timed if pair is not None}
        if not raising or None in timed or len(hosts) != 1:
            return None
        order = sorted((pair[1], rank) for rank, pair in zip(raising, timed, strict=True) if pair)
        if order[1][0] <= order[0][0]:  # two at one moment: nothing tells them apart
            return None
        rank, lead = order[0][1], order[1][0] - order[0][0]
    verdicts: Verdicts = {
        "job/stopped_first_rank": rank,
        "job/stopped_first_step": _int_value(last[rank]),
        "job/stopped_first_evidence": "exception",
        "job/stopped_first_exception": raised[rank][:MAX_EXCEPTION_NAME],
    }
    if lead is not None:
        verdicts["job/stopped_first_lead_seconds"] = lead
    return verdicts


def untimed_ranks(reported: Iterable[int], timed: Iterable[int]) -> Verdicts:
    """``job/untimed_ranks`` when a rank that reported recorded no timing at all.

    A rank whose collector has ``step_times=False`` (and no forward time or section):
    the straggler rule cannot judge it, and the job view says so (docs/job-view.md,
    "Verdicts"). Absent when every rank that reported has a timing.
    """
    untimed = sorted(set(reported) - set(timed))
    return {"job/untimed_ranks": ranges_text(untimed)} if untimed else {}


def _after_spans(
    evidence: StragglerEvidence,
    settings: VerdictSettings | None,
    ended: Sequence[tuple[str, int, int]],
) -> dict[tuple[str, int], int]:
    """:func:`job_verdicts`' onsets of the ranks of ``ended`` whose slowness is over: (timing
    tag, rank) -> the step after the latest such span, for every timing of ``evidence``."""
    settings = VerdictSettings() if settings is None else settings
    after: dict[int, int] = {}
    for tag, rank, since in ended:
        until = evidence.slowness_over(
            tag, rank, since, settings.cost_floor_share, settings.min_steps
        )
        if until is not None:
            after[rank] = max(until + 1, after.get(rank, until + 1))
    return {(tag, rank): step for rank, step in after.items() for tag in evidence.tags}


def job_verdicts(
    statistics: JobStatistics,
    *,
    world_size: int,
    missing: Sequence[int] = (),
    failed: Sequence[int] = (),
    evidence: StragglerEvidence | None = None,
    settings: VerdictSettings | None = None,
    onsets: Mapping[tuple[str, int], int] | None = None,
    ended: Sequence[tuple[str, int, int]] = (),
    raised: Mapping[int, str] | None = None,
    raised_at: Mapping[int, tuple[str, float]] | None = None,
    terminated: Collection[int] = (),
    lost_peer: Collection[int] = (),
    interrupted: Collection[int] = (),
) -> tuple[Verdicts, StepTimes]:
    """Every verdict of the job, and the per-step step-time figures they came from.

    ``evidence``: straggler evidence gathered elsewhere (blocks of steps reduced
    as they came, e.g. by a live view); without it, it comes from ``statistics``.
    ``onsets``: (timing tag, rank) -> the onset the live view named the rank with
    (``straggler_verdicts_since``). ``ended``: (timing tag, rank, onset) of each
    straggler verdict the live view ended: a rank whose slowness since that onset is
    over in the evidence (``StragglerEvidence.slowness_over``) is judged from the step
    after it under every timing, unless ``onsets`` gives it one (as the live view's
    own verdicts judge it at the end of training: ``TimingWatch.over_onsets``).
    ``raised``: rank -> the exception its training stopped on, ``raised_at``: rank ->
    (host, wall time) of its stop record, ``terminated``: the ranks a SIGTERM stopped,
    ``interrupted``: the ranks a Ctrl-C (SIGINT) stopped, ``lost_peer``: the ranks that
    raised on losing another rank (:func:`_stops`).
    """
    times = step_times(statistics)
    quick = recent_step_seconds(times.dense)
    unwritten = {rank: unwritten_steps(seconds) for rank, seconds in quick.items()}
    reported = [rank for rank, step in statistics.last_steps.items() if step is not None]
    # Ranges from the ranks that exist: world_size may come from a file (2**31 - 1).
    absent = missing_ranges([rank for rank in reported if rank not in set(missing)], world_size)
    absent += [(rank, rank) for rank in missing if rank >= world_size]
    verdicts: Verdicts = {
        "job/ranks_reported": len(reported),
        "job/missing_ranks": ranges_text(sorted(absent)),
    }
    evidence = evidence if evidence is not None else timing_evidence(statistics)
    verdicts.update(
        straggler_verdicts_since(
            evidence, settings, {**_after_spans(evidence, settings, ended), **(onsets or {})}
        )
    )
    verdicts.update(_skew(times))
    timed = {
        rank for by_rank in statistics.timings.values() for rank, (steps, _) in by_rank.items()
    }
    verdicts.update(untimed_ranks(reported, timed))
    verdicts.update(_divergence(statistics.fingerprints))
    gradients = GradientVerdicts()
    gradients.add(statistics.gradients)
    verdicts.update({key: _int_or_number(value) for key, value in gradients.verdicts().items()})
    verdicts.update(_nonfinite_loss(statistics))
    verdicts.update(
        _stops(
            statistics,
            failed,
            unwritten,
            raised=raised,
            raised_at=raised_at,
            terminated=terminated,
            lost_peer=lost_peer,
            interrupted=interrupted,
        )
    )
    return verdicts, times
