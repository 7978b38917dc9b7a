"""The live job view under a real ``mpiexec -n 3``, read while it trains, then SIGKILLed.

The job (live_scenarios.py) trains far longer than the test lets it, with a
0.5 s ``job_view_interval``. The test reads the job's summary file twice
while the job runs — the second read holds more steps — then kills the whole
job with SIGKILL, as a launcher does, reads the file again (every interval
written before the kill is there and whole) and runs the offline
``rankscribe-lineage merge``, which completes the job view from the rank
files. Every step the live file holds has the statistics the offline merge
computes from the same rank files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.writer.reader import scalars

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "live_scenarios.py"
RANKS = 3
SCRIPT_TAG = "script/rank_value"  # live_scenarios.SCRIPT_TAG
#: No wait of this test may outlive these.
START_TIMEOUT = 90.0
GROW_TIMEOUT = 45.0
MERGE_TIMEOUT = 60.0

Points = dict[str, dict[int, float]]


def job_points(job_dir: Path) -> Points:
    """``tag -> {step: value}`` of the job's summary files (none yet: empty)."""
    found: Points = {}
    for path in job_dir.glob("*.job.*_MS"):
        for tag, points in scalars(path).items():
            found.setdefault(tag, {}).update(points)
    return found


def wait_for(
    condition: Callable[[], Any], timeout: float, what: str, process: subprocess.Popen[str]
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if process.poll() is not None:
            pytest.fail(
                f"the job ended ({process.returncode}) before {what}:\n{process.communicate()[0]}"
            )
        time.sleep(0.2)
    pytest.fail(f"{what} did not happen within {timeout} s")


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """``rankscribe-lineage <argv>`` in a new process."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from rankscribe.lineage.cli import main; sys.exit(main())",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=MERGE_TIMEOUT,
        check=False,
    )


def steps_of(points: Points) -> set[int]:
    return set(points.get(f"{SCRIPT_TAG}/mean", {}))


def test_live_job_view_grows_survives_sigkill_and_merge_completes_it(
    mpi: Any, tmp_path: Path
) -> None:
    job = tmp_path / "job"
    command = [
        mpi.path,
        "-n",
        str(RANKS),
        sys.executable,
        "-m",
        "mpi4py",
        str(SCENARIO),
        str(job),
        "100000",
        "0.5",
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        cwd=tmp_path,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    try:
        first = wait_for(
            lambda: steps_of(job_points(job)), START_TIMEOUT, "the first live interval", process
        )
        second = wait_for(
            lambda: found if len(found := steps_of(job_points(job))) > len(first) else None,
            GROW_TIMEOUT,
            "a second interval",
            process,
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
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
    assert process.returncode != 0

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
