"""A script of ``tools/`` imported as a module, for the tests of the benchmarks' simulators."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_tool(path: str, name: str) -> ModuleType:
    """``tools/<path>`` (e.g. ``bench/detection.py``) as the module ``name``, registered in
    ``sys.modules`` (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
