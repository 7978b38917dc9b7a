"""The report's words for the new straggler keys: a slow node, and a timing other than the step.

Each case is a job the report reads as a user's would be: its ranks' step times, and a
merged lineage whose ``user_defined`` holds the verdicts under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests._support.needs import needs
from tests._support.report_page import job_page, page_figures

# Each test reads the report's page, drawn with plotly.
pytestmark = needs("plotly", envs="lineage")

#: The colour the report draws an alarm in (a straggler with its cost).
ALARM_RED = "#d62728"
_CELL = re.compile(r'<td data-text="[^"]*"(?: title="[^"]*")?>([^<]*)</td>')


def verdict_summary(page: str) -> str:
    """The job's cell in the runs table's verdicts column."""
    (cell,) = [cell for cell in _CELL.findall(page) if "straggler" in cell]
    return cell


def figure_title(figure: dict[str, Any]) -> str:
    return str(figure["layout"].get("title", {}).get("text", ""))


def step_time_figure(page: str) -> dict[str, Any]:
    (figure,) = [
        figure for figure in page_figures(page) if "step time per rank" in figure_title(figure)
    ]
    return figure


def step_time_title(page: str) -> str:
    return figure_title(step_time_figure(page))


def test_a_slow_node_is_summed_up_whole(tmp_path: Path) -> None:
    verdicts = {
        "job/straggler_rank": 3,
        "job/straggler_ranks": "2,3",
        "job/straggler_timing": "rankscribe/section/compute",
    }
    assert verdict_summary(job_page(tmp_path / "node", verdicts)) == (
        "stragglers: ranks 2,3 (no cost recorded)"
    )
    one = {"job/straggler_rank": 1, "job/straggler_ranks": "1"}
    assert (
        verdict_summary(job_page(tmp_path / "one", one)) == "straggler: rank 1 (no cost recorded)"
    )
    costed = {**verdicts, "job/straggler_cost_seconds": 0.002, "job/straggler_cost_share": 0.1}
    assert verdict_summary(job_page(tmp_path / "costed", costed)) == (
        "2.0 ms a step (10%): stragglers ranks 2,3"
    )


def test_a_job_of_two_verdicts_gives_the_cost_and_onset_to_the_ranks_they_are_of(
    tmp_path: Path,
) -> None:
    # Rank 1 named by its compute section (the costliest), rank 0 by its step time: the
    # lineage's cost, timing and onset are rank 1's, and the words say so.
    verdicts = {
        "job/straggler_cost_seconds": 0.0025,
        "job/straggler_cost_share": 0.2,
        "job/straggler_rank": 1,
        "job/straggler_ranks": "0,1",
        "job/straggler_timing": "rankscribe/section/compute",
        "job/straggler_since_step": 501,
        "job/straggler_message": "rank 1 costs 2.5 ms a step (20% of the step): section "
        "'compute' 1.34x the others' median since step 501, in 100% of steps",
        "job/straggler_timing/0": "rankscribe/step_time",
        "job/straggler_cost_seconds/0": 0.00038,
        "job/straggler_cost_share/0": 0.03,
        "job/straggler_timing/1": "rankscribe/section/compute",
        "job/straggler_cost_seconds/1": 0.0025,
        "job/straggler_cost_share/1": 0.2,
    }
    page = job_page(tmp_path / "two", verdicts)
    assert verdict_summary(page) == "2.5 ms a step (20%): straggler rank 1 (stragglers: ranks 0,1)"
    [flagged] = re.findall(r'<li class="flag">([^<]*)</li>', page)
    assert flagged.startswith("2.5 ms a step (20% of the step): straggler rank 1, its section ")
    assert "since step 501" in flagged
    # A slow node: both ranks named by one timing, one cost between them.
    node = {**verdicts, "job/straggler_timing/0": "rankscribe/section/compute"}
    page = job_page(tmp_path / "node", node)
    assert verdict_summary(page) == "2.5 ms a step (20%): stragglers ranks 0,1"
    [flagged] = re.findall(r'<li class="flag">([^<]*)</li>', page)
    assert flagged.startswith("2.5 ms a step (20% of the step): stragglers ranks 0,1, its ")


def test_the_summary_and_the_chart_lead_with_the_cost(tmp_path: Path) -> None:
    verdicts = {
        "job/straggler_cost_seconds": 0.0041,
        "job/straggler_cost_share": 0.33,
        "job/straggler_rank": 1,
        "job/straggler_ranks": "1",
        "job/straggler_excess": 0.5,
        "job/straggler_timing": "rankscribe/forward_time",
    }
    page = job_page(tmp_path / "cost", verdicts, ranks=2)
    assert verdict_summary(page) == "4.1 ms a step (33%): straggler rank 1"
    figure = step_time_figure(page)
    assert "4.1 ms a step (33%) lost to straggler rank 1 (named by its forward time)" in (
        figure_title(figure)
    )
    assert ALARM_RED in json.dumps(figure)  # an alarm: drawn red
    damaged = {**verdicts, "job/straggler_cost_share": "n/a"}
    page = job_page(tmp_path / "damaged", damaged, ranks=2)
    assert verdict_summary(page) == "straggler: rank 1 (no cost recorded)"
    figure = step_time_figure(page)
    assert "no cost recorded" in figure_title(figure) and ALARM_RED not in json.dumps(figure)


def test_the_step_time_chart_says_which_timing_named_the_straggler(tmp_path: Path) -> None:
    """Equal step times under a collective: the title must not claim they differ."""
    verdicts = {
        "job/straggler_rank": 1,
        "job/straggler_ranks": "1",
        "job/straggler_excess": 14.3,
        "job/straggler_timing": "rankscribe/forward_time",
    }
    title = step_time_title(job_page(tmp_path / "forward", verdicts, ranks=2))
    assert "straggler rank 1 (named by its forward time)" in title
    assert "+1430%" not in title
    by_step = {
        **verdicts,
        "job/straggler_timing": "rankscribe/step_time",
        "job/straggler_excess": 0.5,
    }
    title = step_time_title(job_page(tmp_path / "step", by_step, ranks=2))
    assert "straggler rank 1, median +50% over the others" in title
