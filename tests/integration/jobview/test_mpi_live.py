"""The live job view under a real ``mpiexec -n 3``, read while it trains, then SIGKILLed.

The job (live_scenarios.py) trains far longer than the test lets it, with a
0.5 s ``job_view_interval``. The test reads the job's summary file twice
while the job runs — the second read holds more steps — then kills the whole
job with SIGKILL, as a launcher does, reads the file again (every interval
written before the kill is there and whole) and runs the offline
``rankscribe-lineage merge``, which completes the job view from the rank
files. Every step the live file holds has the statistics the offline merge
computes from the same rank files.

The stall test: rank 2's training thread sleeps far past the live view's
stall limit mid-run (its live-view thread runs on, as in a real stall: a
hung data loader, a filesystem that blocks). While it stalls, the live file
goes on growing with the steps of ranks 0 and 1, those steps counted twice,
and the state file and ``rankscribe-lineage show`` name rank 2 missing; the
other ranks' step times show they never waited for it; when it trains on,
the job ends within its timeout and the end-of-training job view is the
offline merge of all three ranks' files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rankscribe.lineage.recording import parse_run
from rankscribe.writer.reader import scalars
from tests._support.launchers import Finished, Launches, run_bounded

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "live_scenarios.py"
RANKS = 3
SCRIPT_TAG = "script/rank_value"  # live_scenarios.SCRIPT_TAG
#: No wait of this test may outlive these.
START_TIMEOUT = 90.0
GROW_TIMEOUT = 45.0
MERGE_TIMEOUT = 60.0
#: How often a wait reads the job's files (each read parses them).
POLL_SECONDS = 0.2
#: The stall scenario: rank 2 sleeps STALL_SECONDS in step STALL_STEP of STALL_RUN_STEPS.
STALLED, STALL_STEP, STALL_SECONDS, STALL_RUN_STEPS = 2, 60, 9.0, 600
#: live_scenarios.py's merge_timeout: the end of training waits no longer for a rank.
SCENARIO_MERGE_TIMEOUT = 12.0

Points = dict[str, dict[int, float]]


def job_points(job_dir: Path) -> Points:
    """``tag -> {step: value}`` of the job's summary files (none yet: empty)."""
    found: Points = {}
    for path in job_dir.glob("*.job.*_MS"):
        for tag, points in scalars(path).items():
            found.setdefault(tag, {}).update(points)
    return found


def cli(*argv: str) -> Finished:
    """``rankscribe-lineage <argv>`` in a new process."""
    return run_bounded(
        [
            sys.executable,
            "-c",
            "import sys; from rankscribe.lineage.cli import main; sys.exit(main())",
            *argv,
        ],
        timeout=MERGE_TIMEOUT,
        check=False,
        stderr_apart=True,
    )


def steps_of(points: Points) -> set[int]:
    return set(points.get(f"{SCRIPT_TAG}/mean", {}))


def live_state(job_dir: Path) -> dict[str, Any]:
    """The live view's state file (docs/job-view.md, "Live"); empty before the first."""
    try:
        return dict(json.loads((job_dir / ".rankscribe-live.json").read_text()))
    except (OSError, ValueError):
        return {}


def start_job(launches: Launches, mpi: Any, tmp_path: Path, *argv: str) -> subprocess.Popen[bytes]:
    """The scenario under ``mpiexec -n RANKS``, running while the test reads its files."""
    return mpi.start(launches, RANKS, *mpi.python(SCENARIO, *argv), cwd=tmp_path)


def test_live_job_view_grows_survives_sigkill_and_merge_completes_it(
    mpi: Any, tmp_path: Path
) -> None:
    job = tmp_path / "job"
    with Launches(START_TIMEOUT + GROW_TIMEOUT + MERGE_TIMEOUT + 30) as launches:
        process = start_job(launches, mpi, tmp_path, str(job), "100000", "0.5")
        first = launches.wait_until(
            process,
            lambda: steps_of(job_points(job)),
            "the first live interval",
            timeout=START_TIMEOUT,
            every=POLL_SECONDS,
        )
        second = launches.wait_until(
            process,
            lambda: found if len(found := steps_of(job_points(job))) > len(first) else None,
            "a second interval",
            timeout=GROW_TIMEOUT,
            every=POLL_SECONDS,
        )
        assert first < second  # appended: every step of the first read is still there
        shown = cli("show", str(job))
        assert shown.returncode == 0, shown.stdout + shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0].startswith("job view (live): interval ")
        assert f"of {RANKS} ranks in it" in lines[0]
        assert "straggler: none" in shown.stdout
        # Each rank's last step, ranks that share one grouped: "ranks 0-2: 57" or "...".
        assert any(line.startswith("last step: rank") for line in lines), lines
        os.killpg(process.pid, signal.SIGKILL)  # the whole job, as a launcher does
        [end] = launches.wait(check=False)
    assert end.returncode != 0

    # After the kill: the file reads, with every step written before it.
    killed = job_points(job)
    assert second <= steps_of(killed)
    for step in steps_of(killed):
        # Every rank had passed each written step: counted three times, rank 0..2 values.
        assert killed[f"{SCRIPT_TAG}/ranks"][step] == RANKS
        assert killed[f"{SCRIPT_TAG}/min_rank"][step] == 0
        assert killed[f"{SCRIPT_TAG}/max_rank"][step] == RANKS - 1
        expected = np.float32(np.mean([rank + step / 1000 for rank in range(RANKS)]))
        assert np.isclose(killed[f"{SCRIPT_TAG}/mean"][step], expected, rtol=1e-5)
    state = job / ".rankscribe-live.json"
    assert state.exists()

    merged = cli("merge", str(job))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    offline = job_points(job)
    rank_steps = [
        set(dict(scalars(job / f"rank_{rank}").get(SCRIPT_TAG, []))) for rank in range(RANKS)
    ]
    # Completed: every step any rank wrote before the kill, the live file's steps among them.
    assert steps_of(offline) == set.union(*rank_steps)
    assert steps_of(killed) <= steps_of(offline)
    for tag in (
        f"{SCRIPT_TAG}/mean",
        f"{SCRIPT_TAG}/std",
        "rankscribe/step_time/max",
        "loss/auto/mean",
    ):
        for step in steps_of(killed):
            assert np.isclose(killed[tag][step], offline[tag][step], rtol=1e-5, atol=1e-7), (
                tag,
                step,
            )


def test_a_stalled_rank_is_named_missing_the_view_carries_on_and_the_end_is_complete(
    mpi: Any, tmp_path: Path
) -> None:
    job = tmp_path / "job"
    # Every bound together: the steps, the stall, the end's wait for rank 2, slack.
    job_timeout = START_TIMEOUT + STALL_SECONDS + SCENARIO_MERGE_TIMEOUT + 60

    def without_stalled() -> set[int]:
        """The written steps that counted only ranks 0 and 1 (past rank 2's stall)."""
        counts = job_points(job).get(f"{SCRIPT_TAG}/ranks", {})
        return {step for step, count in counts.items() if count == RANKS - 1}

    with Launches(job_timeout) as launches:
        process = start_job(
            launches,
            mpi,
            tmp_path,
            str(job),
            str(STALL_RUN_STEPS),
            "0.5",
            str(STALLED),
            str(STALL_STEP),
            str(STALL_SECONDS),
        )
        first = launches.wait_until(
            process,
            without_stalled,
            "a step written without the stalled rank",
            timeout=START_TIMEOUT,
            every=POLL_SECONDS,
        )
        # Every step before the stall counted rank 2 (its step STALL_STEP ends after it).
        assert min(first) >= STALL_STEP
        state = live_state(job)
        assert state["missing_in_interval"] == str(STALLED), state
        assert state["ranks_in_interval"] == RANKS - 1
        shown = cli("show", str(job))
        assert shown.returncode == 0, shown.stdout + shown.stderr
        headline = shown.stdout.splitlines()[0]
        assert f"{RANKS - 1} of {RANKS} ranks in it (missing: {STALLED})" in headline, headline
        # The view carries on: a later interval adds more steps while rank 2 still sleeps.
        later = launches.wait_until(
            process,
            lambda: found if len(found := without_stalled()) > len(first) else None,
            "a later interval without the stalled rank",
            timeout=GROW_TIMEOUT,
            every=POLL_SECONDS,
        )
        assert first < later
        live = job_points(job)
        counted = live["job/ranks_in_interval"]
        assert any(counted[step] == RANKS - 1 for step in counted if step in later), counted
        [end] = launches.wait(check=False)  # the test fails if it outlives job_timeout
    output = end.output
    assert end.returncode == 0, output
    assert f"rank {STALLED}: resumes" in output
    assert f"rank {STALLED} wrote no point for" in output  # the stalled rank said so itself

    # The other ranks' training never waited: no step of theirs came near the stall.
    for rank in range(RANKS):
        step_times = dict(scalars(job / f"rank_{rank}")["rankscribe/step_time"])
        assert len(step_times) == STALL_RUN_STEPS
        if rank == STALLED:
            assert step_times[STALL_STEP] >= STALL_SECONDS
        else:
            assert max(step_times.values()) < STALL_SECONDS / 3, (rank, max(step_times.values()))

    # The end of training: the job file counts every rank at every step (rank 2's points
    # for the steps written while it stalled included), as the offline merge does.
    final = job_points(job)
    assert steps_of(final) == set(range(1, STALL_RUN_STEPS + 1))
    assert set(final[f"{SCRIPT_TAG}/ranks"].values()) == {RANKS}
    for step in range(1, STALL_RUN_STEPS + 1):
        expected = np.float32(np.mean([rank + step / 1000 for rank in range(RANKS)]))
        assert np.isclose(final[f"{SCRIPT_TAG}/mean"][step], expected, rtol=1e-5), step
    lineage = parse_run(str(job)).lineage
    assert lineage is not None
    assert lineage.section("user_defined")["ranks_reported"] == RANKS
    assert live_state(job)["final"] is True
    merged = cli("merge", str(job))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    offline = job_points(job)
    for tag in (f"{SCRIPT_TAG}/std", "rankscribe/step_time/max", "loss/auto/mean"):
        assert final[tag].keys() == offline[tag].keys(), tag
        for step, value in offline[tag].items():
            assert np.isclose(final[tag][step], value, rtol=1e-6, atol=1e-9), (tag, step)


def test_a_rank_stalled_past_the_end_is_missing_and_the_others_end_within_the_timeout(
    mpi: Any, tmp_path: Path
) -> None:
    job = tmp_path / "job"
    steps = 400
    ended = [tmp_path / f"ended-{rank}" for rank in range(RANKS) if rank != STALLED]
    wait = START_TIMEOUT + SCENARIO_MERGE_TIMEOUT + GROW_TIMEOUT
    with Launches(wait + 30) as launches:
        # Rank 2 sleeps through the others' end (the test kills it afterwards).
        process = start_job(
            launches,
            mpi,
            tmp_path,
            str(job),
            str(steps),
            "0.5",
            str(STALLED),
            str(STALL_STEP),
            "600",
        )
        launches.wait_until(
            process,
            lambda: all(path.exists() for path in ended),
            "the end of ranks 0 and 1",
            timeout=wait,
            every=POLL_SECONDS,
        )
        assert process.poll() is None  # rank 2 still sleeps
        os.killpg(process.pid, signal.SIGKILL)
        [end] = launches.wait(check=False)
    output = end.output
    # Rank 0 waited for rank 2's last round no longer than the merge timeout.
    for path in ended:
        seconds = float(path.read_text())
        assert seconds < SCENARIO_MERGE_TIMEOUT + 10, (path.name, seconds, output)
    state = live_state(job)
    assert state["final"] is True
    assert state["missing_in_interval"] == str(STALLED), state
    final = job_points(job)
    counts = final[f"{SCRIPT_TAG}/ranks"]
    assert set(counts) == set(range(1, steps + 1))  # every step ranks 0 and 1 trained
    assert {counts[step] for step in range(1, STALL_STEP)} == {RANKS}
    assert {counts[step] for step in range(STALL_STEP, steps + 1)} == {RANKS - 1}
    lineage = parse_run(str(job)).lineage
    assert lineage is not None
    user_defined = lineage.section("user_defined")
    assert user_defined["ranks_reported"] == RANKS - 1, user_defined
    assert user_defined["ranks_missing"] == str(STALLED), user_defined
