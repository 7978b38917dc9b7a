"""The lineage model: plain dataclasses for what a ``_lineage`` file holds.

Each dataclass converts exactly to and from the writer's protobuf message
(``rankscribe.writer.pb.lineage_pb2``): a field that is not set on the wire is
``None`` here (proto2 presence), so ``from_proto(to_proto(x)) == x`` and
``to_proto(from_proto(m)) == m``. This module holds the train, evaluation and
custom-data messages; the dataset graph is in ``_dataset_graph`` and the float
rules in ``_floats``.

``to_query_dict`` gives what MindInsight's lineage manager shows for the same
message, i.e. ``MessageToDict(preserving_proto_field_name=True)``: unset fields
are absent, float32 fields as :func:`float32_repr` shows them, non-finite
floats as strings, and the int64 ``model.size`` as an int.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from rankscribe.lineage._checks import is_number
from rankscribe.lineage.errors import LineageParamTypeError, LineageParamValueError
from rankscribe.lineage.record._floats import NON_FINITE_STRINGS, float32_repr, json_float
from rankscribe.ranks.jsondata import parse_json
from rankscribe.writer.pb import lineage_pb2

__all__ = [
    "Algorithm",
    "EvalLineageInfo",
    "HyperParameters",
    "ModelFile",
    "ScalarMessage",
    "TrainDataset",
    "TrainLineageInfo",
    "UserDefinedInfo",
    "ValidDataset",
    "user_values_from_proto",
]

# An evaluation's metrics, as JSON text in the lineage file: a dict of numbers, seldom deeper.
_METRIC_MAX_BYTES = 64 << 20
_METRIC_MAX_DEPTH = 64
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1

_Scalar = TypeVar("_Scalar", bound="ScalarMessage")


@dataclass
class ScalarMessage:
    """Base of the lineage sections made only of optional scalar fields.

    :class:`HyperParameters`, :class:`TrainDataset`, :class:`Algorithm`,
    :class:`ModelFile` and :class:`ValidDataset` derive from it: each field is
    named like the writer's protobuf field it converts to and from
    (:meth:`from_proto`, :meth:`fill_proto`) and like MindInsight's query dict
    key (:meth:`to_query_dict`, :meth:`from_query_dict`); None means absent.
    """

    # Names of float32 fields, shown with float32_repr in query dicts.
    float32_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_proto(cls: type[_Scalar], message: Any) -> _Scalar:
        # ListFields gives exactly the fields present on the wire (proto2), fast.
        return cls(**{descriptor.name: value for descriptor, value in message.ListFields()})

    def fill_proto(self, message: Any) -> None:
        """Set every non-None field on ``message`` (and mark it present)."""
        message.SetInParent()
        for name, value in self.__dict__.items():
            if value is not None:
                setattr(message, name, value)

    def to_query_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if value is None:
                continue
            result[name] = float32_repr(value) if name in self.float32_fields else value
        return result

    @classmethod
    def from_query_dict(cls: type[_Scalar], values: Mapping[str, Any]) -> _Scalar:
        names = {item.name for item in fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise LineageParamValueError(
                f"{cls.__name__} has no field {unknown[0]!r}; expected one of {sorted(names)}"
            )
        converted = {}
        for name, value in values.items():
            non_finite = isinstance(value, str) and value in NON_FINITE_STRINGS
            converted[name] = (
                float(value.replace("Infinity", "inf"))
                if non_finite and name in cls.float32_fields
                else value
            )
        return cls(**converted)


@dataclass
class HyperParameters(ScalarMessage):
    """``TrainLineage.HyperParameters`` (batch_size is field 8; 7 is unused)."""

    optimizer: str | None = None
    learning_rate: float | None = None
    loss_function: str | None = None
    epoch: int | None = None
    parallel_mode: str | None = None
    device_num: int | None = None
    batch_size: int | None = None
    float32_fields: ClassVar[tuple[str, ...]] = ("learning_rate",)


@dataclass
class TrainDataset(ScalarMessage):
    """``TrainLineage.TrainDataset``."""

    train_dataset_path: str | None = None
    train_dataset_size: int | None = None


@dataclass
class Algorithm(ScalarMessage):
    """``TrainLineage.Algorithm``: the network class name and the final loss."""

    network: str | None = None
    loss: float | None = None
    float32_fields: ClassVar[tuple[str, ...]] = ("loss",)


@dataclass
class ModelFile(ScalarMessage):
    """``TrainLineage.Model``: ``path`` is the JSON text ``{"ckpt": ...}``."""

    path: str | None = None
    size: int | None = None


@dataclass
class ValidDataset(ScalarMessage):
    """``EvaluationLineage.ValidDataset``."""

    valid_dataset_path: str | None = None
    valid_dataset_size: int | None = None


_TRAIN_SECTIONS: tuple[tuple[str, type[ScalarMessage]], ...] = (
    ("hyper_parameters", HyperParameters),
    ("train_dataset", TrainDataset),
    ("algorithm", Algorithm),
    ("model", ModelFile),
)


@dataclass
class TrainLineageInfo:
    """``TrainLineage``: each section is None when absent from the message."""

    hyper_parameters: HyperParameters | None = None
    train_dataset: TrainDataset | None = None
    algorithm: Algorithm | None = None
    model: ModelFile | None = None

    @classmethod
    def from_proto(cls, message: lineage_pb2.TrainLineage) -> TrainLineageInfo:
        sections = {
            name: kind.from_proto(getattr(message, name)) if message.HasField(name) else None
            for name, kind in _TRAIN_SECTIONS
        }
        return cls(**sections)  # type: ignore[arg-type]

    def to_proto(self) -> lineage_pb2.TrainLineage:
        message = lineage_pb2.TrainLineage()
        for name, _ in _TRAIN_SECTIONS:
            section = getattr(self, name)
            if section is not None:
                section.fill_proto(getattr(message, name))
        return message

    def to_query_dict(self) -> dict[str, dict[str, Any]]:
        """The sections present, as MindInsight shows them."""
        return {
            name: getattr(self, name).to_query_dict()
            for name, _ in _TRAIN_SECTIONS
            if getattr(self, name) is not None
        }

    @classmethod
    def from_query_dict(cls, values: Mapping[str, Mapping[str, Any]]) -> TrainLineageInfo:
        kinds = dict(_TRAIN_SECTIONS)
        unknown = sorted(set(values) - set(kinds))
        if unknown:
            raise LineageParamValueError(
                f"TrainLineageInfo has no section {unknown[0]!r}; expected one of {sorted(kinds)}"
            )
        return cls(
            **{
                name: kinds[name].from_query_dict(section)  # type: ignore[arg-type]
                for name, section in values.items()
            }
        )


@dataclass
class EvalLineageInfo:
    """``EvaluationLineage``: ``metric`` is the JSON text of the metrics dict."""

    metric: str | None = None
    valid_dataset: ValidDataset | None = None

    @classmethod
    def from_metrics(
        cls,
        metrics: Mapping[str, Any] | None,
        valid_dataset: ValidDataset | None = None,
    ) -> EvalLineageInfo:
        """Build the lineage an evaluation writes: ``metric = json.dumps(metrics)``."""
        return cls(json.dumps(dict(metrics) if metrics is not None else None), valid_dataset)

    @property
    def metrics(self) -> dict[str, Any]:
        """The metrics dict (``{}`` when ``metric`` is unset or empty)."""
        if not self.metric:
            return {}
        value = _metric_json(self.metric)
        return value if isinstance(value, dict) else {}

    @classmethod
    def from_proto(cls, message: lineage_pb2.EvaluationLineage) -> EvalLineageInfo:
        return cls(
            metric=message.metric if message.HasField("metric") else None,
            valid_dataset=ValidDataset.from_proto(message.valid_dataset)
            if message.HasField("valid_dataset")
            else None,
        )

    def to_proto(self) -> lineage_pb2.EvaluationLineage:
        message = lineage_pb2.EvaluationLineage()
        if self.metric is not None:
            message.metric = self.metric
        if self.valid_dataset is not None:
            self.valid_dataset.fill_proto(message.valid_dataset)
        return message

    def to_query_dict(self) -> dict[str, Any]:
        """``{'metric': <parsed dict>, 'valid_dataset': {...}}`` for the parts present.

        Raises ``ValueError`` when ``metric`` is not JSON text.
        """
        result: dict[str, Any] = {}
        if self.metric is not None:
            result["metric"] = _metric_json(self.metric) if self.metric else {}
        if self.valid_dataset is not None:
            result["valid_dataset"] = self.valid_dataset.to_query_dict()
        return result


@dataclass
class UserDefinedInfo:
    """``UserDefinedInfo``: custom lineage, recursive through ``user_info``/``map_dict``."""

    user_info: list[UserDefinedInfo] = field(default_factory=list)
    map_dict: dict[str, UserDefinedInfo] = field(default_factory=dict)
    map_int32: dict[str, int] = field(default_factory=dict)
    map_str: dict[str, str] = field(default_factory=dict)
    map_double: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> UserDefinedInfo:
        """Pack a dict the way MindSpore packs ``custom_lineage_data``.

        One ``user_info`` entry per key, holding that key in ``map_int32``
        (int), ``map_double`` (float) or ``map_str`` (str); a nested dict goes
        into ``map_dict`` (MindInsight reads it back as a nested dict). A bool
        or another type is a TypeError; an int outside int32 is a ValueError.
        """
        if not isinstance(values, Mapping):
            raise LineageParamTypeError(
                f"custom lineage data must be a dict of str to int, float or str, "
                f"got {type(values).__name__}"
            )
        info = cls()
        for key, value in values.items():
            if not isinstance(key, str):
                raise LineageParamTypeError(
                    f"custom lineage data keys must be str, got {key!r} ({type(key).__name__})"
                )
            if isinstance(value, Mapping):
                info.user_info.append(cls(map_dict={key: cls.from_values(value)}))
                continue
            if not (is_number(value) or isinstance(value, str)):
                raise LineageParamTypeError(
                    f"custom lineage data value for {key!r} must be int, float or str, "
                    f"got {value!r} ({type(value).__name__})"
                )
            if isinstance(value, int):
                if not _INT32_MIN <= value <= _INT32_MAX:
                    raise LineageParamValueError(
                        f"custom lineage data value for {key!r} is {value}, outside int32 "
                        f"[{_INT32_MIN}, {_INT32_MAX}]"
                    )
                info.user_info.append(cls(map_int32={key: value}))
            elif isinstance(value, float):
                info.user_info.append(cls(map_double={key: value}))
            else:
                info.user_info.append(cls(map_str={key: value}))
        return info

    def to_values(self) -> dict[str, Any]:
        """The flat dict MindInsight shows as ``user_defined``.

        Each ``user_info`` entry gives its key and value; a ``map_dict`` value
        gives a nested dict. Later entries win for repeated keys. (MindInsight
        reads only the first key of an entry; every key is kept here, which is
        the same for what MindSpore writes.)
        """
        result: dict[str, Any] = {}
        for item in self.user_info:
            for key, nested in item.map_dict.items():
                result[key] = nested.to_values()
            for key, number in item.map_int32.items():
                result[key] = number
            for key, text in item.map_str.items():
                result[key] = text
            for key, real in item.map_double.items():
                result[key] = json_float(real)
        return result

    @classmethod
    def from_proto(cls, message: lineage_pb2.UserDefinedInfo) -> UserDefinedInfo:
        return cls(
            user_info=[cls.from_proto(item) for item in message.user_info],
            map_dict={key: cls.from_proto(value) for key, value in message.map_dict.items()},
            map_int32=dict(message.map_int32),
            map_str=dict(message.map_str),
            map_double=dict(message.map_double),
        )

    def to_proto(self) -> lineage_pb2.UserDefinedInfo:
        message = lineage_pb2.UserDefinedInfo()
        self.fill_proto(message)
        return message

    def fill_proto(self, message: lineage_pb2.UserDefinedInfo) -> None:
        message.SetInParent()
        for item in self.user_info:
            item.fill_proto(message.user_info.add())
        for key, value in self.map_dict.items():
            value.fill_proto(message.map_dict[key])
        message.map_int32.update(self.map_int32)
        message.map_str.update(self.map_str)
        message.map_double.update(self.map_double)


def _metric_json(text: str) -> Any:
    """An evaluation's ``metric`` text, parsed; ``JSONDataError`` (a ``ValueError``) if it
    is not JSON, or nested or sized past what a lineage file holds."""
    return parse_json(
        text,
        what="an evaluation's metric",
        max_bytes=_METRIC_MAX_BYTES,
        max_depth=_METRIC_MAX_DEPTH,
    )


def user_values_from_proto(message: lineage_pb2.UserDefinedInfo) -> dict[str, Any]:
    """``UserDefinedInfo.from_proto(message).to_values()``, computed directly (fast)."""
    result: dict[str, Any] = {}
    for item in message.user_info:
        for descriptor, mapping in item.ListFields():
            name = descriptor.name
            if name == "map_dict":
                for key, nested in mapping.items():
                    result[key] = user_values_from_proto(nested)
            elif name == "map_double":
                for key, value in mapping.items():
                    result[key] = json_float(value)
            elif name != "user_info":
                result.update(mapping.items())
    return result
