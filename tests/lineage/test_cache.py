"""The index cache: reused when files are unchanged, refreshed when not, safe when damaged.

Each damaged or foreign index, and each wrong-typed entry, is a case that made every query
exit 1 (or answered from a stale index) before the index was checked as it is read.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import __version__, filter_summary_lineage
from tests._support.launchers import run_bounded
from tests._support.needs import needs
from tests.lineage._documented import INDEX_NAME
from tests.lineage._index_bases import graph_base, index_bytes, read_index
from tests.lineage._index_reads import as_a_new_process, query


def entry(index: dict[str, Any], path: str) -> int:
    """The position of a run in the index's columns."""
    return index["path"].index(path)


def test_index_is_written_then_reused(tmp_path: Path, lw: Any) -> None:
    base = graph_base(tmp_path, lw)
    cold = query(base)
    assert (cold.parsed_runs, cold.reused_runs) == (3, 0)
    assert (base / INDEX_NAME).is_file()
    warm = query(base)
    assert (warm.parsed_runs, warm.reused_runs) == (0, 3)
    assert filter_summary_lineage(str(base), use_index=True) == filter_summary_lineage(
        str(base), use_index=False
    )


def test_a_changed_run_is_parsed_again(tmp_path: Path, lw: Any) -> None:
    base = graph_base(tmp_path, lw)
    query(base)
    lw.write(base / "run1", [lw.eval({"acc": 0.5})], timestamp=1800000000)  # a new file
    scan = query(base)
    assert (scan.parsed_runs, scan.reused_runs) == (1, 2)
    result = filter_summary_lineage(str(base), {"metric/acc": {"eq": 0.5}})
    assert [o["model_lineage"]["network"] for o in result["object"]] == ["Net1"]


def test_same_size_new_mtime_is_parsed_again(tmp_path: Path, lw: Any) -> None:
    base = graph_base(tmp_path, lw)
    query(base)
    path = lw.write(
        base / "run0", [lw.graph({"op_type": "G0"}), lw.train(network="Net9", loss=0.0)]
    )
    os.utime(path, (2_000_000, 2_000_000))
    assert query(base).parsed_runs == 1
    result = filter_summary_lineage(str(base), {"network": {"eq": "Net9"}})
    assert result["count"] == 1


def test_removed_run_leaves_the_index(tmp_path: Path, lw: Any) -> None:
    base = graph_base(tmp_path, lw)
    query(base)
    for file in (base / "run2").iterdir():
        file.unlink()
    assert filter_summary_lineage(str(base))["count"] == 2
    assert sorted(read_index(base)["path"]) == ["./run0", "./run1"]


def _old_index(base: Path) -> bytes:
    """An index of another layout (version 2, one object per run) in this container."""
    return index_bytes(
        {
            "format": "rankscribe-lineage-index",
            "version": 2,
            "runs": {"./run0": {"files": [], "lineage": None}},
            "graphs": {},
        }
    )


def _foreign_package(base: Path) -> bytes:
    index = read_index(base)
    index["package"] = "0.0.1"  # same layout, another parser: its values may differ
    return index_bytes(index)


def _other_parser(base: Path) -> bytes:
    index = read_index(base)
    index["parser"] = "0" * 24
    return index_bytes(index)


def _truncated(base: Path) -> bytes:
    text = (base / INDEX_NAME).read_bytes()
    return text[: len(text) // 2]


def _column_missing(base: Path) -> bytes:
    index = read_index(base)
    del index["files"]
    return index_bytes(index)


def _warned(key: str, texts: Any) -> Any:
    """An index whose ``warnings`` hold ``{key: texts}`` (the writer keys them by run
    position, in decimal digits, each with a list of texts)."""

    def damage(base: Path) -> bytes:
        index = read_index(base)
        index["warnings"] = {key: texts}
        return index_bytes(index)

    return damage


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda base: b"{not json", "unreadable"),
        (lambda base: b"", "unreadable"),
        (lambda base: b"[]", "unreadable"),
        (lambda base: index_bytes({"format": "x"}), "another version (format x"),
        (_old_index, "another version (format rankscribe-lineage-index, version 2"),
        (_foreign_package, "another version"),
        (_other_parser, "another version"),
        (_truncated, "unreadable"),
        (_column_missing, "malformed"),
        (_warned("\u00b2", ["a warning"]), "malformed"),  # a digit to str.isdigit, not to int
        (_warned("01", ["a warning"]), "malformed"),
        (_warned("3", ["a warning"]), "malformed"),  # three runs: positions 0 to 2
        (_warned("0", [5]), "malformed"),
        (_warned("0", "a warning"), "malformed"),
    ],
    ids=[
        "not-json",
        "empty",
        "a-list",
        "another-format",
        "version-2",
        "other-package",
        "other-parser",
        "truncated",
        "column-missing",
        "warnings-of-a-superscript-two",
        "warnings-of-a-leading-zero",
        "warnings-of-no-run",
        "warnings-not-texts",
        "warnings-not-a-list",
    ],
)
def test_damaged_or_foreign_index_is_rebuilt(
    tmp_path: Path, lw: Any, damage: Any, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    base = graph_base(tmp_path, lw)
    expected = filter_summary_lineage(str(base), use_index=False)
    query(base)
    content = damage(base)
    (base / INDEX_NAME).write_bytes(content)
    as_a_new_process(base)
    with caplog.at_level(logging.WARNING):
        assert filter_summary_lineage(str(base)) == expected
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and INDEX_NAME in warnings[0] and said in warnings[0], warnings
    assert read_index(base)["package"] == __version__  # rebuilt by this version
    assert query(base).parsed_runs == 0


def test_an_index_others_may_write_is_not_trusted(
    tmp_path: Path, lw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    base = graph_base(tmp_path, lw)
    query(base)
    index = read_index(base)
    index["fields"]["network"][entry(index, "./run0")] = "Planted"
    (base / INDEX_NAME).write_bytes(index_bytes(index))
    (base / INDEX_NAME).chmod(0o666)  # as a shared scratch dir lets anyone write it
    as_a_new_process(base)
    with caplog.at_level(logging.WARNING):
        result = filter_summary_lineage(str(base), {"network": {"eq": "Planted"}})
    assert result["count"] == 0
    assert (
        f"ignoring lineage index {base / INDEX_NAME} (others may write it (mode 0666)); "
        "reading the runs" in [record.getMessage() for record in caplog.records]
    )


def _wrong_update_time(index: dict[str, Any]) -> None:
    index["update_time"][entry(index, "./run0")] = "x"


def _graph_not_an_id(index: dict[str, Any]) -> None:
    index["graph"][entry(index, "./run1")] = {}  # as "lineage": {"graph": {}} in version 2


def _graph_unknown(index: dict[str, Any]) -> None:
    index["graph"][entry(index, "./run2")] = "missing"


def _field_of_another_type(index: dict[str, Any]) -> None:
    index["fields"]["network"][entry(index, "./run0")] = 5


def _files_malformed(index: dict[str, Any]) -> None:
    index["files"][entry(index, "./run1")] = [["name", 1, 2, 3, 4]]


def _custom_value_malformed(index: dict[str, Any]) -> None:
    index["user_defined"]["x"] = [[entry(index, "./run2")], [[1, 2]]]


@pytest.mark.parametrize(
    "damage",
    [
        _wrong_update_time,
        _graph_not_an_id,
        _graph_unknown,
        _field_of_another_type,
        _files_malformed,
        _custom_value_malformed,
    ],
)
def test_a_wrong_typed_entry_is_read_again_with_one_warning(
    tmp_path: Path, lw: Any, damage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    base = graph_base(tmp_path, lw)
    expected = filter_summary_lineage(str(base), use_index=False)
    query(base)
    index = read_index(base)
    damage(index)
    (base / INDEX_NAME).write_bytes(index_bytes(index))
    as_a_new_process(base)
    with caplog.at_level(logging.WARNING):
        scan = query(base)
    assert (scan.parsed_runs, scan.reused_runs) == (1, 2)  # only the bad entry
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        f"lineage index {base / INDEX_NAME}: 1 malformed entry is read again from the runs"
    ]
    assert filter_summary_lineage(str(base)) == expected
    assert query(base).parsed_runs == 0  # the index was written again


@needs("plotly", envs="lineage")  # the report draws with it
def test_a_wrong_typed_entry_never_fails_the_command_line(tmp_path: Path, lw: Any) -> None:
    base = graph_base(tmp_path, lw)
    query(base)
    index = read_index(base)
    _wrong_update_time(index)
    _graph_not_an_id(index)
    (base / INDEX_NAME).write_bytes(index_bytes(index))
    for command in (["query", str(base), "--sort", "network"], ["report", str(base)]):
        process = run_bounded(
            [sys.executable, "-m", "rankscribe.lineage.cli", *command],
            timeout=120,
            check=False,
            stderr_apart=True,
        )
        assert process.returncode == 0, process.stderr
        if command[0] == "query":
            assert [line.split()[0] for line in process.stdout.splitlines()[1:4]] == [
                "run0",
                "run1",
                "run2",
            ]
            # one warning, once: the index is written again without the bad entries
            assert process.stderr == (
                f"rankscribe-lineage: warning: lineage index "
                f"{base / INDEX_NAME}: 2 malformed entries are read "
                f"again from the runs\n"
            )
        (base / INDEX_NAME).write_bytes(index_bytes(index))


def test_disabled_index_writes_nothing(
    tmp_path: Path, lw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = graph_base(tmp_path, lw)
    filter_summary_lineage(str(base), use_index=False)
    assert not (base / INDEX_NAME).exists()
    monkeypatch.setenv("RANKSCRIBE_LINEAGE_INDEX", "0")
    filter_summary_lineage(str(base))
    assert not (base / INDEX_NAME).exists()


def test_unwritable_base_still_answers(
    tmp_path: Path, lw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = graph_base(tmp_path, lw)
    real_open = os.open

    # A read-only base dir, also for root (who ignores permission bits).
    def refuse_to_create(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and os.path.dirname(os.fspath(path)) == str(base):
            raise PermissionError(13, "Read-only file system", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse_to_create)
    assert filter_summary_lineage(str(base))["count"] == 3
    assert not (base / INDEX_NAME).exists()


def test_the_index_is_not_a_run_and_leaves_nothing_else(tmp_path: Path, lw: Any) -> None:
    base = graph_base(tmp_path, lw)
    filter_summary_lineage(str(base))
    filter_summary_lineage(str(base))
    assert filter_summary_lineage(str(base))["count"] == 3
    # renamed into place whole: no lock file, no temporary file left behind
    assert sorted(p.name for p in base.iterdir() if p.is_file()) == [
        ".rankscribe-lineage-index.npz"
    ]


def _query_repeatedly(base: str, rounds: int, queue: Any) -> None:
    counts = []
    for _ in range(rounds):
        counts.append(filter_summary_lineage(base)["count"])
    queue.put(counts)


def _add_runs(base: str, count: int) -> None:
    from rankscribe.writer.files import frame
    from rankscribe.writer.pb import lineage_pb2

    for index in range(count):
        directory = os.path.join(base, f"new{index}")
        os.makedirs(directory)
        event = lineage_pb2.LineageEvent(wall_time=1.0)
        event.train_lineage.algorithm.network = f"New{index}"
        path = os.path.join(directory, "events.out.events.summary.1.0.vm_lineage")
        with open(path, "wb") as f:
            f.write(frame(event.SerializeToString()))
        # Written well before the index (a file within a timestamp tick of the index is
        # read again by every query until it settles, by design).
        os.utime(path, (1_000_000, 1_000_000))
        time.sleep(0.01)


def test_concurrent_writers_and_readers(tmp_path: Path, lw: Any) -> None:
    base = graph_base(tmp_path, lw, count=20)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    readers = [
        context.Process(target=_query_repeatedly, args=(str(base), 15, queue)) for _ in range(3)
    ]
    writer = context.Process(target=_add_runs, args=(str(base), 10))
    for process in [*readers, writer]:
        process.start()
    results = [queue.get(timeout=60) for _ in readers]
    for process in [*readers, writer]:
        process.join(timeout=60)
        assert process.exitcode == 0
    for counts in results:
        assert counts == sorted(counts)  # runs only ever appear
        assert all(20 <= count <= 30 for count in counts)
    index = read_index(base)  # whole, its CRCs valid
    assert index["format"] == "rankscribe-lineage-index"
    assert filter_summary_lineage(str(base))["count"] == 30
    assert query(base).parsed_runs == 0


def test_a_thousand_runs_no_cap(tmp_path: Path, lw: Any) -> None:
    from rankscribe.writer.files import frame

    payload = b"".join(
        frame(e.SerializeToString())
        for e in (
            lw.graph({"op_type": "Batch"}),
            lw.train(network="N", loss=0.5, optimizer="Adam"),
            lw.eval({"acc": 0.5}),
        )
    )
    for index in range(1000):
        directory = tmp_path / f"run{index:04d}"
        directory.mkdir()
        (directory / "events.out.events.summary.1.0.vm_lineage").write_bytes(payload)
        os.utime(directory / "events.out.events.summary.1.0.vm_lineage", (1000, 1000))
    cold = filter_summary_lineage(str(tmp_path), {"limit": 10})
    assert cold["count"] == 1000
    warm_scan = query(tmp_path)
    assert (warm_scan.parsed_runs, warm_scan.reused_runs) == (0, 1000)
    assert filter_summary_lineage(str(tmp_path), {"limit": 10}) == cold
