"""Commands run as a second user (uid 65534, nobody), for the tests of files another user
planted (docs/layout.md, "Files of another user").

The tests run as root (CI). :func:`as_second_user` drops to uid 65534 in a child process
and then runs this interpreter with the given arguments; where this interpreter lies in a
directory private to root (pyenv's, under /root), the system's Python of the same version
runs them, in this virtual environment (named as argv[0]). :func:`why_not` says why the
second user cannot run what a test needs here, if it cannot: tox makes its work directory
0700, so only the envs that open it for passing through (tox.ini: lineage, ranks) run these
tests; elsewhere they skip with that reason.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests._support.launchers import Finished, run_bounded

NOBODY = 65534

_DROP_TO_NOBODY = """
import os, sys
os.setgroups([]); os.setgid(65534); os.setuid(65534)
arguments = [sys.executable, *sys.argv[1:]]
try:
    os.execv(sys.executable, arguments)
except PermissionError:
    os.execv("/usr/bin/python%d.%d" % sys.version_info[:2], arguments)
"""


def as_second_user(*arguments: str | Path, timeout: float = 60) -> Finished:
    """``python ARGUMENTS`` run as uid 65534 from ``/``, its stderr apart; never raises on
    the exit status (the caller reads it)."""
    return run_bounded(
        [sys.executable, "-c", _DROP_TO_NOBODY, *arguments],
        timeout=timeout,
        check=False,
        stderr_apart=True,
        env={**os.environ, "HOME": "/nonexistent"},
        cwd=Path("/"),
    )


def why_not(*probe: str | Path, env: str) -> str | None:
    """None when the second user can run ``python PROBE`` here, else why not (naming
    ``env``, the tox env that runs the test)."""
    if os.geteuid() != 0:
        return "running a command as uid 65534 needs root"
    finished = as_second_user(*probe)
    if finished.returncode == 0:
        return None
    last = (finished.stderr.strip().splitlines() or ["no output"])[-1]
    return f"uid 65534 cannot run this environment's Python here ({last}); the {env} env runs this"
