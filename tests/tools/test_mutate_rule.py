"""tools/mutate_rule.py: single changes to the straggler rule, and whether tests catch them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "mutate_rule.py"
RULE = ROOT / "packages/rankscribe-jobview/src/rankscribe/jobview/job/verdicts"


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_list_holds_each_constant_both_ways_and_each_branch() -> None:
    done = _run("--list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.endswith("FLOOR_ERRORS x0.5: 1.0 -> 0.5") for line in lines)
    assert any(line.endswith("CONFIDENCE_RANKS x1.5: 64 -> 96") for line in lines)
    assert any("LEAD_EDGES x0.5: (0.5, 1.0, 2.0, 4.0) -> (0.25, 0.5, 1.0, 2.0)" in x for x in lines)
    assert any("_wall_named: `not alone` removed from a `and` of 2" in line for line in lines)
    assert any("_moderated: `if spread > NORMAL_SPREAD` never taken" in line for line in lines)
    # Annotations are not code that decides: no `X | None` of a signature is changed.
    assert not any("None` removed" in line for line in lines)


def test_a_run_reports_killed_equivalent_and_surviving_mutants_and_fails_below_the_bar() -> None:
    before = {path: path.read_bytes() for path in RULE.glob("*.py")}
    done = _run(
        "--only",
        "FLOOR_ERRORS x0.5",
        "if len(part.ranks) < 2",
        "CLIPSHARE x1.5",
        "--tests",
        "tests/jobview/test_straggler_rule.py",
        "--jobs",
        "1",
    )
    out = done.stdout
    # The margin's test fails when the margin is halved; the shortcut changes nothing and
    # is listed as such; the clip's value above one step no test of this file needs.
    assert "killed " in out and "FLOOR_ERRORS x0.5" in out
    assert "test_a_rank_slow_in_half_its_steps_must_clear_five_floors" in out
    assert "equivalent" in out and "if len(part.ranks) < 2" in out
    assert "SURVIVED" in out and "CLIPSHARE x1.5" in out
    assert "killed 1 of 3 (33%; 0 by the timeout); 1 equivalent; killed 50% of the other 2" in out
    assert done.returncode == 1, out + done.stderr
    # The checkout's files are as they were.
    assert {path: path.read_bytes() for path in RULE.glob("*.py")} == before
