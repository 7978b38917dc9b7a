"""The single-process backend: every collective completes at once, nothing is copied."""

from __future__ import annotations

import socket
from typing import TypeVar

from rankscribe.ranks.coordination._coordinator import DEFAULT_TIMEOUT, Coordinator, GatherResult
from rankscribe.ranks.coordination._deadline import Deadline
from rankscribe.ranks.detection._info import RankInfo
from rankscribe.ranks.errors import RanksValueError

__all__ = ["SingleCoordinator"]

T = TypeVar("T")


class SingleCoordinator(Coordinator):
    """Collectives of a job that is one process: gather returns ``{0: obj}``, bcast ``obj``."""

    backend = "single"

    def __init__(self, info: RankInfo | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        info = info if info is not None else RankInfo(0, 1, 0, 1, socket.gethostname(), "single")
        super().__init__(info, timeout=timeout)
        if info.world_size != 1:
            raise RanksValueError(
                f"SingleCoordinator needs a world of one process, got world_size={info.world_size}"
            )

    def _gather(self, obj: T, root: int, deadline: Deadline, sequence: int) -> GatherResult[T]:
        return GatherResult(root=root, rank=0, world_size=1, values={0: obj})

    def _bcast(self, obj: T, root: int, deadline: Deadline, sequence: int) -> T:
        return obj

    def _barrier(self, deadline: Deadline, sequence: int) -> None:
        return None
