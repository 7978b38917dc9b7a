"""The file backend: collectives through a rendezvous folder on a shared filesystem.

For launchers without MPI (torchrun, plain Slurm, several processes started by
hand) every rank needs only a folder that all of them see. Layout::

    <rendezvous_dir>/            0700, used by one job only
      members.json               rank -> host, pid, world size (under members.json.lock)
      000001.gather/rank_1.pickle    one file per rank, written by that rank
      000002.bcast/root.pickle       written by the root
      000003.barrier/rank_0          one empty marker per rank

Each collective has its own sub-folder named by its sequence number (the same
on every rank, as every rank calls every collective in the same order) and its
kind; a rank that finds another kind under the same number raises
:class:`CollectiveMismatchError`. Files appear atomically: written to a
temporary name in the same folder and renamed with ``os.replace``, so a reader
sees a whole file or none. Waiting is polling for files against a deadline.

Files are kept after the job, so what each rank contributed stays on disk for
a merge after the fact (e.g. after rank 0 crashed).

The folder must belong to one job: a rank that finds its rank already
registered in ``members.json`` by another process raises
:class:`RendezvousError`. ``members.json`` is read and rewritten under a
``filelock`` lock because every rank updates it. Objects are exchanged as
pickles, so the folder must be writable by the job's user only (it is created
0700).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import filelock

from rankscribe.ranks._coordinator import DEFAULT_TIMEOUT, Coordinator, GatherResult
from rankscribe.ranks._deadline import Backoff, Deadline
from rankscribe.ranks._info import RankInfo
from rankscribe.ranks._layout import DIRECTORY_MODE
from rankscribe.ranks.errors import (
    BarrierTimeoutError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    RanksTypeError,
    RendezvousError,
)

__all__ = ["FileCoordinator"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_FILE_MODE = 0o600
# Polls of a (possibly network) filesystem: from 1 ms up to 50 ms apart.
_SHORTEST_POLL = 0.001
_LONGEST_POLL = 0.05


class FileCoordinator(Coordinator):
    """Collectives through files in ``rendezvous_dir``, each bounded by a timeout.

    gather: ranks other than the root write their object and return at once;
    the root waits for the files. bcast: the root writes, the others wait.
    barrier: every rank writes a marker and waits for all markers, so on a
    timeout every rank's :class:`BarrierTimeoutError` names the absent ranks.
    """

    backend = "file"
    #: Appended to the message that says the ranks may not share the folder.
    sharing_advice: ClassVar[str] = ""

    def __init__(
        self,
        info: RankInfo,
        rendezvous_dir: str | os.PathLike[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(info, timeout=timeout)
        if not isinstance(rendezvous_dir, (str, os.PathLike)):
            raise RanksTypeError(
                "rendezvous_dir must be a str or os.PathLike, "
                f"got {type(rendezvous_dir).__name__}"
            )
        self.directory = Path(rendezvous_dir)
        self.directory.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        self._register()

    # -- collectives -----------------------------------------------------------------

    def _gather(self, obj: T, root: int, deadline: Deadline, sequence: int) -> GatherResult[T]:
        folder = self._enter("gather", sequence)
        if self.rank != root:
            _write_atomically(folder / f"rank_{self.rank}.pickle", self._dumps(obj, "gather"))
            return GatherResult(root=root, rank=self.rank, world_size=self.world_size)
        others = {r: folder / f"rank_{r}.pickle" for r in range(self.world_size) if r != root}
        arrived = self._wait_for(others, deadline)
        values: dict[int, T] = {root: obj}
        for source in arrived:
            try:
                values[source] = pickle.loads(others[source].read_bytes())
            except Exception:
                logger.exception(
                    "gather #%d: the object from rank %d cannot be read", sequence, source
                )
        missing = tuple(rank for rank in range(self.world_size) if rank not in values)
        if missing:
            logger.warning(
                "gather #%d: no object from rank(s) %s within %g s in %s%s",
                sequence, ", ".join(map(str, missing)), deadline.seconds, folder,
                self._absence_detail(missing),
            )
        return GatherResult(
            root=root, rank=self.rank, world_size=self.world_size, values=values, missing=missing
        )

    def _bcast(self, obj: T, root: int, deadline: Deadline, sequence: int) -> T:
        folder = self._enter("bcast", sequence)
        path = folder / "root.pickle"
        if self.rank == root:
            _write_atomically(path, self._dumps(obj, "bcast"))
            return obj
        if not self._wait_for({root: path}, deadline):
            raise CollectiveTimeoutError(
                f"bcast #{sequence}", deadline.seconds, (root,),
                f"root {root} wrote nothing to {folder}{self._absence_detail((root,))}",
            )
        value: T = pickle.loads(path.read_bytes())
        return value

    def _barrier(self, deadline: Deadline, sequence: int) -> None:
        folder = self._enter("barrier", sequence)
        _write_atomically(folder / f"rank_{self.rank}", b"")
        markers = {r: folder / f"rank_{r}" for r in range(self.world_size) if r != self.rank}
        arrived = self._wait_for(markers, deadline)
        missing = tuple(sorted(set(markers) - set(arrived)))
        if missing:
            raise BarrierTimeoutError(
                f"barrier #{sequence}", deadline.seconds, missing,
                f"no marker in {folder}{self._absence_detail(missing)}",
            )

    # -- files -----------------------------------------------------------------------

    def _absence_detail(self, missing: Sequence[int]) -> str:
        """Why ``missing`` may be absent: a rank that never joined may not see this folder."""
        try:
            members = _read_members(self.directory / "members.json")
        except (OSError, RendezvousError):
            return ""
        never = [str(rank) for rank in missing if str(rank) not in members]
        if not never:
            return ""
        return (
            f"; rank(s) {', '.join(never)} never joined {self.directory}: the ranks may not "
            f"share its filesystem{self.sharing_advice}"
        )

    def _enter(self, kind: str, sequence: int) -> Path:
        """The folder of collective ``sequence``; raise if another rank is in another kind."""
        prefix = f"{sequence:06d}."
        folder = self.directory / f"{prefix}{kind}"
        folder.mkdir(mode=DIRECTORY_MODE, exist_ok=True)
        others = [p.name for p in self.directory.glob(f"{prefix}*") if p.name != folder.name]
        if others:
            raise CollectiveMismatchError(
                f"rank {self.rank} is in {kind} #{sequence} but {self.directory} also holds "
                f"{', '.join(sorted(others))}: every rank must call every collective in the "
                "same order"
            )
        return folder

    def _wait_for(self, paths: dict[int, Path], deadline: Deadline) -> list[int]:
        """Poll until every path exists or ``deadline`` passes; return the ranks whose file did."""
        waiting = dict(paths)
        arrived: list[int] = []
        backoff = Backoff(_SHORTEST_POLL, _LONGEST_POLL)
        while True:
            found = [rank for rank, path in waiting.items() if path.exists()]
            for rank in found:
                arrived.append(rank)
                del waiting[rank]
            if not waiting or deadline.expired():
                return sorted(arrived)
            if found:
                backoff.reset()
            backoff.sleep(deadline)

    def _register(self) -> None:
        """Add this rank to ``members.json``; refuse a folder another job used."""
        members_path = self.directory / "members.json"
        me = {"host": self.info.host, "pid": os.getpid(), "world_size": self.world_size}
        lock = filelock.FileLock(str(members_path) + ".lock", timeout=self.timeout)
        try:
            with lock:
                members = _read_members(members_path)
                self._check_members(members, me)
                members[str(self.rank)] = me
                text = json.dumps(members, indent=1, sort_keys=True)
                _write_atomically(members_path, text.encode())
        except filelock.Timeout as error:
            raise RendezvousError(
                f"could not lock {lock.lock_file} within {self.timeout:g} s"
            ) from error

    def _check_members(self, members: dict[str, Any], me: dict[str, Any]) -> None:
        previous = members.get(str(self.rank))
        if previous is not None:
            raise RendezvousError(
                f"{self.directory} was already used: rank {self.rank} is registered there by "
                f"pid {previous.get('pid')} on {previous.get('host')}; give each job (and each "
                "coordinator) a new rendezvous_dir"
            )
        for rank, member in members.items():
            if member.get("world_size") != me["world_size"]:
                raise RendezvousError(
                    f"{self.directory}: rank {rank} joined with world_size "
                    f"{member.get('world_size')} but rank {self.rank} has world_size "
                    f"{me['world_size']}; the ranks disagree about the job, or the folder "
                    "was used by another job"
                )


def _read_members(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        members = json.loads(path.read_text())
    except ValueError as error:
        raise RendezvousError(f"{path} is not the JSON this package writes: {error}") from error
    if not isinstance(members, dict):
        raise RendezvousError(f"{path} holds {type(members).__name__}, expected an object")
    return members


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see all of it or nothing (0600)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
