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
    from rankscribe.ranks.backends._creation import choose_backend, create_coordinator
    from rankscribe.ranks.backends._mpi import MpiCoordinator
    from rankscribe.ranks.backends._rendezvous import FileCoordinator
    from rankscribe.ranks.backends._single import SingleCoordinator
    from rankscribe.ranks.backends._store import Store, StoreCoordinator
    from rankscribe.ranks.coordination._coordinator import (
        DEFAULT_TIMEOUT,
        BackendName,
        Coordinator,
        GatherResult,
    )
    from rankscribe.ranks.coordination._split import split_evenly
    from rankscribe.ranks.detection._info import Launcher, RankInfo, detect
    from rankscribe.ranks.errors import JobDirClaimedError, RanksError
    from rankscribe.ranks.layout._claim import JobClaim, OnExists, claim_job_dir
    from rankscribe.ranks.layout._rank_dir import rank_dir

# Where each name lives, imported on first use (PEP 562): a sibling that needs only
# rankscribe.ranks.arguments or .imports does not load the coordinator and its backends.
_HOMES = {
    "JobClaim": "rankscribe.ranks.layout._claim",
    "OnExists": "rankscribe.ranks.layout._claim",
    "claim_job_dir": "rankscribe.ranks.layout._claim",
    "DEFAULT_TIMEOUT": "rankscribe.ranks.coordination._coordinator",
    "BackendName": "rankscribe.ranks.coordination._coordinator",
    "Coordinator": "rankscribe.ranks.coordination._coordinator",
    "GatherResult": "rankscribe.ranks.coordination._coordinator",
    "choose_backend": "rankscribe.ranks.backends._creation",
    "create_coordinator": "rankscribe.ranks.backends._creation",
    "Launcher": "rankscribe.ranks.detection._info",
    "RankInfo": "rankscribe.ranks.detection._info",
    "detect": "rankscribe.ranks.detection._info",
    "rank_dir": "rankscribe.ranks.layout._rank_dir",
    "split_evenly": "rankscribe.ranks.coordination._split",
    "MpiCoordinator": "rankscribe.ranks.backends._mpi",
    "FileCoordinator": "rankscribe.ranks.backends._rendezvous",
    "SingleCoordinator": "rankscribe.ranks.backends._single",
    "Store": "rankscribe.ranks.backends._store",
    "StoreCoordinator": "rankscribe.ranks.backends._store",
    "JobDirClaimedError": "rankscribe.ranks.errors",
    "RanksError": "rankscribe.ranks.errors",
}

__getattr__, __dir__ = lazy_attributes(__name__, _HOMES, globals())

__version__ = "0.1.0"

# The user's API (docs/contributing.md): every error but these two lives in
# rankscribe.ranks.errors; the job's file names and modes in the sibling-facing
# rankscribe.ranks.files, the tree of ranks in rankscribe.ranks.tree and its in-memory
# double for tests in rankscribe.ranks.testing.
__all__ = [
    "DEFAULT_TIMEOUT",
    "BackendName",
    "Coordinator",
    "FileCoordinator",
    "GatherResult",
    "JobClaim",
    "JobDirClaimedError",
    "Launcher",
    "MpiCoordinator",
    "OnExists",
    "RankInfo",
    "RanksError",
    "SingleCoordinator",
    "Store",
    "StoreCoordinator",
    "__version__",
    "choose_backend",
    "claim_job_dir",
    "create_coordinator",
    "detect",
    "rank_dir",
    "split_evenly",
]
