"""Many partial statistics merged at once: the tree's one-pass combine of its children.

:meth:`rankscribe.jobview.job._statistics.TagStatistics.merge` combines two
partial results; a tree node has nine (its own and eight children's) for
every tag, and merging them pair by pair cost most of an interval at 1,024
ranks. Here they are stacked side by side and reduced in a few numpy calls:
counts and non-finite counts summed, the groups' means and M2 combined
(Chan's update, all groups at once), min and max with their ranks under the
same rules as the pairwise merge (a number beats NaN, a tie goes to the
lowest rank), so the result equals the pairwise merge in any order
(docs/job-view.md, "Tree").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview.job._statistics import NO_RANK, TagStatistics

if TYPE_CHECKING:
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

__all__ = ["merge_all", "merge_groups", "reduced_rows", "single_rank_rows"]


def single_rank_rows(rank: int, steps: IntArray, values: FloatArray) -> list[TagStatistics]:
    """:meth:`TagStatistics.of_rank` of several tags of one rank at once.

    ``values`` is (tags, steps): one row per tag, all at ``steps`` (sorted and
    unique). One statistics per row, each a view into blocks shared by the
    rows (nothing changes them in place), so a rank's partial costs a few
    numpy calls whatever its number of tags (docs/job-view.md, "Tree").
    """
    shape = values.shape
    ranks = np.full(shape, rank, dtype=np.int64)
    blocks = (  # the fields after the steps, in TagStatistics' order
        np.ones(shape, dtype=np.int64),  # count
        np.where(np.isfinite(values), values, 0.0),  # finite_mean
        np.zeros(shape, dtype=np.float64),  # m2
        values,  # minimum
        ranks,  # min_rank
        values,  # maximum
        ranks,  # max_rank
        np.isnan(values).astype(np.int64),
        (values == np.inf).astype(np.int64),
        (values == -np.inf).astype(np.int64),
    )
    # Rows by iteration and fields by position: this runs for every tag of every rank.
    return [TagStatistics(steps, *row) for row in zip(*blocks, strict=True)]


def merge_all(parts: Sequence[TagStatistics]) -> TagStatistics:
    """The statistics of all ``parts`` (disjoint groups of ranks) together, in one pass.

    The same result as folding them with :meth:`TagStatistics.merge` in any
    order (counts, extremes and their ranks identical; mean and M2 up to
    rounding), at the cost of one vectorized pass over a (parts, steps)
    stack instead of one pass per pair: what a tree node does with its
    children's partials (docs/job-view.md, "Tree").
    """
    return merge_groups([parts])[0]


def merge_groups(groups: Sequence[Sequence[TagStatistics]]) -> list[TagStatistics]:
    """:func:`merge_all` of each group (one per tag); groups alike go in one pass.

    Groups with the same number of parts whose parts all hold the same steps
    (a node's tags, when its ranks record every tag at every step) are
    reduced together, side by side in one (parts, tags x steps) stack.
    """
    if any(not group for group in groups):
        raise ValueError("merge_all needs at least one TagStatistics per group")
    merged: list[TagStatistics | None] = [group[0] if len(group) == 1 else None for group in groups]
    alike: dict[tuple[int, int], list[int]] = {}
    for index, group in enumerate(groups):
        if len(group) == 1:
            continue
        size = len(group[0].steps)
        if all(len(part.steps) == size for part in group):
            alike.setdefault((len(group), size), []).append(index)
        else:
            merged[index] = _merged_apart(group)
    for (parts, size), indices in alike.items():
        # Part-major, then group: row i of the (parts, groups x steps) stack is part i of each.
        order = [groups[index][part] for part in range(parts) for index in indices]
        steps = np.concatenate([item.steps for item in order]).reshape(len(order), size)
        if not bool((steps == steps[0]).all()):
            for index in indices:
                merged[index] = _merged_apart(groups[index])
            continue

        columns = _reduced(_side_by_side(order, parts))
        shared = steps[0].copy()
        for position, index in enumerate(indices):
            window = slice(position * size, (position + 1) * size)
            merged[index] = TagStatistics(
                steps=shared, **{name: column[window] for name, column in columns.items()}
            )
    return [item for item in merged if item is not None]


def _side_by_side(order: list[TagStatistics], parts: int) -> Callable[[str, float], Any]:
    """``stacked`` for :func:`_reduced`: the groups' columns side by side, one row per part."""
    width = sum(len(item.steps) for item in order) // parts

    def stacked(name: str, _absent: float) -> Any:
        # concatenate, not stack: the same rows for much less per-array work in numpy
        return np.concatenate([getattr(item, name) for item in order]).reshape(parts, width)

    return stacked


def _merged_apart(parts: Sequence[TagStatistics]) -> TagStatistics:
    """:func:`merge_all` of parts whose steps differ: each placed in the union of the steps."""
    steps = np.unique(np.concatenate([part.steps for part in parts]))
    places = [np.searchsorted(steps, part.steps) for part in parts]

    def stacked(name: str, absent: float) -> Any:
        column = getattr(parts[0], name)
        out = np.full((len(parts), len(steps)), absent, dtype=column.dtype)
        for row, (part, where) in enumerate(zip(parts, places, strict=True)):
            out[row, where] = getattr(part, name)
        return out

    return TagStatistics(steps=steps, **_reduced(stacked))


def _reduced(stacked: Callable[[str, float], Any]) -> dict[str, Any]:
    """Every column but the steps, reduced over the rows of ``stacked(name, absent)``.

    ``absent`` is what a row holds where its part has no point (count 0).
    """
    count = stacked("count", 0)
    nan, posinf, neginf = stacked("nan", 0), stacked("posinf", 0), stacked("neginf", 0)
    finite = count - nan - posinf - neginf
    total = finite.sum(axis=0)
    means = stacked("finite_mean", 0.0)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        # Weights that sum to 1: the weighted sum cannot overflow past the largest mean.
        weights = finite / np.maximum(total, 1)
        held = finite > 0
        mean = (np.where(held, means, 0.0) * weights).sum(axis=0)
        deviation = np.where(held, means - mean, 0.0)
        m2 = stacked("m2", 0.0).sum(axis=0) + (finite * deviation * deviation).sum(axis=0)
    minimum, min_rank = _extreme_of(
        stacked("minimum", np.nan), stacked("min_rank", NO_RANK), np.fmin
    )
    maximum, max_rank = _extreme_of(
        stacked("maximum", np.nan), stacked("max_rank", NO_RANK), np.fmax
    )
    return {
        "count": count.sum(axis=0),
        "finite_mean": mean,
        "m2": m2,
        "minimum": minimum,
        "min_rank": min_rank,
        "maximum": maximum,
        "max_rank": max_rank,
        "nan": nan.sum(axis=0),
        "posinf": posinf.sum(axis=0),
        "neginf": neginf.sum(axis=0),
    }


def reduced_rows(stacked: Callable[[str, float], Any]) -> dict[str, Any]:
    """:func:`_reduced` for callers with rows of their own (the groups of runs: one row a run)."""
    return _reduced(stacked)


_LAST_RANK = np.iinfo(np.int64).max


def _extreme_of(
    values: FloatArray, ranks: IntArray, reduce: np.ufunc
) -> tuple[FloatArray, IntArray]:
    """Per column, the best of the rows: a number beats NaN, a tie goes to the lowest rank.

    ``reduce`` is ``np.fmin`` or ``np.fmax`` (they skip NaN): the rule of
    :func:`_take_extreme`, for every row at once.
    """
    best = reduce.reduce(values, axis=0)
    with np.errstate(invalid="ignore"):
        candidate = (values == best) | (np.isnan(values) & np.isnan(best))
    # No rank (an absent row) loses every tie; a row that is no candidate never wins.
    key = np.where(candidate, np.where(ranks == NO_RANK, _LAST_RANK - 1, ranks), _LAST_RANK)
    row = key.argmin(axis=0)
    column = np.arange(values.shape[1])
    return values[row, column], ranks[row, column]
