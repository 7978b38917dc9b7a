"""A real ``mpiexec -n 2`` live job whose rank 1 sends rank 0 a message naming a rank the
job does not have ("rank 7") and one whose header is nested 100,000 levels deep, through the
job view's own MPI channel (forged_scenarios.py). Rank 0 refuses each with a warning naming
rank 1, the live view carries on to the end, and nothing of "rank 7" is served: no
``last_step/7`` verdict, rank 1 not missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rankscribe.lineage.recording import parse_run

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "forged_scenarios.py"
JOB_TIMEOUT = 150.0
STEPS = 200


def test_a_forged_rank_and_a_nested_message_are_refused_and_the_view_carries_on(
    mpi: Any, tmp_path: Path
) -> None:
    # Before: points from "rank 7" were merged (verdicts said last_step/7, rank 1 missing),
    # and the nested header's RecursionError ended the live view for the whole job.
    job = tmp_path / "job"
    run = mpi.run(2, *mpi.python(SCENARIO, job, STEPS, "0.3"), cwd=tmp_path, timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.output
    assert "rank 1: sends a message naming rank 7" in run.output
    assert "rank 1: sends a nested message" in run.output
    assert "job view: a message of rank 1 (round" in run.output
    assert "it names rank 7" in run.output
    assert "which is not in the sender's subtree (ranks 1)" in run.output
    assert "nested deeper than 8 levels" in run.output
    assert "the live view stops" not in run.output
    assert "Traceback" not in run.output
    state = json.loads((job / ".rankscribe-live.json").read_text())
    assert state["final"] is True
    assert state["world_size"] == 2
    assert "job/last_step/7" not in state["verdicts"]
    assert state["verdicts"]["job/last_step/1"] == STEPS
    assert state["verdicts"]["job/missing_ranks"] == ""
    lineage = parse_run(str(job)).lineage
    assert lineage is not None
    user_defined = lineage.section("user_defined")
    assert not any(key.endswith("/7") for key in user_defined), sorted(user_defined)
    assert user_defined["job/last_step/1"] == STEPS
