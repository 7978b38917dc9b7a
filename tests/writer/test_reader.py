"""rankscribe.writer.reader: file names, directory order, damaged files and decoded values."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.writer.errors import CorruptRecordError, WriterValueError
from rankscribe.writer.events import (
    Histogram,
    HistogramBucket,
    Image,
    Landscape,
    decode_event,
    decode_lineage_event,
    load_dir,
    load_lineage_dir,
    message_to_dict,
    open_events,
    read_events,
    read_lineage_events,
    read_tensorboard_events,
)
from rankscribe.writer.files import RECORD_OVERHEAD, FileKind, file_kind, frame, parse_file_name
from rankscribe.writer.pb import anf_ir_pb2, lineage_pb2, summary_pb2, tensorboard_pb2
from rankscribe.writer.reader import decode_value, list_summary_files, scalars

SUMMARY_NAME = "events.out.events.summary.1795244534.0.vm_MS"
LINEAGE_NAME = "events.out.events.summary.1795244534.0.vm_lineage"
READER_LOGGER = "rankscribe.writer.reader"


def scalar_event(step: int, **values: float) -> summary_pb2.Event:
    event = summary_pb2.Event(wall_time=1000.0 + step, step=step)
    for tag, value in values.items():
        event.summary.value.add(tag=tag, scalar_value=value)
    return event


def write_records(path: Path, payloads: list[bytes]) -> list[int]:
    """Write framed payloads to ``path``; return the offset of each record."""
    offsets, position = [], 0
    for payload in payloads:
        offsets.append(position)
        position += len(payload) + RECORD_OVERHEAD
    path.write_bytes(b"".join(frame(p) for p in payloads))
    return offsets


def write_events(path: Path, events: list[summary_pb2.Event]) -> list[int]:
    return write_records(path, [e.SerializeToString() for e in events])


def three_scalar_events(tmp_path: Path) -> tuple[Path, list[summary_pb2.Event], list[int]]:
    events = [scalar_event(1, loss=1.0), scalar_event(2, loss=0.5), scalar_event(3, loss=0.25)]
    path = tmp_path / SUMMARY_NAME
    return path, events, write_events(path, events)


# --------------------------------------------------------------------------
# File names
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "prefix", "timestamp", "rank", "host", "suffix"),
    [
        # MindSpore >= 1.2: with the device id / rank.
        (SUMMARY_NAME, FileKind.SUMMARY, "events", 1795244534, 0, "vm", "_MS"),
        (LINEAGE_NAME, FileKind.LINEAGE, "events", 1795244534, 0, "vm", "_lineage"),
        (
            "run.out.events.summary.17.12.node-3.cluster.local_MS",
            FileKind.SUMMARY,
            "run",
            17,
            12,
            "node-3.cluster.local",
            "_MS",
        ),
        # prefix and suffix may hold dots and underscores (^\w+[0-9a-zA-Z_.]*$)
        (
            "my.run_1.out.events.summary.5.3.vm_custom.v2",
            FileKind.SUMMARY,
            "my.run_1",
            5,
            3,
            "vm",
            "_custom.v2",
        ),
        ("events.out.events.summary.5.0.vmx", FileKind.SUMMARY, "events", 5, 0, "vmx", ""),
        # MindSpore <= 1.1: no device id.
        (
            "events.out.events.summary.1600000000.vm_MS",
            FileKind.SUMMARY,
            "events",
            1600000000,
            None,
            "vm",
            "_MS",
        ),
        (
            "events.out.events.summary.1600000000.vm_lineage",
            FileKind.LINEAGE,
            "events",
            1600000000,
            None,
            "vm",
            "_lineage",
        ),
        # MindSpore 0.1-0.2 with MindInsight's callback: `<summary file>_lineage`.
        (
            "events.out.events.summary.1590000000.vm_MS_lineage",
            FileKind.LINEAGE,
            "events",
            1590000000,
            None,
            "vm",
            "_MS_lineage",
        ),
        # TensorBoard: the host and whatever the writer appended.
        (
            "events.out.tfevents.1795244534.vm.4242.0",
            FileKind.TENSORBOARD,
            "events",
            1795244534,
            None,
            "vm.4242.0",
            "",
        ),
    ],
)
def test_file_names_parse_into_their_parts(name, kind, prefix, timestamp, rank, host, suffix):
    parts = parse_file_name(Path("/some/dir") / name)
    assert parts.name == name
    assert (parts.kind, parts.prefix, parts.timestamp, parts.rank, parts.host, parts.suffix) == (
        kind,
        prefix,
        timestamp,
        rank,
        host,
        suffix,
    )


@pytest.mark.parametrize(
    "name",
    [
        "notes.txt",
        "events.out.events.summary.vm_MS",  # no timestamp
        "events.out.events.summary.12ab.0.vm_MS",
        "summary.123",  # MindInsight would load it, but it is not a MindSpore name
        "events.out.events.summary.1.0.vm_explain",  # MindSpore 1.x XAI: not read here
    ],
)
def test_bad_file_names_are_refused_with_the_name_and_the_expected_form(name):
    with pytest.raises(WriterValueError) as caught:
        parse_file_name(name)
    assert repr(name) in str(caught.value)
    assert "{prefix}.out.events.summary.{timestamp}.{rank}.{host}{suffix}" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_an_empty_name_is_refused_as_no_path():
    with pytest.raises(WriterValueError) as caught:
        parse_file_name("")
    assert str(caught.value) == (
        "For 'parse_file_name', the argument 'path' must be a non-empty path without NUL "
        "characters, but got ''."
    )


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (SUMMARY_NAME, FileKind.SUMMARY),
        (LINEAGE_NAME, FileKind.LINEAGE),
        ("anything.summary.123_whatever", FileKind.SUMMARY),  # MindInsight's rule
        ("events.out.tfevents.1.host", FileKind.TENSORBOARD),
        ("events.out.events.summary.1.0.vm_explain", None),
        ("events.out.events.summary.1.0.vm_MS.npy", FileKind.SUMMARY),
        ("checkpoint.ckpt", None),
    ],
)
def test_file_kind_follows_mindinsight_and_tensorboard(name, kind):
    assert file_kind(name) is kind


# --------------------------------------------------------------------------
# Directory listing
# --------------------------------------------------------------------------


def touch(directory: Path, *names: str) -> None:
    for name in names:
        (directory / name).write_bytes(b"")


def test_files_are_listed_by_timestamp_then_name(tmp_path):
    touch(
        tmp_path,
        "events.out.events.summary.300.0.vm_MS",
        "events.out.events.summary.1000.0.vm_MS",  # 1000 > 300 even though "1" < "3"
        "events.out.events.summary.300.1.vm_MS",
        "events.out.events.summary.300.0.vm_lineage",
        "events.out.events.summary.200.0.vm_lineage",
        "events.out.tfevents.250.vm.1.0",
        "notes.txt",
        "events.out.events.summary.100.0.vm_explain",
    )
    (tmp_path / "events.out.events.summary.50.0.vm_MS").mkdir()  # a directory, not a file

    assert [p.name for p in list_summary_files(tmp_path)] == [
        "events.out.events.summary.200.0.vm_lineage",
        "events.out.tfevents.250.vm.1.0",
        "events.out.events.summary.300.0.vm_MS",
        "events.out.events.summary.300.0.vm_lineage",
        "events.out.events.summary.300.1.vm_MS",
        "events.out.events.summary.1000.0.vm_MS",
    ]
    assert [p.name for p in list_summary_files(tmp_path, "summary")] == [
        "events.out.events.summary.300.0.vm_MS",
        "events.out.events.summary.300.1.vm_MS",
        "events.out.events.summary.1000.0.vm_MS",
    ]
    assert [p.name for p in list_summary_files(str(tmp_path), FileKind.LINEAGE)] == [
        "events.out.events.summary.200.0.vm_lineage",
        "events.out.events.summary.300.0.vm_lineage",
    ]
    assert all(p.parent == tmp_path for p in list_summary_files(tmp_path))


def test_symlinks_are_skipped(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "events.out.events.summary.100.0.vm_MS"
    write_events(target, [scalar_event(1, loss=1.0)])
    run = tmp_path / "run"
    run.mkdir()
    touch(run, "events.out.events.summary.200.0.vm_MS")
    (run / "events.out.events.summary.100.0.vm_MS").symlink_to(target)
    (run / "events.out.events.summary.150.0.vm_MS").symlink_to(tmp_path / "dangling")

    assert [p.name for p in list_summary_files(run)] == ["events.out.events.summary.200.0.vm_MS"]
    assert scalars(run) == {}


def test_subdirectories_are_not_searched(tmp_path):
    (tmp_path / "sub").mkdir()
    touch(tmp_path / "sub", SUMMARY_NAME)
    assert list_summary_files(tmp_path) == []


def test_an_unknown_kind_is_refused_with_the_valid_ones(tmp_path):
    with pytest.raises(
        WriterValueError,
        match=r"kind must be one of 'summary', 'lineage', "
        r"'tensorboard' or None, got 'MS'",
    ):
        list_summary_files(tmp_path, "MS")


def test_listing_a_missing_directory_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        list_summary_files(tmp_path / "missing")


# --------------------------------------------------------------------------
# Torn tails, corruption, bad payloads
# --------------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
def test_a_torn_last_record_is_reported_at_every_byte_and_never_raised(tmp_path, caplog, strict):
    path, events, offsets = three_scalar_events(tmp_path)
    whole = path.read_bytes()
    last = offsets[-1]
    for cut in range(last + 1, len(whole)):
        path.write_bytes(whole[:cut])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
            reader = read_events(path, strict=strict)
            assert list(reader) == events[:2], f"cut at byte {cut}"
        assert reader.torn_tail is not None, f"cut at byte {cut}"
        assert reader.torn_tail.offset == last
        assert reader.corruptions == []
        [message] = [r.getMessage() for r in caplog.records]
        assert str(path) in message
        assert f"the last record, at byte {last}, is incomplete" in message
        assert "the 2 records before it were read" in message


def test_a_cut_on_a_record_boundary_is_no_torn_tail(tmp_path, caplog):
    path, events, offsets = three_scalar_events(tmp_path)
    path.write_bytes(path.read_bytes()[: offsets[-1]])
    with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
        reader = read_events(path, strict=True)
        assert list(reader) == events[:2]
    assert reader.torn_tail is None
    assert caplog.records == []


def test_an_empty_file_has_no_events_and_no_torn_tail(tmp_path):
    path = tmp_path / SUMMARY_NAME
    path.write_bytes(b"")
    reader = read_events(path, strict=True)
    assert list(reader) == []
    assert reader.torn_tail is None


def test_payload_corruption_in_the_middle_raises_in_strict_mode_with_the_offset(tmp_path):
    path, _, offsets = three_scalar_events(tmp_path)
    damaged = bytearray(path.read_bytes())
    damaged[offsets[1] + 12 + 3] ^= 0x40  # a payload byte of the second record
    path.write_bytes(bytes(damaged))

    with pytest.raises(CorruptRecordError) as caught:
        list(read_events(path, strict=True))
    assert caught.value.offset == offsets[1]
    assert caught.value.path == str(path)
    assert str(caught.value) == (
        f"corrupt record in {str(path)!r} at byte {offsets[1]}: payload CRC mismatch"
    )


def test_payload_corruption_is_skipped_with_a_warning_naming_the_file(tmp_path, caplog):
    path, events, offsets = three_scalar_events(tmp_path)
    damaged = bytearray(path.read_bytes())
    damaged[offsets[1] + 12 + 3] ^= 0x40
    path.write_bytes(bytes(damaged))

    with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
        reader = read_events(path)
        got = list(reader)
    assert got == [events[0], events[2]]
    assert [c.offset for c in reader.corruptions] == [offsets[1]]
    assert reader.torn_tail is None
    [message] = [r.getMessage() for r in caplog.records]
    assert message == (
        f"corrupt record in {str(path)!r} at byte {offsets[1]}: payload CRC mismatch; skipped"
    )


def test_length_corruption_ends_a_lenient_read_and_raises_a_strict_one(tmp_path, caplog):
    path, events, offsets = three_scalar_events(tmp_path)
    damaged = bytearray(path.read_bytes())
    damaged[offsets[1]] ^= 0x01  # the length of the second record
    path.write_bytes(bytes(damaged))

    with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
        reader = read_events(path)
        assert list(reader) == events[:1]
    assert "length CRC mismatch" in str(reader.corruptions[0])
    assert str(path) in caplog.records[0].getMessage()
    with pytest.raises(CorruptRecordError, match=rf"at byte {offsets[1]}: length CRC mismatch"):
        list(read_events(path, strict=True))


def test_a_payload_that_is_not_a_message_is_corruption(tmp_path, caplog):
    good = [scalar_event(1, loss=1.0), scalar_event(2, loss=2.0)]
    path = tmp_path / SUMMARY_NAME
    # Valid framing and CRCs around bytes that are no protobuf message (a
    # truncated varint), as a writer bug or a wrong file type would leave.
    offsets = write_records(
        path, [good[0].SerializeToString(), b"\x08\xff", good[1].SerializeToString()]
    )

    with pytest.raises(CorruptRecordError) as caught:
        list(read_events(path, strict=True))
    assert caught.value.offset == offsets[1]
    assert f"payload of 2 bytes is not a valid {summary_pb2.Event.DESCRIPTOR.full_name}" in str(
        caught.value
    )

    with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
        reader = read_events(path)
        assert list(reader) == good
    assert [c.offset for c in reader.corruptions] == [offsets[1]]
    assert "skipped" in caplog.records[0].getMessage()
    assert str(path) in caplog.records[0].getMessage()


def test_each_iteration_reads_the_file_again(tmp_path):
    path, events, _ = three_scalar_events(tmp_path)
    path.write_bytes(path.read_bytes()[:-1])
    reader = read_events(path)
    assert list(reader) == events[:2]
    assert reader.torn_tail is not None
    write_events(path, events)
    assert list(reader) == events
    assert reader.torn_tail is None


def test_records_give_offsets_and_payload_lengths(tmp_path):
    path, events, offsets = three_scalar_events(tmp_path)
    records = list(read_events(path).records())
    assert [r.offset for r in records] == offsets
    assert [r.payload_length for r in records] == [e.ByteSize() for e in events]
    assert [r.event for r in records] == events


@given(
    st.lists(
        st.floats(width=32, allow_nan=False).map(
            lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
        ),
        min_size=1,
        max_size=6,
    ),
    st.data(),
)
def test_any_prefix_of_a_file_reads_back_as_a_prefix_of_its_events(tmp_path_factory, values, data):
    path = tmp_path_factory.mktemp("prefix") / SUMMARY_NAME
    events = [scalar_event(step, x=value) for step, value in enumerate(values)]
    write_events(path, events)
    blob = path.read_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(blob)))
    path.write_bytes(blob[:cut])
    reader = read_events(path, strict=True)
    got = list(reader)
    assert got == events[: len(got)]
    complete = sum(e.ByteSize() + RECORD_OVERHEAD for e in got)
    assert (reader.torn_tail is None) == (cut == complete)


# --------------------------------------------------------------------------
# Choosing the message type
# --------------------------------------------------------------------------


def test_read_events_refuses_a_lineage_file_by_its_name(tmp_path):
    with pytest.raises(
        WriterValueError, match=r"is a lineage file by its name.*read_lineage_events"
    ):
        read_events(tmp_path / LINEAGE_NAME)
    with pytest.raises(WriterValueError, match=r"is a summary file by its name"):
        read_lineage_events(tmp_path / SUMMARY_NAME)
    with pytest.raises(WriterValueError, match=r"is a summary file by its name"):
        read_tensorboard_events(tmp_path / SUMMARY_NAME)


def test_open_events_picks_the_message_type_from_the_name(tmp_path):
    summary = tmp_path / SUMMARY_NAME
    lineage = tmp_path / LINEAGE_NAME
    tensorboard = tmp_path / "events.out.tfevents.1795244534.vm.1.0"
    write_events(summary, [scalar_event(1, loss=1.0)])
    lineage_event = lineage_pb2.LineageEvent(wall_time=5.0)
    lineage_event.evaluation_lineage.metric = '{"acc": 0.5}'
    write_records(lineage, [lineage_event.SerializeToString()])
    tensorboard_event = tensorboard_pb2.Event(wall_time=5.0, step=3, file_version="brain.Event:2")
    write_records(tensorboard, [tensorboard_event.SerializeToString()])

    assert list(open_events(summary)) == [scalar_event(1, loss=1.0)]
    assert list(open_events(lineage)) == [lineage_event]
    assert list(open_events(tensorboard)) == [tensorboard_event]
    assert list(read_tensorboard_events(tensorboard)) == [tensorboard_event]


def test_open_events_needs_a_kind_for_an_unknown_name(tmp_path):
    path = tmp_path / "copy.bin"
    write_events(path, [scalar_event(4, loss=1.0)])
    with pytest.raises(WriterValueError, match=r"cannot tell what .*copy\.bin' holds.*kind="):
        open_events(path)
    assert list(open_events(path, kind="summary")) == [scalar_event(4, loss=1.0)]
    assert list(read_events(path)) == [scalar_event(4, loss=1.0)]  # no name, no objection


# --------------------------------------------------------------------------
# Decoded values
# --------------------------------------------------------------------------


def test_a_version_event_decodes_without_a_step():
    decoded = decode_event(summary_pb2.Event(wall_time=12.5, version="MindSpore.Event:1"))
    assert (decoded.wall_time, decoded.step, decoded.what) == (12.5, None, "version")
    assert decoded.version == "MindSpore.Event:1"
    assert decoded.graph is None
    assert decoded.values == ()


def test_scalars_decode_to_the_widened_float32_in_wire_order():
    event = scalar_event(20, loss=0.1)
    event.summary.value.add(tag="loss", scalar_value=-0.0)
    decoded = decode_event(event)
    assert decoded.step == 20
    assert decoded.what == "summary"
    assert [(v.tag, v.plugin) for v in decoded.values] == [("loss", "scalar"), ("loss", "scalar")]
    assert decoded.values[0].value == 0.10000000149011612
    assert struct.pack(">d", decoded.values[1].value) == struct.pack(">d", -0.0)


def test_histograms_decode_with_absent_min_max_sum_as_none():
    event = summary_pb2.Event(wall_time=1.0, step=1)
    full = event.summary.value.add(tag="w").histogram
    full.buckets.add(left=-1.0, width=0.5, count=2)
    full.buckets.add(left=-0.5, width=1.5, count=3)
    full.nan_count, full.pos_inf_count, full.neg_inf_count = 1, 2, 3
    full.min, full.max, full.sum, full.count = -1.0, 1.0, 0.25, 11
    only_nan = event.summary.value.add(tag="nan").histogram
    only_nan.nan_count, only_nan.count = 4, 4

    first, second = decode_event(event).values
    assert first.plugin == "histogram"
    assert first.value == Histogram(
        buckets=(HistogramBucket(-1.0, 0.5, 2), HistogramBucket(-0.5, 1.5, 3)),
        count=11,
        nan_count=1,
        pos_inf_count=2,
        neg_inf_count=3,
        min=-1.0,
        max=1.0,
        sum=0.25,
    )
    assert first.value.buckets[1].right == 1.0
    assert second.value == Histogram(
        buckets=(),
        count=4,
        nan_count=4,
        pos_inf_count=0,
        neg_inf_count=0,
        min=None,
        max=None,
        sum=None,
    )


def png_bytes(pixels: np.ndarray) -> bytes:
    import io

    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def test_images_keep_the_png_and_decode_pixels_on_request():
    pixels = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 10
    event = summary_pb2.Event(wall_time=1.0, step=1)
    event.summary.value.add(tag="img").image.CopyFrom(
        summary_pb2.Summary.Image(height=2, width=3, colorspace=3, encoded_image=png_bytes(pixels))
    )
    [value] = decode_event(event).values
    assert value.plugin == "image"
    assert isinstance(value.value, Image)
    assert (value.value.height, value.value.width, value.value.colorspace) == (2, 3, 3)
    assert value.value.png == png_bytes(pixels)
    np.testing.assert_array_equal(value.value.pixels(), pixels)


def float_tensor(values: list[float], dims: list[int]) -> anf_ir_pb2.TensorProto:
    return anf_ir_pb2.TensorProto(dims=dims, data_type=anf_ir_pb2.DT_FLOAT32, float_data=values)


def test_tensors_decode_to_numpy_arrays():
    event = summary_pb2.Event(wall_time=1.0, step=2)
    event.summary.value.add(tag="t").tensor.CopyFrom(float_tensor([1.0, 2.0, 3.0, 4.5], [2, 2]))
    [value] = decode_event(event).values
    assert value.plugin == "tensor"
    assert isinstance(value.value, np.ndarray)
    np.testing.assert_array_equal(value.value, np.array([[1.0, 2.0], [3.0, 4.5]], dtype=np.float32))
    assert value.value.dtype == np.float32


def test_a_tensor_that_does_not_fit_its_dims_raises_a_value_error():
    value = summary_pb2.Summary.Value(tag="t", tensor=float_tensor([1.0, 2.0, 3.0], [2, 2]))
    with pytest.raises(WriterValueError, match=r"float_data holds 3 values"):
        decode_value(value)
    event = summary_pb2.Event(wall_time=1.0, step=1)
    event.summary.value.append(value)
    with pytest.raises(WriterValueError):
        decode_event(event)


def test_loss_landscapes_decode_their_points_and_metadata():
    event = summary_pb2.Event(wall_time=1.0, step=3)
    landscape = event.summary.value.add(tag="landscape").loss_landscape
    landscape.landscape.x.CopyFrom(float_tensor([0.0, 1.0], [2]))
    landscape.landscape.z.CopyFrom(float_tensor([5.0, 6.0], [2]))
    landscape.loss_path.intervals.extend([1, 2])
    landscape.metadata.unit = "epoch"
    landscape.metadata.step_per_epoch = 10

    [value] = decode_event(event).values
    assert value.plugin == "landscape"
    decoded = value.value
    assert isinstance(decoded, Landscape)
    assert decoded.landscape is not None
    np.testing.assert_array_equal(decoded.landscape.x, [0.0, 1.0])
    assert decoded.landscape.y is None
    np.testing.assert_array_equal(decoded.landscape.z, [5.0, 6.0])
    assert decoded.loss_path_intervals == (1, 2)
    assert decoded.loss_path_points is None
    assert decoded.convergence_point is None
    assert (decoded.decomposition, decoded.unit, decoded.step_per_epoch) == (None, "epoch", 10)


def test_graph_events_give_name_nodes_and_parameters():
    event = summary_pb2.Event(wall_time=1.0)
    graph = event.graph_def
    graph.name = "net"
    graph.node.add(
        name="1", op_type="MatMul", scope="Default/fc", full_name="Default/fc/MatMul-op0"
    )
    graph.parameters.add(name="fc.weight")
    decoded = decode_event(event)
    assert decoded.what == "graph_def"
    assert decoded.step is None
    assert decoded.graph is not None
    assert decoded.graph.name == "net"
    assert [tuple(node) for node in decoded.graph.nodes] == [
        ("1", "MatMul", "Default/fc", "Default/fc/MatMul-op0")
    ]
    assert decoded.graph.parameters == ("fc.weight",)
    assert decoded.graph.proto == graph


def test_a_value_with_only_a_tag_has_no_plugin():
    event = summary_pb2.Event(wall_time=1.0, step=1)
    event.summary.value.add(tag="empty")
    [value] = decode_event(event).values
    assert (value.tag, value.plugin, value.value) == ("empty", None, None)


def test_lineage_events_decode_to_dicts_of_exact_values():
    event = lineage_pb2.LineageEvent(wall_time=7.0)
    train = event.train_lineage
    train.hyper_parameters.learning_rate = 0.01  # float32 on the wire
    train.hyper_parameters.batch_size = 32
    train.model.size = 2**40 + 1  # int64
    train.model.path = '{"ckpt": "/x.ckpt"}'
    decoded = decode_lineage_event(event)
    assert (decoded.wall_time, decoded.step, decoded.what) == (7.0, None, "train_lineage")
    assert decoded.data == {
        "hyper_parameters": {"learning_rate": 0.009999999776482582, "batch_size": 32},
        "model": {"path": '{"ckpt": "/x.ckpt"}', "size": 2**40 + 1},
    }


def test_message_to_dict_keeps_maps_repeated_fields_nested_messages_and_enums():
    info = lineage_pb2.UserDefinedInfo()
    info.map_str["b"] = "2"
    info.map_str["a"] = "1"
    info.map_double["inf"] = float("inf")
    info.map_dict["nested"].map_int32["seed"] = 7
    info.user_info.add().map_int32["x"] = 1
    result = message_to_dict(info)
    assert result == {
        "user_info": [{"map_int32": {"x": 1}}],
        "map_dict": {"nested": {"map_int32": {"seed": 7}}},
        "map_str": {"a": "1", "b": "2"},
        "map_double": {"inf": float("inf")},
    }
    assert list(result["map_str"]) == ["a", "b"]
    operation = lineage_pb2.Operation(size=[3, 4], weights=[0.1])
    assert message_to_dict(operation) == {"size": [3, 4], "weights": [0.10000000149011612]}
    tensor = anf_ir_pb2.TensorProto(data_type=anf_ir_pb2.DT_FLOAT32, raw_data=b"\x00\x01")
    assert message_to_dict(tensor) == {"data_type": "DT_FLOAT32", "raw_data": b"\x00\x01"}


def test_an_unset_lineage_event_has_no_data():
    decoded = decode_lineage_event(lineage_pb2.LineageEvent(wall_time=1.0, step=4))
    assert (decoded.what, decoded.step, decoded.data) == (None, 4, {})


# --------------------------------------------------------------------------
# Whole directories
# --------------------------------------------------------------------------


def make_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    write_events(
        run / "events.out.events.summary.200.0.vm_MS",
        [
            summary_pb2.Event(wall_time=1.0, version="MindSpore.Event:1"),
            scalar_event(3, loss=0.25, acc=0.5),
        ],
    )
    write_events(
        run / "events.out.events.summary.100.0.vm_MS",
        [
            summary_pb2.Event(wall_time=1.0, version="MindSpore.Event:1"),
            scalar_event(1, loss=1.0),
            scalar_event(2, loss=0.5, acc=0.25),
        ],
    )
    lineage = lineage_pb2.LineageEvent(wall_time=2.0)
    lineage.user_defined_info.map_int32["seed"] = 7
    write_records(run / "events.out.events.summary.100.0.vm_lineage", [lineage.SerializeToString()])
    return run


def test_scalars_of_a_directory_follow_file_order(tmp_path):
    run = make_run(tmp_path)
    assert scalars(run) == {
        "loss": [(1, 1.0), (2, 0.5), (3, 0.25)],
        "acc": [(2, 0.25), (3, 0.5)],
    }
    assert list(scalars(run)) == ["loss", "acc"]
    assert scalars(run / "events.out.events.summary.200.0.vm_MS") == {
        "loss": [(3, 0.25)],
        "acc": [(3, 0.5)],
    }


def test_scalars_of_a_missing_path_raise_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing"):
        scalars(tmp_path / "missing")


def test_load_dir_returns_the_decoded_events_of_every_summary_file_in_order(tmp_path):
    run = make_run(tmp_path)
    events = load_dir(run)
    assert [(e.what, e.step) for e in events] == [
        ("version", None),
        ("summary", 1),
        ("summary", 2),
        ("version", None),
        ("summary", 3),
    ]
    assert [v.tag for v in events[2].values] == ["loss", "acc"]


def test_load_lineage_dir_returns_the_lineage_records(tmp_path):
    records = load_lineage_dir(make_run(tmp_path))
    assert [(r.what, r.data) for r in records] == [
        ("user_defined_info", {"map_int32": {"seed": 7}})
    ]


def test_a_torn_file_in_a_directory_still_yields_its_complete_events(tmp_path, caplog):
    run = make_run(tmp_path)
    newest = run / "events.out.events.summary.200.0.vm_MS"
    os.truncate(newest, newest.stat().st_size - 3)
    with caplog.at_level(logging.WARNING, logger=READER_LOGGER):
        assert scalars(run) == {"loss": [(1, 1.0), (2, 0.5)], "acc": [(2, 0.25)]}
    assert "is incomplete" in caplog.records[0].getMessage()


@pytest.mark.parametrize("where", ["map key", "map value", "optional string", "version"])
def test_a_lineage_string_that_is_not_utf8_is_a_damaged_record(tmp_path, where):
    event = lineage_pb2.LineageEvent(wall_time=1.0)
    if where == "map key":
        event.user_defined_info.user_info.add().map_str["@@@@"] = "v"
    elif where == "map value":
        event.user_defined_info.user_info.add().map_str["k"] = "@@@@"
    elif where == "optional string":
        event.train_lineage.algorithm.network = "@@@@"
    else:
        event.version = "@@@@"
    payload = event.SerializeToString().replace(b"@@@@", b"\xff\xfe\xfd\xfc")
    run = tmp_path / "run"
    run.mkdir()
    write_records(run / "events.out.events.summary.100.0.vm_lineage", [payload])
    with pytest.raises(WriterValueError, match="not UTF-8"):
        load_lineage_dir(run)


def test_a_summary_tag_that_is_not_utf8_decodes_to_escaped_text(tmp_path):
    event = scalar_event(1, loss=0.5)
    event.summary.value.add(tag="@@", scalar_value=1.5)
    payload = event.SerializeToString().replace(b"@@", b"a\xff")
    write_records(tmp_path / SUMMARY_NAME, [payload])
    [decoded] = load_dir(tmp_path)
    assert [(v.tag, v.value) for v in decoded.values] == [("loss", 0.5), ("a\\xff", 1.5)]
    assert scalars(tmp_path) == {"loss": [(1, 0.5)], "a\\xff": [(1, 1.5)]}
