"""The dataset graph of a lineage: what MindSpore's dataset pipeline was.

``DatasetGraphInfo`` and its operations convert exactly to and from the
writer's ``lineage_pb2.DatasetGraph``; :func:`graph_dict_from_proto` gives the
dict MindInsight shows, computed straight from the message because queries
read many of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rankscribe.lineage._checks import is_int
from rankscribe.lineage.errors import LineageParamTypeError
from rankscribe.lineage.record._floats import json_float
from rankscribe.writer.pb import lineage_pb2

__all__ = [
    "DatasetGraphInfo",
    "OperationInfo",
    "OperationParameterInfo",
    "graph_dict_from_proto",
]


def _parameter_graph_dict(message: lineage_pb2.OperationParameter) -> dict[str, Any]:
    """``OperationParameterInfo.from_proto(message).to_graph_dict()``, without the detour."""
    result: dict[str, Any] = {}
    string_lists: dict[str, Any] = {}
    for descriptor, mapping in message.ListFields():
        if descriptor.name == "mapStrList":
            string_lists = {
                key: [None if item == "" else item for item in value.strValue]
                for key, value in mapping.items()
            }
            continue
        for key, value in mapping.items():
            result[key] = None if value == "None" else value
    result.update(string_lists)
    return result


def _operation_graph_dict(message: lineage_pb2.Operation) -> dict[str, Any]:
    result = _parameter_graph_dict(message.operationParam)
    if message.size:
        result["size"] = list(message.size)
    if message.weights:
        result["weights"] = [json_float(value) for value in message.weights]
    return result


def graph_dict_from_proto(message: lineage_pb2.DatasetGraph) -> dict[str, Any]:
    """``DatasetGraphInfo.from_proto(message).to_graph_dict()``, computed directly (fast)."""
    result = _parameter_graph_dict(message.parameter)
    if message.operations:
        result["operations"] = [_operation_graph_dict(item) for item in message.operations]
    if message.HasField("sampler"):
        sampler = _operation_graph_dict(message.sampler)
        if sampler:
            result["sampler"] = sampler
    result["children"] = [graph_dict_from_proto(child) for child in message.children]
    return result


@dataclass
class OperationParameterInfo:
    """``OperationParameter``: the parameters of one dataset operation."""

    map_str: dict[str, str] = field(default_factory=dict)
    map_str_list: dict[str, list[str]] = field(default_factory=dict)
    map_bool: dict[str, bool] = field(default_factory=dict)
    map_int: dict[str, int] = field(default_factory=dict)
    map_double: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_proto(cls, message: lineage_pb2.OperationParameter) -> OperationParameterInfo:
        return cls(
            map_str=dict(message.mapStr),
            map_str_list={key: list(value.strValue) for key, value in message.mapStrList.items()},
            map_bool=dict(message.mapBool),
            map_int=dict(message.mapInt),
            map_double=dict(message.mapDouble),
        )

    def fill_proto(self, message: lineage_pb2.OperationParameter) -> None:
        message.SetInParent()
        message.mapStr.update(self.map_str)
        for key, values in self.map_str_list.items():
            message.mapStrList[key].strValue.extend(values)
        message.mapBool.update(self.map_bool)
        message.mapInt.update(self.map_int)
        message.mapDouble.update(self.map_double)

    def to_graph_dict(self) -> dict[str, Any]:
        """MindInsight's flattening: the maps merged into one dict.

        The string ``'None'`` reads as None and ``''`` in a string list as None.
        """
        result: dict[str, Any] = {}
        for mapping in (self.map_str, self.map_bool, self.map_int, self.map_double):
            for key, value in mapping.items():
                result[key] = None if value == "None" else value
        for key, values in self.map_str_list.items():
            result[key] = [None if value == "" else value for value in values]
        return result

    def add_graph_value(self, key: str, value: Any) -> None:
        """Store one value of a dataset graph dict in the map for its type."""
        if isinstance(value, str):
            self.map_str[key] = value
        elif isinstance(value, bool):
            self.map_bool[key] = value
        elif isinstance(value, int):
            self.map_int[key] = value
        elif isinstance(value, float):
            self.map_double[key] = value
        elif isinstance(value, list):
            if value:
                self.map_str_list[key] = ["" if item is None else str(item) for item in value]
        elif value is None:
            self.map_str[key] = "None"
        else:
            raise LineageParamTypeError(
                f"dataset graph parameter {key!r} is {type(value).__name__}; expected str, "
                f"bool, int, float, list or None"
            )


@dataclass
class OperationInfo:
    """``Operation``: one augmentation operation or a sampler."""

    operation_param: OperationParameterInfo | None = None
    size: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)

    @classmethod
    def from_proto(cls, message: lineage_pb2.Operation) -> OperationInfo:
        return cls(
            operation_param=OperationParameterInfo.from_proto(message.operationParam)
            if message.HasField("operationParam")
            else None,
            size=list(message.size),
            weights=list(message.weights),
        )

    def fill_proto(self, message: lineage_pb2.Operation) -> None:
        message.SetInParent()
        if self.operation_param is not None:
            self.operation_param.fill_proto(message.operationParam)
        message.size.extend(self.size)
        message.weights.extend(self.weights)

    def to_graph_dict(self) -> dict[str, Any]:
        result = self.operation_param.to_graph_dict() if self.operation_param else {}
        if self.size:
            result["size"] = list(self.size)
        if self.weights:
            result["weights"] = [json_float(value) for value in self.weights]
        return result

    @classmethod
    def from_graph_dict(cls, values: Mapping[str, Any]) -> OperationInfo:
        operation = cls(operation_param=OperationParameterInfo())
        assert operation.operation_param is not None
        for key, value in values.items():
            if isinstance(value, list) and key in ("size", "weights"):
                if all(is_int(item) for item in value):
                    operation.size.extend(value)
                else:
                    operation.weights.extend(float(item) for item in value)
            else:
                operation.operation_param.add_graph_value(key, value)
        return operation


@dataclass
class DatasetGraphInfo:
    """``DatasetGraph``: one node of the dataset pipeline and its children."""

    children: list[DatasetGraphInfo] = field(default_factory=list)
    parameter: OperationParameterInfo | None = None
    operations: list[OperationInfo] = field(default_factory=list)
    sampler: OperationInfo | None = None

    @classmethod
    def from_proto(cls, message: lineage_pb2.DatasetGraph) -> DatasetGraphInfo:
        return cls(
            children=[cls.from_proto(child) for child in message.children],
            parameter=OperationParameterInfo.from_proto(message.parameter)
            if message.HasField("parameter")
            else None,
            operations=[OperationInfo.from_proto(item) for item in message.operations],
            sampler=OperationInfo.from_proto(message.sampler)
            if message.HasField("sampler")
            else None,
        )

    def to_proto(self) -> lineage_pb2.DatasetGraph:
        message = lineage_pb2.DatasetGraph()
        self.fill_proto(message)
        return message

    def fill_proto(self, message: lineage_pb2.DatasetGraph) -> None:
        message.SetInParent()
        for child in self.children:
            child.fill_proto(message.children.add())
        if self.parameter is not None:
            self.parameter.fill_proto(message.parameter)
        for operation in self.operations:
            operation.fill_proto(message.operations.add())
        if self.sampler is not None:
            self.sampler.fill_proto(message.sampler)

    def to_graph_dict(self) -> dict[str, Any]:
        """MindInsight's ``organize_graph`` form.

        The node's parameters flattened into keys, then ``operations`` and
        ``sampler`` when not empty, then always ``children``.
        """
        result = self.parameter.to_graph_dict() if self.parameter else {}
        if self.operations:
            result["operations"] = [operation.to_graph_dict() for operation in self.operations]
        if self.sampler is not None:
            sampler = self.sampler.to_graph_dict()
            if sampler:
                result["sampler"] = sampler
        result["children"] = [child.to_graph_dict() for child in self.children]
        return result

    @classmethod
    def from_graph_dict(cls, values: Mapping[str, Any]) -> DatasetGraphInfo:
        """Build a graph from the ``organize_graph`` form (or a serialized pipeline dict)."""
        if not isinstance(values, Mapping):
            raise LineageParamTypeError(
                f"a dataset graph must be a dict, got {type(values).__name__}"
            )
        node = cls(parameter=OperationParameterInfo())
        assert node.parameter is not None
        for key, value in values.items():
            if key == "children":
                node.children.extend(cls.from_graph_dict(child) for child in value or [] if child)
            elif key == "operations":
                node.operations.extend(OperationInfo.from_graph_dict(item) for item in value)
            elif key == "sampler":
                if value:
                    node.sampler = OperationInfo.from_graph_dict(value)
            else:
                node.parameter.add_graph_value(key, value)
        return node
