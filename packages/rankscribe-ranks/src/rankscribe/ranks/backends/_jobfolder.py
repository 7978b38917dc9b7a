"""The file backend in a hidden folder of the job's directory, for launchers without MPI.

When neither an MPI launcher nor an initialised ``torch.distributed`` connects
the ranks and no ``rendezvous_dir`` was given, the ranks meet in the job's own
directory (the collector's ``summary_dir``, which every rank writes under)::

    <job_dir>/.rankscribe-rendezvous/     0700, this user's, writable by nobody else
      <launch>/                           e.g. slurm.1234.0, torchrun.none.0.host.29500,
                                          id.<RANKSCRIBE_JOB_ID>, job
        generations.lock                  0600
        000000/                           one FileCoordinator folder per coordinator
        000001/                           (a second coordinator, or a later run)

``<launch>`` names the launch where the launcher gives it a name
(:func:`~rankscribe.ranks.launchers.launch_name`: ``RANKSCRIBE_JOB_ID``, Slurm's job
and step ids, torchrun's run id and restart count, the ``MASTER_ADDR`` and
``MASTER_PORT`` torch's ranks meet at), so two jobs running at once into one
directory meet in folders of their own. Processes started by hand with nothing
that names their launch share ``job``: two such jobs started at the same moment
cannot be told apart (set ``RANKSCRIBE_JOB_ID``). A job directory is often
reused by a later run, so each coordinator takes the first numbered folder in
which its rank is free: not registered yet, every member with the same world
size, and not a folder whose members all ran on this host and have ended.
Ranks that make their coordinators in the same order therefore meet in the
same folder. The folders stay after the job, as the file backend's do.

If the ranks do not see the same files (a directory local to each host), no
rank ever arrives: the root's timeout says so and names the folder.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rankscribe.ranks._args import check_path, check_timeout
from rankscribe.ranks.backends._folders import check_folder, lock
from rankscribe.ranks.backends._rendezvous import FileCoordinator, read_members
from rankscribe.ranks.detection._info import RankInfo, check_info
from rankscribe.ranks.detection._launchers import launch_name
from rankscribe.ranks.errors import LockTimeoutError, RendezvousError
from rankscribe.ranks.files import JOB_RENDEZVOUS_DIRNAME
from rankscribe.ranks.layout._rank_dir import DIRECTORY_MODE

__all__ = ["JobFolderCoordinator", "job_folder_coordinator"]

_ADVICE = "remove it, or pass rendezvous_dir=<a folder of your own>"


class JobFolderCoordinator(FileCoordinator):
    """A :class:`FileCoordinator` in the job directory's hidden folder."""

    sharing_advice = (
        " (a directory local to each host?): pass rendezvous_dir=<a folder every rank "
        "sees>, or initialise torch.distributed before training"
    )
    _folder_advice = _ADVICE


def job_folder_coordinator(
    job_dir: str | os.PathLike[str],
    info: RankInfo,
    *,
    timeout: float,
    environ: Mapping[str, str] | None = None,
) -> JobFolderCoordinator:
    """The coordinator of ``info``'s rank in ``job_dir``'s hidden rendezvous folder."""
    job = check_path("job_dir", job_dir)
    check_info("info", info)
    seconds = check_timeout("timeout", timeout)
    launch = launch_name(os.environ if environ is None else environ)
    hidden = job / JOB_RENDEZVOUS_DIRNAME
    job.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
    base = hidden / launch
    for folder in (hidden, base):
        _private_folder(folder)
    generations = base / "generations.lock"
    try:
        with lock(generations, seconds):
            folder = _free_folder(base, info)
            return JobFolderCoordinator(info, folder, timeout=seconds)
    except LockTimeoutError as error:
        raise RendezvousError(f"could not lock {generations} within {seconds:g} s") from error


def _free_folder(base: Path, info: RankInfo) -> Path:
    """The first numbered folder under ``base`` this rank can join (made if new)."""
    index = 0
    while True:
        folder = base / f"{index:06d}"
        if not os.path.lexists(folder):
            _private_folder(folder)
            return folder
        if _joinable(folder, info):
            return folder
        index += 1


def _joinable(folder: Path, info: RankInfo) -> bool:
    if folder.is_symlink() or not folder.is_dir():
        return False
    try:
        members = read_members(folder / "members.json")
    except (OSError, RendezvousError):
        return False
    if str(info.rank) in members:
        return False
    if any(member.get("world_size") != info.world_size for member in members.values()):
        return False
    return not (members and all(_ended_here(member) for member in members.values()))


def _ended_here(member: Any) -> bool:
    """True when ``member`` ran on this host and its process is gone."""
    if not isinstance(member, dict) or member.get("host") != socket.gethostname():
        return False
    pid = member.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


def _private_folder(path: Path) -> None:
    """Make ``path`` (0700) or accept it if it is this user's own folder, not a link,
    writable by nobody else."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=DIRECTORY_MODE)
    check_folder(path, "the rendezvous folder", follow_link=False, advice=_ADVICE)
