"""rankscribe.ranks: rank coordination for training jobs.

Which rank am I (:func:`detect`), where do I write (:func:`rank_dir`), which
share of the heavy work is mine (:func:`split_evenly`), and how do results
reach rank 0 without hanging on a dead rank (:class:`Coordinator`) — under
``mpiexec``, under launchers without MPI, and alone.

Importing this package never imports mpi4py nor torch: the MPI backend loads
mpi4py when it is created, and torch.distributed is used only when the program
imported it and initialised its default process group.
"""

from __future__ import annotations

from rankscribe.ranks._coordinator import (
    DEFAULT_TIMEOUT,
    JOB_RENDEZVOUS_DIRNAME,
    BackendName,
    Coordinator,
    GatherResult,
)
from rankscribe.ranks._factory import choose_backend
from rankscribe.ranks._info import Launcher, RankInfo, detect
from rankscribe.ranks._layout import rank_dir
from rankscribe.ranks._mpi import MpiCoordinator
from rankscribe.ranks._rendezvous import FileCoordinator
from rankscribe.ranks._single import SingleCoordinator
from rankscribe.ranks._split import split_evenly
from rankscribe.ranks._store import StoreCoordinator
from rankscribe.ranks._tree import MemoryTreeChannel, MemoryTreeHub, TreeChannel, tree_channel
from rankscribe.ranks.errors import (
    BackendUnavailableError,
    BarrierTimeoutError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    CoordinatorClosedError,
    RankEnvironmentError,
    RanksError,
    RanksTypeError,
    RanksValueError,
    RendezvousError,
    StoreError,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TIMEOUT",
    "JOB_RENDEZVOUS_DIRNAME",
    "BackendName",
    "BackendUnavailableError",
    "BarrierTimeoutError",
    "CollectiveMismatchError",
    "CollectiveTimeoutError",
    "Coordinator",
    "CoordinatorClosedError",
    "FileCoordinator",
    "GatherResult",
    "Launcher",
    "MemoryTreeChannel",
    "MemoryTreeHub",
    "MpiCoordinator",
    "RankEnvironmentError",
    "RankInfo",
    "RanksError",
    "RanksTypeError",
    "RanksValueError",
    "RendezvousError",
    "SingleCoordinator",
    "StoreCoordinator",
    "StoreError",
    "TreeChannel",
    "__version__",
    "choose_backend",
    "detect",
    "rank_dir",
    "split_evenly",
    "tree_channel",
]
