"""The straggler verdict: thresholds, the judgement of the evidence, records and lineage keys.

``docs/job-view.md`` ("Straggler", "Verdict records") describes the rule. Per
timing and rank, over the evidence's blocks
(:mod:`rankscribe.jobview.job.verdicts._stragglers`): the onset
is the block from which its excess to the end is clearest (the sum over the
square root of the steps: a change point); over the steps since then the rank is slow when
its excess as a share of the job's time (its excess seconds over the step times) reaches
the floor, its
excess reaches the floor in more than half the steps (the median excess: stalls
of a few ms in some steps raise the mean, not this; in at least half for a rank
as noisy as the others, ``SHIFTED_SPREAD``) or, for a rank slow in
fewer steps, its mean excess clears ``BURST_FLOORS`` floors or it is slow every
k-th step (the Fourier component of its excess at that period: :func:`_periods`);
and its mean excess is ``confidence`` standard errors above zero (more with many
ranks: :func:`confidence_for`; for a rank slow in most steps, its variance moderated
by the others': :func:`_moderated`). A slow rank is named when what the job
waited for it (its wall clock: :func:`_wall_named`) reaches the floor, in share
and in seconds; a rank the job clearly waits for in few long leads is slow too
(:func:`_long_leads_often`), named at the same floor. A node of several ranks named
on one timing is one verdict; its cost is what the job waited for the node beyond
the rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview.errors import JobViewParamTypeError, JobViewParamValueError
from rankscribe.jobview.job._statistics import ARRIVAL_TIME_TAG
from rankscribe.jobview.job.verdicts._record_types import CostlyRank, StragglerRecord
from rankscribe.jobview.job.verdicts._stragglers import (
    ABOVE,
    ABOVE_EDGES,
    BLOCK_SIZES,
    COUNT,
    EDGES,
    LEAD_EDGES,
    LEADS,
    LONG_LEADS,
    PERIODS,
    REFERENCE,
    SECONDS,
    SHARE,
    SLOWEST,
    SQUARE,
    STEP_SECONDS,
    TOP_LEADS,
    TOP_SIZES,
    StragglerEvidence,
    TagTotals,
    add_since,
    tag_sums,
    tag_totals,
)

if TYPE_CHECKING:
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

__all__ = [
    "VerdictSettings",
    "seconds_text",
    "straggler_judgement_since",
    "straggler_message",
    "straggler_records",
    "straggler_verdicts",
    "straggler_verdicts_since",
    "timing_label",
    "totals_records",
]

_NONE = -1
#: A cost judged by its mean must clear the floor by this many standard errors.
FLOOR_ERRORS = 1.0
#: A steady rank's own variance is pooled with the median rank's as if that were this
#: many more steps of evidence (:func:`_moderated`).
NOISE_STEPS = 50.0
#: ... for a timing whose noise is at most this share of its size (near normal).
NORMAL_SPREAD = 0.25
#: ... and for a rank whose spread is at most this many times the median rank's.
LIKE_NOISE = 2.0
#: ... and the rank's excess must reach the floor in more than half of the steps, by
#: this many standard errors of a sign test (its median excess clears the floor):
#: material in most steps, not a mean raised by stalls in some.
MATERIAL_ERRORS = 0.5
#: ... or in at least half of its steps (no margin) for a rank whose spread is at most this
#: many times the median rank's: a rank shifted as a whole, not stalled in some steps (a
#: stalled rank's stalls widen its spread several times the others').
SHIFTED_SPREAD = 1.5
#: A rank slow in fewer than half of its steps (every k-th step, stalls) is named only
#: when its mean excess share clears this many floors (by ``FLOOR_ERRORS`` standard errors): a
#: rank descheduled now and then on a busy machine costs a few percent, not this.
BURST_FLOORS = 5.0
#: The longest period (steps) a rank slow every k-th step is reported with: its period
#: found (:func:`_periods`) is taken to the multiple of it up to this that its share of
#: slow steps gives.
LONGEST_PERIOD = 64
#: ``confidence`` holds for up to this many ranks judged at once; with more, the bar rises
#: so that the chance of naming some clean rank stays what it is at this many.
CONFIDENCE_RANKS = 64


def confidence_for(confidence: float, ranks: int) -> float:
    """The bar for ``ranks`` ranks judged at once: ``confidence`` up to ``CONFIDENCE_RANKS``,
    then ``sqrt(confidence**2 + 2 ln(ranks / CONFIDENCE_RANKS))`` (a normal tail's chance
    divided by ``ranks / CONFIDENCE_RANKS``: the many comparisons of a large job)."""
    extra = 2.0 * math.log(max(ranks / CONFIDENCE_RANKS, 1.0))
    return math.sqrt(confidence * confidence + extra)


@dataclass(frozen=True)
class VerdictSettings:
    """The thresholds of the straggler verdict (``docs/job-view.md``, "Straggler").

    Attributes:
        cost_floor_share: a rank is named only when it costs at least this
            share of the job's step (0.02: 2 %), and its excess reaches it in
            most of its steps (or its cost reaches 5 times it, or it is slow every
            k-th step, or the job clearly waits for it in long leads).
        cost_floor_seconds: ... and at least this many seconds a step.
        confidence: ... and its mean excess is this many standard errors
            above zero (the evidence is clear), for a job of up to 64 ranks;
            with more ranks judged at once the bar is
            ``sqrt(confidence**2 + 2 ln(ranks / 64))`` (6.9 at 16,384 ranks at
            the default), so a large job's many ranks do not raise its false
            alarms.
        min_steps: ... over at least this many steps since its onset.
        persistent_share: a verdict is persistent (chronic) when the rank was
            slow in at least this share of the steps since its onset and has no
            period; else a burst (or intermittent, slow every k-th step).
        top_k: how many of the costliest ranks each verdict lists.

    Raises:
        JobViewParamValueError: a threshold out of its range (named in the message).
    """

    cost_floor_share: float = 0.02
    cost_floor_seconds: float = 5e-5
    confidence: float = 6.0
    min_steps: int = 8
    persistent_share: float = 0.5
    top_k: int = 5

    def __post_init__(self) -> None:
        _check_number("cost_floor_share", self.cost_floor_share, 0.0, 1.0)
        _check_number("cost_floor_seconds", self.cost_floor_seconds, 0.0, math.inf)
        _check_number("confidence", self.confidence, 0.0, math.inf)
        _check_number("persistent_share", self.persistent_share, 0.0, 1.0)
        for name in ("min_steps", "top_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise JobViewParamValueError(f"{name} must be an int >= 1, got {value!r}")


def _check_number(name: str, value: Any, low: float, high: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        bound = "" if math.isinf(high) else f" and <= {high:g}"
        raise JobViewParamValueError(
            f"{name} must be a finite number >= {low:g}{bound}, got {value!r}"
        )


@dataclass
class _Judged:
    """Per rank of one timing, judged over the steps since its onset. ``period`` (and
    the ``persistent`` it withholds) is read for the ranks that may be named alone
    (:func:`_add_periods`): 0 for the others."""

    ranks: IntArray
    named: npt.NDArray[np.bool_]
    cost_seconds: FloatArray
    factor: FloatArray
    since_step: IntArray
    share_of_steps: FloatArray
    slowest_share: FloatArray
    steps: FloatArray
    persistent: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    period: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _typical_variance(whole: FloatArray) -> float:
    """The median rank's variance of the excess share over the whole evidence (its noise;
    ``whole``: each rank's sums over every block)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        whole_mean = whole[:, SHARE] / whole[:, COUNT]
        variance = whole[:, SQUARE] / whole[:, COUNT] - whole_mean * whole_mean
    known = variance[~np.isnan(variance)]
    return float(np.median(known)) if len(known) else 0.0


def _spread(whole: FloatArray, noise: float) -> float:
    """The timing's noise as a share of its size: the median rank's standard deviation
    of its excess over the median rank's reference (the others' median; both as shares
    of the step). About 0.07 for a forward, 0.5 for a short data wait."""
    with np.errstate(invalid="ignore", divide="ignore"):
        reference = whole[:, REFERENCE] / whole[:, COUNT]
    known = reference[np.isfinite(reference)]
    size = float(np.median(known)) if len(known) else 0.0
    # ``noise`` is a difference of sums: a timing without noise can leave it just below 0.
    return math.sqrt(max(noise, 0.0)) / size if size > 0 else math.inf


def _moderated(variance: FloatArray, count: FloatArray, noise: float, spread: float) -> FloatArray:
    """Each rank's variance of its excess, moderated by the median rank's ``noise``.

    A few dozen steps estimate a rank's variance to 20 % or so, and the
    largest of such estimates among many ranks are well above their truth: a
    rank slow in most of its steps whose few outlying steps widen its spread
    would not look clear. So, for such a rank (:func:`_steady`), its own
    variance over ``count`` steps is pooled with the noise as if that were
    ``NOISE_STEPS`` more steps of evidence (the moderated t-statistic of tests
    over many units at once), never below the noise (a few steps since a
    chosen onset can look steadier than the rank is). A burst, or a rank
    stalled in some steps, is judged on its own spread: its spread is the
    evidence that it is not steady.

    Only for a timing whose noise is at most ``NORMAL_SPREAD`` of its size
    (``spread``, :func:`_spread`): a compute section or a forward is near
    normal, while a wait of a few hundred us that varies by half of itself is
    skewed, and there the variances of a few dozen steps are no guide to each
    other (its own spread stays). And only for a rank whose spread is at most
    ``LIKE_NOISE`` times the others': a rank stalled now and then on a busy
    core, slow in just over half of its steps, has a spread several times
    theirs, and that is its own.
    """
    own = np.maximum(variance, noise)
    if spread > NORMAL_SPREAD:
        return own
    with np.errstate(invalid="ignore"):
        pooled = (count * variance + NOISE_STEPS * noise) / (count + NOISE_STEPS)
    # A spread more than LIKE_NOISE times the others' is the rank's own, not chance.
    alike = variance <= LIKE_NOISE * LIKE_NOISE * noise
    moderated: FloatArray = np.where(alike, np.maximum(pooled, noise), own)
    return moderated


def _duty(mean: FloatArray, square: FloatArray, noise: float | FloatArray) -> FloatArray:
    """The share of its steps in which each rank was slow, from the moments of its excess.

    A rank slow by ``J`` in a share ``p`` of the steps has a mean excess
    ``p J`` and, beyond the noise every rank has (``noise``: the median rank's
    variance), a second moment ``p J**2``: ``p = mean**2 / (second moment -
    noise)``. 1 for a chronic straggler, ``1/k`` for one slow every k-th step,
    the burst's share for a burst.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        beyond = np.maximum(square - noise, mean * mean)
        duty = np.where(beyond > 0, mean * mean / beyond, 0.0)
    clipped: FloatArray = np.clip(np.nan_to_num(duty), 0.0, 1.0)
    return clipped


def _duty_noise(
    segment: FloatArray, whole: FloatArray, noise: float, least: int
) -> float | FloatArray:
    """The noise :func:`_duty` reads each rank's slow steps beyond: the median rank's
    variance (``noise``); in a job of two ranks, each rank's own variance before its onset
    (``whole`` less ``segment``), where it has at least ``least`` steps there (never
    above the median rank's).

    Of two ranks each one's excess is the other's negated: their variances are one, and
    the median rank's is the slow rank's own, its slowness in it. Read beyond that, a rank
    slow by 4 ms in half of its steps since its onset was said to be slow in 93 % of them
    (a real 2-rank DDP job); beyond its own noise before the onset, 47 %.
    """
    if len(segment) != 2:
        return noise
    before = whole[:, [COUNT, SHARE, SQUARE]] - segment[:, [COUNT, SHARE, SQUARE]]
    count = before[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = before[:, 1] / count
        variance = np.maximum(before[:, 2] / count - mean * mean, 0.0)
    # Never above the median rank's: that one holds the slowness too (a few steps before
    # an onset placed late may hold some of it).
    own: FloatArray = np.where(count >= least, np.minimum(variance, noise), noise)
    return own


def _steps_above(segment: FloatArray, floor: float) -> FloatArray:
    """Per rank, the steps whose excess share was above ``floor``: the counts at the
    evidence's edges (0 and ``EDGES``), linear between them, the last edge's beyond."""
    above: FloatArray = _edge_counts(segment) @ _edge_weights(floor)
    return above


def _edge_counts(segment: FloatArray) -> FloatArray:
    """Per rank, its steps above 0 and above each of ``EDGES``."""
    counts: FloatArray = segment[:, [ABOVE, *range(ABOVE_EDGES, ABOVE_EDGES + len(EDGES))]]
    return counts


def _edge_weights(floor: float) -> FloatArray:
    """The weights of the counts at 0 and ``EDGES`` that give the count at ``floor``
    (np.interp of each rank's counts at ``floor``: the same weights for every rank)."""
    edges = np.array((0.0, *EDGES))
    identity = np.eye(len(edges))
    return np.array([np.interp(floor, edges, identity[i]) for i in range(len(edges))])


def _steady(
    segment: FloatArray, floor: float, shifted: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_]:
    """Per rank: its excess is above ``floor`` in more than half of its steps, by
    ``MATERIAL_ERRORS`` standard errors of a sign test (its median excess clears the floor);
    or, for a rank whose spread is like the others' (``shifted``: at most
    ``SHIFTED_SPREAD`` times the median rank's, in a job of three ranks or more), in at
    least half of them.

    The margin guards against a rank stalled now and then on a busy core, whose stalls
    lift it above the floor in nearly half of its steps; its stalls also widen its spread
    several times the others', so a rank as noisy as they are is not that rank. At 16,384
    ranks a rank 10 % slower in its forward costs 2.5-3.5 % of the step, its excess is
    above a 2 % floor in 55-65 % of its steps, and over 50 steps the margin alone held
    back about one run in 50. Two ranks cannot be told apart so: each one's excess is the
    other's negated, and their spreads are one. Every step counts, a stall too: a rank
    stalled by 15 % of the step in most of its steps is slow in most of them.
    """
    above = _steps_above(segment, floor)
    count = segment[:, COUNT]
    margin = np.where(shifted, 0.0, MATERIAL_ERRORS)
    with np.errstate(invalid="ignore"):
        steady: npt.NDArray[np.bool_] = (count > 0) & (
            2 * above - count >= margin * np.sqrt(np.maximum(count, 0.0))
        )
    return steady


def _periods(
    segment: FloatArray, periodic: FloatArray, bar: float
) -> tuple[IntArray, npt.NDArray[np.bool_]]:
    """Per rank of ``segment`` (its sums since its onset; ``periodic``: the same ranks'
    sums from ``PERIODIC`` on, :meth:`TagTotals.periodic_since`), the period K (in steps)
    at which it is slow every K-th step (0: none), and which of ``PERIODS`` were found
    (``(ranks, len(PERIODS))``).

    The excess's Fourier component at period k of ``PERIODS`` (``C``: the mean of
    the excess share weighted by ``exp(2 pi i step / k)``) against what
    independent steps give: ``n |C|^2`` over the second moment of the excess is
    exponential with mean 1 for a rank without a period, so it must reach the
    tail of a normal at ``bar`` (``bar^2 / 2 + ln(bar) + 1``). A rank slow every
    K-th step has the components at every multiple of ``1/K``: at ``1/k`` for
    each k of ``PERIODS`` that divides K (every 8th: the 8th, the 4th and the
    2nd; every 10th: the 5th and the 2nd; every 12th: the 2nd, 3rd, 4th and
    6th). Returned: the least common multiple of the k found, K itself when K is
    the least common multiple of its divisors up to 8 (2 to 8, 10, 12, 14, 15,
    20, 21, 24, 28, 30, 40, 42, 56, 60, ...), else a divisor of it (every 9th: 3;
    every 16th: 8; every 11th: none found), which :func:`_period_of_duty` takes
    to the multiple the rank's share of slow steps gives.
    """
    count = segment[:, COUNT]
    threshold = bar * bar / 2 + math.log(max(bar, 1.0)) + 1.0
    periods = np.ones(len(segment), dtype=np.int64)
    found = np.zeros((len(segment), len(PERIODS)), dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        second = segment[:, SQUARE] / count
        for offset, period in enumerate(PERIODS):
            cosine = periodic[:, 2 * offset] / count
            sine = periodic[:, 2 * offset + 1] / count
            power = count * (cosine * cosine + sine * sine) / second
            found[:, offset] = np.nan_to_num(power) >= threshold
            periods[found[:, offset]] = np.lcm(periods[found[:, offset]], period)
    with_period: IntArray = np.where(periods > 1, periods, 0)
    return with_period, found


def _period_of_duty(
    period: IntArray,
    duty: FloatArray,
    found: npt.NDArray[np.bool_],
    mean: FloatArray,
    segment: FloatArray,
    rows: IntArray,
) -> IntArray:
    """Per rank of ``rows`` (of ``segment``, every rank's sums since its onset; the other
    arguments are these ranks'), of the multiples of its period found (:func:`_periods`) up to
    ``LONGEST_PERIOD`` steps, the one nearest (as a ratio) to one over its share of slow
    steps: a rank slow every 16th step has the components of the 8th, 4th and 2nd only,
    and is slow in 1/16 of its steps.

    Of those, only the multiples whose divisors among ``PERIODS`` are exactly the periods
    ``found`` (all of them when none is): a rank slow every 9th step has the component of
    the 3rd and not those of the 2nd and 6th, which every 6th step would have too.

    The share of slow steps, where several multiples remain, is counted
    (:func:`_counted_share`): the moments of the excess (``duty``, :func:`_duty`) take
    a heavy-tailed wait's spread for slow steps (every 16th read 1/8 to 1/10 so, every
    9th 1/6); ``duty`` where the count cannot be read."""
    refined = period.copy()
    steps_of = np.array(PERIODS)
    typical: FloatArray | None = None  # the median rank's share of steps above 0 and EDGES
    for row in np.flatnonzero((period > 0) & (duty > 0)).tolist():
        multiples = np.arange(period[row], max(LONGEST_PERIOD, period[row]) + 1, period[row])
        divides = multiples[:, None] % steps_of == 0
        alike = multiples[(divides == found[row]).all(axis=1)]
        multiples = alike if len(alike) else multiples
        share = duty[row]
        if len(multiples) > 1:
            if typical is None:
                typical = _typical_edge_shares(segment)
            half = mean[row] * multiples[0] / 2
            counted = _counted_share(segment, int(rows[row]), half, typical)
            share = counted if counted > 0 else share
        refined[row] = multiples[np.argmin(np.abs(np.log(multiples * share)))]
    return refined


def _typical_edge_shares(segment: FloatArray) -> FloatArray:
    """The median rank's share of its steps above 0 and above each of ``EDGES`` (the
    noise's, where few ranks are slow); NaN where no rank has steps."""
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = _edge_counts(segment) / segment[:, COUNT, None]
    typical: FloatArray = np.full(shares.shape[1], np.nan)
    known = np.isfinite(shares).all(axis=1)
    if known.any():
        typical = np.median(shares[known], axis=0)
    return typical


def _counted_share(segment: FloatArray, row: int, half: float, typical: FloatArray) -> float:
    """The share of ``row``'s steps in which it was slow, counted: its steps whose excess
    share is above ``half`` (half the slowness its shortest period gives: ``mean x K``,
    which its longer periods' slowness exceeds), less the median rank's share of steps
    above it (``typical``, the noise's; both read between the counts' edges alike). 0
    where ``half`` is below the first of ``EDGES`` (the counts are linear between the
    edges and 0, a guess that low) or a share is unknown."""
    if not half >= EDGES[0]:
        return 0.0
    weights = _edge_weights(half)
    count = segment[row, COUNT]
    if not count > 0:
        return 0.0
    counted = float(_edge_counts(segment[row : row + 1])[0] @ weights) / float(count)
    noise = float(typical @ weights)
    return counted - noise if math.isfinite(noise) else 0.0


def _judge_tag(part: TagTotals, settings: VerdictSettings) -> _Judged:
    """Each rank of ``part`` judged over the steps since its onset."""
    onset, segment, whole = part.onset, part.since, part.whole
    count = segment[:, COUNT]
    noise = _typical_variance(whole)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = segment[:, SHARE] / count
        seconds = segment[:, SECONDS] / count
        variance = np.maximum(segment[:, SQUARE] / count - mean * mean, 0.0)
        # Never less than the median rank's noise: a few steps since a chosen onset
        # can look steadier than the rank is.
        error = np.sqrt(np.maximum(variance, noise) / np.maximum(count - 1, 1))
        strength = np.where(error > 0, mean / error, np.where(mean > 0, np.inf, 0.0))
        # For a rank slow in most of its steps: its spread moderated by the noise.
        steady_error = np.sqrt(
            _moderated(variance, count, noise, _spread(whole, noise)) / np.maximum(count - 1, 1)
        )
        steady_strength = np.where(
            steady_error > 0, mean / steady_error, np.where(mean > 0, np.inf, 0.0)
        )
        # Its cost as a share of the job's time since the onset: the excess seconds over
        # the step times, summed. The mean of each step's share reads a rank slow in
        # some steps low (its slow steps are the long ones: every 48th step 3x slower is
        # 2.5 % of the job's time and a mean share of 1.2 %); the per-step shares judge
        # whether it is slow at all, this whether it costs the floor, with the standard
        # error in the same proportion.
        cost = segment[:, SECONDS] / segment[:, STEP_SECONDS]
        in_cost = np.where(mean > 0, cost / mean, np.inf)  # a standard error, in the cost's terms
        cost_error, steady_cost_error = error * in_cost, steady_error * in_cost
        factor = 1.0 + segment[:, SHARE] / segment[:, REFERENCE]
        share_of_steps = _duty(
            mean, segment[:, SQUARE] / count, _duty_noise(segment, whole, noise, settings.min_steps)
        )
        slowest_share = segment[:, SLOWEST] / count
    floor = settings.cost_floor_share
    bar = confidence_for(settings.confidence, len(part.ranks))
    # Clear by the mean: its cost clears the floor by FLOOR_ERRORS standard errors too,
    # so a difference that sits near the floor is not named half the time.
    by_mean = (strength >= bar) & (cost - FLOOR_ERRORS * cost_error >= floor)
    # Material in most steps: on a busy machine a rank descheduled for a few ms in some
    # steps has a mean excess of several times its usual one; its median is unmoved.
    # No margin for a rank as noisy as the others: shifted as a whole, not stalled. Not
    # with two ranks: each one's excess is the other's negated, their spreads are one.
    shifted = (len(part.ranks) > 2) & (variance <= SHIFTED_SPREAD * SHIFTED_SPREAD * noise)
    steady = _steady(segment, floor, shifted)
    # A rank slow in most of its steps is as noisy as the others but for chance: its
    # variance moderated by theirs (a burst's, or a stalled rank's, spread is its own).
    by_steady_mean = (
        steady & (steady_strength >= bar) & (cost - FLOOR_ERRORS * steady_cost_error >= floor)
    )
    # A burst's five floors stay on the per-step mean, the measure they were set against: on
    # the job's time a clean torchrun job's rank 0, late in 41 % of its steps by the live
    # view's work on a shared 2-core machine, read 7 % of the step and was named, then ended.
    large = mean - FLOOR_ERRORS * error >= BURST_FLOORS * floor
    clear = by_mean | by_steady_mean
    since = np.maximum((part.first_block + onset) * part.block_size, part.first_step)
    clean = np.nan_to_num
    judged = _Judged(
        ranks=part.ranks,
        named=clear & (steady | large),
        cost_seconds=clean(seconds),
        factor=clean(factor, nan=1.0, posinf=np.inf),
        since_step=since.astype(np.int64),
        share_of_steps=clean(share_of_steps),
        slowest_share=clean(slowest_share),
        steps=count,
        persistent=clean(share_of_steps) >= settings.persistent_share,
        period=np.zeros(len(part.ranks), dtype=np.int64),
    )
    # Or slow every k-th step (a periodic extra work, not stalls at random): the period
    # is clear (its cost is judged on its share of the job's time, as any rank's). Read
    # for the ranks the evidence is clear of alone: no other can be named by it.
    rows = np.flatnonzero(clear)
    judged.named[rows] = judged.named[rows] | _add_periods(judged, part, rows, settings)
    return judged


def _add_periods(
    judged: _Judged, part: TagTotals, rows: IntArray, settings: VerdictSettings
) -> npt.NDArray[np.bool_]:
    """Set the period of ``judged``'s ranks ``rows`` (of ``part``), and their persistence
    (a periodic rank is not persistent); return which of them have one. A rank's period
    is only read where it may be named (its record's ``period_steps``): the periodic
    sums of a window judged at once are made for those ranks alone
    (:meth:`TagTotals.periodic_since`)."""
    segment = part.since
    sums = segment[rows]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums[:, SHARE] / sums[:, COUNT]
    period, found = _periods(
        sums,
        part.periodic_since(rows),
        confidence_for(settings.confidence, len(part.ranks) * len(PERIODS)),
    )
    period = _period_of_duty(period, judged.share_of_steps[rows], found, mean, segment, rows)
    periodic = period > 0
    judged.period[rows] = np.where(periodic, period, 0)
    judged.persistent[rows] &= ~periodic
    return periodic


def timing_label(tag: str) -> str:
    """A timing tag as a verdict names it: ``rankscribe/forward_time`` -> ``forward``."""
    if not isinstance(tag, str):
        raise JobViewParamTypeError(f"tag must be a str, got {type(tag).__name__}")
    known = {
        "rankscribe/arrival_time": "arrival",
        "rankscribe/forward_time": "forward",
        "rankscribe/data_wait": "data_wait",
        "rankscribe/step_time": "step_time",
    }
    if tag in known:
        return known[tag]
    return tag.removeprefix("rankscribe/")


def seconds_text(seconds: float) -> str:
    """A duration as a verdict says it: ``2.31 s``, ``4.1 ms``, ``108 us``."""
    if abs(seconds) >= 1.0:
        return f"{seconds:.2f} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def _ordinal(number: int) -> str:
    """``2nd``, ``3rd``, ``10th``, ``12th``, ``21st``, ``42nd``."""
    suffix = (
        "th" if number % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    )
    return f"{number}{suffix}"


def straggler_message(record: StragglerRecord) -> str:
    """The record's one line, leading with the cost (its ``message``)."""
    ranks = record["ranks"]
    who = (
        f"rank {ranks[0]} costs" if len(ranks) == 1 else (f"ranks {','.join(map(str, ranks))} cost")
    )
    words = record["timing"].replace("_", " ")
    if record["timing"].startswith("section/"):
        words = f"section {record['timing'].removeprefix('section/')!r}"
    kind = "" if record["persistent"] else " (a burst)"
    if record["period_steps"]:
        kind = f" (intermittent: every {_ordinal(record['period_steps'])} step)"
    return (
        f"{who} {seconds_text(record['cost_seconds_per_step'])} a step "
        f"({record['cost_share']:.0%} of the step): {words} {record['factor']:.2f}x the others' "
        f"median since step {record['since_step']}, in {record['share_of_steps']:.0%} of "
        f"steps{kind}"
    )


def straggler_records(
    evidence: StragglerEvidence, settings: VerdictSettings | None = None
) -> list[StragglerRecord]:
    """The straggler verdicts of ``evidence``: one record per timing that names a rank.

    Each record is a plain dict, ready for JSON (``docs/job-view.md``,
    "Verdict records"): ``kind`` ("straggler"), ``ranks`` (most costly first),
    ``timing``, ``tag``, ``cost_seconds_per_step``, ``cost_share``,
    ``since_step``, ``persistent``, ``share_of_steps``, ``factor``,
    ``slowest_share``, ``steps``, ``top`` (the costliest ranks of that timing,
    named or not, with their costs) and ``message``. The costliest first.
    """
    return [record for record, _ in _judgements(_Totals.of_evidence(evidence), settings)]


#: rank -> (cost seconds, cost share, factor, onset) of each rank a verdict names.
_PerRank = dict[int, tuple[float, float, float, int]]


@dataclass
class _Since:
    """Per rank, the sums of the wall clock over its blocks since its onset (0 for a rank
    without any): its steps, steps as the one slowest, the job's step time and its leads
    (``(ranks, LEAD_FIELDS)``)."""

    count: FloatArray
    slowest: FloatArray
    step_seconds: FloatArray
    leads: FloatArray


@dataclass
class _WallClock:
    """What the job waited for, per rank of one timing, since each rank's onset: from the
    arrivals (``basis`` "arrival") or, in a job that records none, the timing's own
    values (``basis`` "timing": the rest of the step taken as the same on every rank)."""

    basis: str
    part: TagTotals
    ranks: IntArray  # the judged timing's ranks
    since: _Since  # since each one's onset: 0 for a rank without arrivals
    since_step: IntArray  # each one's onset
    #: The part's leads per rank over every block.
    whole_leads: FloatArray = field(init=False)

    def __post_init__(self) -> None:
        self.whole_leads = self.part.lead_sums(self.part.ranks)

    @property
    def whole(self) -> FloatArray:
        """The part's sums per rank over every block."""
        return self.part.whole

    def rank_cost(self, min_steps: int) -> tuple[FloatArray, FloatArray]:
        """Per rank (seconds a step, share of the step): its lead over the next-latest, less
        what it would still lead by with the rest: as the other ranks lead (:meth:`_usual`),
        or as it led before its onset where that is less and it has ``min_steps`` steps
        for it (:meth:`_own`). Each overstates it where the other fails: the others' leads
        where another rank is the noisier (rank 0 doing extra work now and then), its own
        where it was slow before for another reason (late on arrival from the start, its
        forward slower from a later step)."""
        usual = self._usual(LEADS, self.ranks)
        # Only a rank that led since its onset has a wait to lessen (most ranks of a large
        # job never are a step's latest).
        rows = np.flatnonzero(self.since.leads[:, LEADS] > 0)
        own, before = self._own(rows)
        usual[rows] = np.where(
            before >= min_steps, np.minimum(own / np.maximum(before, 1.0), usual[rows]), usual[rows]
        )
        waited = self.since.leads[:, LEADS] - usual * self.since.count
        return _cost_of(np.maximum(waited, 0.0), self.since)

    def _own(self, rows: IntArray) -> tuple[FloatArray, FloatArray]:
        """Per rank of ``rows`` (of the judged ranks), its own lead over the next-latest
        and its steps before its onset, the block before the onset's left out (the onset
        is that of a block: its slowness may have begun within the block before; an onset
        within a block, the live view's, leaves out the block holding it, as its cost
        does: :func:`blocks_since`). A rank
        with the rest leads by its own noise, not the others': in a 2-rank job whose rank
        0 pauses now and then, rank 0's leads are no measure of what rank 1 would lead by."""
        ranks = self.ranks[rows]
        back = _sums_since(self.part, ranks, self.since_step[rows] - self.part.block_size)
        at, found = _rows_of(self.part.ranks, ranks)
        before = np.where(found, self.whole[at, COUNT], 0.0) - back.count
        own = np.where(found, self.whole_leads[at, LEADS], 0.0) - back.leads[:, LEADS]
        return np.maximum(own, 0.0), np.maximum(before, 0.0)

    def one_block(self, rows: list[int]) -> bool:
        """Whether the ranks ``rows`` lie in one block of ``BLOCK_SIZES`` (not the job's
        whole)."""
        return self._block_size(self.ranks[rows]) is not None

    def _block_size(self, ranks: IntArray) -> int | None:
        """The index in ``BLOCK_SIZES`` of the smallest block holding ``ranks`` that is not
        every rank of the evidence, or None."""
        known = self.part.ranks
        return next(
            (
                index
                for index, width in enumerate(BLOCK_SIZES)
                if len(np.unique(ranks // width)) == 1
                and bool((known // width != ranks[0] // width).any())
            ),
            None,
        )

    def group_cost(self, rows: list[int], since: int, min_steps: int) -> tuple[float, float]:
        """What the job waited for the ranks ``rows`` as a whole, since ``since``: when they
        lie in one block of ``BLOCK_SIZES`` consecutive ranks (the smallest; a node), per
        step that block's latest against the other blocks' latest, less the lead another
        block has (:meth:`_usual`); else the sum of each one's own wait (what fixing each
        alone saves, a lower bound of fixing them all)."""
        ranks = self.ranks[rows]
        known = self.part.ranks
        size = self._block_size(ranks)
        if size is not None:
            block = known[known // BLOCK_SIZES[size] == ranks[0] // BLOCK_SIZES[size]]
            field, group = LEADS + size, block
        elif len(ranks) <= TOP_SIZES[-1]:  # a few ranks: when they are the step's latest
            field, group = TOP_LEADS + TOP_SIZES.index(max(2, len(ranks))), ranks
        else:
            each_seconds, each_share = self.rank_cost(min_steps)
            return float(each_seconds[rows].sum()), float(each_share[rows].sum())
        sums = _sums_since(self.part, group, np.full(len(group), since))
        count = sums.count.max(initial=0.0)
        usual = float(self._usual(field, group, together=True)[0]) * len(group)
        waited = max(float(sums.leads[:, field].sum()) - usual * count, 0.0)
        step = sums.step_seconds.max(initial=0.0)
        seconds = float(waited / count) if count > 0 else 0.0
        return seconds, float(waited / step) if step > 0 else 0.0

    def _usual(self, field: int, ranks: IntArray, *, together: bool = False) -> FloatArray:
        """The lead (``field`` of the leads) a step that each rank other than ``ranks``
        has, over the whole evidence: what a rank leads the rest by through its noise
        alone, so what the job would still wait for had the judged ranks arrived with the
        rest (the saving is against a run without their slowness, not without their
        noise). Per rank of ``ranks`` leaving that rank out, or (``together``) one number
        leaving all of them out."""
        lead, count = self.whole_leads[:, field], self.whole[:, COUNT]
        rows, found = _rows_of(self.part.ranks, ranks)
        own_lead = np.where(found, lead[rows], 0.0)
        own_count = np.where(found, count[rows], 0.0)
        if together:
            own_lead, own_count = own_lead.sum(keepdims=True), own_count.sum(keepdims=True)
        steps = count.sum() - own_count
        with np.errstate(invalid="ignore", divide="ignore"):
            usual: FloatArray = np.where(steps > 0, (lead.sum() - own_lead) / steps, 0.0)
        return usual


def _cost_of(waited: FloatArray, since: _Since) -> tuple[FloatArray, FloatArray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        seconds = np.where(since.count > 0, waited / since.count, 0.0)
        share = np.where(since.step_seconds > 0, waited / since.step_seconds, 0.0)
    return seconds, share


def _sums_since(part: TagTotals, ranks: IntArray, since: IntArray) -> _Since:
    """The wall clock's sums of ``part`` per rank of ``ranks`` (distinct; 0 for one it
    lacks) over its blocks since step ``since`` of that rank (``TagTotals.blocks_since``:
    from the first block that begins at or after it)."""
    rows, found = _rows_of(part.ranks, ranks)
    sums = np.zeros((len(part.wall_blocks), len(ranks))).T  # each field's sums one row
    # Usually every rank of the evidence in its order: no gather of rows.
    every = (
        len(ranks) == len(part.ranks)
        and bool(found.all())
        and bool((rows == np.arange(len(rows))).all())
    )
    # Each rank's blocks from the first since its step, in order.
    onset = part.blocks_since(since[found])
    for at, wall in enumerate(part.wall_blocks):
        if every:
            add_since(sums[:, at : at + 1], wall.T[:, :, None], onset)
            continue
        mine = np.zeros((int(found.sum()), 1))
        add_since(mine, wall[rows[found]].T[:, :, None], onset)
        sums[found, at] = mine[:, 0]
    return _Since(sums[:, 0], sums[:, 1], sums[:, 2], part.lead_sums(ranks, since))


def _rows_of(known: IntArray, ranks: IntArray) -> tuple[IntArray, npt.NDArray[np.bool_]]:
    """Per rank of ``ranks``, its row in ``known`` (sorted; a row in range where it is not
    there) and whether it is there."""
    rows = np.searchsorted(known, ranks)
    found = rows < len(known)
    found[found] = known[rows[found]] == ranks[found]
    return np.minimum(rows, max(len(known) - 1, 0)), found


def _wall_clock(totals: _Totals, tag: str, judged: _Judged) -> _WallClock:
    """The wall clock of the ranks of ``judged`` (timing ``tag``), since each one's onset."""
    basis, source = "timing", tag
    if ARRIVAL_TIME_TAG in totals.tags:
        basis, source = "arrival", ARRIVAL_TIME_TAG
    part = totals.of(source)
    since = _sums_since(part, judged.ranks, judged.since_step)
    return _WallClock(basis, part, judged.ranks, since, judged.since_step)


def _long_leads_often(wall: _WallClock, settings: VerdictSettings) -> npt.NDArray[np.bool_]:
    """Per rank: for some edge ``e`` of ``LEAD_EDGES``, its episodes since its onset of
    leading the next-latest rank by more than ``e`` of the step (runs of such steps count
    once) are more than the other ranks' rate of such episodes makes likely: ``k`` of them
    in ``n`` steps where the others had a rate ``r`` per step over the window (never below
    one in all of their steps: none seen is not none possible) have a Poisson upper tail
    ``P(X >= k)``, ``X ~ Poisson(n r)``, at most a normal tail's at the bar for the ranks
    times the edges.

    The count of long leads, not their size: one long lead can be any rank's pause, while a
    rank stalled 150 ms in a tenth of its steps leads by 15 steps three or four times in
    some forty, which the others' GC pauses and heavy tails, a fraction of a step, do not.
    """
    whole_count = wall.whole[:, COUNT]
    count = wall.since.count
    others_steps = np.maximum(whole_count.sum() - whole_count, 1.0)
    bar = confidence_for(settings.confidence, len(wall.ranks) * len(LEAD_EDGES))
    log_chance = math.log(0.5 * math.erfc(bar / math.sqrt(2.0)))
    clear = np.zeros(len(count), dtype=bool)
    for offset in range(len(LEAD_EDGES)):
        field = LONG_LEADS + offset
        own = wall.since.leads[:, field]
        seen = np.maximum(wall.whole_leads[:, field].sum() - wall.whole_leads[:, field], 1.0)
        expected = count * seen / others_steps
        clear |= _poisson_tail_below(own, expected, log_chance)
    return clear


def _poisson_tail_below(
    counts: FloatArray, expected: FloatArray, log_chance: float
) -> npt.NDArray[np.bool_]:
    """Per rank: ``P(X >= k) <= exp(log_chance)`` for ``X ~ Poisson(m)``, ``k`` its count
    and ``m`` its expected count, by an upper bound of the tail (``k > m``: its first term
    over ``1 - m / (k + 1)``, the terms after it shrinking at least that fast)."""
    below = np.zeros(len(counts), dtype=bool)
    # m > 0 here: a count above m + 1 has steps, and the others' rate is never 0.
    for row in np.flatnonzero(counts > expected + 1).tolist():
        k, m = float(counts[row]), float(expected[row])
        log_tail = -m + k * math.log(m) - math.lgamma(k + 1) - math.log1p(-m / (k + 1))
        below[row] = log_tail <= log_chance
    return below


def _note(label: str, factor: float, share: float) -> str:
    """What a slow rank is, said as it is: ``forward 1.50x the others', costs the job 0.1 %
    today``."""
    return f"{label} {factor:.2f}x the others', costs the job {share:.1%} today"


class _Totals:
    """Each timing's :class:`TagTotals`, made when first asked for and kept (a timing's
    are the arrivals' wall clock too): from evidence, or given."""

    def __init__(self, tags: list[str], make: Callable[[str], TagTotals]) -> None:
        self.tags = tags
        self._make = make
        self._made: dict[str, TagTotals] = {}

    @classmethod
    def of_evidence(cls, evidence: StragglerEvidence) -> _Totals:
        return cls(evidence.tags, lambda tag: tag_totals(tag_sums(evidence, tag)))

    def of(self, tag: str) -> TagTotals:
        made = self._made.get(tag)
        if made is None:
            made = self._made[tag] = self._make(tag)
        return made


def _costliest(
    listed: IntArray, seconds: FloatArray, cost: FloatArray, ranks: IntArray, count: int
) -> list[int]:
    """The first ``count`` of ``listed`` (rows) by what the job waited for them, most
    first, then by their timing's cost, then by rank: sorted among those at or above the
    ``count``-th wait only, where every wait is a number (a sort of every rank took 2 ms
    a timing at 16,384 ranks; NaN sorts last, below the waits set aside)."""
    waits = seconds[listed]
    if len(listed) > count > 0 and bool(np.isfinite(waits).all()):
        kth = np.partition(waits, len(waits) - count)[len(waits) - count]
        listed = listed[waits >= kth]
    order = np.lexsort((ranks[listed], -cost[listed], -seconds[listed]))
    chosen: list[int] = listed[order][:count].tolist()
    return chosen


def totals_records(
    totals: Mapping[str, TagTotals], settings: VerdictSettings | None = None
) -> list[StragglerRecord]:
    """:func:`straggler_records` of timings' totals (``window_totals``: a window judged
    without its evidence's blocks); the same records as of that evidence."""
    given = dict(totals)
    judged = _judgements(_Totals(sorted(given), given.__getitem__), settings)
    return [record for record, _ in judged]


def _judgements(
    totals: _Totals,
    settings: VerdictSettings | None,
    onsets: Mapping[tuple[str, int], int] | None = None,
) -> list[tuple[StragglerRecord, _PerRank]]:
    """(record, rank -> (cost seconds, cost share, factor) of each named rank) per timing.

    A timing's slow ranks (:func:`_judge_tag`'s) are named only when what the job
    waited for them reaches the floor (``docs/job-view.md``, "What a straggler costs"):
    each rank on its own (its lead over the next-latest arrival), or, when none does on
    its own, all of them as one group (a slow node: the group's latest against the
    rest's). Slowness that costs no wall clock is no verdict; its ranks are listed in
    the ``top`` of a timing that has one, with what they cost. ``onsets``: (timing tag,
    rank) -> the step a verdict's onset is, where one was given (a live view's): that
    rank's cost is the wall clock since it.
    """
    settings = VerdictSettings() if settings is None else settings
    records: list[tuple[StragglerRecord, _PerRank]] = []
    for tag in totals.tags:
        part = totals.of(tag)
        if len(part.ranks) < 2:
            continue
        judged = _judge_tag(part, settings)
        if onsets:
            # A rank keeps the onset it was named with live, and its cost is the wall
            # clock since that onset: the record's cost is over the steps it names.
            for row, rank in enumerate(judged.ranks.tolist()):
                given = onsets.get((tag, rank))
                if given is not None:
                    judged.since_step[row] = given
        wall = _wall_clock(totals, tag, judged)
        seconds, share = wall.rank_cost(settings.min_steps)
        # The timing whose wall clock is the job's (the arrivals, or in a job without them
        # each timing its own): a rank the job clearly waits for, however its timing looks
        # (a rank stalled 150 ms in one step of ten is slow in few steps, and its clipped
        # excess is no guide). Named, as any slow rank, when that costs the floor
        # (_wall_named), not BURST_FLOORS of them as a rank slow in few steps needs on its
        # timing's mean: the long leads' test already holds ranks that a busy machine
        # delays alike to the others' rate, and a rank the job waits for by 10 ms every
        # 10th step of 10 ms costs it 6-7 % of its time (five floors left it unnamed in 11
        # of 12 runs of 250 steps: tools/bench/detection.py --families).
        if wall.part is part:
            often = _long_leads_often(wall, settings)
            # Its period, as any named rank's (read again for a rank that has one: the same).
            _add_periods(judged, part, np.flatnonzero(often), settings)
            judged.named |= often
        # Over enough steps since its onset (the wall clock's floor in seconds is
        # _wall_named's, on what the job waited for).
        judged.named &= judged.steps >= settings.min_steps
        if not bool(judged.named.any()):
            continue
        chosen = _wall_named(judged, wall, seconds, share, settings)
        if chosen is None:
            continue
        named, cost_seconds, cost_share = chosen
        named = sorted(named, key=lambda i: (-seconds[i], -judged.cost_seconds[i], i))
        worst = named[0]
        since = int(judged.since_step[worst])
        listed = np.flatnonzero((seconds > 0) | judged.named)
        costly = _costliest(listed, seconds, judged.cost_seconds, judged.ranks, settings.top_k)
        label = timing_label(tag)
        top: list[CostlyRank] = [
            {
                "rank": int(judged.ranks[i]),
                "cost_seconds_per_step": float(seconds[i]),
                "cost_share": float(share[i]),
                "factor": float(judged.factor[i]),
                "note": _note(label, float(judged.factor[i]), float(share[i])),
            }
            for i in costly
        ]
        record: StragglerRecord = {
            "kind": "straggler",
            "ranks": [int(judged.ranks[i]) for i in named],
            "timing": label,
            "tag": tag,
            # What the job waited for: the rank alone, or a slow node as a whole.
            "cost_seconds_per_step": cost_seconds,
            "cost_share": cost_share,
            "cost_basis": wall.basis,
            # The costliest rank's onset: its cost is the mean over the steps since.
            "since_step": since,
            "persistent": bool(judged.persistent[worst]),
            "period_steps": int(judged.period[worst]),
            "share_of_steps": float(judged.share_of_steps[worst]),
            "factor": float(judged.factor[worst]),
            "slowest_share": float(judged.slowest_share[worst]),
            "steps": int(judged.steps[worst]),
            "top": top,
            "message": "",
        }
        record["message"] = straggler_message(record)
        # Each named rank's own wait (a node's ranks: each one's share of the group's), and
        # its own onset.
        per_rank = {
            int(judged.ranks[i]): (
                float(seconds[i]),
                float(share[i]),
                float(judged.factor[i]),
                int(judged.since_step[i]),
            )
            for i in named
        }
        records.append((record, per_rank))
    records.sort(key=lambda item: (-item[0]["cost_seconds_per_step"], item[0]["tag"]))
    # The arrival says when the job waited for a rank; another timing that names the same
    # rank says where its time went (a slow forward): that one leads. Both costs are the
    # same wall clock, from the arrivals, over their own onsets.
    explained = {record["ranks"][0] for record, _ in records if record["tag"] != ARRIVAL_TIME_TAG}
    records.sort(
        key=lambda item: item[0]["tag"] == ARRIVAL_TIME_TAG and item[0]["ranks"][0] in explained
    )
    return records


def _wall_named(
    judged: _Judged,
    wall: _WallClock,
    seconds: FloatArray,
    share: FloatArray,
    settings: VerdictSettings,
) -> tuple[list[int], float, float] | None:
    """(the rows named, their cost in seconds and share) or None.

    The slow ranks that lie in one block of consecutive ranks (a node) are named as one
    group when the group's wait reaches the floor and, where one of them costs the floor
    alone, exceeds that one's by the floor too (fixing it alone would leave the job
    waiting for the rest of the node). Else the slow ranks whose own wait reaches the
    floor; else, when none does, two to four slow ranks as one group when its wait does
    (more are no verdict). A slow rank behind another rank's lateness (not of its node)
    costs nothing today and is not named."""
    slow = np.flatnonzero(judged.named).tolist()
    floor, floor_seconds = settings.cost_floor_share, settings.cost_floor_seconds
    alone = [row for row in slow if share[row] >= floor and seconds[row] >= floor_seconds]
    if len(slow) > 1 and wall.one_block(slow):
        group_seconds, group_share = wall.group_cost(
            slow, int(judged.since_step[slow].min()), settings.min_steps
        )
        most = max((float(share[row]) for row in alone), default=0.0)
        if group_share >= floor + most and group_seconds >= floor_seconds:
            return slow, group_seconds, group_share
    if len(alone) == 1:
        return alone, float(seconds[alone[0]]), float(share[alone[0]])
    rows = alone or slow
    # Many slow ranks of no one block, none costing the floor alone (ranks whose speeds
    # wander, beside a slow one), are no verdict: named together they would be named for
    # the sum of waits each too small to act on. They stay in the record's top.
    if len(rows) < 2 or (not alone and len(rows) > TOP_SIZES[-1]):
        return None
    group_seconds, group_share = wall.group_cost(
        rows, int(judged.since_step[rows].min()), settings.min_steps
    )
    if group_share < floor or group_seconds < floor_seconds:
        return None
    return rows, group_seconds, group_share


def straggler_verdicts(
    evidence: StragglerEvidence, settings: VerdictSettings | None = None
) -> dict[str, float | int | str]:
    """The straggler keys of the merged lineage (``docs/job-view.md``, "Verdicts").

    Led by the cost: ``job/straggler_cost_seconds`` and ``job/straggler_cost_share``
    of the costliest named rank, then ``job/straggler_rank``, ``job/straggler_ranks``
    (every named rank, a slow node whole), ``job/straggler_timing``, the onset,
    persistence, the message, and per named rank its timing, cost and excess.
    """
    return _verdicts_of(_judgements(_Totals.of_evidence(evidence), settings))


def straggler_verdicts_since(
    evidence: StragglerEvidence,
    settings: VerdictSettings | None,
    onsets: Mapping[tuple[str, int], int],
    explained: Callable[[StragglerRecord], bool] | None = None,
) -> dict[str, float | int | str]:
    """:func:`straggler_verdicts`, a verdict's onset the step ``onsets`` gives for its
    timing tag and costliest rank where it gives one (the live view's: the step the rank
    was named at, which a judgement of the whole run places a block earlier or later;
    ``docs/job-view.md``, "The onset"), in ``job/straggler_since_step`` and the message,
    and its cost over the steps since that onset.
    ``explained``: a verdict it is true of is left out (the live view's own cost on its
    rank: ``TimingWatch.own_work_explains``)."""
    return straggler_judgement_since(evidence, settings, onsets, explained)[0]


def straggler_judgement_since(
    evidence: StragglerEvidence,
    settings: VerdictSettings | None,
    onsets: Mapping[tuple[str, int], int],
    explained: Callable[[StragglerRecord], bool] | None = None,
) -> tuple[dict[str, float | int | str], dict[tuple[str, int], int], list[StragglerRecord]]:
    """:func:`straggler_verdicts_since`, (timing tag, rank) -> the onset of each rank its
    verdicts name (where the whole run places it, or where ``onsets`` gave it), and the
    records of its verdicts (each a copy), the costliest first."""
    judgements = _judgements(_Totals.of_evidence(evidence), settings, onsets)
    if explained is not None:
        judgements = [each for each in judgements if not explained(each[0])]
    named = {
        (record["tag"], rank): onset
        for record, per_rank in judgements
        for rank, (*_, onset) in per_rank.items()
    }
    records = [record.copy() for record, _ in judgements]
    return _verdicts_of(judgements), named, records


def _verdicts_of(
    judgements: list[tuple[StragglerRecord, _PerRank]],
) -> dict[str, float | int | str]:
    verdicts: dict[str, float | int | str] = {}
    if not judgements:
        # The cost first, 0 when nobody is named: a live curve and a query see it always.
        verdicts["job/straggler_cost_seconds"] = 0.0
        verdicts["job/straggler_cost_share"] = 0.0
        verdicts["job/straggler_rank"] = _NONE
        verdicts["job/straggler_ranks"] = ""
        verdicts["job/straggler_timing"] = ""
        return verdicts
    worst = judgements[0][0]
    verdicts["job/straggler_cost_seconds"] = worst["cost_seconds_per_step"]
    verdicts["job/straggler_cost_share"] = worst["cost_share"]
    verdicts["job/straggler_rank"] = worst["ranks"][0]
    # Each rank under its costliest timing; under another than the arrival when one names it.
    by_rank: dict[int, tuple[float, float, float, str]] = {}
    for record, per_rank in judgements:
        for rank, (cost, share, factor, _) in per_rank.items():
            kept = by_rank.get(rank)
            if (
                kept is None
                or (kept[3] == ARRIVAL_TIME_TAG and record["tag"] != ARRIVAL_TIME_TAG)
                or (
                    cost > kept[0]
                    and (record["tag"] == ARRIVAL_TIME_TAG) == (kept[3] == ARRIVAL_TIME_TAG)
                )
            ):
                by_rank[rank] = (cost, share, factor, record["tag"])
    verdicts["job/straggler_ranks"] = ",".join(str(rank) for rank in sorted(by_rank))
    verdicts["job/straggler_timing"] = worst["tag"]
    verdicts["job/straggler_since_step"] = _int32(worst["since_step"])
    verdicts["job/straggler_persistent"] = int(worst["persistent"])
    verdicts["job/straggler_share_of_steps"] = worst["share_of_steps"]
    verdicts["job/straggler_excess"] = worst["factor"] - 1.0
    verdicts["job/straggler_slowest_share"] = worst["slowest_share"]
    verdicts["job/straggler_message"] = worst["message"]
    for rank, (cost, share, factor, tag) in sorted(by_rank.items()):
        verdicts[f"job/straggler_cost_seconds/{rank}"] = cost
        verdicts[f"job/straggler_cost_share/{rank}"] = share
        verdicts[f"job/straggler_timing/{rank}"] = tag
        verdicts[f"job/straggler_excess/{rank}"] = factor - 1.0
    return verdicts


def _int32(value: int) -> int | float:
    return value if -(2**31) <= value <= 2**31 - 1 else float(value)
