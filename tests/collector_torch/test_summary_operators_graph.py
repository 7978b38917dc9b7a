"""A torch network that calls the summary operators in ``forward`` still has its graph.

The summary guide's second method records values from inside the network
(``scalar_summary``, ``image_summary``, ... in ``forward``). Tracing the network
for its graph must step over those calls: each is one node of MindSpore's
operator type, and the graph is recorded by the collector, by
``SummaryRecord(network=...)`` and in the checkpoint's ``graph.meta``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import CheckpointConfig, ModelCheckpoint, SummaryCollector, TrainLoop
from rankscribe.writer import SummaryRecord, events, image_summary, reader, scalar_summary
from rankscribe.writer.events import load_dir
from rankscribe.writer.pb import anf_ir_pb2


class Reporting(nn.Module):
    """Records its input images and the mean of its hidden layer, as the guide shows."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        image_summary("input", images)
        hidden = torch.relu(self.fc(images.flatten(1)))
        scalar_summary("hidden_mean", hidden.mean())
        return self.head(hidden)


def _op_types(graph: events.Graph | None) -> list[str]:
    assert graph is not None
    return [node.op_type for node in graph.nodes]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("operators")
    torch.manual_seed(0)
    network = Reporting()
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)
    images, labels = torch.rand(12, 1, 4, 4), torch.arange(12) % 3
    loader = DataLoader(TensorDataset(images, labels), batch_size=4)

    def step(batch: list[torch.Tensor]) -> torch.Tensor:
        optimizer.zero_grad()
        loss = functional.cross_entropy(network(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return loss

    checkpoint = ModelCheckpoint(
        prefix="net", directory=root / "ckpt", config=CheckpointConfig(save_checkpoint_steps=3)
    )
    collector = SummaryCollector(
        root / "summary", collect_freq=1, collect_specified_data={"collect_landscape": None}
    )
    loop = TrainLoop(step, network=network, optimizer=optimizer)
    loop.train(1, loader, callbacks=[checkpoint, collector])
    return root


EXPECTED_TYPES = ["Input", "ImageSummary", "flatten", "Linear", "relu", "mean"]


def test_the_collector_records_the_graph_with_the_operators_as_nodes(trained: Path) -> None:
    graphs = [event.graph for event in load_dir(trained / "summary") if event.what == "graph_def"]
    assert len(graphs) == 1
    types = _op_types(graphs[0])
    assert types[: len(EXPECTED_TYPES)] == EXPECTED_TYPES
    assert types[len(EXPECTED_TYPES) :] == ["ScalarSummary", "Linear"]
    # The operators still record their values at each collected step.
    scalars = reader.scalars(trained / "summary")
    assert [step for step, _ in scalars["hidden_mean"]] == [1, 2, 3]


def test_the_checkpoint_writes_the_graph_meta(trained: Path) -> None:
    meta = trained / "ckpt" / "net-graph.meta"
    graph = anf_ir_pb2.GraphProto()
    graph.ParseFromString(meta.read_bytes())
    assert "ScalarSummary" in [node.op_type for node in graph.node]


def test_summary_record_network_writes_the_graph_while_recording(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    network = Reporting()
    caplog.set_level(logging.WARNING)
    with SummaryRecord(tmp_path, network=network) as record:
        for step in (1, 2):
            network(torch.rand(2, 1, 4, 4))  # the operators buffer into this step
            record.record(step)
    graphs = [event.graph for event in load_dir(tmp_path) if event.what == "graph_def"]
    assert len(graphs) == 1
    assert "ImageSummary" in _op_types(graphs[0])
    assert "cannot be recorded" not in caplog.text
