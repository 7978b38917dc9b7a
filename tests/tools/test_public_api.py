"""tools/public_api.py on a small package built in tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests._support.launchers import Finished, run_tool

TOOL = Path(__file__).resolve().parents[2] / "tools" / "public_api.py"
# A package name no real distribution uses, so the namespace holds it beside the installed ones.
PACKAGE = "apisample"

SOURCE = """
    from rankscribe.apisample._impl import Widget, make
    LIMIT = 3
    __all__ = ["LIMIT", "Widget", "make", "options"]
"""


def write(root: Path, files: dict[str, str]) -> None:
    package = root / "packages" / f"rankscribe-{PACKAGE}" / "src" / "rankscribe" / PACKAGE
    for relative, text in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def run(root: Path, *args: str) -> Finished:
    return run_tool(TOOL, root, *args, env={"PATH": "/usr/bin:/bin"})


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    write(
        tmp_path,
        {
            "__init__.py": SOURCE,
            "_impl.py": '''
            class Widget:
                """A thing."""
                def __init__(self, size: int, *, name: str = "w") -> None: ...
                def grow(self, by: int) -> None: ...
                def _hidden(self) -> None: ...
                @property
                def area(self) -> int: return 1
            def make(count: int = 1) -> Widget: ...
            def helper() -> None: ...
        ''',
            "options.py": '__all__ = ["DEFAULT"]\nDEFAULT = "x"\nOTHER = 1\n',
            "_private.py": '__all__ = ["SECRET"]\nSECRET = 1\n',
            "pb/__init__.py": (
                '__all__ = ["thing_pb2"]\nfrom rankscribe.apisample.pb import thing_pb2\n'
            ),
            "pb/thing_pb2.py": "__all__ = ['Thing']\nThing = object()\n",
        },
    )
    return tmp_path


def snapshot_lines(root: Path) -> list[str]:
    text = (root / "tools" / "public_api" / f"rankscribe-{PACKAGE}.txt").read_text()
    return text.splitlines()


def test_write_records_names_signatures_and_public_submodules(tree: Path) -> None:
    result = run(tree, "--write")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"wrote tools/public_api/rankscribe-{PACKAGE}.txt" in result.stdout
    lines = snapshot_lines(tree)
    assert lines[0].endswith("after a deliberate change: python tools/public_api.py --write")
    assert lines[1:] == [
        "rankscribe.apisample.LIMIT: int = 3",
        "rankscribe.apisample.Widget: class(object) (size: int, *, name: str = 'w') -> None",
        "rankscribe.apisample.Widget.area: property -> int",
        "rankscribe.apisample.Widget.grow: method (self, by: int) -> None",
        "rankscribe.apisample.make: (count: int = 1) -> rankscribe.apisample._impl.Widget",
        "rankscribe.apisample.options: module",
        "rankscribe.apisample.options.DEFAULT: str = 'x'",
        "rankscribe.apisample.pb.thing_pb2: module",
    ]


def test_check_passes_on_an_unchanged_package(tree: Path) -> None:
    run(tree, "--write")
    result = run(tree)
    assert result.returncode == 0, result.stdout
    assert "public API matches the snapshots" in result.stdout


def test_check_shows_a_diff_and_how_to_accept_it(tree: Path) -> None:
    run(tree, "--write")
    write(tree, {"options.py": '__all__ = ["DEFAULT", "OTHER"]\nDEFAULT = "y"\nOTHER = 1\n'})
    result = run(tree, "--check")
    assert result.returncode == 1
    assert "-rankscribe.apisample.options.DEFAULT: str = 'x'" in result.stdout
    assert "+rankscribe.apisample.options.DEFAULT: str = 'y'" in result.stdout
    assert "+rankscribe.apisample.options.OTHER: int = 1" in result.stdout
    assert f"the public API of rankscribe-{PACKAGE} differs from its snapshot" in result.stdout
    assert "run: python tools/public_api.py --write" in result.stdout


def test_check_without_a_snapshot_fails(tree: Path) -> None:
    result = run(tree)
    assert result.returncode == 1
    assert "+rankscribe.apisample.LIMIT: int = 3" in result.stdout


def test_a_package_that_does_not_import_is_named(tree: Path) -> None:
    write(tree, {"__init__.py": "import rankscribe.apisample._missing\n"})
    result = run(tree)
    assert result.returncode == 2
    assert "cannot import rankscribe.apisample" in result.stdout


# A module written the way the packages are: annotations stay strings.
FIELDS = """
    from __future__ import annotations
    import dataclasses
    from typing import NamedTuple, Protocol, TypeVar
    T = TypeVar("T")
    Path = str | bytes
    class _Base:
        def merge(self, other: T) -> T: ...
    class _Hidden: ...
    class Shape(Protocol):
        def size(self) -> int: ...
    @dataclasses.dataclass
    class Algorithm:
        network: str
        loss: float | None = None
    class Point(NamedTuple):
        step: int
        value: float
    class Reader(_Base):
        def open(self, path: Path, shape: Shape) -> _Hidden: ...
    def read(path: str | Path) -> Algorithm: ...
"""


@pytest.fixture
def fields_tree(tmp_path: Path) -> Path:
    write(
        tmp_path,
        {
            "__init__.py": """
            from rankscribe.apisample._fields import Algorithm, Point, Reader, Shape, read
            __all__ = ["Algorithm", "Point", "Reader", "Shape", "read"]
        """,
            "_fields.py": FIELDS,
        },
    )
    return tmp_path


def test_fields_are_recorded_by_their_annotation_not_their_default(fields_tree: Path) -> None:
    assert run(fields_tree, "--write").returncode == 0
    lines = snapshot_lines(fields_tree)
    assert "rankscribe.apisample.Algorithm.loss: attribute: float | None = None" in lines
    assert "rankscribe.apisample.Algorithm.network: attribute: str" in lines
    assert "rankscribe.apisample.Point.step: attribute: int" in lines
    assert "rankscribe.apisample.Point.value: attribute: float" in lines
    assert (
        "rankscribe.apisample.Algorithm: class(object) (network: str, loss: float | None = None)"
        " -> None"
    ) in lines
    # String annotations are written as the source spells them, without quotes.
    assert "rankscribe.apisample.read: (path: str | Path) -> Algorithm" in lines


def test_a_changed_annotation_with_the_same_default_is_a_change(fields_tree: Path) -> None:
    run(fields_tree, "--write")
    write(fields_tree, {"_fields.py": FIELDS.replace("loss: float | None", "loss: int | None")})
    result = run(fields_tree, "--check")
    assert result.returncode == 1
    assert "-rankscribe.apisample.Algorithm.loss: attribute: float | None = None" in result.stdout
    assert "+rankscribe.apisample.Algorithm.loss: attribute: int | None = None" in result.stdout


def test_a_signature_naming_a_type_that_is_not_public_is_marked(fields_tree: Path) -> None:
    result = run(fields_tree, "--write")
    assert "4 public signatures name a type that is not public" in result.stdout
    lines = snapshot_lines(fields_tree)
    marked = [line for line in lines if ": ! " in line]
    assert marked == [
        "rankscribe.apisample.Reader: ! Path in 'Path' is not public",
        "rankscribe.apisample.Reader: ! _Hidden in '_Hidden' is not public",
        "rankscribe.apisample.Reader: ! base class _Base is not public",
        "rankscribe.apisample.read: ! Path in 'str | Path' is not public",
    ], marked
    # Shape and Algorithm are exported and T is a type variable: none of them is marked.
    assert run(fields_tree, "--check").returncode == 0
    strict = run(fields_tree, "--check", "--strict-types")
    assert strict.returncode == 1
    assert "rankscribe.apisample.Reader: ! base class _Base is not public" in strict.stdout
    assert "export each type (in an __all__) or annotate with a public one" in strict.stdout


def test_count_lists_names_per_package_and_module_without_class_members(tmp_path: Path) -> None:
    snapshots = tmp_path / "snaps"
    snapshots.mkdir()
    (snapshots / "rankscribe-writer.txt").write_text(
        "# public API of rankscribe.writer\n"
        "rankscribe.writer.LIMIT: int = 3\n"
        "rankscribe.writer.Widget: class(object) ()\n"
        "rankscribe.writer.Widget.size: property -> int\n"
        "rankscribe.writer.Widget.grow: method (self) -> None\n"
        "rankscribe.writer.make: () -> Widget\n"
        "rankscribe.writer.make: ! Widget in 'Widget' is not public\n"
        "rankscribe.writer.files.frame: (data: bytes) -> bytes\n"
        "rankscribe.writer.files.RECORD_OVERHEAD: int = 16\n",
        encoding="utf-8",
    )
    result = run(tmp_path, "--count", "--snapshots", str(snapshots))
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    # Widget counts once (its members do not), the "!" note not at all; files is a sibling module.
    assert "rankscribe-writer          3        2" in lines
    assert "    rankscribe.writer: 3" in lines
    assert "    rankscribe.writer.files: 2 (sibling-facing)" in lines
    assert "all packages               3        2" in lines


def test_snapshots_without_count_is_refused(tmp_path: Path) -> None:
    result = run(tmp_path, "--snapshots", str(tmp_path))
    assert result.returncode == 2
    assert "--snapshots goes with --count" in result.stderr
