"""A real ``torchrun`` job (gloo, CPU) whose rank 1 is killed by SIGKILL, as the
out-of-memory killer ends a worker: "stopped first" names it, not the rank that raised
on losing it.

Before, rank 0's gloo error ("Connection closed by peer" / "Connection reset by peer",
a RuntimeError) was the only exception among the ranks that may have stopped first (the
killed rank's files end up to a second of steps early), and the verdict read "stopped
first: rank 0 (its training raised RuntimeError)": the innocent rank.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rankscribe.jobview import verdict_lines
from rankscribe.lineage import merge_run_dir
from rankscribe.lineage.recording import read_train_stop
from tests._support.launchers import clean_environment, run_bounded

SCRIPT = Path(__file__).resolve().parent / "torchrun_killed.py"
JOB_TIMEOUT = 180
KILLED_RANK, KILLED_AT = 1, 300  # torchrun_killed


def test_the_rank_killed_under_torchrun_is_named_not_the_one_that_lost_it(
    tmp_path: Path,
) -> None:
    summary = tmp_path / "summary"
    # The agent looks at its workers every 5 s: rank 0's gloo error comes first, as it
    # does when the agent looks more often, and the test does not race it.
    command = [
        str(Path(sys.executable).with_name("torchrun")),
        "--standalone",
        "--nproc_per_node",
        "2",
        "--max-restarts",
        "0",
        "--monitor-interval",
        "5",
        str(SCRIPT),
        str(summary),
    ]
    result = run_bounded(
        command,
        env=clean_environment(OMP_NUM_THREADS="1"),
        cwd=tmp_path,
        timeout=JOB_TIMEOUT,
        check=False,
    )
    assert result.returncode != 0, result.output
    assert "Signal 9 (SIGKILL)" in result.output or "exitcode: -9" in result.output
    stop = read_train_stop(summary / "rank_0")
    assert stop is not None and stop.lost_peer, result.output  # gloo's error, recorded so
    assert read_train_stop(summary / f"rank_{KILLED_RANK}") is None  # killed: no record
    verdicts = merge_run_dir(summary).lineage.section("user_defined")
    assert verdicts["job/stopped_first_rank"] == KILLED_RANK, verdict_lines(verdicts)
    assert verdicts["job/stopped_first_evidence"] == "lost_peer"
    assert verdicts["job/lost_peer_ranks"] == "0"
    assert verdicts[f"job/last_step/{KILLED_RANK}"] < KILLED_AT  # its files end before it died
    step = verdicts["job/stopped_first_step"]
    assert (
        f"stopped first: rank 1 at step {step} (its last recorded step; it left no stop "
        "record, and rank 0 raised on losing the connection to another rank)"
    ) in verdict_lines(verdicts)
