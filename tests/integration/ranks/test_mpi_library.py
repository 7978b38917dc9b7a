"""An MPI launch whose MPI library mpi4py cannot use: one line saying what to install.

Two ways a machine's own MPI meets mpi4py from PyPI:

- mpi4py's wheel finds no library it can load (a distribution's MPICH names its library
  ``libmpich.so.12``, not the ``libmpi.so.12`` the wheel looks for): mpi4py raises
  ``RuntimeError("cannot load MPI library\\n<each file tried>")`` on every rank.
  ``MPI4PY_LIBMPI`` pointing at a missing file makes the same error here.
- mpi4py loads a library, but the ``mpiexec`` belongs to another MPI installation: every
  rank starts MPI as a world of one. The launcher's variables without its process
  manager (``PMI_RANK`` / ``PMI_SIZE`` set, nothing listening) make the same here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests._support.launchers import clean_environment, run_bounded
from tests._support.needs import needs

ROOT = Path(__file__).resolve().parents[3]
DIGITS = ROOT / "examples" / "digits" / "train.py"
INSTALL = 'pip install "rankscribe-ranks[mpi]" mpich'
MISSING_LIBRARY = "/nonexistent/libmpi.so.12"


def test_the_example_says_what_to_install_in_one_line(
    mpi: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MPI4PY_LIBMPI", MISSING_LIBRARY)
    run = mpi.run(
        2,
        sys.executable,
        str(DIGITS),
        "--summary-dir",
        str(tmp_path / "runs" / "digits"),
        cwd=tmp_path,
        timeout=60,
    )
    assert run.returncode != 0
    assert "Traceback" not in run.output
    lines = [line for line in run.output.splitlines() if line.strip()]
    assert len(lines) == 1, run.output  # rank 0's line; rank 1 exits quietly
    [line] = lines
    assert line.startswith("train.py: mpi4py found no MPI library it can load (")
    assert f"{MISSING_LIBRARY}: cannot open shared object file" in line
    assert INSTALL in line
    assert not (tmp_path / "runs").exists()  # nothing was written


_MAKE_COORDINATOR = """
from rankscribe.ranks import create_coordinator
try:
    create_coordinator(timeout=5.0)
except Exception as error:
    print(type(error).__name__, isinstance(error, ImportError))
    print(error)
"""


@needs("mpi4py", envs="mpi")
def test_a_launcher_of_another_mpi_installation_is_named() -> None:
    # A launcher of two ranks, and MPI (here MPICH from PyPI) starting this rank alone.
    run = run_bounded(
        [sys.executable, "-c", _MAKE_COORDINATOR],
        timeout=30,
        env=clean_environment(PMI_RANK="1", PMI_SIZE="2"),
    )
    kind, message = run.output.strip().splitlines()
    assert kind == "BackendUnavailableError True"
    assert message.startswith(
        "this process is rank 1 of 2 for the launcher (pmi) but a world of 1 for the MPI "
        "library mpi4py loaded ("
    )
    assert "that mpiexec belongs to another MPI installation" in message
    assert message.endswith(
        f"{INSTALL} into the Python that runs the job, and launch with the mpiexec that "
        "mpich installs beside it"
    )


@needs("mpi4py", envs="mpi")
def test_mpi4py_missing_its_library_is_one_line_too() -> None:
    run = run_bounded(
        [sys.executable, "-c", _MAKE_COORDINATOR],
        timeout=30,
        env=clean_environment(PMI_RANK="1", PMI_SIZE="2", MPI4PY_LIBMPI=MISSING_LIBRARY),
    )
    kind, message = run.output.strip().splitlines()
    assert kind == "BackendUnavailableError True"
    assert message.startswith(
        f"mpi4py found no MPI library it can load (cannot load MPI library: {MISSING_LIBRARY}: "
    )
    assert "libmpich.so.12" in message
    assert INSTALL in message
