"""A program in a child process that says ``ready`` when the test may act on it (send it a
signal): what is the process's own (its signal handlers, its end by a signal) stays out of
the test's process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["start_until_ready"]


def start_until_ready(
    script: str, *arguments: str, cwd: Path | None = None
) -> subprocess.Popen[str]:
    """``python -c script arguments...``, once its first line of output, ``ready``, came
    (its stdout and stderr are pipes; the test reads the rest)."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    if line != "ready\n":
        output, errors = child.communicate(timeout=60)
        raise AssertionError(f"the child said {line!r}, not 'ready':\n{line}{output}{errors}")
    return child
