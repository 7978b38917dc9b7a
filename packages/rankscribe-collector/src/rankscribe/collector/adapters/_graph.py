"""A network's graph, from a plain description to the ``GraphProto`` MindInsight draws.

A network that can "describe its graph" gives a :class:`GraphDescription`
(or the same as a dict)::

    GraphDescription(
        name="mlp",
        parameters=[GraphParameter("fc1.weight", (64, 784), "float32"), ...],
        nodes=[
            GraphNode("x", "Input"),
            GraphNode("fc1", "MatMul", scope="Default/fc1", inputs=("x", "fc1.weight")),
            GraphNode("relu", "ReLU", scope="Default", inputs=("fc1",)),
        ],
        outputs=("relu",),
    )

and :func:`build_graph_proto` turns it into the ``anf_ir`` ``GraphProto`` of the
original's graph event: one ``NodeProto`` per node (``name``, ``op_type``,
``scope``, ``full_name = <scope>/<op_type>-op<index>`` as MindSpore names
them, data-edge ``input`` entries naming other nodes or parameters), one
``ParameterProto`` per parameter with its tensor type, and the outputs.
Inputs must name a node or a parameter declared in the description, and names
must be unique: a graph MindInsight could not connect is refused up front.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rankscribe.collector._checks import is_int
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.writer.pb import anf_ir_pb2

__all__ = [
    "GraphDescription",
    "GraphNode",
    "GraphParameter",
    "build_graph_proto",
    "graph_description",
]

# anf_ir DataType of the NumPy dtypes a parameter may declare.
_DATA_TYPES: dict[str, anf_ir_pb2.DataType] = {
    "bool": anf_ir_pb2.DT_BOOL,
    "int8": anf_ir_pb2.DT_INT8,
    "int16": anf_ir_pb2.DT_INT16,
    "int32": anf_ir_pb2.DT_INT32,
    "int64": anf_ir_pb2.DT_INT64,
    "uint8": anf_ir_pb2.DT_UINT8,
    "uint16": anf_ir_pb2.DT_UINT16,
    "uint32": anf_ir_pb2.DT_UINT32,
    "uint64": anf_ir_pb2.DT_UINT64,
    "float16": anf_ir_pb2.DT_FLOAT16,
    "float32": anf_ir_pb2.DT_FLOAT32,
    "float64": anf_ir_pb2.DT_FLOAT64,
    "bfloat16": anf_ir_pb2.DT_BFLOAT16,
}


@dataclass(frozen=True)
class GraphNode:
    """One operation: ``inputs`` name other nodes or parameters of the same graph."""

    name: str
    op_type: str
    scope: str = ""
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class GraphParameter:
    """One weight of the graph; ``shape`` and ``dtype`` are optional."""

    name: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None


@dataclass(frozen=True)
class GraphDescription:
    """What a network says about its graph."""

    nodes: tuple[GraphNode, ...]
    parameters: tuple[GraphParameter, ...] = ()
    outputs: tuple[str, ...] = ()
    name: str = ""


def _text(where: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise CollectorTypeError(f"{where} must be a non-empty str, but got {value!r}.")
    return value


def _names(where: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise CollectorTypeError(
            f"{where} must be a list of names (str), but got {type(value).__name__} {value!r}."
        )
    return tuple(_text(f"{where}[{index}]", item) for index, item in enumerate(value))


def _node(index: int, value: object) -> GraphNode:
    if isinstance(value, GraphNode):
        return value
    if not isinstance(value, Mapping):
        raise CollectorTypeError(
            f"graph nodes[{index}] must be a GraphNode or a dict with name, op_type, scope "
            f"and inputs, but got {type(value).__name__}."
        )
    unknown = sorted(set(value) - {"name", "op_type", "scope", "inputs"})
    if unknown:
        raise CollectorValueError(
            f"graph nodes[{index}] has unknown keys {unknown}; expected name, op_type, scope, "
            f"inputs."
        )
    scope = value.get("scope", "")
    if not isinstance(scope, str):
        raise CollectorTypeError(f"graph nodes[{index}].scope must be a str, but got {scope!r}.")
    return GraphNode(
        name=_text(f"graph nodes[{index}].name", value.get("name")),
        op_type=_text(f"graph nodes[{index}].op_type", value.get("op_type")),
        scope=scope,
        inputs=_names(f"graph nodes[{index}].inputs", value.get("inputs", ())),
    )


def _parameter(index: int, value: object) -> GraphParameter:
    if isinstance(value, GraphParameter):
        return value
    if isinstance(value, str):
        return GraphParameter(_text(f"graph parameters[{index}]", value))
    if not isinstance(value, Mapping):
        raise CollectorTypeError(
            f"graph parameters[{index}] must be a name, a GraphParameter or a dict with name, "
            f"shape and dtype, but got {type(value).__name__}."
        )
    shape = value.get("shape")
    if shape is not None:
        if (
            isinstance(shape, (str, bytes))
            or not isinstance(shape, Iterable)
            or any(not is_int(dim) for dim in shape)
        ):
            raise CollectorTypeError(
                f"graph parameters[{index}].shape must be a sequence of ints, but got {shape!r}."
            )
        shape = tuple(shape)
    dtype = value.get("dtype")
    if dtype is not None:
        dtype = str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype
    return GraphParameter(_text(f"graph parameters[{index}].name", value.get("name")), shape, dtype)


def graph_description(value: GraphDescription | Mapping[str, Any]) -> GraphDescription:
    """A :class:`GraphDescription` from itself or its dict form, checked for consistency."""
    if isinstance(value, GraphDescription):
        description = value
    elif isinstance(value, Mapping):
        unknown = sorted(set(value) - {"name", "nodes", "parameters", "outputs"})
        if unknown:
            raise CollectorValueError(
                f"a graph description has unknown keys {unknown}; expected name, nodes, "
                f"parameters, outputs."
            )
        nodes = value.get("nodes", ())
        parameters = value.get("parameters", ())
        if not isinstance(nodes, Sequence) or not isinstance(parameters, Sequence):
            raise CollectorTypeError("graph 'nodes' and 'parameters' must be lists.")
        name = value.get("name", "")
        description = GraphDescription(
            nodes=tuple(_node(index, node) for index, node in enumerate(nodes)),
            parameters=tuple(_parameter(index, item) for index, item in enumerate(parameters)),
            outputs=_names("graph outputs", value.get("outputs", ())),
            name=name if isinstance(name, str) else str(name),
        )
    else:
        raise CollectorTypeError(
            f"a graph description must be a GraphDescription or a dict, but got "
            f"{type(value).__name__}."
        )
    _check_connected(description)
    return description


def _check_connected(description: GraphDescription) -> None:
    seen: set[str] = set()
    for name in [parameter.name for parameter in description.parameters] + [
        node.name for node in description.nodes
    ]:
        if name in seen:
            raise CollectorValueError(f"graph name {name!r} is used twice; names must be unique.")
        seen.add(name)
    for node in description.nodes:
        for source in node.inputs:
            if source not in seen:
                raise CollectorValueError(
                    f"graph node {node.name!r} has input {source!r}, which is neither a node "
                    f"nor a parameter of the graph."
                )
    node_names = {node.name for node in description.nodes}
    for output in description.outputs:
        if output not in node_names:
            raise CollectorValueError(f"graph output {output!r} is not a node of the graph.")


def _tensor_type(target: anf_ir_pb2.TypeProto, parameter: GraphParameter) -> None:
    target.data_type = anf_ir_pb2.DT_TENSOR
    tensor = target.tensor_type
    if parameter.dtype is not None and parameter.dtype in _DATA_TYPES:
        tensor.elem_type = _DATA_TYPES[parameter.dtype]
    if parameter.shape is not None:
        for size in parameter.shape:
            tensor.shape.dim.add().size = size


def build_graph_proto(value: GraphDescription | Mapping[str, Any]) -> anf_ir_pb2.GraphProto:
    """The ``GraphProto`` of a graph description (see the module docstring)."""
    description = graph_description(value)
    graph = anf_ir_pb2.GraphProto()
    graph.name = description.name
    for parameter in description.parameters:
        proto = graph.parameters.add()
        proto.name = parameter.name
        _tensor_type(proto.type, parameter)
    for index, node in enumerate(description.nodes, start=1):
        proto_node = graph.node.add()
        proto_node.name = node.name
        proto_node.op_type = node.op_type
        proto_node.scope = node.scope
        proto_node.full_name = f"{node.scope}/{node.op_type}-op{index}".lstrip("/")
        for source in node.inputs:
            edge = proto_node.input.add()
            edge.name = source
            edge.type = anf_ir_pb2.InputProto.DATA_EDGE
    for output in description.outputs:
        graph.outputs.add().name = output
    return graph
