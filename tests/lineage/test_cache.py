"""The index cache: reused when files are unchanged, refreshed when not, safe when damaged."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_summary_lineage
from rankscribe.lineage.index._cache import INDEX_NAME, scan_base_dir


def make_base(root: Path, lw: Any, count: int = 3) -> Path:
    for index in range(count):
        lw.write(root / f"run{index}", [lw.graph({"op_type": f"G{index % 2}"}),
                                        lw.train(network=f"Net{index}", loss=index / 10)],
                 mtime=1_000_000 + index)
    return root


def test_index_is_written_then_reused(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    cold = scan_base_dir(str(base))
    assert (cold.parsed_runs, cold.reused_runs) == (3, 0)
    assert (base / INDEX_NAME).is_file()
    warm = scan_base_dir(str(base))
    assert (warm.parsed_runs, warm.reused_runs) == (0, 3)
    assert filter_summary_lineage(str(base), use_index=True) == filter_summary_lineage(
        str(base), use_index=False
    )


def test_a_changed_run_is_parsed_again(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    scan_base_dir(str(base))
    lw.write(base / "run1", [lw.eval({"acc": 0.5})], timestamp=1800000000)  # a new file
    scan = scan_base_dir(str(base))
    assert (scan.parsed_runs, scan.reused_runs) == (1, 2)
    result = filter_summary_lineage(str(base), {"metric/acc": {"eq": 0.5}})
    assert [o["model_lineage"]["network"] for o in result["object"]] == ["Net1"]


def test_same_size_new_mtime_is_parsed_again(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    scan_base_dir(str(base))
    path = lw.write(base / "run0", [lw.graph({"op_type": "G0"}), lw.train(network="Net9",
                                                                            loss=0.0)])
    os.utime(path, (2_000_000, 2_000_000))
    assert scan_base_dir(str(base)).parsed_runs == 1
    result = filter_summary_lineage(str(base), {"network": {"eq": "Net9"}})
    assert result["count"] == 1


def test_removed_run_leaves_the_index(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    scan_base_dir(str(base))
    for file in (base / "run2").iterdir():
        file.unlink()
    assert filter_summary_lineage(str(base))["count"] == 2
    index = json.loads((base / INDEX_NAME).read_text())
    assert sorted(index["runs"]) == ["./run0", "./run1"]


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b"[]",
        json.dumps({"format": "rankscribe-lineage-index", "version": 999, "runs": {},
                    "graphs": {}}).encode(),
        json.dumps({"format": "rankscribe-lineage-index", "version": 1, "runs": [],
                    "graphs": {}}).encode(),
    ],
)
def test_damaged_index_is_rebuilt(
    tmp_path: Path, lw: Any, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    base = make_base(tmp_path, lw)
    expected = filter_summary_lineage(str(base), use_index=False)
    (base / INDEX_NAME).write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert filter_summary_lineage(str(base)) == expected
    assert any(INDEX_NAME in record.getMessage() for record in caplog.records)
    assert scan_base_dir(str(base)).parsed_runs == 0  # rebuilt


def test_damaged_entries_are_parsed_again(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    expected = filter_summary_lineage(str(base), use_index=False)
    scan_base_dir(str(base))
    index = json.loads((base / INDEX_NAME).read_text())
    index["runs"]["./run0"] = "nonsense"
    index["runs"]["./run1"]["lineage"]["fields"] = []
    index["runs"]["./run2"]["lineage"]["graph"] = "missing"
    (base / INDEX_NAME).write_text(json.dumps(index))
    scan = scan_base_dir(str(base))
    assert scan.parsed_runs == 3
    assert filter_summary_lineage(str(base)) == expected


def test_disabled_index_writes_nothing(
    tmp_path: Path, lw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(tmp_path, lw)
    filter_summary_lineage(str(base), use_index=False)
    assert not (base / INDEX_NAME).exists()
    monkeypatch.setenv("RANKSCRIBE_LINEAGE_INDEX", "0")
    filter_summary_lineage(str(base))
    assert not (base / INDEX_NAME).exists()


def test_unwritable_base_still_answers(
    tmp_path: Path, lw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(tmp_path, lw)
    real_open = os.open

    # A read-only base dir, also for root (who ignores permission bits).
    def refuse_to_create(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and os.path.dirname(os.fspath(path)) == str(base):
            raise PermissionError(13, "Read-only file system", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse_to_create)
    assert filter_summary_lineage(str(base))["count"] == 3
    assert not (base / INDEX_NAME).exists()


def test_index_and_lock_are_not_runs(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    filter_summary_lineage(str(base))
    filter_summary_lineage(str(base))
    assert filter_summary_lineage(str(base))["count"] == 3
    assert sorted(p.name for p in base.iterdir() if p.is_file()) == [
        ".rankscribe-lineage-index.json", ".rankscribe-lineage-index.lock",
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
        with open(os.path.join(directory, "events.out.events.summary.1.0.vm_lineage"), "wb") as f:
            f.write(frame(event.SerializeToString()))
        time.sleep(0.01)


def test_concurrent_writers_and_readers(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw, count=20)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    readers = [context.Process(target=_query_repeatedly, args=(str(base), 15, queue))
               for _ in range(3)]
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
    index = json.loads((base / INDEX_NAME).read_text())  # whole, valid JSON
    assert index["format"] == "rankscribe-lineage-index"
    assert filter_summary_lineage(str(base))["count"] == 30
    assert scan_base_dir(str(base)).parsed_runs == 0


def test_a_thousand_runs_no_cap(tmp_path: Path, lw: Any) -> None:
    from rankscribe.writer.files import frame

    payload = b"".join(frame(e.SerializeToString()) for e in (
        lw.graph({"op_type": "Batch"}), lw.train(network="N", loss=0.5, optimizer="Adam"),
        lw.eval({"acc": 0.5}),
    ))
    for index in range(1000):
        directory = tmp_path / f"run{index:04d}"
        directory.mkdir()
        (directory / "events.out.events.summary.1.0.vm_lineage").write_bytes(payload)
    cold = filter_summary_lineage(str(tmp_path), {"limit": 10})
    assert cold["count"] == 1000
    warm_scan = scan_base_dir(str(tmp_path))
    assert (warm_scan.parsed_runs, warm_scan.reused_runs) == (0, 1000)
    assert filter_summary_lineage(str(tmp_path), {"limit": 10}) == cold
