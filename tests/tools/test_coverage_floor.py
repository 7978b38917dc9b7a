"""tools/coverage_floor.py on coverage data measured from a small package in tmp_path."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tests._support.launchers import Finished, run_bounded, run_tool
from tests._support.needs import needs

TOOL = Path(__file__).resolve().parents[2] / "tools" / "coverage_floor.py"

# Each test measures with coverage; the public-api env installs it.
pytestmark = needs("coverage", envs="public-api")

MODULE = """
def sign(x):
    if x > 0:
        return 1
    return -1

def unused():
    return 0
"""


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    """sign(1) only: 6 statements, 2 missed; 2 branches, 1 partly taken -> 62.5%."""
    for name in ("alpha", "beta"):
        write(tmp_path, f"packages/rankscribe-{name}/src/rankscribe/{name}/__init__.py", "")
        write(tmp_path, f"packages/rankscribe-{name}/src/rankscribe/{name}/calc.py", MODULE)
    write(
        tmp_path,
        "use.py",
        """
        import sys
        sys.path[:0] = ["packages/rankscribe-alpha/src", "packages/rankscribe-beta/src"]
        from rankscribe.alpha.calc import sign
        import rankscribe.beta.calc as beta
        sign(1)
        beta.sign(1), beta.sign(-1), beta.unused()
    """,
    )
    run_bounded(
        [sys.executable, "-m", "coverage", "run", "--branch", "--source=packages", "use.py"],
        cwd=tmp_path,
        env={**os.environ, "COVERAGE_FILE": str(tmp_path / ".coverage")},
        timeout=120,
    )
    return tmp_path


def run(root: Path, floors: str) -> Finished:
    write(root, "pyproject.toml", f"[tool.rankscribe.coverage-floors]\n{floors}")
    environment = {**os.environ, "COVERAGE_FILE": str(root / ".coverage")}
    return run_tool(TOOL, root, timeout=120, env=environment, cwd=root)


def test_each_package_is_printed_and_at_its_floor_passes(measured: Path) -> None:
    result = run(measured, "alpha = 62\nbeta = 100\n")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["package", "stmts", "miss", "branch", "part", "cover", "floor"]
    assert lines[1].split() == ["alpha", "6", "2", "2", "1", "62.5%", "62%"]
    assert lines[2].split() == ["beta", "6", "0", "2", "0", "100.0%", "100%"]
    assert "every package is at or above its coverage floor" in result.stdout


def test_a_package_under_its_floor_fails(measured: Path) -> None:
    result = run(measured, "alpha = 70\nbeta = 100\n")
    assert result.returncode == 1
    assert "alpha: 62.5% is under its floor of 70%" in result.stdout
    assert "beta:" not in result.stdout.split("\n\n", 1)[1]


def test_a_package_without_a_floor_fails(measured: Path) -> None:
    result = run(measured, "alpha = 50\n")
    assert result.returncode == 1
    assert "beta: no floor in [tool.rankscribe.coverage-floors]" in result.stdout


def test_a_package_that_was_not_measured_fails(measured: Path) -> None:
    write(measured, "packages/rankscribe-gamma/src/rankscribe/gamma/__init__.py", "")
    result = run(measured, "alpha = 50\nbeta = 50\ngamma = 50\n")
    assert result.returncode == 1
    assert "gamma      not measured" in result.stdout
    assert "gamma: no coverage data (did its tests run under coverage?)" in result.stdout
