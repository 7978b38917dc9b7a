"""Check that the tests reach the code through public names (docs/contributing.md, "Tests").

    python tools/check_tests.py [--root DIR] [--list]

Reads every ``.py`` file under ``tests/`` with :mod:`ast` (it imports nothing) and
finds each place a test reaches into a private module of a rankscribe package (a
dotted path with a ``_``-prefixed component below the package, e.g.
``rankscribe.writer.format._framing``):

- an import statement, at any depth: ``import rankscribe.x._y``,
  ``from rankscribe.x._y import name``, ``from rankscribe.x import _y``;
- a private module named in a string given to ``importlib.import_module``,
  ``monkeypatch.setattr`` / ``delattr`` or ``unittest.mock.patch`` (each imports it).

A test imports a private module only to pin an algorithm that has no public door (a
merge rule, a codec), and says so: each such line carries a comment
``# private: <reason>``, at the end of the statement's (or call's) first line or on a
comment line right above it.
The check fails when one has no reason, or when there are more than ``LIMIT`` of them;
the limit only comes down. ``--list`` prints every one with its reason.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

NAMESPACE = "rankscribe"
# The most private-module imports the tests may hold; lower it as tests move to public
# doors, never raise it.
LIMIT = 25
REASON = "# private:"
# Calls that import the module a string names.
_IMPORTING_CALLS = frozenset({"import_module", "setattr", "delattr", "patch"})


@dataclass(frozen=True)
class PrivateImport:
    path: Path
    line: int
    target: str  # the private dotted path reached
    reason: str | None  # the text after "# private:", None when there is no such comment

    def render(self, root: Path) -> str:
        where = f"{self.path.relative_to(root).as_posix()}:{self.line}"
        because = f" ({self.reason})" if self.reason else ""
        return f"{where}: {self.target}{because}"


def private_part(dotted: str) -> str | None:
    """``dotted`` up to its first private component below the package, if it has one."""
    parts = dotted.split(".")
    if len(parts) < 3 or parts[0] != NAMESPACE:
        return None
    for index, part in enumerate(parts[2:], start=2):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[: index + 1])
    return None


def _targets(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, private path) of each import statement or importing call that reaches one."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found = private_part(alias.name)
                if found:
                    yield node.lineno, found
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found = private_part(node.module) or next(
                (
                    hit
                    for alias in node.names
                    if (hit := private_part(f"{node.module}.{alias.name}"))
                ),
                None,
            )
            if found:
                yield node.lineno, found
        elif isinstance(node, ast.Call) and _call_name(node.func) in _IMPORTING_CALLS:
            for argument in node.args[:1]:
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                    found = private_part(argument.value)
                    if found:
                        yield node.lineno, found


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _comments(source: str) -> dict[int, str]:
    """line -> the comment on it."""
    found: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string
    return found


def _reason(comments: dict[int, str], line: int, lines: list[str]) -> str | None:
    """The reason on ``line``, or on a comment line right above it."""
    above = line - 1
    candidates = [line]
    if above >= 1 and lines[above - 1].lstrip().startswith("#"):
        candidates.append(above)
    for number in candidates:
        comment = comments.get(number, "")
        if REASON in comment:
            return comment.split(REASON, 1)[1].strip() or None
    return None


def find_private_imports(root: Path) -> list[PrivateImport]:
    found: list[PrivateImport] = []
    for path in sorted((root / "tests").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        comments = _comments(source)
        lines = source.splitlines()
        seen: set[int] = set()
        for line, target in _targets(tree):
            if line in seen:
                continue  # one statement reaching two private paths counts once
            seen.add(line)
            found.append(PrivateImport(path, line, target, _reason(comments, line, lines)))
    return sorted(found, key=lambda item: (item.path, item.line))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the repository root (default: this checkout)",
    )
    parser.add_argument(
        "--list", action="store_true", help="print every private import and its reason"
    )
    parser.add_argument(
        "--limit", type=int, default=LIMIT, help=f"the most allowed (default {LIMIT})"
    )
    args = parser.parse_args(argv)
    if not (args.root / "tests").is_dir():
        print(f"--root must be a repository with a tests/ folder; got {args.root}")
        return 2
    found = find_private_imports(args.root)
    if args.list:
        print("\n".join(item.render(args.root) for item in found))
    unexplained = [item for item in found if item.reason is None]
    failed = False
    if unexplained:
        failed = True
        print(
            f"{len(unexplained)} private-module imports in tests without a reason "
            f"(add '{REASON} <the algorithm it pins, which has no public door>'):"
        )
        print("\n".join(f"  {item.render(args.root)}" for item in unexplained))
    if len(found) > args.limit:
        failed = True
        print(
            f"{len(found)} private-module imports in tests, more than the limit of "
            f"{args.limit}: reach the code through its public names"
        )
    if failed:
        print("\nsee docs/contributing.md, Tests")
        return 1
    print(
        f"tests reach private modules on {len(found)} lines (limit {args.limit}), "
        "each with a reason"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
