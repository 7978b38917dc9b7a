"""MindInsight v0.1's documented conditions: ``metric_<k>`` and a plain-string lineage_type.

The example of the original documentation runs as written and gives what the
later form (``metric/<k>``, ``{'eq': 'model'}``) gives.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from rankscribe.lineage import filter_summary_lineage
from rankscribe.lineage.errors import LineageSearchConditionParamError


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, lw: Any) -> str:
    root = tmp_path_factory.mktemp("first_form") / "base"
    runs = {
        # name: (loss, batch_size, accuracy)
        "summary_1": (2.5, 128, 0.05),
        "summary_2": (3.0, 256, 0.08),
        "summary_3": (2.25, 192, 0.5),  # accuracy too high
        "summary_4": (4.0, 128, 0.01),  # not in the summary_dir list
        "summary_5": (1.0, 128, 0.01),  # loss too low
    }
    for age, (name, (loss, batch_size, accuracy)) in enumerate(runs.items()):
        lw.write(
            root / name,
            [
                lw.train(loss=loss, batch_size=batch_size, network="LeNet5"),
                lw.eval({"accuracy": accuracy}),
            ],
            mtime=1_800_000_000 - age,
        )
    return str(root)


def names(result: dict[str, Any]) -> list[str]:
    return [os.path.basename(item["summary_dir"]) for item in result["object"]]


def documented_condition(base: str) -> dict[str, Any]:
    """The example of the original ``filter_summary_lineage`` docstring, as written."""
    return {
        "summary_dir": {
            "in": [
                os.path.join(base, "summary_1"),
                os.path.join(base, "summary_2"),
                os.path.join(base, "summary_3"),
            ]
        },
        "loss": {"gt": 2.0},
        "batch_size": {"ge": 128, "le": 256},
        "metric_accuracy": {"lt": 0.1},
        "sorted_name": "summary_dir",
        "sorted_type": "descending",
        "limit": 3,
        "offset": 0,
        "lineage_type": "model",
    }


def test_the_documented_example(base: str) -> None:
    result = filter_summary_lineage(base, documented_condition(base))
    assert names(result) == ["summary_2", "summary_1"]
    assert result["count"] == 2
    first = result["object"][0]
    assert set(first) == {"summary_dir", "model_lineage"}  # lineage_type 'model'
    assert first["model_lineage"]["metric"] == {"accuracy": pytest.approx(0.08)}
    assert result["customized"]["metric/accuracy"]["type"] == "float"


def test_the_documented_call_without_condition(base: str) -> None:
    result = filter_summary_lineage(base)
    assert result["count"] == 5
    assert names(result) == ["summary_1", "summary_2", "summary_3", "summary_4", "summary_5"]
    assert set(result["object"][0]) == {"summary_dir", "model_lineage", "dataset_graph"}


def test_the_documented_example_equals_the_later_form(base: str) -> None:
    later = documented_condition(base)
    later["metric/accuracy"] = later.pop("metric_accuracy")
    later["lineage_type"] = {"eq": "model"}
    assert filter_summary_lineage(base, documented_condition(base)) == filter_summary_lineage(
        base, later
    )


@pytest.mark.parametrize(
    ("first", "later"),
    [
        ({"metric_accuracy": {"ge": 0.05}}, {"metric/accuracy": {"ge": 0.05}}),
        ({"metric_accuracy": {"in": [0.5, 0.01]}}, {"metric/accuracy": {"in": [0.5, 0.01]}}),
        ({"sorted_name": "metric_accuracy"}, {"sorted_name": "metric/accuracy"}),
        (
            {"sorted_name": "metric_accuracy", "sorted_type": "descending", "limit": 2},
            {"sorted_name": "metric/accuracy", "sorted_type": "descending", "limit": 2},
        ),
        ({"lineage_type": "dataset"}, {"lineage_type": {"eq": "dataset"}}),
        (
            {"metric_accuracy": {"lt": 0.1}, "metric/accuracy": {"gt": 0.02}},
            {"metric/accuracy": {"lt": 0.1, "gt": 0.02}},
        ),
    ],
)
def test_first_form_gives_what_the_later_form_gives(
    base: str, first: dict[str, Any], later: dict[str, Any]
) -> None:
    expected = filter_summary_lineage(base, later)
    assert filter_summary_lineage(base, first) == expected
    assert expected["count"] > 0


def test_the_first_form_is_checked_like_the_later_one(base: str) -> None:
    with pytest.raises(
        LineageSearchConditionParamError, match="The parameter metric/accuracy is invalid"
    ):
        filter_summary_lineage(base, {"metric_accuracy": {"lt": "high"}})
    with pytest.raises(LineageSearchConditionParamError, match="lineage_type is invalid"):
        filter_summary_lineage(base, {"lineage_type": "graph"})
    with pytest.raises(LineageSearchConditionParamError, match="search attribute not supported"):
        filter_summary_lineage(base, {"metric_": {"lt": 1}})
    with pytest.raises(
        LineageSearchConditionParamError,
        match=r"'metric/accuracy' is given twice .* 'lt' values: 0\.1 and 0\.2",
    ):
        filter_summary_lineage(
            base, {"metric_accuracy": {"lt": 0.1}, "metric/accuracy": {"lt": 0.2}}
        )


def test_the_caller_condition_is_left_as_given(base: str) -> None:
    condition = documented_condition(base)
    before = {key: value for key, value in condition.items()}
    filter_summary_lineage(base, condition)
    assert condition == before
