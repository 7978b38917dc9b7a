"""reader.scalar_arrays: the same points as protobuf decoding gives, as NumPy columns.

The files here are built byte by byte (a small protobuf encoder below), so that
tags that are not UTF-8, steps at the ends of int64 and odd but valid encodings
can be written; the expected points always come from protobuf's own decoding
of the same files.
"""

from __future__ import annotations

import logging
import struct
import tracemalloc
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankscribe.writer import SummaryRecord, reader
from rankscribe.writer.errors import CorruptRecordError, WriterTypeError, WriterValueError
from rankscribe.writer.events import read_events, read_tensorboard_events
from rankscribe.writer.files import RECORD_OVERHEAD, frame
from rankscribe.writer.pb import summary_pb2, tensorboard_pb2

# private: the columnar scalar reader's internals, an algorithm
from rankscribe.writer.reader import _columns, _record_groups
from tests._support.crc import masked_crc32c

SUMMARY_NAME = "events.out.events.summary.1795244534.0.vm_MS"
TENSORBOARD_NAME = "events.out.tfevents.1795244534.vm.1.0"
READER_LOGGER = "rankscribe.writer.reader"
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


# --------------------------------------------------------------------------
# A small protobuf encoder: enough to write any scalar event, valid or odd.
# --------------------------------------------------------------------------


def varint(number: int) -> bytes:
    number &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def delimited(number: int, data: bytes) -> bytes:
    return key(number, 2) + varint(len(data)) + data


def fixed32(number: int, value: float) -> bytes:
    return key(number, 5) + struct.pack("<f", value)


def event_bytes(step: int | None, values: list[bytes], wall_time: float = 1.5) -> bytes:
    out = key(1, 1) + struct.pack("<d", wall_time)
    if step is not None:
        out += key(2, 0) + varint(step)
    return out + delimited(5, b"".join(delimited(1, value) for value in values))


def summary_scalar(tag: bytes, value: float) -> bytes:
    return delimited(1, tag) + fixed32(3, value)


def tensorboard_simple(tag: bytes, value: float) -> bytes:
    return delimited(1, tag) + fixed32(2, value)


def plugin_metadata(plugin: bytes) -> bytes:
    return delimited(9, delimited(1, delimited(1, plugin) + delimited(2, b"\x08\x01")))


def tensorboard_tensor(tag: bytes, value: float, form: str, plugin: bytes | None) -> bytes:
    if form == "float_val":
        tensor = key(1, 0) + varint(1) + delimited(2, b"") + delimited(5, struct.pack("<f", value))
    elif form == "double_val":
        tensor = key(1, 0) + varint(2) + delimited(2, b"") + delimited(6, struct.pack("<d", value))
    elif form == "float_content":
        tensor = key(1, 0) + varint(1) + delimited(4, struct.pack("<f", value))
    elif form == "double_content":
        tensor = key(1, 0) + varint(2) + delimited(4, struct.pack("<d", value))
    else:  # half precision: a form the fast path leaves to protobuf
        half = int(np.array([value], dtype=np.float16).view(np.uint16)[0])
        tensor = key(1, 0) + varint(19) + delimited(13, varint(half))
    metadata = plugin_metadata(plugin) if plugin is not None else b""
    return delimited(1, tag) + metadata + delimited(8, tensor)


def write_payloads(path: Path, payloads: list[bytes]) -> list[int]:
    offsets, position = [], 0
    for payload in payloads:
        offsets.append(position)
        position += len(payload) + RECORD_OVERHEAD
    path.write_bytes(b"".join(frame(payload) for payload in payloads))
    return offsets


# --------------------------------------------------------------------------
# What protobuf decoding gives (the reference)
# --------------------------------------------------------------------------


def as_text(tag: str | bytes) -> str:
    return tag if isinstance(tag, str) else tag.decode("utf-8", "backslashreplace")


def decoded_events(
    path: Path, *, tensorboard: bool
) -> Iterator[summary_pb2.Event | tensorboard_pb2.Event]:
    """The file's events as protobuf decodes them (one function: mypy keeps both Event types)."""
    if tensorboard:
        yield from read_tensorboard_events(path)
    else:
        yield from read_events(path)


def protobuf_points(path: Path, tags: set[str] | None = None, *, tensorboard: bool = False):
    """{tag: (steps, values)} from protobuf messages, TensorBoard's scalars rule included."""
    # (event index, value position, step, number): ordered as protobuf decoding meets them
    points: dict[str, list[tuple[int, int, int, float]]] = {}
    tensor_points: dict[str, list[tuple[int, int, int, float]]] = {}
    plugin_of: dict[str, str] = {}
    order: dict[str, tuple[int, int]] = {}
    for index, event in enumerate(decoded_events(path, tensorboard=tensorboard)):
        if event.WhichOneof("what") != "summary":
            continue
        values: list[summary_pb2.Summary.Value | tensorboard_pb2.Summary.Value]
        values = list(event.summary.value)
        for position, value in enumerate(values):
            tag = as_text(value.tag)
            if tags is not None and tag not in tags:
                continue
            which = value.WhichOneof("value")
            if isinstance(value, tensorboard_pb2.Summary.Value) and value.HasField("metadata"):
                plugin_of.setdefault(tag, value.metadata.plugin_data.plugin_name)
            if which in ("scalar_value", "simple_value"):
                order.setdefault(tag, (index, position))
                number = getattr(value, which)
                points.setdefault(tag, []).append((index, position, event.step, number))
            elif isinstance(value, tensorboard_pb2.Summary.Value) and which == "tensor":
                number = _record_groups.tensor_number(value.tensor)
                if number is not None:
                    tensor_points.setdefault(tag, []).append((index, position, event.step, number))
    for tag, found in tensor_points.items():
        if plugin_of.get(tag) == "scalars":
            points.setdefault(tag, []).extend(found)
    result = {}
    for tag in sorted(points, key=lambda name: min(p[:2] for p in points[name])):
        ordered = sorted(points[tag], key=lambda p: p[:2])
        result[tag] = (
            np.array([p[2] for p in ordered], dtype=np.int64),
            np.array([p[3] for p in ordered], dtype=np.float64),
        )
    return result


def assert_same_points(got, expected) -> None:
    assert list(got) == list(expected)
    for tag, (steps, values) in expected.items():
        got_steps, got_values = got[tag]
        assert got_steps.dtype == np.int64 and got_values.dtype == np.float64
        np.testing.assert_array_equal(got_steps, steps, err_msg=tag)
        # Bit for bit, NaN included (assert_array_equal treats NaN as equal to NaN).
        np.testing.assert_array_equal(got_values, values, err_msg=tag)
        assert np.array_equal(np.signbit(got_values), np.signbit(values))


# --------------------------------------------------------------------------
# Property: random scalar streams read as protobuf reads them
# --------------------------------------------------------------------------

tags_strategy = st.one_of(
    st.sampled_from([b"loss", b"acc", "\u00e9t\u00e9/\u635f\u5931".encode(), b""]),
    st.binary(min_size=1, max_size=6),  # often not UTF-8
)
steps_strategy = st.one_of(
    st.none(),
    st.sampled_from([0, 1, 127, 128, 16383, 16384, INT64_MAX, INT64_MIN, -1]),
    st.integers(min_value=INT64_MIN, max_value=INT64_MAX),
)
values_strategy = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0, 0.0]),
    st.floats(width=32),
)


@st.composite
def odd_summary_event(draw, tags):
    """Valid events in encodings a writer rarely uses: protobuf's rules decide what they hold."""
    tag = draw(st.sampled_from(tags))
    first, second = draw(values_strategy), draw(values_strategy)
    scalar = summary_scalar(tag, first)
    wall_time = key(1, 1) + bytes(8)
    summary = delimited(5, delimited(1, scalar))
    odd = {
        "two steps": event_bytes(5, [scalar]) + key(2, 0) + varint(7),
        "summary then version": event_bytes(5, [scalar]) + delimited(3, b"v"),
        "version then summary": delimited(3, b"v") + event_bytes(5, [scalar]),
        # protobuf merges two summaries: the values add up
        "two summaries": event_bytes(5, [scalar])
        + delimited(5, delimited(1, summary_scalar(tag, second))),
        "two numbers": event_bytes(5, [scalar + fixed32(3, second)]),
        "two tags": event_bytes(5, [scalar + delimited(1, b"other")]),
        "overlong step": wall_time + key(2, 0) + b"\x85\x80\x00" + summary,
        "unknown field": event_bytes(5, [scalar + key(15, 0) + varint(1)]),
        "no wall time": key(2, 0) + varint(3) + summary,
        "fields backwards": summary + key(2, 0) + varint(9) + wall_time,
        "number before tag": event_bytes(5, [fixed32(3, first) + delimited(1, tag)]),
    }
    return odd[draw(st.sampled_from(sorted(odd)))]


@st.composite
def summary_stream(draw):
    """Events of scalars, with now and then a record the fast path leaves to protobuf."""
    tags = draw(st.lists(tags_strategy, min_size=1, max_size=4, unique=True))
    payloads = []
    for _ in range(draw(st.integers(min_value=0, max_value=30))):
        kind = draw(st.sampled_from(["scalars"] * 6 + ["version", "histogram", "empty", "odd"]))
        step = draw(steps_strategy)
        if kind == "odd":
            payloads.append(draw(odd_summary_event(tags)))
        elif kind == "version":
            version = delimited(3, b"MindSpore.Event:1")
            payloads.append(key(1, 1) + struct.pack("<d", 1.0) + version)
        elif kind == "empty":
            payloads.append(b"")
        else:
            chosen = draw(st.lists(st.sampled_from(tags), min_size=0, max_size=5))
            values = [summary_scalar(tag, draw(values_strategy)) for tag in chosen]
            if kind == "histogram":
                values.append(delimited(1, b"h") + delimited(9, key(8, 0) + varint(3)))
            payloads.append(event_bytes(step, values))
    return tags, payloads


@st.composite
def tensorboard_stream(draw):
    tags = draw(st.lists(tags_strategy, min_size=1, max_size=4, unique=True))
    plugins = {tag: draw(st.sampled_from([b"scalars", b"images", None])) for tag in tags}
    payloads = [key(1, 1) + struct.pack("<d", 1.0) + delimited(3, b"brain.Event:2")]
    for _ in range(draw(st.integers(min_value=0, max_value=30))):
        step = draw(steps_strategy)
        values = []
        for tag in draw(st.lists(st.sampled_from(tags), min_size=0, max_size=4)):
            form = draw(
                st.sampled_from(
                    ["simple", "float_val", "double_val", "float_content", "double_content", "half"]
                )
            )
            value = draw(values_strategy if form != "half" else st.sampled_from([1.5, -2.0]))
            if form == "simple":
                values.append(tensorboard_simple(tag, value))
            else:
                # Mostly the tag's own plugin; now and then another, which only counts first.
                plugin = draw(st.sampled_from([plugins[tag], plugins[tag], None, b"scalars", b"x"]))
                values.append(tensorboard_tensor(tag, value, form, plugin))
        payloads.append(event_bytes(step, values))
    return tags, payloads


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stream=summary_stream(), data=st.data())
def test_summary_streams_read_as_protobuf_reads_them(tmp_path_factory, stream, data):
    tags, payloads = stream
    path = tmp_path_factory.mktemp("summary") / SUMMARY_NAME
    write_payloads(path, payloads)
    assert_same_points(reader.scalar_arrays(path), protobuf_points(path))
    asked = data.draw(st.sets(st.sampled_from([as_text(tag) for tag in tags])))
    assert_same_points(reader.scalar_arrays(path, tags=asked), protobuf_points(path, asked))


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stream=tensorboard_stream(), data=st.data())
def test_tensorboard_streams_read_as_protobuf_reads_them(tmp_path_factory, stream, data):
    tags, payloads = stream
    path = tmp_path_factory.mktemp("tensorboard") / TENSORBOARD_NAME
    write_payloads(path, payloads)
    expected = protobuf_points(path, tensorboard=True)
    assert_same_points(reader.scalar_arrays(path), expected)
    asked = data.draw(st.sets(st.sampled_from([as_text(tag) for tag in tags])))
    assert_same_points(
        reader.scalar_arrays(path, tags=asked), protobuf_points(path, asked, tensorboard=True)
    )


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stream=summary_stream(), chunk=st.integers(min_value=1, max_value=200))
def test_any_chunk_size_reads_the_same_points(tmp_path_factory, monkeypatch, stream, chunk):
    path = tmp_path_factory.mktemp("chunks") / SUMMARY_NAME
    write_payloads(path, stream[1])
    whole = reader.scalar_arrays(path)
    monkeypatch.setattr(_columns, "_CHUNK_BYTES", chunk)
    assert_same_points(reader.scalar_arrays(path), whole)


# --------------------------------------------------------------------------
# Files from our writer
# --------------------------------------------------------------------------


def write_run(directory: Path, steps: list[int], formats=("mindinsight",)) -> None:
    with SummaryRecord(directory, formats=formats) as record:
        for step in steps:
            record.add_value("scalar", "loss", 1.0 / (step % 1000 + 1))
            record.add_value("scalar", "lr", 0.1)
            record.record(step)


def test_a_run_of_our_writer_reads_as_protobuf_reads_it(tmp_path):
    steps = [*range(0, 20000, 7), INT64_MAX - 1, INT64_MAX]
    write_run(tmp_path, steps)
    [path] = reader.list_summary_files(tmp_path, "summary")
    got = reader.scalar_arrays(tmp_path)
    assert_same_points(got, protobuf_points(path))
    assert got["loss"][0].tolist() == steps  # 2**63-1 stays itself, no float on the way
    assert got["lr"][1].tolist() == [np.float32(0.1).item()] * len(steps)


def test_tensorboard_files_of_our_writer_are_read_too(tmp_path):
    write_run(tmp_path, [1, 2, 3, INT64_MAX], formats=("tensorboard",))
    [path] = reader.list_summary_files(tmp_path, "tensorboard")
    got = reader.scalar_arrays(tmp_path)
    assert_same_points(got, protobuf_points(path, tensorboard=True))
    assert got["loss"][0].tolist() == [1, 2, 3, INT64_MAX]
    lr = np.float32(0.1).item()
    assert reader.scalars(path)["lr"] == [(step, lr) for step in (1, 2, 3, INT64_MAX)]


def test_a_directory_with_both_formats_is_read_from_its_summary_files(tmp_path):
    write_run(tmp_path, [1, 2], formats=("mindinsight", "tensorboard"))
    assert reader.scalar_arrays(tmp_path)["loss"][0].tolist() == [1, 2]  # not [1, 2, 1, 2]
    assert reader.scalar_arrays(tmp_path, kind="tensorboard")["loss"][0].tolist() == [1, 2]


def test_scalars_keeps_its_lists_of_python_tuples(tmp_path):
    write_run(tmp_path, [3, 5])
    curves = reader.scalars(tmp_path)
    widened = [np.float32(1 / 4).item(), np.float32(1 / 6).item(), np.float32(0.1).item()]
    assert curves == {
        "loss": [(3, widened[0]), (5, widened[1])],
        "lr": [(3, widened[2]), (5, widened[2])],
    }
    assert all(
        type(step) is int and type(value) is float
        for points in curves.values()
        for step, value in points
    )


# --------------------------------------------------------------------------
# Tags
# --------------------------------------------------------------------------


def test_a_summary_tag_that_is_not_utf8_is_text_with_escapes_and_a_warning(tmp_path, caplog):
    path = tmp_path / SUMMARY_NAME
    write_payloads(
        path,
        [
            event_bytes(1, [summary_scalar(b"ok", 1.0), summary_scalar(b"bad\xff", 2.0)]),
            event_bytes(2, [summary_scalar(b"bad\xfe", 3.0), summary_scalar(b"bad\xff", 4.0)]),
        ],
    )
    with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
        curves = reader.scalars(path)
    # Two different damaged tags stay two curves; every key is str.
    assert curves == {"ok": [(1, 1.0)], "bad\\xff": [(1, 2.0), (2, 4.0)], "bad\\xfe": [(2, 3.0)]}
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        f"{path}: a scalar tag is not UTF-8; it is read as 'bad\\\\xff'",
        f"{path}: a scalar tag is not UTF-8; it is read as 'bad\\\\xfe'",
    ]
    assert reader.scalar_arrays(path, tags=["bad\\xfe"])["bad\\xfe"][1].tolist() == [3.0]


def test_a_tensorboard_tag_that_is_not_utf8_is_a_damaged_record_as_protobuf_says(tmp_path, caplog):
    path = tmp_path / TENSORBOARD_NAME
    offsets = write_payloads(
        path,
        [
            event_bytes(1, [tensorboard_simple(b"ok", 1.0)]),
            event_bytes(2, [tensorboard_simple(b"bad\xff", 2.0), tensorboard_simple(b"ok", 3.0)]),
        ],
    )
    with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
        assert reader.scalars(path) == {"ok": [(1, 1.0)]}
    [message] = [record.getMessage() for record in caplog.records]
    assert message.startswith(f"corrupt record in {str(path)!r} at byte {offsets[1]}: payload of")
    assert "String field had bad UTF-8" in message or "not a valid" in message


def test_tensorboard_tensor_scalars_count_only_under_the_scalars_plugin(tmp_path, caplog):
    path = tmp_path / TENSORBOARD_NAME
    write_payloads(
        path,
        [
            event_bytes(
                1,
                [
                    tensorboard_tensor(b"t", 0.5, "double_val", b"scalars"),
                    tensorboard_tensor(b"img", 9.0, "float_val", b"images"),
                ],
            ),
            event_bytes(
                2,
                [
                    tensorboard_tensor(b"t", 0.25, "float_content", None),
                    tensorboard_tensor(b"img", 9.0, "float_val", None),
                ],
            ),
            event_bytes(3, [tensorboard_tensor(b"t", 1.5, "half", None)]),
            # A later metadata does not change the plugin: the first one decides.
            event_bytes(4, [tensorboard_tensor(b"img", 7.0, "float_val", b"scalars")]),
        ],
    )
    got = reader.scalar_arrays(path)
    assert list(got) == ["t"]
    assert got["t"][0].tolist() == [1, 2, 3]
    assert got["t"][1].tolist() == [0.5, 0.25, 1.5]
    assert reader.scalar_arrays(path, tags={"img"}) == {}


def test_a_scalars_tensor_that_is_not_one_number_is_skipped_with_a_warning(tmp_path, caplog):
    path = tmp_path / TENSORBOARD_NAME
    two = key(1, 0) + varint(1) + delimited(2, delimited(2, key(1, 0) + varint(2)))
    two += delimited(5, struct.pack("<2f", 1.0, 2.0))
    offsets = write_payloads(
        path,
        [
            event_bytes(1, [tensorboard_tensor(b"t", 0.5, "float_val", b"scalars")]),
            event_bytes(2, [delimited(1, b"t") + delimited(8, two)]),
        ],
    )
    with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
        assert reader.scalars(path) == {"t": [(1, 0.5)]}
    [message] = [record.getMessage() for record in caplog.records]
    assert message == (
        f"{path} at byte {offsets[1]}: a value of scalar tag 't' is not one number; skipped"
    )


def test_only_the_tags_asked_for_are_returned(tmp_path):
    write_run(tmp_path, [1, 2])
    assert list(reader.scalar_arrays(tmp_path, tags=["lr"])) == ["lr"]
    assert list(reader.scalar_arrays(tmp_path, tags=("lr", "missing"))) == ["lr"]
    assert reader.scalar_arrays(tmp_path, tags=[]) == {}


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ("loss", r"tags must be None or a collection of str tags .* single str: got 'loss'"),
        (b"loss", r"not a single bytes"),
        (5, r"tags must be None or a collection of str tags, got int"),
        ([b"loss"], r"tags must hold str tags only, got b'loss' \(bytes\)"),
    ],
)
def test_bad_tags_are_refused_naming_the_argument(tmp_path, tags, message):
    with pytest.raises(WriterTypeError, match=message) as caught:
        reader.scalar_arrays(tmp_path, tags=tags)
    assert isinstance(caught.value, TypeError)


def test_bad_paths_and_kinds_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        reader.scalar_arrays(tmp_path / "missing")
    with pytest.raises(WriterTypeError, match=r"path must be a str or os\.PathLike"):
        reader.scalar_arrays(5)  # type: ignore[arg-type]
    lineage = tmp_path / "events.out.events.summary.1.0.vm_lineage"
    lineage.write_bytes(b"")
    with pytest.raises(WriterValueError, match="is a lineage file by its name, holds no scalars"):
        reader.scalar_arrays(lineage)
    with pytest.raises(WriterValueError, match=r"kind='lineage' holds no scalars"):
        reader.scalar_arrays(tmp_path, kind="lineage")
    with pytest.raises(WriterValueError, match="kind must be one of"):
        reader.scalar_arrays(tmp_path, kind="MS")


def test_a_file_with_another_name_is_read_by_kind(tmp_path):
    path = tmp_path / "copy.bin"
    write_payloads(path, [event_bytes(4, [tensorboard_simple(b"x", 2.0)])])
    assert reader.scalars(path) == {}  # read as a summary file: field 2 is no scalar there
    assert reader.scalar_arrays(path, kind="tensorboard")["x"][1].tolist() == [2.0]


# --------------------------------------------------------------------------
# Damage: the same verdicts, warnings and errors as the event readers
# --------------------------------------------------------------------------


def many_records(tmp_path: Path) -> tuple[Path, list[int]]:
    path = tmp_path / SUMMARY_NAME
    payloads = [event_bytes(step, [summary_scalar(b"loss", step / 2)]) for step in range(40)]
    return path, write_payloads(path, payloads)


def warnings_of(caplog, read) -> tuple[object, list[str]]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
        result = read()
    return result, [record.getMessage() for record in caplog.records]


def event_reader_points(path: Path) -> dict[str, list[tuple[int, float]]]:
    points: dict[str, list[tuple[int, float]]] = {}
    for event in read_events(path):
        for value in event.summary.value:
            points.setdefault(value.tag, []).append((event.step, value.scalar_value))
    return points


@pytest.mark.parametrize(
    "damage", ["payload byte", "two payloads", "length", "length far", "footer", "not a message"]
)
def test_damage_gives_the_event_readers_warnings_and_errors(tmp_path, caplog, damage):
    path, offsets = many_records(tmp_path)
    blob = bytearray(path.read_bytes())
    if damage == "payload byte":
        blob[offsets[20] + 14] ^= 0x10
    elif damage == "two payloads":
        blob[offsets[3] + 14] ^= 0x10
        blob[offsets[30] + 14] ^= 0x10
    elif damage == "length":
        blob[offsets[25]] ^= 0x01
    elif damage == "length far":  # a damaged length that points past the end of the file
        blob[offsets[25] + 5] ^= 0x40
    elif damage == "footer":
        blob[offsets[11] - 1] ^= 0x01
    else:
        after = frame(event_bytes(99, [summary_scalar(b"loss", 1.0)]))
        blob = bytearray(bytes(blob) + frame(b"\x08\xff") + after)
    path.write_bytes(bytes(blob))

    expected, expected_warnings = warnings_of(caplog, lambda: event_reader_points(path))
    got, got_warnings = warnings_of(caplog, lambda: reader.scalars(path))
    assert got == expected
    assert got_warnings == expected_warnings and got_warnings

    with pytest.raises(CorruptRecordError) as reference:
        list(read_events(path, strict=True))
    with pytest.raises(CorruptRecordError) as caught:
        reader.scalar_arrays(path, strict=True)
    assert str(caught.value) == str(reference.value)
    assert caught.value.offset == reference.value.offset


def test_a_torn_tail_at_every_byte_gives_the_event_readers_warning(tmp_path, caplog):
    path, offsets = many_records(tmp_path)
    whole = path.read_bytes()
    for cut in range(offsets[-2] + 1, len(whole)):
        path.write_bytes(whole[:cut])
        expected, expected_warnings = warnings_of(caplog, lambda: event_reader_points(path))
        for strict in (False, True):
            got, got_warnings = warnings_of(
                caplog, lambda strict=strict: reader.scalars(path, strict=strict)
            )
            assert got == expected, cut
            assert got_warnings == expected_warnings, cut


def test_damage_across_chunk_boundaries_reads_the_same(tmp_path, caplog, monkeypatch):
    path, offsets = many_records(tmp_path)
    blob = bytearray(path.read_bytes())
    blob[offsets[7] + 14] ^= 0x10
    path.write_bytes(bytes(blob[:-3]))
    expected, expected_warnings = warnings_of(caplog, lambda: event_reader_points(path))
    for chunk in (1, 13, 40, 41, 100, 1000):
        monkeypatch.setattr(_columns, "_CHUNK_BYTES", chunk)
        got, got_warnings = warnings_of(caplog, lambda: reader.scalars(path))
        assert got == expected
        assert got_warnings == expected_warnings


def test_records_of_every_shape_and_length_read_as_protobuf_reads_them(tmp_path):
    rng = np.random.default_rng(7)
    payloads = []
    for index in range(3000):
        count = int(rng.integers(0, 6))
        numbers = rng.integers(0, 9, count)
        tags = [f"tag{int(number)}".encode() * int(rng.integers(1, 3)) for number in numbers]
        values = [
            summary_scalar(tag, float(v))
            for tag, v in zip(tags, rng.normal(size=count), strict=True)
        ]
        payloads.append(event_bytes(int(rng.integers(0, 2**40)) if index % 5 else None, values))
    path = tmp_path / SUMMARY_NAME
    write_payloads(path, payloads)
    assert_same_points(reader.scalar_arrays(path), protobuf_points(path))


def test_long_records_read_as_protobuf_reads_them(tmp_path):
    wide = [summary_scalar(f"tag/{index}".encode(), index / 7) for index in range(6000)]
    path = tmp_path / SUMMARY_NAME
    write_payloads(path, [event_bytes(1, wide), event_bytes(2, wide), event_bytes(3, wide[:2])])
    got = reader.scalar_arrays(path)
    assert len(got) == 6000
    assert_same_points(got, protobuf_points(path))

    graph = key(1, 1) + bytes(8) + delimited(4, bytes(range(256)) * 400)
    tensorboard = tmp_path / TENSORBOARD_NAME
    write_payloads(tensorboard, [graph, event_bytes(1, [tensorboard_simple(b"x", 2.0)])])
    assert reader.scalars(tensorboard) == {"x": [(1, 2.0)]}


def test_every_curve_owns_its_arrays(tmp_path):
    write_run(tmp_path, [1, 2])
    curves = reader.scalar_arrays(tmp_path)
    curves["loss"][0][:] = 99
    curves["loss"][1][:] = 99.0
    assert curves["lr"][0].tolist() == [1, 2]
    assert curves["lr"][1].tolist() == [np.float32(0.1).item()] * 2


def test_a_length_beyond_the_file_allocates_only_what_the_file_holds(tmp_path, caplog, monkeypatch):
    # Chunks smaller than the file: the claimed length is met between two reads.
    monkeypatch.setattr(_columns, "_CHUNK_BYTES", 16)
    path = tmp_path / SUMMARY_NAME
    good = frame(event_bytes(1, [summary_scalar(b"loss", 0.5)]))
    claimed = 1 << 30  # a valid length field (its CRC holds) for 1 GiB that is not there
    length = struct.pack("<Q", claimed)
    path.write_bytes(good + length + struct.pack("<I", masked_crc32c(length)) + b"tail")
    expected, expected_warnings = warnings_of(caplog, lambda: event_reader_points(path))
    tracemalloc.start()
    try:
        got, got_warnings = warnings_of(caplog, lambda: reader.scalars(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == expected == {"loss": [(1, 0.5)]}
    assert got_warnings == expected_warnings
    assert f"(4 of {claimed + 4} payload bytes)" in got_warnings[0]
    assert peak < 64 << 20


def test_a_signalling_nan_reads_as_nan_without_a_warning(tmp_path):
    path = tmp_path / SUMMARY_NAME
    signalling = struct.unpack("<f", b"\x01\x00\x80\x7f")[0]  # exponent all ones, quiet bit 0
    payloads = [event_bytes(step, [summary_scalar(b"x", 1.0)]) for step in range(3)]
    payloads.append(event_bytes(3, [delimited(1, b"x") + key(3, 5) + b"\x01\x00\x80\x7f"]))
    write_payloads(path, payloads)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        steps, values = reader.scalar_arrays(path)["x"]
    assert steps.tolist() == [0, 1, 2, 3]
    assert values[:3].tolist() == [1.0, 1.0, 1.0] and np.isnan(values[3])
    assert np.isnan(signalling)


def tensorboard_scalar_tensor(tag: bytes, dtype: int, field: int, data: bytes) -> bytes:
    """A scalars-plugin tensor of one number, written as ``data`` in TensorProto ``field``."""
    tensor = key(1, 0) + varint(dtype) + delimited(2, b"") + delimited(field, data)
    return delimited(1, tag) + plugin_metadata(b"scalars") + delimited(8, tensor)


_SIGNALLING_NAN_TENSORS = {
    # dtype, field (4: tensor_content, 5: float_val, 13: half_val), the bits of the value
    "float-content": (1, 4, b"\x01\x00\x80\x7f"),
    "float-val": (1, 5, b"\x01\x00\x80\x7f"),
    "double-content": (2, 4, b"\x01\x00\x00\x00\x00\x00\xf0\x7f"),
    "half-content": (19, 4, b"\x01\x7c"),
    "half-val": (19, 13, varint(0x7C01)),
    "bfloat16-content": (14, 4, b"\x81\x7f"),
    "bfloat16-val": (14, 13, varint(0x7F81)),
}


@pytest.mark.parametrize("form", sorted(_SIGNALLING_NAN_TENSORS))
def test_a_signalling_nan_tensor_reads_as_nan_on_both_paths(tmp_path, form):
    # Three same-shape records go the fast path (scalar_arrays reads their bytes); one
    # record alone goes to protobuf. Both read NaN, with warnings as errors.
    dtype, field, data = _SIGNALLING_NAN_TENSORS[form]
    value = tensorboard_scalar_tensor(b"x", dtype, field, data)
    many, alone = tmp_path / "many" / TENSORBOARD_NAME, tmp_path / "alone" / TENSORBOARD_NAME
    for path, steps in ((many, range(1, 4)), (alone, range(1, 2))):
        path.parent.mkdir()
        write_payloads(path, [event_bytes(step, [value]) for step in steps])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fast = reader.scalar_arrays(many)["x"]
        single = reader.scalar_arrays(alone)["x"]
        listed = reader.scalars(alone)["x"]
    assert fast[0].tolist() == [1, 2, 3] and np.isnan(fast[1]).all()
    assert single[0].tolist() == [1] and np.isnan(single[1]).all()
    assert listed[0][0] == 1 and np.isnan(listed[0][1])


@pytest.mark.parametrize("form", ["float-val", "half-val", "bfloat16-val"])
def test_a_signalling_nan_tensor_beside_an_image_reads_as_nan(tmp_path, form):
    # An image in the same record: the walk refuses the record, protobuf parses it, and the
    # tensor's numbers are read from its listed values.
    dtype, field, data = _SIGNALLING_NAN_TENSORS[form]
    image = delimited(1, b"picture") + delimited(4, b"")
    path = tmp_path / TENSORBOARD_NAME
    write_payloads(
        path, [event_bytes(1, [tensorboard_scalar_tensor(b"x", dtype, field, data), image])]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        steps, values = reader.scalar_arrays(path)["x"]
        listed = reader.scalars(path)["x"]
    assert steps.tolist() == [1] and np.isnan(values).all()
    assert listed[0][0] == 1 and np.isnan(listed[0][1])


@pytest.mark.parametrize("content", [b"\x81", b"\x81\x7f\x00", b"\x00\x00\x80\x3f\x00"])
def test_a_bfloat16_tensor_of_an_odd_byte_count_is_skipped_with_a_warning(
    tmp_path, caplog, content
):
    # numpy's frombuffer raised ValueError ("buffer size must be a multiple of element
    # size") out of scalar_arrays and scalars; every other dtype checked the length.
    path = tmp_path / TENSORBOARD_NAME
    good = tensorboard_scalar_tensor(b"x", 14, 4, b"\x80\x3f")  # bfloat16 1.0
    odd = tensorboard_scalar_tensor(b"x", 14, 4, content)
    write_payloads(path, [event_bytes(1, [good]), event_bytes(2, [odd]), event_bytes(3, [good])])
    with caplog.at_level(logging.WARNING):
        got = reader.scalar_arrays(path)
    assert got["x"][0].tolist() == [1, 3] and got["x"][1].tolist() == [1.0, 1.0]
    assert "a value of scalar tag 'x' is not one number; skipped" in caplog.text
    assert reader.scalars(path) == {"x": [(1, 1.0), (3, 1.0)]}
