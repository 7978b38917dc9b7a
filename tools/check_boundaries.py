"""Check the package boundaries described in docs/contributing.md.

    python tools/check_boundaries.py [--root DIR]

Looks at every ``packages/*/src/rankscribe/<package>/`` under the root (the
repository by default) and fails, listing each offender, when:

- modules import each other in a cycle, within a package or across packages;
  or the units of a package do, its folders (sub-packages) and top-level modules:
  ``index/`` importing ``query/`` while ``query/`` imports ``index/`` is a cycle even
  when no two modules are in one, and so is ``files.py`` importing ``layout/`` while
  ``layout/`` imports ``files.py``.
  Every import statement counts, wherever it stands: at module level, inside a
  function or method, and under ``if TYPE_CHECKING:``. An import inside a
  function still makes the module depend on the other at run time; one under
  ``TYPE_CHECKING`` makes the type checker read the other module first. Both
  hide a layering problem, so neither is let off (see docs/contributing.md);
- a package imports a rankscribe package the allowed package graph does not
  give it (collector -> lineage -> jobview -> writer -> ranks: ranks is the ground floor
  and imports no sibling, each floor may use any floor below it; nothing
  points back);
- a package imports a sibling-facing module that is another package's door
  (``SIBLING_READERS``: the job view's ``feed`` is the collector's, its ``parts`` the
  lineage manager's);
- a module imports from another rankscribe package anything but its public API
  or its sibling-facing modules: the target is the package itself, a module
  named in ``SIBLING_MODULES`` (documented in docs/contributing.md), or a public
  module with an ``__all__`` (no ``_``-prefixed component in its path), and each
  imported name is in the target's ``__all__`` or is one of those modules;
- a sibling-facing module is missing, is not named in docs/contributing.md, or has
  a name listed in its package's top-level ``__all__`` (the user's API);
- a module outside ``rankscribe.writer`` frames events: it uses one of the writer's
  framing or wire primitives (``frame``, ``varint``, ``field_key``, ... : imported by
  name, or as an attribute of a writer module it imported), or masks a CRC the way
  record framing does (the constant ``0xA282EAD8``, or a rotation by 15 and 17 bits).
  The writer is the only event writer; the other packages go through
  ``rankscribe.writer.eventfiles`` (docs/file-format.md, "Who writes event files").

The check reads the source with :mod:`ast`; it imports nothing.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

NAMESPACE = "rankscribe"
# The rankscribe packages each package may import (besides itself); docs/contributing.md.
ALLOWED_PACKAGES: dict[str, frozenset[str]] = {
    "ranks": frozenset(),
    "writer": frozenset({"ranks"}),
    "jobview": frozenset({"writer", "ranks"}),
    "lineage": frozenset({"jobview", "writer", "ranks"}),
    "collector": frozenset({"lineage", "jobview", "writer", "ranks"}),
}

# Modules public to the sibling packages and not part of the user's API: what one
# package needs of another and a user does not (docs/contributing.md, "Sibling-facing
# modules"). Their names stay out of the top-level ``__all__``; tools/public_api.py
# counts them apart from the user's API.
SIBLING_MODULES: tuple[str, ...] = (
    f"{NAMESPACE}.ranks.arguments",
    f"{NAMESPACE}.ranks.exits",
    f"{NAMESPACE}.ranks.files",
    f"{NAMESPACE}.ranks.imports",
    f"{NAMESPACE}.ranks.jsondata",
    f"{NAMESPACE}.ranks.launchers",
    f"{NAMESPACE}.ranks.testing",
    f"{NAMESPACE}.ranks.tree",
    f"{NAMESPACE}.ranks.waits",
    f"{NAMESPACE}.writer.deferred",
    f"{NAMESPACE}.writer.eventfiles",
    f"{NAMESPACE}.writer.events",
    f"{NAMESPACE}.writer.files",
    f"{NAMESPACE}.writer.histograms",
    f"{NAMESPACE}.writer.operators",
    f"{NAMESPACE}.jobview.feed",
    f"{NAMESPACE}.jobview.parts",
    f"{NAMESPACE}.jobview.protocol",
    f"{NAMESPACE}.lineage.recording",
    f"{NAMESPACE}.collector.testing",
)
# A sibling module that one package is the door for: the collector hands its numbers to
# the job view through ``feed`` only, and ``parts`` is the lineage manager's alone; the
# live view's ``protocol`` is for tools and tests, no package's.
SIBLING_READERS: dict[str, frozenset[str]] = {
    f"{NAMESPACE}.jobview.feed": frozenset({f"{NAMESPACE}.collector"}),
    f"{NAMESPACE}.jobview.parts": frozenset({f"{NAMESPACE}.lineage"}),
    f"{NAMESPACE}.jobview.protocol": frozenset(),
}
CONTRIBUTING = Path("docs") / "contributing.md"


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. rankscribe.writer.format._names
    path: Path
    package: str  # e.g. rankscribe.writer
    is_package: bool  # an __init__.py


# The package that writes event files, and what it frames them with: a module of another
# package that uses these builds event records itself (docs/file-format.md).
WRITER_PACKAGE = f"{NAMESPACE}.writer"
FRAMING_NAMES = frozenset(
    {
        "frame",
        "frame_parts",
        "frame_chunks",
        "RECORD_OVERHEAD",
        "varint",
        "field_key",
        "length_delimited",
        "crc32c",
        "mask",
        "masked_crc32c",
    }
)
# TFRecord's CRC mask: rotate right by 15 bits (>> 15 | << 17), add this constant.
CRC_MASK_DELTA = 0xA282EAD8


@dataclass
class Report:
    cycles: list[str] = field(default_factory=list)
    folder_cycles: list[str] = field(default_factory=list)
    package_imports: list[str] = field(default_factory=list)
    private_imports: list[str] = field(default_factory=list)
    sibling_modules: list[str] = field(default_factory=list)
    event_framing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.cycles
            or self.folder_cycles
            or self.package_imports
            or self.private_imports
            or self.sibling_modules
            or self.event_framing
        )

    def render(self) -> str:
        sections = [
            ("import cycles (every import counts, in functions too)", self.cycles),
            (
                "import cycles between units (sub-packages and top-level modules)",
                self.folder_cycles,
            ),
            ("imports against the package graph", self.package_imports),
            ("imports of non-public names from another package", self.private_imports),
            ("sibling-facing modules (SIBLING_MODULES)", self.sibling_modules),
            (
                "event framing outside the writer (use rankscribe.writer.eventfiles)",
                self.event_framing,
            ),
        ]
        lines: list[str] = []
        for title, entries in sections:
            if entries:
                lines.append(f"{title} ({len(entries)}):")
                lines.extend(f"  {entry}" for entry in entries)
        return "\n".join(lines)


def find_modules(root: Path) -> dict[str, Module]:
    """Every ``.py`` module of every package under ``root/packages``, by dotted name."""
    modules: dict[str, Module] = {}
    for src in sorted((root / "packages").glob(f"*/src/{NAMESPACE}")):
        for package_dir in sorted(p for p in src.iterdir() if p.is_dir()):
            if not (package_dir / "__init__.py").is_file():
                continue
            package = f"{NAMESPACE}.{package_dir.name}"
            for path in sorted(package_dir.rglob("*.py")):
                parts = path.relative_to(src.parent).with_suffix("").parts
                is_package = parts[-1] == "__init__"
                name = ".".join(parts[:-1] if is_package else parts)
                modules[name] = Module(name, path, package, is_package)
    return modules


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def all_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth (functions, classes, ``if``s)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def imported_from(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` statement reads from."""
    if node.level == 0:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def targets(
    module: Module, node: ast.Import | ast.ImportFrom, modules: dict[str, Module]
) -> Iterator[str]:
    """The modules an import statement makes Python execute (parents left out)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    source = imported_from(module, node)
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        yield submodule if submodule in modules else source


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    """Module -> the rankscribe modules it imports, by any import statement."""
    graph: dict[str, set[str]] = {}
    for module in modules.values():
        edges: set[str] = set()
        for node in all_imports(_parse(module.path)):
            for target in targets(module, node, modules):
                if target in modules:
                    edges.add(target)
        graph[module.name] = edges
    return graph


def folder_of(module: Module) -> str | None:
    """The unit one level below the package that a module belongs to, if any.

    ``rankscribe.lineage.index._cache`` is in the sub-package ``rankscribe.lineage.index``;
    a module directly in the package (``rankscribe.lineage._checks``) is a unit of its
    own, so a top-level module and a sub-package that import each other (``files.py``
    importing ``layout/`` while ``layout/`` imports ``files.py``) are a cycle even when
    no two modules are in one. The package's ``__init__`` is in none: it gathers the
    package's API from every unit.
    """
    depth = len(module.package.split(".")) + 1
    parts = module.name.split(".")
    if len(parts) < depth or (len(parts) == depth - 1):
        return None
    return ".".join(parts[:depth])


def folder_graph(modules: dict[str, Module], graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Unit -> the other units its modules import (sub-packages and top-level modules)."""
    folders: dict[str, set[str]] = {}
    for name, edges in graph.items():
        source = folder_of(modules[name])
        if source is None:
            continue
        reached = {folder_of(modules[edge]) for edge in edges}
        folders.setdefault(source, set()).update(
            folder for folder in reached if folder is not None and folder != source
        )
    for targets in list(folders.values()):
        for folder in targets:
            folders.setdefault(folder, set())
    return folders


def find_cycles(graph: dict[str, set[str]]) -> list[str]:
    """One line per cycle: the modules in import order, back to the first."""
    lines = []
    for component in strongly_connected(graph):
        path = shortest_cycle(graph, component)
        line = " -> ".join([*path, path[0]])
        others = sorted(set(component) - set(path))
        if others:
            line += f" (same cycle group: {', '.join(others)})"
        lines.append(line)
    return lines


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """The shortest import path from the component's first module back to itself."""
    start = component[0]
    members = set(component)
    parents: dict[str, str] = {}
    queue = [start]
    for node in queue:
        for other in sorted(graph[node] & members):
            if other == start:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return path[::-1]
            if other not in parents:
                parents[other] = node
                queue.append(other)
    return component  # not reached: a strongly connected component has a cycle


def find_package_imports(modules: dict[str, Module], graph: dict[str, set[str]]) -> list[str]:
    found = []
    for name, edges in sorted(graph.items()):
        own = modules[name].package.split(".")[1]
        allowed = ALLOWED_PACKAGES.get(own)
        for target in sorted(edges):
            other = modules[target].package.split(".")[1]
            if other == own or allowed is None or other in allowed:
                continue
            found.append(f"{name} imports {target}: {own} may not import {other}")
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components with more than one module, or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def declared_all(module: Module) -> set[str] | None:
    """The names a module lists in ``__all__`` (literal lists and ``+=`` only)."""
    names: set[str] | None = None
    for node in _parse(module.path).body:
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names, value = set(), node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and (
            isinstance(node.target, ast.Name) and node.target.id == "__all__"
        ):
            names, value = names or set(), node.value
        if names is not None and isinstance(value, ast.List | ast.Tuple):
            names |= {
                item.value
                for item in value.elts
                if isinstance(item, ast.Constant) and isinstance(item.value, str)
            }
    return names


def _package_of(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != NAMESPACE:
        return None
    return ".".join(parts[:2])


def find_private_imports(modules: dict[str, Module]) -> list[str]:
    packages = {module.package for module in modules.values()}
    found: list[str] = []
    for module in modules.values():
        for node in all_imports(_parse(module.path)):
            where = f"{module.name} (line {node.lineno})"
            problems = _check(module, node, modules, packages)
            found.extend(f"{where}: {problem}" for problem in problems)
    return found


def _check(
    module: Module,
    node: ast.Import | ast.ImportFrom,
    modules: dict[str, Module],
    packages: set[str],
) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if _foreign(alias.name, module, packages):
                yield from _private_path(alias.name)
                readers = SIBLING_READERS.get(alias.name)
                if readers is not None and module.package not in readers:
                    yield (
                        f"imports {alias.name}, the sibling module of "
                        f"{', '.join(sorted(readers))} only"
                    )
        return
    source = imported_from(module, node)
    if not _foreign(source, module, packages):
        return
    readers = SIBLING_READERS.get(source)
    if readers is not None and module.package not in readers:
        yield f"imports from {source}, the sibling module of {', '.join(sorted(readers))} only"
        return
    private = list(_private_path(source))
    if private:
        yield from private
        return
    target = modules.get(source)
    if target is None:
        yield f"imports from {source}, which is not a module of any package"
        return
    if not _importable(source, modules):
        yield (
            f"imports from {source}, which is neither a public module with an __all__ "
            "nor a sibling-facing module (SIBLING_MODULES)"
        )
        return
    public = declared_all(target) or set()
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        if alias.name in public or (
            submodule in modules
            and not alias.name.startswith("_")
            and _importable(submodule, modules)
        ):
            continue
        yield f"imports {alias.name} from {source}, which is not in its __all__"


def _importable(name: str, modules: dict[str, Module]) -> bool:
    """Whether another package may import from module ``name``: the package itself, a
    sibling-facing module, or a public module that declares an ``__all__``."""
    module = modules.get(name)
    if module is None or any(part.startswith("_") for part in name.split(".")):
        return False
    if name == module.package or name in SIBLING_MODULES:
        return True
    return declared_all(module) is not None


def find_sibling_module_problems(root: Path, modules: dict[str, Module]) -> list[str]:
    """Each sibling-facing module exists, is documented, and stays out of the user's API."""
    contributing = root / CONTRIBUTING
    documented = contributing.read_text(encoding="utf-8") if contributing.is_file() else None
    packages = {module.package for module in modules.values()}
    found: list[str] = []
    for name in SIBLING_MODULES:
        module = modules.get(name)
        if module is None:
            # A tree without the repository's docs (a test's) need not hold every one.
            if documented is not None and _package_of(name) in packages:
                found.append(f"{name} is not a module of its package")
            continue
        if documented is not None and f"`{name}`" not in documented:
            found.append(f"{name} is not named in {CONTRIBUTING.as_posix()}")
        package = modules.get(module.package)
        top_level = (declared_all(package) or set()) if package is not None else set()
        if name.rsplit(".", 1)[1] in top_level:
            found.append(f"{module.package}.__all__ lists the sibling module {name}")
        exported = (declared_all(module) or set()) & top_level
        found.extend(
            f"{module.package}.__all__ lists {entry}, which {name} exports to the siblings"
            for entry in sorted(exported)
        )
    return found


def _foreign(name: str, module: Module, packages: set[str]) -> bool:
    package = _package_of(name)
    return package is not None and package in packages and package != module.package


def _private_path(name: str) -> Iterator[str]:
    private = [part for part in name.split(".") if part.startswith("_")]
    if private:
        yield f"imports from {name}, a private module ({', '.join(private)})"


def find_event_framing(modules: dict[str, Module]) -> list[str]:
    """Modules outside the writer that frame events themselves (see the module docstring)."""
    found: list[str] = []
    for module in modules.values():
        if module.package == WRITER_PACKAGE:
            continue
        uses = sorted(set(_framing(_parse(module.path))))
        found.extend(f"{module.name} (line {line}): {what}" for line, what in uses)
    return sorted(found, key=_by_module_and_line)


def _by_module_and_line(entry: str) -> tuple[str, int]:
    name, _, rest = entry.partition(" (line ")
    return name, int(rest.split(")", 1)[0])


def _framing(tree: ast.Module) -> Iterator[tuple[int, str]]:
    bound: dict[str, str] = {}  # a local name -> the dotted name it stands for
    for statement in all_imports(tree):
        yield from _framing_imports(statement, bound)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FRAMING_NAMES:
            dotted = _dotted(node.value, bound)
            if dotted is not None and _within(dotted, WRITER_PACKAGE):
                yield node.lineno, f"uses {dotted}.{node.attr} (only the writer frames events)"
        elif isinstance(node, ast.Constant) and _is_mask_constant(node):
            yield node.lineno, "masks a CRC as record framing does (0xA282EAD8)"
        elif isinstance(node, ast.BinOp) and _is_rotation_by_15(node):
            yield node.lineno, "rotates a CRC by 15 bits as record framing's mask does"


def _framing_imports(
    statement: ast.Import | ast.ImportFrom, bound: dict[str, str]
) -> Iterator[tuple[int, str]]:
    """Framing names a statement imports from the writer; note the names it binds."""
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            local = alias.asname or alias.name.split(".")[0]
            bound[local] = alias.name if alias.asname else local
        return
    source = statement.module or ""
    if statement.level or not _within(source, WRITER_PACKAGE):
        return
    for alias in statement.names:
        if alias.name in FRAMING_NAMES:
            yield (
                statement.lineno,
                f"takes {alias.name} from {source} (only the writer frames events)",
            )
        bound[alias.asname or alias.name] = f"{source}.{alias.name}"


def _is_mask_constant(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant) and type(node.value) is int and node.value == CRC_MASK_DELTA
    )


def _is_rotation_by_15(node: ast.BinOp) -> bool:
    """``(x >> 15) | (x << 17)``, either way round and under masks: the CRC mask's rotation."""
    if not isinstance(node.op, ast.BitOr):
        return False
    return _shifts(node.left) | _shifts(node.right) == {(ast.RShift, 15), (ast.LShift, 17)}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The dotted name an expression of names and attributes stands for, if it is one."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, bound)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _shifts(node: ast.expr) -> set[tuple[type, object]]:
    """The (operator, constant) of a shift by a constant, looked for under masks."""
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.RShift | ast.LShift) and isinstance(node.right, ast.Constant):
            return {(type(node.op), node.right.value)}
        if isinstance(node.op, ast.BitAnd):
            return _shifts(node.left) | _shifts(node.right)
    return set()


def check(root: Path) -> Report:
    modules = find_modules(root)
    graph = import_graph(modules)
    return Report(
        cycles=find_cycles(graph),
        folder_cycles=find_cycles(folder_graph(modules, graph)),
        package_imports=find_package_imports(modules, graph),
        private_imports=find_private_imports(modules),
        sibling_modules=find_sibling_module_problems(root, modules),
        event_framing=find_event_framing(modules),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the repository root (default: this checkout)",
    )
    args = parser.parse_args(argv)
    if not (args.root / "packages").is_dir():
        print(f"--root must be a repository with a packages/ folder; got {args.root}")
        return 2
    report = check(args.root)
    if report.ok:
        print(
            "package boundaries hold: no import cycle, "
            "the package graph kept, public or sibling-facing imports only, "
            "events framed by the writer alone"
        )
        return 0
    print(report.render())
    print("\nsee docs/contributing.md for the rules")
    return 1


if __name__ == "__main__":
    sys.exit(main())
