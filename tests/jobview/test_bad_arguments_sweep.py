"""Every function of the job view, every argument in an obvious wrong form.

For each function of ``rankscribe.jobview.__all__`` and its sibling modules' (``feed``,
``parts``, ``protocol``) that takes arguments, a call that works is given below; the sweep replaces
one argument at a time with wrong values chosen from its annotation (None or an int
where a path belongs, a str or a bool or a float where an int belongs, an int where a
str or a mapping belongs). Each must be refused with the job view's error
(:class:`~rankscribe.jobview.errors.JobViewError`) naming the argument, not with a raw
``TypeError`` or ``AttributeError`` from deep inside, and not accepted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe import jobview
from rankscribe.jobview import JobStatistics, RankSeries, StragglerEvidence, feed, parts, protocol
from rankscribe.jobview.errors import JobViewError
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


# name -> a call that works: (positional, keyword) arguments made in tmp_path
VALID: ValidCalls = {
    "rank_dir_arrays": lambda t: ((_job(t) / "rank_0",), {}),
    "series_from_dir": lambda t: ((_job(t) / "rank_0", 0), {}),
    "write_job_view": lambda t: (
        (_job(t), {0: RankSeries(0, {"a": [(1, 1.0)]})}),
        {"world_size": 1},
    ),
    "is_timing_tag": lambda t: (("rankscribe/step_time",), {}),
    "straggler_verdicts": lambda t: ((StragglerEvidence(),), {}),
    "straggler_records": lambda t: ((StragglerEvidence(),), {}),
    "judge_timings": lambda t: (({"forward": np.ones((2, 3))},), {}),
    "timings_evidence": lambda t: (({"forward": np.ones((2, 3))},), {}),
    "timing_tag": lambda t: (("forward",), {}),
    "timing_label": lambda t: (("rankscribe/forward_time",), {}),
    "timing_evidence": lambda t: ((JobStatistics(),), {}),
    "job_bands": lambda t: ((JobStatistics(),), {}),
    "verdict_lines": lambda t: (({},), {}),
    "state_ended": lambda t: ((_job(t),), {}),
    "state_onsets": lambda t: ((_job(t),), {}),
    "LiveJobView": lambda t: ((t / "job",), {"world_size": 2}),
}
# Public callables without a row above, and why the sweep leaves them out.
LEFT_OUT = {
    # The gradient rule: test_gradient_rule.py checks the norms' shape, the steps, each
    # setting and the watch's settings (``steps`` may be None, which the sweep refuses).
    "GradientFinding",
    "GradientSettings",
    "GradientWatch",
    "judge_gradients",
    "JobView",
    "RankSeries",
    "JobStatistics",
    "SeriesLike",
    "StragglerEvidence",
    "VerdictSettings",  # test_judge_timings.py checks each threshold
    # The verdict records' types: TypedDicts, plain dicts at run time (test_judge_timings.py
    # and test_jobview_watch.py check that the records hold exactly their keys).
    "CostlyRank",
    "EvidenceReading",
    "StragglerRecord",
    "VerdictRecord",
    # Take anything: a tag of any type is named, values of any array-like are ratios.
    "timing_name",
    "paired_ratios",
    # The partials a subtree sends (test_jobview_live.py checks them: they decode only what
    # this version wrote).
    "JobPartial",
    # Each rank's end of the tree and the merge it asks: the collector makes them from
    # arguments it checked (tests/collector and tests/integration/jobview run them).
    "JobMerge",
    "LiveRankView",
    "TagStatistics",
    # The live view's protocol, used by both halves with values they made themselves
    # (test_jobview_watch.py and the live tests check them); its callback's type.
    "ControlFile",
    "TimingWatch",
    "WatchSettings",
    "VerdictCallback",
    "decode_message",
    "encode_message",
    "judge_window",
    "records_from_verdicts",
    "round_name",
    "round_number",
    "round_period",
    "rounds_per_interval",
    # The machine's evidence from readings the job view decoded (test_jobview_machine.py).
    "system_evidence",
    "system_evidence_records",
    # Text helpers of `show` (test_jobview_live.py, test_cli_output.py, test_foreign_files.py).
    "live_lines",
    "ranges_text",
    "state_lines",
    # The lineage manager's parts (rankscribe.jobview.parts): called by the manager with
    # values it made (tests/lineage runs them through merge, group, show and the index).
    "Curve",
    "HParamsRun",
    "Partial",
    "add_session",
    "holds_tensorboard_files",
    "hparam_value",
    "job_file_names",
    "machine_lines",
    "machine_summary",
    "merge_all",
    "metric_value",
    "missing_ranges",
    "now",
    "pack_arrays",
    "read_live_state",
    "read_readings",
    "reduced_rows",
    "sorted_arrays",
    "step_table",
    "summary_file_records",
    "tensorboard_file_records",
    "unpack_arrays",
    "write_job_files",
}


PUBLIC = public_callables(jobview, feed, parts, protocol)


def test_every_public_function_is_swept_or_left_out_with_a_reason() -> None:
    assert_swept_or_left_out(PUBLIC, VALID, LEFT_OUT)


@pytest.mark.parametrize(
    ("function_name", "argument", "wrong"), sweep_cases(PUBLIC, VALID, obvious_wrong_values)
)
def test_a_wrong_argument_is_refused_by_name(
    tmp_path: Path, function_name: str, argument: str, wrong: Any
) -> None:
    refusal(PUBLIC[function_name], VALID[function_name](tmp_path), argument, wrong, JobViewError)


@pytest.mark.parametrize("function_name", sorted(VALID))
def test_the_valid_call_of_the_sweep_works(tmp_path: Path, function_name: str) -> None:
    positional, keywords = VALID[function_name](tmp_path)
    PUBLIC[function_name](*positional, **keywords)
