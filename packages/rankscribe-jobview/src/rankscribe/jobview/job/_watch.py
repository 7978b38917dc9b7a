"""Rank 0's watch over the ranks' recent timings: verdict records within seconds.

Every round of the live view (``docs/job-view.md``, "Live": every 2 s by
default) brings each rank's new timing points. :class:`TimingWatch` keeps
the last :attr:`WatchSettings.window_steps` steps of them per timing tag and
rank (bounded: ranks x window x timing tags floats, whatever the length of
the run), judges that window with the one door to the straggler rule,
:func:`~rankscribe.jobview.judge_timings` (:func:`judge_window`),
and keeps the verdict records that stand. A record is a plain JSON-ready
dict (``docs/job-view.md``, "Verdict records"); a new one, or one whose
ranks, timing or cost changed, is handed to the caller's ``on_verdict``
callable, and its first appearance is logged once as a warning. A straggler
verdict missing from :data:`END_JUDGEMENTS` judgements in a row ends: its
record, with ``status`` "ended", the last step judged and the reason, goes
to ``on_verdict`` too, and is kept in :attr:`TimingWatch.ended`. Given the
whole run's judgement (a live view's), a new verdict's onset stays open until
that judgement settles it (the window cannot see a slowness that began before
it), and at the end of training a verdict missing from the last judgement
ends unless the whole run names it (:meth:`TimingWatch.judge`); a standing
verdict then takes its cost from the whole run's judgement since its onset, the
cost the merged lineage gives (:meth:`TimingWatch.take_costs`).

The rank that runs the watch runs the live view's threads too: on a machine
whose cores are all busy they take its training thread's CPU (and the GIL).
Its view's CPU is told to the watch each round (:meth:`TimingWatch.own_work`);
a straggler verdict naming that rank alone whose cost is no more than that CPU
a step over its span is the recorder's own cost, not the job's: it is not
named (no record, no ``on_verdict``), and a warning says so once, with the
remedy (a longer ``job_view_interval``).
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from rankscribe.jobview.job._statistics import is_timing_tag, shared_steps
from rankscribe.jobview.job.verdicts._judge import judge_by_step
from rankscribe.jobview.job.verdicts._record_types import StragglerRecord, VerdictRecord
from rankscribe.jobview.job.verdicts._straggler_verdicts import (
    VerdictSettings,
    seconds_text,
    straggler_message,
)

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_WINDOW_STEPS",
    "END_JUDGEMENTS",
    "TimingWatch",
    "VerdictCallback",
    "WatchSettings",
    "judge_window",
]

#: Judgements in a row a standing straggler verdict must be missing from before it ends: a
#: cost that hovers at the floor neither ends nor comes back every round (with the default
#: 2 s rounds, a verdict ends some 6 s after its rank stopped being slow).
END_JUDGEMENTS = 3
#: Steps of each rank's timings the watch keeps (per timing tag).
DEFAULT_WINDOW_STEPS = 200
#: A standing verdict whose cost moves by more than this share is a changed verdict.
_COST_CHANGE = 0.25
#: What a standing record takes from the whole run's record of the same verdict at the end
#: of training (:meth:`TimingWatch.take_costs`): its cost and the judgement its message
#: states, over the steps since the onset they share, and its ranks' order (the costliest
#: first, over those steps).
_RUN_FIELDS = (
    "ranks",
    "cost_seconds_per_step",
    "cost_share",
    "cost_basis",
    "persistent",
    "period_steps",
    "share_of_steps",
    "factor",
    "slowest_share",
    "steps",
    "top",
)
#: A verdict naming the watch's own rank alone is the live view's own cost when its cost a
#: step is at most this many times the CPU the view's threads used a step over its span:
#: on a machine whose every core is busy, the training thread loses to those threads the
#: time they hold its core or the GIL, about their CPU time (measured on four ranks of a
#: two-core machine beside other work: a cost of 0.4-0.65 times it; docs/job-view.md,
#: "The live view's own cost").
OWN_WORK_FACTOR = 1.0

#: What ``on_verdict`` receives: one verdict record (a copy: the callback may keep it), a
#: straggler's as judged, the other kinds' as read back.
VerdictCallback = Callable[[StragglerRecord | VerdictRecord], object]
#: A rank's window of one timing: its steps and values (a row of a float32 or float64 array).
WindowArrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.floating[Any]]]


@dataclass(frozen=True)
class WatchSettings:
    """The watch's window and the rule's thresholds; rank 0 may change them while the job runs."""

    window_steps: int = DEFAULT_WINDOW_STEPS
    verdict: VerdictSettings = field(default_factory=VerdictSettings)


def judge_window(
    timings: Mapping[
        str, Mapping[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.floating[Any]]]]
    ],
    settings: WatchSettings | None = None,
) -> list[StragglerRecord]:
    """Straggler records of a window of per-rank timings (``tag -> rank -> (steps, values)``).

    The last ``window_steps`` steps any rank reported, every timing tag as a
    ``(steps, ranks)`` table (NaN where a rank has no point yet, or a negative or
    infinite one), judged by the rule of :func:`~rankscribe.jobview.judge_timings`
    (:func:`judge_by_step`: the same records) with the step time as the scale of
    the cost. A table is float32 where the tag's windows are (a rank's timings come
    from its summary files), and is made from the ranks that share their steps a
    block at a time: at 65,536 ranks x 200 steps one 52 MB table a tag, not judge_timings'
    two float64 copies of it. A rank named on several timings is kept in the costliest
    one.
    """
    settings = settings or WatchSettings()
    tags = sorted(tag for tag, ranks in timings.items() if ranks)
    if not tags:
        return []
    ranks = sorted({rank for tag in tags for rank in timings[tag]})
    # The ranks of a round share one steps array: each distinct one is read once.
    distinct = {id(steps): steps for tag in tags for steps, _ in timings[tag].values()}
    steps = np.unique(np.concatenate(list(distinct.values())))[-settings.window_steps :]
    if len(ranks) < 2 or len(steps) == 0:
        return []
    columns = np.asarray(ranks, dtype=np.int64)
    tables = {tag: _window_table(timings[tag], steps, columns) for tag in tags}
    return _one_timing_per_rank(judge_by_step(tables, steps, ranks, settings.verdict))


def _no_time_to_judge(values: npt.NDArray[np.floating[Any]]) -> None:
    """A negative or infinite time made NaN (no point), in place: the rule judges seconds >= 0."""
    with np.errstate(invalid="ignore"):
        values[~(np.isfinite(values) & (values >= 0))] = np.nan


class WindowRows(Mapping[int, WindowArrays]):
    """A timing's held windows where every rank's is its row of one array at one steps
    array (a round of at least window_steps steps from every rank): rank -> (steps, its
    row), each made when asked, not held (65,536 tuples and row views: 18 MB of rank 0's
    memory at 65,536 ranks)."""

    def __init__(
        self, ranks: list[int], window: npt.NDArray[np.floating[Any]], steps: npt.NDArray[np.int64]
    ) -> None:
        self.ranks = ranks  # ascending: the window's rows
        self.window = window
        self.steps = steps
        self._order = np.asarray(ranks, dtype=np.int64)

    def __getitem__(self, rank: int) -> WindowArrays:
        row = int(np.searchsorted(self._order, rank))
        if row == len(self._order) or int(self._order[row]) != rank:
            raise KeyError(rank)
        return self.steps, self.window[row]

    def __iter__(self) -> Iterator[int]:
        return iter(self.ranks)

    def __len__(self) -> int:
        return len(self.ranks)


#: Ranks whose window rows are stacked at once (:func:`_window_table`,
#: :meth:`TimingWatch._window_of`).
_WINDOW_CHUNK = 1024


def _window_table(
    series: Mapping[int, WindowArrays], steps: npt.NDArray[np.int64], ranks: npt.NDArray[np.int64]
) -> npt.NDArray[np.floating[Any]]:
    """One tag's window as a ``(steps, ranks)`` table: NaN where a rank has no point at a
    step, or a negative or infinite one (no time to judge). float32 when every rank's
    values are float32 arrays (the watch keeps them so when every value is one), else
    float64. The ranks that share one steps array are stacked ``_WINDOW_CHUNK`` at a time."""
    narrow = all(values.dtype == np.float32 for _, values in series.values())
    table = np.full((len(steps), len(ranks)), np.nan, dtype=np.float32 if narrow else np.float64)
    sharing: dict[int, list[int]] = {}
    for rank, (rank_steps, _) in series.items():
        sharing.setdefault(id(rank_steps), []).append(rank)
    for members in sharing.values():
        rank_steps = series[members[0]][0]
        keep = np.isin(rank_steps, steps)
        rows = np.searchsorted(steps, rank_steps[keep])
        members.sort()
        for start in range(0, len(members), _WINDOW_CHUNK):
            part = members[start : start + _WINDOW_CHUNK]
            block = np.stack([series[rank][1] for rank in part])[:, keep].T
            _no_time_to_judge(block)
            table[np.ix_(rows, np.searchsorted(ranks, part))] = block
    return table


def _one_timing_per_rank(records: list[StragglerRecord]) -> list[StragglerRecord]:
    """A rank named on several timings stays in the costliest one only (records come costliest
    first); in a synchronous job its slowness shows in its step time too."""
    seen: set[int] = set()
    kept: list[StragglerRecord] = []
    for record in records:
        if seen.issuperset(record["ranks"]):
            continue
        seen.update(record["ranks"])
        kept.append(record)
    return kept


def _key(record: Mapping[str, Any]) -> tuple[str, tuple[int, ...], str | None]:
    timing = record.get("tag") or record.get("timing")
    return (str(record["kind"]), tuple(sorted(record["ranks"])), timing)


class TimingWatch:
    """The last steps of every rank's timings, judged each round (see the module docstring).

    ``on_verdict``: called with each record that appears or changes (an
    exception in it is logged, never raised); ``job_dir``: named in the
    warning a new verdict logs.
    """

    def __init__(
        self,
        *,
        on_verdict: VerdictCallback | None = None,
        job_dir: str = "",
        settings: WatchSettings | None = None,
    ) -> None:
        self.settings = settings or WatchSettings()
        self.on_verdict = on_verdict
        self.job_dir = job_dir
        # Per timing tag, each rank's window: a WindowRows where a round of at least
        # window_steps steps came from every rank, else a dict.
        self._series: dict[str, Mapping[int, WindowArrays]] = {}
        # Per timing tag: the ranks whose windows are the rows of one array, and that array.
        self._windows: dict[str, tuple[list[int], npt.NDArray[np.floating[Any]]]] = {}
        self._standing: dict[tuple[str, tuple[int, ...], str | None], StragglerRecord] = {}
        self._announced: set[tuple[str, tuple[int, ...], str | None]] = set()
        # The message and cost of the last straggler record on_verdict was told of, per
        # verdict key (a cost can move by less than its message rounds to).
        self._told: dict[tuple[str, tuple[int, ...], str | None], tuple[str, float]] = {}
        # Judgements in a row each standing verdict was missing from (none: found last time).
        self._missed: dict[tuple[str, tuple[int, ...], str | None], int] = {}
        # Standing verdicts whose onset is still open (judge()'s run_onsets): the first step
        # of the window that named each.
        self._open: dict[tuple[str, tuple[int, ...], str | None], int] = {}
        self._other: list[VerdictRecord] = []
        #: The straggler verdicts that ended, in the order they ended (``status`` "ended").
        self.ended: list[StragglerRecord] = []
        # rank -> the last slow step of each verdict the end of training ended as over
        # (end_over()), the latest per rank: :meth:`over_onsets`.
        self._over: dict[int, int] = {}
        # The spans (timing tag, rank, onset, last slow step) whose ended record took its
        # cost over the span (cost_spans()).
        self._spans_costed: set[tuple[str, int, int, int]] = set()
        self.calls = 0
        # The rank this watch runs on and its view threads' CPU seconds so far, as of the
        # last step reported then: (step, seconds), oldest first (:meth:`own_work`).
        self._own_rank: int | None = None
        self._own_cpu: deque[tuple[int, float]] = deque()
        self._own_first: tuple[int, float] | None = None  # the first, for a whole run
        self._own_warned: set[int] = set()

    @property
    def records(self) -> list[StragglerRecord | VerdictRecord]:
        """The verdict records that stand now: stragglers, then the other kinds."""
        return [record.copy() for record in self._standing.values()] + [
            record.copy() for record in self._other
        ]

    def change(self, **settings: Any) -> None:
        """New settings from the control file (``window_steps``, ``cost_floor``, ``confidence``).

        ``cost_floor`` and ``confidence`` are :class:`VerdictSettings`'
        ``cost_floor_share`` and ``confidence``.
        """
        verdict = self.settings.verdict
        if "cost_floor" in settings:
            verdict = replace(verdict, cost_floor_share=settings.pop("cost_floor"))
        if "confidence" in settings:
            verdict = replace(verdict, confidence=settings.pop("confidence"))
        self.settings = replace(self.settings, verdict=verdict, **settings)

    def add(
        self,
        per_rank: Mapping[str, Mapping[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]],
    ) -> None:
        """A round's per-rank points; only the timing tags are kept, the last steps of each."""
        keep = self.settings.window_steps
        for tag, ranks in per_rank.items():
            if not is_timing_tag(tag):
                continue
            # Ranks whose new points fill the window alone (a round of at least window_steps
            # steps): their last steps, copied together (one array for thousands of ranks).
            whole = sorted(rank for rank, (steps, _) in ranks.items() if len(steps) >= keep)
            known = self._series.get(tag, {})
            if whole:
                values = self._window_of(tag, whole, [ranks[rank][1][-keep:] for rank in whole])
                shared = shared_steps([ranks[rank] for rank in whole])
                if (
                    shared is not None
                    and len(whole) == len(ranks)
                    and all(rank in ranks for rank in known)
                ):  # every rank's window a row of one array at one steps array
                    self._series[tag] = WindowRows(whole, values, shared[-keep:])
                    continue
            # Each rank's own window (a WindowRows' made now: this round's are not whole).
            held = known if isinstance(known, dict) else dict(known)
            self._series[tag] = held
            if whole:
                if shared is not None:
                    rows = zip(itertools.repeat(shared[-keep:]), values, strict=False)
                    held.update(zip(whole, rows, strict=True))
                else:
                    for row, rank in enumerate(whole):
                        held[rank] = (ranks[rank][0][-keep:].copy(), values[row])
            for rank, (new_steps, new_values) in ranks.items():
                if len(new_steps) == 0 or len(new_steps) >= keep:
                    continue
                old = held.get(rank)
                steps, values = new_steps, new_values
                if old is not None:
                    steps = np.concatenate([old[0], new_steps])
                    values = np.concatenate([old[1], new_values])
                held[rank] = (steps[-keep:].copy(), values[-keep:].copy())

    def _window_of(
        self, tag: str, ranks: list[int], rows: list[npt.NDArray[np.float64]]
    ) -> npt.NDArray[np.floating[Any]]:
        """``rows`` (the last steps of each of ``ranks``) as one ``(ranks, steps)`` array: the
        one the same ranks' windows of ``tag`` were in the round before, rewritten in place
        (the held windows are its rows, all of them replaced now), else a new one. A round
        of 16,384 ranks makes and frees no 25 MB array, nor holds two of them at once.

        In float32 when every value is one (a rank's timings come from its summary files,
        whose scalars are float32): half the memory, and :func:`judge_window` reads them
        into float64 tables, so the verdicts are the same. Else in float64."""
        shape = (len(rows), len(rows[0]))
        known = self._windows.get(tag)
        window = known[1] if known is not None and known[0] == ranks else None
        if window is None or window.shape != shape:
            window = np.empty(shape, dtype=np.float32)
        exact = window.dtype == np.float32
        for start in range(0, len(rows), _WINDOW_CHUNK):  # a MB or two at a time
            chunk = np.stack(rows[start : start + _WINDOW_CHUNK])
            _no_time_to_judge(chunk)
            if exact:
                narrow = chunk.astype(np.float32)
                exact = bool(np.array_equal(narrow, chunk, equal_nan=True))
                if exact:
                    window[start : start + len(chunk)] = narrow
                    continue
                # A value float32 does not hold: this window (and the rounds after) in float64.
                wide = np.empty(shape, dtype=np.float64)
                wide[:start] = window[:start]
                window = wide
            window[start : start + len(chunk)] = chunk
        self._windows[tag] = (ranks, window)
        return window

    def _judged(self) -> list[StragglerRecord]:
        """:func:`judge_window` of the held windows; where they lie as whole arrays
        (:meth:`_laid_out`), those arrays judged as they lie: the same records."""
        laid_out = self._laid_out()
        if laid_out is None:
            return judge_window(self._series, self.settings)
        steps, ranks, tables = laid_out
        if len(ranks) < 2:
            return []
        return _one_timing_per_rank(judge_by_step(tables, steps, ranks, self.settings.verdict))

    def _laid_out(
        self,
    ) -> tuple[npt.NDArray[np.int64], list[int], dict[str, npt.NDArray[np.floating[Any]]]] | None:
        """Where every timing's held windows are one array's rows (:class:`WindowRows`) of
        window_steps steps, the same steps and ranks for every timing: those steps, ranks
        and arrays as ``(steps, ranks)`` tables (transposed views: at 65,536 ranks no 52
        MB table a timing); else None."""
        tags = sorted(tag for tag, held in self._series.items() if held)
        if not tags:
            return None
        first = self._series[tags[0]]
        tables: dict[str, npt.NDArray[np.floating[Any]]] = {}
        for tag in tags:
            held = self._series[tag]
            if (
                not isinstance(held, WindowRows)
                or not isinstance(first, WindowRows)
                or len(held.steps) != self.settings.window_steps
                or held.ranks != first.ranks
                or not np.array_equal(held.steps, first.steps)
            ):
                return None
            tables[tag] = held.window.T
        assert isinstance(first, WindowRows)
        return first.steps, first.ranks, tables

    def own_work(self, rank: int, cpu_seconds: float) -> None:
        """The watch runs on ``rank``, whose live-view threads have used ``cpu_seconds`` of
        CPU so far: a running total from the threads' start, which is the start of the
        steps (the first total is spread over the steps since the first one reported).
        Kept with the last step reported, back to the window's first step; a total lower
        than the last, or another rank, starts the count again from there."""
        step = self._last_step()
        if self._own_rank is not None and (
            self._own_rank != rank or (self._own_cpu and cpu_seconds < self._own_cpu[-1][1])
        ):
            self._own_cpu.clear()  # another rank, or the view's threads started again
            self._own_first = None if step < 0 else (step, float(cpu_seconds))
        self._own_rank = rank
        if step < 0:
            return
        if self._own_first is None:
            self._own_first = (self._first_step() - 1, 0.0)
        if self._own_cpu and self._own_cpu[-1][0] >= step:
            self._own_cpu.pop()  # no new step since: the later total stands for it
        self._own_cpu.append((step, float(cpu_seconds)))
        first = step - self.settings.window_steps
        while len(self._own_cpu) > 2 and self._own_cpu[1][0] <= first:
            self._own_cpu.popleft()

    def own_cpu_per_step(self, since_step: int) -> float:
        """CPU seconds a step the watch's own rank's view threads used from ``since_step`` to
        the last step told (0.0 when fewer than two totals were told). Before the window
        (a whole run's verdict), at the rate between the count's start and the window."""
        told = list(self._own_cpu)
        if self._own_first is not None and told and self._own_first[0] < told[0][0]:
            told.insert(0, self._own_first)
        if len(told) < 2:
            return 0.0
        steps = np.array([step for step, _ in told], dtype=np.float64)
        seconds = np.array([cpu for _, cpu in told], dtype=np.float64)
        start = max(float(since_step), float(steps[0]))
        if steps[-1] <= start:
            return 0.0
        spent = float(seconds[-1]) - float(np.interp(start, steps, seconds))
        return max(spent, 0.0) / (float(steps[-1]) - start)

    def own_work_explains(self, record: StragglerRecord) -> bool:
        """Whether ``record`` names the watch's own rank alone, at a cost its live view's
        threads' CPU explains (``OWN_WORK_FACTOR``); warned of once per rank."""
        if self._own_rank is None or list(record["ranks"]) != [self._own_rank]:
            return False
        cpu = self.own_cpu_per_step(int(record["since_step"]))
        cost = float(record["cost_seconds_per_step"])
        if cost > OWN_WORK_FACTOR * cpu:
            return False
        if self._own_rank not in self._own_warned:
            self._own_warned.add(self._own_rank)
            logger.warning(
                "rankscribe job view: rank %d costs %s a step (%.0f%% of the step) on its %s, "
                "within the %s of CPU a step the live view's own threads use on it: "
                "RankScribe's cost, not the job's, so it is not named (a longer "
                "job_view_interval lowers it: a round every min(job_view_interval, 2 s), "
                "a write every job_view_interval).",
                self._own_rank,
                seconds_text(cost),
                100.0 * float(record["cost_share"]),
                str(record["timing"]).replace("_", " "),
                seconds_text(cpu),
            )
        return True

    def judge(
        self,
        others: Iterable[VerdictRecord] = (),
        *,
        run_onsets: Mapping[tuple[str, int], tuple[int, int]] | None = None,
        run_until: Mapping[tuple[str, int, int], int] | None = None,
        final: bool = False,
    ) -> list[StragglerRecord | VerdictRecord]:
        """Judge the window; call ``on_verdict`` for each new or changed record; return them.

        ``run_onsets``: a judgement of the whole run so far (a live view's,
        ``LiveVerdicts.straggler_onsets``): (timing tag, rank) -> (onset, the last step of
        its block) of each rank it names. With it, a verdict's onset stays open from the
        round that names it until the whole run's judgement names its rank: where that
        places the onset earlier, in a block that ended before the first step of the
        window that named it or with the window naming the rank from its first step, the
        rank was slow before that window could show it, and the record takes the whole
        run's onset (a changed record, told again); else it keeps its own
        (:attr:`settled`). ``final``: the judgement at the end of training; with
        ``run_onsets``, a standing verdict missing from it ends now unless the whole run
        names one of its ranks under its timing (no later judgement will end it), and
        every open onset is settled; a standing record's cost moved by the last window
        is not told then (the end's cost is the whole run's: :meth:`take_costs`).
        ``run_until``: (timing tag, rank, onset) -> the last step the whole run's evidence
        shows the rank slow since that onset (a live view's, ``LiveVerdicts.straggler_until``,
        of :meth:`span_starts`): a verdict that ends gives it as its ``until_step`` (where
        its span ends), beside ``ended_step``, the last step judged (by which the watch saw
        it end); without one, ``until_step`` is that last step (:meth:`end_spans` may give
        it one later).
        """
        found = {
            _key(record): record for record in self._judged() if not self.own_work_explains(record)
        }
        told: list[tuple[str, tuple[int, ...], str | None]] = []  # new or changed
        window_first: int | None = None  # the judged window's first step, found once
        end = final and run_onsets is not None
        for key, record in found.items():
            old = self._standing.get(key)
            if old is not None and old["since_step"] != record["since_step"]:
                # The window slides; the onset stays, in the record and in its message.
                record["since_step"] = old["since_step"]
                record["message"] = straggler_message(record)
            elif old is None and run_onsets is not None:
                if window_first is None:
                    window_first = self._window_first_step()
                self._open[key] = window_first
            if old is None or (not end and _cost_moved(old, record)):
                told.append(key)
        standing = dict(found)
        ended = self._missing(standing, run_onsets if final else None, run_until or {})
        moved = self._settle(standing, run_onsets, final=final) if run_onsets is not None else []
        # The new and changed records (with an onset settled now), those that ended, then
        # the standing ones whose onset moved.
        changed: list[StragglerRecord | VerdictRecord] = [standing[key] for key in told]
        changed.extend(ended)
        changed.extend(standing[key] for key in moved if key not in told)
        self._standing = standing
        changed.extend(self._new_others(others))
        for each in changed:
            self._announce(each, moved=each.get("status") != "ended" and _key(each) in moved)
        return changed

    def take_others(self, others: Iterable[VerdictRecord]) -> list[VerdictRecord]:
        """The records found outside the window (divergence, gradients, non-finite losses:
        the written steps'), taken in without judging the window; ``on_verdict`` is called
        with each new one, which is returned. For a round whose window judgement waits
        (its spacing): what the writes found is cheap to tell, and is told at once."""
        changed = self._new_others(others)
        for each in changed:
            self._announce(each)
        return changed

    def _new_others(self, others: Iterable[VerdictRecord]) -> list[VerdictRecord]:
        """``others`` kept as the standing records of the other kinds; those not standing
        before."""
        kept = [record.copy() for record in others]
        before = {_key(record) for record in self._other}
        self._other = kept
        return [record for record in kept if _key(record) not in before]

    def _missing(
        self,
        standing: dict[tuple[str, tuple[int, ...], str | None], StragglerRecord],
        run_onsets: Mapping[tuple[str, int], tuple[int, int]] | None,
        run_until: Mapping[tuple[str, int, int], int],
    ) -> list[StragglerRecord]:
        """The standing verdicts missing from this judgement (not in ``standing``, which
        holds its records): each stands on (added to ``standing``) or ends (returned). At
        the end of training (``run_onsets`` given: the whole run's) one ends unless the
        whole run names one of its ranks under its timing; else after
        :data:`END_JUDGEMENTS` judgements in a row. An ended one's span ends at its first
        rank's step in ``run_until`` (:meth:`judge`)."""
        ended = []
        for key, old in self._standing.items():
            if key in standing:
                self._missed.pop(key, None)
                continue
            missed = self._missed.get(key, 0) + 1
            if run_onsets is not None:
                if any((old["tag"], rank) in run_onsets for rank in old["ranks"]):
                    standing[key] = old  # the whole run names it: it stands at the end
                    continue
            elif missed < END_JUDGEMENTS:
                self._missed[key] = missed
                standing[key] = old  # missing once or twice: it still stands
                continue
            self._missed.pop(key, None)
            self._open.pop(key, None)
            self._announced.discard(key)  # if it comes back, it is warned of again
            slow_until = run_until.get(_span_start(old))
            record = self._end(old, slow_until, at_the_end=run_onsets is not None)
            self.ended.append(record)
            ended.append(record)
        return ended

    def _settle(
        self,
        standing: dict[tuple[str, tuple[int, ...], str | None], StragglerRecord],
        run_onsets: Mapping[tuple[str, int], tuple[int, int]],
        *,
        final: bool,
    ) -> list[tuple[str, tuple[int, ...], str | None]]:
        """Settle the open onsets of ``standing`` that the whole run's judgement names (at
        the end of training, every one); the keys of those whose onset moved earlier,
        each now a new record in ``standing`` (a record handed out is never changed)."""
        moved = []
        for key, seen_from in list(self._open.items()):
            record = standing.get(key)
            if record is None:
                del self._open[key]
                continue
            run = run_onsets.get((record["tag"], record["ranks"][0]))
            if run is None and not final:
                continue  # not named by the whole run (yet): the onset stays open
            del self._open[key]
            # The whole run's onset is taken where it is earlier and the window could not
            # show when the slowness began: the whole run's block ended before the
            # window's first step, or the window names the rank from that first step (slow
            # throughout it; a block of a long run may hold that step and begin before it).
            # Else the window's own onset, inside it, is the finer.
            if (
                run is not None
                and run[0] < record["since_step"]
                and (run[1] < seen_from or record["since_step"] <= seen_from)
            ):
                record = record.copy()
                record["since_step"] = run[0]
                record["message"] = straggler_message(record)
                standing[key] = record
                moved.append(key)
        return moved

    def settle(
        self, run_onsets: Mapping[tuple[str, int], tuple[int, int]]
    ) -> list[StragglerRecord]:
        """Settle the standing verdicts' open onsets that ``run_onsets`` (the whole run's
        judgement, as :meth:`judge` takes it) names, between judgements (a live view's
        last write settles them before it writes the verdicts); ``on_verdict`` is told of
        each record whose onset moved, which is returned."""
        standing = dict(self._standing)
        moved = [standing[key] for key in self._settle(standing, run_onsets, final=False)]
        self._standing = standing
        for record in moved:
            self._announce(record, moved=True)
        return moved

    def take_costs(self, run_records: Iterable[StragglerRecord]) -> list[StragglerRecord]:
        """At the end of training: each standing straggler record that ``run_records``
        (the whole run's judgement with the standing records' onsets, a live view's
        ``LiveVerdicts.straggler_records``) holds with the same ranks, timing and onset
        takes that record's cost and the judgement its message states, so the record,
        its message and the merged lineage give one cost. ``on_verdict`` is told of each
        standing record whose message or cost differs from the last one it was told of
        (its last call for a verdict is the record that stands, to the cost's last digit);
        those are returned."""
        runs = {(_key(run), run["since_step"]): run for run in run_records}
        changed = []
        for key, standing in list(self._standing.items()):
            record = standing
            run = runs.get((key, standing["since_step"]))
            if run is not None:
                taken = {name: value for name, value in run.items() if name in _RUN_FIELDS}
                record = cast(StragglerRecord, {**standing, **taken})
                record["message"] = straggler_message(record)
                self._standing[key] = record
            if _told_of(record) != self._told.get(key):
                changed.append(record)
        for record in changed:
            self._announce(record)
        return changed

    @property
    def has_open_onsets(self) -> bool:
        """Whether a standing verdict's onset is still open (see :meth:`judge`)."""
        return bool(self._open)

    @property
    def settled(self) -> list[StragglerRecord]:
        """The standing straggler records whose onset is settled (see :meth:`judge`): the
        onsets a judgement of the whole run keeps (``live_onsets``)."""
        return [record.copy() for key, record in self._standing.items() if key not in self._open]

    def _end(
        self,
        record: StragglerRecord,
        slow_until: int | None,
        *,
        at_the_end: bool = False,
        over: bool = False,
    ) -> StragglerRecord:
        """``record`` ended: the last step judged (``ended_step``), the last step of its
        slowness (``until_step``: ``slow_until`` where it lies from the onset to the last
        step judged, else that last step), and why (``at_the_end``: the end of training's
        judgement ended it; ``over``: though the whole run named its rank, its slowness
        was over)."""
        ended = record.copy()
        seen = self._last_step()
        ended["status"] = "ended"
        ended["ended_step"] = seen
        if over:
            ended["reason"] = (
                "not named at the end of training by the last steps' judgement, and slow "
                "no longer in the whole run's evidence: the steps after its last slow one "
                "no slower than the floor"
            )
        elif at_the_end:
            ended["reason"] = (
                "not named at the end of training, by the last steps' judgement nor by the "
                "whole run's: its cost fell below the floor, or the ranks it names changed"
            )
        else:
            ended["reason"] = (
                f"not named in {END_JUDGEMENTS} judgements in a row: its cost fell below "
                "the floor, or the ranks it names changed"
            )
        return _ended_until(ended, record["message"], slow_until)

    def end_over(self, over: Mapping[tuple[str, int, int], int]) -> list[StragglerRecord]:
        """At the end of training, before the verdicts are written: end each standing
        straggler verdict the last judgement did not name whose slowness is over in the
        whole run's evidence (``over``: (timing tag, rank, onset) -> its last slow step,
        ``LiveVerdicts.straggler_over``), with that span; tell ``on_verdict`` of each; return
        them. The whole run may still name its rank (judged from the onset to the last step,
        the steps after the slowness too): :meth:`over_onsets` has it judged from the step
        after this span, so the job's verdicts and this record tell one story; so too the
        rank of a verdict that ended earlier, where its span is over."""
        for record in self.ended:
            span = over.get(_span_start(record))
            if span is not None:
                for rank in record["ranks"]:
                    self._over[rank] = max(span, self._over.get(rank, span))
        ended = []
        for key, old in list(self._standing.items()):
            span = over.get(_span_start(old)) if old["kind"] == "straggler" else None
            if span is None or key not in self._missed:
                continue  # slow to the end, or named by the last judgement: it stands
            del self._standing[key]
            self._missed.pop(key, None)
            self._open.pop(key, None)
            self._announced.discard(key)
            for rank in old["ranks"]:
                self._over[rank] = max(span, self._over.get(rank, span))
            record = self._end(old, span, at_the_end=True, over=True)
            self.ended.append(record)
            ended.append(record)
            self._announce(record)
        return ended

    def over_onsets(self, tags: Iterable[str]) -> dict[tuple[str, int], int]:
        """(timing tag, rank) -> the step after the span of each rank whose verdict the end
        of training ended as over (:meth:`end_over`), for each of ``tags`` where no standing
        verdict names the rank: given to the whole run's judgement as onsets
        (``LiveVerdicts.verdicts``), the rank is judged, and costs the job, from there
        only. It ended with its span; named again only where it cost the job after it."""
        standing = {
            (each["tag"], rank)
            for each in self._standing.values()
            if each["kind"] == "straggler"
            for rank in each["ranks"]
        }
        return {
            (tag, rank): until + 1
            for rank, until in self._over.items()
            for tag in tags
            if (tag, rank) not in standing
        }

    def span_starts(self) -> list[tuple[str, int, int]]:
        """(timing tag, rank, onset) of each standing straggler verdict and each ended one
        (its first rank: the costliest): where ``run_until`` (:meth:`judge`) is read."""
        records = [*self._standing.values(), *self.ended]
        return [_span_start(record) for record in records if record["kind"] == "straggler"]

    def end_spans(self, run_until: Mapping[tuple[str, int, int], int]) -> None:
        """Give each ended verdict whose ``until_step`` is still the last step judged the
        step ``run_until`` (as :meth:`judge` takes it) says its slowness ended at, where
        it has one (the end of training's, from the evidence of every step: an ended
        record the judgement gave before the whole run's evidence showed the end). A
        record handed out is never changed: the ended ones are new copies; ``on_verdict``
        is not told again."""
        for index, record in enumerate(self.ended):
            if record["until_step"] != record.get("ended_step"):
                continue  # given already (or a record of before ``ended_step``)
            message = record["message"].removesuffix(f" (ended by step {record['until_step']})")
            self.ended[index] = _ended_until(
                record.copy(), message, run_until.get(_span_start(record))
            )

    def spans_to_cost(self) -> list[tuple[str, int, int, int]]:
        """(timing tag, first rank, onset, last slow step) of each ended straggler verdict
        whose slowness ended before the last step judged (its ``until_step`` the whole
        run's: :meth:`end_spans`, or ``run_until`` when it ended) and that has not taken
        its span's cost yet (:meth:`cost_spans`)."""
        return [span for record in self.ended if (span := self._span_to_cost(record))]

    def _span_to_cost(self, record: StragglerRecord) -> tuple[str, int, int, int] | None:
        """An ended record's span, where :meth:`spans_to_cost` lists it; else None."""
        until = record.get("until_step")
        if record["kind"] != "straggler" or not isinstance(until, int):
            return None
        span = (*_span_start(record), until)
        if until >= record.get("ended_step", until) or span in self._spans_costed:
            return None
        return span

    def cost_spans(self, span_records: Mapping[tuple[str, int, int, int], StragglerRecord]) -> None:
        """Give each ended verdict of :meth:`spans_to_cost` the cost and judgement of its
        span alone, ``span_records``' record of it (a live view's
        ``LiveVerdicts.span_records``; one it does not hold keeps its own). Its cost had
        been the last naming window's, which held steps after the slowness ended. Once a
        span; the ranks it names are kept; a record handed out is never changed (the
        ended ones are new copies), and ``on_verdict`` is not told again."""
        for index, record in enumerate(self.ended):
            span = self._span_to_cost(record)
            if span is None:
                continue
            self._spans_costed.add(span)
            found = span_records.get(span)
            if found is None:
                continue
            taken = {
                name: value
                for name, value in found.items()
                if name in _RUN_FIELDS and name != "ranks"
            }
            costed = cast(StragglerRecord, {**record, **taken})
            self.ended[index] = _ended_until(costed, straggler_message(costed), span[3])

    def _held_steps(self) -> Iterator[npt.NDArray[np.int64]]:
        """Each distinct steps array of the held windows (one per WindowRows)."""
        for held in self._series.values():
            if isinstance(held, WindowRows):
                yield held.steps
            else:
                yield from {id(steps): steps for steps, _ in held.values()}.values()

    def _window_first_step(self) -> int:
        """The first step of the window :meth:`judge` judges (:func:`judge_window`'s: the
        last ``window_steps`` steps any rank reported; -1: none)."""
        distinct = list(self._held_steps())
        if not distinct:
            return -1
        steps = np.unique(np.concatenate(distinct))[-self.settings.window_steps :]
        return int(steps[0]) if len(steps) else -1

    def _first_step(self) -> int:
        """The first step any rank reported a timing of that the window holds (-1: none)."""
        return min((int(steps[0]) for steps in self._held_steps() if len(steps)), default=-1)

    def _last_step(self) -> int:
        """The last step any rank reported a timing of (-1: none)."""
        return max((int(steps[-1]) for steps in self._held_steps() if len(steps)), default=-1)

    def _announce(self, record: StragglerRecord | VerdictRecord, *, moved: bool = False) -> None:
        """Log and tell ``on_verdict`` of a new, changed or ended record (``moved``: a
        standing one whose onset the whole run placed earlier, warned of again)."""
        key = _key(record)
        if record.get("status") == "ended":
            logger.info("rankscribe job view: verdict ended: %s", record["message"])
        elif key not in self._announced or moved:
            self._announced.add(key)
            logger.warning(
                "rankscribe job view: %s%s. See `rankscribe-lineage show %s`.",
                record["message"],
                " (the whole run shows it from this step, before the steps that named it)"
                if moved
                else "",
                self.job_dir or "<job dir>",
            )
        if record["kind"] == "straggler" and record.get("status") != "ended":
            self._told[key] = _told_of(record)
        if self.on_verdict is None:
            return
        self.calls += 1
        try:
            self.on_verdict(record.copy())
        except Exception:  # the caller's code: logged, never the end of training
            logger.exception("on_verdict raised on a %s verdict; training goes on", record["kind"])


def _told_of(record: Mapping[str, Any]) -> tuple[str, float]:
    """What ``on_verdict`` reads of a straggler record that a later one may change: its
    message and its cost."""
    return (str(record["message"]), float(record["cost_seconds_per_step"]))


def _span_start(record: Mapping[str, Any]) -> tuple[str, int, int]:
    """A straggler record's (timing tag, first rank, onset): where its span starts."""
    return (record["tag"], int(record["ranks"][0]), int(record["since_step"]))


def _ended_until(ended: StragglerRecord, message: str, slow_until: int | None) -> StragglerRecord:
    """``ended`` (with its ``ended_step``) given its ``until_step``: ``slow_until`` where it
    lies from the onset to before the last step judged, else that last step; and its
    message, ``message`` (the standing record's) with both."""
    seen = ended["ended_step"]
    until = seen
    if slow_until is not None and ended["since_step"] <= slow_until < seen:
        until = slow_until
    ended["until_step"] = until
    slow = f", slow until step {until}" if until != seen else ""
    ended["message"] = f"{message} (ended by step {seen}{slow})"
    return ended


def _cost_moved(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    before, after = old.get("cost_seconds_per_step"), new.get("cost_seconds_per_step")
    if not isinstance(before, float) or not isinstance(after, float):
        return False
    return abs(after - before) > _COST_CHANGE * max(abs(before), 1e-12)
