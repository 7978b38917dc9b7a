"""Accelerate under ``torchrun --nproc_per_node 2`` with RankScribeTracker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests._support.launchers import run_bounded
from tests._support.snapshots import snapshot

from .checks import assert_each_rank_probed, assert_every_rank_recorded, merged_lineage
from .conftest import EXAMPLES, run_job, torchrun

pytestmark = pytest.mark.slow
SCRIPT = EXAMPLES / "accelerate" / "train.py"


def test_every_process_records_the_config_goes_to_the_lineage_and_a_rerun_goes_elsewhere(
    tmp_path: Path,
) -> None:
    run_job(torchrun(SCRIPT, "--summary-dir", "runs/acc"), tmp_path)
    job = tmp_path / "runs" / "acc"
    assert_every_rank_recorded(job)
    assert_each_rank_probed(job)  # the example holds no gradient-probe code
    lineage = merged_lineage(job)
    hyper = lineage["hyper_parameters"]
    assert hyper["optimizer"] == "SGD"
    assert hyper["learning_rate"] == pytest.approx(0.05)
    assert hyper["epoch"] == 2
    assert hyper["device_num"] == 2
    assert hyper["batch_size"] == 32
    assert lineage["algorithm"]["network"] == "Sequential"
    assert lineage["train_dataset"]["train_dataset_size"] == 256
    assert lineage["user_defined"]["optimizer"] == "SGD"
    # accelerator.log reached the non-main process too.
    from rankscribe.writer import reader

    assert [step for step, _ in reader.scalars(job / "rank_1")["loss"]] == list(range(1, 9))

    # A second run into the same place goes to runs/acc-2 and leaves the first alone.
    before = snapshot(job)
    run_job(torchrun(SCRIPT, "--summary-dir", "runs/acc", "--epochs", "1"), tmp_path)
    assert snapshot(job) == before
    assert_every_rank_recorded(tmp_path / "runs" / "acc-2")


def test_importing_the_collector_imports_no_framework() -> None:
    code = (
        "import sys, rankscribe.collector; "
        "print(sorted(m for m in ('lightning', 'transformers', 'accelerate') "
        "if m in sys.modules))"
    )
    output = run_bounded([sys.executable, "-c", code], timeout=120, stderr_apart=True).stdout
    assert output.strip() == "[]"
