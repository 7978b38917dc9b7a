"""One interval's new points of a group of ranks, merged: what travels up the tree.

A :class:`Partial` holds, for the ranks of one subtree and one interval of
the live job view (``docs/job-view.md``, "Live" and "Tree"):

- ``tags``: the mergeable statistics (count, mean, M2, extremes with their
  ranks) of every quantity tag, per step: their size grows with the steps
  of the interval, never with the ranks;
- ``per_rank``: each rank's own points of the tags whose rules need every
  rank's value at a step (the timing tags: a median; the parameter
  fingerprint: a majority; the gradient norms: each rank against the
  others; the machine samples: each rank's latest one is held to the steps
  the others sampled at, job/_samples.py), for this interval only;
- ``last_steps``: every rank whose points arrived, with its last step so far
  (-1 before its first point): the ranks of the interval;
- ``nonfinite_loss``: the first step of each rank whose loss was NaN/inf;
- ``finished``: the ranks whose last message (at the end of training) this
  holds: they send nothing after it, and are not missing from later rounds.

Two partials of disjoint ranks merge in any order (the groups' weighted
mean and M2, as Chan's update); :meth:`Partial.merge` combines the
statistics when they are read, all the merged partials at once. On the wire
a partial is data only — a JSON header naming the tags, ranks and lengths,
then one int64 and one float64 block of raw little-endian bytes; a rank's
own tags as its steps and values only — never a pickle: a message from a
store or a folder another user could write must not run code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview.job._batch_merge import merge_groups, single_rank_rows
from rankscribe.jobview.job._statistics import (
    FINGERPRINT_TAG,
    GRADIENT_TAG_PREFIX,
    LOSS_TAGS,
    SYSTEM_TAG_PREFIX,
    JobStatistics,
    TagStatistics,
    is_timing_tag,
    rank_arrays,
    sorted_arrays,
)
from rankscribe.jobview.job._wire import (
    FLOAT_FIELDS,
    INT_FIELDS,
    PartialFormatError,
    StepGroups,
    decode,
    encode,
    group_by_steps,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "Partial",
    "PartialFormatError",
    "is_per_rank_tag",
]

#: What may wait to be combined (see Partial.merge): parts of a tag, and steps over all tags.
#: A tree node's own and its 8 children's interval (9 x tags x interval steps) go in one
#: pass; a long fold of whole runs (the offline merge folds every rank into one partial)
#: combines every part or two, so what waits stays a few MB (a step waits as 11 numbers).
_COMBINE_AT = 16
_COMBINE_STEPS = 1 << 17


def is_per_rank_tag(tag: str) -> bool:
    """Whether ``tag`` travels as each rank's own points (timings, fingerprint, samples,
    gradient norms)."""
    return (
        tag == FINGERPRINT_TAG
        or is_timing_tag(tag)
        or tag.startswith((SYSTEM_TAG_PREFIX, GRADIENT_TAG_PREFIX))
    )


class Partial:
    """The merged new points of a group of ranks for one interval (see the module docstring)."""

    def __init__(
        self,
        tags: dict[str, TagStatistics] | None = None,
        per_rank: dict[str, dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]]
        | None = None,
        last_steps: dict[int, int] | None = None,
        nonfinite_loss: dict[int, int] | None = None,
        finished: set[int] | None = None,
    ) -> None:
        self._tags: dict[str, TagStatistics] = {} if tags is None else tags
        # Statistics merged in but not yet combined (see merge): tag -> parts.
        self._unmerged: dict[str, list[TagStatistics]] = {}
        self._waiting_steps = 0
        # Tags whose statistics are one rank's points as they came (of_rank): the wire
        # carries their steps and values only, not the 11 columns (tag -> rank, statistics).
        self._one_rank: dict[str, tuple[int, TagStatistics]] = {}
        # (steps, values) columns, spelled out: this is a public class (RankArrays is private)
        self.per_rank: dict[
            str, dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]
        ] = {} if per_rank is None else per_rank
        self.last_steps: dict[int, int] = {} if last_steps is None else last_steps
        self.nonfinite_loss: dict[int, int] = {} if nonfinite_loss is None else nonfinite_loss
        self.finished: set[int] = set() if finished is None else finished

    def __repr__(self) -> str:
        return f"Partial(ranks={len(self.last_steps)}, tags={sorted(self.tags)})"

    @property
    def tags(self) -> dict[str, TagStatistics]:
        """The statistics of every quantity tag (the parts merged in so far, combined)."""
        if self._unmerged:
            self._combine()
        return self._tags

    @tags.setter
    def tags(self, tags: dict[str, TagStatistics]) -> None:
        self._tags, self._unmerged, self._one_rank = tags, {}, {}
        self._waiting_steps = 0

    @classmethod
    def of_rank(
        cls,
        rank: int,
        scalars: Mapping[
            str, Iterable[tuple[int, float]] | tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]
        ],
        *,
        last_step: int = -1,
        finished: bool = False,
    ) -> Partial:
        """One rank's new points (``tag -> [(step, value)]`` or ``(steps, values)`` arrays).

        ``last_step``: the rank's last step before these points (-1: none);
        ``finished``: these are its last points (the end of training).
        """
        partial = cls()
        if finished:
            partial.finished.add(rank)
        last = last_step
        # The tags recorded at the same steps (usually all of them) are computed together.
        groups: StepGroups = {}
        for tag, (steps, values) in _rank_columns(scalars):
            if len(steps) == 0:
                continue
            sample = tag.startswith(SYSTEM_TAG_PREFIX)
            if not sample:  # sampled after the last step too
                last = max(last, int(steps[-1]))
            if is_per_rank_tag(tag):
                partial.per_rank.setdefault(tag, {})[rank] = (steps, values)
            if tag in LOSS_TAGS:
                bad = np.flatnonzero(~np.isfinite(values))
                if len(bad):
                    first = int(steps[bad[0]])
                    partial.nonfinite_loss[rank] = min(
                        first, partial.nonfinite_loss.get(rank, first)
                    )
            if tag != FINGERPRINT_TAG and not sample:  # samples: bands when written
                group_by_steps(groups, tag, steps, values)
        partial._add_one_rank(rank, groups)
        partial.last_steps[rank] = last
        return partial

    def _add_one_rank(
        self,
        rank: int,
        groups: StepGroups,
    ) -> None:
        for steps, tags, rows in groups.values():
            statistics = single_rank_rows(rank, steps, np.concatenate(rows).reshape(len(rows), -1))
            for tag, item in zip(tags, statistics, strict=True):
                self._tags[tag] = item
                self._one_rank[tag] = (rank, item)

    @property
    def ranks(self) -> list[int]:
        return sorted(self.last_steps)

    @property
    def points(self) -> int:
        """Steps held over all tags (a measure of the partial's size)."""
        return sum(len(item.steps) for item in self.tags.values())

    def merge(self, other: Partial) -> None:
        """Fold ``other`` (other ranks, or the same ranks' later points) into this one.

        The statistics merge by step; per-rank points of the same rank and tag
        are concatenated (a later interval's points follow). The statistics'
        arithmetic waits until they are read (or until what waits reaches
        :data:`_COMBINE_AT` parts or :data:`_COMBINE_STEPS` steps): a node's
        children, merged one by one, then combine in a single vectorized pass
        (``merge_groups`` of job/_batch_merge.py), not one pass per child.
        """
        crowded = False
        for tag, statistics in other.tags.items():
            self._one_rank.pop(tag, None)
            parts = self._unmerged.setdefault(tag, [])
            parts.append(statistics)
            self._waiting_steps += len(statistics.steps)
            crowded = crowded or len(parts) >= _COMBINE_AT
        if crowded or self._waiting_steps >= _COMBINE_STEPS:
            self._combine()
        for tag, ranks in other.per_rank.items():
            mine = self.per_rank.setdefault(tag, {})
            if mine.keys().isdisjoint(ranks):  # other ranks (a child's subtree): as they are
                mine.update(ranks)
                continue
            # Ranks whose arrays are shared (decoded from one run: the same steps, or a
            # data-parallel fingerprint's same values) are joined once and stay shared.
            joined: dict[tuple[int, ...], tuple[Any, ...]] = {}
            for rank, (steps, values) in ranks.items():
                held = mine.get(rank)
                if held is None:
                    mine[rank] = (steps, values)
                    continue
                key = (id(held[0]), id(held[1]), id(steps), id(values))
                known = joined.get(key)
                if known is None:
                    both = _joined_points(held, (steps, values))
                    # (the arrays the key names are kept alive, so no id is reused meanwhile)
                    known = joined[key] = (both, held, steps, values)
                mine[rank] = known[0]
        if self.last_steps.keys().isdisjoint(other.last_steps):
            self.last_steps.update(other.last_steps)
        else:
            for rank, step in other.last_steps.items():
                self.last_steps[rank] = max(step, self.last_steps.get(rank, -1))
        for rank, step in other.nonfinite_loss.items():
            self.nonfinite_loss[rank] = min(step, self.nonfinite_loss.get(rank, step))
        self.finished |= other.finished

    def _combine(self) -> None:
        """Every tag's waiting parts into its statistics (one pass for all tags)."""
        tags, groups = list(self._unmerged), []
        self._waiting_steps = 0
        for tag in tags:
            parts = self._unmerged.pop(tag)
            known = self._tags.get(tag)
            groups.append(parts if known is None else [known, *parts])
        self._tags.update(zip(tags, merge_groups(groups), strict=True))

    def split(self, last: int) -> tuple[Partial, Partial]:
        """(the points at steps <= ``last``, the rest); ranks and loss notes go with the first."""
        upto, after = Partial(), Partial()
        for tag, statistics in self.tags.items():
            cut = _cut(statistics.steps, last)
            if cut == len(statistics.steps):
                upto.tags[tag] = statistics  # whole (nothing changes statistics in place)
                continue
            if cut:
                upto.tags[tag] = _slice(statistics, 0, cut)
            after.tags[tag] = _slice(statistics, cut, len(statistics.steps))
        for tag, ranks in self.per_rank.items():
            side = _one_side(ranks, last)
            if side is not None:  # every rank's points on one side (the usual case)
                (upto if side else after).per_rank[tag] = dict(ranks)
                continue
            halves: dict[tuple[int, int], tuple[Any, ...]] = {}  # shared arrays cut once
            for rank, (steps, values) in ranks.items():
                key = (id(steps), id(values))
                known = halves.get(key)
                if known is None:
                    cut = _cut(steps, last)
                    known = halves[key] = (
                        cut,
                        (steps[:cut], values[:cut]),
                        (steps[cut:], values[cut:]),
                        steps,
                        values,
                    )
                cut, first, second = known[:3]
                if cut:
                    upto.per_rank.setdefault(tag, {})[rank] = first
                if cut < len(steps):
                    after.per_rank.setdefault(tag, {})[rank] = second
        upto.last_steps = dict(self.last_steps)
        upto.nonfinite_loss = dict(self.nonfinite_loss)
        upto.finished = set(self.finished)
        return upto, after

    def job_statistics(self) -> JobStatistics:
        """These points as :class:`JobStatistics` (what ``write_job_view`` takes)."""
        return JobStatistics(
            tags=dict(self.tags),
            timings={
                tag: dict(ranks) for tag, ranks in self.per_rank.items() if is_timing_tag(tag)
            },
            fingerprints=dict(self.per_rank.get(FINGERPRINT_TAG, {})),
            samples=self.samples(),
            gradients={
                tag: dict(ranks)
                for tag, ranks in self.per_rank.items()
                if tag.startswith(GRADIENT_TAG_PREFIX)
            },
            nonfinite_loss=dict(self.nonfinite_loss),
            last_steps={
                rank: (step if step >= 0 else None)
                for rank, step in sorted(self.last_steps.items())
            },
        )

    def samples(
        self,
    ) -> dict[str, dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]]:
        """Each rank's own machine samples (``rankscribe/system/*``): tag -> rank -> points."""
        return {
            tag: dict(ranks)
            for tag, ranks in self.per_rank.items()
            if tag.startswith(SYSTEM_TAG_PREFIX)
        }

    def drop_through(self, last: int) -> int:
        """Remove the points at steps <= ``last`` (already written); return how many there were."""
        kept, dropped = self.split(last)[1], 0
        dropped = self.points - kept.points
        self.tags, self.per_rank = kept.tags, kept.per_rank
        return dropped

    # ------------------------------------------------------------------ the wire

    def to_bytes(self) -> bytes:
        """The data-only encoding (see the module docstring and job/_wire.py)."""
        whole: dict[str, TagStatistics] = {}
        one_rank: list[tuple[str, int, TagStatistics]] = []
        for tag, statistics in self.tags.items():
            rank, made = self._one_rank.get(tag, (-1, None))
            if made is statistics:
                one_rank.append((tag, rank, statistics))
            else:
                whole[tag] = statistics
        return encode(
            whole,
            one_rank,
            self.per_rank,
            last_steps=self.last_steps,
            nonfinite_loss=self.nonfinite_loss,
            finished=self.finished,
        )

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        ranks: Sequence[tuple[int, int]] | None = None,
    ) -> Partial:
        """Decode :meth:`to_bytes`; :class:`PartialFormatError` for anything else.

        ``ranks``: the ranks the sender may speak for, as inclusive (first, last)
        runs (its subtree in the tree, ``TreeChannel.subtree``); a message that
        names another rank anywhere is refused. None: any rank.
        """
        content = decode(data, ranks)
        partial = cls(
            content.tags,
            content.per_rank,
            content.last_steps,
            content.nonfinite_loss,
            content.finished,
        )
        for rank, groups in content.one_rank:
            partial._add_one_rank(rank, groups)
        return partial


def _rank_columns(
    scalars: Mapping[str, Any],
) -> Iterable[tuple[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]]:
    """Each tag's sorted unique (steps, values); tags given as arrays at the same steps at once."""
    arrays = all(
        isinstance(points, tuple) and len(points) == 2 and isinstance(points[0], np.ndarray)
        for points in scalars.values()
    )
    if arrays and len(scalars) > 1:
        columns = list(scalars.values())
        size = len(columns[0][0])
        if size > 1 and all(
            len(steps) == size == len(values) and steps.dtype == np.int64
            for steps, values in columns
        ):
            # One check for every tag: the same steps, ascending (what a rank's tail holds).
            steps = np.concatenate([steps for steps, _ in columns]).reshape(len(columns), size)
            shared = steps[0]
            if bool((steps == shared).all()) and bool((shared[1:] > shared[:-1]).all()):
                values = np.concatenate([values for _, values in columns], dtype=np.float64)
                rows = values.reshape(len(columns), size)
                shared = shared.copy()
                return [(tag, (shared, rows[row])) for row, tag in enumerate(scalars)]
    return [
        (
            tag,
            sorted_arrays(points[0], points[1])
            if isinstance(points, tuple) and len(points) == 2 and isinstance(points[0], np.ndarray)
            else rank_arrays(points),
        )
        for tag, points in scalars.items()
    ]


def _joined_points(held: tuple[Any, Any], new: tuple[Any, Any]) -> tuple[Any, Any]:
    """A rank's points held and its new ones, as sorted unique (steps, values). New points
    after the held ones (a later round's: the usual case) are appended as they are, so
    float32 timings (job/_wire.py) stay float32; else as :func:`sorted_arrays` sorts them."""
    if len(held[0]) and len(new[0]) and held[0][-1] < new[0][0]:
        return np.concatenate([held[0], new[0]]), np.concatenate([held[1], new[1]])
    return sorted_arrays(np.concatenate([held[0], new[0]]), np.concatenate([held[1], new[1]]))


def _one_side(
    ranks: Mapping[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]], last: int
) -> bool | None:
    """True when every rank's steps are <= ``last``, False when all are after it, else
    None (some rank has points on both sides, or none)."""
    if not ranks:
        return None
    # Each steps array once: the ranks of one run share theirs (one per child, not per rank).
    arrays = list({id(steps): steps for steps, _ in ranks.values()}.values())
    if all(len(steps) and steps[-1] <= last for steps in arrays):
        return True
    if all(len(steps) and steps[0] > last for steps in arrays):
        return False
    return None


def _cut(steps: npt.NDArray[np.int64], last: int) -> int:
    """How many of ``steps`` (ascending) are <= ``last``; the usual all or none without a search."""
    if not len(steps) or steps[0] > last:
        return 0
    if steps[-1] <= last:
        return len(steps)
    return int(np.searchsorted(steps, last, side="right"))


def _slice(statistics: TagStatistics, start: int, stop: int) -> TagStatistics:
    return TagStatistics(
        **{name: getattr(statistics, name)[start:stop] for name in INT_FIELDS + FLOAT_FIELDS}
    )
