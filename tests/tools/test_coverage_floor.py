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


def measure_in(root: Path, env: str, *calls: str) -> None:
    """What a measured tox env leaves: parallel-mode data in ``.tox/coverage-data/<env>/``."""
    imports = "import rankscribe.alpha.calc as alpha, rankscribe.beta.calc as beta\n"
    script = f"run_in_{env}.py"  # not coverage.py, which `python -m coverage` would import
    write(root, script, "import sys\n" + PATH_LINE + imports + "\n".join(calls) + "\n")
    folder = root / ".tox" / "coverage-data" / env
    options = ["--branch", "--parallel-mode", "--source=packages"]
    run_bounded(
        [sys.executable, "-m", "coverage", "run", *options, script],
        cwd=root,
        env={**os.environ, "COVERAGE_FILE": str(folder / ".coverage")},
        timeout=120,
    )


PATH_LINE = 'sys.path[:0] = ["packages/rankscribe-alpha/src", "packages/rankscribe-beta/src"]\n'


def combined(root: Path, floors: str, *envs: str) -> Finished:
    write(root, "pyproject.toml", f"[tool.rankscribe.coverage-floors]\n{floors}")
    own = root / ".tox" / "coverage-data" / "coverage" / ".coverage"
    environment = {**os.environ, "COVERAGE_FILE": str(own)}
    folder = str(root / ".tox" / "coverage-data")
    return run_tool(TOOL, root, "--combine", folder, *envs, timeout=120, env=environment, cwd=root)


def test_the_measured_envs_data_are_combined_before_the_floors(measured: Path) -> None:
    # Each env alone leaves a line and a branch of alpha.sign unrun; together none.
    measure_in(measured, "writer", "alpha.sign(1)")
    measure_in(measured, "lineage", "alpha.sign(-1)", "beta.sign(1), beta.unused()")
    measure_in(measured, "coverage", "beta.sign(-1)")
    result = combined(measured, "alpha = 70\nbeta = 100\n", "writer,", "lineage", "coverage")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["alpha", "6", "1", "2", "0", "87.5%", "70%"]
    assert lines[2].split() == ["beta", "6", "0", "2", "0", "100.0%", "100%"]
    # The envs' data stay, so that the coverage env can run again alone.
    result = combined(measured, "alpha = 70\nbeta = 100\n", "writer,", "lineage", "coverage")
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_env_that_left_no_data_is_named_with_the_command_to_run(measured: Path) -> None:
    measure_in(measured, "writer", "alpha.sign(1)")
    measure_in(measured, "coverage", "beta.sign(-1)")
    result = combined(measured, "alpha = 0\nbeta = 0\n", "writer,", "lineage,", "ranks", "coverage")
    assert result.returncode == 1
    folder = measured / ".tox" / "coverage-data"
    assert result.stdout.splitlines() == [
        f"lineage: no coverage data in {folder / 'lineage'}",
        f"ranks: no coverage data in {folder / 'ranks'}",
        "run them (again) first: tox -e lineage,ranks,coverage "
        "(a plain `tox` runs every measured env before the coverage env)",
    ]


def test_data_older_than_a_changed_source_is_refused(measured: Path) -> None:
    measure_in(measured, "writer", "alpha.sign(1)")
    measure_in(measured, "coverage", "beta.sign(-1)")
    changed = measured / "packages/rankscribe-alpha/src/rankscribe/alpha/calc.py"
    later = max(p.stat().st_mtime for p in (measured / ".tox").rglob(".coverage.*")) + 5
    os.utime(changed, (later, later))
    result = combined(measured, "alpha = 0\nbeta = 0\n", "writer", "coverage")
    assert result.returncode == 1
    changed_path = "packages/rankscribe-alpha/src/rankscribe/alpha/calc.py"
    assert result.stdout.splitlines()[:2] == [
        f"writer: its coverage data is older than {changed_path}",
        f"coverage: its coverage data is older than {changed_path}",
    ]
    assert "tox -e writer,coverage " in result.stdout
