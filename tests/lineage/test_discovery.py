"""Which directories are runs, which files are read, in which order, and how they fold."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rankscribe.lineage import filter_summary_lineage, get_run_lineage, get_summary_lineage
from rankscribe.lineage.cli import main
from tests.lineage._index_bases import read_index


def rows(base: Path, **condition: Any) -> list[str]:
    result = filter_summary_lineage(str(base), condition or None, use_index=False)
    return [os.path.relpath(item["summary_dir"], base) for item in result["object"]]


def indexed(base: Path) -> dict[str, Any]:
    """What a query found in ``base``, as the index it writes there holds it
    (docs/lineage-queries.md, "The index"): the runs and the directories it entered."""
    filter_summary_lineage(str(base))
    return read_index(base)


def test_base_and_direct_subdirectories_only(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path, [lw.train(network="Base")], mtime=100)
    lw.write(tmp_path / "run1", [lw.train(network="One")], mtime=300)
    lw.write(tmp_path / "run1" / "deeper", [lw.train(network="Deep")], mtime=400)
    lw.write(tmp_path / "run2", [lw.train(network="Two")], mtime=200)
    assert rows(tmp_path) == ["run1", "run2", "."]
    found = indexed(tmp_path)
    assert sorted(found["path"]) == ["./", "./run1", "./run2"]
    assert found["update_time"][found["path"].index("./run1")] == 300 * 10**9  # its file's mtime


def test_symlinks_are_skipped(tmp_path: Path, lw: Any) -> None:
    real = lw.write(tmp_path / "elsewhere" / "real", [lw.eval({"planted": 1.0})]).parent
    base = tmp_path / "base"
    lw.write(base / "run", [lw.train(network="Run")])
    os.symlink(real, base / "linked_dir")
    # Newer than the run's own file: read after it, its metric would be the run's.
    os.symlink(
        next(real.iterdir()), base / "run" / "events.out.events.summary.1800000000.0.vm_lineage"
    )
    assert rows(base) == ["run"]
    assert get_summary_lineage(str(base / "run"))["metric"] == {}
    [files] = indexed(base)["files"]  # [name, size, mtime, inode, ctime] of each file read
    assert files[::5] == ["events.out.events.summary.1700000000.0.vm_lineage"]


def test_file_names(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path / "a", [lw.train(network="A")], name="no_timestamp_lineage")
    lw.write(tmp_path / "b", [lw.train(network="B")], name="events.summary.12_lineage.bak")
    # MindSpore <= 1.1 names (no device id) and MindSpore 0.x's `_MS_lineage` both qualify
    lw.write(
        tmp_path / "c", [lw.train(network="C")], name="events.out.events.summary.5.host_lineage"
    )
    lw.write(
        tmp_path / "d", [lw.train(network="D")], name="events.out.events.summary.5.host_MS_lineage"
    )
    assert sorted(rows(tmp_path)) == ["c", "d"]


def test_update_time_ties_break_on_relative_path(tmp_path: Path, lw: Any) -> None:
    for name in ("b", "a", "c"):
        lw.write(tmp_path / name, [lw.train(network=name)], mtime=500)
    assert rows(tmp_path) == ["a", "b", "c"]


def test_update_time_is_the_newest_files_mtime(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path / "a", [lw.train(network="A")], timestamp=10, mtime=900)
    summary = tmp_path / "a" / "events.out.events.summary.20.0.vm_MS"
    summary.write_bytes(b"")
    os.utime(summary, (100, 100))
    lw.write(tmp_path / "b", [lw.train(network="B")], timestamp=10, mtime=200)
    # a's newest file (timestamp 20) is older than b's
    assert rows(tmp_path) == ["b", "a"]


def test_train_then_eval_files_merge(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path, [lw.custom({"k": 1}), lw.train(network="N", loss=1.0)], timestamp=10)
    lw.write(tmp_path, [lw.eval({"acc": 0.5})], timestamp=20)
    result = get_summary_lineage(str(tmp_path))
    assert result["algorithm"] == {"network": "N", "loss": 1.0}
    assert result["metric"] == {"acc": 0.5}
    lineage = get_run_lineage(str(tmp_path))
    assert lineage is not None and lineage.section("user_defined") == {"k": 1}


def test_a_train_file_resets_what_came_before(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path, [lw.custom({"old": 1}), lw.train(network="Old")], timestamp=10)
    lw.write(tmp_path, [lw.eval({"acc": 0.5})], timestamp=20)
    lw.write(tmp_path, [lw.custom({"new": 2}), lw.train(network="New")], timestamp=30)
    result = get_summary_lineage(str(tmp_path))
    assert result["algorithm"] == {"network": "New"}
    assert result["metric"] == {}
    lineage = get_run_lineage(str(tmp_path))
    assert lineage is not None and lineage.section("user_defined") == {"new": 2}


def test_a_dataset_graph_file_resets_too(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path, [lw.train(network="Old"), lw.eval({"acc": 1.0})], timestamp=10)
    lw.write(tmp_path, [lw.graph({"op_type": "Batch"})], timestamp=20)
    result = get_summary_lineage(str(tmp_path))
    assert result["algorithm"] == {} and result["metric"] == {}
    assert result["dataset_graph"] == {"op_type": "Batch", "children": []}


def test_a_file_with_only_custom_data_contributes_nothing(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path, [lw.train(network="N")], timestamp=10)
    lw.write(tmp_path, [lw.custom({"late": 1})], timestamp=20)
    lineage = get_run_lineage(str(tmp_path))
    assert lineage is not None and lineage.section("user_defined") == {}
    # and a run made only of such files has no lineage
    lw.write(tmp_path / "only_custom", [lw.custom({"x": 1})])
    assert get_summary_lineage(str(tmp_path / "only_custom")) == {}


def test_last_event_of_each_kind_wins_within_a_file(tmp_path: Path, lw: Any) -> None:
    lw.write(
        tmp_path,
        [
            lw.train(network="First"),
            lw.eval({"acc": 0.1}),
            lw.train(network="Second"),
            lw.eval({"acc": 0.2}),
        ],
    )
    result = get_summary_lineage(str(tmp_path))
    assert result["algorithm"] == {"network": "Second"}
    assert result["metric"] == {"acc": 0.2}


def test_same_timestamp_files_are_read_by_name_descending(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path, [lw.train(network="FromA")], name="events.out.events.summary.5.0.a_lineage")
    lw.write(tmp_path, [lw.train(network="FromB")], name="events.out.events.summary.5.0.b_lineage")
    # b is read first, a last: a's train lineage is the run's.
    assert get_summary_lineage(str(tmp_path), ["algorithm"])["algorithm"] == {"network": "FromA"}


def test_timestamps_compare_as_numbers(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path, [lw.train(network="Nine")], timestamp=9)
    lw.write(tmp_path, [lw.train(network="Ten")], timestamp=10)
    assert get_summary_lineage(str(tmp_path), ["algorithm"])["algorithm"] == {"network": "Ten"}


def test_dataset_marks_use_the_numeric_maximum(tmp_path: Path, lw: Any) -> None:
    for index in range(12):
        lw.write(
            tmp_path / f"run{index:02d}", [lw.graph({"op_type": f"Op{index}"})], mtime=1000 - index
        )
    lw.write(tmp_path / "same_as_first", [lw.graph({"op_type": "Op0"})], mtime=1)
    result = filter_summary_lineage(str(tmp_path), use_index=False)
    marks = [item["model_lineage"]["dataset_mark"] for item in result["object"]]
    assert marks == [str(mark) for mark in range(2, 14)] + ["2"]


def test_a_run_without_graph_gets_an_ordinary_mark(tmp_path: Path, lw: Any) -> None:
    lw.write(tmp_path / "graph", [lw.graph({"op_type": "A"})], mtime=20)
    lw.write(tmp_path / "none1", [lw.train(network="N")], mtime=10)
    lw.write(tmp_path / "none2", [lw.train(network="M")], mtime=5)
    result = filter_summary_lineage(str(tmp_path), use_index=False)
    assert [o["model_lineage"]["dataset_mark"] for o in result["object"]] == ["2", "3", "3"]


def job(directory: Path, lw: Any, network: str, *, merged: bool = True, mtime: int = 100) -> None:
    """A distributed job as the collector leaves it: rank dirs, then rank 0's merged lineage."""
    for rank in (0, 1):
        lw.write(
            directory / f"rank_{rank}",
            [lw.train(network=network, loss=0.5 + rank)],
            name=f"events.out.events.summary.10.{rank}.vm_lineage",
            mtime=mtime,
        )
    if merged:
        lw.write(
            directory,
            [lw.train(network=network, loss=0.75)],
            name="events.out.events.summary.10.merged.vm_lineage",
            mtime=mtime,
        )


def test_runs_deeper_than_one_level_are_found_down_to_the_depth_limit(
    tmp_path: Path, lw: Any
) -> None:
    """Lightning's save_dir/name/version_<n>, and anything up to four levels down.

    Before: only the base and its direct subdirectories were looked at, so a
    query over save_dir found none of these.
    """
    base = tmp_path / "runs"
    job(base / "digits" / "version_0", lw, "V0", mtime=500)
    job(base / "digits" / "version_1", lw, "V1", mtime=400)
    lw.write(base / "plain", [lw.train(network="Plain")], mtime=300)
    lw.write(base / "plain" / "inside", [lw.train(network="Inside")], mtime=900)
    lw.write(base / "a" / "b" / "c" / "d", [lw.train(network="Four")], mtime=200)
    lw.write(base / "a" / "b" / "c" / "d2" / "e", [lw.train(network="Five")], mtime=200)
    lw.write(base / "a" / "_groups" / "g", [lw.train(network="Groups")], mtime=200)
    os.symlink(base / "digits", base / "a" / "linked")
    # One row per job (its ranks are inside it), nothing inside a run, nothing past depth 4.
    assert rows(base) == ["digits/version_0", "digits/version_1", "plain", "a/b/c/d"]
    found = indexed(base)
    assert sorted(found["path"]) == [
        "./a/b/c/d",
        "./digits/version_0",
        "./digits/version_1",
        "./plain",
    ]
    # The directories entered that are no run, with their mtimes.
    containers = dict(zip(*found["containers"], strict=True))
    assert sorted(containers) == [
        "./a",
        "./a/b",
        "./a/b/c",
        "./a/b/c/d2",
        "./digits",
    ]
    assert containers["./digits"] == os.stat(base / "digits").st_mtime_ns
    # The job directory as the base: the job and its ranks side by side, as before.
    assert rows(base / "digits" / "version_0") == [".", "rank_0", "rank_1"]


def test_a_job_below_the_base_without_its_merged_lineage_shows_its_ranks(
    tmp_path: Path, lw: Any
) -> None:
    """An interrupted job is not a run itself: its ranks are, as TensorBoard shows them."""
    base = tmp_path / "runs"
    job(base / "digits" / "version_0", lw, "Stopped", merged=False)
    assert rows(base) == ["digits/version_0/rank_0", "digits/version_0/rank_1"]
    assert rows(base / "digits") == ["version_0/rank_0", "version_0/rank_1"]


def test_what_the_commands_write_into_a_base_is_neither_a_run_nor_entered(
    tmp_path: Path, lw: Any
) -> None:
    """`hparams` writes one folder per run under BASE/tensorboard-hparams: a walk into
    it would keep every folder as a directory to check at each query."""
    base = tmp_path / "runs"
    job(base / "digits" / "version_0", lw, "V0")
    lw.write(base / "plain", [lw.train(network="Plain")])
    assert main(["hparams", str(base)]) == 0
    assert (base / "tensorboard-hparams" / "plain").is_dir()
    found = indexed(base)
    assert sorted(found["path"]) == ["./digits/version_0", "./plain"]
    assert found["containers"][0] == ["./digits"]
