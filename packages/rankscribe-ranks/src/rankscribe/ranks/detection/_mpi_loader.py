"""Loading mpi4py on demand, for rank detection and for the MPI backend alike.

Importing ``mpi4py.MPI`` initialises MPI, so nothing in this package imports it
at module level; :func:`load_mpi` is the one place that does, when it is needed.

When it fails, the error says in one line what to install, whatever mpi4py
said (its own text stays on ``__cause__``). The usual case: mpi4py's wheel from
PyPI looks for ``libmpi.so``/``libmpi.so.12``/``libmpi.so.40``, which a
distribution's MPICH does not install (Debian's names its library
``libmpich.so.12``), so every rank stops with mpi4py's "cannot load MPI
library". MPI from PyPI (``pip install mpich``) puts a library mpi4py loads, and
an ``mpiexec`` that belongs to it, beside the Python that runs the job
(``docs/layout.md``, "MPI from PyPI").
"""

from __future__ import annotations

from typing import Any

from rankscribe.ranks.errors import BackendUnavailableError

__all__ = ["INSTALL_MPI", "load_mpi"]

#: What to install for the MPI backend, and how to launch with it.
INSTALL_MPI = (
    'pip install "rankscribe-ranks[mpi]" mpich into the Python that runs the job, and '
    "launch with the mpiexec that mpich installs beside it"
)


def load_mpi() -> Any:
    """Import and return ``mpi4py.MPI`` (which initialises MPI), or raise a clear error."""
    try:
        from mpi4py import MPI  # noqa: PLC0415 - never at import time of rankscribe.ranks
    except ImportError as error:
        if error.name == "mpi4py":
            raise BackendUnavailableError(
                f"the MPI backend needs mpi4py, which is not installed: {INSTALL_MPI} "
                "(or use backend='file' with a rendezvous_dir)"
            ) from error
        raise BackendUnavailableError(
            f"mpi4py cannot use the MPI library it found ({_first_line(error)}): "
            f"{INSTALL_MPI} (or use backend='file' with a rendezvous_dir)"
        ) from error
    except RuntimeError as error:
        raise BackendUnavailableError(
            f"mpi4py found no MPI library it can load ({_first_line(error)}; a "
            f"distribution's MPICH names its library libmpich.so.12): {INSTALL_MPI} "
            "(or use backend='file' with a rendezvous_dir)"
        ) from error
    return MPI


def _first_line(error: BaseException) -> str:
    """The first line of mpi4py's message (it lists every file it tried, one a line)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    detail = lines[0]
    if len(lines) > 1 and detail == "cannot load MPI library":
        detail = f"{detail}: {lines[1]}"  # the first file it tried and why
    return detail
