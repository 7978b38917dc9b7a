"""Who am I: the rank of this process, found without a communicator.

:func:`detect` reads the variables the launchers export, from the one table of
them in :mod:`rankscribe.ranks.launchers` and in its order (the first launcher
whose rank variable is set wins); where none is set, it asks what the program
itself already initialised:

========== ===================================================================
launcher   source
========== ===================================================================
openmpi,   the launcher's variables (``rankscribe.ranks.launchers.LAUNCHERS``);
pmi, pmix, a PMIx launch that exports no world size takes it from MPI COMM_WORLD
torchrun,  (PMIx keeps it on its server)
slurm
mpi        MPI COMM_WORLD, only when mpi4py is already imported and initialised
torch      torch.distributed's default process group, only when torch is already
           imported and the group initialised (torch itself is never imported)
single     nothing of the above: rank 0 of 1
========== ===================================================================

When a launcher exports no local rank or local size, the job is taken to run
on one node (``local_rank = rank``, ``local_size = world_size``).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rankscribe.ranks._args import check_int, check_world_size
from rankscribe.ranks.detection import _mpi_loader
from rankscribe.ranks.detection._launchers import (
    JOB_ID_ENV,
    LAUNCHERS,
    SLURM_TASKS_PER_NODE_VARIABLES,
    LauncherVariables,
)
from rankscribe.ranks.detection._torch_group import default_group_rank, initialised_distributed
from rankscribe.ranks.errors import (
    BackendUnavailableError,
    RankEnvironmentError,
    RanksTypeError,
    RanksValueError,
)

__all__ = [
    "JOB_ID_ENV",
    "MPI_LAUNCHERS",
    "Launcher",
    "RankInfo",
    "check_info",
    "detect",
]

logger = logging.getLogger(__name__)

Launcher = Literal["openmpi", "pmi", "pmix", "torchrun", "slurm", "mpi", "torch", "single"]

_LAUNCHERS = ("openmpi", "pmi", "pmix", "torchrun", "slurm", "mpi", "torch", "single")

#: Launchers whose processes share an MPI ``COMM_WORLD``.
MPI_LAUNCHERS: frozenset[str] = frozenset({"openmpi", "pmi", "pmix", "mpi"})


@dataclass(frozen=True)
class RankInfo:
    """Where this process sits in the job.

    ``rank`` is in ``range(world_size)``, ``local_rank`` in ``range(local_size)``
    and counts the processes of this job on this host; ``launcher`` names the
    source the numbers came from (see :func:`detect`).
    """

    rank: int
    world_size: int
    local_rank: int
    local_size: int
    host: str
    launcher: Launcher

    def __post_init__(self) -> None:
        check_int("rank", self.rank, minimum=0)
        check_world_size("world_size", self.world_size)
        check_int("local_rank", self.local_rank, minimum=0)
        check_world_size("local_size", self.local_size)
        if not isinstance(self.host, str):
            raise RanksTypeError(f"host must be a str, got {type(self.host).__name__}")
        if self.launcher not in _LAUNCHERS:
            raise RanksValueError(
                f"launcher must be one of {', '.join(_LAUNCHERS)}; got {self.launcher!r}"
            )
        if not 0 <= self.rank < self.world_size:
            raise RanksValueError(
                f"rank must be in range(world_size) = range({self.world_size}), got {self.rank}"
            )
        if not 0 <= self.local_rank < self.local_size <= self.world_size:
            raise RanksValueError(
                "expected 0 <= local_rank < local_size <= world_size, got local_rank="
                f"{self.local_rank}, local_size={self.local_size}, world_size={self.world_size}"
            )

    @property
    def is_single(self) -> bool:
        """True when the job is this one process."""
        return self.world_size == 1


_NON_NEGATIVE = "a non-negative integer such as 0 or 3"
_POSITIVE = "a positive integer such as 1 or 4"


def check_info(name: str, value: object) -> RankInfo:
    """``value`` if it is a :class:`RankInfo`, else a :class:`RanksTypeError` naming ``name``."""
    if not isinstance(value, RankInfo):
        raise RanksTypeError(
            f"{name} must be a RankInfo (from detect()), got {type(value).__name__}"
        )
    return value


def detect(environ: Mapping[str, str] | None = None) -> RankInfo:
    """Return this process's :class:`RankInfo`, read from the launcher's environment.

    ``environ`` defaults to ``os.environ``. Needs no communicator and never
    imports mpi4py, except for a PMIx launch that exports no world size, where
    MPI ``COMM_WORLD`` is the only source of it.

    Raises :class:`RankEnvironmentError` (a ``ValueError``) when a variable is
    not an integer, is negative, or contradicts another one (rank >= size).
    """
    if environ is not None and not isinstance(environ, Mapping):
        raise RanksTypeError(
            f"environ must be a mapping of variable names to values, got {type(environ).__name__}"
        )
    env = os.environ if environ is None else environ
    host = socket.gethostname()
    for names in LAUNCHERS:
        if names.rank not in env or (names.size_required and names.size not in env):
            continue
        if names.launcher == "pmix":
            return _from_pmix(env, names, host)
        return _from_variables(env, names, host)
    return (
        _from_initialised_mpi(host)
        or _from_initialised_torch(host)
        or RankInfo(0, 1, 0, 1, host, "single")
    )


def _from_variables(
    env: Mapping[str, str], names: LauncherVariables, host: str, world_size: int | None = None
) -> RankInfo:
    rank = _integer(env, names.rank, minimum=0)
    size = world_size if world_size is not None else _integer(env, names.size, minimum=1)
    _check_below(names.rank, rank, names.size, size)
    local_rank, local_size = _local(env, names, rank, size)
    return RankInfo(rank, size, local_rank, local_size, host, names.launcher)


def _from_pmix(env: Mapping[str, str], names: LauncherVariables, host: str) -> RankInfo:
    if names.size in env:
        return _from_variables(env, names, host)
    world_size = _mpi_world_size()
    if world_size is None:
        raise RankEnvironmentError(
            names.size,
            None,
            "a world size next to PMIX_RANK: PMIx keeps it on its server, so either "
            "srun must export SLURM_NTASKS or mpi4py must be able to load an MPI library",
        )
    return _from_variables(env, names, host, world_size=world_size)


def _local(
    env: Mapping[str, str], names: LauncherVariables, rank: int, size: int
) -> tuple[int, int]:
    """Local rank and size, or the one-node assumption when the launcher gives none."""
    if names.local_rank not in env:
        logger.debug("%s is not set: assuming one node", names.local_rank)
        return rank, size
    local_rank = _integer(env, names.local_rank, minimum=0)
    if names.local_size is None:
        local_size, local_size_name = _slurm_local_size(env)
    elif names.local_size in env:
        local_size_name = names.local_size
        local_size = _integer(env, names.local_size, minimum=1)
    else:
        local_size, local_size_name = None, names.local_size
    if local_size is None:
        _check_below(names.local_rank, local_rank, names.size, size)
        return local_rank, size
    _check_below(names.local_rank, local_rank, local_size_name, local_size)
    if local_size > size:
        raise RankEnvironmentError(
            local_size_name, env[local_size_name], f"at most {names.size}={size}"
        )
    return local_rank, local_size


_TASKS_PER_NODE = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def _slurm_local_size(env: Mapping[str, str]) -> tuple[int | None, str]:
    """Tasks on this node from Slurm's compressed list (e.g. ``2(x3),1``) and SLURM_NODEID."""
    for name in SLURM_TASKS_PER_NODE_VARIABLES:
        if name in env:
            break
    else:
        return None, SLURM_TASKS_PER_NODE_VARIABLES[-1]
    if "SLURM_NODEID" not in env:
        return None, name
    counts: list[int] = []
    for part in env[name].split(","):
        match = _TASKS_PER_NODE.match(part.strip())
        if match is None:
            raise RankEnvironmentError(name, env[name], "a list like '2(x3),1'")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    node = _integer(env, "SLURM_NODEID", minimum=0)
    _check_below("SLURM_NODEID", node, f"the number of nodes in {name}", len(counts))
    return counts[node], name


def _from_initialised_mpi(host: str) -> RankInfo | None:
    """COMM_WORLD's numbers, only if the program itself already initialised MPI.

    A world of one says nothing about the job: a library that only probes for
    MPI (Lightning does, at import) initialises a singleton MPI in every
    process of a job it launched itself; torch's process group, checked next,
    knows the job.
    """
    mpi: Any = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return None
    rank, size = int(mpi.COMM_WORLD.Get_rank()), int(mpi.COMM_WORLD.Get_size())
    if size == 1:
        return None
    return RankInfo(rank, size, rank, size, host, "mpi")


def _from_initialised_torch(host: str) -> RankInfo | None:
    """The default process group's numbers, only if the program already initialised it.

    Covers ranks started without launcher variables (``torch.multiprocessing.spawn``
    with an explicit ``init_process_group(rank=..., world_size=...)``).
    """
    distributed = initialised_distributed()
    if distributed is None:
        return None
    rank, size = default_group_rank(distributed)
    return RankInfo(rank, size, rank, size, host, "torch")


def _mpi_world_size() -> int | None:
    try:
        mpi = _mpi_loader.load_mpi()
    except BackendUnavailableError:
        return None
    return int(mpi.COMM_WORLD.Get_size())


def _integer(env: Mapping[str, str], name: str, minimum: int) -> int:
    raw = env.get(name)
    expected = _NON_NEGATIVE if minimum == 0 else _POSITIVE
    if raw is None:
        raise RankEnvironmentError(name, None, expected)
    text = raw.strip()
    if not text.isdigit() or not text.isascii():
        raise RankEnvironmentError(name, raw, expected)
    value = int(text)
    if value < minimum:
        raise RankEnvironmentError(name, raw, expected)
    return value


def _check_below(name: str, value: int, limit_name: str, limit: int) -> None:
    if value >= limit:
        raise RankEnvironmentError(
            name, str(value), f"a value below {limit_name}={limit} (0 <= {name} < {limit_name})"
        )
