"""Bounded runs of the processes tests launch: mpiexec and torchrun jobs, rank scripts.

Every process starts in a session of its own, its output going to a file (no pipe
to fill while another process is waited for), and every run has a timeout: on
it, the whole process group (a launcher and the ranks it started) is killed and
the test fails with what the processes printed. Leaving the ``with`` block kills
whatever is left of the groups, whatever the test raised. A run that must exit
0 fails with its output when it does not.

Besides the standard library and pytest only ``rankscribe.ranks`` is imported
here: every tox env imports this module, and every package stands on ranks.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, TypeVar

import pytest

from rankscribe.ranks.launchers import environment_variables

_T = TypeVar("_T")

# Run as ``python -c`` ahead of a command: SIGINT back at its default, then the command in
# this process's place (a disposition at its default stays so across exec; an ignored one
# would stay ignored, and Python would not install its KeyboardInterrupt handler).
# How long a timed-out process is given to print its stacks before it is killed.
_DUMP_SECONDS = 3.0

_SIGINT_AT_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)

#: What launchers (torchrun, mpiexec, Slurm) and a job claim leave in the environment, from
#: the ranks package's one table of them: a job a test starts is its own, with none of the
#: test runner's.
LAUNCHER_VARIABLES = environment_variables()


def clean_environment(**variables: str) -> dict[str, str]:
    """This process's environment without the launcher variables, plus ``variables``."""
    environment = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    return {**environment, **variables}


def rank_environment(rank: int, world_size: int, **variables: str) -> dict[str, str]:
    """A clean environment with the rank variables torchrun gives a rank of a one-node job."""
    return clean_environment(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
        **variables,
    )


def drop_launcher_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's process runs as no launcher's rank (the variables return after the test)."""
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@dataclass(frozen=True)
class Finished:
    """A process that ended: its exit code, what it printed and how long it took."""

    command: str
    returncode: int
    stdout: str  # stdout and stderr interleaved, unless stderr was kept apart
    stderr: str  # "" unless stderr was kept apart
    seconds: float

    @property
    def output(self) -> str:
        """All it printed."""
        return self.stdout + self.stderr


@dataclass
class _Started:
    command: str
    process: subprocess.Popen[bytes]
    output: IO[bytes]
    stderr: IO[bytes] | None
    started: float
    killed: bool = False


def _text(file: IO[bytes] | None) -> str:
    if file is None:
        return ""
    # pread, not seek and read: a running process writes at the offset it shares with us.
    descriptor = file.fileno()
    return os.pread(descriptor, os.fstat(descriptor).st_size, 0).decode(errors="replace")


class Launches:
    """Processes that all end within ``timeout`` seconds of this object's making.

    ``start`` each, then ``wait``; use it as a context manager so that nothing
    outlives the test.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._started: list[_Started] = []
        self._files = contextlib.ExitStack()

    def start(
        self,
        command: Sequence[str | Path],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stderr_apart: bool = False,
        interruptible: bool = False,
    ) -> subprocess.Popen[bytes]:
        """Start ``command``; ``interruptible``: with SIGINT at its default, what a
        terminal's Ctrl-C meets, even where this process ignores it (a test run started
        in the background of a shell ignores SIGINT, and every child inherits that)."""
        argv = [str(part) for part in command]
        shown = shlex.join(argv)
        if interruptible:
            argv = [sys.executable, "-c", _SIGINT_AT_DEFAULT, *argv]
        # Files, not pipes: read after the end, they hold all a killed process printed.
        output = self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 - closed on exit
        stderr = None
        if stderr_apart:
            stderr = self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 - as above
        # Every Python process of the launch dumps its threads' stacks on SIGABRT, which a
        # timeout sends before it kills (_kill): a hang fails with where each thread waits.
        environment = dict(os.environ if env is None else env)
        environment.setdefault("PYTHONFAULTHANDLER", "1")
        process = subprocess.Popen(
            argv,
            stdout=output,
            stderr=subprocess.STDOUT if stderr is None else stderr,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=environment,
            start_new_session=True,
        )
        self._started.append(_Started(shown, process, output, stderr, time.monotonic()))
        return process

    def printed(self, process: subprocess.Popen[bytes]) -> str:
        """What a started process has printed so far (stdout, and stderr unless kept apart)."""
        [started] = [started for started in self._started if started.process is process]
        return _text(started.output)

    def wait_until(
        self,
        process: subprocess.Popen[bytes],
        condition: Callable[[], _T | None],
        what: str,
        *,
        timeout: float | None = None,
        every: float = 0.05,
    ) -> _T:
        """``condition()``'s first true value, asked every ``every`` seconds while ``process`` runs.

        The test fails with what every process printed when ``process`` ends
        first or ``timeout`` seconds pass (by default: this object's timeout).
        """
        waited = self.timeout if timeout is None else timeout
        deadline = min(self._deadline, time.monotonic() + waited)
        while True:
            value = condition()
            if value:
                return value
            if process.poll() is not None:
                self._kill()
                pytest.fail(f"{what} did not happen before the process ended.\n{self._printed()}")
            if time.monotonic() >= deadline:
                self._kill(dump=True)
                pytest.fail(
                    f"{what} did not happen within {waited:g} s; every process group was "
                    f"killed.\n{self._printed()}"
                )
            time.sleep(every)

    def wait(self, *, check: bool = True) -> list[Finished]:
        """Every process's end, in the order they started; fail the test on the timeout.

        With ``check``, a process that exits other than 0 fails the test too.
        """
        finished = []
        for started in self._started:
            try:
                started.process.wait(timeout=max(0.0, self._deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._kill(dump=True)
                pytest.fail(
                    f"`{started.command}` did not end within {self.timeout:g} s; every process "
                    f"group was killed.\n{self._printed()}"
                )
            end = Finished(
                started.command,
                started.process.returncode,
                _text(started.output),
                _text(started.stderr),
                time.monotonic() - started.started,
            )
            if check and end.returncode != 0:
                self._kill()
                pytest.fail(f"`{end.command}` exited {end.returncode}.\n{self._printed()}")
            finished.append(end)
        return finished

    def _printed(self) -> str:
        """What every process printed: a rank that hangs often waits on one that failed."""
        return "\n".join(
            f"--- `{started.command}` (exit {started.process.returncode}) printed:\n"
            f"{_text(started.output)}{_text(started.stderr)}"
            for started in self._started
        )

    def _kill(self, *, dump: bool = False) -> None:
        """Kill every process group; ``dump``: a timeout, each Python process first prints
        its threads' stacks (SIGABRT, PYTHONFAULTHANDLER) into what it printed."""
        if dump:
            alive = [started for started in self._started if started.process.poll() is None]
            for started in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(started.process.pid, signal.SIGABRT)
            for started in alive:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    started.process.wait(timeout=_DUMP_SECONDS)
        for started in self._started:
            if started.killed:
                continue
            started.killed = True
            # The leader may be gone while ranks it started live on in its group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(started.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                started.process.wait(timeout=10)

    def __enter__(self) -> Launches:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._kill()
        self._files.close()


def run_bounded(
    command: Sequence[str | Path],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
    stderr_apart: bool = False,
) -> Finished:
    """Run ``command`` to its end within ``timeout`` seconds (see the module's docstring)."""
    with Launches(timeout) as launches:
        launches.start(command, env=env, cwd=cwd, stderr_apart=stderr_apart)
        [finished] = launches.wait(check=check)
    return finished


def torchrun(script: Path, *arguments: str | Path, ranks: int = 2) -> list[str]:
    """``torchrun`` (beside this python) running ``script`` on ``ranks`` processes of this host.

    A failed rank fails the job (no restart), and the agent sees it within 0.2 s.
    """
    return [
        str(Path(sys.executable).with_name("torchrun")),
        "--standalone",
        "--nproc_per_node",
        str(ranks),
        "--max-restarts",
        "0",
        "--monitor-interval",
        "0.2",
        str(script),
        *map(str, arguments),
    ]


def run_tool(
    script: Path,
    root: Path,
    *arguments: str,
    timeout: float = 60,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Finished:
    """``python script --root root *arguments``: a repo tool on a tree a test made, stderr apart."""
    return run_bounded(
        [sys.executable, script, "--root", root, *arguments],
        timeout=timeout,
        env=env,
        cwd=cwd,
        check=False,
        stderr_apart=True,
    )
