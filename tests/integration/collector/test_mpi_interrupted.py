"""A real ``mpiexec -n 2`` job stopped with Ctrl-C, merged, then found by its hyper-parameters.

The digits example trains for 500 epochs; once rank 0 printed its second
epoch, the launcher gets SIGINT (what Ctrl-C sends), which MPICH's ``mpiexec``
hands on to every rank: each raises KeyboardInterrupt mid-training, so no rank
reaches the end of training and nothing is merged. Rank 0 says how to merge;
``rankscribe-lineage merge`` then makes the job's lineage from the rank
directories, and ``rankscribe-lineage query`` shows the job's optimizer and
learning rate: each rank kept them on disk when training started
(docs/layout.md, "An interrupted job"). Each rank's stop record says Ctrl-C
stopped it, and the job view says so (docs/job-view.md, "Where each rank stopped").
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import get_run_lineage, get_summary_lineage
from tests._support.launchers import Finished, Launches, run_bounded

ROOT = Path(__file__).resolve().parents[3]
TRAIN = ROOT / "examples" / "digits" / "train.py"
TIMEOUT = 60.0
LEARNING_RATE = "0.0625"
CLI = Path(sys.executable).with_name("rankscribe-lineage")


@pytest.fixture(scope="module")
def interrupted(mpi: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Finished]:
    base = tmp_path_factory.mktemp("interrupted")
    command = [
        *mpi.python(TRAIN, "--summary-dir", base / "job", "--epochs", "500"),
        *("--optimizer", "sgd", "--lr", LEARNING_RATE),
    ]
    # Not measured by coverage: a SIGINT that lands while coverage's tracer holds its
    # data lock leaves the rank's threads waiting on it (see tests/integration/digits).
    env = {name: value for name, value in os.environ.items() if not name.startswith("COVERAGE_")}
    with Launches(TIMEOUT) as launches:
        process = launches.start(
            [mpi.path, "-n", "2", *command], cwd=base, env=env, interruptible=True
        )
        launches.wait_until(
            process,
            lambda: "epoch 2/500" in launches.printed(process) or None,
            "rank 0's second epoch",
        )
        process.send_signal(signal.SIGINT)
        [stopped] = launches.wait(check=False)
    print(stopped.output)
    return base, stopped


def test_rank_zero_names_the_merge(interrupted: tuple[Path, Finished]) -> None:
    base, stopped = interrupted
    assert stopped.returncode != 0
    assert "KeyboardInterrupt" in stopped.output
    assert not [path for path in (base / "job").iterdir() if path.name.endswith("_lineage")]
    said = [line for line in stopped.output.splitlines() if "rankscribe-lineage merge" in line]
    assert said == [
        "Training stopped (KeyboardInterrupt) before the job's lineage was merged: run "
        f"`rankscribe-lineage merge {base / 'job'}` once every rank has stopped."
    ]


def test_the_merged_job_is_found_by_its_hyper_parameters(
    interrupted: tuple[Path, Finished],
) -> None:
    base, _ = interrupted
    merge = run_bounded([CLI, "merge", base / "job"], timeout=TIMEOUT, stderr_apart=True)
    assert "ranks 0,1" in merge.stdout
    query = run_bounded(
        [CLI, "query", base, "--columns", "optimizer,learning_rate,epoch,device_num"],
        timeout=TIMEOUT,
        stderr_apart=True,
    )
    assert query.stdout.splitlines()[:2] == [
        "run  optimizer  learning_rate  epoch  device_num",
        "job  SGD        0.06250        500    2",
    ]
    merged = get_summary_lineage(str(base / "job"))
    assert merged["hyper_parameters"]["batch_size"] == 32
    assert merged["hyper_parameters"]["loss_function"] == "SoftmaxCrossEntropy"
    assert merged["algorithm"]["network"] == "DigitsMLP"
    assert "loss" not in merged["algorithm"]  # training never ended: no final loss
    job = get_run_lineage(str(base / "job"))
    assert job is not None
    verdicts = job.section("user_defined")
    assert verdicts["ranks_reported"] == 2
    # Each rank's stop record says Ctrl-C stopped it once its files were closed: none is
    # read as killed, and none stopped first.
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_evidence"]) == (
        -1,
        "sigint",
    )
    assert verdicts["job/sigint_ranks"] == "0,1"
    show = run_bounded([CLI, "show", base / "job"], timeout=TIMEOUT, stderr_apart=True)
    assert "  stopped: every rank was interrupted (Ctrl-C, SIGINT) (" in show.stdout
