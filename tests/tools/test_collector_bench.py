"""tools/bench/collector.py: its quick mode runs real rows in a new process and prints its table.

No timing is asserted (a benchmark's numbers are for reading): the table's form, the
targets beside the numbers, each once cost named, and the JSON of every run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from tests._support.needs import needs
from tests._support.tool_modules import load_tool

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench" / "collector.py"
ONCE_LABELS = (
    "open the record",
    "begin",
    "graph",
    "dataset graph",
    "landscape",
    "end of training",
    "lineage merge",
    "close",
)
PERCENT = r"[+-]\d+\.\d\d%"
#: The collector's recorded cost and its ratio to the overhead measured.
OWN = rf"{PERCENT} \(x(-?\d+\.\d\d| n/a)\)"


def run_bench(
    *arguments: str, cwd: Path, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PMI", "OMPI"))}
    env.update(environ or {})
    return subprocess.run(
        [sys.executable, str(BENCH), *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


# The digits row reads scikit-learn's digits, as the example does.
needs_digits = needs("sklearn", envs="public-api")


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, object]]]:
    work = tmp_path_factory.mktemp("bench")
    # A budget the rows' collectors cannot keep: each run's decision is listed under its row.
    finished = run_bench(
        "--quick",
        "--rows",
        "waiting,digits",
        "--json",
        "runs.json",
        cwd=work,
        environ={"RANKSCRIBE_COST_BUDGET": "0.0001"},
    )
    assert finished.returncode == 0, finished.stderr
    return finished.stdout, json.loads((work / "runs.json").read_text())


@needs_digits
def test_the_table_has_a_line_per_row_with_its_targets(
    quick: tuple[str, list[dict[str, object]]],
) -> None:
    out, _ = quick
    lines = out.splitlines()
    assert re.match(r"SummaryCollector cost: 1 reps, bare and collected alternately", lines[0])
    assert re.match(r"  load average \(1, 5, 15 min\) before [\d.]+/[\d.]+/[\d.]+, after", lines[1])
    assert "  waiting    waiting step (10 ms sleep), TrainLoop, 50 steps" in lines
    header = next(line for line in lines if line.startswith("row "))
    for column in ("bare ms/step", "mean/step wall", "mean/step CPU", "quiet step", "whole run"):
        assert column in header
    waiting = next(line for line in lines if line.startswith("waiting "))
    digits = next(line for line in lines if line.startswith("digits "))
    # The waiting step has no target; the digits row's mean step has the 3 %.
    assert re.fullmatch(
        rf"waiting\s+\d+\.\d{{3}}\s+{PERCENT}\s+{PERCENT}\s+{PERCENT}\s+{PERCENT}\s+{PERCENT}"
        rf"\s+{OWN}",
        waiting.rstrip(),
    ), waiting
    assert re.fullmatch(
        rf"digits\s+\d+\.\d{{3}}\s+{PERCENT} \(<=3 (ok|MISS)\)\s+{PERCENT}\s+{PERCENT}\s+"
        rf"{PERCENT}\s+{PERCENT}\s+{OWN}",
        digits.rstrip(),
    ), digits
    # Each row's paired comparison: with one rep, the one pair's number is the median.
    paired = [line for line in lines if line.startswith("    paired: ")]
    assert len(paired) == 2
    for line in paired:
        found = re.fullmatch(
            rf"    paired: mean/step wall ({PERCENT}) \(the median of each collected run "
            rf"against its pair's bare run: ({PERCENT})\); the bare runs' mean step spread "
            r"0\.0%",
            line,
        )
        assert found is not None, line
        assert found.group(1) == found.group(2)
    # The collector's own record of its cost, against what was measured.
    own_lines = [line for line in lines if line.startswith("    own cost recorded: ")]
    assert len(own_lines) == 2
    for line in own_lines:
        # The wall cost where the run measured the steps the collector slowed.
        assert re.fullmatch(
            rf"    own cost recorded: wall \(training thread \+ the steps it slowed\) "
            rf"(?:{OWN}|not recorded) of the bare step vs the mean step's wall overhead "
            rf"\(x(?:-?\d+\.\d\d| n/a) vs the paired\); training thread alone {OWN}; with its "
            rf"threads' CPU {OWN} of the bare step's CPU vs its CPU overhead",
            line,
        ), line


@needs_digits
def test_what_the_cost_budget_decided_is_listed_under_each_row(
    quick: tuple[str, list[dict[str, object]]],
) -> None:
    """The collector's log is kept off the screen while the rows run; the budget's
    decisions are not lost with it: each timed collected run's, under its row."""
    out, runs = quick
    budget_lines = [line for line in out.splitlines() if line.startswith("    cost budget: ")]
    assert len(budget_lines) == 2
    decided = r"\d+\.\d % at steps \d+-\d+(?: \(first look\))?: \S.*"
    for line in budget_lines:
        assert re.fullmatch(rf"    cost budget: run 1: (nothing shed|{decided})", line), line
    # The waiting step's collector costs far more than 0.01 % of its step: its first look
    # (from step 1, where its steps up to 10 take 0.1 s) or its first window (from step 21)
    # decides, shedding the histograms first.
    waiting = next(
        index for index, line in enumerate(out.splitlines()) if line.startswith("waiting ")
    )
    line = next(line for line in out.splitlines()[waiting:] if line.startswith("    cost budget: "))
    assert re.fullmatch(rf"    cost budget: run 1: {decided}", line), line
    assert "the parameter histograms" in line
    # The messages themselves stay off the screen.
    assert "The collector cost" not in out and "The collector's histograms" not in out
    assert "The work the collector never sheds" not in out
    [document] = runs
    rows = cast(list[dict[str, Any]], document["rows"])
    assert [len(row["summary"]["budget"]) for row in rows] == [1, 1]


@needs_digits
def test_each_once_cost_is_listed_under_each_row(
    quick: tuple[str, list[dict[str, object]]],
) -> None:
    out, _ = quick
    once_lines = [line for line in out.splitlines() if line.startswith("    once (ms): ")]
    assert len(once_lines) == 2
    for line in once_lines:
        for label in ONCE_LABELS:
            assert re.search(rf"(: |, ){label} \d+\.\d( x\d+)?(,|;)", line), (label, line)
        assert re.search(rf"; whole run CPU {PERCENT}$", line), line


@needs_digits
def test_the_json_keeps_every_step_of_both_arms(
    quick: tuple[str, list[dict[str, object]]],
) -> None:
    _, documents = quick
    [document] = documents
    assert document["rank"] is None
    rows = {row["key"]: row for row in document["rows"]}  # type: ignore[attr-defined]
    assert list(rows) == ["waiting", "digits"]
    waiting, digits = rows["waiting"], rows["digits"]
    for row in (waiting, digits):
        assert len(row["bare"]) == len(row["collected"]) == 1
        summary = row["summary"]
        for key in ("bare_step_ms", "mean_wall_pct", "mean_cpu_pct", "quiet_pct", "whole_pct"):
            assert isinstance(summary[key], float)
    # 50 steps in one epoch: 49 intervals between step starts; the digits example's
    # epochs are 44 steps, so 50 steps take two of them.
    assert len(waiting["bare"][0]["step_walls"]) == len(waiting["collected"][0]["step_walls"]) == 49
    assert len(digits["collected"][0]["step_walls"]) == 87
    # The default collection saves the landscape's parameters at steps 1-19; the digits
    # example turns the landscape off.
    assert waiting["summary"]["once_ms"]["landscape"]["calls"] >= 19
    assert digits["summary"]["once_ms"]["landscape"]["calls"] == 0
    assert waiting["bare"][0]["once"] == {}


def test_an_unknown_row_is_refused_naming_the_rows(tmp_path: Path) -> None:
    finished = run_bench("--rows", "waiting,gpt", cwd=tmp_path)
    assert finished.returncode == 2
    assert "--rows must be a comma-separated list of mlp-1ms, mlp-10ms" in finished.stderr
    assert "got 'waiting,gpt'" in finished.stderr


@pytest.mark.parametrize(
    ("message", "short"),
    [
        (
            "The collector cost 41.6 % of the training step over steps 21-30 (over its cost "
            "budget of 2 %): it sheds the parameter histograms (none from now on). The loss, "
            "the timings and the lineage are all still recorded. To keep everything, ...",
            "41.6 % at steps 21-30: the parameter histograms (none from now on)",
        ),
        (
            "The collector's histograms and images of step 1 cost 27.0 % of the training step "
            "over steps 2-10 (over its cost budget of 2 %): it sheds the parameter histograms "
            "but at every 27th collected step (every 270 steps). The loss, the timings and the "
            "lineage are all still recorded. To keep everything, ...",
            "27.0 % at steps 2-10 (first look): the parameter histograms but at every 27th "
            "collected step (every 270 steps)",
        ),
        (
            "The work the collector never sheds (the loss, the timings and the lineage) cost "
            "17.7 % of the training step over steps 31-235, over its cost budget of 2 % by "
            "itself, at steps of 119 us there: no shedding keeps the budget here. ...",
            "17.7 % at steps 31-235: over by what is never shed",
        ),
        ("Something else the budget said.", "Something else the budget said."),
    ],
    ids=["window", "first-look", "never-shed", "other"],
)
def test_a_budget_message_is_listed_in_short(message: str, short: str) -> None:
    bench = load_tool("bench/collector.py", "collector_bench_for_decisions")
    assert bench.decision(message) == short
