"""Choosing and creating a coordinator backend for a job.

This module sits above the backends (each subclasses
:class:`~rankscribe.ranks.coordination._coordinator.Coordinator`): creation is a function
here, so the base class never imports its own subclasses. Rules in
``docs/layout.md`` ("Collectives and their timeouts").
"""

from __future__ import annotations

import os

from rankscribe.ranks._args import check_choice, check_path, check_timeout
from rankscribe.ranks.backends._jobfolder import job_folder_coordinator
from rankscribe.ranks.backends._mpi import MpiCoordinator
from rankscribe.ranks.backends._rendezvous import FileCoordinator
from rankscribe.ranks.backends._single import SingleCoordinator
from rankscribe.ranks.backends._store import StoreCoordinator
from rankscribe.ranks.coordination._coordinator import DEFAULT_TIMEOUT, BackendName, Coordinator
from rankscribe.ranks.detection._info import MPI_LAUNCHERS, RankInfo, check_info, detect
from rankscribe.ranks.detection._torch_group import initialised_distributed
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
    """Return a coordinator for this job; every rank calls this, in the same order.

    ``info`` defaults to :func:`~rankscribe.ranks.detect`. ``backend="auto"`` picks,
    in order (:func:`choose_backend`):

    1. ``single`` for a world of one process;
    2. ``mpi`` when an MPI launcher started the job (Open MPI, MPICH/Hydra,
       Intel MPI, PMIx, or mpi4py already initialised);
    3. ``file`` in ``rendezvous_dir`` when it is given;
    4. ``store`` when the program initialised ``torch.distributed``'s default
       process group (torchrun, ``mp.spawn``): its c10d store;
    5. ``file`` in ``job_dir``'s hidden folder
       (:data:`rankscribe.ranks.files.JOB_RENDEZVOUS_DIRNAME`) for any other launcher
       (torchrun without a process group, Slurm, processes started by hand), when
       ``job_dir`` is given: a directory every rank writes under, such as the
       collector's ``summary_dir``.

    Otherwise it raises :class:`RanksValueError` asking for a ``rendezvous_dir``.
    A rendezvous folder must be one every rank sees, owned by this user and
    writable by nobody else, used by this job only (see
    :class:`~rankscribe.ranks.FileCoordinator`).
    """
    info = detect() if info is None else check_info("info", info)
    if rendezvous_dir is not None:
        check_path("rendezvous_dir", rendezvous_dir)
    if job_dir is not None:
        check_path("job_dir", job_dir)
    timeout = check_timeout("timeout", timeout)
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
    """The backend :func:`create_coordinator` makes for these arguments (see there).

    Looks at ``torch.distributed`` only when the program imported it already.
    """
    check_info("info", info)
    check_choice("backend", backend, _BACKENDS)
    if rendezvous_dir is not None:
        check_path("rendezvous_dir", rendezvous_dir)
    if job_dir is not None:
        check_path("job_dir", job_dir)
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
