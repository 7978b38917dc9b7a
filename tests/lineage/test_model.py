"""The lineage dataclasses: exact protobuf round trips and MindInsight's dict form."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.lineage.errors import LineageParamTypeError, LineageParamValueError
from rankscribe.lineage.recording import (
    Algorithm,
    DatasetGraphInfo,
    EvalLineageInfo,
    HyperParameters,
    ModelFile,
    OperationInfo,
    OperationParameterInfo,
    TrainDataset,
    TrainLineageInfo,
    UserDefinedInfo,
    ValidDataset,
)
from rankscribe.writer.pb import lineage_pb2


def float32_repr(value: float) -> float | str:
    """How a query shows a float32 field: an Algorithm's loss, as its query dict holds it."""
    shown = Algorithm(loss=value).to_query_dict()["loss"]
    assert isinstance(shown, float | str)
    return shown


def f32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (0.01, 0.01),
        (0.1, 0.1),
        (2.3027029037475586, 2.302703),
        (1.1173489, 1.1173489),
        (0.75, 0.75),
        (1e-45, 1.4013e-45),  # at least 6 significant digits, as protobuf does
        (3.4028234663852886e38, 3.4028235e38),
        (0.0, 0.0),
        (-0.0, -0.0),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_float32_repr(stored: float, shown: float | str) -> None:
    assert float32_repr(f32(stored)) == shown
    if isinstance(shown, float):
        assert f32(shown) == f32(stored)  # it widens back to the same float32


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_repr_round_trips(value: float) -> None:
    shown = float32_repr(value)
    assert isinstance(shown, float)
    assert f32(shown) == value


@given(st.floats(width=32))
def test_float32_repr_is_what_message_to_dict_gives(value: float) -> None:
    from google.protobuf.json_format import MessageToDict

    message = lineage_pb2.TrainLineage()
    message.algorithm.loss = value
    assert MessageToDict(message)["algorithm"]["loss"] == float32_repr(value)


finite32 = st.floats(width=32, allow_nan=False)
text = st.text(max_size=8)
int32 = st.integers(-(2**31), 2**31 - 1)


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


train_strategy = st.builds(
    TrainLineageInfo,
    hyper_parameters=optional(
        st.builds(
            HyperParameters,
            optimizer=optional(text),
            learning_rate=optional(finite32),
            loss_function=optional(text),
            epoch=optional(int32),
            parallel_mode=optional(text),
            device_num=optional(int32),
            batch_size=optional(int32),
        )
    ),
    train_dataset=optional(
        st.builds(
            TrainDataset, train_dataset_path=optional(text), train_dataset_size=optional(int32)
        )
    ),
    algorithm=optional(st.builds(Algorithm, network=optional(text), loss=optional(finite32))),
    model=optional(
        st.builds(ModelFile, path=optional(text), size=optional(st.integers(-(2**63), 2**63 - 1)))
    ),
)
eval_strategy = st.builds(
    EvalLineageInfo,
    metric=optional(text),
    valid_dataset=optional(
        st.builds(
            ValidDataset, valid_dataset_path=optional(text), valid_dataset_size=optional(int32)
        )
    ),
)
user_strategy = st.recursive(
    st.builds(
        UserDefinedInfo,
        map_int32=st.dictionaries(text, int32, max_size=2),
        map_str=st.dictionaries(text, text, max_size=2),
        map_double=st.dictionaries(text, st.floats(allow_nan=False), max_size=2),
    ),
    lambda children: st.builds(
        UserDefinedInfo,
        user_info=st.lists(children, max_size=2),
        map_dict=st.dictionaries(text, children, max_size=2),
    ),
    max_leaves=6,
)
parameter_strategy = st.builds(
    OperationParameterInfo,
    map_str=st.dictionaries(text, text, max_size=2),
    map_str_list=st.dictionaries(text, st.lists(text, max_size=2), max_size=2),
    map_bool=st.dictionaries(text, st.booleans(), max_size=2),
    map_int=st.dictionaries(text, int32, max_size=2),
    map_double=st.dictionaries(text, st.floats(allow_nan=False), max_size=2),
)
operation_strategy = st.builds(
    OperationInfo,
    operation_param=optional(parameter_strategy),
    size=st.lists(int32, max_size=3),
    weights=st.lists(finite32, max_size=3),
)
graph_strategy = st.recursive(
    st.builds(
        DatasetGraphInfo,
        parameter=optional(parameter_strategy),
        operations=st.lists(operation_strategy, max_size=2),
        sampler=optional(operation_strategy),
    ),
    lambda children: st.builds(
        DatasetGraphInfo,
        children=st.lists(children, max_size=2),
        parameter=optional(parameter_strategy),
    ),
    max_leaves=4,
)


@given(train_strategy)
def test_train_lineage_round_trip(info: TrainLineageInfo) -> None:
    message = info.to_proto()
    assert (
        TrainLineageInfo.from_proto(
            lineage_pb2.TrainLineage.FromString(message.SerializeToString())
        )
        == info
    )
    assert TrainLineageInfo.from_proto(message).to_proto() == message


@given(eval_strategy)
def test_eval_lineage_round_trip(info: EvalLineageInfo) -> None:
    message = lineage_pb2.EvaluationLineage.FromString(info.to_proto().SerializeToString())
    assert EvalLineageInfo.from_proto(message) == info


@given(user_strategy)
def test_user_defined_round_trip(info: UserDefinedInfo) -> None:
    message = lineage_pb2.UserDefinedInfo.FromString(info.to_proto().SerializeToString())
    assert UserDefinedInfo.from_proto(message) == info
    assert UserDefinedInfo.from_proto(message).to_proto() == message


@given(graph_strategy)
def test_dataset_graph_round_trip(info: DatasetGraphInfo) -> None:
    message = lineage_pb2.DatasetGraph.FromString(info.to_proto().SerializeToString())
    assert DatasetGraphInfo.from_proto(message) == info


def test_presence_is_kept() -> None:
    """proto2: a field set to its default is not the same as an unset one."""
    info = TrainLineageInfo(hyper_parameters=HyperParameters(epoch=0), model=ModelFile())
    message = info.to_proto()
    assert message.HasField("model") and not message.HasField("algorithm")
    assert message.hyper_parameters.HasField("epoch")
    assert not message.hyper_parameters.HasField("batch_size")
    assert info.to_query_dict() == {"hyper_parameters": {"epoch": 0}, "model": {}}


def test_query_dict_forms() -> None:
    info = TrainLineageInfo(
        hyper_parameters=HyperParameters(learning_rate=f32(0.01)),
        algorithm=Algorithm(loss=float("nan")),
        model=ModelFile(size=2**40),
    )
    assert info.to_query_dict() == {
        "hyper_parameters": {"learning_rate": 0.01},
        "algorithm": {"loss": "NaN"},
        "model": {"size": 2**40},
    }
    assert TrainLineageInfo.from_query_dict(info.to_query_dict()).algorithm is not None


def test_metrics() -> None:
    info = EvalLineageInfo.from_metrics({"acc": 0.5}, ValidDataset(valid_dataset_size=3))
    assert info.metric == json.dumps({"acc": 0.5})
    assert info.metrics == {"acc": 0.5}
    assert info.to_query_dict() == {
        "metric": {"acc": 0.5},
        "valid_dataset": {"valid_dataset_size": 3},
    }
    assert EvalLineageInfo(metric="").to_query_dict() == {"metric": {}}


def test_user_defined_values_pack_like_mindspore() -> None:
    info = UserDefinedInfo.from_values(
        {"note": "golden", "seed": 7, "dropout": 0.25, "nested": {"depth": 1}}
    )
    message = info.to_proto()
    assert [sorted(item.ListFields()[0][1].keys()) for item in message.user_info] == [
        ["note"],
        ["seed"],
        ["dropout"],
        ["nested"],
    ]
    assert info.to_values() == {
        "note": "golden",
        "seed": 7,
        "dropout": 0.25,
        "nested": {"depth": 1},
    }
    assert UserDefinedInfo(user_info=[UserDefinedInfo(map_double={"x": math.inf})]).to_values() == {
        "x": "Infinity"
    }


@pytest.mark.parametrize(
    ("values", "error", "words"),
    [
        ({"flag": True}, LineageParamTypeError, "for 'flag' must be int, float or str, got True"),
        ({"none": None}, LineageParamTypeError, "for 'none' must be int, float or str, got None"),
        ({"list": [1]}, LineageParamTypeError, "for 'list' must be int, float or str, got [1]"),
        ({"big": 2**31}, LineageParamValueError, "for 'big' is 2147483648, outside int32"),
        ({"small": -(2**31) - 1}, LineageParamValueError, "for 'small' is -2147483649, outside"),
        ([("a", 1)], LineageParamTypeError, "must be a dict of str to int, float or str, got list"),
    ],
)
def test_user_defined_values_are_checked(values: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error) as caught:
        UserDefinedInfo.from_values(values)
    assert words in str(caught.value)


def test_graph_dict_like_organize_graph() -> None:
    graph = DatasetGraphInfo(
        parameter=OperationParameterInfo(
            map_str={"op_type": "Map", "x": "None"},
            map_str_list={"cols": ["a", ""]},
            map_int={"n": 2},
        ),
        operations=[
            OperationInfo(OperationParameterInfo(map_str={"tensor_op_name": "Resize"}), size=[8, 8])
        ],
        sampler=OperationInfo(OperationParameterInfo()),
        children=[DatasetGraphInfo()],
    )
    assert graph.to_graph_dict() == {
        "op_type": "Map",
        "x": None,
        "n": 2,
        "cols": ["a", None],
        "operations": [{"tensor_op_name": "Resize", "size": [8, 8]}],
        "children": [{"children": []}],
    }
    again = DatasetGraphInfo.from_graph_dict(graph.to_graph_dict())
    assert again.to_graph_dict() == graph.to_graph_dict()


def test_unknown_fields_in_query_dicts() -> None:
    with pytest.raises(LineageParamValueError, match="no field 'speed'"):
        HyperParameters.from_query_dict({"speed": 1})
    with pytest.raises(LineageParamValueError, match="no section 'extra'"):
        TrainLineageInfo.from_query_dict({"extra": {}})
