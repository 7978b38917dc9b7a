"""The main job, examples/digits/train.py, under real ``mpiexec -n 2`` (the ``mpi`` tox env).

Everything is checked from the files the job leaves: the per-rank summary
dirs, what was collected at which step, each rank's checkpoint, and the merged
lineage rank 0 wrote for the job. Expected steps are worked out here by hand
from the collection rules (docs/collector-schedule.md), not by calling the
collector's own schedule code.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import get_run_lineage, get_summary_lineage
from rankscribe.writer.events import load_dir, read_events, read_tensorboard_events
from rankscribe.writer.files import RecordReader
from rankscribe.writer.reader import scalars
from tests._support.launchers import Launches
from tests._support.needs import needs
from tests._support.straggler_check import check_the_straggler_verdict

ROOT = Path(__file__).resolve().parents[3]
TRAIN = ROOT / "examples" / "digits" / "train.py"
JOB_TIMEOUT = 180
TRAIN_ROWS = 1437  # 80 % of scikit-learn's 1,797 digits
TEST_ROWS = 360
BATCH, COLLECT_FREQ, RANKS = 32, 5, 2
STEPS = (TRAIN_ROWS // RANKS) // BATCH  # 22 steps per epoch, the same on every rank


def train_argv(summary_dir: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        str(TRAIN),
        "--summary-dir",
        str(summary_dir),
        "--epochs",
        "1",
        "--batch-size",
        str(BATCH),
        "--collect-freq",
        str(COLLECT_FREQ),
        *options,
    ]


def run_job(mpi: Any, argv: list[str], cwd: Path, *, measured: bool = True) -> str:
    run = mpi.run(RANKS, *argv, cwd=cwd, timeout=JOB_TIMEOUT, measured=measured)
    assert run.returncode == 0, run.output
    return str(run.output)


def steps_with(directory: Path, plugin: str, tag: str | None = None) -> list[int]:
    return sorted(
        {
            event.step
            for event in load_dir(directory)
            if any(value.plugin == plugin and tag in (None, value.tag) for value in event.values)
        }
    )


@pytest.fixture(scope="module")
def job(mpi: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    base = tmp_path_factory.mktemp("digits")
    # Not traced by coverage (the mpi env measures): its tracer slows rank 0's recorder
    # threads (the live view, the merge) about tenfold, and on 2 cores they then take
    # enough of rank 0's time to make it the straggler this job's balanced ranks are
    # checked not to have.
    argv = train_argv(base / "job", "--optimizer", "sgd", "--lr", "0.1")
    output = run_job(mpi, argv, base, measured=False)
    return base / "job", output


def test_each_rank_writes_its_own_directory(job: tuple[Path, str]) -> None:
    summary_dir, _ = job
    assert sorted(path.name for path in summary_dir.iterdir() if path.is_dir()) == [
        "rank_0",
        "rank_1",
    ]
    for rank in range(RANKS):
        names = [path.name for path in (summary_dir / f"rank_{rank}").iterdir()]
        assert any(name.endswith(f".{rank}.{os.uname().nodename}_MS") for name in names), names
    # The job directory itself holds rank 0's merged lineage and the job view.
    # (The job view's file is created when training starts, the lineage at its end: their
    # creation times, so their sort order, differ.)
    names = sorted(
        path.name for path in summary_dir.iterdir() if path.is_file() and "summary." in path.name
    )
    assert len(names) == 2, names
    assert [name for name in names if name.endswith("_lineage") and ".merged." in name]
    assert [name for name in names if name.endswith("_MS") and ".job." in name]


def test_loss_histograms_and_images_at_the_scheduled_steps(job: tuple[Path, str]) -> None:
    summary_dir, _ = job
    # First step always, then every step divisible by collect_freq.
    scheduled = [1, *range(COLLECT_FREQ, STEPS + 1, COLLECT_FREQ)]
    for rank in range(RANKS):
        rank_dir = summary_dir / f"rank_{rank}"
        assert steps_with(rank_dir, "scalar", "loss/auto") == scheduled
        # and step 0: the fingerprint taken when training begins, before any update
        assert steps_with(rank_dir, "scalar", "rankscribe/param_fingerprint") == [0, *scheduled]
        # the timings are the scalars of every step (step 0: the start fingerprint), and
        # the machine's last sample is at the step after the last (docs/system-metrics.md)
        assert steps_with(rank_dir, "scalar") == list(range(STEPS + 2))
        after_the_last = {
            value.tag
            for event in load_dir(rank_dir)
            if event.step == STEPS + 1
            for value in event.values
        }
        assert after_the_last and all(
            tag.startswith("rankscribe/system/") for tag in after_the_last
        )
        assert steps_with(rank_dir, "scalar", "rankscribe/step_time") == list(range(1, STEPS + 1))
        assert steps_with(rank_dir, "histogram") == scheduled
        assert steps_with(rank_dir, "image") == scheduled
        tags = {value.tag for event in load_dir(rank_dir) for value in event.values}
        assert {"loss/auto", "input_data/auto", "fc1.weight/auto"} <= tags


def test_tensor_steps_are_split_between_the_ranks(job: tuple[Path, str]) -> None:
    summary_dir, _ = job
    # 22 steps, collect_freq 5: the tensor range is range(0, 23, 5); a single process
    # records tensors at the first step and at 5, 10, 15, 20 of it.
    job_steps = [1, 5, 10, 15, 20]
    rank_steps = [steps_with(summary_dir / f"rank_{rank}", "tensor") for rank in range(RANKS)]
    assert not set(rank_steps[0]) & set(rank_steps[1])
    assert sorted(rank_steps[0] + rank_steps[1]) == job_steps
    assert rank_steps == [[1, 5, 10], [15, 20]]  # contiguous shares, sizes differ by one


def test_each_rank_checkpoints_next_to_its_summaries(job: tuple[Path, str]) -> None:
    summary_dir, _ = job
    for rank in range(RANKS):
        checkpoints = sorted(path.name for path in (summary_dir / f"rank_{rank}").glob("*.ckpt"))
        assert checkpoints == [f"digits-1_{STEPS}.ckpt"]


def test_the_merged_lineage_describes_the_whole_job(job: tuple[Path, str]) -> None:
    summary_dir, output = job
    lineage = get_summary_lineage(str(summary_dir.resolve()))
    hyper = lineage["hyper_parameters"]
    assert hyper["device_num"] == RANKS
    assert hyper["parallel_mode"] == "data_parallel"
    assert hyper["optimizer"] == "SGD"
    assert hyper["learning_rate"] == pytest.approx(0.1)
    assert hyper["batch_size"] == BATCH
    assert hyper["epoch"] == 1
    assert lineage["train_dataset"]["train_dataset_size"] == TRAIN_ROWS  # summed over shards
    assert lineage["valid_dataset"]["valid_dataset_size"] == TEST_ROWS
    assert 0.5 < lineage["metric"]["accuracy"] <= 1.0
    assert lineage["algorithm"]["network"] == "DigitsMLP"
    assert "rank_0" in lineage["model"]["path"]
    assert lineage["model"]["size"] > 0
    assert "merged lineage of the job:" in output  # rank 0 printed it


def test_the_job_view_finds_the_ranks_in_step(job: tuple[Path, str]) -> None:
    """Gradients are averaged every step: the ranks' parameters agree, step by step."""
    summary_dir, output = job
    lineage = get_run_lineage(str(summary_dir.resolve()))
    assert lineage is not None
    notes = lineage.section("user_defined")
    assert notes["job/ranks_reported"] == RANKS
    assert (notes["job/divergence_check"], notes["job/diverged_ranks"]) == ("checked", "")
    assert notes["job/stopped_first_rank"] == -1
    assert all(notes[f"job/last_step/{rank}"] == STEPS for rank in range(RANKS))
    [view] = summary_dir.glob("*.job.*_MS")
    curves = scalars(view)
    assert [step for step, _ in curves["loss/auto/mean"]] == [
        1,
        *range(COLLECT_FREQ, STEPS + 1, COLLECT_FREQ),
    ]
    assert {count for _, count in curves["rankscribe/step_time/ranks"]} == {RANKS}
    assert "job view (cross-rank curves in the job dir):" in output
    assert "divergence: none (the ranks' parameters agree)" in output
    # The allreduce evens out the wall step times; the marked compute is judged, and the
    # marked allreduce gives each rank's arrival, every step on both ranks.
    for tag in ("rankscribe/section/compute", "rankscribe/arrival_time"):
        assert {count for _, count in curves[f"{tag}/ranks"]} == {RANKS}, tag
        assert [step for step, _ in curves[f"{tag}/ranks"]] == list(range(1, STEPS + 1)), tag
    # A verdict, if the machine's cores made one rank slower, is true of the timings
    # recorded (nobody named on balanced ranks is asserted where the work cannot depend
    # on the core: tests/_support/straggler_check.py), and rank 0 printed it.
    check_the_straggler_verdict(summary_dir)
    if notes["job/straggler_rank"] == -1:
        assert "straggler: none; step-time skew" in output
    else:
        assert str(notes["job/straggler_message"]) in output


def test_a_second_run_into_the_same_dir_neither_mixes_nor_overwrites(
    mpi: Any, tmp_path: Path
) -> None:
    summary_dir = tmp_path / "job"
    run_job(mpi, train_argv(summary_dir, "--lr", "0.05"), tmp_path)
    before = {path: path.read_bytes() for path in summary_dir.rglob("*") if path.is_file()}
    output = run_job(mpi, train_argv(summary_dir, "--lr", "0.02"), tmp_path)
    assert f"{summary_dir} already holds a run" in output
    # The first run's files are untouched and nothing was added among them.
    after = {path: path.read_bytes() for path in summary_dir.rglob("*") if path.is_file()}
    assert after == before
    second = tmp_path / "job-2"
    assert get_summary_lineage(str(summary_dir))["hyper_parameters"]["learning_rate"] == (
        pytest.approx(0.05)
    )
    assert get_summary_lineage(str(second))["hyper_parameters"]["learning_rate"] == (
        pytest.approx(0.02)
    )


def test_two_jobs_started_at_once_into_one_dir_each_get_their_own(mpi: Any, tmp_path: Path) -> None:
    # Each job's rank 0 claims the directory (O_EXCL) before any rank writes: one gets
    # job/, the other job-2/, and no rank of one writes among the other's files.
    summary_dir = tmp_path / "job"
    outputs: dict[str, str] = {}

    def start(lr: str) -> None:
        outputs[lr] = run_job(mpi, train_argv(summary_dir, "--lr", lr), tmp_path)

    threads = [threading.Thread(target=start, args=(lr,)) for lr in ("0.05", "0.02")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOB_TIMEOUT + 30)
    assert sorted(outputs) == ["0.02", "0.05"]
    rates = set()
    for directory in (summary_dir, tmp_path / "job-2"):
        merged = get_summary_lineage(str(directory))["hyper_parameters"]["learning_rate"]
        assert sorted(p.name for p in directory.iterdir() if p.is_dir()) == ["rank_0", "rank_1"]
        for rank in range(RANKS):
            own = get_summary_lineage(str(directory / f"rank_{rank}"))
            assert own["hyper_parameters"]["learning_rate"] == pytest.approx(merged)
        rates.add(round(merged, 6))
    assert rates == {0.05, 0.02}
    assert not (tmp_path / "job-3").exists()


@needs("sklearn", envs="mpi")  # the example's digits
def test_ctrl_c_mid_run_leaves_readable_files(tmp_path: Path) -> None:
    summary_dir = tmp_path / "job"
    # One rank (no MPI in the way of the signal), many epochs: the run is interrupted.
    command = [
        sys.executable,
        str(TRAIN),
        "--summary-dir",
        str(summary_dir),
        "--epochs",
        "500",
        "--collect-freq",
        "1",
    ]
    # Not measured by coverage (the mpi env passes COVERAGE_PROCESS_CONFIG on):
    # coverage's tracer takes its data lock in Python code, and a SIGINT that lands
    # while it holds it leaves every thread of the child waiting on it forever.
    unmeasured = {
        name: value for name, value in os.environ.items() if not name.startswith("COVERAGE_")
    }
    with Launches(2 * JOB_TIMEOUT) as launches:
        process = launches.start(command, cwd=tmp_path, env=unmeasured, interruptible=True)
        deadline = time.monotonic() + JOB_TIMEOUT
        # wait until training is under way
        while process.poll() is None and time.monotonic() < deadline:
            if any(line.startswith("epoch 2/") for line in launches.printed(process).splitlines()):
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        [stopped] = launches.wait(check=False)
    assert stopped.returncode != 0
    assert "KeyboardInterrupt" in stopped.output
    summary_files = sorted(summary_dir.glob("*_MS"))
    assert summary_files
    for path in summary_files:
        reader = RecordReader(path)  # strict: no corrupt record anywhere
        assert sum(1 for _ in reader) > 1
        assert reader.torn_tail is None  # the record was closed, not cut off
        losses = [
            event
            for event in read_events(path, strict=True)
            if event.WhichOneof("what") == "summary"
        ]
        assert losses


def test_the_tensorboard_target_on_request(mpi: Any, tmp_path: Path) -> None:
    summary_dir = tmp_path / "job"
    run_job(mpi, train_argv(summary_dir, "--tensorboard"), tmp_path)
    for rank in range(RANKS):
        [board] = (summary_dir / f"rank_{rank}").glob("events.out.tfevents.*")
        steps = {
            event.step
            for event in read_tensorboard_events(board)
            if event.WhichOneof("what") == "summary"
            and any(value.tag == "loss/auto" for value in event.summary.value)
        }
        assert steps == {1, *range(COLLECT_FREQ, STEPS + 1, COLLECT_FREQ)}
        times = {
            event.step
            for event in read_tensorboard_events(board)
            if event.WhichOneof("what") == "summary"
            and any(value.tag == "rankscribe/step_time" for value in event.summary.value)
        }
        assert times == set(range(1, STEPS + 1))
    # and the job gets a TensorBoard file of its own
    [job_board] = (summary_dir / "job").glob("events.out.tfevents.*")  # its own run, "job"
    assert job_board.name.endswith(".job")
