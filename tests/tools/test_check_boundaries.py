"""tools/check_boundaries.py on small package trees built in tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests._support.launchers import Finished, run_tool

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_boundaries.py"


def write_package(root: Path, name: str, files: dict[str, str]) -> None:
    """packages/rankscribe-<name>/src/rankscribe/<name>/ with the given modules."""
    package = root / "packages" / f"rankscribe-{name}" / "src" / "rankscribe" / name
    for relative, text in {"__init__.py": "", **files}.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def run(root: Path) -> Finished:
    return run_tool(TOOL, root)


@pytest.fixture
def clean_tree(tmp_path: Path) -> Path:
    write_package(
        tmp_path,
        "writer",
        {
            "__init__.py": """
            from rankscribe.writer._record import Record
            __all__ = ["Record"]
        """,
            "_record.py": "from rankscribe.writer import _framing\nclass Record: ...\n",
            "_framing.py": "import struct\n",
            "files.py": """
            __all__ = ['atomic_write', 'frame']
            def frame() -> None: ...
            def atomic_write() -> None: ...
        """,
            "pb/__init__.py": "__all__ = ['event_pb2']\n",
            "pb/event_pb2.py": "x = 1\n" * 900,
        },
    )
    write_package(
        tmp_path,
        "lineage",
        {
            "__init__.py": """
            from rankscribe.writer import Record, files
            from rankscribe.writer.files import atomic_write
            from rankscribe.writer.pb import event_pb2
            import rankscribe.writer.files
            __all__ = []
        """,
            "_model.py": "\n" * 500,
        },
    )
    return tmp_path


def test_a_clean_tree_passes(clean_tree: Path) -> None:
    result = run(clean_tree)
    assert result.returncode == 0, result.stdout
    assert "package boundaries hold" in result.stdout


def test_a_module_is_as_long_as_its_job(clean_tree: Path) -> None:
    # No line-count rule (docs/contributing.md): a long module is not a boundary problem.
    write_package(clean_tree, "ranks", {"_big.py": "x = 1\n" * 900})
    assert run(clean_tree).returncode == 0


def test_an_import_cycle_is_listed(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "ranks",
        {
            "_info.py": "from rankscribe.ranks._mpi import load\n",
            "_mpi.py": "from rankscribe.ranks import _info\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "import cycles (every import counts, in functions too) (1):" in result.stdout
    assert "rankscribe.ranks._info -> rankscribe.ranks._mpi -> rankscribe.ranks._info" in (
        result.stdout
    )


def test_a_cycle_through_relative_imports_and_the_package_init(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "collector",
        {
            "adapters/__init__.py": "from .numpy import NumpyAdapter\nclass View: ...\n",
            "adapters/numpy.py": "from . import View\nclass NumpyAdapter: ...\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert (
        "rankscribe.collector.adapters -> rankscribe.collector.adapters.numpy"
        " -> rankscribe.collector.adapters"
    ) in result.stdout


def test_a_cycle_through_an_import_inside_a_function_is_listed(clean_tree: Path) -> None:
    # The shape the ranks coordinator had: a base class whose factory method imports the
    # module of its subclasses at call time.
    write_package(
        clean_tree,
        "ranks",
        {
            "_coordinator.py": """
            class Coordinator:
                @staticmethod
                def create() -> "Coordinator":
                    from rankscribe.ranks._factory import build
                    return build()
        """,
            "_factory.py": "from rankscribe.ranks._single import Single\ndef build(): ...\n",
            "_single.py": "from rankscribe.ranks._coordinator import Coordinator\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert (
        "rankscribe.ranks._coordinator -> rankscribe.ranks._factory -> rankscribe.ranks._single"
        " -> rankscribe.ranks._coordinator"
    ) in result.stdout


def test_the_same_modules_with_creation_above_the_subclasses_pass(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "ranks",
        {
            "_coordinator.py": "class Coordinator: ...\n",
            "_factory.py": """
            from rankscribe.ranks._single import Single
            def build() -> Single:
                from rankscribe.ranks._coordinator import Coordinator
                return Single()
        """,
            "_single.py": (
                "from rankscribe.ranks._coordinator import Coordinator\nclass Single: ...\n"
            ),
        },
    )
    result = run(clean_tree)
    assert result.returncode == 0, result.stdout


def test_an_import_under_type_checking_counts_too(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "ranks",
        {
            "_coordinator.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from rankscribe.ranks._single import Single
        """,
            "_single.py": "from rankscribe.ranks._coordinator import Coordinator\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "rankscribe.ranks._coordinator -> rankscribe.ranks._single -> " in result.stdout


def test_folders_that_import_each_other_are_a_cycle(clean_tree: Path) -> None:
    # No two modules form a cycle here; the folders index/ and query/ do, through a
    # function-level import.
    write_package(
        clean_tree,
        "lineage",
        {
            "index/__init__.py": "",
            "index/_cache.py": "from rankscribe.lineage.query._fields import NAMES\n",
            "index/_rows.py": "ROWS = ()\n",
            "query/__init__.py": "",
            "query/_fields.py": "NAMES = ()\n",
            "query/_select.py": (
                "def rows():\n    from rankscribe.lineage.index._rows import ROWS\n"
            ),
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "import cycles between units (sub-packages and top-level modules) (1):" in result.stdout
    assert (
        "rankscribe.lineage.index -> rankscribe.lineage.query -> rankscribe.lineage.index"
    ) in result.stdout
    assert "import cycles (every import counts" not in result.stdout


def test_folders_below_a_shared_folder_are_no_cycle(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "lineage",
        {
            "record/__init__.py": "",
            "record/_fields.py": "NAMES = ()\n",
            "index/__init__.py": "",
            "index/_cache.py": "from rankscribe.lineage.record._fields import NAMES\n",
            "query/__init__.py": "",
            "query/_select.py": "from rankscribe.lineage.record._fields import NAMES\n"
            "from rankscribe.lineage.index._cache import NAMES as CACHED\n",
            "_top.py": "from rankscribe.lineage.query import _select\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 0, result.stdout


def test_a_top_level_module_and_a_folder_that_import_each_other_are_a_cycle(
    clean_tree: Path,
) -> None:
    # Rank detection importing a backend's helper while the backends import detection:
    # no two modules form a cycle, the module _info and the folder backends/ do.
    write_package(
        clean_tree,
        "lineage",
        {
            "_info.py": "from rankscribe.lineage.backends._loader import load\n",
            "backends/__init__.py": "",
            "backends/_loader.py": "def load() -> None: ...\n",
            "backends/_mpi.py": "from rankscribe.lineage._info import load\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "import cycles between units (sub-packages and top-level modules) (1):" in (
        result.stdout
    )
    assert (
        "rankscribe.lineage._info -> rankscribe.lineage.backends -> rankscribe.lineage._info"
    ) in result.stdout
    assert "import cycles (every import counts" not in result.stdout


def test_a_helper_module_below_both_is_no_cycle(clean_tree: Path) -> None:
    # The same modules with the loader moved up beside _info: every arrow points one way.
    write_package(
        clean_tree,
        "lineage",
        {
            "_info.py": "from rankscribe.lineage._loader import load\n",
            "_loader.py": "def load() -> None: ...\n",
            "backends/__init__.py": "",
            "backends/_mpi.py": "from rankscribe.lineage._info import load\n"
            "from rankscribe.lineage._loader import load as again\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 0, result.stdout


def test_a_longer_cycle_names_the_rest_of_its_group(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "ranks",
        {
            "_a.py": "from rankscribe.ranks import _b\n",
            "_b.py": "from rankscribe.ranks import _a, _c\n",
            "_c.py": "from rankscribe.ranks import _b\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert (
        "rankscribe.ranks._a -> rankscribe.ranks._b -> rankscribe.ranks._a"
        " (same cycle group: rankscribe.ranks._c)"
    ) in result.stdout


def test_a_module_importing_itself_is_a_cycle(clean_tree: Path) -> None:
    write_package(clean_tree, "ranks", {"_a.py": "def f():\n    from rankscribe.ranks import _a\n"})
    result = run(clean_tree)
    assert result.returncode == 1
    assert "rankscribe.ranks._a -> rankscribe.ranks._a" in result.stdout


def test_an_import_against_the_package_graph_is_listed(clean_tree: Path) -> None:
    # ranks is the ground floor: even a deferred import of the writer points back.
    write_package(
        clean_tree,
        "ranks",
        {"_layout.py": "def later():\n    from rankscribe.writer.files import frame\n"},
    )
    write_package(
        clean_tree, "writer", {"_record.py": "import rankscribe.lineage\nclass Record: ...\n"}
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "imports against the package graph (2):" in result.stdout
    assert (
        "rankscribe.ranks._layout imports rankscribe.writer.files: ranks may not import writer"
    ) in result.stdout
    assert "writer may not import lineage" in result.stdout


def test_a_cycle_across_packages_is_listed(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "lineage",
        {
            "layout.py": "from rankscribe.writer.files import names\n__all__ = ['where']\n",
        },
    )
    write_package(
        clean_tree,
        "writer",
        {
            "files.py": """
            __all__ = ['names']
            def names() -> None:
                from rankscribe.lineage.layout import where
        """,
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert (
        "rankscribe.lineage.layout -> rankscribe.writer.files -> rankscribe.lineage.layout"
    ) in result.stdout
    assert "writer may not import lineage" in result.stdout


def test_the_allowed_package_graph_passes(clean_tree: Path) -> None:
    write_package(clean_tree, "ranks", {"files.py": "__all__ = ['atomic_write']\n"})
    write_package(
        clean_tree,
        "writer",
        {
            "__init__.py": """
            from rankscribe.writer._record import Record
            __all__ = ["Record"]
        """,
            "_export.py": "from rankscribe.ranks.files import atomic_write\n",
        },
    )
    write_package(clean_tree, "lineage", {"_index.py": "from rankscribe.ranks import files\n"})
    write_package(
        clean_tree,
        "collector",
        {
            "loop.py": """
            from rankscribe.writer import Record
            from rankscribe.ranks import files
            import rankscribe.lineage
        """,
        },
    )
    result = run(clean_tree)
    assert result.returncode == 0, result.stdout


def test_importing_a_private_module_of_another_package_is_listed(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "collector",
        {
            "loop.py": """
            def later() -> None:
                from rankscribe.writer._framing import frame
            import rankscribe.writer._record
        """,
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "imports of non-public names from another package (2):" in result.stdout
    assert (
        "rankscribe.collector.loop (line 3): imports from rankscribe.writer._framing, "
        "a private module (_framing)"
    ) in result.stdout
    assert "rankscribe.collector.loop (line 4): imports from rankscribe.writer._record" in (
        result.stdout
    )


def test_a_name_missing_from_the_targets_all_is_listed(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "collector",
        {
            "loop.py": "from rankscribe.writer.files import frame, _helper, unlisted\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "imports _helper from rankscribe.writer.files, which is not in its __all__" in (
        result.stdout
    )
    assert "imports unlisted from rankscribe.writer.files" in result.stdout
    assert "imports frame" not in result.stdout


def test_a_public_module_without_all_is_no_door_for_another_package(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "writer",
        {
            "__init__.py": "from rankscribe.writer._record import Record\n__all__ = ['Record']\n",
            "format/__init__.py": "from rankscribe.writer.format.framing import frame_it\n",
            "format/framing.py": "__all__ = ['frame_it']\ndef frame_it() -> None: ...\n",
        },
    )
    write_package(
        clean_tree, "lineage", {"__init__.py": "from rankscribe.writer.format import frame_it\n"}
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert (
        "rankscribe.lineage (line 1): imports from rankscribe.writer.format, which is neither "
        "a public module with an __all__ nor a sibling-facing module (SIBLING_MODULES)"
    ) in result.stdout


def test_a_sibling_module_stays_out_of_the_top_level_all(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "writer",
        {
            "__init__.py": """
            from rankscribe.writer._record import Record
            from rankscribe.writer.files import frame
            __all__ = ["Record", "files", "frame"]
        """,
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "rankscribe.writer.__all__ lists the sibling module rankscribe.writer.files" in (
        result.stdout
    )
    assert (
        "rankscribe.writer.__all__ lists frame, which rankscribe.writer.files exports to the "
        "siblings"
    ) in result.stdout


def test_a_sibling_module_must_be_documented_in_contributing(clean_tree: Path) -> None:
    (clean_tree / "docs").mkdir()
    (clean_tree / "docs" / "contributing.md").write_text(
        "Sibling modules: `rankscribe.writer.eventfiles`.\n", encoding="utf-8"
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "rankscribe.writer.files is not named in docs/contributing.md" in result.stdout
    assert "rankscribe.writer.eventfiles is not a module of its package" in result.stdout


def test_the_own_packages_private_modules_are_fine(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "collector",
        {
            "_schedule.py": "X = 1\n",
            "loop.py": "from rankscribe.collector._schedule import X\n",
        },
    )
    assert run(clean_tree).returncode == 0


def test_every_kind_is_reported_in_one_run(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "ranks",
        {
            "_a.py": "from rankscribe.ranks import _b\n",
            "_b.py": "from rankscribe.ranks import _a\nfrom rankscribe.writer import _record\n",
        },
    )
    write_package(clean_tree, "writer", {"_up.py": "from rankscribe.lineage import _model\n"})
    result = run(clean_tree)
    assert result.returncode == 1
    for title in (
        "import cycles (every import counts",
        "imports against the package graph",
        "imports of non-public names from another package",
    ):
        assert title in result.stdout


def test_event_framing_outside_the_writer_is_listed(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "lineage",
        {
            "_job_files.py": """
            import rankscribe.writer.files
            import rankscribe.writer.files as written
            from rankscribe.writer import files
            from rankscribe.writer.files import frame as framed
            def events(payload: bytes, crc: int) -> list[object]:
                return [
                    files.varint(len(payload)),
                    written.field_key(5),
                    rankscribe.writer.files.RECORD_OVERHEAD,
                    (((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8,
                ]
        """,
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert "event framing outside the writer (use rankscribe.writer.eventfiles) (6):" in (
        result.stdout
    )
    for line, what in [
        (5, "takes frame from rankscribe.writer.files"),
        (8, "uses rankscribe.writer.files.varint"),
        (9, "uses rankscribe.writer.files.field_key"),
        (10, "uses rankscribe.writer.files.RECORD_OVERHEAD"),
        (11, "rotates a CRC by 15 bits as record framing's mask does"),
        (11, "masks a CRC as record framing does (0xA282EAD8)"),
    ]:
        assert f"rankscribe.lineage._job_files (line {line}): {what}" in result.stdout


def test_the_writer_frames_and_look_alikes_elsewhere_pass(clean_tree: Path) -> None:
    write_package(
        clean_tree,
        "writer",
        {
            "__init__.py": "from rankscribe.writer._record import Record\n__all__ = ['Record']\n",
            "_framing.py": """
            def mask(crc: int) -> int:
                return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
        """,
        },
    )
    write_package(
        clean_tree,
        "collector",
        {
            "_fingerprint.py": """
            import crc32c
            from rankscribe.collector import _table as table
            def varint(value: int) -> bytes: ...
            def fingerprint(data: bytes) -> object:
                return (crc32c.crc32c(data) >> 15, table.frame, varint(3), 0xA282EAD9)
        """,
            "_table.py": "frame = 1\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 0, result.stdout


def test_a_root_without_packages_is_refused(tmp_path: Path) -> None:
    result = run(tmp_path)
    assert result.returncode == 2
    assert "--root must be a repository with a packages/ folder" in result.stdout


def test_the_job_view_is_a_floor_between_the_writer_and_the_lineage_manager(
    clean_tree: Path,
) -> None:
    # collector -> lineage -> jobview -> writer -> ranks: the job view may not look up.
    write_package(
        clean_tree,
        "jobview",
        {
            "__init__.py": "__all__ = ['judge']\ndef judge() -> None: ...\n",
            "_view.py": "from rankscribe.writer import Record\n",
            "_up.py": "def later():\n    import rankscribe.lineage\n",
            "_top.py": "import rankscribe.collector\n",
        },
    )
    write_package(clean_tree, "lineage", {"_merge.py": "from rankscribe.jobview import judge\n"})
    write_package(clean_tree, "collector", {"_end.py": "from rankscribe.jobview import judge\n"})
    result = run(clean_tree)
    assert result.returncode == 1
    assert "imports against the package graph (2):" in result.stdout
    assert "rankscribe.jobview._up imports rankscribe.lineage: jobview may not import lineage" in (
        result.stdout
    )
    assert "jobview may not import collector" in result.stdout
    assert "lineage may not import jobview" not in result.stdout


def test_a_sibling_module_that_is_another_packages_door_is_listed(clean_tree: Path) -> None:
    # The collector reaches the job view through feed only; parts is the lineage manager's.
    write_package(
        clean_tree,
        "jobview",
        {
            "feed.py": "__all__ = ['TAG']\nTAG = 'x'\n",
            "parts.py": "__all__ = ['files']\ndef files() -> None: ...\n",
        },
    )
    write_package(
        clean_tree,
        "lineage",
        {
            "_merge.py": "from rankscribe.jobview.parts import files\n",
            "_show.py": "from rankscribe.jobview.feed import TAG\n",
        },
    )
    write_package(
        clean_tree,
        "collector",
        {
            "_live.py": "from rankscribe.jobview.feed import TAG\n",
            "_end.py": "import rankscribe.jobview.parts\n",
        },
    )
    result = run(clean_tree)
    assert result.returncode == 1
    assert (
        "rankscribe.lineage._show (line 1): imports from rankscribe.jobview.feed, "
        "the sibling module of rankscribe.collector only"
    ) in result.stdout
    assert (
        "rankscribe.collector._end (line 1): imports rankscribe.jobview.parts, "
        "the sibling module of rankscribe.lineage only"
    ) in result.stdout
    assert "rankscribe.lineage._merge" not in result.stdout
    assert "rankscribe.collector._live" not in result.stdout


def test_the_repository_holds_no_cycle_and_keeps_the_five_floors() -> None:
    result = run(TOOL.parents[1])
    assert result.returncode == 0, result.stdout
    assert "package boundaries hold: no import cycle, the package graph kept" in result.stdout
