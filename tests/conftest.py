"""Settings shared by every test folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI has 2 shared cores: property tests run fewer, deadline-free examples there.
settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None)
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
