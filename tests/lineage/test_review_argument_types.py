"""Review: wrong types in a query's arguments give the documented lineage errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import (
    LineageSearchConditionParamError,
    filter_runs,
    filter_summary_lineage,
)
from rankscribe.lineage.errors import LineageExpressionError


@pytest.fixture
def base(lw: Any, tmp_path: Path) -> Path:
    lw.write(tmp_path / "base" / "run1", [lw.train(optimizer="Adam", loss=0.5)])
    return tmp_path / "base"


@pytest.mark.parametrize(
    "lineage_type", [{"in": [["model"]]}, {"eq": ["model"]}, {"eq": {}}, {"in": [{"a": 1}]}]
)
def test_unhashable_lineage_type_is_a_search_condition_error(base: Path, lineage_type: Any) -> None:
    with pytest.raises(LineageSearchConditionParamError, match="lineage_type is invalid"):
        filter_summary_lineage(str(base), {"lineage_type": lineage_type})


@pytest.mark.parametrize("where", [123, b"loss < 1", ["loss < 1"]])
def test_filter_runs_where_that_is_not_a_str(base: Path, where: Any) -> None:
    with pytest.raises(LineageExpressionError, match="the filter must be a str"):
        filter_runs(base, where)
