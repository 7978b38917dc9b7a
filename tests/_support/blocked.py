"""Run Python code in a fresh process where some rankscribe packages cannot be imported.

A meta-path finder placed first refuses the named packages (and everything below them)
as if they were not installed, so a test shows that a package stands on the floors below
it only: ``import rankscribe.jobview`` without the lineage manager or the collector.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence

from tests._support.launchers import Finished, run_bounded

_BLOCKER = """
import importlib.abc, sys

class _NotInstalled(importlib.abc.MetaPathFinder):
    blocked = {blocked!r}

    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in self.blocked):
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""


def run_without(
    blocked: Sequence[str], code: str, *, timeout: float = 120, check: bool = True
) -> Finished:
    """Run ``code`` in a new interpreter in which the ``blocked`` modules cannot be imported."""
    program = _BLOCKER.format(blocked=tuple(blocked)) + textwrap.dedent(code)
    return run_bounded(
        [sys.executable, "-c", program], timeout=timeout, check=check, stderr_apart=True
    )
