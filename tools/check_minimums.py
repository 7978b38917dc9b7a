"""Check that this environment holds the lowest version of each declared dependency.

    python tools/check_minimums.py [--root DIR]

Reads the ``dependencies`` of every ``packages/*/pyproject.toml`` and, for each
third-party requirement with a lower bound (``numpy>=1.23``), compares the version
installed here with the bound: the installed release must be the bound's series
(``1.23`` is met by ``1.23.5``, the first 1.23 with wheels for this Python;
``6.31.1`` only by ``6.31.1``). The ``minimums`` tox env installs the bounds and runs
this first, so the env cannot drift from what the packages declare: raising a bound in
a pyproject without raising it in tox.ini fails here. Optional extras are not checked
(the env installs none). A bound that cannot be installed from a wheel is listed in
``NOT_INSTALLABLE`` with the reason, and reported rather than failed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_LOWER = re.compile(r">=\s*([0-9][0-9.]*)")

# Bounds the env leaves to pip, and why.
NOT_INSTALLABLE = {
    "mpi4py": (
        "mpi4py before 4.1 has no wheels: it builds from source against the site's MPI "
        "(as on clusters). The env takes the newest; its suites run no MPI."
    ),
}


@dataclass(frozen=True)
class Bound:
    distribution: str  # the package declaring it, e.g. rankscribe-writer
    name: str
    minimum: str


def declared_bounds(root: Path) -> list[Bound]:
    """Every ``name>=version`` of the packages' required dependencies (siblings aside)."""
    bounds = []
    for pyproject in sorted((root / "packages").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        for requirement in project.get("dependencies", []):
            parsed = _REQUIREMENT.match(requirement.split(";", 1)[0])
            if parsed is None or parsed.group(1).startswith("rankscribe-"):
                continue
            lower = _LOWER.search(parsed.group(2))
            if lower is not None:
                bounds.append(
                    Bound(
                        project.get("name", pyproject.parent.name),
                        parsed.group(1),
                        lower.group(1).rstrip("."),
                    )
                )
    return bounds


def _release(version: str) -> tuple[int, ...]:
    """The release numbers of a version: 2.9.post0 -> (2, 9), 1.23.5 -> (1, 23, 5)."""
    release = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in release.group(0).split(".")) if release else ()


def meets(installed: str, minimum: str) -> bool:
    """Whether ``installed`` is the ``minimum`` series: 1.23.5 for 1.23, 6.31.1 for 6.31.1."""
    wanted = _release(minimum)
    return _release(installed)[: len(wanted)] == wanted


def check(root: Path) -> tuple[list[str], list[str]]:
    """(problems, notes): one line per bound that is not installed at its minimum."""
    problems: list[str] = []
    notes: list[str] = []
    for bound in declared_bounds(root):
        where = f"{bound.distribution}: {bound.name}>={bound.minimum}"
        try:
            installed = importlib.metadata.version(bound.name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{where}: not installed")
            continue
        if meets(installed, bound.minimum):
            continue
        if bound.name.lower() in NOT_INSTALLABLE:
            notes.append(f"{where}: {installed} installed; {NOT_INSTALLABLE[bound.name.lower()]}")
        else:
            problems.append(f"{where}: {installed} installed, not the declared minimum")
    return problems, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository root (default: this checkout)"
    )
    args = parser.parse_args(argv)
    if not (args.root / "packages").is_dir():
        print(f"--root must be a repository with a packages/ folder; got {args.root}")
        return 2
    problems, notes = check(args.root)
    for note in notes:
        print(f"not checked: {note}")
    if problems:
        print(f"dependencies not at their declared minimum ({len(problems)}):")
        print("\n".join(f"  {problem}" for problem in problems))
        print("\ninstall each at its lower bound (tox.ini, minimums env), or raise the bound")
        return 1
    checked = len(declared_bounds(args.root)) - len(notes)
    print(f"every declared lower bound is installed ({checked} checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
