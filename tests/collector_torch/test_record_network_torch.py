"""SummaryRecord(network=nn.Module): the graph comes from the collector's torch.fx tracing."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.writer import SummaryRecord
from rankscribe.writer.events import load_dir


def test_a_module_graph_is_written_once(tmp_path: Path, net: nn.Module) -> None:
    with SummaryRecord(tmp_path, network=net) as record:
        for step in (1, 2, 3):
            record.add_value("scalar", "loss", float(step))
            record.record(step)
    events = list(load_dir(tmp_path))
    graphs = [event.graph for event in events if event.what == "graph_def"]
    assert len(graphs) == 1 and graphs[0] is not None
    view = AdapterRegistry().network_view(net)
    assert view is not None
    expected = view.graph()
    assert expected is not None
    assert [node.full_name for node in graphs[0].nodes] == [
        node.full_name for node in expected.node
    ]
    assert {"block.fc.weight", "head.bias", "bn.running_mean"} <= set(graphs[0].parameters)
    assert [event.step for event in events if event.what == "summary"] == [1, 2, 3]


def test_a_module_given_to_record_as_train_network(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    with SummaryRecord(tmp_path) as record:
        record.add_value("scalar", "loss", 1.0)
        record.record(1, train_network=model)
    graphs = [event.graph for event in load_dir(tmp_path) if event.what == "graph_def"]
    assert len(graphs) == 1 and graphs[0] is not None
    assert [node.full_name.rsplit("-op", 1)[0] for node in graphs[0].nodes] == [
        "Default/Input",
        "Default/0/Linear",
        "Default/1/ReLU",
    ]
