"""Mergeable per-(tag, step) statistics over the ranks of a job.

Each statistic is kept as count, mean and M2 (the sum of squared deviations
from the mean, Welford's form), min with its rank and max with its rank. Two
partial results combine with Chan's pairwise update, so groups of ranks can be
reduced separately (a tree through the coordinator) and merged in any order:
counts, extremes and their ranks come out identical whatever the order, the
mean and M2 equal up to floating-point rounding (far more stable than raw sums
of squares, which cancel catastrophically for step times of similar size).

Ties for the min or max go to the lowest rank, and NaN never wins against a
number (the extremes are those of the finite and infinite values, numpy's
``nanmin``/``nanmax``; a NaN only shows in the mean and std), so the result
does not depend on merge order.

Non-finite points are counted apart (NaN, +inf, -inf), and the Welford
moments are those of the finite points only, so the mean and std come out as
numpy's ``mean``/``std`` of all the points: NaN when a point is NaN or when
+inf meets -inf, +-inf when an infinity is among finite points, and a std of
NaN whenever a point is not finite (numpy computes ``inf - inf`` there).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rankscribe.jobview._checks import check_series, is_int
from rankscribe.jobview.errors import JobViewParamTypeError, JobViewParamValueError

if TYPE_CHECKING:
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

__all__ = [
    "ARRIVAL_TIME_TAG",
    "DATA_WAIT_TAG",
    "FINGERPRINT_TAG",
    "FORWARD_TIME_TAG",
    "GRADIENT_NORM_TAG_PREFIX",
    "GRADIENT_PEAK_TAG_PREFIX",
    "GRADIENT_READY_TAG",
    "GRADIENT_TAG_PREFIX",
    "LOSS_TAGS",
    "NO_RANK",
    "SECTION_TAG_PREFIX",
    "STEP_TIME_TAG",
    "STEP_TIME_WRITE_AT_ONCE",
    "STEP_TIME_WRITE_COUNT",
    "STEP_TIME_WRITE_INTERVAL",
    "SYNC_SECTION",
    "SYSTEM_TAG_PREFIX",
    "TIMING_TAGS",
    "JobStatistics",
    "RankArrays",
    "TagStatistics",
    "float32_numbers",
    "is_timing_tag",
    "rank_arrays",
    "shared_steps",
    "shared_values",
    "sorted_arrays",
]

#: Each rank's wall time of one training step, in seconds, every step.
STEP_TIME_TAG = "rankscribe/step_time"
#: Seconds from one step's end to the next step's begin (waiting for data), every step.
DATA_WAIT_TAG = "rankscribe/data_wait"
#: Seconds inside the network's ``forward`` (torch module hooks) during a step.
FORWARD_TIME_TAG = "rankscribe/forward_time"
#: ``rankscribe/section/<name>``: seconds inside ``with collector.section(name):`` in a step.
SECTION_TAG_PREFIX = "rankscribe/section/"
#: Seconds from a step's start until the rank was ready to synchronise: the step time less
#: the time in its ``section("sync")`` (the collective it waits in), recorded at the steps
#: that have such a section.
ARRIVAL_TIME_TAG = "rankscribe/arrival_time"
#: The section a rank's collective runs in: ``with collector.section(SYNC_SECTION):``.
SYNC_SECTION = "sync"
#: Every tag of the gradient probe starts with this (each rank's own: never a job band only).
GRADIENT_TAG_PREFIX = "rankscribe/gradient/"
#: ``rankscribe/gradient/norm/<bucket>``: the L2 norm of a rank's local gradient in bucket
#: ``<bucket>`` (an int from 0), just before its reduce (the collector's DDP probe).
GRADIENT_NORM_TAG_PREFIX = GRADIENT_TAG_PREFIX + "norm/"
#: ``rankscribe/gradient/peak/<bucket>``: the largest norm of a row of 256 consecutive
#: elements of the same local gradient bucket (judged against the rest of the bucket:
#: one element grown by a flipped bit takes its row and most of the bucket's norm).
GRADIENT_PEAK_TAG_PREFIX = GRADIENT_TAG_PREFIX + "peak/"
#: Seconds from a step's start until the rank's last gradient bucket was ready to reduce.
GRADIENT_READY_TAG = GRADIENT_TAG_PREFIX + "ready_time"
#: The timings the collector records on every rank (sections are any tag under the prefix).
TIMING_TAGS = (STEP_TIME_TAG, DATA_WAIT_TAG, FORWARD_TIME_TAG, ARRIVAL_TIME_TAG)
#: Every tag of the machine's sampler starts with this (docs/system-metrics.md).
SYSTEM_TAG_PREFIX = "rankscribe/system/"
#: How long a rank's collector may keep its step times (and the other timings, and the loss
#: of a collected step that records nothing else) before they reach its file: at most
#: this many steps (:data:`STEP_TIME_WRITE_COUNT`) or seconds
#: (:data:`STEP_TIME_WRITE_INTERVAL`), and a step of :data:`STEP_TIME_WRITE_AT_ONCE`
#: seconds or more is written at once. A rank killed without its exit handlers loses
#: what it kept: the stop verdict reads a rank's last step against it
#: (``docs/job-view.md``, "Where each rank stopped"); the collector keeps to it.
STEP_TIME_WRITE_COUNT = 4096
STEP_TIME_WRITE_INTERVAL = 1.0
STEP_TIME_WRITE_AT_ONCE = 0.25
#: ``crc32c(raw bytes of all parameters, in order) & 0xFFFFFF`` at each collected step.
FINGERPRINT_TAG = "rankscribe/param_fingerprint"
#: The loss as SummaryCollector records it (``loss/auto``), or as a user names it.
LOSS_TAGS = ("loss/auto", "loss")

#: The rank of a statistic no rank has reported (min/max rank of an empty slot).
NO_RANK = -1
#: Every integer below this is exact in a float64.
_EXACT_STEPS = float(2**53)


def is_timing_tag(tag: str) -> bool:
    """Whether ``tag`` is one of the per-rank timings the straggler rule judges: not the
    ``sync`` section, the collective's wait, in which the fast ranks wait longest (its
    judged form is the arrival, the step time less it)."""
    if not isinstance(tag, str):
        raise JobViewParamTypeError(f"tag must be a str, got {type(tag).__name__}")
    return tag in TIMING_TAGS or (
        tag.startswith(SECTION_TAG_PREFIX)
        and len(tag) > len(SECTION_TAG_PREFIX)
        and tag != SECTION_TAG_PREFIX + SYNC_SECTION
    )


class SeriesLike(Protocol):
    """What :meth:`JobStatistics.add` reads of a rank's series."""

    @property
    def rank(self) -> int: ...

    @property
    def scalars(self) -> Mapping[str, Iterable[tuple[int, float]]]: ...


def rank_arrays(points: Iterable[tuple[int, float]]) -> tuple[IntArray, FloatArray]:
    """``[(step, value)]`` as sorted unique steps and their values (the last one of a step wins).

    A step recorded twice keeps its last value, as MindInsight shows it.
    """
    listed = points if isinstance(points, list) else list(points)
    if not listed:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    # Flattened through fromiter: about twice as fast as np.array on a list of tuples.
    pairs = np.fromiter(
        itertools.chain.from_iterable(listed), dtype=np.float64, count=2 * len(listed)
    ).reshape(-1, 2)
    # Steps travel as floats here: exact below 2**53. Larger ones (up to
    # 2**63 - 1, where a float would round up and wrap) are read again as ints.
    if len(pairs) and float(np.abs(pairs[:, 0]).max()) >= _EXACT_STEPS:
        steps = np.fromiter((int(step) for step, _ in listed), dtype=np.int64, count=len(listed))
    else:
        steps = pairs[:, 0].astype(np.int64)
    return sorted_arrays(steps, np.ascontiguousarray(pairs[:, 1]))


def sorted_arrays(steps: npt.ArrayLike, values: npt.ArrayLike) -> tuple[IntArray, FloatArray]:
    """Columns as sorted unique steps and their values (the last one of a step wins).

    The array form of :func:`rank_arrays`: ``steps`` and ``values`` in the order
    they were recorded; already sorted unique steps (the common case) cost one
    comparison, and are returned as they are (no copy).
    """
    step_column: IntArray = np.asarray(steps, dtype=np.int64)
    value_column: FloatArray = np.asarray(values, dtype=np.float64)
    if step_column.ndim != 1 or value_column.shape != step_column.shape:
        raise JobViewParamValueError(
            f"steps and values must be 1-D columns of one length, got shapes "
            f"{step_column.shape} and {value_column.shape}"
        )
    if len(step_column) > 1 and not bool(np.all(step_column[1:] > step_column[:-1])):
        order = np.argsort(step_column, kind="stable")  # stable: a step's last value stays last
        step_column, value_column = step_column[order], value_column[order]
        last_of_step = np.append(step_column[1:] != step_column[:-1], True)
        step_column, value_column = step_column[last_of_step], value_column[last_of_step]
    return step_column, value_column


@dataclass
class TagStatistics:
    """The cross-rank statistics of one tag: one entry per step, steps ascending.

    ``count`` counts every point; ``finite_mean`` and ``m2`` are the Welford
    moments of the finite points (``count - nan - posinf - neginf`` of them);
    ``nan``, ``posinf`` and ``neginf`` count the others. :attr:`mean` and
    :attr:`std` combine them as numpy does.
    """

    steps: IntArray
    count: IntArray
    finite_mean: FloatArray
    m2: FloatArray
    minimum: FloatArray
    min_rank: IntArray
    maximum: FloatArray
    max_rank: IntArray
    nan: IntArray
    posinf: IntArray
    neginf: IntArray

    @classmethod
    def of_rank(cls, rank: int, steps: IntArray, values: FloatArray) -> TagStatistics:
        """The statistics of a single rank's points (``steps`` sorted and unique)."""
        size = len(steps)
        ranks = np.full(size, rank, dtype=np.int64)
        finite = np.isfinite(values)
        return cls(
            steps=steps.copy(),
            count=np.ones(size, dtype=np.int64),
            finite_mean=np.where(finite, values, 0.0),
            m2=np.zeros(size, dtype=np.float64),
            minimum=values.copy(),
            min_rank=ranks,
            maximum=values.copy(),
            max_rank=ranks.copy(),
            nan=np.isnan(values).astype(np.int64),
            posinf=(values == np.inf).astype(np.int64),
            neginf=(values == -np.inf).astype(np.int64),
        )

    @property
    def finite_count(self) -> IntArray:
        result: IntArray = self.count - self.nan - self.posinf - self.neginf
        return result

    @property
    def mean(self) -> FloatArray:
        """Mean over the ranks of each step, as ``numpy.mean`` (NaN, +-inf included)."""
        undefined = (self.nan > 0) | ((self.posinf > 0) & (self.neginf > 0))
        result: FloatArray = np.where(
            undefined,
            np.nan,
            np.where(self.posinf > 0, np.inf, np.where(self.neginf > 0, -np.inf, self.finite_mean)),
        )
        return result

    @property
    def std(self) -> FloatArray:
        """Population standard deviation over the ranks of each step (numpy's ``std``)."""
        finite = np.maximum(self.finite_count, 1)
        spread = np.sqrt(np.maximum(self.m2, 0.0) / finite)
        result: FloatArray = np.where(self.finite_count == self.count, spread, np.nan)
        return result

    def merge(self, other: TagStatistics) -> TagStatistics:
        """The statistics of both groups of ranks together (neither is changed)."""
        if np.array_equal(self.steps, other.steps):
            # The common case (ranks record the same steps): no union to build.
            steps = self.steps.copy()
            mine = theirs = np.arange(len(steps))
        else:
            steps = np.union1d(self.steps, other.steps)
            mine = np.searchsorted(steps, self.steps)
            theirs = np.searchsorted(steps, other.steps)
        merged = TagStatistics._empty(steps)
        merged._place(mine, self)
        merged._combine(theirs, other)
        return merged

    @staticmethod
    def _empty(steps: IntArray) -> TagStatistics:
        size = len(steps)
        return TagStatistics(
            steps=steps,
            count=np.zeros(size, dtype=np.int64),
            finite_mean=np.zeros(size, dtype=np.float64),
            m2=np.zeros(size, dtype=np.float64),
            minimum=np.full(size, np.nan),
            min_rank=np.full(size, NO_RANK, dtype=np.int64),
            maximum=np.full(size, np.nan),
            max_rank=np.full(size, NO_RANK, dtype=np.int64),
            nan=np.zeros(size, dtype=np.int64),
            posinf=np.zeros(size, dtype=np.int64),
            neginf=np.zeros(size, dtype=np.int64),
        )

    def _place(self, where: IntArray, source: TagStatistics) -> None:
        for name in (
            "count",
            "finite_mean",
            "m2",
            "minimum",
            "min_rank",
            "maximum",
            "max_rank",
            "nan",
            "posinf",
            "neginf",
        ):
            getattr(self, name)[where] = getattr(source, name)

    def _combine(self, where: IntArray, source: TagStatistics) -> None:
        count_a = self.finite_count[where].astype(np.float64)
        count_b = source.finite_count.astype(np.float64)
        total = count_a + count_b
        mean_a = self.finite_mean[where]
        delta = source.finite_mean - mean_a
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            # Chan et al.: exact for an empty side (count_a == 0 gives source's values).
            self.finite_mean[where] = np.where(
                count_a == 0,
                source.finite_mean,
                np.where(count_b == 0, mean_a, mean_a + delta * (count_b / total)),
            )
            self.m2[where] = np.where(
                count_a == 0,
                source.m2,
                np.where(
                    count_b == 0,
                    self.m2[where],
                    self.m2[where] + source.m2 + delta * delta * (count_a * count_b / total),
                ),
            )
        self.count[where] = self.count[where] + source.count
        self.nan[where] = self.nan[where] + source.nan
        self.posinf[where] = self.posinf[where] + source.posinf
        self.neginf[where] = self.neginf[where] + source.neginf
        _take_extreme(self.minimum, self.min_rank, where, source.minimum, source.min_rank, np.less)
        _take_extreme(
            self.maximum, self.max_rank, where, source.maximum, source.max_rank, np.greater
        )


def _take_extreme(
    values: FloatArray,
    ranks: IntArray,
    where: IntArray,
    candidate: FloatArray,
    candidate_rank: IntArray,
    better: np.ufunc,
) -> None:
    """Keep the better value at each ``where``: a number beats NaN, a tie goes to the lower rank."""
    current = values[where]
    current_rank = ranks[where]
    current_nan = np.isnan(current)
    candidate_nan = np.isnan(candidate)
    lower_rank = (current_rank == NO_RANK) | (
        (candidate_rank != NO_RANK) & (candidate_rank < current_rank)
    )
    with np.errstate(invalid="ignore"):
        take = (
            better(candidate, current)
            | ((candidate == current) & lower_rank)
            | (current_nan & ~candidate_nan)
            | (current_nan & candidate_nan & lower_rank)
        )
    values[where] = np.where(take, candidate, current)
    ranks[where] = np.where(take, candidate_rank, current_rank)


def _checked_pair(tag: str, pair: object) -> tuple[IntArray, FloatArray]:
    """``pair`` as (int64 steps, float64 values), or an error naming the tag and what is wrong."""
    if not isinstance(pair, tuple) or len(pair) != 2:
        raise JobViewParamTypeError(
            f"scalars[{tag!r}] must be a (steps, values) pair of arrays, got {type(pair).__name__}"
        )
    steps, values = np.asarray(pair[0]), np.asarray(pair[1])
    # "iu": integer steps only (a float step would be truncated); "iuf": real values.
    for name, column, kinds in (("steps", steps, "iu"), ("values", values, "iuf")):
        if column.size and column.dtype.kind not in kinds:
            raise JobViewParamTypeError(
                f"scalars[{tag!r}] {name} must be {'integers' if kinds == 'iu' else 'numbers'}, "
                f"got an array of {column.dtype}"
            )
    return steps.astype(np.int64, copy=False), values.astype(np.float64, copy=False)


#: One rank's points of one series: sorted unique steps and their values.
RankArrays = tuple["IntArray", "FloatArray"]


#: Ranks whose steps are compared at once.
_STACKED = 1024


def shared_steps(columns: Sequence[RankArrays]) -> npt.NDArray[np.int64] | None:
    """The steps every column holds when they all hold the same ones (ascending, unique:
    a rank's arrays are); None when they differ.

    Columns decoded from messages share one steps array per message: each distinct array
    is compared once; else 1,024 ranks' steps at a time."""
    first = columns[0][0]
    size = len(first)
    if size == 0 or not bool((first[1:] > first[:-1]).all()):
        return None
    arrays = {id(rank_steps): rank_steps for rank_steps, _ in columns}
    if len(arrays) <= _STACKED:
        if not all(np.array_equal(rank_steps, first) for rank_steps in arrays.values()):
            return None
        return np.asarray(first, dtype=np.int64).copy()
    if any(len(rank_steps) != size for rank_steps, _ in columns):
        return None
    for start in range(0, len(columns), _STACKED):  # a few MB at a time
        stacked = np.stack([rank_steps for rank_steps, _ in columns[start : start + _STACKED]])
        if not bool((stacked == first).all()):
            return None
    return np.asarray(first, dtype=np.int64).copy()


def float32_numbers(values: npt.NDArray[Any]) -> bool:
    """Whether every one of ``values`` is a float32 number (NaN and inf included): a rank's
    scalars read from its summary files are, and may be held as float32."""
    if values.dtype == np.float32:
        return True
    if values.dtype != np.float64:
        return False
    return bool(np.array_equal(values.astype(np.float32), values, equal_nan=True))


def shared_values(columns: Sequence[RankArrays]) -> npt.NDArray[np.float64] | None:
    """The values every column holds when they are all the same (NaN equal to NaN), else
    None: the fingerprint of a data-parallel job, every rank's the same at every step.

    Each distinct array is compared once (columns decoded from a message that carried
    them once share one), and the first that differs ends the search: a timing, different
    on every rank, costs one comparison."""
    first = columns[0][1]
    seen: set[int] = {id(first)}
    for _, values in columns:
        if id(values) in seen:
            continue
        if len(values) != len(first) or not np.array_equal(values, first, equal_nan=True):
            return None
        seen.add(id(values))
    return first


@dataclass
class JobStatistics:
    """Everything the job view needs from its ranks, in a form that merges exactly.

    - ``tags``: per-(tag, step) statistics of every quantity tag;
    - ``timings`` (timing tag -> rank -> points) and ``fingerprints``: each
      rank's own series of the timing tags (:func:`is_timing_tag`: step time,
      data wait, forward time, sections) and of the fingerprint (the straggler
      and divergence rules need every rank's value at a step, not only a
      summary: a median and a majority are not mergeable);
    - ``samples``: each rank's own machine samples (``rankscribe/system/*``,
      tag -> rank -> points): their bands hold every rank's latest sample
      (``job_bands`` of job/_samples.py), so they are kept apart from ``tags``;
    - ``gradients``: each rank's own points of the gradient probe's tags
      (``rankscribe/gradient/*``: the gradient rule compares the ranks at each step);
    - ``nonfinite_loss``: the first step of each rank whose loss was NaN/inf;
    - ``last_steps``: each rank's last recorded step (None when it had none).

    Ranks of two partial results must be disjoint.
    """

    loss_tags: tuple[str, ...] = LOSS_TAGS
    step_time_tag: str = STEP_TIME_TAG
    fingerprint_tag: str = FINGERPRINT_TAG
    tags: dict[str, TagStatistics] = field(default_factory=dict)
    timings: dict[str, dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]] = field(
        default_factory=dict
    )
    fingerprints: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = field(
        default_factory=dict
    )
    samples: dict[str, dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]] = field(
        default_factory=dict
    )
    nonfinite_loss: dict[int, int] = field(default_factory=dict)
    last_steps: dict[int, int | None] = field(default_factory=dict)
    gradients: dict[str, dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]] = field(
        default_factory=dict
    )

    @property
    def ranks(self) -> list[int]:
        """The ranks whose series were added, ascending."""
        return sorted(self.last_steps)

    @property
    def step_times(self) -> dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]:
        """Each rank's step times (the ``step_time_tag`` of :attr:`timings`)."""
        return self.timings.get(self.step_time_tag, {})

    def add(self, series: SeriesLike) -> None:
        """Add one rank's scalars (``series.scalars``: ``tag -> [(step, value)]``)."""
        rank, scalars = check_series("series", series)
        self._add_columns(rank, {tag: rank_arrays(points) for tag, points in scalars.items()})

    def add_arrays(
        self, rank: int, scalars: Mapping[str, tuple[npt.ArrayLike, npt.ArrayLike]]
    ) -> None:
        """Add one rank's scalars as columns: ``tag -> (steps, values)``.

        What :meth:`add` does, without a Python tuple per point: the columns
        :func:`rankscribe.writer.reader.scalar_arrays` returns, in any step
        order (a step recorded twice keeps its last value).
        """
        if not is_int(rank) or rank < 0:
            raise JobViewParamValueError(f"rank must be an int >= 0, got {rank!r}")
        if not isinstance(scalars, Mapping):
            raise JobViewParamTypeError(
                f"scalars must be a mapping of tag to (steps, values), got {type(scalars).__name__}"
            )
        columns: dict[str, RankArrays] = {}
        for tag, pair in scalars.items():
            if not isinstance(tag, str):
                raise JobViewParamTypeError(
                    f"scalars keys must be str tags, got {tag!r} ({type(tag).__name__})"
                )
            columns[tag] = sorted_arrays(*_checked_pair(tag, pair))
        self._add_columns(int(rank), columns)

    def _add_columns(self, rank: int, scalars: Mapping[str, RankArrays]) -> None:
        if rank in self.last_steps:
            raise ValueError(f"rank {rank} was already added to these job statistics")
        last_step: int | None = None
        for tag, (steps, values) in scalars.items():
            if len(steps) == 0:
                continue
            if tag.startswith(SYSTEM_TAG_PREFIX):  # sampled after the last step too
                self.samples.setdefault(tag, {})[rank] = (steps, values)
                continue
            last = int(steps[-1])
            last_step = last if last_step is None else max(last_step, last)
            if tag == self.fingerprint_tag:
                self.fingerprints[rank] = (steps, values)
                continue
            if tag == self.step_time_tag or is_timing_tag(tag):
                self.timings.setdefault(tag, {})[rank] = (steps, values)
            elif tag.startswith(GRADIENT_TAG_PREFIX):
                self.gradients.setdefault(tag, {})[rank] = (steps, values)
            if tag in self.loss_tags:
                self._note_nonfinite(rank, steps, values)
            single = TagStatistics.of_rank(rank, steps, values)
            known = self.tags.get(tag)
            self.tags[tag] = single if known is None else known.merge(single)
        self.last_steps[rank] = last_step

    def _note_nonfinite(self, rank: int, steps: IntArray, values: FloatArray) -> None:
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            first = int(steps[bad[0]])
            self.nonfinite_loss[rank] = min(first, self.nonfinite_loss.get(rank, first))

    def merge(self, other: JobStatistics) -> None:
        """Fold ``other`` (statistics of other ranks) into these."""
        overlap = set(self.last_steps) & set(other.last_steps)
        if overlap:
            raise ValueError(f"ranks {sorted(overlap)} are in both job statistics")
        for tag, statistics in other.tags.items():
            known = self.tags.get(tag)
            self.tags[tag] = statistics if known is None else known.merge(statistics)
        for tag, by_rank in other.timings.items():
            self.timings.setdefault(tag, {}).update(by_rank)
        for tag, by_rank in other.samples.items():
            self.samples.setdefault(tag, {}).update(by_rank)
        for tag, by_rank in other.gradients.items():
            self.gradients.setdefault(tag, {}).update(by_rank)
        self.fingerprints.update(other.fingerprints)
        self.nonfinite_loss.update(other.nonfinite_loss)
        self.last_steps.update(other.last_steps)
