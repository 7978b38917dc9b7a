"""Coordinators of the collector tests that need no other process."""

from __future__ import annotations

from typing import Any

from rankscribe.ranks import Coordinator, GatherResult


class RankZeroAlone(Coordinator):
    """Rank 0 of a job of 2 whose rank 1 never reports.

    What the claim's broadcast and the merge's gather do for rank 0 then: the
    gather returns rank 0's value alone with rank 1 missing.
    """

    backend = "test"

    def _gather(self, obj: Any, root: int, deadline: Any, sequence: int) -> Any:
        return GatherResult(root=0, rank=0, world_size=2, values={0: obj}, missing=(1,))

    def _bcast(self, obj: Any, root: int, deadline: Any, sequence: int) -> Any:
        return obj

    def _barrier(self, deadline: Any, sequence: int) -> None:
        return None
