"""TrainSession from a plain PyTorch loop: what the collector leaves on disk.

The loop is the script's own (forward, backward, optimizer step); the session only
hears where epochs and steps end. The loss values at the collected steps, the
weights' histograms, the fx graph, the lineage and a checkpoint that loads back are
read from the files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import (
    CheckpointConfig,
    ModelCheckpoint,
    SummaryCollector,
    TrainSession,
    load_checkpoint,
)
from rankscribe.lineage import get_summary_lineage
from rankscribe.writer.events import load_dir
from rankscribe.writer.reader import scalars


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.head = nn.Linear(4 * 4 * 4, 3)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(images)).flatten(1))


def _data() -> DataLoader[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(24, 1, 4, 4, generator=generator)
    labels = torch.randint(0, 3, (24,), generator=generator)
    return DataLoader(TensorDataset(images, labels), batch_size=4)


def test_a_plain_torch_loop_is_recorded(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, loader = SmallCNN(), _data()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    collector = SummaryCollector(
        tmp_path, collect_freq=4, collect_specified_data={"collect_landscape": None}
    )
    checkpoint = ModelCheckpoint(
        prefix="cnn", directory=tmp_path / "ckpt", config=CheckpointConfig(save_checkpoint_steps=6)
    )
    seen: dict[int, float] = {}
    with TrainSession(
        [checkpoint, collector],
        network=model,
        optimizer=optimizer,
        loss_fn=loss_fn,
        train_dataset=loader,
        epochs=2,
    ) as session:
        for _ in session.epochs():
            for images, labels in loader:
                optimizer.zero_grad()
                loss = loss_fn(model(images), labels)
                loss.backward()
                optimizer.step()
                session.step((images, labels), loss.detach())
                seen[session.params.cur_step_num] = loss.item()

    losses = dict(scalars(tmp_path)["loss/auto"])
    assert sorted(losses) == [1, 4, 8, 12]  # the first step, then every 4th
    for step, value in losses.items():
        assert value == pytest.approx(seen[step], rel=1e-6)
    events = list(load_dir(tmp_path))
    histogram_tags = {
        value.tag
        for event in events
        if event.what == "summary"
        for value in event.values
        if value.plugin == "histogram"
    }
    assert "conv.weight/auto" in histogram_tags
    graphs = [event.graph for event in events if event.what == "graph_def"]
    assert len(graphs) == 1 and graphs[0] is not None
    assert any(node.full_name.startswith("Default/conv/Conv2d") for node in graphs[0].nodes)

    lineage = get_summary_lineage(str(tmp_path))
    assert lineage["algorithm"]["network"] == "SmallCNN"
    assert lineage["algorithm"]["loss"] == pytest.approx(seen[12], rel=1e-6)
    assert lineage["hyper_parameters"]["optimizer"] == "SGD"
    assert lineage["hyper_parameters"]["loss_function"] == "CrossEntropyLoss"
    assert lineage["hyper_parameters"]["epoch"] == 2
    assert lineage["train_dataset"]["train_dataset_size"] == 24
    latest = checkpoint.latest_ckpt_file_name
    assert latest is not None and os.path.basename(latest) == "cnn-2_6.ckpt"
    parameters, _ = load_checkpoint(latest)
    restored = SmallCNN()
    restored.load_state_dict(
        {name: torch.from_numpy(value.copy()) for name, value in parameters.items()}
    )
    torch.testing.assert_close(restored.conv.weight, model.conv.weight)


def test_a_torch_loop_that_raises_leaves_its_data_on_disk(tmp_path: Path) -> None:
    model, loader = SmallCNN(), _data()
    collector = SummaryCollector(
        tmp_path, collect_freq=1, collect_specified_data={"collect_landscape": None}
    )
    with (
        pytest.raises(FloatingPointError),
        TrainSession([collector], network=model, train_dataset=loader, epochs=1) as session,
    ):
        for _ in session.epochs():
            for step, (images, _labels) in enumerate(loader, start=1):
                if step == 3:
                    raise FloatingPointError("loss is NaN")
                session.step((images, _labels), model(images).mean().detach())
    assert collector.record is None
    assert [step for step, _ in scalars(tmp_path)["loss/auto"]] == [1, 2]


def test_torch_dataset_sizes_count_samples(tmp_path: Path) -> None:
    """24 samples in batches of 5: 24 (the short last batch is not counted as 5), and 20
    when the loader drops it; samples, as a numpy run counts (docs/layout.md)."""
    from rankscribe.collector import TrainLoop

    generator = torch.Generator().manual_seed(0)
    dataset = TensorDataset(
        torch.rand(24, 1, 4, 4, generator=generator),
        torch.randint(0, 3, (24,), generator=generator),
    )
    model = SmallCNN()
    loop = TrainLoop(
        lambda batch: torch.tensor(1.0),
        network=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        eval_fn=lambda batch: {"acc": 1.0},
    )
    loaders = {
        24: DataLoader(dataset, batch_size=5),
        20: DataLoader(dataset, batch_size=5, drop_last=True),
    }
    for samples, data in loaders.items():
        name = f"samples{samples}"
        collector = SummaryCollector(
            tmp_path / name, collect_specified_data={"collect_landscape": None}
        )
        loop.train(1, data, callbacks=[collector])
        loop.eval(data, callbacks=[collector])
        lineage = get_summary_lineage(str(tmp_path / name))
        assert lineage["train_dataset"]["train_dataset_size"] == samples
        assert lineage["valid_dataset"]["valid_dataset_size"] == samples
