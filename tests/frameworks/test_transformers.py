"""The Hugging Face ``Trainer`` under ``torchrun --nproc_per_node 2`` with RankScribeCallback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._support.snapshots import snapshot

from .checks import assert_each_rank_probed, assert_every_rank_recorded, merged_lineage
from .conftest import EXAMPLES, run_job, torchrun

pytestmark = pytest.mark.slow
SCRIPT = EXAMPLES / "transformers" / "train.py"


def _model_parameters() -> int:
    from transformers import BertConfig, BertForSequenceClassification

    # num_labels is one of PretrainedConfig's keyword arguments, which BertConfig's
    # signature does not spell out.
    config = BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,  # type: ignore[call-arg]
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    return sum(p.numel() for p in BertForSequenceClassification(config).parameters())


def test_a_trainer_job_records_every_rank_merges_the_job_and_a_rerun_goes_elsewhere(
    tmp_path: Path,
) -> None:
    run_job(torchrun(SCRIPT, "--summary-dir", "runs/hf"), tmp_path)
    job = tmp_path / "runs" / "hf"
    assert_every_rank_recorded(job)
    assert_each_rank_probed(job)  # the example holds no gradient-probe code
    lineage = merged_lineage(job)
    hyper = lineage["hyper_parameters"]
    assert hyper["optimizer"].startswith("AdamW")
    # The configured rate, not what the linear schedule left at the end.
    assert hyper["learning_rate"] == pytest.approx(5e-3)
    assert hyper["epoch"] == 2
    assert hyper["device_num"] == 2
    assert hyper["batch_size"] == 16
    assert lineage["algorithm"]["network"] == "BertForSequenceClassification"
    assert lineage["train_dataset"]["train_dataset_size"] == 192
    user = lineage["user_defined"]
    assert user["per_device_train_batch_size"] == 16
    assert user["global_batch_size"] == 32
    assert user["parameter_count"] == _model_parameters()
    assert 0.0 <= lineage["metric"]["accuracy"] <= 1.0
    assert "runtime" not in lineage["metric"]
    checkpoint = json.loads(lineage["model"]["path"])["ckpt"]
    assert checkpoint.endswith("checkpoint-12") and Path(checkpoint).is_dir()
    # on_log's values are each rank's scalars.
    from rankscribe.writer import reader

    losses = reader.scalars(job / "rank_1")["loss"]
    assert [step for step, _ in losses] == [2, 4, 6, 8, 10, 12]

    # A second run into the same place goes to runs/hf-2 and leaves the first alone.
    before = snapshot(job)
    run_job(
        torchrun(SCRIPT, "--summary-dir", "runs/hf", "--output-dir", "ckpt2", "--epochs", "1"),
        tmp_path,
    )
    assert snapshot(job) == before
    assert_every_rank_recorded(tmp_path / "runs" / "hf-2")
