"""events.py writes Event and LineageEvent bytes by hand; they must parse to the intended messages.

Each assembled payload is parsed with the generated protobuf classes and compared with
the message built the ordinary way; where no NaN is involved the bytes themselves must
equal protobuf's serialization (field order by number, as events.py claims).
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.files import SUMMARY_FILE_VERSION

# private: the hand-written event wire bytes, a codec
from rankscribe.writer.format import _events as events  # the hand-written encoders: no public door

# private: the varint and field-key encoder, a codec
from rankscribe.writer.format._wire import field_key, varint  # the one varint encoder
from rankscribe.writer.pb import anf_ir_pb2, lineage_pb2, summary_pb2

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
WALL_TIME = st.floats(min_value=0, max_value=4e9, allow_nan=False)
TAG = st.text(min_size=1, max_size=200)  # any unicode except lone surrogates
FINITE = st.floats(allow_nan=False, allow_infinity=True, width=64)


def as_float32(value: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float64(value).astype(np.float32))


def expected_scalar_event(wall_time, step, scalars) -> summary_pb2.Event:
    event = summary_pb2.Event(wall_time=wall_time, step=step)
    for tag, value in scalars:
        event.summary.value.add(tag=tag, scalar_value=as_float32(value))
    return event


# ------------------------------------------------------------- the varint encoder


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        ((1 << 64) - 1, b"\xff" * 9 + b"\x01"),
        (-1, b"\xff" * 9 + b"\x01"),
    ],
)
def test_varint_is_protobufs_base_128_encoding(value: int, encoded: bytes) -> None:
    assert varint(value) == encoded


def test_varint_and_field_key_build_what_protobuf_parses() -> None:
    step = 1 << 40
    payload = varint(step)
    # Event.step is field 2 (varint); Event.version is field 3 (length-delimited).
    version = SUMMARY_FILE_VERSION.encode()
    event = summary_pb2.Event.FromString(
        b"\x10" + payload + field_key(3) + varint(len(version)) + version
    )
    assert (event.step, event.version) == (step, "MindSpore.Event:1")
    assert field_key(5) == b"\x2a"  # Event.summary
    assert field_key(16) == b"\x82\x01"  # a field number past 15 takes two bytes


@pytest.mark.parametrize("value", [True, 1.0, "1", None])
def test_varint_refuses_what_is_not_an_int(value: object) -> None:
    with pytest.raises(WriterTypeError, match="a varint encodes an int, but got"):
        varint(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [1 << 64, -(1 << 63) - 1])
def test_varint_refuses_what_no_64_bit_field_holds(value: int) -> None:
    with pytest.raises(WriterValueError, match=r"\[-2\*\*63, 2\*\*64 - 1\]"):
        varint(value)


# ------------------------------------------------------------------ version


def test_version_event_is_the_original_28_bytes():
    payload = events.version_event(1_795_244_534.25)
    assert len(payload) == 28  # docs/file-format.md
    event = summary_pb2.Event.FromString(payload)
    assert event.WhichOneof("what") == "version"
    assert event.version == "MindSpore.Event:1"
    assert event.wall_time == 1_795_244_534.25
    assert not event.HasField("step")
    expected = summary_pb2.Event(wall_time=1_795_244_534.25, version="MindSpore.Event:1")
    assert payload == expected.SerializeToString()


# ------------------------------------------------------------------ scalars


@given(WALL_TIME, INT64, st.lists(st.tuples(TAG, FINITE), min_size=1, max_size=20))
@example(0.0, -1, [("loss", 1.0)])
@example(1.5, 2**63 - 1, [("x", 3.4028234663852886e38)])
@example(1.5, -(2**63), [("x", -1e39), ("y", 1e39)])
@example(2.0, 127, [("a" * 127, 0.1)])
@example(2.0, 128, [("a" * 128, -0.0)])
@example(2.0, 0, [("损失/loss ✓ 🚀", 5e-324)])
def test_scalar_event_equals_protobuf(wall_time, step, scalars):
    payload = events.scalar_event(wall_time, step, scalars)
    expected = expected_scalar_event(wall_time, step, scalars)
    assert summary_pb2.Event.FromString(payload) == expected
    assert payload == expected.SerializeToString()


@given(WALL_TIME, INT64, st.lists(st.tuples(TAG, FINITE), min_size=1, max_size=10))
def test_summary_event_of_scalar_values_equals_scalar_event(wall_time, step, scalars):
    values = [events.scalar_value(tag.encode(), value) for tag, value in scalars]
    assert events.summary_event(wall_time, step, values) == events.scalar_event(
        wall_time, step, scalars
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e39, math.inf),
        (-1e39, -math.inf),
        (1.7976931348623157e308, math.inf),
        (math.inf, math.inf),
        (-math.inf, -math.inf),
        (3.4028234663852886e38, 3.4028234663852886e38),  # float32 max stays
        (-3.4028234663852886e38, -3.4028234663852886e38),
        (1e-46, 0.0),  # below the smallest float32 subnormal
        (0.1, float(np.float32(0.1))),
    ],
)
def test_float32_overflow_becomes_infinity(value, expected):
    payload = events.scalar_event(0.0, 1, [("x", value)])
    [parsed] = summary_pb2.Event.FromString(payload).summary.value
    assert parsed.scalar_value == expected
    assert math.copysign(1, parsed.scalar_value) == math.copysign(1, expected)


@given(st.floats(width=64, allow_nan=False))
@example(3.4028235677973366e38)  # rounds to float32 max, not beyond
@example(3.4028235677973362e38)
@example(3.402823669209385e38)  # exactly halfway: rounds to infinity
def test_float32_bytes_round_like_numpy(value):
    with np.errstate(over="ignore"):
        assert events.float32_bytes(value) == np.float64(value).astype("<f4").tobytes()


def test_nan_scalars_stay_nan():
    payload = events.scalar_event(0.0, 1, [("nan", math.nan), ("neg", -math.nan)])
    values = summary_pb2.Event.FromString(payload).summary.value
    assert [v.tag for v in values] == ["nan", "neg"]
    assert all(math.isnan(v.scalar_value) for v in values)


def test_the_same_tag_keeps_its_own_value_each_time():
    # The per-tag prefix is cached: the value part must never be.
    first = events.scalar_event(0.0, 1, [("loss", 1.0), ("acc", 0.5)])
    second = events.scalar_event(0.0, 2, [("loss", 2.0), ("acc", 0.25)])
    assert [v.scalar_value for v in summary_pb2.Event.FromString(first).summary.value] == [1.0, 0.5]
    assert [v.scalar_value for v in summary_pb2.Event.FromString(second).summary.value] == [
        2.0,
        0.25,
    ]


# ---------------------------------------------------------- message values


def image_message() -> summary_pb2.Summary.Image:
    return summary_pb2.Summary.Image(
        height=4, width=10, colorspace=3, encoded_image=b"\x89PNG\r\n\x1a\n" + bytes(300)
    )


def tensor_message() -> anf_ir_pb2.TensorProto:
    return anf_ir_pb2.TensorProto(
        dims=[2, 3], data_type=anf_ir_pb2.DT_FLOAT32, float_data=[0.5] * 6
    )


def histogram_message() -> summary_pb2.Summary.Histogram:
    histogram = summary_pb2.Summary.Histogram(count=5, nan_count=1, min=-1.0, max=1.0, sum=0.0)
    histogram.buckets.add(left=-1.0, width=1.0, count=2)
    histogram.buckets.add(left=0.0, width=1.0, count=2)
    return histogram


def landscape_message() -> summary_pb2.LossLandscape:
    landscape = summary_pb2.LossLandscape()
    landscape.metadata.unit = "epoch"
    landscape.loss_path.intervals.extend([1, 5])
    landscape.landscape.x.CopyFrom(tensor_message())
    return landscape


MESSAGES = {
    "image": ("image", image_message),
    "tensor": ("tensor", tensor_message),
    "histogram": ("histogram", histogram_message),
    "landscape": ("loss_landscape", landscape_message),
}


@pytest.mark.parametrize("plugin", list(MESSAGES))
@pytest.mark.parametrize("tag", ["w", "层/权重 ✓", "t" * 300])
@pytest.mark.parametrize("step", [0, 1, 300, -5, 2**63 - 1, -(2**63)])
def test_message_values_parse_back(plugin, tag, step):
    field, build = MESSAGES[plugin]
    message = build()
    values = [
        events.scalar_value(b"before", 1.0),
        events.message_value(tag.encode(), plugin, message.SerializeToString()),
        events.scalar_value(b"after", 2.0),
    ]
    payload = events.summary_event(12.5, step, values)
    event = summary_pb2.Event.FromString(payload)
    expected = summary_pb2.Event(wall_time=12.5, step=step)
    expected.summary.value.add(tag="before", scalar_value=1.0)
    getattr(expected.summary.value.add(tag=tag), field).CopyFrom(message)
    expected.summary.value.add(tag="after", scalar_value=2.0)
    assert event == expected
    assert event.summary.value[1].WhichOneof("value") == field
    assert payload == expected.SerializeToString()


def test_large_message_value_with_multi_byte_lengths():
    tensor = anf_ir_pb2.TensorProto(dims=[100_000], data_type=anf_ir_pb2.DT_UINT8)
    tensor.float_data.extend([1.0] * 100_000)
    payload = events.summary_event(
        1.0, 7, [events.message_value(b"big", "tensor", tensor.SerializeToString())]
    )
    event = summary_pb2.Event.FromString(payload)
    assert event.summary.value[0].tensor == tensor
    assert len(payload) <= events.summary_event_size(len(tensor.SerializeToString()) + 3 + 4 + 4)


@given(INT64, st.lists(st.binary(max_size=300), max_size=5))
def test_summary_event_size_is_an_upper_bound(step, bodies):
    values = [events.message_value(b"t", "tensor", body) for body in bodies]
    payload = events.summary_event(1.0, step, values)
    assert len(payload) <= events.summary_event_size(sum(len(v) for v in values))


# ---------------------------------------------------------------- graph


@pytest.mark.parametrize("step", [0, 1, -1, 2**40, 2**63 - 1])
def test_graph_event_parses_back(step):
    graph = anf_ir_pb2.GraphProto(name="net")
    graph.node.add(name="conv", op_type="Conv2D", input=[anf_ir_pb2.InputProto(name="x")])
    payload = events.graph_event(3.0, step, graph.SerializeToString())
    event = summary_pb2.Event.FromString(payload)
    assert event.WhichOneof("what") == "graph_def"
    assert event.graph_def == graph
    assert event.step == step
    assert event.wall_time == 3.0
    expected = summary_pb2.Event(wall_time=3.0, step=step, graph_def=graph)
    assert payload == expected.SerializeToString()


# -------------------------------------------------------------- lineage


LINEAGE = {
    "train_lineage": (
        "train_lineage",
        lambda: lineage_pb2.TrainLineage(
            hyper_parameters=lineage_pb2.TrainLineage.HyperParameters(
                optimizer="Adam", learning_rate=0.001, batch_size=64
            ),
            model=lineage_pb2.TrainLineage.Model(path="/m.ckpt", size=2**40),
        ),
    ),
    "eval_lineage": (
        "evaluation_lineage",
        lambda: lineage_pb2.EvaluationLineage(metric='{"acc": 0.9}'),
    ),
    "dataset_graph": (
        "dataset_graph",
        lambda: lineage_pb2.DatasetGraph(children=[lineage_pb2.DatasetGraph()]),
    ),
    "custom_lineage_data": (
        "user_defined_info",
        lambda: lineage_pb2.UserDefinedInfo(map_str={"键": "值 ✓"}, map_double={"x": 0.5}),
    ),
}


@pytest.mark.parametrize("plugin", list(LINEAGE))
def test_lineage_event_parses_back_without_a_step(plugin):
    field, build = LINEAGE[plugin]
    message = build()
    payload = events.lineage_event(99.5, plugin, message.SerializeToString())
    event = lineage_pb2.LineageEvent.FromString(payload)
    assert event.WhichOneof("what") == field
    assert getattr(event, field) == message
    assert event.wall_time == 99.5
    assert not event.HasField("step")
    assert not event.HasField("version")
    expected = lineage_pb2.LineageEvent(wall_time=99.5)
    getattr(expected, field).CopyFrom(message)
    assert payload == expected.SerializeToString()


def test_lineage_field_numbers_are_the_wire_facts():
    # docs/file-format.md: train 6, evaluation 7, dataset graph 9, user defined info 10.
    numbers = {
        plugin: lineage_pb2.LineageEvent.DESCRIPTOR.fields_by_name[field].number
        for plugin, (field, _) in LINEAGE.items()
    }
    assert (
        numbers
        == events.LINEAGE_FIELD
        == {"train_lineage": 6, "eval_lineage": 7, "dataset_graph": 9, "custom_lineage_data": 10}
    )


# ----------------------------------------------------------------- varint


@given(INT64)
@example(-1)
@example(0)
@example(127)
@example(128)
def test_varint_is_protobufs_int64_encoding(value):
    encoded = varint(value)
    assert len(encoded) == (10 if value < 0 else max(1, math.ceil(value.bit_length() / 7)))
    # Event.step is field 2, wire type 0: tag byte 0x10.
    assert (
        summary_pb2.Event.FromString(b"\x09" + struct.pack("<d", 0.0) + b"\x10" + encoded).step
        == value
    )
