"""The store backend: collectives through a key-value store such as torch's c10d store.

A job whose ranks initialised ``torch.distributed`` (torchrun, ``mp.spawn``,
any ``init_process_group``) already shares a key-value store: the one the
process group was rendezvoused through (a ``TCPStore`` on the master, under
torchrun the agent's). This backend builds gather, bcast and barrier from
that store's non-blocking requests only — ``set``, ``check``, ``get`` of a key
``check`` found, ``add`` and ``delete_key`` — and never from a torch
collective, which would hang every rank on a dead one. Waiting is polling
``check`` against a deadline, so the root returns at its deadline and names
the ranks that did not deliver, as with the MPI and file backends.

Keys, under ``rankscribe/<job>/<coordinator>/<sequence>/``:

- gather: ``rank_<r>`` (each rank's object) and ``out`` (a counter every rank
  adds one to when it is done: a rank other than the root once it set its
  object, the root once it read what arrived). Only the root reads or deletes
  ``rank_<r>`` while it gathers, so a key the root saw cannot vanish before its
  ``get``, which on a c10d store would block until the store's own timeout. The
  root deletes the keys it read; the rank whose ``add`` counts everyone out
  (the root, or a late rank) deletes what is left.
- bcast: ``root`` (the object, deleted by the root once every rank took it)
  and ``taken_<r>`` (each rank's acknowledgement, deleted with it).
- barrier: ``rank_<r>`` (each rank's arrival) and ``left`` (a counter; the
  last rank to leave deletes the arrivals and the counter).

``<job>`` names the launch (:func:`~rankscribe.ranks.launchers.launch_name`:
torchrun's run id and restart count, Slurm's job and step) and
``<coordinator>`` counts the store coordinators this process made, so two
coordinators of one job, made in the same order on every rank, never share a
key; the sequence number keeps a late rank's value out of the next
collective. Values start with the collective's kind, so ranks that called
different collectives at the same position are told
(:class:`CollectiveMismatchError`).

Values are data (:mod:`rankscribe.ranks.messages._codec`), never pickles: any client that
reaches the store's port could set a key. After a timeout, the keys that a
missing rank would have consumed stay in the store, which lives as long as the
job. A store whose ``delete_key`` fails (a custom store without it) keeps every
key; that is logged once.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar

from rankscribe.ranks.coordination._coordinator import DEFAULT_TIMEOUT, Coordinator, GatherResult
from rankscribe.ranks.coordination._deadline import Backoff, Deadline
from rankscribe.ranks.detection._info import RankInfo, detect
from rankscribe.ranks.detection._launchers import launch_name
from rankscribe.ranks.detection._torch_group import (
    default_group_rank,
    default_store,
    initialised_distributed,
)
from rankscribe.ranks.errors import (
    BackendUnavailableError,
    BarrierTimeoutError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    MessageError,
    RanksTypeError,
    RanksValueError,
    StoreError,
)

__all__ = ["KEY_PREFIX", "Store", "StoreCoordinator"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Every key this backend writes starts with this.
KEY_PREFIX = "rankscribe"
# A store request is a network round trip: poll from 1 ms up to 50 ms apart.
_SHORTEST_POLL = 0.001
_LONGEST_POLL = 0.05
_KINDS = ("gather", "bcast", "barrier")
_SEPARATOR = b"\n"

# Coordinators made so far, per rank (one rank per process in a job; several when
# a test runs ranks as threads), so each coordinator gets its own key space; every
# rank makes its coordinators in the same order, so the numbers agree.
_instances: dict[int, itertools.count[int]] = {}
_instances_lock = threading.Lock()


class Store(Protocol):
    """The key-value store a :class:`StoreCoordinator` takes: the requests it makes.

    A subset of torch's ``c10d.Store``, so any torch store (``TCPStore``,
    ``FileStore``, the default process group's) is one.
    """

    def set(self, key: str, value: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def check(self, keys: list[str]) -> bool: ...

    def add(self, key: str, amount: int) -> int: ...

    def delete_key(self, key: str) -> bool: ...


class StoreCoordinator(Coordinator):
    """Collectives through a key-value store shared by the ranks, each bounded by a timeout.

    ``store`` defaults to the c10d store of ``torch.distributed``'s default
    process group, which must then be initialised (the program imports and
    initialises torch; this package never does). ``info`` defaults to
    :func:`~rankscribe.ranks.detect` and must agree with that group.
    ``namespace`` replaces the automatic ``<job>/<coordinator>`` part of the
    keys (the same string on every rank, new for each coordinator).

    gather: ranks other than the root set their object and return at once;
    the root polls for the keys. bcast: the root sets its object and waits
    (at most the timeout) until every rank took it, warning about the ranks
    that did not. barrier: every rank sets its arrival and polls for all of
    them, so on a timeout every rank's :class:`BarrierTimeoutError` names the
    absent ranks.
    """

    backend = "store"

    def __init__(
        self,
        info: RankInfo | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        store: Store | None = None,
        namespace: str | None = None,
    ) -> None:
        super().__init__(info if info is not None else detect(), timeout=timeout)
        if store is None:
            store = _torch_store(self.info)
        for method in ("set", "get", "check", "add", "delete_key"):
            if not callable(getattr(store, method, None)):
                raise RanksTypeError(
                    f"store must offer set, get, check, add and delete_key (a torch "
                    f"c10d Store), got {type(store).__name__} without {method}"
                )
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise RanksValueError(f"namespace must be a non-empty str, got {namespace!r}")
        self._store = store
        if namespace is None:
            with _instances_lock:
                number = next(_instances.setdefault(self.rank, itertools.count()))
            namespace = f"{launch_name(os.environ)}/{number}"
        self.namespace = f"{KEY_PREFIX}/{namespace}"
        self._deletes_keys = True

    # -- collectives -----------------------------------------------------------------

    def _gather(self, obj: T, root: int, deadline: Deadline, sequence: int) -> GatherResult[T]:
        keys = {r: self._key(sequence, f"rank_{r}") for r in range(self.world_size)}
        if self.rank != root:
            # Never delete this key here: the root may have seen it and be about to get it.
            self._request("set", keys[self.rank], _pack("gather", self._dumps(obj, "gather")))
            self._count_out(sequence, keys.values())
            return GatherResult(root=root, rank=self.rank, world_size=self.world_size)
        others = {r: key for r, key in keys.items() if r != root}
        arrived = self._wait_for(others, deadline)
        values: dict[int, T] = {root: obj}
        for source in arrived:
            try:
                values[source] = self._load(
                    self._request("get", others[source]), "gather", source, sequence
                )
            except MessageError as error:
                logger.error("gather #%d: rank %d counts as missing: %s", sequence, source, error)
            self._delete(others[source])
        self._count_out(sequence, keys.values())
        missing = tuple(rank for rank in range(self.world_size) if rank not in values)
        if missing:
            logger.warning(
                "gather #%d: no object from rank(s) %s within %g s in the store under %s",
                sequence,
                ", ".join(map(str, missing)),
                deadline.seconds,
                self._key(sequence, ""),
            )
        return GatherResult(
            root=root, rank=self.rank, world_size=self.world_size, values=values, missing=missing
        )

    def _count_out(self, sequence: int, keys: Iterable[str]) -> None:
        """Count this rank out of a gather; the last one out deletes what is left.

        The root counts itself out only after its last ``get``, so whoever is last
        deletes keys nobody will read any more.
        """
        out = self._key(sequence, "out")
        if self._request("add", out, 1) == self.world_size:
            for key in (*keys, out):
                self._delete(key)

    def _bcast(self, obj: T, root: int, deadline: Deadline, sequence: int) -> T:
        key = self._key(sequence, "root")
        if self.rank == root:
            self._request("set", key, _pack("bcast", self._dumps(obj, "bcast")))
            taken = {
                r: self._key(sequence, f"taken_{r}") for r in range(self.world_size) if r != root
            }
            arrived = self._wait_for(taken, deadline)
            unreached = sorted(set(taken) - set(arrived))
            if unreached:
                # The object stays for ranks still on their way (the store dies with the job).
                logger.warning(
                    "bcast #%d: rank(s) %s did not take the object within %g s",
                    sequence,
                    ", ".join(map(str, unreached)),
                    deadline.seconds,
                )
            else:
                self._delete(key)
            for rank in arrived:
                self._delete(taken[rank])
            return obj
        if not self._wait_for({root: key}, deadline):
            raise CollectiveTimeoutError(
                f"bcast #{sequence}",
                deadline.seconds,
                (root,),
                f"root {root} set nothing under {key} in the store",
            )
        packed = self._request("get", key)
        self._request("set", self._key(sequence, f"taken_{self.rank}"), b"")
        result: T = self._load(packed, "bcast", root, sequence)
        return result

    def _barrier(self, deadline: Deadline, sequence: int) -> None:
        arrivals = {r: self._key(sequence, f"rank_{r}") for r in range(self.world_size)}
        self._request("set", arrivals[self.rank], _pack("barrier", b""))
        others = {r: key for r, key in arrivals.items() if r != self.rank}
        arrived = self._wait_for(others, deadline)
        missing = tuple(sorted(set(others) - set(arrived)))
        if missing:
            raise BarrierTimeoutError(
                f"barrier #{sequence}",
                deadline.seconds,
                missing,
                f"no arrival in the store under {self._key(sequence, '')}",
            )
        for rank in arrived:
            self._check_kind(self._request("get", others[rank]), "barrier", rank, sequence)
        # Every rank saw every arrival before it counts itself out, so the last one
        # out can delete them without making another rank miss one.
        left_key = self._key(sequence, "left")
        if self._request("add", left_key, 1) == self.world_size:
            for key in (*arrivals.values(), left_key):
                self._delete(key)

    # -- store requests -----------------------------------------------------------

    def _key(self, sequence: int, name: str) -> str:
        return f"{self.namespace}/{sequence}/{name}"

    def _request(self, method: str, *arguments: Any) -> Any:
        """One store request; a failure (the store's host is gone) becomes a StoreError."""
        try:
            return getattr(self._store, method)(*arguments)
        except Exception as error:
            raise StoreError(
                f"rank {self.rank}: the store refused {method} {arguments[0]!r} "
                f"({type(error).__name__}: {error}); the process hosting it may have ended"
            ) from error

    def _delete(self, key: str) -> None:
        if not self._deletes_keys:
            return
        try:
            self._store.delete_key(key)
        except Exception as error:
            # A store that cannot delete keeps the keys; saying so once is enough.
            self._deletes_keys = False
            logger.info("the store keeps this job's keys (delete_key failed: %s)", error)

    def _wait_for(self, keys: Mapping[int, str], deadline: Deadline) -> list[int]:
        """Poll until every key exists or ``deadline`` passes; return the ranks whose key did.

        One ``check`` of all pending keys per poll; only at the deadline is each
        key checked on its own, to name the ranks that are missing.
        """
        backoff = Backoff(_SHORTEST_POLL, _LONGEST_POLL)
        while not self._request("check", list(keys.values())):
            if deadline.expired():
                return [rank for rank, key in keys.items() if self._request("check", [key])]
            backoff.sleep(deadline)
        return list(keys)

    def _load(self, packed: bytes, kind: str, source: int, sequence: int) -> Any:
        """The object in a value of the store; MessageError if it is not a message."""
        payload = self._check_kind(packed, kind, source, sequence)
        return self._loads(payload, f"{kind} #{sequence}", source)

    def _check_kind(self, packed: bytes, kind: str, source: int, sequence: int) -> bytes:
        found, _, payload = bytes(packed).partition(_SEPARATOR)
        if found.decode("ascii", "replace") != kind:
            raise CollectiveMismatchError(
                f"rank {self.rank} is in {kind} #{sequence} but rank {source} set "
                f"{found.decode('ascii', 'replace')!r} there: every rank must call every "
                "collective in the same order"
            )
        return payload


def _pack(kind: str, payload: bytes | bytearray) -> bytes:
    return kind.encode("ascii") + _SEPARATOR + payload


def _torch_store(info: RankInfo) -> Any:
    distributed = initialised_distributed()
    if distributed is None:
        raise BackendUnavailableError(
            "the store backend needs torch.distributed's default process group: import "
            "torch and call torch.distributed.init_process_group first (or pass store=)"
        )
    rank, size = default_group_rank(distributed)
    if (rank, size) != (info.rank, info.world_size):
        raise RanksValueError(
            f"torch.distributed says rank {rank} of {size} but info says rank {info.rank} "
            f"of {info.world_size} (launcher {info.launcher})"
        )
    return default_store(distributed)
