"""Which share of the work is this rank's.

:func:`split_evenly` is the one place that decides how a list of steps (for
example the steps at which heavy tensor data is collected) is shared between
ranks: rank ``r`` of ``n`` gets the ``r``-th of ``n`` contiguous chunks, the
first ``len(items) % n`` chunks one item longer than the rest. The chunks are
disjoint, keep the input order, and together cover every item, so the job as a
whole collects the full range and no rank carries all of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from rankscribe.ranks._args import check_rank, check_world_size
from rankscribe.ranks.errors import RanksTypeError

__all__ = ["split_evenly"]

T = TypeVar("T")


def split_evenly(items: Iterable[T], world_size: int, rank: int) -> list[T]:
    """Return rank ``rank``'s contiguous share of ``items`` among ``world_size`` ranks.

    >>> [split_evenly(range(10), 3, r) for r in range(3)]
    [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]

    Shares differ in length by at most one; with fewer items than ranks the
    last ranks get empty lists.
    """
    check_world_size("world_size", world_size)
    check_rank("rank", rank, world_size)
    if not isinstance(items, Iterable):
        raise RanksTypeError(
            f"items must be an iterable of the items to share (a list, a range), got "
            f"{type(items).__name__}"
        )
    sequence: Sequence[T] = items if isinstance(items, Sequence) else list(items)
    start, stop = _bounds(len(sequence), world_size, rank)
    return list(sequence[start:stop])


def _bounds(count: int, world_size: int, rank: int) -> tuple[int, int]:
    base, extra = divmod(count, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)
