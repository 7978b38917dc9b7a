"""The two query entry points: what they refuse and how they order runs.

filter_summary_lineage takes MindInsight's dict conditions, filter_runs a
string filter; both refuse arguments of the wrong type with the documented
lineage error and sort runs whose value is NaN after every number.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_runs, filter_summary_lineage
from rankscribe.lineage.errors import LineageExpressionError, LineageSearchConditionParamError


@pytest.fixture
def one_run(lw: Any, tmp_path: Path) -> Path:
    lw.write(tmp_path / "base" / "run1", [lw.train(optimizer="Adam", loss=0.5)])
    return tmp_path / "base"


@pytest.mark.parametrize(
    "lineage_type", [{"in": [["model"]]}, {"eq": ["model"]}, {"eq": {}}, {"in": [{"a": 1}]}]
)
def test_unhashable_lineage_type_is_a_search_condition_error(
    one_run: Path, lineage_type: Any
) -> None:
    with pytest.raises(LineageSearchConditionParamError, match="lineage_type is invalid"):
        filter_summary_lineage(str(one_run), {"lineage_type": lineage_type})


@pytest.mark.parametrize("where", [123, b"loss < 1", ["loss < 1"]])
def test_filter_runs_where_that_is_not_a_str(one_run: Path, where: Any) -> None:
    with pytest.raises(LineageExpressionError, match="the filter must be a str"):
        filter_runs(one_run, where)


ACCURACIES = [0.3, float("nan"), 0.1, 0.2, float("nan"), 0.05, 0.4]


@pytest.fixture
def nan_runs(lw: Any, tmp_path: Path) -> Path:
    for index, accuracy in enumerate(ACCURACIES):
        lw.write(
            tmp_path / "base" / f"run{index}",
            [lw.train(loss=0.5), lw.eval({"acc": accuracy})],
            mtime=1_000_000 - index,
        )
    return tmp_path / "base"


def _accuracies(result: dict[str, Any]) -> list[float]:
    return [item["model_lineage"]["metric"]["acc"] for item in result["object"]]


def _numbers(values: list[float]) -> list[float]:
    return [value for value in values if not math.isnan(value)]


@pytest.mark.parametrize("descending", [False, True])
def test_filter_runs_sorts_the_numbers_and_puts_nan_last(nan_runs: Path, descending: bool) -> None:
    key = "metric/acc desc" if descending else "metric/acc"
    shown = _accuracies(filter_runs(nan_runs, order_by=key, use_index=False))
    assert _numbers(shown) == sorted(_numbers(ACCURACIES), reverse=descending)
    assert all(math.isnan(value) for value in shown[-2:])


@pytest.mark.parametrize("sorted_type", ["ascending", "descending"])
def test_filter_summary_lineage_sorts_the_numbers(nan_runs: Path, sorted_type: str) -> None:
    condition = {"sorted_name": "metric/acc", "sorted_type": sorted_type}
    shown = _accuracies(filter_summary_lineage(str(nan_runs), condition, use_index=False))
    assert _numbers(shown) == sorted(_numbers(ACCURACIES), reverse=sorted_type == "descending")
    assert len(shown) == len(ACCURACIES)


@pytest.mark.parametrize("sorted_type", ["ascending", "descending"])
def test_metrics_of_more_digits_than_a_float_holds_sort_as_numbers(
    lw: Any, tmp_path: Path, sorted_type: str
) -> None:
    # A metric is JSON text in the lineage file: an int of 400 digits parses, and no float
    # holds it (math.isnan raised OverflowError out of the query).
    accuracies = [0.3, 10**400, -(10**400), 0.1]
    for index, accuracy in enumerate(accuracies):
        lw.write(
            tmp_path / "base" / f"run{index}", [lw.train(loss=0.5), lw.eval({"acc": accuracy})]
        )
    condition = {"sorted_name": "metric/acc", "sorted_type": sorted_type}
    shown = _accuracies(filter_summary_lineage(str(tmp_path / "base"), condition, use_index=False))
    assert shown == sorted(accuracies, reverse=sorted_type == "descending")
