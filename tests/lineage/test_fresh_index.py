"""The warm query's path: the whole index checked column by column, the query run on columns.

Each test makes the index, changes what a user could change between two
queries, and checks that a warm query (this process forgetting its scan, as
a new one) answers exactly what a query that reads every file answers.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_runs, filter_summary_lineage
from tests._support.launchers import run_bounded
from tests.lineage._documented import INDEX_NAME
from tests.lineage._index_bases import OLD, finish, index_bytes, read_index
from tests.lineage._index_reads import Query, as_a_new_process, listings
from tests.lineage._index_reads import query as query_of


def make_base(tmp_path: Path, lw: Any, count: int = 6) -> Path:
    """Runs with fields, metrics and user-defined keys that some runs lack."""
    base = tmp_path / "base"
    for index in range(count):
        events = [lw.train(network=f"Net{index % 3}", loss=index / 10, epoch=index)]
        if index % 2 == 0:
            events.append(lw.eval(metrics={"acc": 1 - index / 10}))
        if index % 3 == 0:
            events.append(lw.custom({"seed": index, "note": f"n{index}"}))
        lw.write(base / f"run{index}", events, mtime=OLD + index % 4)
        finish(base / f"run{index}")
    return base


def warm(base: Path) -> Query:
    as_a_new_process(base)  # the index is read from disk
    return query_of(base)


QUERIES: list[dict[str, Any]] = [
    {},
    {"where": "loss < 0.3"},
    {"where": "metric/acc >= 0.5 or user_defined/note = 'n3'", "order_by": "metric/acc desc"},
    {"order_by": ["network", "-loss"], "limit": 4, "offset": 1},
    {"where": "network != 'Net1' and epoch in (0, 2, 5)", "lineage_type": "model"},
    {"order_by": "user_defined/seed"},
]


@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_a_warm_query_answers_what_reading_every_file_answers(
    tmp_path: Path, lw: Any, query: dict[str, Any]
) -> None:
    base = make_base(tmp_path, lw)
    expected = filter_runs(base, use_index=False, **query)
    query_of(base)  # writes the index
    scan = warm(base)
    assert (scan.parsed_runs, scan.reused_runs) == (0, 6)
    assert filter_runs(base, **query) == expected


def test_the_dict_conditions_answer_alike_from_the_index(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    condition = {"loss": {"lt": 0.45}, "sorted_name": "metric/acc", "sorted_type": "descending"}
    expected = filter_summary_lineage(str(base), condition, use_index=False)
    query_of(base)
    warm(base)
    assert filter_summary_lineage(str(base), condition) == expected
    assert filter_summary_lineage(str(base)) == filter_summary_lineage(str(base), use_index=False)


def test_a_run_file_in_the_base_dir_itself_is_seen(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    query_of(base)
    lw.write(base, [lw.train(network="BaseNet", loss=0.05)])
    as_a_new_process(base)
    result = filter_runs(base, "network = 'BaseNet'")
    assert [item["summary_dir"] for item in result["object"]] == [str(base)]


def test_an_index_out_of_base_order_still_answers_in_base_order(tmp_path: Path, lw: Any) -> None:
    """A hand-made index (runs in another order) is not trusted to be in base order."""
    base = make_base(tmp_path, lw)
    expected = filter_runs(base, use_index=False)
    query_of(base)
    index = read_index(base)
    count = len(index["path"])
    order = list(reversed(range(count)))
    for name in ("path", "dir_mtime", "final", "create_time", "update_time", "files", "graph"):
        index[name] = [index[name][at] for at in order]
    index["fields"] = {
        name: [column[at] for at in order] for name, column in index["fields"].items()
    }
    for section in ("metric", "user_defined"):
        index[section] = {
            key: [[count - 1 - at for at in positions], values]
            for key, (positions, values) in index[section].items()
        }
    (base / INDEX_NAME).write_bytes(index_bytes(index))
    scan = warm(base)
    assert scan.parsed_runs == 0  # a valid index, in another order: every run read from it
    assert filter_runs(base) == expected


def test_a_directory_that_is_not_a_run_does_not_stop_the_warm_path(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    expected = filter_runs(base, use_index=False)
    query_of(base)
    (base / "notes").mkdir()  # no summary file: not a run
    assert filter_runs(base) == expected
    warm(base)
    assert filter_runs(base) == expected


def test_a_warm_query_loads_neither_numpy_nor_protobuf(tmp_path: Path, lw: Any) -> None:
    """What makes a warm query from a new process start fast: nothing it does not need."""
    base = make_base(tmp_path, lw)
    query_of(base)
    code = (
        "import io, sys, contextlib; from rankscribe.lineage.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert main(['query', sys.argv[1], '--where', 'loss < 0.3']) == 0\n"
        "loaded = [name for name in ('numpy', 'google.protobuf', 'PIL') if name in sys.modules]\n"
        "print(out.getvalue().splitlines()[-1], loaded)\n"
    )
    shown = run_bounded([sys.executable, "-c", code, str(base)], timeout=120, stderr_apart=True)
    assert shown.stdout == "3 matching runs []\n", shown.stderr


def test_runs_sharing_a_dataset_graph_each_get_a_copy_of_their_own(tmp_path: Path, lw: Any) -> None:
    graph = {"op_type": "BatchDataset", "children": [{"op_type": "MnistDataset"}]}
    base = tmp_path / "base"
    for name in ("a", "b"):
        lw.write(base / name, [lw.train(network="Net", loss=0.5), lw.graph(graph)], mtime=OLD)
        finish(base / name)
    query_of(base)  # writes the index, where the two runs share one graph
    warm(base)
    first = filter_runs(base, lineage_type="dataset")["object"]
    assert first[0]["dataset_graph"] == first[1]["dataset_graph"]
    assert first[0]["dataset_graph"]["children"]  # the graph is there, not empty
    first[0]["dataset_graph"]["children"].append({"op_type": "changed by the caller"})
    assert first[1]["dataset_graph"] != first[0]["dataset_graph"]
    again = filter_runs(base, lineage_type="dataset")["object"]
    assert again[0]["dataset_graph"] == again[1]["dataset_graph"] == first[1]["dataset_graph"]


def test_runs_below_directories_that_are_no_run_keep_the_warm_path_and_its_answers(
    tmp_path: Path, lw: Any
) -> None:
    """Lightning's save_dir/name/version_<n>: the warm path checks ``name`` by its mtime.

    A version added, or a run removed, below ``name`` moves its mtime: the
    next query lists again and finds it. Before, such runs were not found.
    """
    base = tmp_path / "base"
    for version in range(3):
        run = base / "digits" / f"version_{version}"
        lw.write(run, [lw.train(network=f"V{version}", loss=version / 10)], mtime=OLD + version)
        finish(run)
    os.utime(base / "digits", (OLD, OLD))
    expected = filter_runs(base, use_index=False)
    assert [item["summary_dir"] for item in expected["object"]] == [
        str(base / "digits" / f"version_{version}") for version in (2, 1, 0)
    ]
    query_of(base)  # writes the index
    with listings() as listed:
        scan = warm(base)
    # The column check alone: the base dir's names, `digits` taken on its mtime.
    assert (scan.parsed_runs, scan.reused_runs, listed) == (0, 3, [("names", str(base))])
    assert filter_runs(base) == expected
    # A new version below `digits` is found by the next query, which walks the runs.
    added = base / "digits" / "version_3"
    lw.write(added, [lw.train(network="V3", loss=0.3)], mtime=OLD + 3)
    finish(added)
    with listings() as listed:
        scan = warm(base)
    assert scan.parsed_runs == 1 and ("entries", str(base / "digits")) in listed
    assert filter_runs(base) == filter_runs(base, use_index=False)
    assert len(filter_runs(base)["object"]) == 4
