"""tools/check_minimums.py against the interpreter running the tests."""

from __future__ import annotations

import importlib.metadata
import textwrap
from pathlib import Path

from tests._support.launchers import Finished, run_tool
from tests._support.needs import needs

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_minimums.py"
PYTEST = importlib.metadata.version("pytest")
PYTEST_SERIES = ".".join(PYTEST.split(".")[:2])


def declare(root: Path, name: str, dependencies: list[str]) -> None:
    folder = root / "packages" / name
    folder.mkdir(parents=True, exist_ok=True)
    listed = "".join(f"    {dependency!r},\n" for dependency in dependencies)
    (folder / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [project]
        name = "{name}"
        dependencies = [
        {listed}]
        [project.optional-dependencies]
        extra = ["pytest>=1.0"]
    """),
        encoding="utf-8",
    )


def run(root: Path) -> Finished:
    return run_tool(TOOL, root)


def test_installed_lower_bounds_pass(tmp_path: Path) -> None:
    # The bound's series is met by any release in it; siblings and extras are not checked.
    declare(tmp_path, "rankscribe-a", [f"pytest>={PYTEST_SERIES}", "rankscribe-b == 0.1.*"])
    declare(tmp_path, "rankscribe-b", [f"pytest >= {PYTEST}, <99 ; python_version >= '3'"])
    result = run(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "every declared lower bound is installed (2 checked)" in result.stdout


def test_a_newer_version_than_the_bound_fails_naming_both(tmp_path: Path) -> None:
    declare(tmp_path, "rankscribe-a", ["pytest>=1.0"])
    result = run(tmp_path)
    assert result.returncode == 1
    assert "dependencies not at their declared minimum (1):" in result.stdout
    assert (
        f"rankscribe-a: pytest>=1.0: {PYTEST} installed, not the declared minimum"
    ) in result.stdout


def test_a_dependency_that_is_not_installed_fails(tmp_path: Path) -> None:
    declare(tmp_path, "rankscribe-a", ["no-such-dependency-for-tests>=1.2"])
    result = run(tmp_path)
    assert result.returncode == 1
    assert "rankscribe-a: no-such-dependency-for-tests>=1.2: not installed" in result.stdout


@needs("mpi4py", envs="public-api")
def test_a_bound_without_wheels_is_reported_not_failed(tmp_path: Path) -> None:
    declare(tmp_path, "rankscribe-a", ["mpi4py>=0.1", f"pytest>={PYTEST}"])
    # The public-api env installs mpi4py (rankscribe-ranks[mpi]).
    result = run(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "not checked: rankscribe-a: mpi4py>=0.1:" in result.stdout
    assert "has no wheels" in result.stdout
