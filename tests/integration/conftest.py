"""What every real-``mpiexec`` test needs: the launcher, and a bounded job run or start.

The ``mpi`` tox env installs MPICH from PyPI (its ``mpiexec`` sits next to the
env's python) and sets RANKSCRIBE_REQUIRE_MPI, so there a missing launcher
fails the run instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support.launchers import Finished, Launches

#: A finished job: returncode, seconds, and output (stdout and stderr of every rank, interleaved).
MpiRun = Finished


class MpiLauncher:
    """Runs ``mpiexec -n N ...`` jobs that can never outlive their timeout."""

    def __init__(self, path: str) -> None:
        self.path = path

    @staticmethod
    def python(script: Path, *arguments: str | Path) -> list[str]:
        """``python -m mpi4py script arguments``: a rank's uncaught error aborts the whole job."""
        return [sys.executable, "-m", "mpi4py", str(script), *map(str, arguments)]

    def run(
        self, ranks: int, *argv: str, cwd: Path, timeout: float, measured: bool = True
    ) -> MpiRun:
        """The job run to its end. ``measured=False``: its ranks are not traced by the
        mpi env's coverage tracer (for a test of timings, which tracing the recorder's own
        threads changes)."""
        # On a timeout the whole job (launcher and ranks) is killed and the test fails.
        with Launches(timeout) as launches:
            self.start(launches, ranks, *argv, cwd=cwd, measured=measured)
            [run] = launches.wait(check=False)
        print(run.output, flush=True)
        return run

    def start(
        self, launches: Launches, ranks: int, *argv: str, cwd: Path, measured: bool = True
    ) -> subprocess.Popen[bytes]:
        """The job started among ``launches``, for a test that watches it while it runs."""
        print("running: mpiexec -n", ranks, *argv[1:3], flush=True)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        if not measured:
            env = {name: value for name, value in env.items() if not name.startswith("COVERAGE_")}
        return launches.start([self.path, "-n", str(ranks), *argv], cwd=cwd, env=env)


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
