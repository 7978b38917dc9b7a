"""Snapshot of each package's public API, so that a change to it is deliberate.

    python tools/public_api.py [--check]   compare with tools/public_api/<distribution>.txt
    python tools/public_api.py --write     rewrite the snapshots
    python tools/public_api.py --count [--snapshots DIR]
                                           public names per package and module (of this
                                           checkout, or of the snapshot files in DIR)

A public signature should name public types only: a parameter, return or
field annotation naming a class, alias or protocol that no package exports,
or a private base class, gets a line ``<name>: ! <type> ... is not public``,
so a new one shows in the diff; ``--strict-types`` fails while any is left.

The public API of a package is every name in the ``__all__`` of the package
and of its public submodules (no ``_``-prefixed component in the dotted path).
Each name gets one line: the signature of a function, the constructor
signature of a class (and one line per public method, property or attribute),
the type (and value, for plain constants) of anything else. Annotations are
recorded as written in the source (``loss: float | None = None``, not the type
of the default), so a changed annotation changes the snapshot: a property by
its return annotation, an attribute or dataclass field by its annotation. Generated protobuf modules
(``*_pb2``) are listed by name only. All five packages must be importable
(the ``public-api`` tox env installs them); a public module that needs an
optional dependency which is missing is listed from its source instead, with
a note saying so.

``--count`` counts the names a package exports (each class, function, constant
or module listed in an ``__all__``; a class's members do not count), split into
the user's API and the sibling-facing modules (``SIBLING_MODULES`` in
tools/check_boundaries.py, docs/contributing.md), which the other rankscribe
packages use and the user's API does not include.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import enum
import functools
import importlib
import importlib.util
import inspect
import pkgutil
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from check_boundaries import SIBLING_MODULES  # type: ignore[import-not-found]  # tools/ at run time

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "rankscribe"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
WRITE_COMMAND = "python tools/public_api.py --write"
_PLAIN = (bool, int, float, str, bytes, type(None))


def distributions(root: Path = ROOT) -> dict[str, str]:
    """Distribution folder -> the package it ships (rankscribe-ranks -> rankscribe.ranks)."""
    found = {}
    for package_dir in sorted((root / "packages").glob(f"*/src/{NAMESPACE}/*/__init__.py")):
        distribution = package_dir.parents[3].name
        found[distribution] = f"{NAMESPACE}.{package_dir.parent.name}"
    return found


def _is_public(dotted: str) -> bool:
    return not any(part.startswith("_") for part in dotted.split("."))


def _is_generated(dotted: str) -> bool:
    return dotted.endswith("_pb2")


def public_modules(package: str) -> Iterator[tuple[str, types.ModuleType | str]]:
    """The package and its public submodules: (name, module), or (name, error) if unimportable."""
    module = importlib.import_module(package)
    yield package, module
    for info in pkgutil.iter_modules(getattr(module, "__path__", []), prefix=f"{package}."):
        if not _is_public(info.name) or _is_generated(info.name):
            continue
        try:
            submodule = importlib.import_module(info.name)
        except ImportError as error:
            yield info.name, f"import needs {error.name or error}"
            continue
        if info.ispkg:
            yield from public_modules(info.name)
        else:
            yield info.name, submodule


def _clean(text: str) -> str:
    """Object addresses change from run to run; they are no part of the API."""
    return _ADDRESS.sub("", text)


class _Written(str):
    """An annotation as written: inspect shows its repr, which is the text unquoted."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def annotation_text(annotation: Any) -> str:
    """An annotation as the source wrote it (a string under ``from __future__ import
    annotations``), or as inspect renders an evaluated one."""
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__
    return inspect.formatannotation(annotation)


def _written(annotation: Any) -> Any:
    if annotation is inspect.Parameter.empty:
        return annotation
    return _Written(annotation_text(annotation))


def _signature(obj: Any) -> str:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    signature = signature.replace(
        parameters=[
            parameter.replace(annotation=_written(parameter.annotation))
            for parameter in signature.parameters.values()
        ],
        return_annotation=_written(signature.return_annotation),
    )
    return _clean(str(signature))


def _describe_value(value: Any) -> str:
    if isinstance(value, _PLAIN):
        return f"{type(value).__name__} = {_clean(repr(value))}"
    return type(value).__name__


def _is_typing_form(obj: Any) -> bool:
    return type(obj).__module__ in ("typing", "typing_extensions") or isinstance(
        obj, types.GenericAlias | types.UnionType
    )


def describe(path: str, obj: Any) -> Iterator[str]:
    """The snapshot lines of one public name."""
    if isinstance(obj, types.ModuleType):
        yield f"{path}: module"
    elif _is_typing_form(obj):
        yield f"{path}: type alias {_clean(repr(obj))}"
    elif inspect.isclass(obj):
        bases = ", ".join(base.__qualname__ for base in obj.__bases__)
        yield f"{path}: class({bases}) {_signature(obj)}"
        yield from _class_members(path, obj)
    elif callable(obj):
        yield f"{path}: {_signature(obj)}"
    else:
        yield f"{path}: {_describe_value(obj)}"


def _class_members(path: str, cls: type) -> Iterator[str]:
    """Public members the project's own classes define (not those of builtins).

    Annotated fields without a class-level value (a dataclass field without a
    default, a NamedTuple field) are members too.
    """
    seen: set[str] = set()
    for owner in cls.__mro__:
        if not owner.__module__.startswith(NAMESPACE):
            continue
        annotations = _own_annotations(owner)
        members = {**dict.fromkeys(annotations, _NO_VALUE), **vars(owner)}
        for name, raw in members.items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            yield _member_line(f"{path}.{name}", cls, name, raw, annotations.get(name))


_NO_VALUE = object()


def _own_annotations(owner: type) -> dict[str, Any]:
    """The annotations a class body writes itself (not inherited ones)."""
    annotations = vars(owner).get("__annotations__", {})
    return dict(annotations) if isinstance(annotations, dict) else {}


def _property_line(path: str, raw: property) -> str:
    returned = inspect.signature(raw.fget).return_annotation if raw.fget else None
    if returned in (None, inspect.Parameter.empty):
        return f"{path}: property"
    return f"{path}: property -> {annotation_text(returned)}"


def _member_line(path: str, cls: type, name: str, raw: Any, annotation: Any) -> str:
    if isinstance(raw, property):
        return _property_line(path, raw)
    if isinstance(raw, classmethod | staticmethod):
        kind = "classmethod" if isinstance(raw, classmethod) else "staticmethod"
        return f"{path}: {kind} {_signature(getattr(cls, name))}"
    if inspect.isfunction(raw):
        return f"{path}: method {_signature(raw)}"
    value = getattr(cls, name, _NO_VALUE) if raw is not _NO_VALUE else _NO_VALUE
    if isinstance(value, enum.Enum):
        return f"{path}: member = {_clean(repr(value.value))}"
    if annotation is None:
        return f"{path}: attribute {_describe_value(value)}"
    line = f"{path}: attribute: {annotation_text(annotation)}"
    if isinstance(value, _PLAIN):
        line += f" = {_clean(repr(value))}"
    return line


def _all_from_source(module_name: str) -> list[str]:
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        return []
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [str(ast.literal_eval(item)) for item in getattr(node.value, "elts", [])]
    return []


def _describe_entry(module: types.ModuleType, name: str, entry: str) -> Iterator[str]:
    if not hasattr(module, entry):
        # ``from package import *`` imports a submodule listed in __all__; so do we.
        try:
            importlib.import_module(f"{name}.{entry}")
        except ImportError:
            yield f"{name}.{entry}: listed in __all__ but not defined"
            return
    yield from describe(f"{name}.{entry}", getattr(module, entry))


def snapshot(package: str, public: dict[int, str] | None = None) -> str:
    """The snapshot text of one package; ``public``: :func:`public_objects` of every package,
    to mark signatures that name a type no package exports (lines with ``: ! ``)."""
    lines: list[str] = []
    for name, module in public_modules(package):
        if isinstance(module, str):
            lines.append(f"{name}: module ({module}; names listed from source)")
            lines.extend(f"{name}.{entry}: ?" for entry in _all_from_source(name))
            continue
        exported = getattr(module, "__all__", None)
        if exported is None:
            lines.append(f"{name}: module without __all__ (exports nothing)")
            continue
        for entry in exported:
            lines.extend(_describe_entry(module, name, entry))
    if public is not None:
        lines.extend(
            f"{path}: ! {problem}"
            for path, problem in (line.split(": ", 1) for line in private_types(package, public))
        )
    header = f"# public API of {package}; after a deliberate change: {WRITE_COMMAND}"
    # By name first, so that a class comes right before its members.
    lines.sort(key=lambda line: (line.split(": ", 1)[0], line))
    return "\n".join([header, *lines]) + "\n"


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def public_objects(packages: list[str]) -> dict[int, str]:
    """id -> dotted public name of every object a package or public submodule exports."""
    found: dict[int, str] = {}
    for package in packages:
        for name, module in public_modules(package):
            if isinstance(module, str):
                continue
            found.setdefault(id(module), name)
            for entry in getattr(module, "__all__", None) or []:
                if hasattr(module, entry):
                    found.setdefault(id(getattr(module, entry)), f"{name}.{entry}")
    return found


def _annotations_of(obj: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(annotation text, the namespace it is written in) of a public name's signatures."""
    if inspect.isclass(obj):
        module = sys.modules.get(obj.__module__)
        namespace = vars(module) if module is not None else {}
        yield from _signature_annotations(obj, namespace)
        for owner in obj.__mro__:
            if not owner.__module__.startswith(NAMESPACE):
                continue
            owner_module = sys.modules.get(owner.__module__)
            owner_namespace = vars(owner_module) if owner_module is not None else {}
            for name, annotation in _own_annotations(owner).items():
                if not name.startswith("_"):
                    yield annotation_text(annotation), owner_namespace
            for name, raw in vars(owner).items():
                if name.startswith("_"):
                    continue
                function = raw.fget if isinstance(raw, property) else raw
                function = getattr(function, "__func__", function)
                if inspect.isfunction(function):
                    yield from _signature_annotations(function, function.__globals__)
    elif inspect.isfunction(obj):
        yield from _signature_annotations(obj, obj.__globals__)


def _signature_annotations(
    obj: Any, namespace: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return
    annotations = [p.annotation for p in signature.parameters.values()]
    for annotation in [*annotations, signature.return_annotation]:
        if annotation is not inspect.Parameter.empty:
            yield annotation_text(annotation), namespace


def _defined_in_project(name: str, value: Any) -> bool:
    """Whether a project module defines ``name`` as ``value`` (a class, alias, TypeVar...)."""
    module_name = getattr(value, "__module__", None)
    if inspect.isclass(value) or inspect.isfunction(value) or isinstance(value, typing.TypeVar):
        return isinstance(module_name, str) and module_name.startswith(f"{NAMESPACE}.")
    # An alias (``NamedArrays = Mapping[...]``) reports its origin's module: look for the
    # project module that assigns it.
    return any(
        vars(module).get(name) is value and name in _assigned_names(module)
        for module_name, module in list(sys.modules.items())
        if module_name.startswith(f"{NAMESPACE}.") and module is not None
    )


def _assigned_names(module: types.ModuleType) -> frozenset[str]:
    """The names a module's top level assigns (aliases, TypeVars, constants)."""
    return _assigned_in(getattr(module, "__file__", None) or "")


@functools.cache
def _assigned_in(path: str) -> frozenset[str]:
    if not path.endswith(".py"):
        return frozenset()
    names: set[str] = set()
    for node in ast.parse(Path(path).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def private_types(package: str, public: dict[int, str]) -> list[str]:
    """Public names whose signatures or base classes name a type that is not public."""
    found: list[str] = []
    for name, module in public_modules(package):
        if isinstance(module, str):
            continue
        for entry in getattr(module, "__all__", None) or []:
            obj = getattr(module, entry, None)
            path = f"{name}.{entry}"
            bases = obj.__bases__ if inspect.isclass(obj) else ()
            for base in bases:
                if base.__module__.startswith(NAMESPACE) and id(base) not in public:
                    found.append(f"{path}: base class {base.__qualname__} is not public")
            for text, namespace in _annotations_of(obj):
                for cited in _private_in(text, namespace, public):
                    found.append(f"{path}: {cited} in {text!r} is not public")
    return sorted(set(found))


def _private_in(text: str, namespace: dict[str, Any], public: dict[int, str]) -> Iterator[str]:
    for dotted in _IDENTIFIER.findall(text):
        head, *rest = dotted.split(".")
        if head not in namespace:
            continue
        value = namespace[head]
        # A name read through a public module (summary_pb2.Event) is public with it.
        through_public = id(value) in public
        for part in rest:
            value = getattr(value, part, None)
            through_public = through_public or id(value) in public
        if value is None or through_public or isinstance(value, types.ModuleType | typing.TypeVar):
            continue  # unresolvable, public, a module, or a type variable (nothing to import)
        if _defined_in_project(dotted.rsplit(".", 1)[-1], value):
            yield dotted


def count_names(text: str) -> dict[str, int]:
    """Public names per module in a snapshot's text: its lines less class members and
    ``!`` notes (a class's members are the lines under a path that is itself a class)."""
    entries = [
        line.split(": ", 1) for line in text.splitlines() if line and not line.startswith("#")
    ]
    classes = {path for path, what in entries if what.startswith("class(")}
    counts: dict[str, int] = {}
    for path, what in entries:
        module = path.rsplit(".", 1)[0]
        if what.startswith("! ") or module in classes:
            continue
        counts[module] = counts.get(module, 0) + 1
    return counts


def is_sibling_module(module: str) -> bool:
    return any(module == name or module.startswith(f"{name}.") for name in SIBLING_MODULES)


def count_table(texts: dict[str, str]) -> str:
    """The ``--count`` table of ``distribution -> snapshot text``."""
    rows = ["package                 user  sibling  (names per module)"]
    user_total = sibling_total = 0
    for distribution, text in texts.items():
        counts = count_names(text)
        user = sum(n for module, n in counts.items() if not is_sibling_module(module))
        sibling = sum(counts.values()) - user
        user_total, sibling_total = user_total + user, sibling_total + sibling
        rows.append(f"{distribution:<22} {user:>5} {sibling:>8}")
        rows.extend(
            f"    {module}: {n}{' (sibling-facing)' if is_sibling_module(module) else ''}"
            for module, n in sorted(counts.items())
        )
    rows.append(f"{'all packages':<22} {user_total:>5} {sibling_total:>8}")
    return "\n".join(rows)


def _count_recorded(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--count --snapshots DIR``: the table of snapshot files (another commit's, say)."""
    if not args.count:
        parser.error("--snapshots goes with --count")
    files = sorted(args.snapshots.glob("*.txt"))
    if not files:
        parser.error(f"--snapshots must be a folder of snapshot .txt files; got {args.snapshots}")
    print(count_table({path.stem: path.read_text(encoding="utf-8") for path in files}))
    return 0


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0912, PLR0915 - one mode per branch
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with the snapshots (default)")
    mode.add_argument("--write", action="store_true", help="rewrite the snapshots")
    mode.add_argument(
        "--count", action="store_true", help="print the public names per package and module"
    )
    parser.add_argument(
        "--snapshots",
        type=Path,
        help="with --count: count the snapshot files in this folder instead of the checkout",
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository root (default: this checkout)"
    )
    parser.add_argument(
        "--strict-types",
        action="store_true",
        help="also fail while a public signature names a type that is not public",
    )
    args = parser.parse_args(argv)
    if args.snapshots is not None:
        return _count_recorded(parser, args)
    # The packages' own sources come first, so the snapshot describes this checkout.
    sys.path[:0] = [str(src) for src in sorted(args.root.glob("packages/*/src"))]
    snapshots = args.root / "tools" / "public_api"
    snapshots.mkdir(parents=True, exist_ok=True)
    changed: list[str] = []
    broken: list[str] = []
    leaks: list[str] = []
    counted: dict[str, str] = {}
    found = distributions(args.root)
    try:
        public: dict[int, str] | None = public_objects(list(found.values()))
    except ImportError:
        public = None  # the package that does not import is named below
    for distribution, package in found.items():
        path = snapshots / f"{distribution}.txt"
        try:
            current = snapshot(package, public)
        except ImportError as error:
            print(f"cannot import {package} to read its public API: {error}")
            broken.append(distribution)
            continue
        leaks.extend(line for line in current.splitlines() if ": ! " in line)
        if args.count:
            counted[distribution] = current
            continue
        if args.write:
            path.write_text(current, encoding="utf-8")
            print(f"wrote tools/public_api/{path.name}")
            continue
        recorded = path.read_text(encoding="utf-8") if path.exists() else ""
        if recorded != current:
            changed.append(distribution)
            sys.stdout.writelines(
                difflib.unified_diff(
                    recorded.splitlines(keepends=True),
                    current.splitlines(keepends=True),
                    fromfile=f"tools/public_api/{distribution}.txt (recorded)",
                    tofile=f"{package} (this checkout)",
                )
            )
    if broken:
        print(
            f"{', '.join(broken)} must import for its public API to be read: fix the import "
            "above, or install the packages (the public-api tox env installs all four)"
        )
        return 2
    if args.count:
        print(count_table(counted))
        return 0
    if leaks:
        print(f"{len(leaks)} public signatures name a type that is not public (lines with ': ! ')")
        if args.strict_types:
            print("\n".join(leaks))
            print("export each type (in an __all__) or annotate with a public one")
            return 1
    if changed:
        print(
            f"\nthe public API of {', '.join(changed)} differs from its snapshot. If the change "
            f"is deliberate, run: {WRITE_COMMAND} (and commit the snapshot)"
        )
        return 1
    if not args.write:
        print("public API matches the snapshots in tools/public_api/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
