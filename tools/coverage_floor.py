"""Print the line and branch coverage of each package, and fail under its floor.

    python tools/coverage_floor.py [--root DIR] [--combine FOLDER ENV [ENV ...]]

Reads the combined coverage data (``COVERAGE_FILE``, or ``.coverage`` here) that the
``coverage`` tox env gathered. With ``--combine``, first combines into it the data of
each named tox env, which that env's ``coverage run`` left in ``FOLDER/ENV/`` (tox.ini:
each measured env writes its own folder); an env whose folder holds no data, or only
data older than a source or test file of the checkout, fails the run, naming the envs to
run first. Then prints one row per package of the repository
(``packages/*/src/rankscribe/<package>/``): statements, missed statements, branches,
partly taken branches, and the combined line-and-branch percentage, beside the
package's floor from ``[tool.rankscribe.coverage-floors]`` in the root
``pyproject.toml``. Fails when a package is under its floor, or has no floor, or was
not measured at all. The floors are the measured levels: raise one when a change
raises its package's coverage, so that it cannot silently fall back.
"""

from __future__ import annotations

import argparse
import io
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import coverage
from coverage.exceptions import NoDataError

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "rankscribe"


@dataclass(frozen=True)
class Row:
    package: str
    statements: int
    missed: int
    branches: int
    partial: int
    percent: float


def packages(root: Path) -> list[str]:
    return sorted(p.parent.name for p in root.glob(f"packages/*/src/{NAMESPACE}/*/__init__.py"))


def floors(root: Path) -> dict[str, float]:
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    table = config.get("tool", {}).get(NAMESPACE, {}).get("coverage-floors", {})
    return {str(name): float(value) for name, value in table.items()}


def measure(data: coverage.Coverage, package: str) -> Row | None:
    """The package's TOTAL row of ``coverage report``, or None when nothing was measured."""
    text = io.StringIO()
    try:
        percent = data.report(include=[f"*/src/{NAMESPACE}/{package}/*"], file=text)
    except NoDataError:
        return None
    total = [line for line in text.getvalue().splitlines() if line.startswith("TOTAL")]
    if not total:
        return None
    numbers = total[0].split()[1:-1]
    if len(numbers) < 4:  # a run without branch measurement
        numbers += ["0", "0"]
    statements, missed, branches, partial = (int(n) for n in numbers[:4])
    return Row(package, statements, missed, branches, partial, percent)


def _newest_source(root: Path) -> tuple[float, Path | None]:
    """The latest modification time of a source or test file of the checkout, and its path."""
    newest: tuple[float, Path | None] = (0.0, None)
    for pattern in ("packages/*/src/**/*.py", "tests/**/*.py"):
        for path in root.glob(pattern):
            newest = max(newest, (path.stat().st_mtime, path), key=lambda pair: pair[0])
    return newest


def stale_or_missing(root: Path, folder: Path, envs: list[str]) -> list[str]:
    """What is wrong with each env's data under ``folder``: none there, or older than the
    newest source or test file (measured before a change). Empty when every env's is fresh."""
    changed, changed_path = _newest_source(root)
    problems: list[str] = []
    for env in envs:
        files = sorted((folder / env).glob(".coverage.*"))
        if not files:
            problems.append(f"{env}: no coverage data in {folder / env}")
        elif changed_path is not None and min(f.stat().st_mtime for f in files) < changed:
            where = changed_path.relative_to(root).as_posix()
            problems.append(f"{env}: its coverage data is older than {where}")
    return problems


def combine(root: Path, folder: Path, envs: list[str]) -> list[str]:
    """Combine each env's data into this run's data file (kept in place, so that this
    env can run again); the problems that stop it, if any."""
    problems = stale_or_missing(root, folder, envs)
    if problems:
        return problems
    data = coverage.Coverage()
    data.combine([str(folder / env) for env in envs], keep=True)
    data.save()
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository root (default: this checkout)"
    )
    parser.add_argument(
        "--combine",
        nargs="+",
        metavar=("FOLDER", "ENV"),
        help="combine the data that each tox ENV (or comma-separated list) left in FOLDER/ENV/",
    )
    args = parser.parse_args(argv)
    if args.combine is not None:
        if len(args.combine) < 2:
            parser.error("--combine takes a FOLDER and at least one ENV")
        # An ENV may be a comma-separated list (tox.ini hands over the env's `depends`).
        folder, *listed = args.combine
        envs = [env for names in listed for env in names.split(",") if env]
        problems = combine(args.root, Path(folder), envs)
        if problems:
            rerun = dict.fromkeys([problem.split(":")[0] for problem in problems] + ["coverage"])
            print("\n".join(problems))
            print(
                f"run them (again) first: tox -e {','.join(rerun)} "
                "(a plain `tox` runs every measured env before the coverage env)"
            )
            return 1
    limits = floors(args.root)
    data = coverage.Coverage()
    data.load()
    print(f"{'package':<10} {'stmts':>6} {'miss':>6} {'branch':>6} {'part':>5} {'cover':>7}  floor")
    failed: list[str] = []
    for package in packages(args.root):
        row = measure(data, package)
        floor = limits.get(package)
        if row is None:
            print(f"{package:<10} not measured")
            failed.append(f"{package}: no coverage data (did its tests run under coverage?)")
            continue
        print(
            f"{package:<10} {row.statements:>6} {row.missed:>6} {row.branches:>6} "
            f"{row.partial:>5} {row.percent:>6.1f}%  {'-' if floor is None else f'{floor:g}%'}"
        )
        if floor is None:
            failed.append(f"{package}: no floor in [tool.{NAMESPACE}.coverage-floors]")
        elif row.percent < floor:
            failed.append(f"{package}: {row.percent:.1f}% is under its floor of {floor:g}%")
    if failed:
        print("\n".join(["", *failed]))
        return 1
    print("\nevery package is at or above its coverage floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
