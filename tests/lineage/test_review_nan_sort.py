"""Review: one run with a NaN metric must not leave the other runs unsorted."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_runs, filter_summary_lineage

ACCURACIES = [0.3, float("nan"), 0.1, 0.2, float("nan"), 0.05, 0.4]


@pytest.fixture
def base(lw: Any, tmp_path: Path) -> Path:
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
def test_filter_runs_sorts_the_numbers_and_puts_nan_last(base: Path, descending: bool) -> None:
    key = "metric/acc desc" if descending else "metric/acc"
    shown = _accuracies(filter_runs(base, order_by=key, use_index=False))
    assert _numbers(shown) == sorted(_numbers(ACCURACIES), reverse=descending)
    assert all(math.isnan(value) for value in shown[-2:])


@pytest.mark.parametrize("sorted_type", ["ascending", "descending"])
def test_filter_summary_lineage_sorts_the_numbers(base: Path, sorted_type: str) -> None:
    condition = {"sorted_name": "metric/acc", "sorted_type": sorted_type}
    shown = _accuracies(filter_summary_lineage(str(base), condition, use_index=False))
    assert _numbers(shown) == sorted(_numbers(ACCURACIES), reverse=sorted_type == "descending")
    assert len(shown) == len(ACCURACIES)
