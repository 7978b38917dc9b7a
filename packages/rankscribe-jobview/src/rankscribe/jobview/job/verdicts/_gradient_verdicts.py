"""The ``gradient`` verdict: the ranks' bucket norms judged step by step (``_gradients``).

Each rank records ``rankscribe/gradient/norm/<bucket>`` at every step (the
collector's DDP probe); :class:`GradientVerdicts` lays each step's norms out as
a ``(ranks, buckets)`` table and hands it to a :class:`GradientWatch`, steps in
order, and keeps, per rank named, its first finding and how many steps named it.
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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rankscribe.jobview.job._ranges import ranges_text
from rankscribe.jobview.job._statistics import GRADIENT_NORM_TAG_PREFIX
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


def gradient_bucket(tag: str) -> int | None:
    """The bucket of a ``rankscribe/gradient/norm/<bucket>`` tag, or None for another tag."""
    if not tag.startswith(GRADIENT_NORM_TAG_PREFIX):
        return None
    suffix = tag[len(GRADIENT_NORM_TAG_PREFIX) :]
    return int(suffix) if suffix.isdigit() and len(suffix) <= 9 else None


@dataclass
class _Named:
    """A rank's first finding (its bucket: None for the whole gradient) and its steps named."""

    step: int
    bucket: int | None
    ratio: float
    nonfinite: bool
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
        """Fold in the norm tags of ``per_rank`` (tag -> rank -> (steps, values)); other
        tags, and steps at or before the last one judged, are left out."""
        pieces: list[tuple[npt.NDArray[np.int64], int, int, npt.NDArray[np.float64]]] = []
        for tag, ranks in per_rank.items():
            bucket = gradient_bucket(tag)
            if bucket is None:
                continue
            for rank, (steps, values) in ranks.items():
                if len(steps):
                    pieces.append((np.asarray(steps, np.int64), rank, bucket, values))
                    self.ranks.add(rank)
        if not pieces:
            return
        if self._add_cube(pieces):
            return
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
            if self._last_step is not None and step <= self._last_step:
                continue
            self._judge(step, ranks_of[start:end], buckets_of[start:end], values[start:end])

    def _add_cube(
        self, pieces: list[tuple[npt.NDArray[np.int64], int, int, npt.NDArray[np.float64]]]
    ) -> bool:
        """Where every rank has every bucket at the very same steps (a live interval's
        usual case), its ``(steps, ranks, buckets)`` cube judged step by step, without
        sorting the points; False, with nothing judged, otherwise."""
        steps = pieces[0][0]
        rank_ids = np.unique([piece[1] for piece in pieces])
        bucket_ids = np.unique([piece[2] for piece in pieces])
        if (
            len(pieces) != len(rank_ids) * len(bucket_ids)
            or len({(piece[1], piece[2]) for piece in pieces}) != len(pieces)
            or not all(np.array_equal(piece[0], steps) for piece in pieces)
        ):
            return False
        if len(steps) > 1 and not bool(np.all(steps[1:] > steps[:-1])):
            return False  # steps out of order or twice: the general path sorts them
        cube = np.empty((len(steps), len(rank_ids), len(bucket_ids)))
        for piece in pieces:
            row = int(np.searchsorted(rank_ids, piece[1]))
            column = int(np.searchsorted(bucket_ids, piece[2]))
            cube[:, row, column] = piece[3]
        layout = (tuple(rank_ids.tolist()), tuple(bucket_ids.tolist()))
        for index, step in enumerate(steps.tolist()):
            if self._last_step is None or step > self._last_step:
                self._judge_table(step, layout, cube[index])
        return True

    def _judge(
        self,
        step: int,
        ranks: npt.NDArray[np.int64],
        buckets: npt.NDArray[np.int64],
        values: npt.NDArray[np.float64],
    ) -> None:
        rank_ids, bucket_ids = np.unique(ranks), np.unique(buckets)
        if len(rank_ids) < 2 or len(values) != len(rank_ids) * len(bucket_ids):
            return  # not every rank has every bucket at this step: no table to judge
        table = np.empty((len(rank_ids), len(bucket_ids)))
        table[np.searchsorted(rank_ids, ranks), np.searchsorted(bucket_ids, buckets)] = values
        layout = (tuple(rank_ids.tolist()), tuple(bucket_ids.tolist()))
        self._judge_table(step, layout, table)

    def _judge_table(
        self,
        step: int,
        layout: tuple[tuple[int, ...], tuple[int, ...]],
        table: npt.NDArray[np.float64],
    ) -> None:
        """One step's ``(ranks, buckets)`` table (``layout``: its ranks and buckets)."""
        if len(layout[0]) < 2:
            return
        if bool((np.isfinite(table) & (table < 0)).any()):
            # No probe records a norm below 0: a step with one (a file not ours) is not
            # judged, as a step where a rank lacks a bucket is not.
            return
        if self._watch is None or layout != self._layout:
            self._watch, self._layout = GradientWatch(self.settings), layout
        self._last_step = step
        by_rank: dict[int, list[GradientFinding]] = {}
        for finding in self._watch.add(step, table):
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
            # The finding that says most: a non-finite norm, else the highest score.
            first = max(findings, key=lambda found: (found.nonfinite, found.score))
            bucket = None if first.bucket is None else layout[1][first.bucket]
            self.named[rank] = _Named(step, bucket, first.ratio, first.nonfinite)

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
            verdicts[f"job/gradient_named_steps/{rank}"] = named.steps
            verdicts[f"job/gradient_persistent/{rank}"] = int(named.steps >= PERSISTENT_STEPS)
        return verdicts
