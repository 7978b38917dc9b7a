"""The ``gradient`` verdict: the ranks' bucket norms judged step by step (``_gradients``).

Each rank records ``rankscribe/gradient/norm/<bucket>`` and
``rankscribe/gradient/peak/<bucket>`` at every step (the collector's DDP probe);
:class:`GradientVerdicts` lays each step's norms (and peaks, where every rank has
every bucket's) out as ``(ranks, buckets)`` tables and hands them to a
:class:`GradientWatch`, steps in order, and keeps, per rank named, its first
finding and how many steps named it.
A rank apart only in a named fault's fallout (the corrupted update working
through every replica) is kept apart from the ranks named, with its origin.
A step where not every rank has every bucket (DDP rebuilds its buckets after
the first step; a rank that did not report it) is skipped; a change of the
ranks or buckets starts the rule's learning again. The live view folds in each
written interval (``_evidence.py``), the offline merge a whole run
(``_verdicts.py``); both give the same ``job/gradient_*`` keys
(``docs/job-view.md``, "Gradient").
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview.job._ranges import ranges_text
from rankscribe.jobview.job._statistics import (
    GRADIENT_NORM_TAG_PREFIX,
    GRADIENT_PEAK_TAG_PREFIX,
    float32_numbers,
    shared_steps,
)
from rankscribe.jobview.job.verdicts._gradients import (
    GradientFinding,
    GradientSettings,
    GradientWatch,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["PERSISTENT_STEPS", "GradientVerdicts", "gradient_bucket"]

#: Steps a rank is named at before its fault reads as persistent (the device, not a batch).
PERSISTENT_STEPS = 3
NONE = -1


def gradient_bucket(tag: str, prefix: str = GRADIENT_NORM_TAG_PREFIX) -> int | None:
    """The bucket of a ``rankscribe/gradient/norm/<bucket>`` tag (``prefix``: of another
    of the probe's per-bucket tags), or None for another tag."""
    if not tag.startswith(prefix):
        return None
    suffix = tag[len(prefix) :]
    return int(suffix) if suffix.isdigit() and len(suffix) <= 9 else None


#: A rank's series of one bucket: (steps, rank, bucket, values).
_Piece = tuple["npt.NDArray[np.int64]", int, int, "npt.NDArray[np.float64]"]
#: A step's table's ranks and buckets.
_Layout = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass
class _Named:
    """A rank's first finding (its bucket: None for the whole gradient) and its steps named."""

    step: int
    bucket: int | None
    ratio: float
    nonfinite: bool
    element: bool
    steps: int = 1


class GradientVerdicts:
    """The gradient rule fed with each rank's bucket norms, steps in order (module docstring).

    ``named``: each rank named as an origin; ``fallout``: each rank found apart
    only in a named fault's fallout (:attr:`GradientFinding.fallout_of`), as
    (its first such step, the origin's rank).
    """

    def __init__(self, settings: GradientSettings | None = None) -> None:
        self.settings = settings
        self.ranks: set[int] = set()
        self.named: dict[int, _Named] = {}
        self.fallout: dict[int, tuple[int, int]] = {}
        self._watch: GradientWatch | None = None
        self._layout: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        self._last_step: int | None = None

    def add(
        self,
        per_rank: Mapping[str, Mapping[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]],
    ) -> None:
        """Fold in the norm and peak tags of ``per_rank`` (tag -> rank -> (steps,
        values)); other tags, and steps at or before the last one judged, are left out."""
        pieces = self._pieces(per_rank, GRADIENT_NORM_TAG_PREFIX, keep_ranks=True)
        if not pieces:
            return
        peaks = self._pieces(per_rank, GRADIENT_PEAK_TAG_PREFIX, keep_ranks=False)
        cube = _cube(pieces)
        if cube is not None:
            steps, layout, norms = cube
            peak_cube = _cube(peaks) if peaks else None
            largest = None
            if peak_cube is not None and (
                peak_cube[1] == layout and np.array_equal(peak_cube[0], steps)
            ):
                largest = peak_cube[2]
            for index, step in enumerate(steps.tolist()):
                if self._last_step is None or step > self._last_step:
                    found = None if largest is None else largest[index]
                    self._judge_table(step, layout, norms[index], found)
            return
        # Both in step order, one step's tables at a time: the peaks' walked alongside.
        peak_tables = _tables(peaks) if peaks else iter(())
        known = next(peak_tables, None)
        for step, layout, table in _tables(pieces):
            while known is not None and known[0] < step:
                known = next(peak_tables, None)
            if self._last_step is not None and step <= self._last_step:
                continue
            found = known[2] if known is not None and known[:2] == (step, layout) else None
            self._judge_table(step, layout, table, found)

    def _pieces(
        self,
        per_rank: Mapping[str, Mapping[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]],
        prefix: str,
        *,
        keep_ranks: bool,
    ) -> list[_Piece]:
        """Each rank's non-empty series of each bucket of the tags under ``prefix``
        (``keep_ranks``: the ranks are noted as the rule's)."""
        pieces: list[_Piece] = []
        for tag, ranks in per_rank.items():
            bucket = gradient_bucket(tag, prefix)
            if bucket is None:
                continue
            for rank, (steps, values) in ranks.items():
                if len(steps):
                    pieces.append((np.asarray(steps, np.int64), rank, bucket, values))
                    if keep_ranks:
                        self.ranks.add(rank)
        return pieces

    def _judge_table(
        self,
        step: int,
        layout: _Layout,
        table: npt.NDArray[np.floating[Any]],
        peaks: npt.NDArray[np.floating[Any]] | None = None,
    ) -> None:
        """One step's ``(ranks, buckets)`` table (``layout``: its ranks and buckets), and
        its peaks in the same layout (None: not every rank's every bucket has one)."""
        if len(layout[0]) < 2:
            return
        if bool((np.isfinite(table) & (table < 0)).any()):
            # No probe records a norm below 0: a step with one (a file not ours) is not
            # judged, as a step where a rank lacks a bucket is not.
            return
        if peaks is not None and bool((np.isfinite(peaks) & (peaks < 0)).any()):
            peaks = None  # nor a peak below 0: the norms are judged alone
        if self._watch is None or layout != self._layout:
            self._watch, self._layout = GradientWatch(self.settings), layout
        self._last_step = step
        by_rank: dict[int, list[GradientFinding]] = {}
        for finding in self._watch.add(step, table, peaks):
            if finding.fallout_of is not None:
                origin = layout[0][finding.fallout_of[1]]
                if finding.rank != finding.fallout_of[1]:  # the origin's own: named already
                    self.fallout.setdefault(layout[0][finding.rank], (step, origin))
                continue
            by_rank.setdefault(finding.rank, []).append(finding)
        for row, findings in by_rank.items():
            rank = layout[0][row]
            known = self.named.get(rank)
            if known is not None:
                known.steps += 1
                continue
            # The finding that says most: a non-finite norm, else a norm's (its ratio is
            # the one a user reads most easily), else a peak's, the highest score first.
            first = max(
                findings, key=lambda found: (found.nonfinite, not found.element, found.score)
            )
            bucket = None if first.bucket is None else layout[1][first.bucket]
            self.named[rank] = _Named(step, bucket, first.ratio, first.nonfinite, first.element)

    def verdicts(self) -> dict[str, float | int | str]:
        """The ``job/gradient_*`` keys (``docs/job-view.md``, "Gradient")."""
        if not self.ranks:
            return {}
        check = "checked" if len(self.ranks) >= 2 else "one_rank"
        verdicts: dict[str, float | int | str] = {
            "job/gradient_check": check,
            "job/gradient_ranks": ranges_text(sorted(self.named)),
            "job/gradient_first_step": min(
                (named.step for named in self.named.values()), default=NONE
            ),
            "job/gradient_fallout_ranks": ranges_text(sorted(self.fallout)),
        }
        for rank, (step, origin) in sorted(self.fallout.items()):
            verdicts[f"job/gradient_fallout_step/{rank}"] = step
            verdicts[f"job/gradient_fallout_of/{rank}"] = origin
        for rank, named in sorted(self.named.items()):
            verdicts[f"job/gradient_step/{rank}"] = named.step
            verdicts[f"job/gradient_bucket/{rank}"] = NONE if named.bucket is None else named.bucket
            if math.isfinite(named.ratio):
                verdicts[f"job/gradient_ratio/{rank}"] = named.ratio
            verdicts[f"job/gradient_nonfinite/{rank}"] = int(named.nonfinite)
            verdicts[f"job/gradient_element/{rank}"] = int(named.element)
            verdicts[f"job/gradient_named_steps/{rank}"] = named.steps
            verdicts[f"job/gradient_persistent/{rank}"] = int(named.steps >= PERSISTENT_STEPS)
        return verdicts


def _cube(
    pieces: list[_Piece],
) -> tuple[npt.NDArray[np.int64], _Layout, npt.NDArray[np.floating[Any]]] | None:
    """Where every rank has every bucket at the very same steps, in order (a live
    interval's usual case): (steps, layout, ``(steps, ranks, buckets)`` cube), made
    without sorting the points; None otherwise."""
    rank_ids = sorted({int(piece[1]) for piece in pieces})
    bucket_ids = sorted({int(piece[2]) for piece in pieces})
    pairs = {(piece[1], piece[2]) for piece in pieces}
    if len(pieces) != len(rank_ids) * len(bucket_ids) or len(pairs) != len(pieces):
        return None  # a rank lacks a bucket, or has one twice
    # Steps out of order or twice, or not the same on every piece: the general path.
    steps = shared_steps([(piece[0], piece[3]) for piece in pieces])
    if steps is None:
        return None
    # Bucket by bucket, its ranks' values stacked and written in as one (steps, ranks)
    # slice: a write per bucket, not per piece (16,384 pieces a round at 1,024 ranks and
    # 8 buckets), and no more than a bucket's values held twice. In float32 where every
    # value is a float32 number (the wire brings the ranks' as float32, read from their
    # summary files; rank 0's own come as float64): half of a round's memory at 16,384
    # ranks (315 MB a cube); the rule reads each step's table into float64, the same
    # numbers.
    narrow = all(float32_numbers(np.asarray(piece[3])) for piece in pieces)
    cube = np.empty(
        (len(steps), len(rank_ids), len(bucket_ids)), dtype=np.float32 if narrow else np.float64
    )
    by_bucket: dict[int, list[_Piece]] = {}
    for piece in pieces:
        by_bucket.setdefault(int(piece[2]), []).append(piece)
    for column, bucket in enumerate(bucket_ids):
        ordered = sorted(by_bucket[bucket], key=lambda piece: piece[1])
        # Stacked as rows (one contiguous copy), then written transposed: 4x faster than
        # stacking as columns at 16,384 ranks.
        cube[:, :, column] = np.stack([piece[3] for piece in ordered]).T
    return steps, (tuple(rank_ids), tuple(bucket_ids)), cube


def _tables(pieces: list[_Piece]) -> Iterator[tuple[int, _Layout, npt.NDArray[np.float64]]]:
    """Each step's ``(ranks, buckets)`` table and its layout, steps in order, of the steps
    where every rank present has every bucket present (a step lacking one has none)."""
    steps = np.concatenate([piece[0] for piece in pieces])
    ranks_of = np.concatenate([np.full(len(piece[0]), piece[1]) for piece in pieces])
    buckets_of = np.concatenate([np.full(len(piece[0]), piece[2]) for piece in pieces])
    values = np.concatenate([np.asarray(piece[3], np.float64) for piece in pieces])
    order = np.lexsort((buckets_of, ranks_of, steps))
    steps, ranks_of, buckets_of, values = (
        steps[order],
        ranks_of[order],
        buckets_of[order],
        values[order],
    )
    unique, starts = np.unique(steps, return_index=True)
    ends = [*starts[1:].tolist(), len(steps)]
    for step, start, end in zip(unique.tolist(), starts.tolist(), ends, strict=True):
        ranks, buckets = ranks_of[start:end], buckets_of[start:end]
        rank_ids, bucket_ids = np.unique(ranks), np.unique(buckets)
        if end - start != len(rank_ids) * len(bucket_ids):
            continue  # not every rank has every bucket at this step: no table
        table = np.empty((len(rank_ids), len(bucket_ids)))
        table[np.searchsorted(rank_ids, ranks), np.searchsorted(bucket_ids, buckets)] = values[
            start:end
        ]
        yield step, (tuple(rank_ids.tolist()), tuple(bucket_ids.tolist())), table
