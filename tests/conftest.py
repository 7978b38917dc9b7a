"""Settings shared by every test folder."""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests._support.growth import note_marked
from tests._support.needs import absent, skip_reason

# CI has 2 shared cores: property tests run fewer, deadline-free examples there.
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=200, deadline=None)
# The minimums env runs the suites a second time, on the oldest dependencies: what it looks
# for is a call those versions lack or answer otherwise, which a few examples reach; the
# search for inputs that break a property is the other envs' (the "ci" profile).
settings.register_profile(
    "minimums", max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# Golden files other programs made: tests read them, or copy them to tmp_path first.
# A query over them writes an index beside them, so the whole run fails if any file
# appears there.
GOLDEN_DATA = Path(__file__).resolve().parent / "compat" / "data"
_golden_before: set[str] = set()


def _golden_files() -> set[str]:
    return {
        os.path.relpath(os.path.join(folder, name), GOLDEN_DATA)
        for folder, _, names in os.walk(GOLDEN_DATA)
        for name in names
    }


def pytest_sessionstart(session: pytest.Session) -> None:
    _golden_before.update(_golden_files())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    added = sorted(_golden_files() - _golden_before)
    if added:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"tests wrote into {GOLDEN_DATA} (copy it to tmp_path first): {added}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# The fuzzer's regression corpus (tools/fuzz/): the writer, lineage and collector envs each
# replay their own targets. A test asks for `<group>_fuzz_target` (every target of the group),
# `<group>_fuzz_input` (every saved input of it) or `<group>_hostile_generator` (every
# generator of tools/fuzz/hostile.py whose target is of the group), group "writer",
# "lineage" or "collector".
_FUZZ = Path(__file__).resolve().parents[1] / "tools" / "fuzz"
_FUZZ_GROUPS = {
    "writer": "WRITER_TARGETS",
    "lineage": "LINEAGE_TARGETS",
    "collector": "COLLECTOR_TARGETS",
}


def _load_fuzz_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    # The fuzzer silences the project's loggers; the other tests of this session need them.
    project_logger = logging.getLogger("rankscribe")
    level = project_logger.level
    try:
        spec.loader.exec_module(module)
    finally:
        project_logger.setLevel(level)
    return module


@functools.cache
def fuzz_targets() -> ModuleType:
    return _load_fuzz_module("rankscribe_fuzz_targets", _FUZZ / "targets.py")


@functools.cache
def fuzz_hostile() -> ModuleType:
    # hostile.py (and seeds.py) import the targets as ``targets``: the same module as here.
    sys.modules.setdefault("targets", fuzz_targets())
    return _load_fuzz_module("rankscribe_fuzz_hostile", _FUZZ / "hostile.py")


@pytest.fixture
def fuzz_targets_module() -> ModuleType:
    """``tools/fuzz/targets.py``: its time limit and failure type."""
    return fuzz_targets()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Which tests carry the growth mark: a test that times growth without it fails.
    note_marked(items)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for group, table_name in _FUZZ_GROUPS.items():
        wants_targets = f"{group}_fuzz_target" in metafunc.fixturenames
        wants_inputs = f"{group}_fuzz_input" in metafunc.fixturenames
        if f"{group}_hostile_generator" in metafunc.fixturenames:
            table = getattr(fuzz_targets(), table_name)
            hostile = fuzz_hostile()
            names = sorted(
                name for name, made in hostile.GENERATORS.items() if made.target in table
            )
            metafunc.parametrize(
                f"{group}_hostile_generator",
                [(name, functools.partial(hostile.run, name)) for name in names],
                ids=names,
            )
        if not (wants_targets or wants_inputs):
            continue
        targets = fuzz_targets()
        table = getattr(targets, table_name)
        if wants_targets:
            metafunc.parametrize(
                f"{group}_fuzz_target",
                [(name, targets.corpus_inputs(name)) for name in sorted(table)],
                ids=sorted(table),
            )
        if wants_inputs:
            cases = [
                (table[name], path)
                for name in sorted(table)
                for path in targets.corpus_inputs(name)
            ]
            metafunc.parametrize(
                f"{group}_fuzz_input",
                cases,
                ids=[f"{path.parent.name}/{path.name}" for _, path in cases],
            )


# Folders whose every test (and conftest) needs what a venv with the packages alone lacks,
# and the tox envs that install it. Without it the folder is one skip naming those envs;
# its conftest is not imported.
_FOLDER_NEEDS = {
    "collector_torch": (("torch",), "collector-torch"),
    "compat_tensorboard": (("tensorboard",), "tensorboard"),
    "frameworks": (("torch", "lightning", "transformers", "accelerate"), "integrations"),
    "report": (("plotly",), "report"),
}
_TESTS = Path(__file__).resolve().parent


class _SkippedFolder(pytest.Collector):
    """A test folder whose needs are not installed: collecting it is one skip."""

    def __init__(self, *, reason: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        pytest.skip(self.reason)


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if path.parent != _TESTS or path.name not in _FOLDER_NEEDS:
        return None
    modules, envs = _FOLDER_NEEDS[path.name]
    missing = absent(*modules)
    if not missing:
        return None
    return _SkippedFolder.from_parent(
        parent, name=path.name, path=path, reason=f"tests/{path.name}: {skip_reason(missing, envs)}"
    )
