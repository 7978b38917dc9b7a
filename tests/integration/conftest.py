"""What every real-``mpiexec`` test needs: the launcher, and a bounded job run.

The ``mpi`` tox env installs MPICH from PyPI (its ``mpiexec`` sits next to the
env's python) and sets RANKSCRIBE_REQUIRE_MPI, so there a missing launcher
fails the run instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class MpiRun:
    returncode: int
    seconds: float
    output: str  # stdout and stderr of every rank, interleaved


class MpiLauncher:
    """Runs ``mpiexec -n N ...`` jobs that can never outlive their timeout."""

    def __init__(self, path: str) -> None:
        self.path = path

    def run(self, ranks: int, *argv: str, cwd: Path, timeout: float) -> MpiRun:
        command = [self.path, "-n", str(ranks), *argv]
        print("running: mpiexec -n", ranks, *argv[1:3], flush=True)
        started = time.monotonic()
        # A session of its own: on a timeout the whole job (launcher and ranks) is killed.
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            cwd=cwd,
            env=dict(os.environ, OMP_NUM_THREADS="1"),
        )
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            pytest.fail(
                f"mpiexec -n {ranks} {' '.join(argv[1:3])} hung past {timeout} s:\n{output}"
            )
        print(output, flush=True)
        return MpiRun(process.returncode, time.monotonic() - started, output)


def _find_mpiexec() -> str | None:
    beside_python = Path(sys.executable).with_name("mpiexec")
    if beside_python.exists():
        return str(beside_python)
    return shutil.which("mpiexec")


@pytest.fixture(scope="session")
def mpi() -> MpiLauncher:
    path = _find_mpiexec()
    if path is None:
        if os.environ.get("RANKSCRIBE_REQUIRE_MPI"):
            pytest.fail("RANKSCRIBE_REQUIRE_MPI is set but no mpiexec was found")
        pytest.skip("no mpiexec: run `tox -e mpi`")
    return MpiLauncher(path)
