"""How results reach rank 0: collectives with a timeout.

A :class:`Coordinator` offers three collectives, each called by *every* rank,
unconditionally and in the same order (only what a rank *writes* afterwards
depends on its rank):

- :meth:`Coordinator.gather` collects one object per rank at the root
  and returns a :class:`GatherResult`; ranks that did not deliver in time are
  named in ``missing`` instead of making the root wait forever.
- :meth:`Coordinator.bcast` hands the root's object to every rank.
- :meth:`Coordinator.barrier` waits until every rank arrived, or raises
  :class:`BarrierTimeoutError` naming the ranks that did not.

Four backends implement them: MPI (:mod:`rankscribe.ranks.backends._mpi`), the key-value
store of torch.distributed's process group (:mod:`rankscribe.ranks.backends._store`), a
rendezvous folder on a shared filesystem (:mod:`rankscribe.ranks.backends._rendezvous`) and
a single process (:mod:`rankscribe.ranks.backends._single`);
:func:`rankscribe.ranks.create_coordinator` picks one (the choice itself,
:func:`choose_backend`, lives in :mod:`rankscribe.ranks.backends._creation`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Generic, Literal, TypeVar

from rankscribe.ranks._args import check_int, check_timeout
from rankscribe.ranks.coordination._deadline import Deadline
from rankscribe.ranks.detection._info import RankInfo, check_info
from rankscribe.ranks.errors import (
    CoordinatorClosedError,
    MessageError,
    RanksTypeError,
    RanksValueError,
)
from rankscribe.ranks.messages import _codec

__all__ = [
    "DEFAULT_TIMEOUT",
    "BackendName",
    "Coordinator",
    "GatherResult",
]

T = TypeVar("T")

#: Seconds a collective waits when no ``timeout`` is given (torch.distributed's default).
DEFAULT_TIMEOUT = 600.0

BackendName = Literal["auto", "mpi", "store", "file", "single"]


@dataclass(frozen=True)
class GatherResult(Generic[T]):
    """What :meth:`Coordinator.gather` returns.

    On the root rank, ``values`` maps each rank whose object arrived in time to
    that object (the root's own object included, as is, not a copy) and
    ``missing`` lists, in order, the ranks whose object did not arrive before
    the timeout (or whose message could not be decoded). ``values`` and ``missing``
    together always cover ``range(world_size)``.

    On every other rank the result is empty (``values == {}``,
    ``missing == ()``): only the root learns who delivered. ``is_root`` tells
    the two apart.
    """

    root: int
    rank: int
    world_size: int
    values: Mapping[int, T] = field(default_factory=dict)
    missing: tuple[int, ...] = ()

    @property
    def is_root(self) -> bool:
        return self.rank == self.root

    @property
    def complete(self) -> bool:
        """On the root: every rank's object arrived. Always False elsewhere."""
        return self.is_root and not self.missing

    def in_rank_order(self) -> list[T]:
        """The objects that arrived, ordered by rank (missing ranks skipped)."""
        return [self.values[rank] for rank in sorted(self.values)]


class Coordinator(abc.ABC):
    """Collectives over the ranks of one job, each bounded by a timeout.

    Every method that takes ``timeout`` accepts a finite number of seconds
    >= 0; ``None`` means the coordinator's default (``timeout`` given at
    creation, :data:`DEFAULT_TIMEOUT` unless set). The deadline starts when
    the call starts on that rank.

    A coordinator is a context manager; :meth:`close` releases what the
    backend holds. It is not thread-safe: collectives are numbered in call
    order, so one thread per rank calls them.
    """

    backend: ClassVar[str]

    def __init__(self, info: RankInfo, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.info = check_info("info", info)
        self.timeout = check_timeout("timeout", timeout)
        self._sequence = 0
        self._closed = False

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    def gather(self, obj: T, root: int = 0, timeout: float | None = None) -> GatherResult[T]:
        """Collect ``obj`` from every rank at ``root``; never waits past ``timeout``.

        Returns a :class:`GatherResult`: on the root, the objects that arrived
        and the ranks that did not; elsewhere an empty result. ``obj`` must be
        data (None, bool, int, float, str, bytes, list, tuple, set, dict,
        ``array.array``, numeric numpy arrays; see ``docs/layout.md``), except on
        the root, whose object is kept as is.
        """
        deadline = self._begin("gather", root, timeout)
        return self._gather(obj, root, deadline, self._sequence)

    def bcast(self, obj: T, root: int = 0, timeout: float | None = None) -> T:
        """Return the root's ``obj`` on every rank (other ranks' ``obj`` is ignored).

        The root gets its own object back as is; other ranks get a decoded copy
        (``obj`` must be data, as for :meth:`gather`), or
        :class:`CollectiveTimeoutError` if it did not arrive in time.
        The root never waits for the other ranks past ``timeout``: it logs a
        warning naming the ranks its object did not reach.
        """
        deadline = self._begin("bcast", root, timeout)
        return self._bcast(obj, root, deadline, self._sequence)

    def barrier(self, timeout: float | None = None) -> None:
        """Wait until every rank called ``barrier``; raise :class:`BarrierTimeoutError` if not.

        The error's ``missing`` names the ranks that did not arrive in time
        (see the backend for what each rank can know).
        """
        deadline = self._begin("barrier", 0, timeout)
        self._barrier(deadline, self._sequence)

    def close(self) -> None:
        """Release the backend's resources; later collectives raise. Idempotent."""
        self._closed = True

    def __enter__(self) -> Coordinator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(rank={self.rank}, world_size={self.world_size}, "
            f"timeout={self.timeout:g})"
        )

    @abc.abstractmethod
    def _gather(self, obj: T, root: int, deadline: Deadline, sequence: int) -> GatherResult[T]:
        """The backend's gather; arguments are validated and ``sequence`` numbered."""

    @abc.abstractmethod
    def _bcast(self, obj: T, root: int, deadline: Deadline, sequence: int) -> T:
        """The backend's bcast."""

    @abc.abstractmethod
    def _barrier(self, deadline: Deadline, sequence: int) -> None:
        """The backend's barrier."""

    def _begin(self, operation: str, root: int, timeout: float | None) -> Deadline:
        """Validate a collective's arguments and number it (the same number on every rank)."""
        if self._closed:
            raise CoordinatorClosedError(f"{operation} called on a closed {type(self).__name__}")
        check_int("root", root)
        if not 0 <= root < self.world_size:
            raise RanksValueError(
                f"root must be in range(world_size) = range({self.world_size}), got {root}"
            )
        seconds = self.timeout if timeout is None else check_timeout("timeout", timeout)
        self._sequence += 1
        return Deadline(seconds)

    def _dumps(self, obj: Any, operation: str) -> bytes | bytearray:
        """``obj`` as a message for another rank, with an error that says which rank failed."""
        try:
            return _codec.encode(obj)
        except RanksTypeError as error:
            raise RanksTypeError(f"{operation}: on rank {self.rank}, {error}") from None

    def _loads(self, data: bytes | bytearray | memoryview, operation: str, source: int) -> Any:
        """The object in a message from rank ``source``; :class:`MessageError` if malformed."""
        try:
            return _codec.decode(data)
        except MessageError as error:
            raise MessageError(
                f"{operation}: the message from rank {source} is not one this package "
                f"writes: {error}"
            ) from None
