"""The live view's verdicts so far, from bounded state kept per rank.

Rank 0 of a live job view (:mod:`rankscribe.jobview.job._live`) never holds a rank's whole series:
each interval's per-rank timings and fingerprints are folded into a few
counters and a fixed-bin histogram per (timing tag, rank), the fingerprint
check's start and each rank's first step out of the majority, the gradient
rule's learnt window (``_gradient_verdicts.py``) and the ranks it named, and
each rank's last step. ``docs/job-view.md``, "Live", says what each verdict is
judged on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rankscribe.jobview.job._files import Curve
from rankscribe.jobview.job._partials import Partial
from rankscribe.jobview.job._ranges import missing_ranges, ranges_text
from rankscribe.jobview.job._statistics import (
    FINGERPRINT_TAG,
    STEP_TIME_TAG,
    JobStatistics,
    RankArrays,
    shared_steps,
    shared_values,
)
from rankscribe.jobview.job.verdicts._gradient_verdicts import GradientVerdicts
from rankscribe.jobview.job.verdicts._record_types import StragglerRecord
from rankscribe.jobview.job.verdicts._straggler_verdicts import (
    VerdictSettings,
    straggler_judgement_since,
)
from rankscribe.jobview.job.verdicts._stragglers import StragglerEvidence, row_medians
from rankscribe.jobview.job.verdicts._verdicts import (
    SKEW_BINS,
    DenseSeries,
    _stops,
    add_timing_evidence,
    dense_series,
    recent_step_seconds,
    skew_histogram,
    skew_median,
    skew_ratio,
    untimed_ranks,
    unwritten_steps,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["SKEW_TAG", "SLOWEST_RANK_TAG", "LiveVerdicts"]

SLOWEST_RANK_TAG = f"{STEP_TIME_TAG}/slowest_rank"
SKEW_TAG = f"{STEP_TIME_TAG}/skew"
NONE = -1


@dataclass
class _TimingEvidence:
    """One timing tag's per-step skew and slowest rank, for the job's curves (bounded)."""

    contested: int = 0
    slowest: dict[int, int] = field(default_factory=dict)
    skews: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(SKEW_BINS, np.int64))

    def add(
        self, dense: DenseSeries, medians: npt.NDArray[np.float64] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        """Fold in these steps; return (steps, skew, slowest rank) of the contested ones.

        ``medians``: each step's median over the ranks (``row_medians`` of
        ``dense.values``), when it is known already."""
        values = dense.values
        present = ~np.isnan(values)
        contested = present.sum(axis=1) >= 2
        gaps = not bool(present.all())
        del present
        if not bool(contested.all()):
            values, steps = values[contested], dense.steps[contested]
            medians = medians[contested] if medians is not None else None
        else:  # every step of every rank (the usual case): no copy
            steps = dense.steps
        if len(values) == 0:
            empty = np.empty(0, dtype=np.int64)
            return empty, np.empty(0), empty
        self.contested += len(values)
        column = np.argmax(np.where(np.isnan(values), -np.inf, values) if gaps else values, axis=1)
        slowest = dense.ranks[column]
        for rank, wins in zip(*np.unique(slowest, return_counts=True), strict=True):
            self.slowest[int(rank)] = self.slowest.get(int(rank), 0) + int(wins)
        top = values[np.arange(len(values)), column]
        skew = skew_ratio(top, row_medians(values) if medians is None else medians)
        self.skews += skew_histogram(skew)
        return steps, skew, slowest


@dataclass
class LiveVerdicts:
    """The verdicts so far, from bounded state (``docs/job-view.md``, "Live")."""

    world_size: int
    last_steps: dict[int, int] = field(default_factory=dict)
    nonfinite_loss: dict[int, int] = field(default_factory=dict)
    timings: dict[str, _TimingEvidence] = field(default_factory=dict)
    #: The straggler rule's own evidence (job/verdicts/_stragglers.py), merged interval by interval.
    stragglers: StragglerEvidence = field(default_factory=StragglerEvidence)
    divergence: str = "no_fingerprints"
    fingerprint_ranks: set[int] = field(default_factory=set)
    #: Ranks with at least one timing point (the others: ``job/untimed_ranks``).
    timed_ranks: set[int] = field(default_factory=set)
    #: Each rank's recent step time (the median of its last step times written): how many
    #: of its last steps it may not have written when it was killed (``unwritten_steps``).
    recent_step_seconds: dict[int, float] = field(default_factory=dict)
    diverged: dict[int, int] = field(default_factory=dict)
    #: The gradient rule, fed each written interval's bucket norms (steps in order).
    gradients: GradientVerdicts = field(default_factory=GradientVerdicts)
    missing_now: list[int] = field(default_factory=list)
    #: The straggler thresholds (may be replaced while the job runs).
    settings: VerdictSettings = field(default_factory=VerdictSettings)
    #: (timing tag, rank) -> (onset, the last step of the onset's block) of each rank the
    #: last :meth:`verdicts` named a straggler: the whole run's judgement (a rank whose
    #: onset it was given: that one).
    straggler_onsets: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    #: The straggler records of the last :meth:`verdicts` (the verdicts it gave), the
    #: costliest first: what a live record takes its cost from at the end of training.
    straggler_records: list[StragglerRecord] = field(default_factory=list)
    #: (timing tag, rank, onset) -> the last step that rank was slow since that onset, in
    #: the whole run's evidence as of the last :meth:`keep_slow_until` (a block's last
    #: step: ``StragglerEvidence.slow_until``): where a live verdict that ends says its
    #: slowness ended (``TimingWatch.judge``'s ``run_until``).
    straggler_until: dict[tuple[str, int, int], int] = field(default_factory=dict)
    #: Of those, the ones whose slowness is over as of the same evidence: the steps after
    #: the last slow one (``min_steps`` or more) no slower than the floor on the mean
    #: (``StragglerEvidence.slowness_over``). At the end of training a standing verdict the
    #: last judgement did not name ends with such a span, though the whole run may name its
    #: rank (``TimingWatch.end_over``).
    straggler_over: dict[tuple[str, int, int], int] = field(default_factory=dict)

    def keep_slow_until(self, starts: Iterable[tuple[str, int, int]]) -> None:
        """Keep in :attr:`straggler_until` the last slow step since each (timing tag, rank,
        onset) of ``starts`` that has one, and in :attr:`straggler_over` those whose
        slowness is over (one assignment each: another thread reads them)."""
        found, over = {}, {}
        floor, least = self.settings.cost_floor_share, self.settings.min_steps
        for tag, rank, since in starts:
            until = self.stragglers.slow_until(tag, rank, since)
            if until is not None:
                found[(tag, rank, since)] = until
            ended = self.stragglers.slowness_over(tag, rank, since, floor, least)
            if ended is not None:
                over[(tag, rank, since)] = ended
        self.straggler_until = found
        self.straggler_over = over

    def span_records(
        self, spans: Iterable[tuple[str, int, int, int]]
    ) -> dict[tuple[str, int, int, int], StragglerRecord]:
        """Per span (timing tag, rank, onset, last slow step) of a verdict that ended, the
        straggler record of that rank over those steps alone, where it names it from that
        onset: the whole run's evidence through the last slow step
        (``StragglerEvidence.through``) judged with the onset, so its cost is what the job
        waited for the rank a step while it was slow, not over the steps after. One
        judgement for the spans that end at one step (a block's last: a few dozen at
        most, however many spans)."""
        by_end: dict[int, dict[tuple[str, int], int]] = {}
        for tag, rank, since, until in spans:
            by_end.setdefault(until, {}).setdefault((tag, rank), since)
        found = {}
        for until, onsets in by_end.items():
            _, _, records = straggler_judgement_since(
                self.stragglers.through(until), self.settings, onsets
            )
            for record in records:
                key = (record["tag"], record["ranks"][0])
                if onsets.get(key) == record["since_step"]:
                    found[(*key, record["since_step"], until)] = record
        return found

    def add(self, written: Partial) -> list[Curve]:
        """Fold in the written part of an interval; return its per-step derived curves.

        Takes the timings out of ``written.per_rank``: each timing's per-rank points are
        let go as soon as its table is made, so the two are not in memory together (40
        MB each at 16,384 ranks and 300 steps)."""
        for rank, step in written.last_steps.items():
            self.last_steps[rank] = max(step, self.last_steps.get(rank, -1))
        for rank, step in written.nonfinite_loss.items():
            self.nonfinite_loss[rank] = min(step, self.nonfinite_loss.get(rank, step))
        # An interval is a block of steps with every rank's timings: the same rule as at
        # the end of a run without a live view (docs/job-view.md, "Stragglers"). Each timing's
        # table, made for the straggler evidence, is used for its curves as soon as it is
        # made (one table at a time).
        timing_curves: dict[str, list[Curve]] = {}
        order = list(written.per_rank)  # the curves' order
        statistics = written.job_statistics()
        for tag in statistics.timings:  # (no reference to the points is kept here)
            self.timed_ranks.update(
                rank for rank, (steps, _) in written.per_rank.pop(tag).items() if len(steps)
            )

        def add_timing(
            tag: str, dense: DenseSeries, medians: npt.NDArray[np.float64] | None
        ) -> None:
            timing_curves[tag] = self._add_timing(tag, dense, medians)

        add_timing_evidence(self.stragglers, statistics, add_timing, release=True)
        self.gradients.add(written.per_rank)
        curves: list[Curve] = []
        for tag in order:
            if tag == FINGERPRINT_TAG:
                curves.extend(self._add_fingerprints(written.per_rank[tag]))
            elif tag in timing_curves:
                curves.extend(timing_curves.pop(tag))
        return curves

    def _add_timing(
        self,
        tag: str,
        dense: DenseSeries,
        medians: npt.NDArray[np.float64] | None,
    ) -> list[Curve]:
        """Fold in one timing's table (``medians``: each step's median over the ranks, when
        known); the step time's per-step derived curves."""
        evidence = self.timings.setdefault(tag, _TimingEvidence())
        steps, skew, slowest = evidence.add(dense, medians)
        if tag == STEP_TIME_TAG:
            self.recent_step_seconds.update(recent_step_seconds(dense))
        if tag != STEP_TIME_TAG or not len(steps):
            return []
        return [
            Curve(SLOWEST_RANK_TAG, steps, slowest.astype(np.float64)),
            Curve(SKEW_TAG, steps, skew),
        ]

    def _add_fingerprints(self, ranks: Mapping[int, RankArrays]) -> list[Curve]:
        columns = list(ranks.values())
        steps = shared_steps(columns) if columns else None
        values = shared_values(columns) if steps is not None else None
        if steps is not None and values is not None:
            return self._add_same_fingerprints(len(ranks), ranks, steps, values)
        dense = dense_series(ranks)
        if len(dense.steps) == 0:
            return []
        self.fingerprint_ranks.update(dense.ranks.tolist())
        table = dense.values
        present = ~np.isnan(table)
        distinct = np.empty(len(table))
        for part in _row_slices(table.shape):  # each step's distinct values, sorted
            ordered = np.sort(table[part], axis=1)
            changes = (ordered[:, 1:] != ordered[:, :-1]) & ~np.isnan(ordered[:, 1:])
            distinct[part] = present[part].any(axis=1) + changes.sum(axis=1)
        curves = [
            Curve(f"{FINGERPRINT_TAG}/ranks", dense.steps, present.sum(axis=1).astype(float)),
            Curve(f"{FINGERPRINT_TAG}/distinct", dense.steps, distinct),
        ]
        rows = np.arange(len(table))
        if self.divergence in ("no_fingerprints", "one_rank", "no_common_step"):
            if len(self.fingerprint_ranks) < 2:
                self.divergence = "one_rank"
                return curves
            complete = np.flatnonzero(present.all(axis=1))
            if table.shape[1] < 2 or len(complete) == 0:
                self.divergence = "no_common_step"
                return curves
            start = int(complete[0])
            first = table[start]
            if not bool(np.all(first == first[0])):
                self.divergence = "ranks_differ_at_start"
                return curves
            self.divergence = "checked"
            rows = rows[start + 1 :]
        if self.divergence == "checked" and len(rows):
            self._majority(dense, rows)
        return curves

    def _add_same_fingerprints(
        self,
        count: int,
        ranks: Iterable[int],
        steps: npt.NDArray[np.int64],
        values: npt.NDArray[np.float64],
    ) -> list[Curve]:
        """:meth:`_add_fingerprints` of ``count`` ranks that hold the same ``values`` at the
        same ``steps`` (a data-parallel job's; the messages carried them once, so they are
        compared once per message): the same curves and state, without the ``(steps,
        ranks)`` table (40 MB at 16,384 ranks and 300 steps)."""
        self.fingerprint_ranks.update(ranks)
        present = ~np.isnan(values)
        curves = [
            Curve(f"{FINGERPRINT_TAG}/ranks", steps, present * float(count)),
            Curve(f"{FINGERPRINT_TAG}/distinct", steps, present.astype(float)),
        ]
        if self.divergence in ("no_fingerprints", "one_rank", "no_common_step"):
            if len(self.fingerprint_ranks) < 2:
                self.divergence = "one_rank"
            elif count < 2 or not bool(present.any()):
                self.divergence = "no_common_step"
            else:  # every rank holds the same value at its first common step, and after
                self.divergence = "checked"
        return curves

    def _majority(self, dense: DenseSeries, rows: npt.NDArray[np.int64]) -> None:
        for part in _row_slices((len(rows), dense.values.shape[1])):  # steps in order
            values = dense.values[rows[part]]
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
                    row = rows[part][int(np.argmax(left[:, column]))]
                    self.diverged[rank] = int(dense.steps[row])

    def verdicts(
        self,
        onsets: Mapping[tuple[str, int], int] | None = None,
        explained: Callable[[StragglerRecord], bool] | None = None,
        *,
        keep_onsets: bool = True,
    ) -> dict[str, float | int | str]:
        """The ``user_defined`` keys of the job so far (as in ``docs/job-view.md``).

        ``onsets``: (timing tag, rank) -> the step the live view named the rank at; a
        straggler verdict naming it keeps that onset (``straggler_judgement_since``; the
        onsets of the ranks named are kept in :attr:`straggler_onsets` unless
        ``keep_onsets`` is false, the records in :attr:`straggler_records`);
        ``explained``: a straggler verdict it is true of is not named (the live view's own
        cost, ``TimingWatch.own_work_explains``).
        """
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
            skew = skew_median(step_times.skews)
            if skew is not None:
                verdicts["job/step_time_skew"] = skew
        stragglers, named, self.straggler_records = straggler_judgement_since(
            self.stragglers, self.settings, onsets or {}, explained
        )
        if keep_onsets:  # (one assignment: another thread reads them)
            sizes = {tag: self.stragglers.block_size(tag) for tag, _ in named}
            self.straggler_onsets = {
                (tag, rank): (onset, (onset // sizes[tag] + 1) * sizes[tag] - 1)
                for (tag, rank), onset in named.items()
            }
        verdicts.update(stragglers)
        verdicts.update(untimed_ranks(reported, self.timed_ranks))
        verdicts["job/divergence_check"] = self.divergence
        verdicts["job/diverged_ranks"] = ranges_text(sorted(self.diverged))
        verdicts["job/diverged_first_step"] = min(self.diverged.values(), default=NONE)
        for rank, step in sorted(self.diverged.items()):
            verdicts[f"job/diverged_step/{rank}"] = step
        verdicts.update(self.gradients.verdicts())
        verdicts["job/nonfinite_loss_ranks"] = ranges_text(sorted(self.nonfinite_loss))
        verdicts["job/nonfinite_loss_first_step"] = min(self.nonfinite_loss.values(), default=NONE)
        for rank, step in sorted(self.nonfinite_loss.items()):
            verdicts[f"job/nonfinite_loss_step/{rank}"] = step
        # Each rank's last step (``job/last_step/<rank>``, by rank) and who stopped first.
        unwritten = {rank: unwritten_steps(self.recent_step_seconds.get(rank)) for rank in reported}
        verdicts.update(
            _stops(
                JobStatistics(last_steps={r: self.last_steps[r] for r in reported}), (), unwritten
            )
        )
        return {key: _int32(value) for key, value in verdicts.items()}


def _row_slices(shape: tuple[int, ...]) -> list[slice]:
    """Slices of the rows of a ``(steps, ranks)`` table, about 1 MB of it each: what is
    sorted at once (each step is sorted on its own; the few copies made of a slice stay
    a few MB, not 40 MB at 16,384 ranks, and take as long)."""
    step = max(1, (1 << 17) // max(shape[1], 1))
    return [slice(start, start + step) for start in range(0, shape[0], step)]


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
