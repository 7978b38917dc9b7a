"""rankscribe.ranks: rank coordination for training jobs.

Which rank am I (:func:`detect`), where do I write (:func:`rank_dir`, after
:func:`claim_job_dir` made the directory this job's), which share of the heavy
work is mine (:func:`split_evenly`), and how do results reach rank 0 without
hanging on a dead rank (:func:`create_coordinator` and its :class:`Coordinator`)
— under ``mpiexec``, under launchers without MPI, and alone. See ``docs/layout.md``.
Errors: :class:`RanksError` (the base) and :class:`JobDirClaimedError` (what
:func:`claim_job_dir` refuses with) are here; every one is in :mod:`rankscribe.ranks.errors`.

Importing this package never imports mpi4py nor torch: the MPI backend loads
mpi4py when it is created, and torch.distributed is used only when the program
imported it and initialised its default process group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankscribe.ranks.imports import lazy_attributes

if TYPE_CHECKING:
    from rankscribe.ranks._claim import CLAIM_FILE_NAME, JobClaim, OnExists, claim_job_dir
    from rankscribe.ranks._coordinator import (
        DEFAULT_TIMEOUT,
        JOB_RENDEZVOUS_DIRNAME,
        BackendName,
        Coordinator,
        GatherResult,
    )
    from rankscribe.ranks._creation import choose_backend, create_coordinator
    from rankscribe.ranks._info import JOB_ID_ENV, Launcher, RankInfo, detect
    from rankscribe.ranks._layout import rank_dir
    from rankscribe.ranks._split import split_evenly
    from rankscribe.ranks._tree import MemoryTreeChannel, MemoryTreeHub, TreeChannel, tree_channel
    from rankscribe.ranks.backends._mpi import MpiCoordinator
    from rankscribe.ranks.backends._rendezvous import FileCoordinator
    from rankscribe.ranks.backends._single import SingleCoordinator
    from rankscribe.ranks.backends._store import Store, StoreCoordinator
    from rankscribe.ranks.errors import BackendUnavailableError as BackendUnavailableError
    from rankscribe.ranks.errors import BarrierTimeoutError as BarrierTimeoutError
    from rankscribe.ranks.errors import CollectiveMismatchError as CollectiveMismatchError
    from rankscribe.ranks.errors import CollectiveTimeoutError as CollectiveTimeoutError
    from rankscribe.ranks.errors import CoordinatorClosedError as CoordinatorClosedError
    from rankscribe.ranks.errors import JobDirClaimedError, RanksError
    from rankscribe.ranks.errors import JobDirError as JobDirError
    from rankscribe.ranks.errors import JSONDataError as JSONDataError
    from rankscribe.ranks.errors import MessageError as MessageError
    from rankscribe.ranks.errors import RankEnvironmentError as RankEnvironmentError
    from rankscribe.ranks.errors import RanksTypeError as RanksTypeError
    from rankscribe.ranks.errors import RanksValueError as RanksValueError
    from rankscribe.ranks.errors import RendezvousError as RendezvousError
    from rankscribe.ranks.errors import StoreError as StoreError
    from rankscribe.ranks.errors import UnsafeFileError as UnsafeFileError

# Where each name lives, imported on first use (PEP 562): a sibling that needs only
# rankscribe.ranks.arguments or .imports does not load the coordinator and its backends.
_HOMES = {
    "CLAIM_FILE_NAME": "rankscribe.ranks._claim",
    "JobClaim": "rankscribe.ranks._claim",
    "OnExists": "rankscribe.ranks._claim",
    "claim_job_dir": "rankscribe.ranks._claim",
    "DEFAULT_TIMEOUT": "rankscribe.ranks._coordinator",
    "JOB_RENDEZVOUS_DIRNAME": "rankscribe.ranks._coordinator",
    "BackendName": "rankscribe.ranks._coordinator",
    "Coordinator": "rankscribe.ranks._coordinator",
    "GatherResult": "rankscribe.ranks._coordinator",
    "choose_backend": "rankscribe.ranks._creation",
    "create_coordinator": "rankscribe.ranks._creation",
    "JOB_ID_ENV": "rankscribe.ranks._info",
    "Launcher": "rankscribe.ranks._info",
    "RankInfo": "rankscribe.ranks._info",
    "detect": "rankscribe.ranks._info",
    "rank_dir": "rankscribe.ranks._layout",
    "split_evenly": "rankscribe.ranks._split",
    "MemoryTreeChannel": "rankscribe.ranks._tree",
    "MemoryTreeHub": "rankscribe.ranks._tree",
    "TreeChannel": "rankscribe.ranks._tree",
    "tree_channel": "rankscribe.ranks._tree",
    "MpiCoordinator": "rankscribe.ranks.backends._mpi",
    "FileCoordinator": "rankscribe.ranks.backends._rendezvous",
    "SingleCoordinator": "rankscribe.ranks.backends._single",
    "Store": "rankscribe.ranks.backends._store",
    "StoreCoordinator": "rankscribe.ranks.backends._store",
    "BackendUnavailableError": "rankscribe.ranks.errors",
    "BarrierTimeoutError": "rankscribe.ranks.errors",
    "CollectiveMismatchError": "rankscribe.ranks.errors",
    "CollectiveTimeoutError": "rankscribe.ranks.errors",
    "CoordinatorClosedError": "rankscribe.ranks.errors",
    "JobDirClaimedError": "rankscribe.ranks.errors",
    "RanksError": "rankscribe.ranks.errors",
    "JobDirError": "rankscribe.ranks.errors",
    "JSONDataError": "rankscribe.ranks.errors",
    "MessageError": "rankscribe.ranks.errors",
    "RankEnvironmentError": "rankscribe.ranks.errors",
    "RanksTypeError": "rankscribe.ranks.errors",
    "RanksValueError": "rankscribe.ranks.errors",
    "RendezvousError": "rankscribe.ranks.errors",
    "StoreError": "rankscribe.ranks.errors",
    "UnsafeFileError": "rankscribe.ranks.errors",
}

__getattr__, __dir__ = lazy_attributes(__name__, _HOMES, globals())

__version__ = "0.1.0"

# The `name as name` imports above stay importable for code written against earlier
# versions; they are not listed here: their one home is rankscribe.ranks.errors, where
# the docs and the other packages spell them (docs/contributing.md).
__all__ = [
    "CLAIM_FILE_NAME",
    "DEFAULT_TIMEOUT",
    "JOB_ID_ENV",
    "JOB_RENDEZVOUS_DIRNAME",
    "BackendName",
    "Coordinator",
    "FileCoordinator",
    "GatherResult",
    "JobClaim",
    "JobDirClaimedError",
    "Launcher",
    "MemoryTreeChannel",
    "MemoryTreeHub",
    "MpiCoordinator",
    "OnExists",
    "RankInfo",
    "RanksError",
    "SingleCoordinator",
    "Store",
    "StoreCoordinator",
    "TreeChannel",
    "__version__",
    "choose_backend",
    "claim_job_dir",
    "create_coordinator",
    "detect",
    "rank_dir",
    "split_evenly",
    "tree_channel",
]
