"""The README's training script and its landscape switch, run as written.

The README leaves ``step``, ``net``, ``opt``, ``loss_fn``, ``evaluate``,
``train_set`` and ``test_set`` to the reader; this test gives them (a small
classifier on random data) and checks what the example leaves on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.lineage import get_summary_lineage
from rankscribe.writer.reader import scalars
from tests._support.readme import README, readme_block

MARKER = "<!-- tested by tests/collector_torch/test_readme_training_script.py -->"
LANDSCAPE = "<!-- tested by tests/collector_torch/test_readme_training_script.py: landscape -->"


def reader_names() -> dict[str, Any]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    images, labels = torch.rand(24, 1, 4, 4), torch.arange(24) % 3

    def step(batch: list[torch.Tensor]) -> torch.Tensor:
        opt.zero_grad()
        loss = loss_fn(net(batch[0]), batch[1])
        loss.backward()
        opt.step()
        return loss.detach()

    def evaluate(batch: list[torch.Tensor]) -> dict[str, float]:
        with torch.no_grad():
            return {"accuracy": float((net(batch[0]).argmax(1) == batch[1]).float().mean())}

    loader = DataLoader(TensorDataset(images, labels), batch_size=4)
    return {
        "step": step,
        "net": net,
        "opt": opt,
        "loss_fn": loss_fn,
        "evaluate": evaluate,
        "train_set": loader,
        "test_set": loader,
    }


def test_the_training_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_block(MARKER), str(README), "exec"), reader_names())
    run = tmp_path / "runs" / "exp1"
    losses = scalars(run)["loss/auto"]
    assert [step for step, _ in losses] == [1, 10, 20, 30]  # 5 epochs of 6 steps
    lineage = get_summary_lineage(str(run))
    assert lineage["hyper_parameters"]["epoch"] == 5
    assert lineage["hyper_parameters"]["optimizer"] == "SGD"
    assert 0.0 <= lineage["metric"]["accuracy"] <= 1.0
    assert sorted(path.name for path in (tmp_path / "ckpt").glob("*.ckpt"))  # ModelCheckpoint


def test_the_landscape_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    block = readme_block(LANDSCAPE)
    exec(compile(block, str(README), "exec"), {"SummaryCollector": SummaryCollector})
    collector = eval(compile(block, str(README), "eval"), {"SummaryCollector": SummaryCollector})
    names = reader_names()
    loop = TrainLoop(names["step"], network=names["net"], optimizer=names["opt"])
    loop.train(1, names["train_set"], callbacks=[collector])
    assert scalars(tmp_path / "runs" / "exp1")["loss/auto"]
    assert not (tmp_path / "runs" / "exp1" / "ckpt_dir").exists()  # no landscape files
