"""Messages up a tree of ranks, for reductions that must not funnel into rank 0.

Rank ``r``'s parent is ``(r - 1) // fan_in`` and its children are
``fan_in * r + 1 ... fan_in * r + fan_in`` (those below the world size), so
rank 0 hears from at most ``fan_in`` ranks however large the job is, and a
message crosses ``log_fan_in(world_size)`` levels. Each rank sends one
message per round to its parent (:meth:`TreeChannel.send`) and collects its
children's (:meth:`TreeChannel.receive`); what a message holds and how the
children's messages are merged is the caller's (the job view's partial
statistics, ``docs/job-view.md``, "Tree").

Every wait polls against a deadline and gives up at it: a child that is dead
or late is simply absent from that round (its later messages are still taken
in order, tagged with their round). A round the training thread waits on (the
last, at the end of training) is ``prompt``: it polls at most 2 ms apart, the
background rounds up to 20 ms apart. Messages are bytes, never pickles.

Each message carries its sender's sequence number (1, 2, ... over the
channel's life) beside its round, and a parent takes each (child, number)
once: a message that arrives again (a duplicate, a replay of an earlier one,
whatever the transport) is ignored with a warning, and messages that arrive
out of order are each taken once. A number more than :data:`REORDER_WINDOW`
messages behind the newest of that child counts as taken (it was lost).

Backends, each on a channel of its own, never the program's:

- MPI: point-to-point messages on a duplicate of ``COMM_WORLD`` made with the
  non-blocking ``Idup`` when the channel is created (collectively, by every
  rank); usable from a background thread when MPI runs with
  ``MPI_THREAD_MULTIPLE`` (:attr:`TreeChannel.concurrent`);
- the c10d store: one key per message, ``<namespace>/tree/<level>/<rank>/<n>``,
  under the job's coordinator namespace; the parent deletes what it read;
- files: one file per message in ``<folder>/tree/<level>/``, written
  atomically, removed by the parent once read;
- memory: ranks simulated in one process (benchmarks and tests).
"""

from __future__ import annotations

import abc
import collections
import logging
import os
import secrets
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rankscribe.ranks._args import check_timeout
from rankscribe.ranks.backends._rendezvous import FileCoordinator
from rankscribe.ranks.backends._store import StoreCoordinator
from rankscribe.ranks.coordination._coordinator import Coordinator
from rankscribe.ranks.coordination._deadline import Backoff, Deadline
from rankscribe.ranks.detection._info import RankInfo
from rankscribe.ranks.errors import CollectiveTimeoutError, RanksTypeError, RanksValueError
from rankscribe.ranks.files import open_regular

__all__ = [
    "DEFAULT_FAN_IN",
    "REORDER_WINDOW",
    "MemoryTreeChannel",
    "MemoryTreeHub",
    "TreeChannel",
    "tree_channel",
]

logger = logging.getLogger(__name__)

#: Children per rank: rank 0 receives at most this many messages per round.
DEFAULT_FAN_IN = 8
#: The largest message a parent accepts (a header claiming more is a foreign message).
MAX_MESSAGE_BYTES = 1 << 30
#: How many of a child's messages may be outstanding (a gap waiting for a late one) before
#: the oldest gap counts as lost: the memory a parent keeps per child.
REORDER_WINDOW = 1024
# magic, the sender's sequence number, the round, the payload's size.
_ENVELOPE = struct.Struct("<4sQQQ")
_MAGIC = b"RSJ2"
_TAG = 7717
#: Polls of a round on a background thread: from 0.5 ms, doubling to 20 ms (a message
#: is seen up to 20 ms late; the thread costs nothing while it waits).
_POLL = (0.0005, 0.02)
#: Polls of a ``prompt`` round, one the training thread waits on (the last one, at the end
#: of training): at most 2 ms apart, so a message is taken within 2 ms of its arrival.
_PROMPT_POLL = (0.0001, 0.002)

Message = tuple[int, bytes]


class _Taken:
    """The sequence numbers taken from one sender: all up to ``through``, and ``above`` it."""

    def __init__(self) -> None:
        self.through = 0
        self.above: set[int] = set()

    def take(self, number: int) -> bool:
        """Whether ``number`` is new (it is taken now); False for one taken before."""
        if number <= self.through or number in self.above:
            return False
        self.above.add(number)
        while len(self.above) > REORDER_WINDOW:
            # The oldest gap waited long enough: the message is lost, never taken later.
            self.through = min(self.above)
            self.above.discard(self.through)
        while self.through + 1 in self.above:
            self.through += 1
            self.above.discard(self.through)
        return True


def _check_fan_in(fan_in: object) -> int:
    if isinstance(fan_in, bool) or not isinstance(fan_in, int) or fan_in < 2:
        raise RanksValueError(f"fan_in must be an int >= 2, got {fan_in!r}")
    return fan_in


class TreeChannel(abc.ABC):
    """One rank's end of the tree (see the module docstring).

    Args:
        rank, world_size: this rank and the number of ranks.
        fan_in: children per rank (>= 2).
    """

    #: Whether send/receive may run on a thread of their own while the program
    #: uses the same transport (MPI needs MPI_THREAD_MULTIPLE for that).
    concurrent = True

    def __init__(self, rank: int, world_size: int, fan_in: int = DEFAULT_FAN_IN) -> None:
        for name, value in (("rank", rank), ("world_size", world_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise RanksValueError(f"{name} must be an int >= 0, got {value!r}")
        if not rank < world_size:
            raise RanksValueError(f"rank {rank} is not in range(world_size={world_size})")
        self.rank, self.world_size = rank, world_size
        self.fan_in = _check_fan_in(fan_in)
        self.parent: int | None = None if rank == 0 else (rank - 1) // fan_in
        first = fan_in * rank + 1
        self.children = list(range(first, min(first + fan_in, world_size)))
        self.level = self.level_of(rank)
        self._received: dict[int, int] = {child: 0 for child in self.children}
        self._taken = {child: _Taken() for child in self.children}
        self._sequence = 0  # messages this rank sent
        self._closed = False

    def level_of(self, rank: int) -> int:
        """How many steps up the tree ``rank`` is from rank 0."""
        level = 0
        while rank > 0:
            rank = (rank - 1) // self.fan_in
            level += 1
        return level

    @property
    def height(self) -> int:
        """Levels below this rank (0 for a leaf)."""
        height, low, high = 0, self.rank, self.rank
        while True:
            low, high = self.fan_in * low + 1, self.fan_in * high + self.fan_in
            if low >= self.world_size:
                return height
            height += 1

    @property
    def tree_height(self) -> int:
        """Levels below rank 0: how many hops the deepest rank's message makes."""
        return self.level_of(self.world_size - 1)

    def subtree(self, rank: int) -> Iterator[tuple[int, int]]:
        """The ranks under ``rank`` (itself included), as inclusive (first, last) runs."""
        low, high = rank, rank
        while low < self.world_size:
            yield low, min(high, self.world_size - 1)
            low, high = self.fan_in * low + 1, self.fan_in * high + self.fan_in

    def send(
        self, round_number: int, payload: bytes, timeout: float, *, prompt: bool = False
    ) -> bool:
        """Send this round's message to the parent; False when it did not leave in time.

        Rank 0 has no parent: it must not send. ``prompt``: the caller (the
        training thread) waits for the send to complete; poll at most 2 ms apart.
        """
        if self.parent is None:
            raise RanksValueError("rank 0 is the root of the tree: it has no parent to send to")
        deadline = Deadline(check_timeout("timeout", timeout))
        self._sequence += 1
        head = _ENVELOPE.pack(_MAGIC, self._sequence, round_number, len(payload))
        envelope = head + bytes(payload)
        return self._send(envelope, deadline, Backoff(*(_PROMPT_POLL if prompt else _POLL)))

    def receive(
        self, round_number: int, timeout: float, *, prompt: bool = False
    ) -> dict[int, list[tuple[int, bytes]]]:
        """The children's messages, waiting until each sent round ``round_number`` or the timeout.

        Returns ``child -> [(round, payload), ...]`` in order: every message
        that arrived (a late child's earlier rounds too), each once (one that
        arrives again is ignored, see the module docstring); a child absent from
        the result, or whose last round is below ``round_number``, was late.
        ``prompt``: the caller (the training thread) waits; a message is taken
        within 2 ms of its arrival (else up to 20 ms later).
        """
        deadline = Deadline(check_timeout("timeout", timeout))
        found: dict[int, list[Message]] = {}
        backoff = Backoff(*(_PROMPT_POLL if prompt else _POLL))
        while True:
            progressed = False
            for child in self.children:
                for envelope in self._poll(child):
                    message = self._open(child, envelope)
                    if message is not None and self._new(child, envelope):
                        found.setdefault(child, []).append(message)
                        self._received[child] = max(self._received[child], message[0])
                        progressed = True
            if all(self._received[child] >= round_number for child in self.children):
                return found
            if deadline.expired():
                return found
            if progressed:
                backoff.reset()
            backoff.sleep(deadline)

    def _new(self, child: int, envelope: bytes) -> bool:
        """Whether the (opened) ``envelope`` is one ``child`` had not sent before."""
        _, sequence, round_number, _ = _ENVELOPE.unpack_from(envelope)
        if self._taken[child].take(sequence):
            return True
        logger.warning(
            "tree: message %d of rank %d (round %d) is ignored: it arrived before "
            "(or after %d later ones)",
            sequence,
            child,
            round_number,
            REORDER_WINDOW,
        )
        return False

    def _open(self, child: int, envelope: bytes) -> Message | None:
        if len(envelope) < _ENVELOPE.size:
            logger.warning(
                "tree: a message of %d bytes from rank %d is ignored", len(envelope), child
            )
            return None
        magic, _, round_number, size = _ENVELOPE.unpack_from(envelope)
        if magic != _MAGIC or size != len(envelope) - _ENVELOPE.size:
            logger.warning("tree: a message from rank %d is not a tree message; ignored", child)
            return None
        return int(round_number), bytes(envelope[_ENVELOPE.size :])

    def close(self) -> None:
        """Release what the channel holds. Idempotent."""
        self._closed = True

    @abc.abstractmethod
    def _send(self, envelope: bytes, deadline: Deadline, backoff: Backoff) -> bool:
        """Send ``envelope``; a wait for its completion sleeps on ``backoff``."""

    @abc.abstractmethod
    def _poll(self, child: int) -> list[bytes]:
        """The envelopes from ``child`` that arrived since the last poll, in order."""


class MemoryTreeHub:
    """Mailboxes of ranks simulated in one process (benchmarks and tests)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.boxes: dict[int, collections.deque[bytes]] = collections.defaultdict(collections.deque)


class MemoryTreeChannel(TreeChannel):
    """A rank of a tree simulated in one process, through a :class:`MemoryTreeHub`."""

    def __init__(
        self, hub: MemoryTreeHub, rank: int, world_size: int, fan_in: int = DEFAULT_FAN_IN
    ) -> None:
        super().__init__(rank, world_size, fan_in)
        self.hub = hub

    def _send(self, envelope: bytes, deadline: Deadline, backoff: Backoff) -> bool:
        with self.hub.lock:
            self.hub.boxes[self.rank].append(envelope)
        return True

    def _poll(self, child: int) -> list[bytes]:
        with self.hub.lock:
            box = self.hub.boxes[child]
            taken = list(box)
            box.clear()
        return taken


class _MpiInbound:
    """The message being received from one child: its envelope head, then its payload."""

    def __init__(self, mpi: Any, comm: Any, source: int) -> None:
        self.mpi, self.comm, self.source = mpi, comm, source
        self.head = bytearray(_ENVELOPE.size)
        self.payload: bytearray | None = None
        self.request = comm.Irecv([self.head, mpi.BYTE], source=source, tag=_TAG)

    def poll(self) -> bytes | None:
        """A whole envelope when one completed (and the next receive is posted), else None."""
        if not self.request.Test():
            return None
        if self.payload is None:
            magic, _, _, size = _ENVELOPE.unpack(bytes(self.head))
            if magic != _MAGIC or size > MAX_MESSAGE_BYTES:
                logger.warning("tree: rank %d sent a head that is not a tree message", self.source)
                self.request = self.comm.Irecv(
                    [self.head, self.mpi.BYTE], source=self.source, tag=_TAG
                )
                return None
            self.payload = bytearray(size)
            self.request = self.comm.Irecv(
                [self.payload, self.mpi.BYTE], source=self.source, tag=_TAG
            )
            if not self.request.Test():
                return None
        envelope = bytes(self.head) + bytes(self.payload)
        self.payload = None
        self.request = self.comm.Irecv([self.head, self.mpi.BYTE], source=self.source, tag=_TAG)
        return envelope


class MpiTreeChannel(TreeChannel):
    """The tree over MPI point-to-point messages on a communicator of its own.

    Creating it is collective (``Idup`` of ``COMM_WORLD``, bounded by ``timeout``).
    """

    def __init__(
        self, rank: int, world_size: int, fan_in: int = DEFAULT_FAN_IN, *, timeout: float
    ) -> None:
        super().__init__(rank, world_size, fan_in)
        from rankscribe.ranks.detection._mpi_loader import load_mpi  # noqa: PLC0415 - mpi4py on demand

        self._mpi = mpi = load_mpi()
        world = mpi.COMM_WORLD
        if (world.Get_rank(), world.Get_size()) != (rank, world_size):
            raise RanksValueError(
                f"MPI COMM_WORLD says rank {world.Get_rank()} of {world.Get_size()}, "
                f"not {rank} of {world_size}"
            )
        self.concurrent = mpi.Query_thread() >= mpi.THREAD_MULTIPLE
        self._comm, request = world.Idup()
        deadline = Deadline(check_timeout("timeout", timeout))
        backoff = Backoff()
        while not request.Test():
            if deadline.expired():
                raise CollectiveTimeoutError(
                    "creating the job view's MPI channel",
                    deadline.seconds,
                    (),
                    "not every rank created it (MPI Idup did not complete)",
                )
            backoff.sleep(deadline)
        self._inbound = {child: _MpiInbound(mpi, self._comm, child) for child in self.children}
        # Sends still under way; kept (with their buffers) until they complete.
        self._sending: list[tuple[Any, bytes]] = []

    def _send(self, envelope: bytes, deadline: Deadline, backoff: Backoff) -> bool:
        head = envelope[: _ENVELOPE.size]
        body = envelope[_ENVELOPE.size :]
        for part in (head, body):
            self._sending.append(
                (self._comm.Isend([part, self._mpi.BYTE], dest=self.parent, tag=_TAG), part)
            )
        while True:
            self._sending = [
                (request, part) for request, part in self._sending if not request.Test()
            ]
            if not self._sending:
                return True
            if deadline.expired():
                return False
            backoff.sleep(deadline)

    def _poll(self, child: int) -> list[bytes]:
        taken: list[bytes] = []
        while (envelope := self._inbound[child].poll()) is not None:
            taken.append(envelope)
        return taken

    def close(self) -> None:
        if self._closed:
            return
        super().close()
        if self._mpi.Is_finalized():
            return
        for inbound in self._inbound.values():
            inbound.request.Cancel()
        if not self._sending:
            self._comm.Free()


class StoreTreeChannel(TreeChannel):
    """The tree through a key-value store (torch's c10d store): one key per message."""

    def __init__(
        self, store: Any, namespace: str, rank: int, world_size: int, fan_in: int = DEFAULT_FAN_IN
    ) -> None:
        super().__init__(rank, world_size, fan_in)
        for method in ("set", "get", "check", "delete_key"):
            if not callable(getattr(store, method, None)):
                raise RanksTypeError(f"store must offer {method} (a torch c10d Store)")
        self._store = store
        self._namespace = f"{namespace}/tree"
        self._sent = 0
        self._next = {child: 1 for child in self.children}

    def _key(self, rank: int, number: int) -> str:
        return f"{self._namespace}/{self.level_of(rank)}/{rank}/{number}"

    def _send(self, envelope: bytes, deadline: Deadline, backoff: Backoff) -> bool:
        self._sent += 1
        try:
            self._store.set(self._key(self.rank, self._sent), envelope)
        except Exception as error:  # the store's host is gone: this round is lost
            logger.warning("tree: rank %d could not set its message (%s)", self.rank, error)
            return False
        return True

    def _poll(self, child: int) -> list[bytes]:
        taken: list[bytes] = []
        while True:
            key = self._key(child, self._next[child])
            try:
                # check() never blocks; get() of a key that exists returns at once.
                if not self._store.check([key]):
                    return taken
                taken.append(bytes(self._store.get(key)))
            except Exception as error:
                logger.warning("tree: reading %s failed (%s)", key, error)
                return taken
            self._next[child] += 1
            try:
                self._store.delete_key(key)  # only the parent deletes: it alone reads it
            except Exception:
                logger.debug("tree: the store keeps %s", key)


class FileTreeChannel(TreeChannel):
    """The tree through files in a folder every rank sees: one file per message."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        rank: int,
        world_size: int,
        fan_in: int = DEFAULT_FAN_IN,
    ) -> None:
        super().__init__(rank, world_size, fan_in)
        self.folder = Path(folder) / "tree"
        self._sent = 0
        self._next = {child: 1 for child in self.children}

    def _path(self, rank: int, number: int) -> Path:
        return self.folder / str(self.level_of(rank)) / f"{rank}.{number}"

    def _send(self, envelope: bytes, deadline: Deadline, backoff: Backoff) -> bool:
        self._sent += 1
        target = self._path(self.rank, self._sent)
        try:
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            descriptor = os.open(temporary, flags, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(envelope)
            os.replace(temporary, target)
        except OSError as error:
            logger.warning("tree: rank %d could not write %s (%s)", self.rank, target, error)
            return False
        return True

    def _poll(self, child: int) -> list[bytes]:
        taken: list[bytes] = []
        while True:
            path = self._path(child, self._next[child])
            try:
                stream = open_regular(path)  # a link or a FIFO planted here is refused
            except FileNotFoundError:
                return taken
            except OSError as error:
                logger.warning("tree: %s cannot be read (%s)", path, error)
                return taken
            with stream as handle:
                taken.append(handle.read(MAX_MESSAGE_BYTES + _ENVELOPE.size + 1))
            self._next[child] += 1
            try:
                path.unlink()
            except OSError:
                logger.debug("tree: %s stays", path)


def tree_channel(
    coordinator: Coordinator, *, fan_in: int = DEFAULT_FAN_IN, timeout: float | None = None
) -> TreeChannel | None:
    """A tree channel over the same transport as ``coordinator``.

    None for a single process, and for a coordinator that is none of this
    package's backends (its transport is unknown).

    Every rank calls this at the same point (for MPI it duplicates
    ``COMM_WORLD``, collectively, within ``timeout``; default the
    coordinator's). The channel is separate from the coordinator: its
    messages never mix with the coordinator's collectives.
    """
    if not isinstance(coordinator, Coordinator):
        raise RanksTypeError(f"coordinator must be a Coordinator, got {type(coordinator).__name__}")
    info = getattr(coordinator, "info", None)
    if not isinstance(info, RankInfo) or getattr(coordinator, "backend", None) not in (
        "mpi",
        "store",
        "file",
    ):
        return None  # a coordinator of the program's own: no transport known to build on
    if info.world_size == 1:
        return None
    seconds = coordinator.timeout if timeout is None else check_timeout("timeout", timeout)
    if coordinator.backend == "mpi":
        return MpiTreeChannel(info.rank, info.world_size, fan_in, timeout=seconds)
    if isinstance(coordinator, StoreCoordinator):
        return StoreTreeChannel(
            coordinator._store, coordinator.namespace, info.rank, info.world_size, fan_in
        )
    if isinstance(coordinator, FileCoordinator):
        return FileTreeChannel(coordinator.directory, info.rank, info.world_size, fan_in)
    raise RanksValueError(f"no tree channel for the {coordinator.backend!r} backend")
