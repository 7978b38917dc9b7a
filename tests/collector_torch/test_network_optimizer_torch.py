"""A torch module that holds its optimizer: a loop given no optimizer records it anyway.

MindSpore's SummaryCollector and MindInsight's TrainLineage look for the optimizer
among the network's cells (docs/collector-schedule.md, "The optimizer"); a torch
module is searched through its modules and their ``optimizer`` attributes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.lineage import TrainLineage, get_summary_lineage
from rankscribe.writer import SummaryRecord
from rankscribe.writer.events import load_dir


class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.fc(x)))


class Trainer(nn.Module):
    """A module that trains a sub-module with an optimizer of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.net = TinyNet()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=0.003)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def loader() -> DataLoader[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(0)
    return DataLoader(
        TensorDataset(
            torch.rand(12, 3, generator=generator), torch.randint(0, 2, (12,), generator=generator)
        ),
        batch_size=4,
    )


def train(directory: Path, *, give_optimizer: bool, collector: bool) -> None:
    torch.manual_seed(0)
    model = Trainer()
    loss_fn = nn.CrossEntropyLoss()

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        model.optimizer.zero_grad()
        loss = loss_fn(model(batch[0]), batch[1])
        loss.backward()
        model.optimizer.step()
        return loss.detach()

    loop = TrainLoop(
        step,
        network=model,
        optimizer=model.optimizer if give_optimizer else None,
        loss_fn=loss_fn,
    )
    if collector:
        options = {"collect_landscape": None, "collect_graph": False}
        callback = SummaryCollector(directory, collect_freq=1, collect_specified_data=options)
        loop.train(2, loader(), callbacks=[callback])
        return
    with SummaryRecord(str(directory)) as record:
        lineage_callback: Any = TrainLineage(record, raise_exception=True)
        loop.train(2, loader(), callbacks=[lineage_callback])


def histograms(directory: Path) -> dict[tuple[str, int], Any]:
    return {
        (value.tag, event.step): np.asarray(value.value).tolist()
        for event in load_dir(directory)
        if event.what == "summary" and event.step is not None
        for value in event.values
        if value.plugin == "histogram"
    }


def lineage(directory: Path) -> dict[str, Any]:
    found = get_summary_lineage(str(directory.resolve()))
    found.pop("summary_dir")
    return found


def test_the_collector_records_the_optimizer_the_module_holds(tmp_path: Path) -> None:
    train(tmp_path / "given", give_optimizer=True, collector=True)
    train(tmp_path / "held", give_optimizer=False, collector=True)
    given = histograms(tmp_path / "given")
    assert sorted({tag for tag, _ in given}) == [
        "net.fc.bias/auto",
        "net.fc.weight/auto",
        "net.head.bias/auto",
        "net.head.weight/auto",
    ]
    assert histograms(tmp_path / "held") == given
    expected = lineage(tmp_path / "given")
    assert expected["hyper_parameters"]["optimizer"] == "Adam"
    assert expected["hyper_parameters"]["learning_rate"] == 0.003
    assert lineage(tmp_path / "held") == expected


def test_train_lineage_names_the_optimizer_the_module_holds(tmp_path: Path) -> None:
    train(tmp_path / "given", give_optimizer=True, collector=False)
    train(tmp_path / "held", give_optimizer=False, collector=False)
    expected = lineage(tmp_path / "given")
    assert expected["hyper_parameters"]["optimizer"] == "Adam"
    assert lineage(tmp_path / "held") == expected
