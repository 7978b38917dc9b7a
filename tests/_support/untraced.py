"""A timing test's code run without coverage's tracer, where the suites run under it.

The package envs run their suites under ``coverage run`` (tox.ini, docs/contributing.md
"How CI is organised"). A test that times code (a parser's growth, the fuzz targets'
CPU-time limit) would time the tracer as much as the code: :func:`untraced` pauses
coverage's tracer around it and resumes it after, so such a test measures exactly what it
measures in a run without coverage. The code run while paused is not counted as covered.
Another tracer (a debugger) cannot be paused: the test skips under it.
Imports only the standard library and pytest.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest


def _running_coverage() -> Any:
    """The Coverage object measuring this process, or None (coverage not imported or off)."""
    module = sys.modules.get("coverage")
    if module is None:
        return None
    return module.Coverage.current()


@contextlib.contextmanager
def untraced(what: str) -> Iterator[None]:
    """Run the block with no tracer: coverage's is paused for it; under another, skip.

    ``what`` names what the test times, for the skip's reason.
    """
    if sys.gettrace() is None:
        yield
        return
    running = _running_coverage()
    if running is not None:
        running.stop()
        if sys.gettrace() is not None:  # another tracer under coverage's
            running.start()
            running = None
    if running is None:
        pytest.skip(f"{what} is timed, and a tracer other than coverage's is on (a debugger?)")
    try:
        yield
    finally:
        running.start()
