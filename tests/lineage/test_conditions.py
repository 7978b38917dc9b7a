"""filter_summary_lineage, table-driven.

Every search field and operator, sorting, page edges, lineage_type and every error code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import (
    LineageError,
    filter_runs,
    filter_summary_lineage,
    get_summary_lineage,
)
from rankscribe.lineage.errors import (
    LineageDirNotExistError,
    LineageFileNotFoundError,
    LineageMergeError,
    LineageParamSummaryPathError,
    LineageParamTypeError,
    LineageParamValueError,
    LineageQuerySummaryDataError,
    LineageSearchConditionParamError,
    LineageSummaryAnalyzeException,
    LineageSummaryParseException,
)

GRAPH_1 = {"op_type": "Batch", "batch_size": 32, "children": [{"op_type": "MnistDataset"}]}
GRAPH_2 = {"op_type": "Batch", "batch_size": 64, "children": []}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, lw: Any) -> Path:
    """Four runs, newest first a, b, c, d (so that is the base order)."""
    custom_event, eval_event, graph_event = lw.custom, lw.eval, lw.graph
    train_event, write_lineage = lw.train, lw.write
    root = tmp_path_factory.mktemp("table") / "base"
    runs: dict[str, list[Any]] = {
        "a": [
            graph_event(GRAPH_1),
            custom_event({"seed": 1, "note": "x", "mixed": 1}),
            train_event(
                optimizer="Adam",
                learning_rate=0.1,
                loss_function="CE",
                epoch=10,
                batch_size=32,
                device_num=1,
                train_dataset_path="/data/a",
                train_dataset_size=1000,
                network="ResNet",
                loss=0.3,
                path="{}",
                size=100,
            ),
            eval_event({"acc": 0.9}, "/data/v", 200),
        ],
        "b": [
            graph_event(GRAPH_2),
            custom_event({"seed": 2, "mixed": "x"}),
            train_event(
                optimizer="Momentum",
                learning_rate=0.01,
                loss_function="MSE",
                epoch=20,
                batch_size=64,
                device_num=2,
                train_dataset_path="/data/b",
                train_dataset_size=2000,
                network="VGG",
                loss=0.6,
                size=200,
            ),
            eval_event({"acc": 0.7, "f1": 0.5}, "/data/w", 300),
        ],
        "c": [
            graph_event(GRAPH_1),
            custom_event({"seed": 3, "mixed": 2.5}),
            train_event(
                optimizer="SGD",
                learning_rate=0.5,
                epoch=5,
                batch_size=16,
                device_num=4,
                train_dataset_size=500,
                network="ResNet",
                loss=1.5,
            ),
        ],
        "d": [eval_event({"acc": 0.8}, "/data/v", 100)],
    }
    for age, (name, events) in enumerate(runs.items()):
        write_lineage(root / name, events, mtime=1_800_000_000 - age * 10)
    return root


def names(result: dict[str, Any]) -> list[str]:
    return [os.path.basename(item["summary_dir"]) for item in result["object"]]


ALL = ["a", "b", "c", "d"]

FILTER_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("no condition", {}, ALL),
    ("summary_dir eq", {"summary_dir": {"eq": "./b"}}, ["b"]),
    ("summary_dir in", {"summary_dir": {"in": ["./a", "./d"]}}, ["a", "d"]),
    ("summary_dir not_in", {"summary_dir": {"not_in": ["./a"]}}, ["b", "c", "d"]),
    ("loss_function eq", {"loss_function": {"eq": "CE"}}, ["a"]),
    ("loss_function in", {"loss_function": {"in": ["CE", "MSE"]}}, ["a", "b"]),
    (
        "loss_function not_in: a missing value is not in the list (MindInsight 2.3.1)",
        {"loss_function": {"not_in": ["CE"]}},
        ["b", "c", "d"],
    ),
    ("train_dataset_path eq", {"train_dataset_path": {"eq": "/data/b"}}, ["b"]),
    ("train_dataset_path in", {"train_dataset_path": {"in": ["/data/a", "/x"]}}, ["a"]),
    ("train_dataset_path not_in", {"train_dataset_path": {"not_in": ["/data/a"]}}, ["b", "c", "d"]),
    ("train_dataset_count eq", {"train_dataset_count": {"eq": 1000}}, ["a"]),
    ("train_dataset_count lt", {"train_dataset_count": {"lt": 1000}}, ["c"]),
    ("train_dataset_count gt", {"train_dataset_count": {"gt": 1000}}, ["b"]),
    ("train_dataset_count le", {"train_dataset_count": {"le": 1000}}, ["a", "c"]),
    ("train_dataset_count ge", {"train_dataset_count": {"ge": 1000}}, ["a", "b"]),
    ("train_dataset_count in", {"train_dataset_count": {"in": [500, 2000]}}, ["b", "c"]),
    ("train_dataset_count not_in", {"train_dataset_count": {"not_in": [500]}}, ["a", "b", "d"]),
    ("test_dataset_path eq", {"test_dataset_path": {"eq": "/data/v"}}, ["a", "d"]),
    ("test_dataset_path in", {"test_dataset_path": {"in": ["/data/w"]}}, ["b"]),
    ("test_dataset_path not_in", {"test_dataset_path": {"not_in": ["/data/v"]}}, ["b", "c"]),
    ("test_dataset_count eq", {"test_dataset_count": {"eq": 300}}, ["b"]),
    ("test_dataset_count lt", {"test_dataset_count": {"lt": 200}}, ["d"]),
    ("test_dataset_count gt", {"test_dataset_count": {"gt": 200}}, ["b"]),
    ("test_dataset_count le", {"test_dataset_count": {"le": 200}}, ["a", "d"]),
    ("test_dataset_count ge", {"test_dataset_count": {"ge": 200}}, ["a", "b"]),
    ("network eq", {"network": {"eq": "ResNet"}}, ["a", "c"]),
    ("network in", {"network": {"in": ["VGG"]}}, ["b"]),
    ("network not_in", {"network": {"not_in": ["VGG"]}}, ["a", "c", "d"]),
    ("optimizer eq", {"optimizer": {"eq": "SGD"}}, ["c"]),
    ("optimizer in", {"optimizer": {"in": ["Adam", "Momentum"]}}, ["a", "b"]),
    ("optimizer not_in", {"optimizer": {"not_in": ["Adam", "Momentum"]}}, ["c", "d"]),
    ("learning_rate eq (float32 shown as 0.1)", {"learning_rate": {"eq": 0.1}}, ["a"]),
    ("learning_rate lt", {"learning_rate": {"lt": 0.1}}, ["b"]),
    ("learning_rate gt", {"learning_rate": {"gt": 0.1}}, ["c"]),
    ("learning_rate le", {"learning_rate": {"le": 0.1}}, ["a", "b"]),
    ("learning_rate ge (int operand)", {"learning_rate": {"ge": 0}}, ["a", "b", "c"]),
    ("learning_rate in", {"learning_rate": {"in": [0.01, 0.5]}}, ["b", "c"]),
    ("epoch eq", {"epoch": {"eq": 10}}, ["a"]),
    ("epoch lt", {"epoch": {"lt": 10}}, ["c"]),
    ("epoch range: two operators, AND", {"epoch": {"gt": 5, "le": 20}}, ["a", "b"]),
    ("batch_size ge", {"batch_size": {"ge": 32}}, ["a", "b"]),
    ("batch_size not_in", {"batch_size": {"not_in": [32]}}, ["b", "c", "d"]),
    ("device_num gt", {"device_num": {"gt": 1}}, ["b", "c"]),
    ("device_num eq", {"device_num": {"eq": 4}}, ["c"]),
    ("loss lt", {"loss": {"lt": 0.5}}, ["a"]),
    ("loss ge", {"loss": {"ge": 0.6}}, ["b", "c"]),
    ("loss eq (float32 0.3)", {"loss": {"eq": 0.3}}, ["a"]),
    ("model_size eq", {"model_size": {"eq": 200}}, ["b"]),
    ("model_size le", {"model_size": {"le": 200}}, ["a", "b"]),
    ("dataset_mark eq", {"dataset_mark": {"eq": "2"}}, ["a", "c"]),
    ("dataset_mark in", {"dataset_mark": {"in": ["3", "4"]}}, ["b", "d"]),
    ("dataset_mark not_in", {"dataset_mark": {"not_in": ["2"]}}, ["b", "d"]),
    ("metric/acc gt", {"metric/acc": {"gt": 0.75}}, ["a", "d"]),
    ("metric/acc le", {"metric/acc": {"le": 0.8}}, ["b", "d"]),
    ("metric/f1 eq", {"metric/f1": {"eq": 0.5}}, ["b"]),
    ("metric/missing", {"metric/nothing": {"ge": 0}}, []),
    ("user_defined/seed ge", {"user_defined/seed": {"ge": 2}}, ["b", "c"]),
    ("user_defined/note eq", {"user_defined/note": {"eq": "x"}}, ["a"]),
    ("user_defined mixed types: str vs int is no match", {"user_defined/mixed": {"lt": 2}}, ["a"]),
    ("fields AND", {"network": {"eq": "ResNet"}, "loss": {"gt": 1}}, ["c"]),
    (
        "a text field's operators AND (MindInsight 2.3.1)",
        {"optimizer": {"in": ["Adam", "SGD"], "not_in": ["SGD"]}},
        ["a"],
    ),
    ("loss not_in (MindInsight 2.3.1 refuses it)", {"loss": {"not_in": [0.3, 1.5]}}, ["b", "d"]),
    ("metric/acc not_in", {"metric/acc": {"not_in": [0.9]}}, ["b", "c", "d"]),
]


@pytest.mark.parametrize(
    ("condition", "expected"), [case[1:] for case in FILTER_CASES], ids=[c[0] for c in FILTER_CASES]
)
def test_filter(base: Path, condition: dict[str, Any], expected: list[str]) -> None:
    result = filter_summary_lineage(str(base), dict(condition))
    assert names(result) == expected
    assert result["count"] == len(expected)


SORT_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "loss ascending: None first",
        {"sorted_name": "loss", "sorted_type": "ascending"},
        ["d", "a", "b", "c"],
    ),
    (
        "loss descending: None last",
        {"sorted_name": "loss", "sorted_type": "descending"},
        ["c", "b", "a", "d"],
    ),
    (
        "sorted_type None is ascending",
        {"sorted_name": "loss", "sorted_type": None},
        ["d", "a", "b", "c"],
    ),
    ("sorted_name alone is ascending", {"sorted_name": "epoch"}, ["d", "c", "a", "b"]),
    ("text field", {"sorted_name": "optimizer", "sorted_type": "descending"}, ["c", "b", "a", "d"]),
    ("metric/<k>", {"sorted_name": "metric/acc"}, ["c", "b", "d", "a"]),
    (
        "user_defined/<k>",
        {"sorted_name": "user_defined/seed", "sorted_type": "descending"},
        ["c", "b", "a", "d"],
    ),
    ("stable on ties", {"sorted_name": "dataset_mark"}, ["a", "c", "b", "d"]),
    (
        "stable on ties, descending",
        {"sorted_name": "network", "sorted_type": "descending"},
        ["b", "a", "c", "d"],
    ),
    (
        "mixed types compare by type name",
        {"sorted_name": "user_defined/mixed"},
        ["d", "a", "c", "b"],
    ),
    (
        "summary_dir",
        {"sorted_name": "summary_dir", "sorted_type": "descending"},
        ["d", "c", "b", "a"],
    ),
    (
        "every FIELD_MAPPING name sorts: model_size",
        {"sorted_name": "model_size"},
        ["c", "d", "a", "b"],
    ),
    (
        "tag (MindInsight's added_info): every run ties, the base order stays",
        {"sorted_name": "tag"},
        ALL,
    ),
    (
        "tag descending: the base order stays",
        {"sorted_name": "tag", "sorted_type": "descending"},
        ALL,
    ),
    (
        "tag after a filter, paged",
        {"network": {"not_in": ["VGG"]}, "sorted_name": "tag", "limit": 2, "offset": 1},
        ["d"],
    ),
]


@pytest.mark.parametrize(
    ("condition", "expected"), [case[1:] for case in SORT_CASES], ids=[c[0] for c in SORT_CASES]
)
def test_sort(base: Path, condition: dict[str, Any], expected: list[str]) -> None:
    assert names(filter_summary_lineage(str(base), condition)) == expected


PAGE_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("limit only", {"limit": 2}, ["a", "b"]),
    ("offset is a page index", {"limit": 2, "offset": 1}, ["c", "d"]),
    ("last partial page", {"limit": 3, "offset": 1}, ["d"]),
    ("offset past the end", {"limit": 2, "offset": 2}, []),
    ("offset at its maximum", {"limit": 100, "offset": 100000}, []),
    ("offset only: default limit 10", {"offset": 0}, ALL),
    ("limit 100 (the maximum)", {"limit": 100}, ALL),
    ("limit 1", {"limit": 1, "offset": 3}, ["d"]),
    ("page after sorting", {"sorted_name": "loss", "sorted_type": "descending", "limit": 1}, ["c"]),
    ("page after filtering", {"network": {"eq": "ResNet"}, "limit": 1, "offset": 1}, ["c"]),
]


@pytest.mark.parametrize(
    ("condition", "expected"), [case[1:] for case in PAGE_CASES], ids=[c[0] for c in PAGE_CASES]
)
def test_pagination(base: Path, condition: dict[str, Any], expected: list[str]) -> None:
    result = filter_summary_lineage(str(base), condition)
    assert names(result) == expected
    matched = 2 if "network" in condition else 4
    assert result["count"] == matched  # count is before paging


def test_customized_is_built_from_the_page_only(base: Path) -> None:
    first = filter_summary_lineage(str(base), {"limit": 1})  # a only
    assert first["customized"] == {
        "metric/acc": {"label": "metric/acc", "required": True, "type": "float"},
        "user_defined/seed": {"label": "user_defined/seed", "required": False, "type": "int"},
        "user_defined/note": {"label": "user_defined/note", "required": False, "type": "str"},
        "user_defined/mixed": {"label": "user_defined/mixed", "required": False, "type": "int"},
    }
    every = filter_summary_lineage(str(base))
    assert every["customized"]["user_defined/mixed"]["type"] == "mixed"  # int, str, float
    assert every["customized"]["metric/f1"]["type"] == "float"
    assert list(every["customized"])[:2] == ["metric/acc", "user_defined/seed"]


LINEAGE_TYPE_CASES = [
    ({"eq": "model"}, ["summary_dir", "model_lineage"]),
    ({"eq": "dataset"}, ["summary_dir", "dataset_graph"]),
    ({"in": ["dataset", "model"]}, ["summary_dir", "model_lineage", "dataset_graph"]),
    ({"in": ["dataset"]}, ["summary_dir", "dataset_graph"]),
    ({}, ["summary_dir", "model_lineage", "dataset_graph"]),
    ({"eq": "model", "in": ["dataset"]}, ["summary_dir", "dataset_graph"]),  # 'in' wins
]


@pytest.mark.parametrize(("lineage_type", "keys"), LINEAGE_TYPE_CASES)
def test_lineage_type(base: Path, lineage_type: dict[str, Any], keys: list[str]) -> None:
    result = filter_summary_lineage(str(base), {"lineage_type": lineage_type})
    assert [list(item) for item in result["object"]] == [keys] * 4


def test_lineage_type_none_returns_all_lineage_as_the_original_api_says(base: Path) -> None:
    """The original API's text: without a lineage_type the result is all lineage information.

    ``{"lineage_type": None}`` was refused ("The parameter lineage_type is invalid");
    MindInsight 2.3.1 refuses it too (docs/mindinsight-differences.md, lineage_type-none).
    """
    result = filter_summary_lineage(str(base), {"lineage_type": None})
    assert [list(item) for item in result["object"]] == [
        ["summary_dir", "model_lineage", "dataset_graph"]
    ] * 4
    assert result == filter_summary_lineage(str(base))
    paged = filter_summary_lineage(str(base), {"lineage_type": None, "limit": 2, "offset": 1})
    assert paged == filter_summary_lineage(str(base), {"limit": 2, "offset": 1})


def test_object_shape(base: Path) -> None:
    result = filter_summary_lineage(str(base), {"summary_dir": {"eq": "./a"}})
    (item,) = result["object"]
    assert item["summary_dir"] == str(base / "a")
    assert item["model_lineage"] == {
        "loss_function": "CE",
        "train_dataset_path": "/data/a",
        "train_dataset_count": 1000,
        "test_dataset_path": "/data/v",
        "test_dataset_count": 200,
        "network": "ResNet",
        "optimizer": "Adam",
        "learning_rate": 0.1,
        "epoch": 10,
        "batch_size": 32,
        "device_num": 1,
        "loss": 0.3,
        "model_size": 100,
        "dataset_mark": "2",
        "metric": {"acc": 0.9},
        "user_defined": {"seed": 1, "note": "x", "mixed": 1},
    }
    assert item["dataset_graph"] == {
        "op_type": "Batch",
        "batch_size": 32,
        "children": [{"op_type": "MnistDataset", "children": []}],
    }
    only_eval = filter_summary_lineage(str(base), {"summary_dir": {"eq": "./d"}})["object"][0]
    assert only_eval["model_lineage"]["optimizer"] is None
    assert only_eval["dataset_graph"] == {}
    assert only_eval["model_lineage"]["dataset_mark"] == "4"


SEARCH = "Search_condition param error: "
FIELD_MESSAGE = "The parameter {} is invalid. It should be a dict and the value should be a string"
COUNT_MESSAGE = (
    "The parameter {} is invalid. It should be a dict and the value should be a "
    "integer between 0 and pow(2, 63) -1"
)
ERROR_CASES: list[tuple[str, Any, str]] = [
    ("not a dict", ["loss"], "TypeError. Invalid search_condition type, it should be dict."),
    ("limit not int", {"limit": "1"}, "TypeError. The limit must be int."),
    ("limit bool", {"limit": True}, "TypeError. The limit must be int."),
    ("offset not int", {"offset": 1.0}, "TypeError. The offset must be int."),
    ("limit 0", {"limit": 0}, "Invalid input limit. 0 < limit <= 100"),
    ("limit 101", {"limit": 101}, "Invalid input limit. 0 < limit <= 100"),
    ("offset -1", {"offset": -1}, "Invalid input offset. 0 <= offset <= 100000"),
    ("offset 100001", {"offset": 100001}, "Invalid input offset. 0 <= offset <= 100000"),
    (
        "unknown sorted_name",
        {"sorted_name": "speed"},
        "ValueError. The sorted_name must be in ['summary_dir', 'loss_function', "
        "'train_dataset_path', 'train_dataset_count', 'test_dataset_path', 'test_dataset_count', "
        "'network', 'optimizer', 'learning_rate', 'epoch', 'batch_size', 'device_num', 'loss', "
        "'model_size', 'dataset_mark'] or start with `metric/` or `user_defined/`.",
    ),
    ("bare metric/ sorted_name", {"sorted_name": "metric/"}, "ValueError. The sorted_name must"),
    ("sorted_name not str", {"sorted_name": 3}, "ValueError. The sorted_name must"),
    (
        "sorted_type alone",
        {"sorted_type": "ascending"},
        "ValueError. The sorted_name must exist when sorted_type exists.",
    ),
    (
        "bad sorted_type",
        {"sorted_name": "loss", "sorted_type": "up"},
        "ValueError. The sorted_type must be ascending or descending.",
    ),
    ("unknown field", {"speed": {"eq": 1}}, "ValueError. The search attribute not supported."),
    ("bare metric/", {"metric/": {"eq": 1}}, "ValueError. The search attribute not supported."),
    (
        "condition not dict",
        {"loss": 1},
        "TypeError. The search_condition element loss should be dict.",
    ),
    (
        "unknown operator",
        {"loss": {"ne": 1}},
        "ValueError. The compare condition should be in "
        "('eq', 'lt', 'gt', 'le', 'ge', 'in', 'not_in').",
    ),
    (
        "metric value not a number",
        {"metric/acc": {"eq": "x"}},
        "The parameter metric/acc is invalid. It should be a dict and the value should be a "
        "float or a integer",
    ),
    ("metric in not a list", {"metric/acc": {"in": 1}}, "The parameter metric/acc is invalid."),
    (
        "loss not a number",
        {"loss": {"eq": "x"}},
        "The parameter loss is invalid. It should be a float.",
    ),
    (
        "learning_rate bool",
        {"learning_rate": {"gt": True}},
        "The parameter learning_rate is invalid. It should be a dict and the value should be a "
        "float or a integer",
    ),
    (
        "epoch negative",
        {"epoch": {"eq": -1}},
        "The parameter epoch is invalid. It should be a positive integer.",
    ),
    (
        "batch_size float",
        {"batch_size": {"eq": 1.5}},
        "The parameter batch_size is invalid. It should be a non-negative integer.",
    ),
    (
        "train_dataset_count too big",
        {"train_dataset_count": {"eq": 2**63}},
        COUNT_MESSAGE.format("train_dataset_count"),
    ),
    (
        "test_dataset_count in not a list",
        {"test_dataset_count": {"in": 5}},
        "The parameter test_dataset_count is invalid. The value of `in` operation must be list or "
        "tuple.",
    ),
    (
        "test_dataset_count not_in not a list (MindInsight says `in`)",
        {"test_dataset_count": {"not_in": 5}},
        "The parameter test_dataset_count is invalid. The value of `in` operation must be list or "
        "tuple.",
    ),
    (
        "test_dataset_count float",
        {"test_dataset_count": {"lt": 1.5}},
        COUNT_MESSAGE.format("test_dataset_count"),
    ),
    (
        "device_num text",
        {"device_num": {"eq": "x"}},
        "The parameter device_num is invalid. It should be a non-negative integer.",
    ),
    (
        "model_size text",
        {"model_size": {"eq": "1"}},
        "The parameter model_size is invalid. It should be an integer between 0 and pow(2, 63) -1.",
    ),
    (
        "optimizer lt",
        {"optimizer": {"lt": "x"}},
        "The parameter optimizer is invalid. Its operation should be `eq`, `in` or `not_in`.",
    ),
    ("network number", {"network": {"eq": 1}}, FIELD_MESSAGE.format("network")),
    ("loss_function number", {"loss_function": {"eq": 1}}, FIELD_MESSAGE.format("loss_function")),
    (
        "train_dataset_path number",
        {"train_dataset_path": {"eq": 1}},
        "The parameter train_dataset_path is invalid. It should be a dict and the value should be "
        "a string",
    ),
    (
        "test_dataset_path in not a list",
        {"test_dataset_path": {"in": "x"}},
        "The parameter test_dataset_path is invalid. The value of `in` operation must be list or "
        "tuple.",
    ),
    (
        "test_dataset_path number",
        {"test_dataset_path": {"eq": 1}},
        FIELD_MESSAGE.format("test_dataset_path"),
    ),
    (
        "dataset_mark number",
        {"dataset_mark": {"eq": 2}},
        "The parameter dataset_mark is invalid. It should be a string.",
    ),
    ("summary_dir number", {"summary_dir": {"eq": 1}}, FIELD_MESSAGE.format("summary_dir")),
    (
        "lineage_type unknown",
        {"lineage_type": {"eq": "graph"}},
        "The parameter lineage_type is invalid. It should be 'dataset' or 'model'.",
    ),
    (
        "lineage_type as an unknown str",
        {"lineage_type": "graph"},
        "The parameter lineage_type is invalid.",
    ),
    (
        "lineage_type in not a list",
        {"lineage_type": {"in": "model"}},
        "The parameter lineage_type is invalid. The value of `in` operation must be list or tuple.",
    ),
    (
        "lineage_type with another operator",
        {"lineage_type": {"not_in": ["model"]}},
        "The parameter lineage_type is invalid. It should be 'dataset' or 'model'.",
    ),
]


@pytest.mark.parametrize(
    ("condition", "message"), [case[1:] for case in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_condition_errors(base: Path, condition: Any, message: str) -> None:
    with pytest.raises(LineageSearchConditionParamError) as caught:
        filter_summary_lineage(str(base), condition)
    error = caught.value
    assert error.error_code == "50542218"
    assert error.message.startswith(SEARCH + message)
    assert str(error) == f"[LineageSearchConditionParamError] code: 50542218, msg: {error.message}"
    assert isinstance(error, ValueError)


PATH_INVALID = "The parameter summary path error: ValueError. The summary path is invalid."
PATH_MISSING = (
    "The parameter summary path error: Dir not exist error: The summary path does "
    "not exist or is not a dir."
)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("relative/dir", PATH_INVALID),
        ("", PATH_INVALID),
        ("/tmp/../tmp", PATH_INVALID),
        (None, PATH_INVALID),
        ("/no/such/dir", PATH_MISSING),
    ],
)
def test_base_path_errors(path: Any, message: str) -> None:
    for call in (filter_summary_lineage, get_summary_lineage):
        with pytest.raises(LineageParamSummaryPathError) as caught:
            call(path)
        assert caught.value.error_code == "50542217"
        assert caught.value.message == message
        assert isinstance(caught.value, ValueError)


def test_base_path_that_is_a_file(base: Path) -> None:
    file = next((base / "a").iterdir())
    with pytest.raises(LineageParamSummaryPathError, match="Dir not exist error"):
        filter_summary_lineage(str(file))


def test_a_summary_dir_condition_naming_no_run_matches_nothing(base: Path) -> None:
    # MindInsight 2.3.1 compares the values; 0.7 refused a directory that did not exist.
    result = filter_summary_lineage(str(base), {"summary_dir": {"in": ["./a", "./nope"]}})
    assert names(result) == ["a"]
    assert filter_summary_lineage(str(base), {"summary_dir": {"eq": "a"}})["count"] == 0
    assert filter_summary_lineage(str(base), {"summary_dir": {"eq": str(base / "b")}})["count"] == 1


def test_no_lineage_files(tmp_path: Path, base: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "events.out.events.summary.1.0.vm_MS").write_bytes(b"")
    with pytest.raises(LineageFileNotFoundError) as caught:
        filter_summary_lineage(str(tmp_path))
    assert caught.value.error_code == "50542216"
    assert caught.value.message == (
        "File not found error: There is no summary log file under summary_base_dir."
    )
    assert isinstance(caught.value, FileNotFoundError)
    # a base dir holding only runs is not itself a run
    with pytest.raises(LineageFileNotFoundError) as caught:
        get_summary_lineage(str(base))
    assert caught.value.message == (
        "File not found error: There is no summary log file under summary_dir."
    )


@pytest.mark.parametrize(
    ("keys", "kind", "code", "message"),
    [
        ("metric", LineageParamTypeError, "50542080", "TypeError. Keys must be list."),
        (("metric",), LineageParamTypeError, "50542080", "TypeError. Keys must be list."),
        ([1], LineageParamTypeError, "50542080", "TypeError. Element of keys must be str."),
        (
            ["user_defined"],
            LineageParamValueError,
            "50542081",
            "ValueError. Keys must be in ['metric', 'hyper_parameters', 'algorithm', "
            "'train_dataset', 'valid_dataset', 'model', 'dataset_graph'].",
        ),
    ],
)
def test_get_summary_lineage_key_errors(
    base: Path, keys: Any, kind: type[LineageError], code: str, message: str
) -> None:
    with pytest.raises(kind) as caught:
        get_summary_lineage(str(base / "a"), keys=keys)
    assert caught.value.error_code == code
    assert caught.value.message == message
    builtin = TypeError if kind is LineageParamTypeError else ValueError
    assert isinstance(caught.value, builtin)


def test_unreadable_directory_is_a_query_error(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: str) -> Any:
        raise PermissionError(13, "Permission denied", path)

    # Every directory refuses to be listed (as root, a mode would not make it refuse).
    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(LineageQuerySummaryDataError) as caught:
        filter_summary_lineage(str(base))
    assert caught.value.error_code == "50542215"
    assert caught.value.message == "Query summary data error: Filter summary lineage failed."
    with pytest.raises(LineageQuerySummaryDataError) as caught:
        get_summary_lineage(str(base / "a"))
    assert caught.value.message == "Query summary data error: Get summary lineage failed."


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (
            LineageDirNotExistError("x"),
            "[LineageDirNotExistError] code: 50542214, msg: Dir not exist error: x",
        ),
        (
            LineageSummaryParseException(),
            "[LineageSummaryParseException] code: 50542402, msg: All summary logs parsing failed.",
        ),
        (
            LineageSummaryAnalyzeException("y"),
            "[LineageSummaryAnalyzeException] code: 50542380, "
            "msg: Failed to analyze summary log. y",
        ),
        (
            LineageMergeError("z"),
            "[LineageMergeError] code: 50542220, msg: Merge rank lineage error: z",
        ),
        (
            LineageParamTypeError("a   b\n c"),
            "[LineageParamTypeError] code: 50542080, msg: TypeError. a b c",
        ),
    ],
)
def test_error_classes(error: LineageError, text: str) -> None:
    assert str(error) == text
    assert error.http_code == 500


def test_not_in_and_a_missing_value_behave_as_the_docs_say(base: Path) -> None:
    """docs/lineage-queries.md, "Operators": it said a run lacking the value never matched
    `not_in`, while the code (and docs/mindinsight-differences.md) kept it, as MindInsight
    2.3.1 does. The docs now state what this pins."""
    # c and d have no loss_function: they pass not_in, fail the ordering operators.
    result = filter_summary_lineage(str(base), {"loss_function": {"not_in": ["CE"]}})
    assert names(result) == ["b", "c", "d"]
    assert names(filter_summary_lineage(str(base), {"loss": {"not_in": [0.3]}})) == ["b", "c", "d"]
    assert names(filter_summary_lineage(str(base), {"loss": {"lt": 10.0}})) == ["a", "b", "c"]
    # The string filter is stricter: `not in` and `!=` never match a missing value.
    assert names(filter_runs(str(base), "loss_function not in ('CE')")) == ["b"]
    assert names(filter_runs(str(base), "loss_function != 'CE'")) == ["b"]
    docs = (Path(__file__).resolve().parents[2] / "docs" / "lineage-queries.md").read_text()
    assert "A run without the value (None) fails `lt`, `gt`, `le` and `ge`, and passes " in docs
    assert "value never matches `not_in`" not in docs
