"""Choosing and creating a coordinator backend for a job.

This module sits above the backends (each subclasses
:class:`~rankscribe.ranks._coordinator.Coordinator`), so
:meth:`Coordinator.create` reaches it at call time instead of the base class
importing its own subclasses.
"""

from __future__ import annotations

import os

from rankscribe.ranks._coordinator import DEFAULT_TIMEOUT, BackendName, Coordinator
from rankscribe.ranks._info import MPI_LAUNCHERS, RankInfo, detect
from rankscribe.ranks._jobfolder import job_folder_coordinator
from rankscribe.ranks._mpi import MpiCoordinator
from rankscribe.ranks._rendezvous import FileCoordinator
from rankscribe.ranks._single import SingleCoordinator
from rankscribe.ranks._store import StoreCoordinator
from rankscribe.ranks._torch import initialised_distributed
from rankscribe.ranks.errors import RanksValueError

__all__ = ["choose_backend", "create_coordinator"]

_BACKENDS = ("auto", "mpi", "store", "file", "single")


def create_coordinator(
    info: RankInfo | None = None,
    backend: BackendName = "auto",
    rendezvous_dir: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    job_dir: str | os.PathLike[str] | None = None,
) -> Coordinator:
    """What :meth:`Coordinator.create` returns; see there for the rules."""
    if info is None:
        info = detect()
    chosen = choose_backend(info, backend, rendezvous_dir, job_dir=job_dir)
    if chosen == "single":
        return SingleCoordinator(info, timeout=timeout)
    if chosen == "mpi":
        return MpiCoordinator(info, timeout=timeout)
    if chosen == "store":
        return StoreCoordinator(info, timeout=timeout)
    if rendezvous_dir is not None:
        return FileCoordinator(info, rendezvous_dir, timeout=timeout)
    if job_dir is not None:
        return job_folder_coordinator(job_dir, info, timeout=timeout)
    raise RanksValueError(
        "backend='file' needs rendezvous_dir: a folder on a filesystem every rank sees "
        "(or job_dir: the job's directory, which every rank writes under)"
    )


def choose_backend(
    info: RankInfo,
    backend: str = "auto",
    rendezvous_dir: str | os.PathLike[str] | None = None,
    *,
    job_dir: str | os.PathLike[str] | None = None,
) -> str:
    """The backend :meth:`Coordinator.create` makes for these arguments (see there).

    Looks at ``torch.distributed`` only when the program imported it already.
    """
    if backend not in _BACKENDS:
        raise RanksValueError(f"backend must be one of {', '.join(_BACKENDS)}; got {backend!r}")
    if backend == "single" and info.world_size != 1:
        raise RanksValueError(
            f"backend='single' needs a world of one process, but this is rank {info.rank} "
            f"of {info.world_size} (launcher {info.launcher})"
        )
    if backend != "auto":
        return backend
    if info.world_size == 1:
        return "single"
    if info.launcher in MPI_LAUNCHERS:
        return "mpi"
    if rendezvous_dir is not None:
        return "file"
    if initialised_distributed() is not None:
        return "store"
    if job_dir is not None:
        return "file"
    raise RanksValueError(
        f"this job ({info.world_size} ranks, launcher {info.launcher}) was not started by "
        "an MPI launcher: pass rendezvous_dir=<a folder every rank sees, used by this job "
        "only> (or job_dir=<the job's directory>) for the file backend, initialise "
        "torch.distributed's process group first for the store backend, or backend='mpi' "
        "if the ranks share an MPI COMM_WORLD"
    )
