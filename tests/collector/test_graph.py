"""Graph descriptions to GraphProto, and what the graph event holds once written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscribe.collector import ArrayNetwork, GraphDescription, GraphNode, GraphParameter
from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.writer import SummaryRecord
from rankscribe.writer.events import load_dir
from rankscribe.writer.pb import anf_ir_pb2


def build_graph_proto(description: Any) -> anf_ir_pb2.GraphProto:
    """The GraphProto the collector draws for a network that describes its graph this way
    (the description is checked when the network is made)."""
    view = AdapterRegistry().network_view(ArrayNetwork({}, graph=description))
    assert view is not None and view.graph is not None
    graph = view.graph()
    assert graph is not None
    return graph


DESCRIPTION = {
    "name": "mlp",
    "parameters": [{"name": "fc1.w", "shape": [8, 4], "dtype": "float32"}, "fc1.b"],
    "nodes": [
        {"name": "x", "op_type": "Input"},
        {"name": "fc1", "op_type": "MatMul", "scope": "Default/fc1", "inputs": ["x", "fc1.w"]},
        {"name": "bias", "op_type": "Add", "scope": "Default/fc1", "inputs": ["fc1", "fc1.b"]},
        {"name": "relu", "op_type": "ReLU", "scope": "Default", "inputs": ["bias"]},
    ],
    "outputs": ["relu"],
}


def test_nodes_edges_parameters_and_outputs() -> None:
    graph = build_graph_proto(DESCRIPTION)
    assert graph.name == "mlp"
    assert [(n.name, n.op_type, n.scope) for n in graph.node] == [
        ("x", "Input", ""),
        ("fc1", "MatMul", "Default/fc1"),
        ("bias", "Add", "Default/fc1"),
        ("relu", "ReLU", "Default"),
    ]
    assert [n.full_name for n in graph.node] == [
        "Input-op1",
        "Default/fc1/MatMul-op2",
        "Default/fc1/Add-op3",
        "Default/ReLU-op4",
    ]
    assert [[i.name for i in n.input] for n in graph.node] == [
        [],
        ["x", "fc1.w"],
        ["fc1", "fc1.b"],
        ["bias"],
    ]
    assert all(i.type == anf_ir_pb2.InputProto.DATA_EDGE for n in graph.node for i in n.input)
    weight, bias = graph.parameters
    assert weight.name == "fc1.w" and weight.type.data_type == anf_ir_pb2.DT_TENSOR
    assert weight.type.tensor_type.elem_type == anf_ir_pb2.DT_FLOAT32
    assert [d.size for d in weight.type.tensor_type.shape.dim] == [8, 4]
    assert bias.name == "fc1.b" and not bias.type.tensor_type.shape.dim
    assert [o.name for o in graph.outputs] == ["relu"]


def test_dataclass_form_gives_the_same_graph() -> None:
    description = GraphDescription(
        name="mlp",
        parameters=(GraphParameter("fc1.w", (8, 4), "float32"), GraphParameter("fc1.b")),
        nodes=(
            GraphNode("x", "Input"),
            GraphNode("fc1", "MatMul", "Default/fc1", ("x", "fc1.w")),
            GraphNode("bias", "Add", "Default/fc1", ("fc1", "fc1.b")),
            GraphNode("relu", "ReLU", "Default", ("bias",)),
        ),
        outputs=("relu",),
    )
    assert build_graph_proto(description) == build_graph_proto(DESCRIPTION)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            {"nodes": [{"name": "a", "op_type": "Relu", "inputs": ["b"]}]},
            CollectorValueError,
            "graph node 'a' has input 'b', which is neither a node nor a parameter of the graph.",
        ),
        (
            {"nodes": [{"name": "a", "op_type": "X"}, {"name": "a", "op_type": "Y"}]},
            CollectorValueError,
            "graph name 'a' is used twice; names must be unique.",
        ),
        (
            {"nodes": [{"name": "a", "op_type": "X"}], "outputs": ["z"]},
            CollectorValueError,
            "graph output 'z' is not a node of the graph.",
        ),
        (
            {"nodes": [{"name": "a"}]},
            CollectorTypeError,
            "graph nodes[0].op_type must be a non-empty str, but got None.",
        ),
        (
            {"nodes": [{"name": "a", "op_type": "X", "input": []}]},
            CollectorValueError,
            "graph nodes[0] has unknown keys ['input']",
        ),
        ({"nodes": ["a"]}, CollectorTypeError, "graph nodes[0] must be a GraphNode or a dict"),
        (
            {"nodes": [{"name": "a", "op_type": "X", "inputs": "b"}]},
            CollectorTypeError,
            "graph nodes[0].inputs must be a list of names (str)",
        ),
        (
            {"parameters": [{"name": "w", "shape": "8x4"}], "nodes": []},
            CollectorTypeError,
            "graph parameters[0].shape must be a sequence of ints",
        ),
        ({"edges": []}, CollectorValueError, "a graph description has unknown keys ['edges']"),
    ],
)
def test_descriptions_that_cannot_be_drawn_are_refused(
    change: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        build_graph_proto(change)
    assert message in str(raised.value)


def test_not_a_description() -> None:
    with pytest.raises(CollectorTypeError, match="must be a GraphDescription or a dict"):
        build_graph_proto(["nodes"])  # type: ignore[arg-type]


def test_the_graph_event_reads_back(tmp_path: Path) -> None:
    with SummaryRecord(tmp_path) as record:
        record.add_value("graph", "train_network/auto", build_graph_proto(DESCRIPTION))
        record.record(1)
    graphs = [event.graph for event in load_dir(tmp_path) if event.what == "graph_def"]
    assert len(graphs) == 1 and graphs[0] is not None
    assert graphs[0].name == "mlp"
    assert [node.full_name for node in graphs[0].nodes][-1] == "Default/ReLU-op4"
    assert graphs[0].parameters == ("fc1.w", "fc1.b")
