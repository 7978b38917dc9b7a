"""SummaryCollector under a real ``mpiexec -n 2`` (the ``mpi`` tox env).

Each test starts one MPI job running a scenario of collector_scenarios.py,
bounded by JOB_TIMEOUT, and asserts on the exit code and on the files the
ranks wrote: the per-rank directories, the tensor steps each rank kept, and
the merged job lineage rank 0 wrote into summary_dir.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rankscribe.jobview import verdict_lines
from rankscribe.jobview.parts import ranges_text
from rankscribe.lineage import get_summary_lineage, merge_run_dir
from rankscribe.lineage.recording import TRAIN_START_FILE_NAME, parse_run
from rankscribe.ranks.files import RANK_DIRS_FILE_NAME
from rankscribe.writer.events import load_dir

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "collector_scenarios.py"
#: No job may outlive this, whatever happens inside it.
JOB_TIMEOUT = 90.0
RANKS = 2
SHORT_MERGE_TIMEOUT = 3.0  # collector_scenarios.SHORT_MERGE_TIMEOUT
LATENESS = 5.0  # collector_scenarios.LATENESS
#: Seconds a collective that misses a rank may take past its timeout (a busy machine).
SLACK = 3.0


@dataclass
class Job:
    returncode: int
    seconds: float
    output: str
    ranks: dict[int, dict[str, Any]]
    summary: Path


def run_job(mpi: Any, scenario: str, tmp_path: Path) -> Job:
    """Run ``scenario`` on RANKS ranks, bounded by JOB_TIMEOUT."""
    out = tmp_path / "out"
    out.mkdir()
    run = mpi.run(RANKS, *mpi.python(SCENARIOS, scenario, out), cwd=tmp_path, timeout=JOB_TIMEOUT)
    records = {
        int(path.stem.split("_")[1]): json.loads(path.read_text())
        for path in out.glob("rank_*.json")
    }
    assert run.returncode == 0, run.output
    assert sorted(records) == list(range(RANKS)), run.output
    return Job(run.returncode, run.seconds, run.output, records, out / "summary")


def steps_of(directory: Path, plugin: str, tag: str) -> list[int]:
    return [
        event.step
        for event in load_dir(directory)
        if event.what == "summary"
        for value in event.values
        if (value.plugin, value.tag) == (plugin, tag)
        if event.step is not None
    ]


def user_defined(summary: Path) -> dict[str, Any]:
    lineage = parse_run(str(summary)).lineage
    assert lineage is not None
    return lineage.section("user_defined")


# Worked out by hand from docs/collector-schedule.md, for one process running the
# job's 60 steps (2 epochs x 30) with collect_freq 3: range(0, 61, 3) has 21 > 20
# entries and 60 // 19 = 3, so the tensor range is range(0, 61, 3)[:20] = 0..57,
# and the first step is always collected.
SINGLE_PROCESS_TENSOR_STEPS = [1, *range(3, 58, 3)]
COLLECTED_STEPS = [1, *range(3, 61, 3)]


def test_ranks_write_their_own_dirs_and_rank_zero_merges(mpi: Any, tmp_path: Path) -> None:
    job = run_job(mpi, "train", tmp_path)
    summary = job.summary
    entries = sorted(os.listdir(summary))
    assert [name for name in entries if name.startswith("rank_")] == ["rank_0", "rank_1"]
    merged = [name for name in entries if ".merged." in name and name.endswith("_lineage")]
    assert len(merged) == 1
    # the ranks write their data; the job's only summary file is rank 0's job view
    assert [".job." in name for name in entries if name.endswith("_MS")] == [True]

    shares = []
    for rank in range(RANKS):
        directory = summary / f"rank_{rank}"
        assert job.ranks[rank]["rank_dir"] == str(directory)
        names = [name for name in os.listdir(directory) if name.startswith("events.")]
        assert {name.rsplit("_", 1)[-1] for name in names} == {"MS", "lineage"}
        assert all(f".{rank}." in name for name in names)  # the rank is in the file names
        assert steps_of(directory, "scalar", "loss/auto") == COLLECTED_STEPS
        shares.append(steps_of(directory, "tensor", "weights"))
        assert job.ranks[rank]["job_tensor_units"] == SINGLE_PROCESS_TENSOR_STEPS
    assert not set(shares[0]) & set(shares[1])  # disjoint
    assert sorted(shares[0] + shares[1]) == SINGLE_PROCESS_TENSOR_STEPS
    assert shares == [SINGLE_PROCESS_TENSOR_STEPS[:10], SINGLE_PROCESS_TENSOR_STEPS[10:]]

    lineage = get_summary_lineage(str(summary))
    assert lineage["hyper_parameters"]["device_num"] == 2
    assert lineage["hyper_parameters"]["parallel_mode"] == "data_parallel"
    assert lineage["hyper_parameters"]["optimizer"] == "Momentum"
    # each rank trained 30 batches of 2 on its shard: the job saw 120 rows
    assert lineage["train_dataset"] == {
        "train_dataset_path": "/data/tiny",
        "train_dataset_size": 120,
    }
    assert lineage["algorithm"] == {"network": "TinyNet", "loss": 1.5}  # mean of 1.0 and 2.0
    assert lineage["metric"] == {"acc": 0.625}  # mean of 0.5 and 0.75
    assert lineage["valid_dataset"]["valid_dataset_size"] == 120
    notes = user_defined(summary)
    assert (notes["ranks_reported"], notes["ranks_expected"], notes["ranks_missing"]) == (2, 2, "")
    assert (notes["loss_min"], notes["loss_max"]) == (1.0, 2.0)
    # every rank named the same directory: nobody writes elsewhere, nothing says so
    assert "rank_dirs" not in notes
    assert not (summary / RANK_DIRS_FILE_NAME).exists()
    # training ended: no rank keeps its training start record (docs/layout.md)
    assert not [path for path in summary.rglob(TRAIN_START_FILE_NAME)]


def test_ranks_that_cannot_tell_their_length_take_the_open_ended_tensor_steps_in_turn(
    mpi: Any, tmp_path: Path
) -> None:
    """Batches with no length on both ranks: the job's tensor steps are open-ended (the
    first step, then collect_freq's doubling: 3, 6, 12, 24, 48 within 60 steps), the ranks
    take them in turn, and each step's tensor is in exactly one rank's files."""
    job = run_job(mpi, "no_length", tmp_path)
    shares = [steps_of(job.summary / f"rank_{rank}", "tensor", "weights") for rank in range(RANKS)]
    assert shares == [[1, 6, 24], [3, 12, 48]]
    for rank in range(RANKS):
        assert job.ranks[rank]["job_tensor_units"][:6] == [1, 3, 6, 12, 24, 48]
        assert steps_of(job.summary / f"rank_{rank}", "scalar", "loss/auto") == COLLECTED_STEPS


def test_a_late_rank_is_named_and_nobody_hangs(mpi: Any, tmp_path: Path) -> None:
    job = run_job(mpi, "late_rank", tmp_path)
    notes = user_defined(job.summary)
    assert (notes["ranks_reported"], notes["ranks_missing"]) == (1, "1")
    lineage = get_summary_lineage(str(job.summary))
    assert lineage["hyper_parameters"]["device_num"] == 2
    assert lineage["algorithm"]["loss"] == 1.0  # rank 0's alone
    # rank 0 waited for the late rank no longer than the merge timeout
    assert job.ranks[0]["train_seconds"] < SHORT_MERGE_TIMEOUT + SLACK + 2.0
    assert job.ranks[1]["train_seconds"] >= LATENESS
    # the late rank still wrote its own files
    assert steps_of(job.summary / "rank_1", "scalar", "loss/auto") == COLLECTED_STEPS


RAISING_STEP = 20  # collector_scenarios.RAISING_STEP
#: Far less than a job left to hang would take (JOB_TIMEOUT), far more than this one needs.
ENDS_WITHIN = 30.0


def failing_job(mpi: Any, tmp_path: Path, scenario: str) -> tuple[Any, Path]:
    """``scenario`` under plain ``python`` (as a user runs a script), which fails: its run,
    ended non-zero within ENDS_WITHIN, and its out directory."""
    out = tmp_path / "out"
    out.mkdir()
    script = [sys.executable, str(SCENARIOS), scenario, str(out)]
    run = mpi.run(RANKS, *script, cwd=tmp_path, timeout=JOB_TIMEOUT)
    assert run.returncode != 0, run.output
    assert run.seconds < ENDS_WITHIN, run.output
    return run, out


def test_a_rank_that_raises_ends_the_job_with_its_steps_on_disk(mpi: Any, tmp_path: Path) -> None:
    """Plain ``python``, as a user runs a script: the last rank raises while rank 0 waits in
    the script's own MPI collective, which has no timeout. Without the abort the job hangs
    (rank 1 in MPI_Finalize, rank 0 in the collective) until JOB_TIMEOUT kills it."""
    run, out = failing_job(mpi, tmp_path, "raise")
    assert f"RuntimeError: rank {RANKS - 1} raises on purpose" in run.output
    assert f"rank {RANKS - 1} of {RANKS}: the program ended on an uncaught RuntimeError; " in (
        run.output
    )
    # Its records were closed before the abort: every step before the raise is on disk.
    raising = out / "summary" / f"rank_{RANKS - 1}"
    assert max(steps_of(raising, "scalar", "rankscribe/step_time")) == RAISING_STEP - 1
    # The offline merge names it (its stop record), not a rank the abort killed.
    verdicts = merge_run_dir(out / "summary").lineage.section("user_defined")
    assert verdicts["job/stopped_first_rank"] == RANKS - 1
    assert verdicts["job/stopped_first_evidence"] == "exception"
    assert verdicts["job/stopped_first_exception"] == "RuntimeError"


SIGTERM_STEP = 40  # collector_scenarios.SIGTERM_STEP


def test_a_job_whose_ranks_are_sent_sigterm_writes_every_step_and_ends_by_it(
    mpi: Any, tmp_path: Path
) -> None:
    """Plain ``python``, every rank sent SIGTERM at one step (a scheduler's time limit).
    Before, each died at once: its kept steps unwritten, its files left open."""
    run, out = failing_job(mpi, tmp_path, "sigterm")
    assert run.output.count("SIGTERM during training; stopping here") == RANKS, run.output
    assert "Training stopped (Terminated) before the job's lineage was merged" in run.output
    assert "Traceback" not in run.output and "did not say the same" not in run.output
    for rank in range(RANKS):
        directory = out / "summary" / f"rank_{rank}"
        # Every step that ended is on disk (the one the signal stopped never ended), and
        # the files were closed (made read-only), on every rank.
        assert max(steps_of(directory, "scalar", "rankscribe/step_time")) == SIGTERM_STEP - 1
        for path in directory.glob("events.out.*"):
            assert path.stat().st_mode & 0o222 == 0, path
    merged = merge_run_dir(out / "summary").lineage.section("user_defined")
    assert merged["ranks_reported"] == RANKS
    # Each rank's stop record says a SIGTERM stopped it: none stopped first.
    assert merged["job/stopped_first_evidence"] == "sigterm"
    assert merged["job/stopped_first_rank"] == -1
    assert merged["job/sigterm_ranks"] == ranges_text(list(range(RANKS)))
    assert (
        f"stopped: every rank was sent SIGTERM (at step {SIGTERM_STEP - 1}; each wrote every "
        "step it ran): none stopped first"
    ) in verdict_lines(merged)
