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


class Handing:
    """One rank's collectives in a job whose other ranks ran before it in this process.

    A rank other than the root hands its objects over (kept in ``handed``, in order;
    not the run length it gives when training begins, which the root never hears)
    and never hears the root's claim of the job's directory (``bcast`` times out, as
    when rank 0 is late). The root's ``n``-th gather returns its own object beside
    ``others[n]``: what the other ranks handed in their ``n``-th gather (replayed from
    their ``handed``); a rank absent there is missing.
    """

    def __init__(
        self, rank: int, world_size: int = 2, others: list[dict[int, Any]] | None = None
    ) -> None:
        self.rank, self.world_size = rank, world_size
        self.others = list(others or [])
        self.handed: list[Any] = []

    def bcast(self, obj: Any, root: int = 0, timeout: float | None = None) -> Any:
        from rankscribe.ranks.errors import CollectiveTimeoutError

        if self.rank != root:
            raise CollectiveTimeoutError("bcast", 1.0, [root], "rank 0 never sent its claim")
        return obj

    def gather(self, obj: Any, root: int = 0, timeout: float | None = None) -> GatherResult[Any]:
        if isinstance(obj, int):
            # The run lengths exchanged as training begins: not handed over nor replayed,
            # so the root hears no other rank's (it says so, and shares as before).
            values = {root: obj} if self.rank == root else {}
            missing = tuple(rank for rank in range(self.world_size) if rank != root)
            return GatherResult(
                root=root,
                rank=self.rank,
                world_size=self.world_size,
                values=values,
                missing=missing if self.rank == root else (),
            )
        self.handed.append(obj)
        if self.rank != root:
            return GatherResult(root=root, rank=self.rank, world_size=self.world_size)
        values = {root: obj, **(self.others.pop(0) if self.others else {})}
        missing = tuple(rank for rank in range(self.world_size) if rank not in values)
        return GatherResult(
            root=root, rank=root, world_size=self.world_size, values=values, missing=missing
        )

    def merge_payloads(self) -> list[dict[str, Any]]:
        """What this rank handed to the lineage merge (the start's gather hands a path)."""
        return [payload for payload in self.handed if isinstance(payload, dict)]

    def replayed(self, rank: int) -> list[dict[int, Any]]:
        """This rank's objects as the root's gathers receive them from ``rank``."""
        return [{rank: payload} for payload in self.handed]


# The collector accepts coordinators only; this double has the two collectives it calls.
Coordinator.register(Handing)
