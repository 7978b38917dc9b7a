"""PyTorch objects: TrainLineage in a TrainLoop and the collector record the same names.

The train lineage has one builder (``docs/collector-schedule.md``, "Names in the
train lineage"); a torch module, optimizer and loss come out of it the same way
whichever callback asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.lineage import TrainLineage, get_summary_lineage
from rankscribe.writer import SummaryRecord


class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def loader() -> DataLoader[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(0)
    return DataLoader(
        TensorDataset(
            torch.rand(8, 3, generator=generator), torch.randint(0, 2, (8,), generator=generator)
        ),
        batch_size=4,
    )


def run(directory: Path, loss_fn: Any, *, collector: bool) -> dict[str, Any]:
    torch.manual_seed(0)
    network = TinyNet()
    optimizer = torch.optim.SGD(network.parameters(), lr=0.05)

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        optimizer.zero_grad()
        loss = loss_fn(network(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return loss.detach()

    loop = TrainLoop(step, network=network, optimizer=optimizer, loss_fn=loss_fn)
    if collector:
        loop.train(
            1,
            loader(),
            callbacks=[
                SummaryCollector(directory, collect_specified_data={"collect_landscape": None})
            ],
        )
    else:
        with SummaryRecord(str(directory)) as record:
            # TrainLineage is duck-typed: a callback by its hooks, not by the base class.
            lineage_callback: Any = TrainLineage(record, raise_exception=True)
            loop.train(1, loader(), callbacks=[lineage_callback])
    lineage = get_summary_lineage(str(directory))
    hyper = lineage["hyper_parameters"]
    return {
        "network": lineage["algorithm"].get("network"),
        "optimizer": hyper.get("optimizer"),
        "loss_function": hyper.get("loss_function"),
        "learning_rate": hyper.get("learning_rate"),
    }


@pytest.mark.parametrize(
    "loss_fn, loss_name",
    [
        (nn.CrossEntropyLoss(), "CrossEntropyLoss"),
        (nn.functional.cross_entropy, "cross_entropy"),
    ],
)
def test_torch_objects_are_named_alike(tmp_path: Path, loss_fn: Any, loss_name: str) -> None:
    expected = {
        "network": "TinyNet",
        "optimizer": "SGD",
        "loss_function": loss_name,
        "learning_rate": pytest.approx(0.05),
    }
    assert run(tmp_path / "callback", loss_fn, collector=False) == expected
    assert run(tmp_path / "collector", loss_fn, collector=True) == expected
