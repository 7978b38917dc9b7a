"""Tests that need what one venv may lack skip there, naming the tox env that runs them.

Every tox env installs what its suites need, so nothing skips there; a venv with the
packages and no extras runs the rest and skips these with a reason such as
"plotly is not installed; the lineage and report envs run this".
"""

from __future__ import annotations

import importlib.util

import pytest


def absent(*modules: str) -> list[str]:
    """The top-level modules of ``modules`` this interpreter cannot import."""
    return [module for module in modules if importlib.util.find_spec(module) is None]


def skip_reason(missing: list[str], envs: str) -> str:
    """Why a test skips: what is missing and which env(s), ``"report"`` or ``"a and b"``."""
    verb = "is" if len(missing) == 1 else "are"
    runs = "envs run" if " and " in envs else "env runs"
    return f"{', '.join(missing)} {verb} not installed; the {envs} {runs} this"


def needs(*modules: str, envs: str) -> pytest.MarkDecorator:
    """A mark that skips the test when any of ``modules`` is not installed."""
    missing = absent(*modules)
    return pytest.mark.skipif(bool(missing), reason=skip_reason(missing, envs))
