"""tools/check_installs.py: the ranks env proves it installs no numpy, protobuf nor Pillow."""

from __future__ import annotations

import sys
from pathlib import Path

from tests._support.launchers import run_bounded

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_installs.py"


def test_a_module_that_must_be_absent_but_imports_fails_the_env() -> None:
    result = run_bounded(
        [sys.executable, TOOL, "--absent", "json", "no_such_module_for_tests", "no_such.sub"],
        timeout=60,
        check=False,
        stderr_apart=True,
    )
    assert result.returncode == 1
    assert "check_installs: json is importable but this env must not install it" in (result.stderr)
    assert "no_such_module_for_tests" not in result.stderr
    assert "no_such.sub" not in result.stderr
