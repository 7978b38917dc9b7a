"""The machine samples of a job held to common steps: bands over every rank at each sample.

Each rank samples its machine on a wall-clock grid shared by the job and labels a
sample with the step it was running (docs/system-metrics.md), so one moment of the
job may land at neighbouring steps on two ranks. Bands over "the ranks that sampled
at this step" would then hold one rank at step 1250 and the other at 1251, and their
mean would jump from one rank's reading to the other's at every sample.

So a band of a ``rankscribe/system/*`` tag is computed at every step at which any
rank sampled, over **each rank's latest sample at or before that step**: a rank's
reading holds until its next sample, and after its last one for as long as the rank
ran (through its last step + 1, where its end sample is). The band then counts every
running rank that has sampled at all, and moves from one reading to the next as the
ranks' samples arrive. The offline merge holds samples within the whole run; the
live view carries each rank's latest sample from one written interval to the next
(:class:`HeldSamples`), so both give the same bands.

Samples are sparse (one per rank every few seconds), so they travel as each rank's
own points, like the timings, and are combined only when the bands are written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview.errors import JobViewParamTypeError
from rankscribe.jobview.job._batch_merge import reduced_rows
from rankscribe.jobview.job._statistics import (
    NO_RANK,
    SYSTEM_TAG_PREFIX,
    JobStatistics,
    TagStatistics,
)

if TYPE_CHECKING:
    import numpy.typing as npt

    RankSamples = Mapping[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]

__all__ = ["HeldSamples", "held_bands", "is_sample_tag", "job_bands"]


def is_sample_tag(tag: str) -> bool:
    """Whether ``tag`` is a machine sample (``rankscribe/system/*``), held to common steps."""
    return tag.startswith(SYSTEM_TAG_PREFIX)


def held_bands(
    samples: Mapping[str, RankSamples],
    last_steps: Mapping[int, int | None],
    carried: Mapping[str, Mapping[int, tuple[int, float]]] | None = None,
) -> dict[str, TagStatistics]:
    """The band statistics of each sample tag, every rank's latest sample held (module doc).

    ``samples``: tag -> rank -> (steps ascending, values); ``last_steps``: each
    rank's last step (None or -1: none), a reading is held through that step + 1;
    ``carried``: tag -> rank -> (step, value) of samples before these (the live
    view's earlier intervals), held into these steps as well.
    """
    bands: dict[str, TagStatistics] = {}
    for tag in sorted(samples):
        ranks = samples[tag]
        own = [steps for steps, _ in ranks.values() if len(steps)]
        if not own:
            continue
        steps = np.unique(np.concatenate(own))
        before = {} if carried is None else carried.get(tag, {})
        order = sorted(set(ranks) | set(before))
        values = np.full((len(order), len(steps)), np.nan)
        held = np.zeros((len(order), len(steps)), dtype=bool)
        for row, rank in enumerate(order):
            rank_steps, rank_values = _with_carried(ranks.get(rank), before.get(rank))
            if not len(rank_steps):
                continue
            at = np.searchsorted(rank_steps, steps, side="right") - 1
            last = last_steps.get(rank)
            limit = max(int(rank_steps[-1]), (-1 if last is None or last < 0 else last) + 1)
            keep = (at >= 0) & (steps <= limit)
            values[row, keep] = rank_values[at[keep]]
            held[row] = keep
        bands[tag] = TagStatistics(steps=steps, **reduced_rows(_rows(values, held, order)))
    return bands


def job_bands(statistics: JobStatistics) -> dict[str, TagStatistics]:
    """Every tag's statistics across ranks: the job's ``tags``, and its samples held.

    What the job view draws as bands: a ``rankscribe/system/*`` tag's are over
    every running rank's latest sample at each step any rank sampled at.
    """
    if not isinstance(statistics, JobStatistics):
        raise JobViewParamTypeError(
            f"statistics must be a JobStatistics, got {type(statistics).__name__}"
        )
    return {**statistics.tags, **held_bands(statistics.samples, statistics.last_steps)}


class HeldSamples:
    """Each rank's latest sample of each tag, carried from one live interval to the next."""

    def __init__(self) -> None:
        self._latest: dict[str, dict[int, tuple[int, float]]] = {}

    def bands(
        self, samples: Mapping[str, RankSamples], last_steps: Mapping[int, int | None]
    ) -> dict[str, TagStatistics]:
        """:func:`held_bands` of an interval's samples, with the earlier intervals' carried."""
        bands = held_bands(samples, last_steps, self._latest)
        for tag, ranks in samples.items():
            latest = self._latest.setdefault(tag, {})
            for rank, (steps, values) in ranks.items():
                if len(steps):
                    latest[rank] = (int(steps[-1]), float(values[-1]))
        return bands


def _with_carried(
    own: tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None,
    carried: tuple[int, float] | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    steps = np.empty(0, dtype=np.int64) if own is None else own[0]
    values = np.empty(0, dtype=np.float64) if own is None else own[1]
    if carried is None:
        return steps, values
    later = steps > carried[0]
    return (
        np.concatenate([np.array([carried[0]], dtype=np.int64), steps[later]]),
        np.concatenate([np.array([carried[1]], dtype=np.float64), values[later]]),
    )


def _rows(values: npt.NDArray[np.float64], held: npt.NDArray[np.bool_], order: list[int]) -> Any:
    """``stacked`` for ``reduced_rows``: one row a rank, its held reading or nothing."""
    ranks = np.asarray(order, dtype=np.int64)[:, None]
    finite = held & np.isfinite(values)
    columns = {
        "count": held.astype(np.int64),
        "finite_mean": np.where(finite, values, 0.0),
        "m2": np.zeros(values.shape),
        "minimum": np.where(held, values, np.nan),
        "min_rank": np.where(held, ranks, NO_RANK),
        "maximum": np.where(held, values, np.nan),
        "max_rank": np.where(held, ranks, NO_RANK),
        "nan": (held & np.isnan(values)).astype(np.int64),
        "posinf": (held & (values == np.inf)).astype(np.int64),
        "neginf": (held & (values == -np.inf)).astype(np.int64),
    }

    def stacked(name: str, _absent: float) -> Any:
        return columns[name]

    return stacked
