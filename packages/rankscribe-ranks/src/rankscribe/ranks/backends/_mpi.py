"""The MPI backend: point-to-point messages polled against a deadline.

MPI's own collectives (``MPI_Gather``, ``MPI_Barrier``) cannot time out, and a
pending non-blocking collective cannot be cancelled, so one dead rank would
hang every other rank. This backend builds each collective from non-blocking
point-to-point messages instead (see :mod:`rankscribe.ranks.backends._message` for their
format) and polls them with ``Test`` until they complete or the deadline
passes; then it cancels the receives still pending and reports who is missing.

- gather: every rank sends its encoded object to the root, which receives from
  all ranks at once.
- bcast: the root sends its encoded object to every rank (linear, which is
  fine for the small objects and world sizes this package serves).
- barrier: every rank reports its arrival to rank 0; rank 0 answers each with
  the list of ranks that did not arrive in time, so every rank raises the same
  :class:`BarrierTimeoutError`. Ranks other than 0 wait up to
  :data:`RELEASE_GRACE` seconds past their own timeout for that answer.

Messages travel on a private duplicate of ``COMM_WORLD`` (made with the
non-blocking ``Idup``), so they never mix with the program's own MPI traffic,
and carry a tag derived from the collective's sequence number, so a rank that
arrives late to one collective cannot feed its object into the next one.

What happens to a rank that never arrives: the root returns (or raises) at its
deadline. The job itself ends only when every process ends, because
``MPI_Finalize`` waits for all ranks (MPICH); a rank that dies without
finalising makes ``mpiexec`` (Hydra) kill the whole job, and a rank whose program
ends on an uncaught exception aborts it (``coordination/_exits.py``). A late sender's
unmatched messages are abandoned (MPI cannot cancel a send that is under way)
and MPICH may report them at finalisation.

mpi4py is imported only when this backend is created
(:func:`rankscribe.ranks.detection._mpi_loader.load_mpi`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from rankscribe.ranks.backends._message import (
    DEFAULT_CHUNK_BYTES,
    HEADER_SIZE,
    Header,
    Operation,
    chunk_spans,
)
from rankscribe.ranks.coordination._coordinator import DEFAULT_TIMEOUT, Coordinator, GatherResult
from rankscribe.ranks.coordination._deadline import Backoff, Deadline
from rankscribe.ranks.coordination._exits import abort_on_uncaught_exception
from rankscribe.ranks.detection import _mpi_loader
from rankscribe.ranks.detection._info import RankInfo, detect
from rankscribe.ranks.detection._mpi_loader import INSTALL_MPI
from rankscribe.ranks.errors import (
    BackendUnavailableError,
    BarrierTimeoutError,
    CollectiveTimeoutError,
    MessageError,
    RanksValueError,
)

__all__ = ["RELEASE_GRACE", "MpiCoordinator"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Extra seconds a rank other than 0 waits for rank 0's verdict on a barrier.
RELEASE_GRACE = 1.0
# The MPI standard guarantees tags up to 32767 (MPI_TAG_UB may be larger).
_TAG_SPAN = 32767
# Cancelling a receive that has not matched completes at once; one that is
# already receiving cannot be cancelled and is abandoned after this long.
_CANCEL_GRACE = 0.5
# A collective's caller waits for it (the open and the end of training, on the training
# thread): polls from 0.1 ms, doubling to at most 2 ms, so a rank that arrived is seen
# within 2 ms; a long wait for a late rank costs a few hundred polls a second.
_COLLECTIVE_POLL = (0.0001, 0.002)


class _Inbound:
    """One message being received from ``source``: the header first, then its chunks."""

    def __init__(
        self, mpi: Any, comm: Any, source: int, tag: int, operation: Operation, sequence: int
    ) -> None:
        self.mpi, self.comm, self.source, self.tag = mpi, comm, source, tag
        self.operation, self.sequence = operation, sequence
        self.header = bytearray(HEADER_SIZE)
        self.payload: bytearray | None = None
        self.requests: list[Any] = [comm.Irecv([self.header, mpi.BYTE], source=source, tag=tag)]
        self.done = False

    def poll(self) -> bool:
        """Advance; True when something completed (a header or the whole message)."""
        if self.payload is None:
            if not self.requests[0].Test():
                return False
            header = Header.unpack(self.header, self.source)
            header.expect(self.operation, self.sequence, self.source)
            self.payload = bytearray(header.size)
            view = memoryview(self.payload)
            self.requests = [
                self.comm.Irecv([view[start:stop], self.mpi.BYTE], source=self.source, tag=self.tag)
                for start, stop in chunk_spans(header.size, header.chunk_size)
            ]
        if self.mpi.Request.Testall(self.requests):
            self.done = True
        return True


class _Outbound:
    """One message being sent to ``dest``: header and all chunks posted at once."""

    def __init__(
        self, mpi: Any, comm: Any, dest: int, tag: int, header: Header, payload: bytes | bytearray
    ) -> None:
        self.mpi = mpi
        self.dest = dest
        view = memoryview(payload)
        self.requests: list[Any] = [comm.Isend([header.pack(), mpi.BYTE], dest=dest, tag=tag)]
        self.requests += [
            comm.Isend([view[start:stop], mpi.BYTE], dest=dest, tag=tag)
            for start, stop in chunk_spans(len(payload), header.chunk_size)
        ]
        self.done = False

    def poll(self) -> bool:
        if self.mpi.Request.Testall(self.requests):
            self.done = True
        return self.done


_Channel = _Inbound | _Outbound


class MpiCoordinator(Coordinator):
    """Collectives over MPI ``COMM_WORLD`` (or ``comm``), each bounded by a timeout.

    ``info`` defaults to :func:`~rankscribe.ranks.detect` and must agree with
    the communicator. Creating the coordinator is itself collective (it
    duplicates the communicator) and waits at most ``timeout`` seconds.
    ``chunk_size`` caps the bytes of one MPI message (1 GiB by default, under
    MPI's 2 GiB count limit).
    """

    backend = "mpi"

    def __init__(
        self,
        info: RankInfo | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        comm: Any = None,
        chunk_size: int = DEFAULT_CHUNK_BYTES,
    ) -> None:
        super().__init__(info if info is not None else detect(), timeout=timeout)
        chunk_spans(0, chunk_size)  # validates chunk_size
        self.chunk_size = chunk_size
        self._mpi = _mpi_loader.load_mpi()
        base = comm if comm is not None else self._mpi.COMM_WORLD
        self._check_agrees(base)
        self._comm = self._duplicate(base)
        # Requests MPI could not cancel; kept so their buffers outlive them.
        self._abandoned: list[Any] = []
        if self.world_size > 1:
            # A rank whose program raises would wait in MPI_Finalize for ranks that wait
            # for it: the job aborts instead (coordination/_exits.py).
            abort_on_uncaught_exception(self._mpi)

    def close(self) -> None:
        if not self._closed and not self._abandoned and not self._mpi.Is_finalized():
            self._comm.Free()
        super().close()

    def _check_agrees(self, comm: Any) -> None:
        rank, size = comm.Get_rank(), comm.Get_size()
        if (rank, size) == (self.rank, self.world_size):
            return
        if size == 1 and self.world_size > 1:
            # Every rank started MPI alone: the launcher is not one this MPI library
            # understands (a distribution's mpiexec beside MPICH from PyPI, or the
            # reverse), so each process is a world of one.
            raise BackendUnavailableError(
                f"this process is rank {self.rank} of {self.world_size} for the launcher "
                f"({self.info.launcher}) but a world of 1 for the MPI library mpi4py loaded "
                f"({_library(self._mpi)}): that mpiexec belongs to another MPI installation. "
                f"{INSTALL_MPI}"
            )
        raise RanksValueError(
            f"the MPI communicator says rank {rank} of {size} but info says rank "
            f"{self.rank} of {self.world_size} (launcher {self.info.launcher}); start the "
            "job with mpiexec, or use backend='file' for launchers without MPI"
        )

    def _duplicate(self, comm: Any) -> Any:
        duplicate, request = comm.Idup()
        deadline = Deadline(self.timeout)
        backoff = Backoff()
        while not request.Test():
            if deadline.expired():
                raise CollectiveTimeoutError(
                    "creating the MPI coordinator",
                    self.timeout,
                    (),
                    "not every rank created its coordinator (MPI Idup did not complete)",
                )
            backoff.sleep(deadline)
        return duplicate

    # -- collectives -----------------------------------------------------------------

    def _gather(self, obj: T, root: int, deadline: Deadline, sequence: int) -> GatherResult[T]:
        tag = self._tag(sequence)
        if self.rank != root:
            payload = self._dumps(obj, "gather")
            outbound = self._outbound(root, tag, Operation.GATHER, sequence, payload)
            self._exchange([outbound], deadline)
            if not outbound.done:
                logger.warning(
                    "gather #%d: root rank %d did not take this rank's object within %g s",
                    sequence,
                    root,
                    deadline.seconds,
                )
            return GatherResult(root=root, rank=self.rank, world_size=self.world_size)
        inbound = {
            source: self._inbound(source, tag, Operation.GATHER, sequence)
            for source in range(self.world_size)
            if source != root
        }
        self._exchange(inbound.values(), deadline)
        values: dict[int, T] = {root: obj}
        for source, channel in inbound.items():
            if channel.done and channel.payload is not None:
                try:
                    values[source] = self._loads(channel.payload, "gather", source)
                except MessageError as error:
                    logger.error(
                        "gather #%d: rank %d counts as missing: %s", sequence, source, error
                    )
        missing = tuple(rank for rank in range(self.world_size) if rank not in values)
        if missing:
            logger.warning(
                "gather #%d: no object from rank(s) %s within %g s; returning the %d that arrived",
                sequence,
                ", ".join(map(str, missing)),
                deadline.seconds,
                len(values),
            )
        return GatherResult(
            root=root, rank=self.rank, world_size=self.world_size, values=values, missing=missing
        )

    def _bcast(self, obj: T, root: int, deadline: Deadline, sequence: int) -> T:
        tag = self._tag(sequence)
        if self.rank == root:
            payload = self._dumps(obj, "bcast")
            outbound = [
                self._outbound(dest, tag, Operation.BCAST, sequence, payload)
                for dest in range(self.world_size)
                if dest != root
            ]
            self._exchange(outbound, deadline)
            unreached = [channel.dest for channel in outbound if not channel.done]
            if unreached:
                logger.warning(
                    "bcast #%d: rank(s) %s did not take the object within %g s",
                    sequence,
                    ", ".join(map(str, unreached)),
                    deadline.seconds,
                )
            return obj
        inbound = self._inbound(root, tag, Operation.BCAST, sequence)
        self._exchange([inbound], deadline)
        if not inbound.done or inbound.payload is None:
            raise CollectiveTimeoutError(
                f"bcast #{sequence}", deadline.seconds, (root,), f"nothing arrived from root {root}"
            )
        value: T = self._loads(inbound.payload, "bcast", root)
        return value

    def _barrier(self, deadline: Deadline, sequence: int) -> None:
        tag = self._tag(sequence)
        if self.rank == 0:
            self._release_barrier(deadline, sequence, tag)
            return
        arrival = self._outbound(0, tag, Operation.BARRIER_ARRIVAL, sequence, b"")
        release = self._inbound(0, tag, Operation.BARRIER_RELEASE, sequence)
        self._exchange([arrival, release], deadline.extended(RELEASE_GRACE))
        if not release.done or release.payload is None:
            raise BarrierTimeoutError(
                f"barrier #{sequence}",
                deadline.seconds,
                (0,),
                "rank 0 did not release it (rank 0 names the ranks that did not arrive)",
            )
        missing = self._loads(release.payload, "barrier", 0)
        if not (isinstance(missing, tuple) and all(isinstance(r, int) for r in missing)):
            raise MessageError(
                f"barrier #{sequence}: rank 0's verdict {missing!r:.100} is not a tuple of ranks"
            )
        if missing:
            raise BarrierTimeoutError(
                f"barrier #{sequence}",
                deadline.seconds,
                missing,
                "rank 0 reports ranks that did not arrive",
            )

    def _release_barrier(self, deadline: Deadline, sequence: int, tag: int) -> None:
        arrivals = {
            source: self._inbound(source, tag, Operation.BARRIER_ARRIVAL, sequence)
            for source in range(1, self.world_size)
        }
        self._exchange(arrivals.values(), deadline)
        missing = tuple(source for source, channel in arrivals.items() if not channel.done)
        verdict = self._dumps(missing, "barrier")
        releases = [
            self._outbound(source, tag, Operation.BARRIER_RELEASE, sequence, verdict)
            for source, channel in arrivals.items()
            if channel.done
        ]
        self._exchange(releases, Deadline(RELEASE_GRACE))
        if missing:
            raise BarrierTimeoutError(
                f"barrier #{sequence}", deadline.seconds, missing, "ranks did not arrive"
            )

    # -- messages --------------------------------------------------------------------

    def _tag(self, sequence: int) -> int:
        return sequence % _TAG_SPAN

    def _inbound(self, source: int, tag: int, operation: Operation, sequence: int) -> _Inbound:
        return _Inbound(self._mpi, self._comm, source, tag, operation, sequence)

    def _outbound(
        self, dest: int, tag: int, operation: Operation, sequence: int, payload: bytes | bytearray
    ) -> _Outbound:
        header = Header(operation, sequence, len(payload), self.chunk_size)
        return _Outbound(self._mpi, self._comm, dest, tag, header, payload)

    def _exchange(self, channels: Iterable[_Channel], deadline: Deadline) -> None:
        """Poll ``channels`` until all are done or ``deadline`` passes; then drop the rest."""
        pending = list(channels)
        backoff = Backoff(*_COLLECTIVE_POLL)
        try:
            while pending:
                progressed = [channel.poll() for channel in pending]
                pending = [channel for channel in pending if not channel.done]
                if not pending or deadline.expired():
                    break
                if any(progressed):
                    backoff.reset()
                else:
                    backoff.sleep(deadline)
        finally:
            self._drop([channel for channel in pending if not channel.done])

    def _drop(self, channels: Sequence[_Channel]) -> None:
        """Cancel unfinished receives; abandon, but keep alive, what cannot be cancelled.

        MPI cannot take back a send that is under way (and MPI 4 deprecates
        cancelling sends), so unfinished sends are abandoned at once.
        """
        null = self._mpi.REQUEST_NULL
        cancelled: list[Any] = []
        for channel in channels:
            live = [request for request in channel.requests if request != null]
            if isinstance(channel, _Outbound):
                self._abandoned += live
                continue
            for request in live:
                request.Cancel()
            cancelled += live
        deadline = Deadline(_CANCEL_GRACE)
        backoff = Backoff()
        while cancelled and not deadline.expired():
            cancelled = [request for request in cancelled if not request.Test()]
            if cancelled:
                backoff.sleep(deadline)
        if cancelled:
            logger.debug("abandoning %d receive(s) already under way", len(cancelled))
        self._abandoned += cancelled


def _library(mpi: Any) -> str:
    """The first line of the MPI library's version string (``MPICH Version: 5.0.2``)."""
    try:
        version = str(mpi.Get_library_version())
    except Exception:  # only words for a message; MPI may not offer the call
        return "version unknown"
    lines = [line.strip() for line in version.splitlines() if line.strip()]
    return " ".join(lines[0].split()) if lines else "version unknown"
