"""The straggler rule: what each rank's excess costs the job, bounded evidence, the verdicts.

``docs/job-view.md`` ("Straggler") describes the rule; in three layers:

1. Per timing and step, each rank's **excess**: its time minus the median of
   the *other* ranks at that step (:func:`others_medians`), in seconds and as a
   share of that step's median step time, each clipped to
   ``CLIPSHARE`` steps so one pause of one rank cannot outweigh a run. In a
   synchronous job every rank waits for the slowest in each collective, so a
   rank's mean excess is what the job would save a step if it ran at the
   others' median: its **cost**. Pairing by step cancels what slows every rank
   at once (warm-up, checkpoints, a loaded machine).
2. :class:`StragglerEvidence`: per (timing, rank), sums over blocks of steps
   (count, excess share and its square, excess seconds, the others' median as
   a share, how often the rank was the one slowest, how often its excess
   was above a few fixed shares of the step, ``EDGES``: a coarse histogram, and
   the excess's Fourier components at periods of 2 to 8 steps, ``PERIODS``, and
   the job's step time), and what the job waited for each step's latest rank
   (its leads, ``LEADS``), kept at that rank alone. At most
   ``MAX_BLOCKS`` blocks per timing (the block size doubles when a run grows;
   a run's fewer past 8,192 ranks, :func:`blocks_for`), so it is bounded whatever
   the length of the run and, up to 65,536 ranks, the ranks, and mergeable (sums add
   up) across blocks of steps, intervals and groups of ranks: it travels up a
   tree of ranks.
3. The verdict (``_straggler_verdicts.py``) reads each timing's
   :class:`TagTotals` (its evidence walked once, or made straight from one window
   of steps by :func:`window_totals`, without the blocks): per rank, the onset is
   the block from which its excess to the end is clearest (a change point); over the
   steps since then a rank is named when its cost reaches the floor
   (``VerdictSettings.cost_floor_share`` of the step and
   ``cost_floor_seconds``), its excess reaches the floor in at least half of
   those steps (its median excess: descheduling stalls of a few ms in some
   steps raise the mean, not the median) *and* the evidence is clear. A tiny
   but consistent difference (40 us in a 3 ms step, or 100 us with stalls on
   a busy machine) is therefore never a verdict, and noise that happens to
   lean one way for a while is not either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

    BoolArray = npt.NDArray[np.bool_]
    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    #: A ``(steps, ranks)`` table of timings: float64, or float32 as read from summary files.
    TableArray = npt.NDArray[np.floating[Any]]

__all__ = [
    "ABOVE_EDGES",
    "BLOCK_CELLS",
    "BLOCK_SIZES",
    "CLIPSHARE",
    "COUNT",
    "EDGES",
    "FIELDS",
    "LEADS",
    "LEAD_EDGES",
    "LEAD_FIELDS",
    "LONG_LEADS",
    "MAX_BLOCKS",
    "MIN_BLOCKS",
    "PERIODIC",
    "PERIODS",
    "REFERENCE",
    "SECONDS",
    "SHARE",
    "SLOWEST",
    "SQUARE",
    "STEP_SECONDS",
    "TOP_LEADS",
    "TOP_SIZES",
    "WALL_FIELDS",
    "StragglerEvidence",
    "TagEvidence",
    "TagTotals",
    "add_since",
    "add_timings_with_middle",
    "blocks_for",
    "middle_medians",
    "others_medians",
    "paired_ratios",
    "row_medians",
    "row_middles",
    "tag_sums",
    "tag_totals",
    "window_evidence",
    "window_totals",
]

#: A step's excess counts at most this many steps (one rank's pause, a one-off spike).
CLIPSHARE = 1.0
#: Blocks of steps kept per (timing, rank); the block size doubles beyond.
MAX_BLOCKS = 32
#: (rank, block) pairs of sums a run's evidence keeps per timing (:func:`blocks_for`):
#: ``MAX_BLOCKS`` blocks a rank up to 8,192 ranks, half as many for each doubling beyond (16
#: at 16,384 ranks, 8 at 32,768, 4 at 65,536), so a timing's sums stay within
#: ``BLOCK_CELLS x FIELDS`` numbers (54.5 MB) up to 65,536 ranks: rank 0 of a live view
#: holds them beside its window and a round's points, which grow with the ranks.
BLOCK_CELLS = 1 << 18
#: The fewest blocks a run's evidence keeps per (timing, rank), whatever the ranks (beyond
#: 65,536 ranks its sums grow with them again): a verdict's onset is a block's.
MIN_BLOCKS = 4

#: The excess shares of the step at which steps are counted (``ABOVE_EDGES``): how often a
#: rank's excess reaches a cost floor, whatever the floor a verdict is asked with.
EDGES = (0.01, 0.02, 0.05, 0.10)

#: The sums kept per (timing, rank, block), in this order along the last axis: steps,
#: excess share, its square, excess seconds, the others' median as a share, steps as the
#: one slowest rank, steps above the others' median, then steps whose
#: excess share is above each of ``EDGES`` (from ``ABOVE_EDGES`` on), then for each
#: period ``k`` of ``PERIODS`` (from ``PERIODIC`` on, two fields each) the excess share
#: weighted by the cosine and the sine of ``2 pi step / k``: its Fourier component at
#: that period, which a rank slow every k-th step has and stalls at random do not. The
#: weights depend on the step number alone, so these sums add up exactly too.
COUNT, SHARE, SQUARE, SECONDS, REFERENCE, SLOWEST, ABOVE = range(7)
ABOVE_EDGES = 7
#: The periods (steps) whose Fourier components are kept: every 2nd to 8th step.
PERIODS = (2, 3, 4, 5, 6, 7, 8)
PERIODIC = ABOVE_EDGES + len(EDGES)
#: Last, the wall clock (what the job waits for): ``STEP_SECONDS``, the job's step time
#: summed over the rank's steps.
STEP_SECONDS = PERIODIC + 2 * len(PERIODS)
FIELDS = STEP_SECONDS + 1
#: The weighted fields (the Fourier components), made of each step's excess share by one
#: product (:func:`_add_weighted`), not summed as they are.
_WEIGHTED = slice(PERIODIC, STEP_SECONDS)

#: The leads, kept apart from the sums above (``TagEvidence.leads``): what the job waited
#: for the step's latest rank, summed at that rank. From ``LEADS`` on, for each size ``b``
#: of ``BLOCK_SIZES``, the seconds by which the step's latest block of ``b`` consecutive
#: ranks (those of one ``rank // b``: a node's, when ranks are laid out node by node) led
#: the latest of the other blocks. For ``b = 1``: its lead over the next-latest rank, what
#: everyone waited for it alone. Then, from ``TOP_LEADS`` on, for each ``g`` of
#: ``TOP_SIZES``, by how much the step's latest rank led the ``g + 1``-th latest: what the
#: job waited for a few slow ranks that are not one block, when they are the step's latest
#: ``g``. Made from whole steps (every rank's value at the step: rank 0's evidence of the
#: job), they add up over blocks of steps and intervals like the sums. Every rank but a
#: step's latest has none at that step, so only the (rank, block) pairs with a latest step
#: are kept: at most one per step, and never more than the ranks' blocks.
LEADS = 0
#: The block sizes whose lead is kept: a rank, nodes of 2 to 16, a quarter of 1,024 or of
#: 16,384 ranks.
BLOCK_SIZES = (1, 2, 4, 8, 16, 64, 256, 1024, 4096)
TOP_LEADS = LEADS + len(BLOCK_SIZES)
TOP_SIZES = (2, 3, 4)
#: Last, from ``LONG_LEADS`` on, for each ``e`` of ``LEAD_EDGES``: the episodes in which the
#: latest rank led the next-latest by more than ``e`` steps, a step being what the step
#: would have taken without waiting for it (its step time less the lead: in a synchronous
#: job the step ends after its latest arrival, so its step time holds the lead). Counts of
#: runs of such steps of one rank, :func:`_long_leads`: a rank stalled 150 ms in some steps
#: of 10 ms leads by 15 steps in each, which no rank's noise of the others does; the
#: verdict compares a rank's counts with the others'.
LONG_LEADS = TOP_LEADS + len(TOP_SIZES)
LEAD_EDGES = (0.5, 1.0, 2.0, 4.0)
LEAD_FIELDS = LONG_LEADS + len(LEAD_EDGES)


@dataclass
class _Runs:
    """Where one timing's long leads stood at the last step added (:func:`_long_leads`):
    that step, its latest rank (-1: none) and whether it led by each of ``LEAD_EDGES``;
    so a run that goes on into the next block of steps added (a live view's next
    interval) is still one episode, as it is when the steps come at once."""

    step: int = -(2**63)
    rank: int = -1
    long: tuple[bool, ...] = (False,) * len(LEAD_EDGES)


def row_medians(values: TableArray) -> FloatArray:
    """Each row's median over its non-NaN values (NaN for a row with none): numpy's
    ``nanmedian(values, axis=1)``, in one partition (rows without NaN: the usual case)
    or one sort.

    numpy's ``nanmedian`` handles small arrays row by row in Python; the job
    view calls this on (steps, ranks) blocks every interval and every merge (at 16,384
    ranks x 300 steps: 0.15 s sorted, 0.06 s partitioned; the same values). A float32
    table is read as it is, a few rows at a time (the medians are float64: the same).
    """
    table = _float_table(values)
    if table.ndim != 2:
        raise ValueError(f"values must be a (steps, ranks) array, got shape {table.shape}")
    if table.shape[1] == 0:
        return np.full(len(table), np.nan)
    medians = np.empty(len(table))
    step = max(1, (1 << 20) // table.shape[1])  # rows sorted at once: a sort of ~8 MB
    for start in range(0, len(table), step):
        part = table[start : start + step]
        if not bool(np.isnan(part).any()):
            # The two middle order statistics in place, the rest unordered around them.
            low_at, high_at = (part.shape[1] - 1) // 2, part.shape[1] // 2
            middle = np.partition(part, (low_at, high_at), axis=1)
            low, high = _wide(middle[:, low_at]), _wide(middle[:, high_at])
            with np.errstate(invalid="ignore"):  # -inf and inf: NaN, as nanmedian
                medians[start : start + step] = (low + high) / 2
            continue
        ordered = np.sort(part, axis=1)  # NaN sorts last
        counts = (~np.isnan(part)).sum(axis=1)
        rows = np.arange(len(part))
        low = _wide(ordered[rows, np.maximum(counts - 1, 0) // 2])
        high = _wide(ordered[rows, counts // 2])
        with np.errstate(invalid="ignore"):
            medians[start : start + step] = np.where(counts > 0, (low + high) / 2, np.nan)
    return medians


def _float_table(values: npt.ArrayLike) -> TableArray:
    """``values`` as a float32 array where it is one (every timing read from a summary
    file is: half the memory of its table), else as float64."""
    table = np.asarray(values)
    return table if table.dtype == np.float32 else np.asarray(table, dtype=np.float64)


def _wide(values: TableArray) -> FloatArray:
    """``values`` in float64 (float32 widened exactly): what every sum and difference of
    the rule is computed in, whatever the table's type."""
    return np.asarray(values, dtype=np.float64)


def others_medians(values: npt.ArrayLike) -> FloatArray:
    """Each point's reference: the median of the *other* ranks' points at its step.

    ``values`` is ``(steps, ranks)`` with NaN where a rank has no point. The
    result has the same shape: NaN where the point is absent or no other rank
    has a point at the step. One sort per call (vectorised over every row).
    """
    table = np.asarray(values, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"values must be a (steps, ranks) array, got shape {table.shape}")
    result = np.full(table.shape, np.nan)
    if table.size == 0:
        return result
    if table.shape[1] >= 3 and not bool(np.isnan(table).any()):
        return _full_others_medians(table)
    order = np.argsort(table, axis=1, kind="stable")  # NaN last
    ordered = np.take_along_axis(table, order, axis=1)
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(table.shape[1])[None, :], axis=1)
    counts = (~np.isnan(table)).sum(axis=1, keepdims=True)
    others = counts - 1  # each present point's others
    low = np.maximum(others - 1, 0) // 2
    high = others // 2
    # Index k among the others is k in the full order, or k + 1 at or after the point.
    low_full = np.clip(low + (low >= position), 0, table.shape[1] - 1)
    high_full = np.clip(high + (high >= position), 0, table.shape[1] - 1)
    median = (
        np.take_along_axis(ordered, low_full, axis=1)
        + np.take_along_axis(ordered, high_full, axis=1)
    ) / 2
    usable = ~np.isnan(table) & (others >= 1)
    result[usable] = median[usable]
    return result


def _full_others_medians(table: FloatArray) -> FloatArray:
    """:func:`others_medians` of a table without NaN and of 3 ranks or more, from the few
    order statistics around the middle (a partition, not a sort: linear in the ranks).

    With ``n - 1`` others, their median is the mean of their ``low`` and ``high``
    order statistics; a point at or below the full row's ``low`` one shifts both up
    by one, a point at or above its ``high + 1`` one shifts neither, a point between
    (an even count of others) shifts the high one only. Tied values give the same
    medians whichever way the tie falls.
    """
    return _others_from(table, _middle_of(table))


#: A row's order statistics around its middle (each ``(rows, 1)``): at and above the
#: ``low`` one of the others, at and above their ``high`` one (_full_others_medians).
Middle = tuple["FloatArray", "FloatArray", "FloatArray", "FloatArray"]


def _middle_of(table: TableArray) -> Middle:
    """The order statistics :func:`_others_from` needs, of each row (in float64, float32
    widened exactly): the others' ``low`` and the next one or two (:func:`_selected`)."""
    others = table.shape[1] - 1
    low, high = (others - 1) // 2, others // 2
    ordered = _selected(table, low, 2 if high == low else 3)
    at_low, above_low = ordered[:, 0:1], ordered[:, 1:2]
    if high == low:
        return at_low, above_low, at_low, above_low
    # high == low + 1
    return at_low, above_low, above_low, ordered[:, 2:3]


#: Rows at least this wide have their middle order statistics selected among the points
#: near a sample's middle (:func:`_selected`); narrower ones are partitioned whole.
_SAMPLED_WIDTH = 4096
#: ... a sample of every this many points (a 16,384-rank row: 2,048 points).
_SAMPLE_STRIDE = 8
#: ... the points kept around the sample's middle: this many of its standard deviations
#: (that of the sample's rank of a middle order statistic, ``sqrt(points) / 2``) on each
#: side. A row whose wanted order statistics fall outside them (about 6 in 10^5 rows per
#: side at 4, for points in random order; ties or a sorted row make it likelier) is
#: partitioned whole: the values are the same either way.
_SAMPLE_DEVIATIONS = 4.0


def _selected(table: TableArray, first: int, count: int) -> FloatArray:
    """Each row's order statistics ``first`` to ``first + count - 1`` (``(rows, count)``
    float64) of a table without NaN: what ``np.partition`` of each row puts there.

    A wide row (:data:`_SAMPLED_WIDTH`) is not partitioned whole: a sample of it is, for
    two bounds around its middle; the points between them (a few thousand of 16,384) are
    then partitioned, and the points below the lower bound counted, which says where the
    wanted ones are among them. Three passes of comparisons over the row for a selection
    among its every point (0.6x the time at 16,384 ranks)."""
    wanted = range(first, first + count)
    rows, width = table.shape
    if width < _SAMPLED_WIDTH:
        return _wide(np.partition(table, wanted, axis=1)[:, first : first + count])
    sample = table[:, ::_SAMPLE_STRIDE]
    points = sample.shape[1]
    centre = first * points / width
    margin = _SAMPLE_DEVIATIONS * np.sqrt(points) / 2 + 1
    low_at = max(int(centre - margin), 0)
    high_at = min(int(centre + margin) + count, points - 1)
    bounds = np.partition(sample, (low_at, high_at), axis=1)
    below = table < bounds[:, low_at : low_at + 1]
    between = table <= bounds[:, high_at : high_at + 1]
    between ^= below  # below the lower bound implies below the upper
    # Counted as bytes into 32 bits (a row's width fits), and gathered by np.compress:
    # the same counts and points as the booleans' sums and table[between], in half and
    # two thirds of the time.
    before = below.view(np.uint8).sum(axis=1, dtype=np.uint32).astype(np.int64)
    sizes = between.view(np.uint8).sum(axis=1, dtype=np.uint32).astype(np.int64)
    values = np.compress(between.reshape(-1), table)  # row after row
    ends = np.cumsum(sizes)
    result = np.empty((rows, count))
    for row in range(rows):
        at = int(first - before[row])
        size = int(sizes[row])
        if at >= 0 and at + count <= size:
            candidates = values[int(ends[row]) - size : int(ends[row])]
            result[row] = np.partition(candidates, range(at, at + count))[at : at + count]
        else:
            result[row] = np.partition(table[row], wanted)[first : first + count]
    return result


#: Below this magnitude a float64 ``x + x`` is finite, so ``(x + x) / 2 == x`` exactly.
_HALF_MAX = float(np.finfo(np.float64).max) / 2


def _halves_exactly(*order_statistics: FloatArray) -> bool:
    """Whether every value of these (a few a row) is NaN or below :data:`_HALF_MAX` in
    magnitude: then ``(x + x) / 2`` gives each back exactly (NaN stays NaN)."""
    with np.errstate(invalid="ignore"):
        return all(not bool((np.abs(part) >= _HALF_MAX).any()) for part in order_statistics)


def _others_from(
    table: TableArray, middle: Middle, shape: _MiddleShape | None = None
) -> FloatArray:
    """Each point's others' median from its row's :func:`_middle_of` (any of its columns;
    ``shape``: :func:`_middle_shape` of ``middle``, where the caller made it once)."""
    at_low, above_low, at_high, above_high = middle
    one_term, halves = shape if shape is not None else _middle_shape(middle)
    if one_term:
        # An odd count of others: their one middle order statistic, the row's ``low`` or
        # the one above it. The two terms below are then one (the same sum and division),
        # unless the two are zeros of either sign.
        one = _pick(table <= at_low, above_low, at_low)
        # (x + x) / 2 is x itself unless x + x overflows: the two passes only then.
        if not halves:
            np.add(one, one, out=one)
            one /= 2
        return one
    below = table <= at_low
    above = table >= above_high
    first = _pick(below, above_low, at_low)
    second = _pick(above, at_high, above_high)
    with np.errstate(invalid="ignore"):  # -inf and inf: NaN, as np.median
        result: FloatArray = (first + second) / 2
    return result


def _pick(mask: BoolArray, chosen: FloatArray, other: FloatArray) -> FloatArray:
    """``np.where(mask, chosen, other)`` for ``chosen`` and ``other`` of one number a row
    (``(rows, 1)`` float64) and a ``(rows, columns)`` mask: each point's bits are
    ``other``'s, with those that differ from ``chosen``'s flipped where the mask is set.
    The same numbers, bit for bit (NaN and signed zeros too), in a third of the time
    (np.where of columns broadcast along the rows steps through them point by point)."""
    other_bits = other.view(np.uint64)
    bits = mask.view(np.uint8).astype(np.uint64)
    np.negative(bits, out=bits)  # 1 -> every bit set
    bits &= chosen.view(np.uint64) ^ other_bits
    bits ^= other_bits
    picked: FloatArray = bits.view(np.float64)
    return picked


#: Of a table's :func:`_middle_of`: whether each point's others' median is one order
#: statistic (an odd count of others, no row's two middle ones both zeros), and whether
#: those halve exactly (:func:`_halves_exactly`).
_MiddleShape = tuple[bool, bool]


def _middle_shape(middle: Middle) -> _MiddleShape:
    """:data:`_MiddleShape` of ``middle`` (a few numbers a row: made once a table)."""
    at_low, above_low, at_high, _ = middle
    one_term = at_high is at_low and not bool(np.any((at_low == 0) & (above_low == 0)))
    return one_term, one_term and _halves_exactly(at_low, above_low)


def paired_ratios(values: npt.ArrayLike, floor: npt.ArrayLike | None = None) -> FloatArray:
    """Each rank's value over the step's median over the ranks: ``(steps, ranks)`` ratios.

    ``values`` is ``(steps, ranks)`` with NaN where a rank has no point;
    ``floor`` (one number per step, default 0) is added to both sides. 0/0 is
    1; a positive value over a median of 0 is ``inf``. Rows with fewer than 2
    points, and absent points, are NaN. (A reading aid; the verdict judges
    excess times, not ratios.)
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


def _no_ints() -> IntArray:
    return np.zeros(0, dtype=np.int64)


def _no_leads() -> FloatArray:
    return np.zeros((0, LEAD_FIELDS))


@dataclass
class TagEvidence:
    """One timing's sums: ``blocks[rank index, block, field]`` (fields ``COUNT`` ...
    ``STEP_SECONDS``); block b covers steps ``[(first_block + b) * block_size, ... + block_size)``.

    Its leads (``LEADS`` ...) where a rank had a step's latest point: ``leads[entry]`` is
    their sum over block ``lead_blocks[entry]`` at rank ``lead_ranks[entry]``, one entry
    per such (rank, block), in the order of rank, then block."""

    ranks: IntArray
    block_size: int
    first_block: int
    blocks: FloatArray  # (ranks, blocks, FIELDS)
    first_step: int
    last_step: int
    lead_ranks: IntArray = field(default_factory=_no_ints)
    lead_blocks: IntArray = field(default_factory=_no_ints)
    leads: FloatArray = field(default_factory=_no_leads)  # (entries, LEAD_FIELDS)
    #: The array ``blocks`` is the first blocks of, with room for all the blocks kept (None:
    #: none yet); merges widen and coarsen the evidence within it.
    room: FloatArray | None = field(default=None, repr=False, compare=False)

    def lead_sums(self, ranks: IntArray, since: IntArray | None = None) -> FloatArray:
        """Per rank of ``ranks`` (distinct), its leads summed over the blocks in their
        order (0 for a rank without any), or over the blocks since step ``since`` of that
        rank (:func:`blocks_since`): ``(ranks, LEAD_FIELDS)``."""
        return _lead_sums(self, ranks, None if since is None else self.blocks_since(since))

    def blocks_since(self, since: IntArray) -> IntArray:
        """:func:`blocks_since` of this evidence's blocks."""
        blocks = self.blocks.shape[1]
        return blocks_since(self.first_block, self.block_size, self.first_step, blocks, since)


class _Leads(Protocol):
    """Where a timing's leads are (:class:`TagEvidence`, :class:`TagTotals`)."""

    block_size: int
    first_block: int
    lead_ranks: IntArray
    lead_blocks: IntArray
    leads: FloatArray


def _lead_sums(part: _Leads, ranks: IntArray, from_block: IntArray | None) -> FloatArray:
    """:meth:`TagEvidence.lead_sums` of ``part``'s leads: over every block, or per rank of
    ``ranks`` over its blocks from ``from_block`` (an index among ``part``'s) on."""
    sums = np.zeros((len(ranks), LEAD_FIELDS))
    if len(ranks) == 0 or len(part.lead_ranks) == 0:
        return sums
    order = np.argsort(ranks, kind="stable")
    ordered = ranks[order]
    position = np.minimum(np.searchsorted(ordered, part.lead_ranks), len(ordered) - 1)
    keep = ordered[position] == part.lead_ranks
    rows = order[position]
    if from_block is not None:
        keep &= part.lead_blocks >= from_block[rows]
    # One entry after another: each rank's in the order of its blocks, as they add up.
    np.add.at(sums, rows[keep], part.leads[keep])
    return sums


def blocks_since(
    first_block: int, block_size: int, first_step: int, blocks: int, since: IntArray
) -> IntArray:
    """Per step of ``since``, the first of ``blocks`` blocks of ``block_size`` steps (from
    block ``first_block``; the first from step ``first_step``) that begins at or after it,
    so that the sums from there on hold no step before it; where none does (a step
    within the last block), the last; ``blocks`` for a step after them all.

    A verdict's cost since an onset the live view gave, which lies within a block of the
    whole run's: from the block holding it, that block's steps before the onset counted
    as the slowness's (a rank slow from step 501 of 1,500 in blocks of 64, named since
    504, was said to cost 1.81 ms a step for the 1.92 its job waited, the 53 steps of
    block 448-511 before its slowness in the mean); from the next block, the mean is over
    steps since the onset alone. An onset at a block's first step (the whole run's own,
    or the evidence's first step) is that block either way."""
    starts = np.maximum((first_block + np.arange(blocks)) * block_size, first_step)
    after: IntArray = np.searchsorted(starts, since)
    end = (first_block + blocks) * block_size
    last = np.where(since < end, blocks - 1, blocks) if blocks else np.zeros_like(after)
    chosen: IntArray = np.where(after < blocks, after, last)
    return chosen


#: The sums the wall clock reads per block (``TagTotals.wall_blocks``), in this order.
WALL_FIELDS = (COUNT, SLOWEST, STEP_SECONDS)
#: Each of ``WALL_FIELDS``' sums per rank and block (``(ranks, blocks)``, any strides).
WallBlocks = tuple["FloatArray", "FloatArray", "FloatArray"]


@dataclass
class TagTotals:
    """One timing's evidence as its verdict reads it: per rank, its **onset** (the block
    from which its excess to the end is the clearest: the sum of its excess share over
    the square root of its steps, the change-in-mean statistic), its sums from the
    onset's block on (``since``) and over every block (``whole``), each ``(ranks,
    FIELDS)``; its blocks' sums of ``WALL_FIELDS`` (``wall_blocks[i][rank, block]`` for
    the i-th: views of the evidence's own blocks, or a window's, where every rank's count
    and step time a block, being the same, are one row read for each); and the leads, as
    in :class:`TagEvidence`.

    Made from evidence (:func:`tag_totals`) or straight from one window of steps
    (:func:`window_totals`: no array of every field of every block is made); the same
    numbers either way (a window's periodic sums, where it leaves them out, through
    :meth:`periodic_since`)."""

    ranks: IntArray
    block_size: int
    first_block: int
    first_step: int
    onset: IntArray
    since: FloatArray
    whole: FloatArray
    wall_blocks: WallBlocks
    lead_ranks: IntArray
    lead_blocks: IntArray
    leads: FloatArray
    #: Where ``since`` leaves the periodic sums out (:func:`window_totals`, asked for them
    #: later): rows -> those rows' sums from ``PERIODIC`` on, made then.
    periodic: Callable[[IntArray], FloatArray] | None = field(
        default=None, repr=False, compare=False
    )

    def lead_sums(self, ranks: IntArray, since: IntArray | None = None) -> FloatArray:
        """As :meth:`TagEvidence.lead_sums`."""
        return _lead_sums(self, ranks, None if since is None else self.blocks_since(since))

    def blocks_since(self, since: IntArray) -> IntArray:
        """:func:`blocks_since` of these totals' blocks."""
        blocks = self.wall_blocks[0].shape[1]
        return blocks_since(self.first_block, self.block_size, self.first_step, blocks, since)

    def periodic_since(self, rows: IntArray) -> FloatArray:
        """The sums from ``PERIODIC`` on (the Fourier components, up to ``STEP_SECONDS``)
        since the onset of each rank of ``rows`` (rows of ``ranks``): ``(rows, 2 x
        len(PERIODS))``, ``since``'s or, where its totals left them out, made now for
        these ranks alone (the same numbers)."""
        if self.periodic is None:
            periodic: FloatArray = self.since[rows, _WEIGHTED]
            return periodic
        return self.periodic(rows)


#: Ranks whose blocks are walked at once (:func:`_walk`): 2 MB of evidence at 32 blocks,
#: which stays in the cache while it is read.
_WALK_RANKS = 256


def _walk(blocks: FloatArray) -> tuple[IntArray, FloatArray, FloatArray]:
    """Per rank of ``blocks`` (``(ranks, blocks, fields)``, evidence's): the onset block,
    the sums from it on and the sums over every block (:class:`TagTotals`).

    Each rank's sums add its blocks one after another from the first: the same numbers
    as one ``blocks.sum(axis=1)`` (numpy adds along an axis that is not the innermost in
    that order), and as :func:`_walk_by_rank_last` gives of the same sums laid out
    otherwise (a window's). :data:`_WALK_RANKS` ranks at a time, read once (16,384
    ranks hold 90 MB of blocks).
    """
    onset = np.zeros(blocks.shape[0], dtype=np.int64)
    since = np.zeros((blocks.shape[0], blocks.shape[2]))
    whole = np.empty((blocks.shape[0], blocks.shape[2]))
    for start in range(0, blocks.shape[0], _WALK_RANKS):
        rows = slice(start, start + _WALK_RANKS)
        part = blocks[rows]
        part.sum(axis=1, out=whole[rows])
        onset[rows] = _onsets(part[:, :, SHARE].T, part[:, :, COUNT].T)
        add_since(since[rows], part.transpose(1, 0, 2), onset[rows])
    return onset, since, whole


def _walk_by_rank_last(
    blocks: FloatArray, *, weighted: bool = True, alike: _Alike | None = None
) -> tuple[IntArray, FloatArray, FloatArray]:
    """:func:`_walk` of ``(blocks, fields, ranks)`` sums, the ranks innermost; the sums
    ``(fields, ranks)``. ``weighted`` False: the blocks' weighted fields were not made,
    and their sums are NaN. ``alike``: every rank's count and step time a block are the
    same (:class:`_Alike`), and are read from it, not walked rank by rank."""
    count = blocks[:, COUNT] if alike is None else alike.counts
    onset = _onsets(blocks[:, SHARE], count)
    since, whole = np.zeros(blocks.shape[1:]), np.zeros(blocks.shape[1:])
    last = STEP_SECONDS if weighted else PERIODIC
    if alike is not None:
        fields = [slice(SHARE, last)]
        for field, sums in ((COUNT, alike.count_since), (STEP_SECONDS, alike.step_since)):
            since[field], whole[field] = sums[onset], sums[0]
    elif weighted:
        fields = [slice(0, FIELDS)]
    else:
        fields = [slice(0, PERIODIC), slice(STEP_SECONDS, FIELDS)]
    for part in fields:
        add_since(since[part].T, blocks[:, part].transpose(0, 2, 1), onset, whole[part].T)
    if not weighted:
        since[_WEIGHTED] = whole[_WEIGHTED] = np.nan
    return onset, since, whole


class _Alike(NamedTuple):
    """Where every rank's count and step time a block are the same (a window whose points
    are all usable, :func:`_all_usable`): the counts as a ``(blocks, 1)`` column, and each
    one's sums from each block on (``[b]``: from block ``b``), added as :func:`add_since`
    adds a rank's from its onset: the same numbers, made once for every rank."""

    counts: FloatArray
    count_since: FloatArray
    step_since: FloatArray

    @classmethod
    def of(cls, alike: FloatArray) -> _Alike:
        """Of a window's ``(blocks, 2)`` count and step time a block."""
        sums = np.zeros(alike.shape)
        for block in range(len(alike)):
            sums[: block + 1] += alike[block]
        return cls(alike[:, :1], sums[:, 0], sums[:, 1])


def add_since(
    since: FloatArray, blocks: FloatArray, onset: IntArray, whole: FloatArray | None = None
) -> None:
    """Add into ``since`` (``(ranks, fields)``, zeros) each rank's blocks from its onset on
    (``blocks``: ``(blocks, ranks, fields)``, any layout; ``onset``: a block per rank, the
    number of blocks for none), in the order of the blocks; and, where given, every block
    into ``whole`` (as ``since``, zeros: ``blocks.sum(axis=0)``, bit for bit, each block
    read once for both).

    Every rank's blocks are added from the earliest onset on, a rank's sum set back to +0
    at its own onset: what adding only from there gives, bit for bit, without a mask per
    block (2-4x faster)."""
    # The onsets as bytes where they fit (a timing has MAX_BLOCKS blocks at most): numpy
    # sorts bytes by their digits, the same order 5x as fast as int64's at 1,024 ranks.
    keys = onset.astype(np.uint8) if blocks.shape[0] <= 0xFF else onset
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(onset[order], np.arange(blocks.shape[0] + 1)).tolist()
    first = int(onset.min(initial=blocks.shape[0]))
    for column in range(0 if whole is not None else first, blocks.shape[0]):
        block = blocks[column]
        if whole is not None:
            whole += block
        if column < first:
            continue
        starting = order[bounds[column] : bounds[column + 1]]
        if column > first and len(starting):
            since[starting] = 0.0
        since += block


def _onsets(share: FloatArray, count: FloatArray) -> IntArray:
    """Per column of ``(blocks, ranks)`` excess shares and counts (or one ``(blocks, 1)``
    column of counts, where every rank's are the same), the block from which its excess
    to the end is clearest: the most share over the square root of the steps from that
    block on (the change-in-mean statistic; the first such block on a tie).

    The sums to the end are added a block at a time, from the last (numpy's ``cumsum``
    along the blocks adds the same way, one rank at a time: 4x slower at 1,024 ranks)."""
    blocks = share.shape[0]
    suffix = np.empty(share.shape)
    steps_after = np.empty(count.shape)  # one column where every rank's counts are alike
    suffix[-1], steps_after[-1] = share[-1], count[-1]
    for block in range(blocks - 2, -1, -1):
        np.add(suffix[block + 1], share[block], out=suffix[block])
        np.add(steps_after[block + 1], count[block], out=steps_after[block])
    onset: IntArray = np.ascontiguousarray(_clarity(suffix, steps_after).T).argmax(axis=1)
    return onset


def _clarity(share: FloatArray, steps: FloatArray) -> FloatArray:
    """The change-in-mean statistic of excess shares summed over some steps: the sum over
    the square root of the steps (``steps``, broadcast against ``share``), -inf where
    there are none. What an onset (:func:`_onsets`) and the end of a slowness
    (:meth:`StragglerEvidence.slow_until`) make the most of."""
    with np.errstate(invalid="ignore", divide="ignore"):
        clarity: FloatArray = np.where(steps > 0, share / np.sqrt(np.maximum(steps, 1.0)), -np.inf)
    return clarity


def tag_totals(part: TagEvidence) -> TagTotals:
    """The totals of a timing's evidence (its blocks read once; the wall clock's read
    from them, not copied)."""
    onset, since, whole = _walk(part.blocks)
    return TagTotals(
        part.ranks,
        part.block_size,
        part.first_block,
        part.first_step,
        onset,
        since,
        whole,
        (part.blocks[:, :, COUNT], part.blocks[:, :, SLOWEST], part.blocks[:, :, STEP_SECONDS]),
        part.lead_ranks,
        part.lead_blocks,
        part.leads,
    )


def window_totals(
    steps: npt.ArrayLike,
    ranks: Iterable[int],
    values: npt.ArrayLike,
    step_time: npt.ArrayLike,
    *,
    periodic_later: bool | Callable[[slice], TableArray] = False,
) -> TagTotals:
    """The totals of one window of one timing (arguments as for
    :meth:`StragglerEvidence.add_timings`; ``values`` laid out step by step), made a
    group of ranks at a time: the same numbers as :func:`tag_totals` of the window's
    evidence, without its ``(ranks, blocks, FIELDS)`` array (88 MB at 16,384 ranks and
    25 blocks).

    ``periodic_later``: the periodic sums (from ``PERIODIC`` on: 14 of the 26 fields, a
    fifth of the time at 16,384 ranks) are made only for the ranks the verdict asks
    (:meth:`TagTotals.periodic_since`: those it may name), from ``values``, which the
    totals keep until then; NaN in ``since`` and ``whole``. Or, where the caller reuses
    ``values`` once this returns, a function giving the same points again: a slice of
    the ranks, in the order of ``ranks`` (which must then be sorted, else the totals
    keep a sorted copy of their own), ``(steps, ranks in the slice)``, contiguous."""
    step_numbers, columns, table, scale = _block_arguments(steps, ranks, values, step_time)
    if not len(step_numbers) or not len(columns):
        raise ValueError(f"values must hold a step and a rank, got shape {table.shape}")
    given = table
    ordered_ranks, table = _sorted_columns(columns, table)
    # The points read again through the caller's function, where the table is its array.
    read_again = periodic_later if callable(periodic_later) and table is given else None
    size, first, count = _block_layout(int(step_numbers[0]), int(step_numbers[-1]), 1)
    prepared = _prepare(step_numbers, table, scale, size, first, None, weighted=not periodic_later)
    width = len(ordered_ranks)
    onset = np.zeros(width, dtype=np.int64)
    # Laid out as _fill_blocks lays out a group's blocks, the ranks innermost (each
    # field's row of every rank contiguous), and handed on transposed: ``since[rank,
    # field]``, ``wall[i][rank, block]``.
    since = np.zeros((FIELDS, width))
    whole = np.zeros((FIELDS, width))
    slowest = np.zeros((count, width))
    # Where every point is usable, each rank's count and step time a block are the
    # block's (``alike``): one row read for every rank, not 6.5 MB written at 16,384
    # ranks and 25 blocks. Not with a rank alone in its chunk, which sums its own.
    alike = prepared.alike
    shared = alike is not None and all(
        chunk.stop - chunk.start > 1 for _, chunks in _chunks(width) for chunk in chunks
    )
    if shared:
        assert alike is not None
        count_blocks = np.broadcast_to(alike[:, 0], (width, count)).T
        step_blocks = np.broadcast_to(alike[:, 1], (width, count)).T
    else:
        count_blocks, step_blocks = np.zeros((count, width)), np.zeros((count, width))
    walked = _Alike.of(alike) if shared and alike is not None else None  # (alike: for mypy)

    def take(group: slice, blocks: FloatArray) -> None:
        by_block = blocks.transpose(1, 2, 0)  # the (blocks, FIELDS, ranks) array itself
        onset[group], since[:, group], whole[:, group] = _walk_by_rank_last(
            by_block, weighted=prepared.weighted, alike=walked
        )
        if not shared:
            count_blocks[:, group] = by_block[:, COUNT]
            step_blocks[:, group] = by_block[:, STEP_SECONDS]

    leads = _fill_blocks(
        None,
        None,
        step_numbers,
        ordered_ranks,
        table,
        scale,
        size,
        first,
        take=take,
        slowest=slowest.T,
        prepared=prepared,
    )
    # The steps as the one slowest rank: whole counts, the same sums in any order, so each
    # rank's since its onset is read from the sums from each block to the last (a row of
    # zeros after it: the onset of a rank without one).
    after = np.zeros((count + 1, width))
    np.cumsum(slowest[::-1], axis=0, out=after[-2::-1])
    whole[SLOWEST] = after[0]
    since[SLOWEST] = after[onset, np.arange(width)]
    return TagTotals(
        ordered_ranks,
        size,
        first,
        int(step_numbers[0]),
        onset,
        since.T,
        whole.T,
        (count_blocks.T, slowest.T, step_blocks.T),
        *leads,
        periodic=None
        if prepared.weighted
        else partial(_periodic_since, prepared, onset, read_again),
    )


def _periodic_since(
    prepared: _Prepared,
    onset: IntArray,
    read_again: Callable[[slice], TableArray] | None,
    rows: IntArray,
) -> FloatArray:
    """:meth:`TagTotals.periodic_since` of a window whose totals left the periodic sums
    out: each group of ranks holding one of ``rows`` made again
    (:meth:`_Prepared.weighted_blocks`: a product's sums depend on its width, so the
    whole group's; its points from ``read_again`` where given, else the kept table), and
    each rank's blocks added from its ``onset`` on, in their order, as :func:`add_since`
    adds them."""
    sums = np.zeros((len(rows), STEP_SECONDS - PERIODIC))
    for group, chunks in _chunks(prepared.table.shape[1]):
        inside = np.flatnonzero((rows >= group.start) & (rows < group.stop))
        if not len(inside):
            continue
        table = None if read_again is None else read_again(group)
        blocks = prepared.weighted_blocks(group, chunks, table)
        own = blocks[rows[inside] - group.start]
        mine = np.zeros((len(inside), STEP_SECONDS - PERIODIC))
        add_since(mine, own.transpose(1, 0, 2), onset[rows[inside]])
        sums[inside] = mine
    return sums


def _summed_leads(
    ranks: IntArray, blocks: IntArray, values: FloatArray
) -> tuple[IntArray, IntArray, FloatArray]:
    """One entry per (rank, block) of ``ranks`` and ``blocks``, in their order, each the
    sum of its ``values`` taken in the order given (the order a block's sums are added in)."""
    if len(ranks) == 0:
        return _no_ints(), _no_ints(), _no_leads()
    order = np.lexsort((blocks, ranks))
    ordered_ranks, ordered_blocks = ranks[order], blocks[order]
    first = np.r_[
        True,
        (ordered_ranks[1:] != ordered_ranks[:-1]) | (ordered_blocks[1:] != ordered_blocks[:-1]),
    ]
    entry = np.empty(len(order), dtype=np.int64)
    entry[order] = np.cumsum(first) - 1
    sums = np.zeros((int(first.sum()), LEAD_FIELDS))
    np.add.at(sums, entry, values)
    return ordered_ranks[first], ordered_blocks[first], sums


def _lead_columns(piece: TagEvidence, size: int, first: int) -> IntArray:
    """The blocks of ``piece``'s leads in a layout of blocks of ``size`` from block ``first``."""
    columns: IntArray = (piece.first_block + piece.lead_blocks) * piece.block_size // size - first
    return columns


#: Per timing in ``to_arrays``' layout: block size, first block, first and last step,
#: ranks, lead entries.
_LAYOUT = 6


def blocks_for(ranks: int) -> int:
    """The blocks a run's evidence keeps per rank of a timing over ``ranks`` ranks:
    ``MAX_BLOCKS``, halved while that is more than ``BLOCK_CELLS`` (rank, block) pairs,
    never fewer than ``MIN_BLOCKS`` (a window judged once keeps ``MAX_BLOCKS``)."""
    blocks = MAX_BLOCKS
    while blocks > MIN_BLOCKS and blocks * ranks > BLOCK_CELLS:
        blocks //= 2
    return blocks


def _block_layout(
    first_step: int, last_step: int, block_size: int, limit: int = MAX_BLOCKS
) -> tuple[int, int, int]:
    """(block size, first block, block count) covering the steps within ``limit`` blocks."""
    size = max(block_size, 1)
    while last_step // size - first_step // size + 1 > limit:
        size *= 2
    first = first_step // size
    return size, first, last_step // size - first + 1


class StragglerEvidence:
    """Per (timing, rank) sums over blocks of steps: bounded, and mergeable in any order.

    Feed it blocks of steps with :meth:`add_timings`, fold other partial
    evidence in with :meth:`merge`, ship it with :meth:`to_arrays` /
    :meth:`from_arrays` (plain arrays and strings, no pickle), and judge it
    with :func:`straggler_records` (or :func:`straggler_verdicts` for the
    lineage keys, both in ``_straggler_verdicts.py``). ``docs/job-view.md``
    ("Straggler") describes the sums.
    """

    def __init__(self) -> None:
        self._tags: dict[str, TagEvidence] = {}
        #: Per tag, where its long leads stood at the last step added in order.
        self._runs: dict[str, _Runs] = {}
        #: Whether a tag's first steps are made within an array of all the blocks kept
        #: (:func:`blocks_for`) that later steps grow into (a live view's), or to their own size
        #: (:func:`window_evidence`).
        self._grows = True

    @property
    def tags(self) -> list[str]:
        return sorted(self._tags)

    def _limit(self, ranks: int) -> int:
        """The blocks a tag's evidence of ``ranks`` ranks keeps: a run's (a live view's,
        an offline merge's) within :func:`blocks_for`'s; a window judged once, made to its
        own size, ``MAX_BLOCKS``."""
        return blocks_for(ranks) if self._grows else MAX_BLOCKS

    def block_size(self, tag: str) -> int:
        """The steps of one of ``tag``'s blocks (1 without evidence on it): an onset found
        in this evidence is the first step of such a block."""
        known = self._tags.get(tag)
        return 1 if known is None else known.block_size

    def slow_until(self, tag: str, rank: int, since: int) -> int | None:
        """The last step ``rank`` was slow on ``tag`` since step ``since`` (its onset), to
        a block: the last step of the block up to which its excess since the onset is
        clearest, the most excess share summed from the onset's block (:func:`blocks_since`)
        over the square root of the steps (the onset's change-in-mean statistic,
        :func:`_onsets`, read forwards; the first such block on a tie). Its last step
        judged where it is slow to the end; None where it has no excess since the onset
        (or no evidence on ``tag``)."""
        found = self._slow_blocks(tag, rank, since)
        if found is None:
            return None
        known, _, end = found
        last = (known.first_block + end + 1) * known.block_size - 1
        return min(last, known.last_step)

    def slowness_over(
        self, tag: str, rank: int, since: int, floor: float, least: int
    ) -> int | None:
        """:meth:`slow_until`, where ``rank``'s slowness on ``tag`` since ``since`` is over:
        its last slow step lies before the last step judged, and the steps after it, at
        least ``least`` of them, have a mean excess share below ``floor`` (the rank no
        slower than the others' median by the floor there). None otherwise: slow to the
        end, too few steps after, or still slow after them."""
        found = self._slow_blocks(tag, rank, since)
        if found is None:
            return None
        known, row, end = found
        after = known.blocks[row, end + 1 :]
        count = float(after[:, COUNT].sum())
        if count < least or not float(after[:, SHARE].sum()) < floor * count:
            return None
        return (known.first_block + end + 1) * known.block_size - 1

    def _slow_blocks(self, tag: str, rank: int, since: int) -> tuple[TagEvidence, int, int] | None:
        """Of :meth:`slow_until`: ``tag``'s evidence, ``rank``'s row in it and the index of
        the block up to which its excess since ``since`` is clearest; None without one."""
        known = self._tags.get(tag)
        if known is None:
            return None
        row = int(np.searchsorted(known.ranks, rank))
        if row >= len(known.ranks) or int(known.ranks[row]) != rank:
            return None
        first = int(known.blocks_since(np.array([since]))[0])
        if first >= known.blocks.shape[1]:
            return None
        share = np.cumsum(known.blocks[row, first:, SHARE])
        clarity = _clarity(share, np.cumsum(known.blocks[row, first:, COUNT]))
        end = int(np.argmax(clarity))
        if not clarity[end] > 0:
            return None
        return known, row, first + end

    def through(self, step: int) -> StragglerEvidence:
        """The evidence of the steps up to ``step``, to a block: each timing's blocks up to
        the one holding it, and their leads (copies; a timing whose first step is later is
        left out). What a judgement of the run at that step would read, in this evidence's
        blocks (a longer run's may be coarser): for judging a span that ended, not for
        adding steps to (where the last steps' long leads stood is not kept)."""
        kept = StragglerEvidence()
        kept._grows = self._grows
        for tag, part in self._tags.items():
            if part.first_step > step:
                continue
            last = min(part.last_step, step)
            width = last // part.block_size - part.first_block + 1
            leads = part.lead_blocks < width
            kept._tags[tag] = TagEvidence(
                part.ranks.copy(),
                part.block_size,
                part.first_block,
                part.blocks[:, :width].copy(),
                part.first_step,
                last,
                part.lead_ranks[leads],
                part.lead_blocks[leads],
                part.leads[leads],
            )
        return kept

    def ranks(self, tag: str) -> list[int]:
        """The ranks with evidence on ``tag``."""
        known = self._tags.get(tag)
        return [] if known is None else known.ranks.tolist()

    def add_timings(
        self,
        tag: str,
        steps: npt.ArrayLike,
        ranks: Iterable[int],
        values: npt.ArrayLike,
        step_time: npt.ArrayLike,
    ) -> None:
        """Add a block of one timing: ``values`` is ``(steps, ranks)`` seconds (NaN: no point).

        ``steps`` are the block's step numbers (increasing), ``ranks`` its
        columns' ranks, ``step_time`` the job's step time at each step (the
        median over the ranks) that the excess is a share of.
        """
        self._add(tag, *_block_arguments(steps, ranks, values, step_time), None)

    def _add(
        self,
        tag: str,
        step_numbers: IntArray,
        columns: IntArray,
        table: TableArray,
        scale: FloatArray,
        middle: Middle | None,
    ) -> None:
        """:meth:`add_timings` of checked arguments; ``middle``: the table's
        :func:`row_middles` where the caller made them already (else made here)."""
        if len(step_numbers) == 0 or len(columns) == 0:
            return
        # Born in the blocks the tag's evidence has already (a live view's interval: one or
        # two blocks, not one per few steps), so merging it in needs no re-binning.
        runs = self._runs.get(tag)
        if runs is None or runs.step >= step_numbers[0]:  # steps out of order start anew
            runs = self._runs[tag] = _Runs()
        runs.step = int(step_numbers[-1])
        known = self._tags.get(tag)
        if known is None:  # the tag's first steps: made in the array later ones are added to
            self._tags[tag] = _blocks_of(
                step_numbers,
                columns,
                table,
                scale,
                1,
                self._limit(len(columns)),
                room=self._grows,
                runs=runs,
                middle=middle,
            )
            return
        limit = self._limit(len(known.ranks))
        if _add_in_place(known, step_numbers, columns, table, scale, limit, runs, middle=middle):
            return
        self._merge_tag(
            tag,
            _blocks_of(
                step_numbers,
                columns,
                table,
                scale,
                known.block_size,
                self._limit(len(columns)),
                room=False,
                runs=runs,
                middle=middle,
            ),
        )

    def merge(self, other: StragglerEvidence) -> None:
        """Fold ``other`` in (other steps, other ranks, or both)."""
        for tag, part in other._tags.items():
            self._merge_tag(tag, part)

    def _merge_tag(self, tag: str, part: TagEvidence) -> None:
        known = self._tags.get(tag)
        if known is None:
            self._tags[tag] = TagEvidence(
                part.ranks.copy(),
                part.block_size,
                part.first_block,
                part.blocks.copy(),
                part.first_step,
                part.last_step,
                part.lead_ranks.copy(),
                part.lead_blocks.copy(),
                part.leads.copy(),
            )
            return
        first_step = min(known.first_step, part.first_step)
        last_step = max(known.last_step, part.last_step)
        rows = np.searchsorted(known.ranks, part.ranks)
        inside = rows < len(known.ranks)
        within = bool(inside.all()) and bool((known.ranks[rows] == part.ranks).all())
        ranks = known.ranks.copy() if within else np.union1d(known.ranks, part.ranks)
        limit = self._limit(len(ranks))
        size, first, count = _block_layout(
            first_step, last_step, max(known.block_size, part.block_size), limit
        )
        # Each block's leads: the known ones, then the part's (as the sums are added).
        leads = _summed_leads(
            np.concatenate([known.lead_ranks, part.lead_ranks]),
            np.concatenate([_lead_columns(known, size, first), _lead_columns(part, size, first)]),
            np.concatenate([known.leads, part.leads]),
        )
        if within:
            merged = _in_place(known, size, first, count, limit)
            if merged is not None:  # a live view's usual interval: no copy of the evidence
                _add_columns(merged, part, rows)
                merged.first_step, merged.last_step = first_step, last_step
                merged.lead_ranks, merged.lead_blocks, merged.leads = leads
                return
        merged = TagEvidence(
            ranks,
            size,
            first,
            np.zeros((len(ranks), count, FIELDS)),
            first_step,
            last_step,
            *leads,
        )
        for piece in (known, part):
            _add_columns(merged, piece, np.searchsorted(ranks, piece.ranks))
        self._tags[tag] = merged

    def to_arrays(self) -> dict[str, object]:
        """A data-only form: ``tags`` (list of str) and int64/float64 arrays.

        Per tag, in ``tags``' order: a row of ``layout`` (block size, first block, first
        and last step, ranks, lead entries); its ranks in ``ranks``; its
        ``(ranks, blocks, FIELDS)`` sums flattened in ``blocks``; and its lead entries:
        ``lead_ranks``, ``lead_blocks`` (from its first block) and ``leads``
        (``LEAD_FIELDS`` each, flattened)."""
        tags = self.tags
        parts = [self._tags[tag] for tag in tags]
        layout = np.array(
            [
                [p.block_size, p.first_block, p.first_step, p.last_step, len(p.ranks), len(p.leads)]
                for p in parts
            ],
            dtype=np.int64,
        ).reshape(-1, _LAYOUT)

        def joined(arrays: list[npt.NDArray[np.generic]], dtype: type) -> npt.NDArray[np.generic]:
            return np.concatenate(arrays) if arrays else np.empty(0, dtype)

        return {
            "tags": tags,
            "layout": layout,
            "ranks": joined([p.ranks for p in parts], np.int64),
            "blocks": joined([p.blocks.reshape(-1) for p in parts], np.float64),
            "lead_ranks": joined([p.lead_ranks for p in parts], np.int64),
            "lead_blocks": joined([p.lead_blocks for p in parts], np.int64),
            "leads": joined([p.leads.reshape(-1) for p in parts], np.float64),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, object]) -> StragglerEvidence:
        """The evidence :meth:`to_arrays` gave; ValueError when malformed."""
        tags = arrays.get("tags")
        try:
            layout = np.asarray(arrays.get("layout"), dtype=np.int64).reshape(-1, _LAYOUT)
            ranks = np.asarray(arrays.get("ranks"), dtype=np.int64).reshape(-1)
            blocks = np.asarray(arrays.get("blocks"), dtype=np.float64).reshape(-1)
            lead_ranks = np.asarray(arrays.get("lead_ranks"), dtype=np.int64).reshape(-1)
            lead_blocks = np.asarray(arrays.get("lead_blocks"), dtype=np.int64).reshape(-1)
            leads = np.asarray(arrays.get("leads"), dtype=np.float64).reshape(-1, LEAD_FIELDS)
        except (TypeError, ValueError) as error:
            raise ValueError(f"straggler evidence arrays are malformed ({error})") from None
        if (
            not isinstance(tags, list)
            or not all(isinstance(tag, str) for tag in tags)
            or len(tags) != len(layout)
            or not len(lead_ranks) == len(lead_blocks) == len(leads)
        ):
            raise ValueError("straggler evidence arrays are malformed")
        evidence = cls()
        rank_at = block_at = lead_at = 0
        for tag, (size, first, first_step, last_step, count, entries) in zip(
            tags, layout, strict=True
        ):
            width = int(last_step // size - first + 1) if size > 0 else -1
            if size < 1 or count < 0 or entries < 0 or not 1 <= width <= MAX_BLOCKS:
                raise ValueError("straggler evidence arrays are malformed")
            cells = int(count) * width * FIELDS
            if (
                rank_at + count > len(ranks)
                or block_at + cells > len(blocks)
                or lead_at + entries > len(leads)
            ):
                raise ValueError("straggler evidence arrays are malformed")
            part = TagEvidence(
                ranks[rank_at : rank_at + count].copy(),
                int(size),
                int(first),
                blocks[block_at : block_at + cells].reshape(int(count), width, FIELDS).copy(),
                int(first_step),
                int(last_step),
            )
            if len(np.unique(part.ranks)) != len(part.ranks):
                raise ValueError("straggler evidence arrays are malformed")
            order = np.argsort(part.ranks)
            part.ranks, part.blocks = part.ranks[order], part.blocks[order]
            shipped = slice(lead_at, lead_at + int(entries))
            part.lead_ranks, part.lead_blocks, part.leads = _summed_leads(
                lead_ranks[shipped], lead_blocks[shipped], leads[shipped]
            )
            if (
                len(part.leads) != entries  # a (rank, block) twice
                or not bool(np.isin(part.lead_ranks, part.ranks).all())
                or not bool(((part.lead_blocks >= 0) & (part.lead_blocks < width)).all())
            ):
                raise ValueError("straggler evidence arrays are malformed")
            rank_at += int(count)
            block_at += cells
            lead_at += int(entries)
            evidence._merge_tag(tag, part)
        if rank_at != len(ranks) or block_at != len(blocks) or lead_at != len(leads):
            raise ValueError("straggler evidence arrays are malformed")
        return evidence


def _block_arguments(
    steps: npt.ArrayLike, ranks: Iterable[int], values: npt.ArrayLike, step_time: npt.ArrayLike
) -> tuple[IntArray, IntArray, TableArray, FloatArray]:
    """A block of one timing's arguments checked (:meth:`StragglerEvidence.add_timings`):
    its step numbers, ranks, ``(steps, ranks)`` values (float32 kept as they are, each
    chunk read into float64) and step time at each step."""
    table = _float_table(values)
    columns = np.fromiter(ranks, dtype=np.int64)  # each as int(rank), 5x as fast
    step_numbers = np.asarray(steps, dtype=np.int64).reshape(-1)
    if table.ndim != 2 or table.shape != (len(step_numbers), len(columns)):
        raise ValueError(
            f"values must be a ({len(step_numbers)}, {len(columns)}) array of "
            f"(steps, ranks), got shape {table.shape}"
        )
    if len(step_numbers) > 1 and not bool(np.all(np.diff(step_numbers) > 0)):
        raise ValueError("steps must be increasing")
    scale = np.broadcast_to(np.asarray(step_time, dtype=np.float64), (len(step_numbers),))
    return step_numbers, columns, table, scale


def add_timings_with_middle(
    evidence: StragglerEvidence,
    tag: str,
    steps: npt.ArrayLike,
    ranks: Iterable[int],
    values: TableArray,
    step_time: npt.ArrayLike,
    middle: Middle | None,
) -> None:
    """:meth:`StragglerEvidence.add_timings` of a ``values`` table (float64, or float32 as
    :func:`_float_table` keeps it) whose :func:`row_middles` the caller made already
    (None: made here, or the table sorted): the step time's, whose medians
    (:func:`middle_medians`) are the scale of every timing, so its table is partitioned
    once for both (at 65,536 ranks x 300 steps, 0.2 s of a round's write)."""
    evidence._add(tag, *_block_arguments(steps, ranks, values, step_time), middle)


def window_evidence() -> StragglerEvidence:
    """Empty evidence for a window judged once (``judge_timings``): each tag's blocks made
    to the window's size, not within an array of ``MAX_BLOCKS`` blocks (16,384 ranks x 100
    steps: 25 blocks, not 32; a later merge into it makes that array then)."""
    evidence = StragglerEvidence()
    evidence._grows = False
    return evidence


def _add_columns(target: TagEvidence, piece: TagEvidence, rows: IntArray) -> None:
    """Add ``piece``'s blocks into ``target``'s rows ``rows`` (its blocks as large or
    larger, from a block at or before ``piece``'s): one column at a time, no copy of the
    whole."""
    starts = (piece.first_block + np.arange(piece.blocks.shape[1])) * piece.block_size
    columns = (starts // target.block_size - target.first_block).tolist()
    every = len(rows) == len(target.ranks)  # rows is then 0 .. n - 1: a slice, not a gather
    for column, index in enumerate(columns):
        if every:
            target.blocks[:, index] += piece.blocks[:, column]
        else:
            target.blocks[rows, index] += piece.blocks[:, column]


def _room(known: TagEvidence, limit: int) -> FloatArray:
    """The array of ``limit`` blocks (or ``known``'s own, where more) that ``known.blocks``
    begins (made when missing)."""
    room = known.room
    if room is not None and id(known.blocks.base) == id(room):
        return room
    room = np.zeros((len(known.ranks), max(limit, known.blocks.shape[1]), FIELDS))
    room[:, : known.blocks.shape[1]] = known.blocks
    return room


def _in_place(
    known: TagEvidence, size: int, first: int, count: int, limit: int
) -> TagEvidence | None:
    """``known`` laid out as (``size``, ``first``, ``count``) blocks within an array of
    ``limit`` blocks (made once, when it is first merged into): wider, or coarser
    (each block's sums added into its coarser block, which is never a later one). None
    when the first block is not the one that holds ``known``'s first (a copy is made)."""
    if first != (known.first_block * known.block_size) // size:
        return None
    room = _room(known, limit)
    if size != known.block_size:
        starts = (known.first_block + np.arange(known.blocks.shape[1])) * known.block_size
        _coarsened(room, starts // size - first)
    known.block_size, known.first_block = size, first
    known.blocks, known.room = room[:, :count], room
    return known


#: Ranks whose blocks are coarsened at once (:func:`_coarsened`): 256 of 32 blocks of
#: ``FIELDS`` sums are 1.7 MB, within a core's cache while each is read and written.
_COARSEN_ROWS = 256


def _coarsened(room: FloatArray, index: IntArray) -> None:
    """Each row's blocks ``0 .. len(index) - 1`` of ``room`` added into the coarser blocks
    ``index`` (from 0, each next one the same or the next: block ``j`` goes into
    ``index[j] <= j``), in place; the blocks after the last coarser one zeroed.

    A few hundred rows at a time, each coarser block the sum of its blocks in their order
    (the first one, then each next one added): at 65,536 ranks a strided copy, zeroing
    and add of one block column at a time took 0.31-0.37 s of a round, this one pass over
    the array 0.08-0.10 s."""
    count, width = int(index[-1]) + 1, len(index)
    # The first coarser block is its own first block (never moved): the next ones of it
    # are added to it. The others', from ``first`` on, by their place within their coarser
    # block (the p-th of each, and where): evenly spaced when the sizes are multiples (a
    # slice, not a gather).
    first = int(np.count_nonzero(index == 0))
    later = index[first:]
    place = np.arange(first, width) - np.searchsorted(index, later)
    heads = _progression(np.flatnonzero(place == 0) + first)
    nexts = [
        (_progression(np.flatnonzero(place == p) + first), _progression(later[place == p] - 1))
        for p in range(1, int(place.max(initial=0)) + 1)
    ]
    for start in range(0, room.shape[0], _COARSEN_ROWS):
        rows = room[start : start + _COARSEN_ROWS]
        for column in range(1, first):
            rows[:, 0] += rows[:, column]
        # A view of the head blocks where they are a slice (summed where they are, then
        # moved: an overlapping assignment is copied first), else a gathered copy.
        sums = rows[:, heads]
        for columns, into in nexts:
            sums[:, into] += rows[:, columns]
        rows[:, 1:count] = sums
        rows[:, count:width] = 0.0


def _progression(indices: IntArray) -> slice | IntArray:
    """Increasing ``indices`` as a slice where they are evenly spaced (a view, not a
    gather)."""
    if len(indices) == 0:
        return slice(0, 0)
    steps = np.diff(indices)
    if len(steps) and bool((steps != steps[0]).any()):
        return indices
    return slice(int(indices[0]), int(indices[-1]) + 1, int(steps[0]) if len(steps) else 1)


#: Ranks whose fields are made at once: a (steps, 512) block of each stays in the cache,
#: with half the calls of 256 at a time (``judge_timings`` of 16,384 ranks x 100 steps
#: x 2 timings: 141-145 ms against 148-150, alternating runs; 1,024 at a time about
#: 512's, in twice the memory), and 16,384 ranks never hold a (steps, ranks) table per
#: field (:func:`_chunks`).
_CHUNK = 512
#: ... in pieces of each 1,024 ranks (:func:`_chunks`).
_CHUNK_GROUP = 1024
#: Cells of a ``(steps, ranks)`` table whose rows are ordered at once (512 KB of them).
_ROW_CELLS = 1 << 16
#: ... and whose latest points are found at once (:func:`_leads`: 2 MB, a few steps of many
#: ranks; a quarter of that took 1.3x as long at 16,384 ranks, the more calls of few steps).
_LEAD_CELLS = 1 << 18


def _excess(
    table: TableArray, reference: FloatArray, step: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(excess seconds, excess share, the others' median as a share) of a ``(steps,
    ranks)`` block; NaN where not usable (:func:`_usable`)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        seconds: FloatArray = np.subtract(table, reference)
        # np.clip's result, by two passes (np.clip with array bounds is 1.6x as slow).
        bound = CLIPSHARE * step
        np.maximum(seconds, -bound, out=seconds)
        np.minimum(seconds, bound, out=seconds)
        share = seconds / step
        reference_share = reference / step
    return seconds, share, reference_share


def _usable(share: FloatArray, reference_share: FloatArray) -> BoolArray:
    """Which points of :func:`_excess` are judged: a step without a step time (or one of 0)
    has no scale, a point without a reference no finite reference share."""
    usable = np.isfinite(reference_share)
    usable &= ~np.isnan(share)
    return usable


def _all_usable(middle: Middle | None, step: FloatArray) -> bool:
    """Whether every point of a table is usable (:func:`_usable`) without looking at each:
    the table has no NaN (it has ``middle``, its :func:`row_middles`), and each row's
    middle order statistics, of which its points' references are made (one of them, or
    the mean of two), are finite shares of the step (NaN for a step without a scale). A
    point is then a finite excess: clipped to ``CLIPSHARE`` steps, an infinite one too."""
    if middle is None:
        return False
    largest = np.abs(middle[0])
    for part in middle[1:]:
        largest = np.maximum(largest, np.abs(part))
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(largest / step).all())


def _plain_fields(
    share: FloatArray,
    seconds: FloatArray,
    reference_share: FloatArray,
    usable: BoolArray | None,
    step: FloatArray,
) -> Iterator[tuple[int, FloatArray | BoolArray]]:
    """The fields summed as they are, per ``(steps, ranks)`` point (0 or False where a rank
    has no comparable point; ``share`` is 0 there: above needs no mask). ``usable`` None:
    every point is, and the count and step time are filled as every rank's
    (:func:`_chunk_sums`)."""
    if usable is not None:
        yield COUNT, usable
    yield SHARE, share
    yield SQUARE, share * share
    yield SECONDS, seconds
    yield REFERENCE, reference_share
    yield ABOVE, share > 0
    if usable is not None:
        yield STEP_SECONDS, np.where(usable, step, 0.0)
    for offset, edge in enumerate(EDGES):
        yield ABOVE_EDGES + offset, share > edge


def _weights(steps: IntArray) -> FloatArray:
    """The ``(fields, steps)`` weights of the fields that are the excess share weighted
    per step, in the order of the fields from ``PERIODIC`` on (up to ``STEP_SECONDS``):
    the cosine and sine of ``2 pi step / k``."""
    rows = []
    for period in PERIODS:
        angle = (2 * np.pi / period) * (steps % period)
        rows += [np.cos(angle), np.sin(angle)]
    return np.stack(rows)


def row_middles(table: TableArray) -> Middle | None:
    """Each row's order statistics around its middle (:func:`_middle_of`, a few rows at a
    time), from which both its others' medians (:func:`_others_from`) and its own median
    (:func:`middle_medians`) follow; None for a table with a NaN or of fewer than 3
    columns (those are sorted instead)."""
    if table.ndim != 2 or table.shape[1] < 3 or not len(table) or _has_nan(table):
        return None
    rows = max(1, _ROW_CELLS // table.shape[1])
    parts = [_middle_of(table[start : start + rows]) for start in range(0, len(table), rows)]
    at_low = np.concatenate([part[0] for part in parts])
    above_low = np.concatenate([part[1] for part in parts])
    if parts[0][2] is parts[0][0]:
        return at_low, above_low, at_low, above_low  # one middle order statistic, as _middle_of
    return (
        at_low,
        above_low,
        np.concatenate([part[2] for part in parts]),
        np.concatenate([part[3] for part in parts]),
    )


def _has_nan(table: TableArray) -> bool:
    """Whether ``table`` holds a NaN: its sum is NaN only then (or with infinities of both
    signs, then looked at point by point), and takes no array of the table's size."""
    with np.errstate(invalid="ignore", over="ignore"):
        if not np.isnan(np.add.reduce(table, axis=None)):
            return False
    return bool(np.isnan(table).any())


def middle_medians(middle: Middle) -> FloatArray:
    """Each row's median from its :func:`row_middles`: what :func:`row_medians` gives.

    With ``n`` points in a row the others are ``n - 1``: for an even ``n`` their one middle
    order statistic is the row's ``n/2 - 1``-th (``at_low``) and the next is its ``n/2``-th
    (``above_low``), the row's two middle ones; for an odd ``n`` the row's middle one is
    ``above_low``. The same sum and division as :func:`row_medians`.
    """
    at_low, above_low, at_high, _ = middle
    low = at_low if at_high is at_low else above_low
    with np.errstate(invalid="ignore"):  # -inf and inf: NaN, as nanmedian
        medians: FloatArray = ((low + above_low) / 2).reshape(-1)
    return medians


def _references(
    table: TableArray, middle: Middle | None
) -> Callable[[slice, TableArray], FloatArray]:
    """Each point's others' median, for a slice of the ranks (``(steps, ranks)`` columns),
    given those ranks' columns (``table[:, chunk]``, or the same points read elsewhere).

    A table without NaN of 3 ranks or more keeps each row's middle order statistics only
    (a few numbers a step: ``middle``, its :func:`row_middles`) and makes a chunk's
    medians from them; else (``middle`` None) the medians of the whole table, a few
    steps at a time. The same numbers as :func:`others_medians`.
    """
    if middle is not None:
        kept, shape = middle, _middle_shape(middle)
        return lambda chunk, columns: _others_from(columns, kept, shape)
    rows = max(1, _ROW_CELLS // max(table.shape[1], 1))
    reference = np.empty(table.shape)  # float64, whatever the table's type
    for start in range(0, len(table), rows):
        reference[start : start + rows] = others_medians(table[start : start + rows])
    return lambda chunk, columns: reference[:, chunk]


class _Spans(NamedTuple):
    """Where a block of steps' rows go: each run of rows of one evidence block (its
    ``targets`` and row ``bounds``), and the weighted fields' weights (:func:`_weights`)."""

    targets: list[int]
    bounds: list[tuple[int, int]]
    weights: FloatArray
    #: The runs' lengths, and each stretch of consecutive runs of one length: (first run,
    #: run after its last, length).
    lengths: list[int]
    levels: list[tuple[int, int, int]]
    #: Each stretch's blocks (its runs' ``targets``): a slice where evenly spaced (a
    #: view of ``out``, written in place, not a gather).
    level_targets: list[slice | IntArray]

    @classmethod
    def of(cls, index: IntArray, steps: IntArray) -> _Spans:
        """The spans of rows whose blocks are ``index`` (non-decreasing), of ``steps``."""
        starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
        stops = [*starts[1:].tolist(), len(steps)]
        bounds = list(zip(starts.tolist(), stops, strict=True))
        lengths = [stop - start for start, stop in bounds]
        levels = []
        first = 0
        while first < len(lengths):
            last = first + 1
            while last < len(lengths) and lengths[last] == lengths[first]:
                last += 1
            levels.append((first, last, lengths[first]))
            first = last
        targets = index[starts]
        level_targets = [_progression(targets[first:last]) for first, last, _ in levels]
        return cls(targets.tolist(), bounds, _weights(steps), lengths, levels, level_targets)

    def add_runs(self, values: npt.NDArray[Any], out: FloatArray) -> None:
        """Each run's rows of ``values`` (``(steps, ranks)``) summed into its block of
        ``out`` (``(blocks, ranks)``) as ``sum(axis=0)`` of the run sums them.

        numpy adds a run's rows one after another from 0 for a table laid out step by
        step of two ranks or more, and for runs of fewer than 8 rows in any layout;
        otherwise pairwise along each rank's steps. So, laid out step by step, the runs
        of one length side by side (the blocks between an interval's first and last) are
        one sum over the middle axis of a ``(runs, length, ranks)`` view, which adds the
        same way. Else run by run when the runs are few; else, where the rows are added
        in order, the k-th row of every run at once (a window of 100 steps in blocks of
        4: 4 additions, not 25 sums).

        Counts (``values`` of booleans) are summed as bytes into integers wide enough for
        the longest run, then stored as floats: the same whole numbers, in any order of
        addition, and 2.5x faster than numpy's cast of each boolean to a float as it sums
        (six of a chunk's eleven plain fields are counts)."""
        lengths = self.lengths
        total: type[np.generic] = np.float64
        if values.dtype == np.bool_:
            values = values.view(np.uint8)
            total = np.uint16 if max(lengths) < 1 << 16 else np.int64
        if values.flags.c_contiguous and values.shape[1] > 1:
            for (first, last, length), at in zip(self.levels, self.level_targets, strict=True):
                start, stop = self.bounds[first][0], self.bounds[last - 1][1]
                runs = values[start:stop].reshape(last - first, length, -1)
                if total is np.float64 and isinstance(at, slice):
                    runs.sum(axis=1, out=out[at])
                else:
                    out[at] = runs.sum(axis=1, dtype=total)
            return
        in_order = max(lengths) < 8
        if len(lengths) <= max(lengths) or not in_order:
            for target, (start, stop) in zip(self.targets, self.bounds, strict=True):
                if total is np.float64:
                    values[start:stop].sum(axis=0, dtype=np.float64, out=out[target])
                else:
                    out[target] = values[start:stop].sum(axis=0, dtype=total)
            return
        starts = np.array([start for start, _ in self.bounds])
        sizes = np.array(lengths)
        sums = np.zeros((len(starts), values.shape[1]))
        for offset in range(max(lengths)):
            alive = np.flatnonzero(sizes > offset)
            sums[alive] += values[starts[alive] + offset]
        out[self.targets] = sums


def _blocks_of(
    steps: IntArray,
    ranks: IntArray,
    table: TableArray,
    scale: FloatArray,
    block_size: int = 1,
    limit: int = MAX_BLOCKS,
    *,
    room: bool = False,
    runs: _Runs | None = None,
    middle: Middle | None = None,
) -> TagEvidence:
    """One block of steps' sums folded into the evidence's blocks (ranks sorted;
    :func:`_fill_blocks`), at most ``limit`` of them."""
    ordered_ranks, table = _sorted_columns(ranks, table)
    size, first, count = _block_layout(int(steps[0]), int(steps[-1]), block_size, limit)
    # ``room``: within an array of ``limit`` blocks, which later steps grow into in place.
    storage = np.zeros((len(ranks), limit if room else count, FIELDS))
    blocks = storage[:, :count]
    leads = _fill_blocks(
        blocks, None, steps, ordered_ranks, table, scale, size, first, runs=runs, middle=middle
    )
    return TagEvidence(
        ordered_ranks,
        size,
        first,
        blocks,
        int(steps[0]),
        int(steps[-1]),
        *leads,
        room=storage if room else None,
    )


def _sorted_columns(ranks: IntArray, table: TableArray) -> tuple[IntArray, TableArray]:
    """``ranks`` sorted and ``table``'s columns in their order (ValueError: a rank twice)."""
    order = np.argsort(ranks, kind="stable")
    ordered_ranks = ranks[order]
    if bool((ordered_ranks[1:] == ordered_ranks[:-1]).any()):  # (np.unique: 3-7 ms at 16,384)
        raise ValueError(f"ranks must be distinct, got {ranks.tolist()}")
    if not bool(np.all(order == np.arange(len(order)))):
        table = table[:, order]
    return ordered_ranks, table


def _add_in_place(
    known: TagEvidence,
    steps: IntArray,
    ranks: IntArray,
    table: TableArray,
    scale: FloatArray,
    limit: int,
    runs: _Runs | None = None,
    *,
    middle: Middle | None = None,
) -> bool:
    """A block of steps of ``known``'s very ranks added straight into its blocks, as merging
    the block's own evidence (:func:`_blocks_of` in ``known``'s block size) adds it: the
    same sums, with no ``(ranks, blocks)`` array of the block made (70 MB at 16,384 ranks
    and 20 blocks), within ``limit`` blocks. False, with nothing added, for other ranks or
    blocks that need a copy (the merge then makes the block's evidence)."""
    ordered_ranks, table = _sorted_columns(ranks, table)
    if not np.array_equal(ordered_ranks, known.ranks):
        return False
    own_size, own_first, own_count = _block_layout(
        int(steps[0]), int(steps[-1]), known.block_size, limit
    )
    first_step = min(known.first_step, int(steps[0]))
    last_step = max(known.last_step, int(steps[-1]))
    size, first, count = _block_layout(
        first_step, last_step, max(known.block_size, own_size), limit
    )
    if first != (known.first_block * known.block_size) // size:
        return False  # as _in_place: the known blocks would move to a copy
    known_leads = (known.lead_ranks, _lead_columns(known, size, first), known.leads)
    merged = _in_place(known, size, first, count, limit)
    assert merged is not None
    columns = ((own_first + np.arange(own_count)) * own_size // size - first).tolist()
    lead_ranks, lead_blocks, leads = _fill_blocks(
        merged.blocks,
        columns,
        steps,
        ordered_ranks,
        table,
        scale,
        own_size,
        own_first,
        runs=runs,
        middle=middle,
    )
    # Each block's leads: the known ones, then the block's (as _merge_tag adds them).
    own_columns = (own_first + lead_blocks) * own_size // size - first
    merged.lead_ranks, merged.lead_blocks, merged.leads = _summed_leads(
        np.concatenate([known_leads[0], lead_ranks]),
        np.concatenate([known_leads[1], own_columns]),
        np.concatenate([known_leads[2], leads]),
    )
    merged.first_step, merged.last_step = first_step, last_step
    return True


def _fill_blocks(
    destination: FloatArray | None,
    columns: list[int] | None,
    steps: IntArray,
    ranks: IntArray,
    table: TableArray,
    scale: FloatArray,
    size: int,
    first: int,
    *,
    take: Callable[[slice, FloatArray], None] | None = None,
    slowest: FloatArray | None = None,
    runs: _Runs | None = None,
    middle: Middle | None = None,
    prepared: _Prepared | None = None,
) -> tuple[IntArray, IntArray, FloatArray]:
    """The sums of a block of steps in blocks of ``size`` steps from block ``first``, into
    ``destination`` (``(ranks, blocks, FIELDS)``, rows: ``ranks``, sorted): as they are
    (``columns`` None), or each of its blocks added into ``destination``'s column
    ``columns[block]``, block after block, as merging adds them. Returns its leads
    (:func:`_summed_leads`, in its own blocks).

    Without a destination, each group of ranks' blocks go to ``take(group, blocks)``
    once made (but ``SLOWEST``, which needs every rank's points: its counts go to
    ``slowest``, ``(ranks, blocks)``), and no array of every rank's blocks is made. A
    group's own blocks are a ``(blocks, FIELDS, ranks)`` array, handed on as its
    ``(ranks, blocks, FIELDS)`` view: each field's sums of a chunk of ranks are then
    written, and walked (:func:`_walk`), as contiguous rows. The next group of as many
    ranks reuses that array: ``take`` copies what it keeps.
    ``runs``: where the long leads stood at the step before these (:class:`_Runs`),
    updated to their last. ``middle``: the table's :func:`row_middles`, where made already.
    ``prepared``: what :func:`_prepare` made of these arguments, where the caller made it
    (its ``weighted`` False: the weighted fields are left at 0, :func:`window_totals`).

    The others' medians need whole rows (a few steps at a time); the rest is made
    :data:`_CHUNK` ranks at a time, in one pass: each chunk's fields summed per block,
    and each step's slowest usable point of the chunk, from which each step's one slowest
    rank follows; the weighted fields as one product of the weights and the shares of
    each :data:`_CHUNK_GROUP` ranks (a product's sums depend on its width: these are
    the same whatever the chunks). The leads, a few steps at a time, go to each step's
    latest rank (:func:`_leads`).
    """
    if prepared is None:
        prepared = _prepare(steps, table, scale, size, first, middle)
    index, spans, step = prepared.step_blocks, prepared.spans, prepared.step
    ranked_chunks: list[tuple[int, _Top | None]] = []  # each chunk's first column, its top
    own: FloatArray | None = None
    for group, chunks in _chunks(len(ranks)):
        # A group's own blocks (added into the destination's once made, or taken), or the
        # destination's. The own blocks of a group are the last's again where as wide: each
        # group's sums overwrite the same cells (:meth:`_Spans.add_runs`, the weighted
        # product), and the cells none writes (``SLOWEST``, blocks without a step, the
        # weighted fields where not made) stay the zeros they were made (2.8 MB paged in
        # and zeroed per group of 1,024 ranks and 13 blocks: 5 % of judge_timings).
        if columns is None and destination is not None:
            blocks = destination[group]
        else:
            if own is None or len(own) != group.stop - group.start:
                own = prepared.group_blocks(group)
            blocks = own
        shares: FloatArray | None = None
        for chunk in chunks:
            within = slice(chunk.start - group.start, chunk.stop - group.start)
            points = table[:, chunk]
            share, ranked = _chunk_sums(
                blocks[within],
                points,
                prepared.others(chunk, points),
                step,
                spans,
                prepared.alike,
            )
            ranked_chunks.append((chunk.start, ranked))
            if prepared.weighted:
                shares = _shares_into(shares, share, within, group)
        if shares is not None:
            _add_weighted(blocks, shares, spans)
        if destination is None:
            assert take is not None
            take(group, blocks)
        elif columns is not None:
            for block, column in enumerate(columns):
                destination[group, column] += blocks[:, block]
    latest, leads, latest_alone = _leads(table, ranks, step[:, 0], runs, gapless=prepared.gapless)
    # SLOWEST: the step's one rank at the top (two ranks tied at it: neither). Counts: the
    # same added before or after the rest of a block's sums.
    alone, winner = _one_top(ranked_chunks, latest, latest_alone)
    target_of = index if columns is None else np.asarray(columns, dtype=np.int64)[index]
    counts = destination[:, :, SLOWEST] if destination is not None else slowest
    assert counts is not None
    np.add.at(counts, (winner[alone], target_of[alone]), 1.0)
    timed = np.flatnonzero(latest >= 0)
    return _summed_leads(ranks[latest[timed]], index[timed], leads[timed])


class _Prepared(NamedTuple):
    """What :func:`_fill_blocks` makes of a block of steps before its ranks' sums: each
    step's block (``step_blocks``) and runs (``spans``), each point's reference
    (``others``, per chunk of ranks, given their columns), the step times (``(steps,
    1)``, NaN for none), each block's count and step time where every point is usable
    (``alike``), whether the table is known to hold no NaN, and whether the weighted
    fields are made."""

    table: TableArray
    step_blocks: IntArray
    spans: _Spans
    others: Callable[[slice, TableArray], FloatArray]
    step: FloatArray
    alike: FloatArray | None
    gapless: bool
    weighted: bool

    def group_blocks(self, group: slice) -> FloatArray:
        """A group of ranks' own blocks, zeros: ``(ranks, blocks, FIELDS)``, laid out
        ``(blocks, FIELDS, ranks)`` (each field's row of the group contiguous)."""
        blocks = np.zeros((int(self.step_blocks[-1]) + 1, FIELDS, group.stop - group.start))
        by_rank: FloatArray = blocks.transpose(2, 0, 1)
        return by_rank

    def weighted_blocks(
        self, group: slice, chunks: list[slice], table: TableArray | None = None
    ) -> FloatArray:
        """A group of ranks' weighted fields alone, ``(ranks, blocks, 2 x len(PERIODS))``:
        the same numbers :func:`_fill_blocks` makes, each chunk's shares made again from
        the group's columns (``table``, ``(steps, group)``: the same points as
        ``self.table``'s, read again where that array was reused)."""
        every = self.alike is not None
        shares: FloatArray | None = None
        for chunk in chunks:
            within = slice(chunk.start - group.start, chunk.stop - group.start)
            columns = self.table[:, chunk] if table is None else table[:, within]
            share = _chunk_share(columns, self.others(chunk, columns), self.step, every)
            shares = _shares_into(shares, share, within, group)
        assert shares is not None
        width = _WEIGHTED.stop - _WEIGHTED.start
        blocks = np.zeros((int(self.step_blocks[-1]) + 1, width, group.stop - group.start))
        by_rank: FloatArray = blocks.transpose(2, 0, 1)
        _add_weighted(by_rank, shares, self.spans, slice(0, width))
        return by_rank


def _prepare(
    steps: IntArray,
    table: TableArray,
    scale: FloatArray,
    size: int,
    first: int,
    middle: Middle | None,
    *,
    weighted: bool = True,
) -> _Prepared:
    """:class:`_Prepared` of :func:`_fill_blocks`' arguments."""
    index = steps // size - first
    spans = _Spans.of(index, steps)
    middle = middle if middle is not None else row_middles(table)
    step = np.where(np.isfinite(scale) & (scale > 0), scale, np.nan)[:, None]
    # Where every point is usable, a block's count and step time are each rank's alike:
    # summed once, as the chunks sum theirs (two ranks wide: each rank's column is added
    # in the same order whatever the width).
    alike = None
    if _all_usable(middle, step):
        alike = np.zeros((int(index[-1]) + 1, 2))
        spans.add_runs(np.broadcast_to(step, (len(steps), 2)).copy(), alike)
        alike[spans.targets, 0] = spans.lengths
    others = _references(table, middle)
    return _Prepared(table, index, spans, others, step, alike, middle is not None, weighted)


def _shares_into(
    shares: FloatArray | None, share: FloatArray, within: slice, group: slice
) -> FloatArray:
    """A chunk's excess shares (``(steps, chunk)``) into its ``group``'s (``within`` it),
    made on the first chunk laid out as that chunk's are: the weighted product's order."""
    if shares is None:
        by_rank = share.flags.f_contiguous and not share.flags.c_contiguous
        shares = np.empty((len(share), group.stop - group.start), order="F" if by_rank else "C")
    shares[:, within] = share
    return shares


def _add_weighted(
    blocks: FloatArray, shares: FloatArray, spans: _Spans, into: slice = _WEIGHTED
) -> None:
    """The weighted fields of a group's blocks (``(ranks, blocks, FIELDS)``; ``into``:
    where along its last axis, from ``PERIODIC`` on), in _weights' order; each the
    product of a run's weights and its rows of ``shares`` (``(steps, ranks)``). The runs
    of one length side by side (laid out step by step) are one stacked product: the
    same products, the same sums, one call (and one write) for them all."""
    for (first, last, length), at in zip(spans.levels, spans.level_targets, strict=True):
        start, stop = spans.bounds[first][0], spans.bounds[last - 1][1]
        if last - first > 1 and shares.flags.c_contiguous:
            weights = spans.weights[:, start:stop].reshape(len(spans.weights), -1, length)
            product = np.matmul(
                np.ascontiguousarray(weights.transpose(1, 0, 2)),
                shares[start:stop].reshape(last - first, length, -1),
            )
            blocks[:, at, into] = product.transpose(2, 0, 1)
            continue
        for target, (start, stop) in zip(
            spans.targets[first:last], spans.bounds[first:last], strict=True
        ):
            single = spans.weights[:, start:stop] @ shares[start:stop]
            blocks[:, target, into] = single.T


def _chunks(count: int) -> list[tuple[slice, list[slice]]]:
    """The ranks' groups of :data:`_CHUNK_GROUP`, each with its chunks of :data:`_CHUNK`
    (a last chunk of one rank joined to the one before). A chunk's sums add each rank's
    steps in the order numpy sums a ``(steps, ranks)`` table's columns, and numpy sums a
    lone column's pairwise (:meth:`_Spans.add_runs`): a rank is alone in its chunk only
    where it is alone in its group, so that the sums are those of whole groups."""
    groups = []
    for group in range(0, count, _CHUNK_GROUP):
        end = min(group + _CHUNK_GROUP, count)
        starts = list(range(group, end, _CHUNK))
        if len(starts) > 1 and end - starts[-1] == 1:
            starts.pop()
        stops = [*starts[1:], end]
        chunks = [slice(start, stop) for start, stop in zip(starts, stops, strict=True)]
        groups.append((slice(group, end), chunks))
    return groups


def _one_top(
    ranked: list[tuple[int, _Top | None]], latest: IntArray, latest_alone: BoolArray
) -> tuple[IntArray, IntArray]:
    """The steps whose top usable point one rank holds, and each step's column of the
    first point at its top: from each chunk's first column and :class:`_Top`, or, where
    the chunks made none (every point usable), from each step's latest point and whether
    it is alone at its value (:func:`_leads`)."""
    made = [(start, chunk) for start, chunk in ranked if chunk is not None]
    if not made:
        return np.flatnonzero(latest_alone), latest
    tops = np.asarray([chunk.top for _, chunk in made])
    at_top = tops == tops.max(axis=0)
    holders = np.asarray([chunk.holders for _, chunk in made])
    alone = np.flatnonzero(np.where(at_top, holders, 0).sum(axis=0) == 1)
    winners = np.asarray([start + chunk.winner for start, chunk in made])
    winner: IntArray = winners[at_top.argmax(axis=0), np.arange(tops.shape[1])]
    return alone, winner


class _Top(NamedTuple):
    """Per step of a chunk of ranks: its top usable point, how many of its ranks hold it,
    and the column of the first that does."""

    top: FloatArray
    holders: IntArray
    winner: IntArray


def _chunk_sums(
    out: FloatArray,
    table: TableArray,
    reference: FloatArray,
    step: FloatArray,
    spans: _Spans,
    alike: FloatArray | None = None,
) -> tuple[FloatArray, _Top | None]:
    """Fill ``out`` (a chunk of ranks' ``(ranks, blocks, fields)``, zeros) with the sums of
    its ``(steps, ranks)`` ``table`` but the weighted ones; return the excess shares (0
    where not usable) the weighted ones are made of, and the chunk's :class:`_Top` (None
    with ``alike``: every point usable, each step's one slowest rank is its latest point,
    which :func:`_leads` finds among every rank: the chunk's maxima, ties and first
    columns were 20 % of its time).

    Each field's sums go straight into ``out``'s ``(blocks, ranks)`` view of that field:
    a few strided writes, not a transposed copy of every field (a quarter of the chunk's
    time at 16,384 ranks). ``alike``: where every point of the table is known usable
    (:func:`_all_usable`), each block's count and step time (``(blocks, 2)``), which are
    then every rank's and are not summed per rank (but for a chunk of one rank, whose
    lone column numpy adds another way)."""
    by_field = out.transpose(2, 1, 0)
    # A float32 table is read as it is: what is summed is its difference with the float64
    # references (numpy widens it), and its maxima are only compared.
    seconds, share, reference_share = _excess(table, reference, step)
    if alike is not None and table.shape[1] > 1:
        # (Its blocks without a step are 0 in ``alike``, as in ``out``.)
        by_field[COUNT, : len(alike)] = alike[:, 0, None]
        by_field[STEP_SECONDS, : len(alike)] = alike[:, 1, None]
        usable = None
    else:
        usable = _usable(share, reference_share)
    # Every point usable (a job whose ranks all timed every step): nothing to mask.
    mask = None if usable is None or bool(usable.all()) else usable
    ranked = None
    if alike is None:
        filled = table if mask is None else np.where(mask, table, -np.inf)
        top = filled.max(axis=1, initial=-np.inf)
        at_top = filled == top[:, None]
        holders = (at_top if mask is None else at_top & mask).sum(axis=1)
        ranked = _Top(top, holders, filled.argmax(axis=1))
        del filled, at_top
    if mask is not None:
        share = np.where(mask, share, 0.0)
        seconds = np.where(mask, seconds, 0.0)
        reference_share = np.where(mask, reference_share, 0.0)
    for position, values in _plain_fields(share, seconds, reference_share, usable, step):
        spans.add_runs(values, by_field[position])
    return share, ranked


def _chunk_share(
    table: TableArray, reference: FloatArray, step: FloatArray, every: bool
) -> FloatArray:
    """The excess shares :func:`_chunk_sums` returns of the same chunk (0 where not
    usable; ``every``: every point of the table is, its ``alike`` given)."""
    _, share, reference_share = _excess(table, reference, step)
    if every:
        return share
    usable = _usable(share, reference_share)
    return share if bool(usable.all()) else np.where(usable, share, 0.0)


def _leads(
    table: TableArray,
    ranks: IntArray,
    step: FloatArray,
    runs: _Runs | None = None,
    *,
    gapless: bool = False,
) -> tuple[IntArray, FloatArray, BoolArray]:
    """Per step of a ``(steps, ranks)`` table (columns: ``ranks``, sorted): the column of
    its latest point (-1 for a step without a point or a step time), whether that point
    is alone at its value (no other point ties it), and, per size ``b``
    of ``BLOCK_SIZES``, by how much the latest block of ``b`` consecutive ranks led the
    latest other block (0 when no other block has a point: no one else to wait for);
    then per ``g`` of ``TOP_SIZES``, by how much the latest point led the ``g + 1``-th.

    A few steps at a time, without a sort or a partition of whole rows: each block size's
    latest points are the maxima of the size before it's (the sizes divide each other);
    the latest of the blocks other than the latest point's is the latest of its siblings
    within their parent block and of the blocks outside that parent; and a row's latest
    few points are among those of its blocks with the latest few maxima (:class:`_Nodes`).
    ``gapless``: the table is known to hold no NaN (nothing to fill).
    """
    count, width = table.shape
    latest = np.full(count, -1, dtype=np.int64)
    leads = np.zeros((count, LEAD_FIELDS))
    alone = np.zeros(count, dtype=bool)
    if width == 0:
        return latest, leads, alone
    tops = [(TOP_LEADS + offset, size) for offset, size in enumerate(TOP_SIZES) if size < width]
    # The latest few points of each row, in order: the latest, the next, the g + 1-th.
    few = min(width, 1 + max([1, *(size for _, size in tops)]))
    nodes = _Nodes(ranks, few)
    timed = np.isfinite(step) & (step > 0)
    rows = max(1, _LEAD_CELLS // width)
    for start in range(0, count, rows):
        part = _wide(table[start : start + rows])
        if gapless:
            filled, here = part, timed[start : start + rows]
        else:
            present = ~np.isnan(part)
            filled = np.where(present, part, -np.inf)
            here = timed[start : start + rows] & present.any(axis=1)
        column = filled.argmax(axis=1)
        latest[start : start + rows] = np.where(here, column, -1)
        lead_of = leads[start : start + rows]
        maxima = nodes.maxima(filled)
        nodes.leads(filled, column, maxima, lead_of)
        ordered = nodes.latest_few(filled, maxima)  # (rows, few), the latest last
        top = ordered[:, -1]
        for lead_field, size in tops:
            lead_of[:, lead_field] = _lead(top, ordered[:, -1 - size])
        if width >= 2:
            lead_of[:, LEADS] = _lead(top, ordered[:, -2])
            alone[start : start + rows] = here & (top > ordered[:, -2])
        else:
            alone[start : start + rows] = here
    if width >= 2:
        _long_leads(np.where(latest >= 0, ranks[np.maximum(latest, 0)], -1), leads, step, runs)
    return latest, leads, alone


def _long_leads(latest: IntArray, leads: FloatArray, step: FloatArray, runs: _Runs | None) -> None:
    """The ``LONG_LEADS`` counts of each row of ``leads`` (its lead over the next-latest
    in ``LEADS``; ``latest``: each row's latest rank, -1 for none; ``step``: each row's
    step time, NaN for none): 1 where the row's latest rank led by more than the edge
    times the rest of the step (``lead > e (step - lead)``: the step without the wait; a
    lead of a whole step time or more is long at every edge) and had not in the row
    before (a run of such steps of one rank, a
    data loader's hiccup of a few steps, is one episode: the counts are of episodes,
    which come one at a time, not steps). ``runs``: the row before these (the last step
    added before), updated to the last of these."""
    if not len(latest):
        return
    before = runs if runs is not None else _Runs()
    same = np.empty(len(latest), dtype=bool)
    same[0] = latest[0] == before.rank
    same[1:] = latest[1:] == latest[:-1]
    same &= latest >= 0
    last = []
    with np.errstate(invalid="ignore"):  # NaN: no step time, no step counted
        for offset, edge in enumerate(LEAD_EDGES):
            # lead > edge * (step - lead), without a division (a lead of the whole step)
            long = leads[:, LEADS] * (1.0 + edge) > edge * step
            earlier = np.empty(len(long), dtype=bool)
            earlier[0] = before.long[offset]
            earlier[1:] = long[:-1]
            leads[:, LONG_LEADS + offset] = long & ~(earlier & same)
            last.append(bool(long[-1]))
    if runs is not None:
        runs.rank, runs.long = int(latest[-1]), tuple(last)


class _Nodes:
    """The blocks of each size of ``BLOCK_SIZES`` after the first that splits ``ranks``
    (sorted) in two blocks or more, in order (a size whose one block holds every rank
    has no lead, nor have the larger ones); ``few``: how many of a row's latest points
    :meth:`latest_few` gives.

    Per size: its offset in ``BLOCK_SIZES``; where each of its blocks starts among the
    blocks of the size before it, and among the columns; whether they are every
    ``ratio``-th block before them (a whole block of ranks each, the last one possibly
    short: their maxima are those of strided slices, not of ``reduceat``); and each
    column's block. Where each block ends among the blocks before it and among the
    columns is kept too (the rows of a table are many, its layout one)."""

    def __init__(self, ranks: IntArray, few: int) -> None:
        self.few = few
        self.offsets: list[int] = []
        self.starts: list[IntArray] = []
        self.column_starts: list[IntArray] = []
        self.stops: list[IntArray] = []
        self.column_stops: list[IntArray] = []
        self.ratios: list[int] = []
        self.regular: list[bool] = []
        self.block_of: list[IntArray] = []
        blocks, block_of, columns = ranks, np.arange(len(ranks)), np.arange(len(ranks))
        for offset in range(1, len(BLOCK_SIZES)):
            ratio = BLOCK_SIZES[offset] // BLOCK_SIZES[offset - 1]
            parents = blocks // ratio
            first = np.r_[True, parents[1:] != parents[:-1]]
            starts = np.flatnonzero(first)
            if len(starts) < 2:
                break  # one block of this size holds every rank, and of the larger ones
            columns = columns[starts]
            self.offsets.append(offset)
            self.starts.append(starts)
            self.column_starts.append(columns)
            self.stops.append(np.r_[starts[1:], len(blocks)])
            self.column_stops.append(np.r_[columns[1:], len(ranks)])
            self.ratios.append(ratio)
            self.regular.append(np.array_equal(starts, np.arange(0, len(blocks), ratio)))
            block_of = (np.cumsum(first) - 1)[block_of]
            self.block_of.append(block_of)
            blocks = parents[starts]
        # The size whose blocks with the latest few maxima are found and searched at the
        # least cost (their count, and few blocks of its size), if any has enough blocks.
        costs = [
            (len(starts) + few * BLOCK_SIZES[offset], level)
            for level, (offset, starts) in enumerate(zip(self.offsets, self.starts, strict=True))
            if len(starts) > few
        ]
        self.search = min(costs)[1] if costs else None

    def maxima(self, filled: FloatArray) -> list[FloatArray]:
        """Each row's latest point of each block of each size (``filled``: NaN as -inf)."""
        maxima = []
        values = filled
        for starts, ratio, regular in zip(self.starts, self.ratios, self.regular, strict=True):
            values = _block_maxima(values, starts, ratio, regular)
            maxima.append(values)
        return maxima

    def leads(
        self, filled: FloatArray, column: IntArray, maxima: list[FloatArray], out: FloatArray
    ) -> None:
        """Per row of ``filled`` whose latest point is at ``column``: the lead of the
        latest block of each size over the latest other block, into ``out``."""
        if not self.offsets:
            return
        rows = np.arange(len(filled))
        top = filled[rows, column]
        # The largest size's other blocks are all of its blocks but the latest's.
        others = maxima[-1].copy()
        others[rows, self.block_of[-1][column]] = -np.inf
        other = others.max(axis=1)
        out[:, LEADS + self.offsets[-1]] = _lead(top, other)
        # A smaller size's other blocks: the larger size's other blocks (their latest is
        # ``other``), and the siblings of its latest block within the larger one's.
        for level in range(len(self.offsets) - 2, -1, -1):
            parent = self.block_of[level + 1][column]
            mine = self.block_of[level][column]
            width = maxima[level].shape[1]
            starts, ends = self.starts[level + 1], self.stops[level + 1]
            siblings = starts[parent][:, None] + np.arange(self.ratios[level + 1])
            usable = (siblings < ends[parent][:, None]) & (siblings != mine[:, None])
            within = maxima[level][rows[:, None], np.minimum(siblings, width - 1)]
            other = np.maximum(other, np.where(usable, within, -np.inf).max(axis=1))
            out[:, LEADS + self.offsets[level]] = _lead(top, other)

    def latest_few(self, filled: FloatArray, maxima: list[FloatArray]) -> FloatArray:
        """Each row's ``few`` latest points, the latest last (``filled``: NaN as -inf).

        They are among the points of the ``few`` blocks (of any size) with the latest
        maxima: a point of another block is at or below those maxima, ``few`` points."""
        width = filled.shape[1]
        if self.search is None:
            lowest = width - self.few
            ordered: FloatArray = np.sort(np.partition(filled, lowest, axis=1)[:, lowest:], axis=1)
            return ordered
        blocks = maxima[self.search]
        chosen = np.argpartition(blocks, blocks.shape[1] - self.few, axis=1)[:, -self.few :]
        starts, ends = self.column_starts[self.search], self.column_stops[self.search]
        size = BLOCK_SIZES[self.offsets[self.search]]
        columns = starts[chosen][:, :, None] + np.arange(size)
        inside = columns < ends[chosen][:, :, None]
        rows = np.arange(len(filled))[:, None, None]
        points = np.where(inside, filled[rows, np.minimum(columns, width - 1)], -np.inf)
        points = points.reshape(len(filled), -1)
        lowest = points.shape[1] - self.few
        ordered = np.sort(np.partition(points, lowest, axis=1)[:, lowest:], axis=1)
        return ordered


def _block_maxima(values: FloatArray, starts: IntArray, ratio: int, regular: bool) -> FloatArray:
    """Each row's maximum over each block of ``values``' columns that ``starts`` begin
    (``regular``: every ``ratio``-th column, as strided slices)."""
    if not regular:
        maxima: FloatArray = np.maximum.reduceat(values, starts, axis=1)
        return maxima
    if ratio == 1:
        return values.copy()
    # The first two columns of each block compared as they are read (not the first copied
    # and then compared: one pass over the widest level, not two); a last block of one
    # column is that column.
    count = -(-values.shape[1] // ratio)
    maxima = np.empty((len(values), count))
    second = values[:, 1::ratio]
    paired = second.shape[1]
    np.maximum(values[:, : paired * ratio : ratio], second, out=maxima[:, :paired])
    if paired < count:
        maxima[:, paired:] = values[:, paired * ratio :: ratio]
    for offset in range(2, ratio):
        part = values[:, offset::ratio]
        np.maximum(maxima[:, : part.shape[1]], part, out=maxima[:, : part.shape[1]])
    return maxima


def _lead(latest: FloatArray, other: FloatArray) -> FloatArray:
    """``latest - other``, 0 where that is not finite (no other point to lead)."""
    with np.errstate(invalid="ignore"):
        lead = latest - other
    finite: FloatArray = np.where(np.isfinite(lead), lead, 0.0)
    return finite


def tag_sums(evidence: StragglerEvidence, tag: str) -> TagEvidence:
    """The sums of ``tag`` in ``evidence`` (KeyError when it has none), for the verdict."""
    return evidence._tags[tag]
