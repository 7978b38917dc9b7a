"""The README's Lightning, Hugging Face and Accelerate examples, run as written.

Each example leaves a few names to the reader (a model, its data); the test writes
a script that defines them (a tiny model on synthetic data) followed by the README's
block unchanged, and launches it as the README says: ``python train.py`` for
Lightning (which starts its second process itself), ``torchrun --nproc_per_node 2``
for the Hugging Face Trainer and Accelerate. One job per example; each test asserts
what the job left on disk and printed. A last test launches the Accelerate example
without ``cpu=True``, as a user who left it out would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests._support.launchers import Finished
from tests._support.readme import readme_block

from .checks import assert_every_rank_recorded, merged_lineage
from .conftest import run_job, torchrun

pytestmark = pytest.mark.slow

LIGHTNING = "<!-- tested by tests/frameworks/test_snippets.py: lightning -->"
TRANSFORMERS = "<!-- tested by tests/frameworks/test_snippets.py: transformers -->"
ACCELERATE = "<!-- tested by tests/frameworks/test_snippets.py: accelerate -->"

LIGHTNING_NAMES = """
import torch
import lightning.pytorch as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))

    def training_step(self, batch, index):
        inputs, labels = batch
        return nn.functional.cross_entropy(self.net(inputs), labels)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
features = torch.randn(64, 8)
train_loader = DataLoader(TensorDataset(features, (features[:, 0] > 0).long()), batch_size=16)
model = Classifier()
"""

TRANSFORMERS_NAMES = """
import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification


class Synthetic(Dataset):
    def __init__(self, samples, seed):
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, 32, (samples, 12), generator=generator)
        self.labels = (self.ids == 7).any(dim=1).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return {"input_ids": self.ids[index], "labels": self.labels[index]}


torch.manual_seed(0)
model = BertForSequenceClassification(BertConfig(
    vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=16, num_labels=2,
))
train, valid = Synthetic(64, 1), Synthetic(16, 2)
"""

ACCELERATE_NAMES = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
features = torch.randn(128, 8)
loader = DataLoader(TensorDataset(features, (features[:, 0] > 0).long()), batch_size=32)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = nn.CrossEntropyLoss()
"""


def write_script(directory: Path, names: str, block: str) -> Path:
    script = directory / "train.py"
    script.write_text(names + "\n" + block)
    return script


def lines_with(finished: Finished, text: str) -> list[str]:
    return [line for line in finished.stdout.splitlines() if text in line]


def test_the_lightning_example(tmp_path: Path) -> None:
    block = readme_block(LIGHTNING)
    finished = run_job([sys.executable, write_script(tmp_path, LIGHTNING_NAMES, block)], tmp_path)
    # Its LightningModule's training step calls its layers: no forward of its own to trace.
    [graph_line] = lines_with(finished, "The graph of")
    assert graph_line.startswith(
        "The graph of Classifier cannot be recorded: Classifier defines no forward of its own"
    )
    assert "control flow" not in graph_line.partition("(TraceError")[0]
    job = tmp_path / "runs" / "digits" / "version_0"
    assert_every_rank_recorded(job)
    lineage = merged_lineage(job)
    assert lineage["hyper_parameters"]["device_num"] == 2
    assert lineage["hyper_parameters"]["optimizer"] == "SGD"
    assert lineage["hyper_parameters"]["epoch"] == 2
    assert lineage["algorithm"]["network"] == "Classifier"
    assert lineage["train_dataset"]["train_dataset_size"] == 64  # 32 + 32


def test_the_hugging_face_example(tmp_path: Path) -> None:
    block = readme_block(TRANSFORMERS)
    finished = run_job(torchrun(write_script(tmp_path, TRANSFORMERS_NAMES, block)), tmp_path)
    job = tmp_path / "runs" / "hf"
    assert_every_rank_recorded(job)
    lineage = merged_lineage(job)
    assert lineage["hyper_parameters"]["device_num"] == 2
    assert lineage["algorithm"]["network"] == "BertForSequenceClassification"
    # The model file is the last checkpoint folder; its size is the model's weights.
    folder = Path(json.loads(lineage["model"]["path"])["ckpt"])
    assert folder.name == "checkpoint-8" and folder.is_dir()
    assert lineage["model"]["size"] == (folder / "model.safetensors").stat().st_size
    # One clear graph warning for the job (rank 0), and no second line about it.
    graph_lines = lines_with(finished, "The graph of") + lines_with(finished, "graph proto")
    assert len(graph_lines) == 1, graph_lines
    assert "The graph of BertForSequenceClassification cannot be recorded" in graph_lines[0]
    assert "wrapped by a decorator" in graph_lines[0]
    # The Trainer hands dicts of columns: no images, said once at INFO, so not among a
    # default run's warnings (docs/mindinsight-differences.md, input-not-image; the
    # message naming the dict batch: tests/collector/test_extract.py).
    assert lines_with(finished, "will not collect input data") == []


def test_the_accelerate_example(tmp_path: Path) -> None:
    block = readme_block(ACCELERATE)
    finished = run_job(torchrun(write_script(tmp_path, ACCELERATE_NAMES, block)), tmp_path)
    job = tmp_path / "runs" / "acc"
    assert_every_rank_recorded(job)
    lineage = merged_lineage(job)
    hyper = lineage["hyper_parameters"]
    assert (hyper["device_num"], hyper["optimizer"], hyper["batch_size"]) == (2, "SGD", 32)
    assert hyper["learning_rate"] == pytest.approx(0.05)
    assert lineage["train_dataset"]["train_dataset_size"] == 128  # 64 + 64
    assert "loss" in lineage["algorithm"]
    assert not lines_with(finished, "cpu=True")


def test_the_accelerate_example_without_cpu_true_warns_and_records_each_process_alone(
    tmp_path: Path,
) -> None:
    block = readme_block(ACCELERATE)
    assert "Accelerator(cpu=True, " in block
    script = write_script(tmp_path, ACCELERATE_NAMES, block.replace("cpu=True, ", ""))
    finished = run_job(torchrun(script), tmp_path)
    (warning,) = lines_with(finished, "cpu=True")  # once, from the launcher's rank 0
    assert "the launcher started 2 processes" in warning
    assert "Accelerate runs each one alone" in warning
    runs = [tmp_path / "runs" / "acc", tmp_path / "runs" / "acc-2"]
    for run in runs:
        assert not list(run.glob("rank_*")), "a process alone is no rank of a job"
        lineage = merged_lineage(run)
        assert lineage["hyper_parameters"]["device_num"] == 1
        # Each process trained on the whole dataset: its size, not twice it.
        assert lineage["train_dataset"]["train_dataset_size"] == 128
    assert not (tmp_path / "runs" / "acc-3").exists()
