"""Lightning ``Trainer(accelerator="cpu", devices=2, strategy="ddp")`` with RankScribeLogger."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests._support.snapshots import snapshot

from .checks import assert_each_rank_probed, assert_every_rank_recorded, merged_lineage
from .conftest import EXAMPLES, run_job

pytestmark = pytest.mark.slow
SCRIPT = EXAMPLES / "lightning" / "train.py"
BIN = Path(sys.executable).parent


def test_a_ddp_job_records_every_rank_merges_the_job_and_a_rerun_takes_a_new_version(
    tmp_path: Path,
) -> None:
    run_job([sys.executable, SCRIPT, "--save-dir", "runs", "--devices", "2"], tmp_path)
    job = tmp_path / "runs" / "digits" / "version_0"
    assert_every_rank_recorded(job)
    assert_each_rank_probed(job)  # the example holds no gradient-probe code
    lineage = merged_lineage(job)
    hyper = lineage["hyper_parameters"]
    assert hyper["optimizer"] == "SGD"
    assert hyper["learning_rate"] == pytest.approx(0.05)
    assert hyper["epoch"] == 2
    assert hyper["device_num"] == 2
    assert hyper["parallel_mode"] == "data_parallel"
    assert hyper["batch_size"] == 32
    assert lineage["algorithm"]["network"] == "Classifier"
    # Each rank trained on its DistributedSampler share: 128 + 128.
    assert lineage["train_dataset"]["train_dataset_size"] == 256
    # The hyper-parameters the module saved, and the validation metrics.
    assert lineage["user_defined"]["hidden"] == 32
    assert lineage["user_defined"]["learning_rate"] == pytest.approx(0.05)
    assert 0.0 <= lineage["metric"]["accuracy"] <= 1.0
    assert "loss" in lineage["metric"]
    checkpoint = json.loads(lineage["model"]["path"])["ckpt"]
    assert checkpoint is not None and Path(checkpoint).is_file()
    assert Path(checkpoint).is_relative_to(job)

    # A second run takes the next version and leaves the first alone.
    first = job
    before = snapshot(first)
    run_job(
        [sys.executable, SCRIPT, "--save-dir", "runs", "--devices", "2", "--epochs", "1"], tmp_path
    )
    assert snapshot(first) == before
    second = tmp_path / "runs" / "digits" / "version_1"
    assert_every_rank_recorded(second)
    assert merged_lineage(second)["hyper_parameters"]["epoch"] == 1

    # save_dir/name/version_<n> is found by query and report over save_dir, each the
    # console script in a new process (docs/lineage-queries.md, "Which directories are runs").
    query = run_job([BIN / "rankscribe-lineage", "query", "runs", "--sort", "epoch"], tmp_path)
    table = [line.split() for line in query.stdout.splitlines()]
    assert table[0][0] == "run" and "epoch" in table[0]
    epoch = table[0].index("epoch")
    assert [(line[0], line[epoch]) for line in table[1:3]] == [
        ("digits/version_1", "1"),
        ("digits/version_0", "2"),
    ]
    assert "2 matching runs" in query.stdout
    report = run_job([BIN / "rankscribe-lineage", "report", "runs", "-o", "report.html"], tmp_path)
    assert "2 jobs" in report.stdout
    page = (tmp_path / "report.html").read_text()
    assert "digits/version_0" in page and "digits/version_1" in page
