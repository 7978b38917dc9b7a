"""Check that the documentation matches the code (docs/contributing.md).

    python tools/check_docs.py [--root DIR]

Reads ``docs/*.md``, the top-level ``README.md`` and each ``packages/*/README.md``
and fails, listing each problem with its page and line, when:

- a page in ``docs/`` is not linked from ``docs/README.md`` (the index);
- a relative link (``[text](target)``) points at a file that does not exist;
- a cited module file does not exist: a path ending in ``.py`` with a folder
  (``packages/.../x.py``, ``tools/x.py``, or relative to the ``rankscribe``
  namespace: ``writer/_framing.py``, ``job/_verdicts.py``), or a private
  module's bare file name (``_histogram.py``);
- a cited dotted name under one of the packages (``rankscribe.writer.files``,
  ``rankscribe.ranks.split_evenly``, ``from rankscribe.collector import X``) does
  not import or has no such attribute, or names a member of a public module that
  the module's ``__all__`` does not list (a page must not present a private name
  as public). Dotted names under ``rankscribe.`` that are not one of the packages
  (an entry-point group such as ``rankscribe.graph_builders``) and logger globs
  (``rankscribe.ranks.*``) are not Python names and are left alone;
- a cited package folder (``rankscribe/jobview/job/``, ``jobview/job/``) does not
  exist; a module map (the paragraph after ``<!-- module map: <folder> -->``) leaves
  out a module or sub-folder of its folder, or names one that is not there;
- a table with a ``depends on`` column (docs/contributing.md, the READMEs) states
  dependencies of a distribution other than its ``pyproject.toml`` declares (every
  required one named; an extra's may be).

The packages are imported from this checkout's ``packages/*/src``; their third-party
dependencies must be installed (the ``public-api`` tox env does both).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
import sys
import tomllib
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "rankscribe"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = re.compile(rf"(?<![\w./-]){NAMESPACE}(?:\.{_IDENT})+(?!\w)(\.\*)?")
_FROM_IMPORT = re.compile(rf"\bfrom\s+({NAMESPACE}(?:\.{_IDENT})+)\s+import\s+\(?([\w ,]+)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_PY_PATH = re.compile(r"(?<![\w./*-])((?:[\w.-]+/)*[\w-]+\.py)(?![\w/])")
_SKIPPED_DIRS = {".git", ".tox", ".venv", "node_modules", "__pycache__"}


@dataclass(frozen=True)
class Problem:
    page: str
    line: int
    text: str

    def __str__(self) -> str:
        where = f"{self.page}:{self.line}" if self.line else self.page
        return f"{where}: {self.text}"


def pages(root: Path) -> list[Path]:
    """The pages checked: docs/**/*.md, README.md, packages/*/README.md."""
    found = sorted((root / "docs").rglob("*.md"))
    found += [root / "README.md"] if (root / "README.md").is_file() else []
    found += sorted((root / "packages").glob("*/README.md"))
    return found


def packages(root: Path) -> dict[str, Path]:
    """Package name (writer, ranks, ...) -> its folder under the namespace."""
    return {
        init.parent.name: init.parent
        for init in sorted((root / "packages").glob(f"*/src/{NAMESPACE}/*/__init__.py"))
    }


def unindexed_pages(root: Path) -> list[Problem]:
    index = root / "docs" / "README.md"
    if not index.is_file():
        return [Problem("docs/README.md", 0, "the index of docs/ is missing")]
    linked = set()
    for target in _LINK.findall(index.read_text(encoding="utf-8")):
        path = target.split("#", 1)[0]
        if path:
            linked.add((index.parent / path).resolve())
    return [
        Problem(_relative(root, page), 0, "not linked from docs/README.md")
        for page in sorted((root / "docs").rglob("*.md"))
        if page != index and page.resolve() not in linked
    ]


def _relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def broken_links(root: Path, page: Path, line: int, text: str) -> Iterator[Problem]:
    for target in _LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            yield Problem(_relative(root, page), line, f"link to {target}: no such file")


def module_paths(root: Path, page: Path, line: int, text: str) -> Iterator[Problem]:
    """``.py`` paths in code spans or in link targets that name no file of the checkout."""
    spans = _CODE.findall(text) + _LINK.findall(text)
    for span in spans:
        for cited in _PY_PATH.findall(span):
            if "/" not in cited and not cited.startswith("_"):
                continue  # a bare script name in a command (python train.py)
            if "..." in cited:
                continue  # a pattern (packages/.../x.py), not a path
            if not _py_file_exists(root, cited):
                yield Problem(_relative(root, page), line, f"{cited}: no such module file")


def _py_file_exists(root: Path, cited: str) -> bool:
    if "/" not in cited:
        return any(
            not _SKIPPED_DIRS & set(found.relative_to(root).parts)
            for found in (root / "packages").rglob(cited)
        )
    namespace_dirs = list((root / "packages").glob(f"*/src/{NAMESPACE}"))
    candidates = [root / cited]
    candidates += [src / cited for src in namespace_dirs]
    candidates += [package / cited for src in namespace_dirs for package in src.iterdir()]
    return any(path.is_file() for path in candidates)


def cited_names(text: str, known: set[str]) -> Iterator[str]:
    """The dotted names under one of the packages that a line cites."""
    for match in _DOTTED.finditer(text):
        if match.group(1):
            continue  # a logger glob such as rankscribe.ranks.*
        name = match.group(0)
        if name.split(".")[1] in known:
            yield name
    for source, names in _FROM_IMPORT.findall(text):
        if source.split(".")[1] not in known:
            continue
        for entry in names.split(","):
            imported = entry.split(" as ")[0].strip()
            if re.fullmatch(_IDENT, imported):
                yield f"{source}.{imported}"


def resolve(name: str) -> str | None:
    """None when ``name`` imports and is public where cited; otherwise what is wrong."""
    parts = name.split(".")
    try:
        obj: object = importlib.import_module(".".join(parts[:2]))
    except ImportError as error:
        return f"cannot import {'.'.join(parts[:2])}: {error}"
    for index in range(2, len(parts)):
        owner, attribute = ".".join(parts[:index]), parts[index]
        if isinstance(obj, types.ModuleType):
            optional = _optional_framework_module(owner, attribute, parts[index + 1 :])
            if optional is not None:
                return optional or None
            problem = _module_member(owner, obj, attribute)
            if problem is not None:
                return problem
            obj = getattr(obj, attribute, None) or importlib.import_module(f"{owner}.{attribute}")
        elif hasattr(obj, attribute):
            obj = getattr(obj, attribute)
        else:
            return f"{owner} has no attribute {attribute}"
    return None


def _optional_framework_module(  # noqa: PLR0911 - one answer per kind of module
    owner: str, attribute: str, rest: list[str]
) -> str | None:
    """For a module that imports a framework this env lacks (the collector's integrations).

    None when ``owner.attribute`` is not such a module (check it as usual); "" when it is
    and the name cited after it is in its ``__all__`` (read from its source, as
    ``tools/public_api.py`` does); otherwise what is wrong.
    """
    if hasattr(sys.modules.get(owner), attribute):
        return None
    try:
        importlib.import_module(f"{owner}.{attribute}")
    except ModuleNotFoundError as error:
        if error.name is None or error.name.startswith("rankscribe"):
            return None
    except ImportError:
        return None
    else:
        return None
    spec = importlib.util.find_spec(f"{owner}.{attribute}")
    if spec is None or spec.origin is None:
        return None
    exported: list[str] = []
    for node in ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            exported = [str(item) for item in ast.literal_eval(node.value)]
    if rest and rest[0] not in exported:
        return f"{rest[0]} is not in {owner}.{attribute}.__all__ (not public)"
    return ""


def _module_member(owner: str, module: types.ModuleType, attribute: str) -> str | None:
    if not hasattr(module, attribute):
        return _submodule(owner, attribute)
    value = getattr(module, attribute)
    private = any(part.startswith("_") for part in [*owner.split("."), attribute])
    if private or isinstance(value, types.ModuleType):
        return None
    exported = getattr(module, "__all__", None)
    if exported is None:
        return f"{owner} has no __all__, so {attribute} is not public"
    if attribute not in exported:
        return f"{attribute} is not in {owner}.__all__ (not public)"
    return None


def _submodule(owner: str, attribute: str) -> str | None:
    """None when ``owner.attribute`` is a submodule that imports."""
    try:
        importlib.import_module(f"{owner}.{attribute}")
    except ModuleNotFoundError as error:
        if error.name == f"{owner}.{attribute}":
            return f"{owner} has no {attribute}"
        return f"cannot import {owner}.{attribute}: {error}"
    except ImportError as error:
        return f"cannot import {owner}.{attribute}: {error}"
    return None


# -- what the docs say about the structure: folders, module maps, dependencies --

PACKAGE_NAMES = ("writer", "ranks", "jobview", "lineage", "collector")
_FOLDER = re.compile(
    rf"^(?:packages/[\w.-]+/|{NAMESPACE}/|(?:{'|'.join(PACKAGE_NAMES)})/)(?:[\w.-]+/)*$"
)
_MAP_MARK = re.compile(r"<!--\s*module map:\s*(\S+)\s*-->")
_MODULE = re.compile(r"(?<![\w.])(_?\w+\.py|_?\w+/)(?![\w/])")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")

Found = tuple[int, str]
"""A line number of the page and what is wrong there."""


def find_folder(root: Path, cited: str) -> Path | None:
    """The folder of the checkout that ``cited`` names, if any."""
    namespace_dirs = sorted((root / "packages").glob(f"*/src/{NAMESPACE}"))
    candidates = [root / cited]
    candidates += [src.parent / cited for src in namespace_dirs]
    candidates += [src / cited for src in namespace_dirs]
    return next((path for path in candidates if path.is_dir()), None)


def folder_paths(root: Path, lines: list[str]) -> Iterator[Found]:
    """Package folders cited in code spans that do not exist."""
    for number, text in enumerate(lines, 1):
        for span in _CODE.findall(text):
            if _FOLDER.match(span) and find_folder(root, span) is None:
                yield number, f"{span}: no such package folder"


def _folder_contents(folder: Path) -> set[str]:
    names = {path.name for path in folder.glob("*.py") if path.name != "__init__.py"}
    names |= {
        f"{path.name}/"
        for path in folder.iterdir()
        if path.is_dir() and (path / "__init__.py").is_file()
    }
    return names


def module_maps(root: Path, lines: list[str]) -> Iterator[Found]:
    """Module maps that leave out a module of their folder, or name one it lacks."""
    for number, text in enumerate(lines, 1):
        mark = _MAP_MARK.fullmatch(text.strip())  # a comment line of its own, not a mention
        if mark is None:
            continue
        cited = mark.group(1)
        folder = find_folder(root, cited)
        if folder is None:
            yield number, f"module map of {cited}: no such package folder"
            continue
        paragraph: list[str] = []
        for following in lines[number:]:
            if not following.strip():
                break
            paragraph.append(following)
        named = {
            found.rsplit("/", 2)[-2] + "/" if found.endswith("/") else found.rsplit("/", 1)[-1]
            for span in _CODE.findall(" ".join(paragraph))
            for found in _MODULE.findall(span)
        }
        present = _folder_contents(folder)
        missing = sorted(present - named)
        if missing:
            yield number, f"module map of {cited} leaves out {', '.join(missing)}"
        unknown = sorted(name for name in named - present if name.endswith(".py"))
        if unknown:
            yield number, f"module map of {cited} names {', '.join(unknown)}, not in it"


def declared_dependencies(pyproject: Path) -> tuple[set[str], set[str]]:
    """(required, from extras) distribution names of a ``pyproject.toml``, normalised."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    required = {_normalised(item) for item in project.get("dependencies", [])}
    extras = {
        _normalised(item)
        for items in project.get("optional-dependencies", {}).values()
        for item in items
    }
    return required, extras


def _normalised(requirement: str) -> str:
    found = _REQUIREMENT.match(requirement.replace("`", ""))
    return re.sub(r"[-_.]+", "-", found.group(1)).lower() if found else requirement.strip()


def _stated(cell: str) -> set[str]:
    """The distributions a ``depends on`` cell names: the first word of each item
    (``nothing`` names none: a package on the standard library alone)."""
    names = set()
    for item in re.split(r"[,;]", cell):
        name = _normalised(item)
        if not name or name == "nothing":
            continue
        names.add(f"rankscribe-{name}" if name in PACKAGE_NAMES else name)
    return names


def dependency_tables(root: Path, lines: list[str]) -> Iterator[Found]:
    """Rows of ``depends on`` tables that differ from the distribution's pyproject.toml."""
    column: int | None = None
    for number, text in enumerate(lines, 1):
        cells = [cell.strip() for cell in text.strip().strip("|").split("|")]
        if not text.lstrip().startswith("|"):
            column = None
            continue
        if "depends on" in cells:
            column = cells.index("depends on")
            continue
        if column is None or column >= len(cells):
            continue
        distribution = next(
            (m.group(0) for cell in cells for m in [re.search(r"rankscribe-\w+", cell)] if m),
            None,
        )
        pyproject = root / "packages" / str(distribution) / "pyproject.toml"
        if distribution is None or not pyproject.is_file():
            continue
        required, extras = declared_dependencies(pyproject)
        stated = _stated(cells[column])
        left_out = sorted(required - stated)
        if left_out:
            yield number, f"{distribution} depends on {', '.join(left_out)} too (pyproject.toml)"
        unknown = sorted(stated - required - extras)
        if unknown:
            yield number, (f"{distribution} does not declare {', '.join(unknown)} (pyproject.toml)")


def check(root: Path) -> tuple[list[Problem], int]:
    """The problems found, and how many citations were checked."""
    known = set(packages(root))
    problems = unindexed_pages(root)
    checked = 0
    resolved: dict[str, str | None] = {}
    for page in pages(root):
        for number, text in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            problems.extend(broken_links(root, page, number, text))
            problems.extend(module_paths(root, page, number, text))
            for name in cited_names(text, known):
                checked += 1
                if name not in resolved:
                    resolved[name] = resolve(name)
                if resolved[name] is not None:
                    where = _relative(root, page)
                    problems.append(Problem(where, number, f"{name}: {resolved[name]}"))
        lines = page.read_text(encoding="utf-8").splitlines()
        where = _relative(root, page)
        for check_structure in (
            folder_paths,
            module_maps,
            dependency_tables,
        ):
            problems.extend(
                Problem(where, line, text) for line, text in check_structure(root, lines)
            )
    return problems, checked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository root (default: this checkout)"
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "docs").is_dir():
        print(f"--root must be a repository with a docs/ folder; got {args.root}")
        return 2
    # The packages' own sources come first, so the check reads this checkout.
    sys.path[:0] = [str(src) for src in sorted(root.glob("packages/*/src"))]
    problems, checked = check(root)
    if problems:
        print(f"the docs do not match the code ({len(problems)}):")
        print("\n".join(f"  {problem}" for problem in problems))
        print("\nsee docs/contributing.md (the docs check)")
        return 1
    print(
        f"docs match the code: {len(pages(root))} pages, every docs/ page indexed, "
        f"{checked} cited names and every cited module file found"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
