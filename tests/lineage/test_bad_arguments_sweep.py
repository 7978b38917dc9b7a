"""Every public function of the lineage package, every argument in an obvious wrong form.

For each function of ``rankscribe.lineage.__all__`` and the sibling module's
(``recording``) that takes arguments (the job view's: tests/jobview/test_bad_arguments_sweep.py),
a call that works is given below; the sweep replaces one argument at a time with
wrong values chosen from its annotation (None or an int where a path belongs, a str
or a bool or a float where an int belongs, a str where a flag belongs, an infinite or
NaN timeout, an int where a str or a mapping belongs). Each must be refused with the package's error
(:class:`LineageError`) naming the argument, not with a raw ``TypeError`` or
``AttributeError`` from deep inside, and not accepted.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from rankscribe import lineage
from rankscribe.lineage import LineageError, RunLineage, recording
from rankscribe.lineage.errors import LineageExpressionError, LineageParamSummaryPathError
from rankscribe.lineage.recording import TrainLineageInfo
from rankscribe.writer import SummaryRecord
from tests._support.sweeps import (
    ValidCalls,
    assert_swept_or_left_out,
    obvious_wrong_values,
    public_callables,
    refusal,
    sweep_cases,
)


def _job(tmp_path: Path) -> Path:
    job = tmp_path / "job"
    with SummaryRecord(job / "rank_0", rank=0) as record:
        record.add_value("scalar", "loss", 0.5)
        record.record(1)
    return job


GOLDEN_RUN = (
    Path(__file__).resolve().parents[1]
    / "compat"
    / "data"
    / "mindspore-2.10"
    / ("lineage_train_eval")
)


def _base(tmp_path: Path) -> Path:
    """A base dir holding one run MindSpore recorded (``base/run``)."""
    base = tmp_path / "base"
    shutil.copytree(GOLDEN_RUN, base / "run")
    return base


def _run(tmp_path: Path) -> str:
    return str(_base(tmp_path) / "run")


# name -> a call that works: (positional, keyword) arguments made in tmp_path
VALID: ValidCalls = {
    "filter_runs": lambda t: ((_base(t),), {}),
    "filter_summary_lineage": lambda t: ((str(_base(t)),), {}),
    "get_run_lineage": lambda t: ((_run(t),), {}),
    "get_summary_lineage": lambda t: ((_run(t),), {}),
    "merge_rank_lineages": lambda t: (({0: RunLineage("x")},), {}),
    "merge_run_dir": lambda t: ((_job(t),), {}),
    "parse_run": lambda t: ((_run(t),), {}),
    "parse_rank_run": lambda t: ((_run(t),), {}),
    "rank_dirs_note": lambda t: ((_job(t),), {}),
    "remove_train_start": lambda t: ((_run(t),), {}),
    "write_train_start": lambda t: ((_run(t), TrainLineageInfo()), {}),
    "write_train_stop": lambda t: ((_run(t), "RuntimeError"), {}),
    "read_train_stop": lambda t: ((_run(t),), {}),
    "write_hparams": lambda t: ((_base(t),), {}),
    "write_merged_lineage": lambda t: ((_run(t), RunLineage(str(t))), {}),
    "eval_lineage_from_args": lambda t: (({},), {}),
    "train_lineage_from_args": lambda t: (({},), {}),
    "optimizer_of": lambda t: (({},), {}),
    "session_values": lambda t: ((RunLineage("x"),), {}),
    "group_runs": lambda t: ((_base(t), "learning_rate"), {"write": False}),
}
# Public callables without a row above, and why the sweep leaves them out.
LEFT_OUT = {
    # Dataclasses of the lineage model: data, converted to and from protobuf.
    "Algorithm",
    "DatasetGraphInfo",
    "EvalLineageInfo",
    "HyperParameters",
    "MergeOutcome",
    "ModelFile",
    "OperationInfo",
    "OperationParameterInfo",
    "ParsedRun",
    "RunLineage",
    "TrainDataset",
    "TrainLineageInfo",
    "TrainStop",
    "UserDefinedInfo",
    "ValidDataset",
    # Callbacks: test_callbacks.py checks their arguments (a SummaryRecord is needed).
    "EvalLineage",
    "TrainLineage",
    # Protocols and base classes: nothing to call with a wrong argument.
    "LineageCallback",
    "LineageFile",
    "ScalarMessage",
    "SummaryRecordLike",
    # Groups' result types: data (test_groups.py reads them).
    "GroupSpread",
    "GroupedRuns",
    "RunGroup",
}


# MindInsight's own API keeps MindInsight's message for a path that is not an
# absolute str path (LineageParamSummaryPathError, "The summary path is invalid."):
# scripts written for MindInsight match it, so it does not name the argument.
MINDINSIGHT_PATHS = {
    ("filter_summary_lineage", "summary_base_dir"),
    ("get_run_lineage", "summary_dir"),
    ("get_summary_lineage", "summary_dir"),
}
#: (function, argument) -> the error (a LineageError) and what it says instead of the name.
OWN_MESSAGES: dict[tuple[str, str], tuple[type[LineageError], str]] = {
    **{
        call: (LineageParamSummaryPathError, "The summary path is invalid.")
        for call in MINDINSIGHT_PATHS
    },
    # The filter's own error, which shows the expression and the column.
    ("filter_runs", "where"): (LineageExpressionError, "the filter must be a str"),
}


PUBLIC = public_callables(lineage, recording)


def test_every_public_function_is_swept_or_left_out_with_a_reason() -> None:
    assert_swept_or_left_out(PUBLIC, VALID, LEFT_OUT)


@pytest.mark.parametrize(
    ("function_name", "argument", "wrong"), sweep_cases(PUBLIC, VALID, obvious_wrong_values)
)
def test_a_wrong_argument_is_refused_by_name(
    tmp_path: Path, function_name: str, argument: str, wrong: Any
) -> None:
    error, says = OWN_MESSAGES.get((function_name, argument), (LineageError, None))
    refusal(
        PUBLIC[function_name], VALID[function_name](tmp_path), argument, wrong, error, says=says
    )


@pytest.mark.parametrize("function_name", sorted(VALID))
def test_the_valid_call_of_the_sweep_works(tmp_path: Path, function_name: str) -> None:
    positional, keywords = VALID[function_name](tmp_path)
    PUBLIC[function_name](*positional, **keywords)
