"""MindInsight's exceptions: MindInsightException at the root, LineageLogError from callbacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import EvalLineage, TrainLineage, errors, filter_summary_lineage
from rankscribe.lineage.errors import (
    LineageError,
    LineageLogError,
    LineageParamTypeError,
    LineageSearchConditionParamError,
    MindInsightException,
)


def test_every_lineage_error_is_a_mindinsight_exception() -> None:
    hierarchy = [
        value
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, Exception) and name in errors.__all__
    ]
    assert LineageError in hierarchy and LineageLogError in hierarchy
    assert all(issubclass(error, MindInsightException) for error in hierarchy)


def test_a_query_error_is_caught_as_mindinsight_exception(tmp_path: Path) -> None:
    with pytest.raises(MindInsightException) as caught:
        filter_summary_lineage(str(tmp_path), {"sorted_type": "descending"})
    assert isinstance(caught.value, LineageSearchConditionParamError)
    assert caught.value.error_code == "50542218"


def test_mindinsight_exception_as_mindinsight_raises_it() -> None:
    error = MindInsightException(4, "path  not\nexists", http_code=404)
    assert error.message == "path not exists"
    assert error.http_code == 404
    assert error.error_code == "50540004"  # the general module (0)
    assert str(error) == "[MindInsightException] code: 50540004, msg: path not exists"


def test_lineage_log_error_code_and_message() -> None:
    error = LineageLogError("End error in TrainLineage: disk full")
    # LOG_LINEAGE_INFO_ERROR = 17 | 0b00011 << 7 in MindInsight's lineage module.
    assert error.error_code == "50542191"
    assert str(error) == (
        "[LineageLogError] code: 50542191, msg: Fail to write lineage information into log "
        "file. End error in TrainLineage: disk full"
    )


class FailingRecord:
    """A summary record whose disk is full."""

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        raise OSError(28, "No space left on device")

    def record(self, step: int) -> None:
        raise AssertionError("not reached")


class RunContext:
    def __init__(self, **args: Any) -> None:
        self._args = args

    def original_args(self) -> dict[str, Any]:
        return self._args


@pytest.mark.parametrize("callback", [TrainLineage, EvalLineage])
def test_a_recording_failure_is_lineage_log_error_with_the_cause(callback: Any) -> None:
    with pytest.raises(LineageLogError, match="No space left on device") as caught:
        callback(FailingRecord(), raise_exception=True).end(RunContext(metrics={"acc": 0.5}))
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.__cause__.errno == 28
    assert isinstance(caught.value, MindInsightException)


def test_a_recording_failure_is_only_logged_by_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    TrainLineage(FailingRecord()).end(RunContext())
    assert "TrainLineage.end failed: [Errno 28] No space left on device" in caplog.text


def test_a_bad_argument_keeps_its_own_error() -> None:
    with pytest.raises(LineageParamTypeError, match="original_args"):
        TrainLineage(FailingRecord(), raise_exception=True).end(object())
