"""The report's words for the new straggler keys: a slow node, and a timing other than the step."""

from __future__ import annotations

from typing import Any

import numpy as np

# private: the report's data reduction, no public door
from rankscribe.lineage.report._data import DrawnCurve, RunInfo

# private: the report page's HTML pieces, no public door
from rankscribe.lineage.report._page import _step_time_html

# private: the report's comparison table rule, no public door
from rankscribe.lineage.report._table import verdict_summary


def _job(verdicts: dict[str, Any], ranks: int = 4) -> RunInfo:
    rank_dirs = {rank: f"/base/job/rank_{rank}" for rank in range(ranks)}
    return RunInfo("job", "/base/job", {"user_defined": verdicts}, rank_dirs)


def test_a_slow_node_is_summed_up_whole() -> None:
    verdicts = {
        "job/straggler_rank": 3,
        "job/straggler_ranks": "2,3",
        "job/straggler_timing": "rankscribe/section/compute",
    }
    assert verdict_summary(_job(verdicts)) == "stragglers: ranks 2,3 (no cost recorded)"
    one = {"job/straggler_rank": 1, "job/straggler_ranks": "1"}
    assert verdict_summary(_job(one)) == "straggler: rank 1 (no cost recorded)"
    costed = {**verdicts, "job/straggler_cost_seconds": 0.002, "job/straggler_cost_share": 0.1}
    assert verdict_summary(_job(costed)) == "2.0 ms a step (10%): stragglers ranks 2,3"


def test_the_summary_and_the_chart_lead_with_the_cost() -> None:
    verdicts = {
        "job/straggler_cost_seconds": 0.0041,
        "job/straggler_cost_share": 0.33,
        "job/straggler_rank": 1,
        "job/straggler_ranks": "1",
        "job/straggler_excess": 0.5,
        "job/straggler_timing": "rankscribe/forward_time",
    }
    assert verdict_summary(_job(verdicts)) == "4.1 ms a step (33%): straggler rank 1"
    html = "".join(_step_time_html(_JobData(verdicts), 1000))  # type: ignore[arg-type]
    assert "4.1 ms a step (33%) lost to straggler rank 1 (named by its forward time)" in html
    assert "#d62728" in html  # an alarm: drawn red
    damaged = {**verdicts, "job/straggler_cost_share": "n/a"}
    assert verdict_summary(_job(damaged)) == "straggler: rank 1 (no cost recorded)"
    html = "".join(_step_time_html(_JobData(damaged), 1000))  # type: ignore[arg-type]
    assert "no cost recorded" in html and "#d62728" not in html


class _JobData:
    def __init__(self, verdicts: dict[str, Any]) -> None:
        self.run = _job(verdicts, ranks=2)
        # a collective evened the step times out: the same on both ranks
        self.ranks = {
            rank: {"rankscribe/step_time": DrawnCurve(np.arange(1, 4), np.full(3, 0.05), 3)}
            for rank in range(2)
        }


def test_the_step_time_chart_says_which_timing_named_the_straggler() -> None:
    """Equal step times under a collective: the title must not claim they differ."""
    verdicts = {
        "job/straggler_rank": 1,
        "job/straggler_ranks": "1",
        "job/straggler_excess": 14.3,
        "job/straggler_timing": "rankscribe/forward_time",
    }
    html = "".join(_step_time_html(_JobData(verdicts), 1000))  # type: ignore[arg-type]
    assert "straggler rank 1 (named by its forward time)" in html
    assert "+1430%" not in html
    by_step = {
        **verdicts,
        "job/straggler_timing": "rankscribe/step_time",
        "job/straggler_excess": 0.5,
    }
    html = "".join(_step_time_html(_JobData(by_step), 1000))  # type: ignore[arg-type]
    assert "straggler rank 1, median +50% over the others" in html
