"""The file backend: collectives through a rendezvous folder on a shared filesystem.

For launchers without MPI (torchrun, plain Slurm, several processes started by
hand) every rank needs only a folder that all of them see. Layout::

    <rendezvous_dir>/            this user's, writable by nobody else, one job's only
      members.json               rank -> host, pid, world size, launch (under members.json.lock)
      000001.gather/rank_1.msg   one file per rank, written by that rank
      000002.bcast/root.msg      written by the root
      000003.barrier/rank_0      one empty marker per rank

Each collective has its own sub-folder named by its sequence number (the same
on every rank, as every rank calls every collective in the same order) and its
kind; a rank that finds another kind under the same number raises
:class:`CollectiveMismatchError`. Files appear atomically (the writer's
``atomic_write``: a temporary name in the same folder, fsynced, renamed), so a
reader sees a whole file or none. Waiting is polling for files against a deadline.

Files are kept after the job, so what each rank contributed stays on disk for
a merge after the fact (e.g. after rank 0 crashed).

Who may write here (``docs/layout.md``): the folder must belong to this user and
be writable by nobody else, or it is refused (:mod:`._folders`); messages are
data (:mod:`rankscribe.ranks.messages._codec`), never pickles, and a file that is not a
regular file of this user's, or not a valid message, is not read. The folder
must belong to one job: a rank that finds its rank already registered in
``members.json``, or a member of another launch, raises :class:`RendezvousError`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from rankscribe.ranks._args import check_path
from rankscribe.ranks.backends._folders import (
    MESSAGE_LIMIT,
    check_folder,
    lock,
    private_folder,
    read_private_file,
    write_private_file,
)
from rankscribe.ranks.coordination._coordinator import DEFAULT_TIMEOUT, Coordinator, GatherResult
from rankscribe.ranks.coordination._deadline import Backoff, Deadline
from rankscribe.ranks.detection._info import RankInfo
from rankscribe.ranks.detection._launchers import launch_name
from rankscribe.ranks.errors import (
    BarrierTimeoutError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    LockTimeoutError,
    MessageError,
    RendezvousError,
)
from rankscribe.ranks.layout._rank_dir import DIRECTORY_MODE
from rankscribe.ranks.messages._jsondata import parse_json

__all__ = ["FileCoordinator", "read_members"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_MESSAGE_SUFFIX = ".msg"
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
    #: What a refused folder's error suggests.
    _folder_advice: ClassVar[str] = "pass rendezvous_dir=<a new folder of your own>"

    def __init__(
        self,
        info: RankInfo,
        rendezvous_dir: str | os.PathLike[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(info, timeout=timeout)
        self.directory = private_folder(
            check_path("rendezvous_dir", rendezvous_dir),
            "rendezvous_dir",
            follow_link=True,
            advice=self._folder_advice,
        )
        self.launch = launch_name(os.environ)
        self._register()

    # -- collectives -----------------------------------------------------------------

    def _gather(self, obj: T, root: int, deadline: Deadline, sequence: int) -> GatherResult[T]:
        folder = self._enter("gather", sequence)
        if self.rank != root:
            write_private_file(folder / _message_name(self.rank), self._dumps(obj, "gather"))
            return GatherResult(root=root, rank=self.rank, world_size=self.world_size)
        others = {r: folder / _message_name(r) for r in range(self.world_size) if r != root}
        arrived = self._wait_for(others, deadline)
        values: dict[int, T] = {root: obj}
        for source in arrived:
            try:
                values[source] = self._read(others[source], "gather", source)
            except MessageError as error:
                logger.error("gather #%d: rank %d counts as missing: %s", sequence, source, error)
        missing = tuple(rank for rank in range(self.world_size) if rank not in values)
        if missing:
            logger.warning(
                "gather #%d: no object from rank(s) %s within %g s in %s%s",
                sequence,
                ", ".join(map(str, missing)),
                deadline.seconds,
                folder,
                self._absence_detail(missing),
            )
        return GatherResult(
            root=root, rank=self.rank, world_size=self.world_size, values=values, missing=missing
        )

    def _bcast(self, obj: T, root: int, deadline: Deadline, sequence: int) -> T:
        folder = self._enter("bcast", sequence)
        path = folder / f"root{_MESSAGE_SUFFIX}"
        if self.rank == root:
            write_private_file(path, self._dumps(obj, "bcast"))
            return obj
        if not self._wait_for({root: path}, deadline):
            raise CollectiveTimeoutError(
                f"bcast #{sequence}",
                deadline.seconds,
                (root,),
                f"root {root} wrote nothing to {folder}{self._absence_detail((root,))}",
            )
        value: T = self._read(path, "bcast", root)
        return value

    def _barrier(self, deadline: Deadline, sequence: int) -> None:
        folder = self._enter("barrier", sequence)
        write_private_file(folder / f"rank_{self.rank}", b"")
        markers = {r: folder / f"rank_{r}" for r in range(self.world_size) if r != self.rank}
        arrived = self._wait_for(markers, deadline)
        missing = tuple(sorted(set(markers) - set(arrived)))
        if missing:
            raise BarrierTimeoutError(
                f"barrier #{sequence}",
                deadline.seconds,
                missing,
                f"no marker in {folder}{self._absence_detail(missing)}",
            )

    # -- files -----------------------------------------------------------------------

    def _read(self, path: Path, operation: str, source: int) -> Any:
        """The object in ``path``, a message file of this user's; MessageError if not."""
        try:
            data = read_private_file(path)
        except MessageError as error:
            raise MessageError(f"{operation}: the file of rank {source}: {error}") from None
        return self._loads(data, operation, source)

    def _absence_detail(self, missing: Sequence[int]) -> str:
        """Why ``missing`` may be absent: a rank that never joined may not see this folder."""
        try:
            members = read_members(self.directory / "members.json")
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
        check_folder(
            folder, "the folder of a collective", follow_link=False, advice=self._folder_advice
        )
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
        me = {
            "host": self.info.host,
            "pid": os.getpid(),
            "world_size": self.world_size,
            "launch": self.launch,
        }
        members_lock = self.directory / "members.json.lock"
        try:
            with lock(members_lock, self.timeout):
                members = read_members(members_path)
                self._check_members(members, me)
                members[str(self.rank)] = me
                text = json.dumps(members, indent=1, sort_keys=True)
                write_private_file(members_path, text.encode())
        except LockTimeoutError as error:
            raise RendezvousError(
                f"could not lock {members_lock} within {self.timeout:g} s"
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
            if member.get("launch", me["launch"]) != me["launch"]:
                raise RendezvousError(
                    f"{self.directory} belongs to another job: rank {rank} joined it from "
                    f"launch {member.get('launch')!r}, this rank is of launch "
                    f"{me['launch']!r}; give each job its own rendezvous_dir"
                )
            if member.get("world_size") != me["world_size"]:
                raise RendezvousError(
                    f"{self.directory}: rank {rank} joined with world_size "
                    f"{member.get('world_size')} but rank {self.rank} has world_size "
                    f"{me['world_size']}; the ranks disagree about the job, or the folder "
                    "was used by another job"
                )


def _message_name(rank: int) -> str:
    # Not ".pickle": files an older version left (or anyone planted) under that name
    # are never read.
    return f"rank_{rank}{_MESSAGE_SUFFIX}"


def read_members(path: Path) -> dict[str, Any]:
    """``members.json`` (empty when absent); :class:`RendezvousError` if it is not ours."""
    if not os.path.lexists(path):
        return {}
    try:
        members = parse_json(read_private_file(path), what=str(path), max_bytes=MESSAGE_LIMIT)
    except (MessageError, ValueError) as error:
        raise RendezvousError(f"{path} is not the JSON this package writes: {error}") from error
    if not isinstance(members, dict) or not all(
        isinstance(member, dict) for member in members.values()
    ):
        raise RendezvousError(
            f"{path} holds {type(members).__name__}, expected an object of objects"
        )
    return members
