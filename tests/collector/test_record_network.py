"""SummaryRecord(network=ArrayNetwork(...)): the collector's graph builder, found by the writer.

The writer does not import the collector; it finds the collector's
``rankscribe.graph_builders`` entry point (declared in its pyproject) and writes
the graph an ArrayNetwork describes, once, at the first record.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

from rankscribe.collector import ArrayNetwork
from rankscribe.writer import SummaryRecord
from rankscribe.writer.errors import WriterTypeError
from rankscribe.writer.events import load_dir

DESCRIPTION = {
    "name": "mlp",
    "parameters": [{"name": "fc1.w", "shape": [8, 4], "dtype": "float32"}, "fc1.b"],
    "nodes": [
        {"name": "x", "op_type": "Input"},
        {"name": "fc1", "op_type": "MatMul", "scope": "Default/fc1", "inputs": ["x", "fc1.w"]},
        {"name": "bias", "op_type": "Add", "scope": "Default/fc1", "inputs": ["fc1", "fc1.b"]},
    ],
    "outputs": ["bias"],
}


def _network(graph: bool = True) -> ArrayNetwork:
    return ArrayNetwork(
        {"fc1.w": np.zeros((8, 4), np.float32), "fc1.b": np.zeros(4, np.float32)},
        graph=DESCRIPTION if graph else None,
    )


def test_the_collector_declares_its_graph_builder() -> None:
    points = {point.name: point.value for point in entry_points(group="rankscribe.graph_builders")}
    assert points == {"collector": "rankscribe.collector.adapters:graph_builder"}


def test_an_array_network_graph_is_written_at_the_first_record(tmp_path: Path) -> None:
    with SummaryRecord(tmp_path, network=_network()) as record:
        for step in (1, 2):
            record.add_value("scalar", "loss", 1.0 / step)
            record.record(step)
    events = list(load_dir(tmp_path))
    graphs = [event.graph for event in events if event.what == "graph_def"]
    assert len(graphs) == 1 and graphs[0] is not None
    assert graphs[0].name == "mlp"
    assert graphs[0].parameters == ("fc1.w", "fc1.b")
    assert [node.full_name for node in graphs[0].nodes] == [
        "Input-op1",
        "Default/fc1/MatMul-op2",
        "Default/fc1/Add-op3",
    ]
    assert [event.step for event in events if event.what == "summary"] == [1, 2]


def test_an_array_network_without_a_graph_writes_none(tmp_path: Path) -> None:
    with SummaryRecord(tmp_path, network=_network(graph=False)) as record:
        record.add_value("scalar", "loss", 0.5)
        record.record(1)
    assert [event.what for event in load_dir(tmp_path) if event.what != "version"] == ["summary"]


def test_parameters_alone_are_no_network(tmp_path: Path) -> None:
    with pytest.raises(WriterTypeError) as raised:
        SummaryRecord(tmp_path / "logs", network={"w": np.zeros(2)})
    message = str(raised.value)
    assert "'network'" in message and "but got dict" in message
    assert "graph builders installed: collector" in message
    assert not (tmp_path / "logs").exists()
