"""The straggler rule: paired per-step ratios, bounded evidence per (timing, rank), the verdict.

``docs/job-view.md`` ("Straggler") describes the rule; in two layers:

1. :func:`paired_ratios` over a block of steps of one timing tag: at each step,
   each rank's value divided by that step's median over the ranks (both plus
   a floor, see below; 0/0 is a ratio of 1; a step with fewer than 2 ranks is
   skipped). Pairing by step cancels what slows every rank at once (warm-up,
   evaluation, a loaded machine).
2. :class:`StragglerEvidence`: per (timing tag, rank) a fixed-bin histogram of
   the log2 ratios, how many steps it holds and at how many of them the rank
   was the one slowest rank. It is bounded (``BINS`` counts, whatever the
   length of the run) and mergeable (counts add up), across blocks of steps,
   intervals and groups of ranks, so it can travel up a tree; the median
   ratio of a rank is read from it (to ``BIN_WIDTH`` in log2, ~1 %).

The verdict (:func:`straggler_verdicts`), per timing: each rank's level is its
median ratio; the reference is the median level of the faster half of the
ranks; a rank whose level is at least ``1 + STRAGGLER_MARGIN`` times the
reference is a straggler. The faster half, not the median of all ranks: with
8 slow ranks of 16, the median sits between the two groups and would hide
both; and not the fastest rank alone, which is an extreme of the noise.

The floor: a timing that takes a negligible part of the step (a data wait of
5 us against 3 us in a 10 ms step) is noise, however large its ratio. Both
sides of each ratio get ``f`` added, ``STEP_FLOOR_SHARE`` of that step's
median step time but at least ``STEP_FLOOR_SECONDS``, so a timing names a
rank only when its excess is a material part of the step and more than a few
tens of microseconds (``(value + f) / (median + f)``): a callback that runs
on rank 0 alone between steps is not a slow data loader.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

__all__ = [
    "BINS",
    "BIN_WIDTH",
    "LOG2_LIMIT",
    "STEP_FLOOR_SECONDS",
    "STEP_FLOOR_SHARE",
    "STRAGGLER_MARGIN",
    "StragglerEvidence",
    "TimingEvidence",
    "paired_ratios",
    "row_medians",
    "straggler_verdicts",
]

#: A straggler's level is at least this much above the faster half's (0.2: 20 % slower).
STRAGGLER_MARGIN = 0.2
#: Each ratio's floor: this share of the step's median step time, added to both sides ...
STEP_FLOOR_SHARE = 0.05
#: ... and at least this many seconds.
STEP_FLOOR_SECONDS = 1e-4
#: Histogram bins are this wide in log2 of the ratio (2 ** (1/64): 1.1 %).
BIN_WIDTH = 1.0 / 64
#: Ratios beyond 2 ** +-LOG2_LIMIT fall into the first or last bin.
LOG2_LIMIT = 8.0
#: Bins of one histogram: underflow, 2 * LOG2_LIMIT / BIN_WIDTH regular bins, overflow.
BINS = int(2 * LOG2_LIMIT / BIN_WIDTH) + 2

_NONE = -1


def row_medians(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each row's median over its non-NaN values (NaN for a row with none): numpy's
    ``nanmedian(values, axis=1)``, in one sort.

    numpy's ``nanmedian`` handles small arrays row by row in Python; the job
    view calls this on (steps, ranks) blocks every interval and every merge.
    """
    table = np.asarray(values, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"values must be a (steps, ranks) array, got shape {table.shape}")
    if table.shape[1] == 0:
        return np.full(len(table), np.nan)
    ordered = np.sort(table, axis=1)  # NaN sorts last
    counts = (~np.isnan(table)).sum(axis=1)
    rows = np.arange(len(table))
    low = ordered[rows, np.maximum(counts - 1, 0) // 2]
    high = ordered[rows, counts // 2]
    with np.errstate(invalid="ignore"):
        medians = (low + high) / 2
    return np.where(counts > 0, medians, np.nan)


def paired_ratios(values: npt.ArrayLike, floor: npt.ArrayLike | None = None) -> FloatArray:
    """Each rank's value over the step's median over the ranks: ``(steps, ranks)`` ratios.

    ``values`` is ``(steps, ranks)`` with NaN where a rank has no point;
    ``floor`` (one number per step, default 0) is added to both sides. 0/0 is
    1; a positive value over a median of 0 is ``inf``. Rows with fewer than 2
    points, and absent points, are NaN.
    """
    table = np.asarray(values, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"values must be a (steps, ranks) array, got shape {table.shape}")
    ratios = np.full(table.shape, np.nan)
    present = ~np.isnan(table)
    usable = present.sum(axis=1) >= 2
    if not bool(np.any(usable)):
        return ratios
    rows = table[usable]
    median = row_medians(rows)
    if floor is not None:
        extra = np.broadcast_to(np.asarray(floor, dtype=np.float64), (len(table),))[usable]
        extra = np.where(np.isfinite(extra) & (extra > 0), extra, 0.0)
        rows = rows + extra[:, None]
        median = median + extra
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = rows / median[:, None]
    ratio = np.where((median[:, None] == 0) & (rows == 0), 1.0, ratio)
    ratio = np.where((median[:, None] == 0) & (rows > 0), np.inf, ratio)
    ratios[usable] = ratio
    return ratios


def _bins_of(ratios: FloatArray) -> IntArray:
    """The histogram bin of each (non-NaN) ratio."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log2(ratios)
    index = np.floor((logs + LOG2_LIMIT) / BIN_WIDTH) + 1
    index = np.where(np.isnan(logs), 0, index)  # negative ratios cannot occur; kept low
    bins: IntArray = np.clip(index, 0, BINS - 1).astype(np.int64)
    return bins


@dataclass
class TimingEvidence:
    """One (timing, rank): its log2-ratio histogram and how often it was the slowest."""

    histogram: IntArray = field(default_factory=lambda: np.zeros(BINS, dtype=np.int64))
    slowest: int = 0

    @property
    def steps(self) -> int:
        return int(self.histogram.sum())

    def median_ratio(self) -> float | None:
        """The median ratio, interpolated within its bin; None without a step."""
        total = self.steps
        if total == 0:
            return None
        cumulative = np.cumsum(self.histogram)
        half = total / 2.0
        index = int(np.searchsorted(cumulative, half, side="left"))
        if index == 0:
            return float(2.0**-LOG2_LIMIT)
        if index == BINS - 1:
            return float(2.0**LOG2_LIMIT)
        before = float(cumulative[index - 1]) if index > 0 else 0.0
        inside = float(self.histogram[index])
        share = (half - before) / inside if inside else 0.5
        log2 = -LOG2_LIMIT + (index - 1 + share) * BIN_WIDTH
        return float(2.0**log2)

    def merge(self, other: TimingEvidence) -> None:
        self.histogram = self.histogram + other.histogram
        self.slowest += other.slowest


class StragglerEvidence:
    """Per (timing tag, rank) :class:`TimingEvidence`: bounded, and mergeable in any order.

    Feed it blocks of steps with :meth:`add_ratios` (the ratios of
    :func:`paired_ratios`), fold other partial evidence in with :meth:`merge`,
    ship it with :meth:`to_arrays` / :meth:`from_arrays` (plain arrays and
    strings, no pickle), and judge it with :func:`straggler_verdicts`.
    """

    def __init__(self) -> None:
        self.entries: dict[tuple[str, int], TimingEvidence] = {}

    def add_ratios(self, tag: str, ranks: Iterable[int], ratios: npt.ArrayLike) -> None:
        """Add a ``(steps, ranks)`` block of ratios of ``tag`` (NaN: no point)."""
        table = np.asarray(ratios, dtype=np.float64)
        columns = [int(rank) for rank in ranks]
        if table.ndim != 2 or table.shape[1] != len(columns):
            raise ValueError(
                f"ratios must be a (steps, {len(columns)}) array for ranks {columns}, "
                f"got shape {table.shape}"
            )
        present = ~np.isnan(table)
        # The one slowest rank of a step (a tie at the top names nobody).
        filled = np.where(present, table, -np.inf)
        top = filled.max(axis=1, initial=-np.inf)
        at_top = (filled == top[:, None]) & present
        alone = at_top.sum(axis=1) == 1
        for column, rank in enumerate(columns):
            points = table[present[:, column], column]
            if len(points) == 0:
                continue
            entry = self.entries.setdefault((tag, rank), TimingEvidence())
            entry.histogram += np.bincount(_bins_of(points), minlength=BINS)
            entry.slowest += int(np.count_nonzero(at_top[:, column] & alone))

    def merge(self, other: StragglerEvidence) -> None:
        """Fold ``other`` in (other steps, other ranks, or both)."""
        for key, entry in other.entries.items():
            known = self.entries.get(key)
            if known is None:
                self.entries[key] = TimingEvidence(entry.histogram.copy(), entry.slowest)
            else:
                known.merge(entry)

    @property
    def tags(self) -> list[str]:
        return sorted({tag for tag, _ in self.entries})

    def levels(self, tag: str) -> dict[int, float]:
        """rank -> median ratio of ``tag``, for the ranks with a step of it."""
        found: dict[int, float] = {}
        for (entry_tag, rank), entry in self.entries.items():
            if entry_tag == tag:
                median = entry.median_ratio()
                if median is not None:
                    found[rank] = median
        return dict(sorted(found.items()))

    def to_arrays(self) -> dict[str, object]:
        """A data-only form: ``tags`` (list of str), ``ranks``, ``slowest`` and ``histograms``."""
        keys = sorted(self.entries)
        return {
            "tags": [tag for tag, _ in keys],
            "ranks": np.array([rank for _, rank in keys], dtype=np.int64),
            "slowest": np.array([self.entries[key].slowest for key in keys], dtype=np.int64),
            "histograms": (
                np.stack([self.entries[key].histogram for key in keys])
                if keys
                else np.zeros((0, BINS), dtype=np.int64)
            ),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, object]) -> StragglerEvidence:
        """The evidence :meth:`to_arrays` gave; ValueError when malformed."""
        tags = arrays.get("tags")
        ranks = np.asarray(arrays.get("ranks"), dtype=np.int64).reshape(-1)
        slowest = np.asarray(arrays.get("slowest"), dtype=np.int64).reshape(-1)
        histograms = np.asarray(arrays.get("histograms"), dtype=np.int64)
        if (
            not isinstance(tags, list)
            or not all(isinstance(tag, str) for tag in tags)
            or len(tags) != len(ranks)
            or len(slowest) != len(ranks)
            or histograms.shape != (len(ranks), BINS)
        ):
            raise ValueError("straggler evidence arrays are malformed")
        evidence = cls()
        for tag, rank, count, histogram in zip(tags, ranks, slowest, histograms, strict=True):
            evidence.merge_entry(tag, int(rank), TimingEvidence(histogram.copy(), int(count)))
        return evidence

    def merge_entry(self, tag: str, rank: int, entry: TimingEvidence) -> None:
        known = self.entries.get((tag, rank))
        if known is None:
            self.entries[(tag, rank)] = entry
        else:
            known.merge(entry)


def _faster_half_reference(levels: Mapping[int, float]) -> float:
    ordered = sorted(levels.values())
    return float(np.median(ordered[: (len(ordered) + 1) // 2]))


def straggler_verdicts(evidence: StragglerEvidence) -> dict[str, float | int | str]:
    """The straggler keys of the merged lineage, from the evidence of every timing.

    ``job/straggler_ranks`` (every rank whose level on some timing is at least
    ``1 + STRAGGLER_MARGIN`` times the faster half's), ``job/straggler_rank``
    (the worst: the largest such factor; -1 when none), ``job/straggler_timing``
    (the timing that named the worst; "" when none), and when flagged
    ``job/straggler_excess`` (its factor minus 1), ``job/straggler_slowest_share``
    (share of that timing's steps where it was the one slowest rank) and per
    flagged rank ``job/straggler_timing/<rank>`` and ``job/straggler_excess/<rank>``.
    """
    worst_by_rank: dict[int, tuple[float, str]] = {}
    for tag in evidence.tags:
        levels = evidence.levels(tag)
        if len(levels) < 2:
            continue
        reference = _faster_half_reference(levels)
        for rank, level in levels.items():
            factor = level / reference if reference > 0 else (1.0 if level == 0 else np.inf)
            if factor >= 1.0 + STRAGGLER_MARGIN:
                known = worst_by_rank.get(rank)
                # The largest factor names the timing; a tie keeps the earlier tag.
                if known is None or factor > known[0]:
                    worst_by_rank[rank] = (float(factor), tag)
    verdicts: dict[str, float | int | str] = {
        "job/straggler_rank": _NONE,
        "job/straggler_ranks": ",".join(str(rank) for rank in sorted(worst_by_rank)),
        "job/straggler_timing": "",
    }
    if not worst_by_rank:
        return verdicts
    worst = min(worst_by_rank, key=lambda rank: (-worst_by_rank[rank][0], rank))
    factor, tag = worst_by_rank[worst]
    entry = evidence.entries[(tag, worst)]
    verdicts["job/straggler_rank"] = worst
    verdicts["job/straggler_timing"] = tag
    verdicts["job/straggler_excess"] = factor - 1.0
    verdicts["job/straggler_slowest_share"] = entry.slowest / max(entry.steps, 1)
    for rank, (rank_factor, rank_tag) in sorted(worst_by_rank.items()):
        verdicts[f"job/straggler_timing/{rank}"] = rank_tag
        verdicts[f"job/straggler_excess/{rank}"] = rank_factor - 1.0
    return verdicts
