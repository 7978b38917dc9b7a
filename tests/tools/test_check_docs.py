"""tools/check_docs.py on a small repository (docs and one package) built in tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests._support.launchers import Finished, run_tool

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_docs.py"
# A package name no real distribution uses, so the namespace holds it beside the installed ones.
PACKAGE = "docsample"


def write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def source(relative: str) -> str:
    return f"packages/rankscribe-{PACKAGE}/src/rankscribe/{PACKAGE}/{relative}"


def run(root: Path) -> Finished:
    return run_tool(TOOL, root, env={"PATH": "/usr/bin:/bin"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(
        tmp_path,
        {
            source("__init__.py"): """
            from rankscribe.docsample._impl import Widget, helper
            __all__ = ["Widget", "files"]
        """,
            source("_impl.py"): """
            class Widget:
                def grow(self) -> None: ...
            def helper() -> None: ...
        """,
            source("files.py"): "__all__ = ['frame']\ndef frame() -> None: ...\nOTHER = 1\n",
            source("nolist.py"): "THING = 1\n",
            source("job/_verdicts.py"): "",
            "tools/check.py": "",
            "docs/README.md": """
            # Docs
            | [format.md](format.md) | the format |
            | [guide.md](guide.md#start) | a guide |
        """,
            "docs/format.md": """
            Framing is in `docsample/_impl.py` and `job/_verdicts.py` (see [guide](guide.md)),
            run `python tools/check.py`, or `python train.py`; `_verdicts.py` names it,
            in `packages/.../x.py` form.
            `rankscribe.docsample.Widget.grow`, `rankscribe.docsample.files.frame(x)`.
        """,
            "docs/guide.md": """
            ```python
            from rankscribe.docsample import Widget, files
            import rankscribe.docsample.files
            ```
            Plugins declare a `rankscribe.graph_builders` entry point; logs go to the
            `rankscribe.docsample.*` loggers; the private `rankscribe.docsample._impl.helper`.
            See [the site](https://example.org/x.md) and [above](#docs).
        """,
            "README.md": "Start at [docs/README.md](docs/README.md).\n",
        },
    )
    return tmp_path


def test_docs_that_match_the_code_pass(repo: Path) -> None:
    result = run(repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "docs match the code: 4 pages, every docs/ page indexed, 7 cited names" in (
        result.stdout
    )


def test_a_page_missing_from_the_index_is_listed(repo: Path) -> None:
    write(repo, {"docs/new.md": "A new page.\n"})
    result = run(repo)
    assert result.returncode == 1
    assert "the docs do not match the code (1):" in result.stdout
    assert "  docs/new.md: not linked from docs/README.md" in result.stdout


def test_a_broken_relative_link_is_listed(repo: Path) -> None:
    write(repo, {"README.md": "See [the layout](docs/layout.md#ranks).\n"})
    result = run(repo)
    assert result.returncode == 1
    assert "README.md:1: link to docs/layout.md#ranks: no such file" in result.stdout


def test_module_files_that_do_not_exist_are_listed(repo: Path) -> None:
    write(
        repo,
        {
            "docs/guide.md": """
            The merge is `docsample/_merge.py`; the cache `_cache.py`; the tool
            `tools/gone.py` and [`job/_files.py`]; still fine: `docsample/files.py`.
        """,
        },
    )
    result = run(repo)
    assert result.returncode == 1
    for line in (
        "docs/guide.md:1: docsample/_merge.py: no such module file",
        "docs/guide.md:1: _cache.py: no such module file",
        "docs/guide.md:2: tools/gone.py: no such module file",
        "docs/guide.md:2: job/_files.py: no such module file",
    ):
        assert line in result.stdout
    assert "the docs do not match the code (4):" in result.stdout


def test_a_cited_name_that_does_not_exist_is_listed(repo: Path) -> None:
    write(
        repo,
        {
            "docs/guide.md": """
            `rankscribe.docsample.Gadget` and `rankscribe.docsample.Widget.shrink()`
            ```
            from rankscribe.docsample.files import frame, unframe
            ```
            `rankscribe.docsample.missing.thing`
        """,
        },
    )
    result = run(repo)
    assert result.returncode == 1
    for line in (
        "docs/guide.md:1: rankscribe.docsample.Gadget: rankscribe.docsample has no Gadget",
        "docs/guide.md:1: rankscribe.docsample.Widget.shrink: "
        "rankscribe.docsample.Widget has no attribute shrink",
        "docs/guide.md:3: rankscribe.docsample.files.unframe: "
        "rankscribe.docsample.files has no unframe",
        "docs/guide.md:5: rankscribe.docsample.missing.thing: rankscribe.docsample has no missing",
    ):
        assert line in result.stdout
    assert "the docs do not match the code (4):" in result.stdout


def test_a_name_cited_as_public_must_be_in_the_modules_all(repo: Path) -> None:
    write(
        repo,
        {
            "docs/guide.md": """
            `rankscribe.docsample.helper`, `rankscribe.docsample.files.OTHER`,
            `rankscribe.docsample.nolist.THING`
        """,
        },
    )
    result = run(repo)
    assert result.returncode == 1
    assert (
        "docs/guide.md:1: rankscribe.docsample.helper: "
        "helper is not in rankscribe.docsample.__all__ (not public)"
    ) in result.stdout
    assert "OTHER is not in rankscribe.docsample.files.__all__" in result.stdout
    assert (
        "docs/guide.md:2: rankscribe.docsample.nolist.THING: "
        "rankscribe.docsample.nolist has no __all__, so THING is not public"
    ) in result.stdout


def test_a_package_that_does_not_import_is_named(repo: Path) -> None:
    write(repo, {source("__init__.py"): "import rankscribe.docsample._absent\n"})
    result = run(repo)
    assert result.returncode == 1
    assert "rankscribe.docsample.Widget.grow: cannot import rankscribe.docsample:" in (
        result.stdout
    )


def test_a_root_without_docs_is_refused(tmp_path: Path) -> None:
    result = run(tmp_path)
    assert result.returncode == 2
    assert "--root must be a repository with a docs/ folder" in result.stdout


# -- module maps, package folders and dependency tables  -----------


def test_a_package_folder_that_does_not_exist_is_listed(repo: Path) -> None:
    write(
        repo,
        {
            "docs/guide.md": """
            The rules are in `rankscribe/docsample/job/`, the index in
            `rankscribe/docsample/index/` and `packages/rankscribe-gone/`.
        """,
        },
    )
    result = run(repo)
    assert result.returncode == 1
    assert "the docs do not match the code (2):" in result.stdout
    assert "docs/guide.md:2: rankscribe/docsample/index/: no such package folder" in result.stdout
    assert "docs/guide.md:2: packages/rankscribe-gone/: no such package folder" in result.stdout


MAP = """
The job view's modules:

<!-- module map: rankscribe/docsample/job/ -->
{names}

Next paragraph: `_impl.py` is not part of the map.
"""


def test_a_module_map_naming_every_module_of_its_folder_passes(repo: Path) -> None:
    write(repo, {source("job/_files.py"): "", source("job/wire/__init__.py"): ""})
    write(repo, {"docs/guide.md": MAP.format(names="`_verdicts.py`, `_files.py` and `wire/`.")})
    result = run(repo)
    assert result.returncode == 0, result.stdout


def test_a_module_map_that_leaves_out_a_module_is_listed(repo: Path) -> None:
    write(repo, {source("job/_files.py"): "", source("job/wire/__init__.py"): ""})
    write(repo, {"docs/guide.md": MAP.format(names="`_verdicts.py` and `_gone.py`.")})
    result = run(repo)
    assert result.returncode == 1
    assert "the docs do not match the code (3):" in result.stdout
    assert (
        "docs/guide.md:3: module map of rankscribe/docsample/job/ leaves out _files.py, wire/"
    ) in result.stdout
    assert (
        "docs/guide.md:3: module map of rankscribe/docsample/job/ names _gone.py, not in it"
    ) in result.stdout
    assert "docs/guide.md:4: _gone.py: no such module file" in result.stdout


PYPROJECT = """
[project]
name = "rankscribe-docsample"
dependencies = ["rankscribe-writer == 0.1.*", "numpy>=1.23", "filelock>=3.20.1"]

[project.optional-dependencies]
report = ["plotly>=6.0,<8"]
"""

TABLE = """
| distribution | package | depends on |
|---|---|---|
| `rankscribe-docsample` | `rankscribe.docsample` | {stated} |
"""


def test_a_dependency_list_that_matches_pyproject_passes(repo: Path) -> None:
    write(repo, {"packages/rankscribe-docsample/pyproject.toml": PYPROJECT})
    stated = "`rankscribe-writer`, numpy, filelock; plotly with the `report` extra"
    write(repo, {"docs/guide.md": TABLE.format(stated=stated)})
    result = run(repo)
    assert result.returncode == 0, result.stdout


def test_a_package_on_the_standard_library_alone_states_nothing(repo: Path) -> None:
    alone = '[project]\nname = "rankscribe-docsample"\ndependencies = []\n'
    write(repo, {"packages/rankscribe-docsample/pyproject.toml": alone})
    write(repo, {"docs/guide.md": TABLE.format(stated="nothing (the standard library)")})
    assert run(repo).returncode == 0
    # "nothing" beside a real name still has that name checked.
    write(repo, {"docs/guide.md": TABLE.format(stated="nothing; numpy")})
    result = run(repo)
    assert result.returncode == 1
    assert "rankscribe-docsample does not declare numpy (pyproject.toml)" in result.stdout


def test_a_wrong_dependency_list_is_listed(repo: Path) -> None:
    write(repo, {"packages/rankscribe-docsample/pyproject.toml": PYPROJECT})
    write(repo, {"docs/guide.md": TABLE.format(stated="writer, numpy, Pillow")})
    result = run(repo)
    assert result.returncode == 1
    assert "the docs do not match the code (2):" in result.stdout
    assert (
        "docs/guide.md:3: rankscribe-docsample depends on filelock too (pyproject.toml)"
    ) in result.stdout
    assert (
        "docs/guide.md:3: rankscribe-docsample does not declare pillow (pyproject.toml)"
    ) in result.stdout
