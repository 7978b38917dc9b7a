"""Rank 0's watch over the ranks' recent timings: verdict records within seconds.

Every round of the live view (``docs/job-view.md``, "Live": every
``timing_interval`` seconds, 2 s by default) brings each rank's new timing
points. :class:`TimingWatch` keeps the last :attr:`WatchSettings.window_steps`
steps of them per timing tag and rank (bounded: ranks x window x timing
tags floats, whatever the length of the run), judges that window and keeps
the verdict records that stand. A record is a plain JSON-ready dict
(``docs/job-view.md``, "Verdict records"); a new one, or one whose ranks,
timing or cost changed, is handed to the caller's ``on_verdict`` callable,
and its first appearance is logged once as a warning.

The judgement on the window (:func:`judge_window`): per timing and step,
each rank's value over the step's median with the floor of
``job/_stragglers.py`` on both sides; a rank's level is its median ratio
over the window, the reference the median level of the faster half. A rank
is named when its level passes the reference by the margin, the slowness
holds in at least half of the window's steps, its median excess over the
other ranks is at least 4 standard errors of that median (clear evidence,
not the luck of a noisy window), and its **cost** — the median
over the steps of its time above the other ranks' median, the seconds per
step the job would save if it ran like the others — reaches the cost floor
as a share of the median step time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from rankscribe.lineage.job._statistics import STEP_TIME_TAG, is_timing_tag
from rankscribe.lineage.job._stragglers import (
    STEP_FLOOR_SECONDS,
    STEP_FLOOR_SHARE,
    paired_ratios,
)
from rankscribe.lineage.job._verdicts import dense_series

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_COST_FLOOR",
    "DEFAULT_MARGIN",
    "DEFAULT_WINDOW_STEPS",
    "MIN_WINDOW_STEPS",
    "TimingWatch",
    "VerdictCallback",
    "WatchSettings",
    "judge_window",
]

#: A straggler costs at least this share of the median step time to be named.
DEFAULT_COST_FLOOR = 0.05
#: ... and its median paired ratio passes the faster half's by at least this much.
DEFAULT_MARGIN = 0.05
#: Steps of each rank's timings the watch keeps (per timing tag).
DEFAULT_WINDOW_STEPS = 200
#: Steps every rank reported that a judgement needs at least.
MIN_WINDOW_STEPS = 20
#: Share of the window's steps in which a named rank must be slow.
_HOLDS_SHARE = 0.5
#: ... and at least this share for the slowness to count as persistent (not a burst).
_PERSISTENT_SHARE = 0.8
#: A standing verdict whose cost moves by more than this share is a changed verdict.
_COST_CHANGE = 0.25
#: A named rank's median excess is at least this many standard errors (the evidence is clear).
_CLEAR = 4.0
#: Top costly ranks kept in a record.
_TOP = 5

#: What ``on_verdict`` receives: one verdict record.
VerdictCallback = Callable[[dict[str, Any]], object]
FloatArray = npt.NDArray[np.float64]
RankArrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]


@dataclass(frozen=True)
class WatchSettings:
    """The thresholds of the watch; rank 0 may change them while the job runs."""

    cost_floor: float = DEFAULT_COST_FLOOR
    margin: float = DEFAULT_MARGIN
    window_steps: int = DEFAULT_WINDOW_STEPS


def _record(
    rank_costs: list[tuple[int, float, float, float, int | None]],
    timing: str,
) -> dict[str, Any]:
    """A straggler record of ``(rank, cost, share, share_of_steps, since)``, costliest first."""
    worst = rank_costs[0]
    ranks = sorted(rank for rank, *_ in rank_costs)
    return {
        "kind": "straggler",
        "ranks": ranks,
        "timing": timing,
        "cost_seconds_per_step": worst[1],
        "cost_share": worst[2],
        "since_step": worst[4],
        "persistent": worst[3] >= _PERSISTENT_SHARE,
        "share_of_steps": worst[3],
        "top": [
            {"rank": rank, "cost_seconds_per_step": cost, "cost_share": share}
            for rank, cost, share, _, _ in rank_costs[:_TOP]
        ],
        "message": (
            f"rank {_ranks_text(ranks)} slow in {timing}: costs {worst[1] * 1e3:.3g} ms a "
            f"step ({worst[2]:.0%} of the step)"
            + (f" since step {worst[4]}" if worst[4] is not None else "")
        ),
    }


def _ranks_text(ranks: list[int]) -> str:
    return ", ".join(str(rank) for rank in ranks)


def _since(excess: FloatArray, cost: float, steps: npt.NDArray[np.int64]) -> int:
    """The step the slowness began: where the sum of ``excess - cost / 2`` to the end peaks."""
    tail = np.cumsum((excess - cost / 2)[::-1])[::-1]
    return int(steps[int(np.argmax(tail))])


def judge_window(
    timings: Mapping[str, Mapping[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]],
    settings: WatchSettings = WatchSettings(),
) -> list[dict[str, Any]]:
    """Straggler records of a window of per-rank timings (``tag -> rank -> (steps, values)``).

    Only the steps every rank of a timing reported count; with fewer than
    :data:`MIN_WINDOW_STEPS` of them (or fewer than 2 ranks) the timing names
    nobody. See the module docstring for the rule.
    """
    step_dense = dense_series(dict(timings.get(STEP_TIME_TAG, {})))
    step_medians: dict[int, float] = {}
    if step_dense.values.size:
        medians = np.nanmedian(step_dense.values, axis=1)
        step_medians = dict(zip(step_dense.steps.tolist(), medians.tolist(), strict=True))
    records: list[dict[str, Any]] = []
    for tag in sorted(timings):
        dense = dense_series(dict(timings[tag]))
        if len(dense.ranks) < 2:
            continue
        complete = ~np.isnan(dense.values).any(axis=1)
        values, steps = dense.values[complete], dense.steps[complete]
        values, steps = values[-settings.window_steps :], steps[-settings.window_steps :]
        if len(steps) < MIN_WINDOW_STEPS:
            continue
        step_time = np.asarray(
            [step_medians.get(step, math.nan) for step in steps.tolist()], dtype=np.float64
        )
        if tag == STEP_TIME_TAG or np.isnan(step_time).all():
            step_time = np.median(values, axis=1)
        step_time = np.where(np.isnan(step_time), np.median(values, axis=1), step_time)
        floor = np.maximum(STEP_FLOOR_SHARE * step_time, STEP_FLOOR_SECONDS)
        ratios = paired_ratios(values, floor)
        levels = np.median(ratios, axis=0)
        half = math.ceil(len(levels) / 2)
        reference = float(np.median(np.sort(levels)[:half]))
        typical_step = float(np.median(step_time))
        named: list[tuple[int, float, float, float, int | None]] = []
        for column, rank in enumerate(dense.ranks.tolist()):
            if levels[column] < reference * (1 + settings.margin):
                continue
            others = np.median(np.delete(values, column, axis=1), axis=1)
            excess = values[:, column] - others
            slow = ratios[:, column] >= reference * (1 + settings.margin / 2)
            share_of_steps = float(slow.mean())
            cost = float(np.median(np.maximum(excess, 0.0)))
            share = cost / typical_step if typical_step > 0 else math.inf
            if share_of_steps < _HOLDS_SHARE or share < settings.cost_floor:
                continue
            if float(np.median(excess)) < _CLEAR * _median_error(excess):
                continue  # within what the noise of the window's steps gives by chance
            named.append((int(rank), cost, share, share_of_steps, _since(excess, cost, steps)))
        if named:
            named.sort(key=lambda row: (-row[1], row[0]))
            records.append(_record(named, tag))
    records.sort(key=lambda record: -float(record["cost_seconds_per_step"]))
    return _one_timing_per_rank(records)


def _one_timing_per_rank(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A rank named on several timings stays in the costliest one only (records come costliest
    first); in a synchronous job its slowness shows in its step time too."""
    seen: set[int] = set()
    kept: list[dict[str, Any]] = []
    for record in records:
        if seen.issuperset(record["ranks"]):
            continue
        seen.update(record["ranks"])
        kept.append(record)
    return kept


def _median_error(values: FloatArray) -> float:
    """The standard error of the median of ``values`` (robust: from their MAD)."""
    spread = 1.4826 * float(np.median(np.abs(values - np.median(values))))
    return 1.2533 * spread / math.sqrt(len(values))


def _key(record: Mapping[str, Any]) -> tuple[str, tuple[int, ...], str | None]:
    return (str(record["kind"]), tuple(record["ranks"]), record.get("timing"))


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
        self._series: dict[str, dict[int, RankArrays]] = {}
        self._standing: dict[tuple[str, tuple[int, ...], str | None], dict[str, Any]] = {}
        self._announced: set[tuple[str, tuple[int, ...], str | None]] = set()
        self._other: list[dict[str, Any]] = []
        self.calls = 0

    @property
    def records(self) -> list[dict[str, Any]]:
        """The verdict records that stand now: stragglers, then the other kinds."""
        return [dict(record) for record in self._standing.values()] + [
            dict(record) for record in self._other
        ]

    def change(self, **settings: Any) -> None:
        """New thresholds (``cost_floor``, ``margin``, ``window_steps``), kept for later rounds."""
        self.settings = replace(self.settings, **settings)

    def add(
        self,
        per_rank: Mapping[str, Mapping[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]],
    ) -> None:
        """A round's per-rank points; only the timing tags are kept, the last steps of each."""
        keep = self.settings.window_steps
        for tag, ranks in per_rank.items():
            if not is_timing_tag(tag):
                continue
            held = self._series.setdefault(tag, {})
            for rank, (new_steps, new_values) in ranks.items():
                if len(new_steps) == 0:
                    continue
                old = held.get(rank)
                steps, values = new_steps, new_values
                if old is not None:
                    steps = np.concatenate([old[0], new_steps])
                    values = np.concatenate([old[1], new_values])
                held[rank] = (steps[-keep:].copy(), values[-keep:].copy())

    def judge(self, others: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """Judge the window; call ``on_verdict`` for each new or changed record; return them."""
        changed: list[dict[str, Any]] = []
        found = {_key(record): record for record in judge_window(self._series, self.settings)}
        for key, record in found.items():
            old = self._standing.get(key)
            if old is not None and record["since_step"] is not None:
                record["since_step"] = (
                    old["since_step"] if old["since_step"] is not None else record["since_step"]
                )
            if old is None or _cost_moved(old, record):
                changed.append(record)
        self._standing = found
        others = [dict(record) for record in others]
        before = {_key(record) for record in self._other}
        changed.extend(record for record in others if _key(record) not in before)
        self._other = others
        for record in changed:
            self._announce(record)
        return changed

    def _announce(self, record: dict[str, Any]) -> None:
        key = _key(record)
        if key not in self._announced:
            self._announced.add(key)
            logger.warning(
                "rankscribe job view: %s. See `rankscribe-lineage show %s`.",
                record["message"],
                self.job_dir or "<job dir>",
            )
        if self.on_verdict is None:
            return
        self.calls += 1
        try:
            self.on_verdict(dict(record))
        except Exception:  # the caller's code: logged, never the end of training
            logger.exception("on_verdict raised on a %s verdict; training goes on", record["kind"])


def _cost_moved(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    before, after = old.get("cost_seconds_per_step"), new.get("cost_seconds_per_step")
    if not isinstance(before, float) or not isinstance(after, float):
        return False
    return abs(after - before) > _COST_CHANGE * max(abs(before), 1e-12)
