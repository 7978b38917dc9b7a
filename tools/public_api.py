"""Snapshot of each package's public API, so that a change to it is deliberate.

    python tools/public_api.py [--check]   compare with tools/public_api/<distribution>.txt
    python tools/public_api.py --write     rewrite the snapshots

The public API of a package is every name in the ``__all__`` of the package
and of its public submodules (no ``_``-prefixed component in the dotted path).
Each name gets one line: the signature of a function, the constructor
signature of a class (and one line per public method or attribute), the type
(and value, for plain constants) of anything else. Generated protobuf modules
(``*_pb2``) are listed by name only. All four packages must be importable
(the ``public-api`` tox env installs them); a public module that needs an
optional dependency which is missing is listed from its source instead, with
a note saying so.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import enum
import importlib
import importlib.util
import inspect
import pkgutil
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _signature(obj: Any) -> str:
    try:
        return _clean(str(inspect.signature(obj)))
    except (TypeError, ValueError):
        return "(...)"


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
    """Public members the project's own classes define (not those of builtins)."""
    seen: set[str] = set()
    for owner in cls.__mro__:
        if not owner.__module__.startswith(NAMESPACE):
            continue
        for name, raw in vars(owner).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            yield _member_line(f"{path}.{name}", cls, name, raw)


def _member_line(path: str, cls: type, name: str, raw: Any) -> str:
    if isinstance(raw, property):
        return f"{path}: property"
    if isinstance(raw, classmethod | staticmethod):
        kind = "classmethod" if isinstance(raw, classmethod) else "staticmethod"
        return f"{path}: {kind} {_signature(getattr(cls, name))}"
    if inspect.isfunction(raw):
        return f"{path}: method {_signature(raw)}"
    value = getattr(cls, name)
    if isinstance(value, enum.Enum):
        return f"{path}: member = {_clean(repr(value.value))}"
    return f"{path}: attribute {_describe_value(value)}"


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


def snapshot(package: str) -> str:
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
    header = f"# public API of {package}; after a deliberate change: {WRITE_COMMAND}"
    # By name first, so that a class comes right before its members.
    lines.sort(key=lambda line: (line.split(": ", 1)[0], line))
    return "\n".join([header, *lines]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with the snapshots (default)")
    mode.add_argument("--write", action="store_true", help="rewrite the snapshots")
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository root (default: this checkout)"
    )
    args = parser.parse_args(argv)
    # The packages' own sources come first, so the snapshot describes this checkout.
    sys.path[:0] = [str(src) for src in sorted(args.root.glob("packages/*/src"))]
    snapshots = args.root / "tools" / "public_api"
    snapshots.mkdir(parents=True, exist_ok=True)
    changed: list[str] = []
    broken: list[str] = []
    for distribution, package in distributions(args.root).items():
        path = snapshots / f"{distribution}.txt"
        try:
            current = snapshot(package)
        except ImportError as error:
            print(f"cannot import {package} to read its public API: {error}")
            broken.append(distribution)
            continue
        if args.write:
            path.write_text(current, encoding="utf-8")
            print(f"wrote tools/public_api/{path.name}")
            continue
        recorded = path.read_text(encoding="utf-8") if path.exists() else ""
        if recorded != current:
            changed.append(distribution)
            sys.stdout.writelines(difflib.unified_diff(
                recorded.splitlines(keepends=True), current.splitlines(keepends=True),
                fromfile=f"tools/public_api/{distribution}.txt (recorded)",
                tofile=f"{package} (this checkout)",
            ))
    if broken:
        print(
            f"{', '.join(broken)} must import for its public API to be read: fix the import "
            "above, or install the packages (the public-api tox env installs all four)"
        )
        return 2
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
