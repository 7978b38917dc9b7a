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
from rankscribe.ranks._mpi import MpiCoordinator
from rankscribe.ranks._rendezvous import FileCoordinator
from rankscribe.ranks._single import SingleCoordinator
from rankscribe.ranks.errors import RanksValueError

__all__ = ["create_coordinator"]

_BACKENDS = ("auto", "mpi", "file", "single")


def create_coordinator(
    info: RankInfo | None = None,
    backend: BackendName = "auto",
    rendezvous_dir: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Coordinator:
    """What :meth:`Coordinator.create` returns; see there for the rules."""
    if info is None:
        info = detect()
    chosen = _choose_backend(info, backend, rendezvous_dir)
    if chosen == "single":
        return SingleCoordinator(info, timeout=timeout)
    if chosen == "mpi":
        return MpiCoordinator(info, timeout=timeout)
    if rendezvous_dir is None:
        raise RanksValueError(
            "backend='file' needs rendezvous_dir: a folder on a filesystem every rank sees"
        )
    return FileCoordinator(info, rendezvous_dir, timeout=timeout)


def _choose_backend(
    info: RankInfo, backend: str, rendezvous_dir: str | os.PathLike[str] | None
) -> str:
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
    raise RanksValueError(
        f"this job ({info.world_size} ranks, launcher {info.launcher}) was not started by "
        "an MPI launcher: pass rendezvous_dir=<a folder every rank sees, used by this job "
        "only> for the file backend, or backend='mpi' if the ranks share an MPI COMM_WORLD"
    )
