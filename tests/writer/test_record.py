"""SummaryRecord's API as a user sees it: what ends up in which file, in what order.

Every test writes with a real SummaryRecord and reads the files back with strict
framing (both CRCs checked) and the protobuf classes of docs/file-format.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time

import numpy as np
import pytest

from rankscribe.writer import WriterError
from rankscribe.writer.errors import (
    StepTooLargeError,
    WriterFailedError,
    WriterStateError,
    WriterValueError,
)
from rankscribe.writer.pb import anf_ir_pb2, lineage_pb2, summary_pb2
from rankscribe.writer.reader import decode_value

F32 = np.float32


def model_proto(name: str = "net") -> anf_ir_pb2.ModelProto:
    model = anf_ir_pb2.ModelProto(ir_version=1, domain="rankscribe", model_version=2)
    model.graph.name = name
    model.graph.node.add(name="conv1", op_type="Conv2D", input=[])
    model.graph.node.add(name="relu1", op_type="ReLU")
    return model


def decoded_tensor(value: summary_pb2.Summary.Value) -> np.ndarray:
    """A tensor value read back as the reader decodes it."""
    decoded = decode_value(value).value
    assert isinstance(decoded, np.ndarray)
    return decoded


class Network:
    """Anything with graph_proto() is a network for SummaryRecord."""

    def __init__(self, graph: object) -> None:
        self.graph = graph
        self.calls = 0

    def graph_proto(self) -> object:
        self.calls += 1
        return self.graph


def train_lineage() -> lineage_pb2.TrainLineage:
    message = lineage_pb2.TrainLineage()
    message.hyper_parameters.optimizer = "Momentum"
    message.hyper_parameters.learning_rate = 0.125
    message.hyper_parameters.batch_size = 32
    message.algorithm.network = "ResNet"
    message.model.path = "/tmp/model.ckpt"
    message.model.size = 1 << 40
    return message


def eval_lineage() -> lineage_pb2.EvaluationLineage:
    message = lineage_pb2.EvaluationLineage(metric='{"accuracy": 0.875}')
    message.valid_dataset.valid_dataset_path = "/data/val"
    message.valid_dataset.valid_dataset_size = 5000
    return message


def dataset_graph() -> lineage_pb2.DatasetGraph:
    message = lineage_pb2.DatasetGraph()
    message.parameter.mapStr["dataset_dir"] = "/data/train"
    message.parameter.mapInt["num_parallel_workers"] = 4
    child = message.children.add()
    child.operations.add().size.extend([32, 32])
    return message


def user_info() -> lineage_pb2.UserDefinedInfo:
    message = lineage_pb2.UserDefinedInfo()
    message.map_str["owner"] = "team-a"
    message.map_int32["seed"] = 7
    message.map_double["dropout"] = 0.5
    return message


# ------------------------------------------------------------------ scalars


def test_scalars_round_trip_as_float32_one_event_per_record(make_record, log_dir, disk):
    record = make_record()
    for step in (1, 2, 3):
        record.add_value("scalar", "loss", 0.1 * step)
        record.add_value("scalar", "lr", 1 / 3)
        record.add_value("scalar", "epoch", step)
        assert record.record(step) is True
    record.close()

    [path] = disk.summary_files(log_dir)
    events = disk.read_events(path)
    assert events[0].WhichOneof("what") == "version"
    assert events[0].version == "MindSpore.Event:1"
    assert events[0].wall_time > 0
    steps = events[1:]
    assert [event.step for event in steps] == [1, 2, 3]
    for step, event in zip((1, 2, 3), steps, strict=True):
        assert event.WhichOneof("what") == "summary"
        # Stored as float32: exactly the float32 rounding of what was added.
        assert disk.scalars_of(event) == {
            "loss": float(F32(0.1 * step)),
            "lr": float(F32(1 / 3)),
            "epoch": float(step),
        }
        assert disk.scalars_of(event)["lr"] != 1 / 3  # float32, not float64
        assert abs(event.wall_time - time.time()) < 60


def test_version_event_is_written_once_per_summary_file_first(make_record, log_dir, disk):
    record = make_record()
    for step in range(5):
        record.add_value("scalar", "x", step)
        record.record(step)
    record.close()
    events = disk.all_summary_events(log_dir)
    kinds = [event.WhichOneof("what") for event in events]
    assert kinds == ["version"] + ["summary"] * 5
    # The version record is 28 bytes, as the original writes it.
    [path] = disk.summary_files(log_dir)
    assert len(disk.raw_payloads(path)[0]) == 28


def test_scalar_values_of_many_python_and_numpy_kinds(make_record, log_dir, disk):
    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return np.array([2.5], dtype=dtype or np.float64)

    class FakeTorchTensor:
        """Like a torch tensor that needs grad: no __array__ until detached and on the CPU."""

        def __init__(self, data):
            self.data = np.asarray(data)
            self.detached = self.on_cpu = False

        def detach(self):
            clone = FakeTorchTensor(self.data)
            clone.detached = True
            return clone

        def cpu(self):
            clone = FakeTorchTensor(self.data)
            clone.detached, clone.on_cpu = self.detached, True
            return clone

        def __array__(self, dtype=None, copy=None):
            if not (self.detached and self.on_cpu):
                raise RuntimeError("Can't call numpy() on Tensor that requires grad.")
            return self.data if dtype is None else self.data.astype(dtype)

    values = {
        "float": 1.5,
        "int": 7,
        "bool_true": True,
        "bool_false": False,
        "np_float16": np.float16(0.1),
        "np_float64": np.float64(1e-3),
        "np_int64": np.int64(-12),
        "np_uint8": np.uint8(255),
        "np_bool": np.bool_(True),
        "zero_d": np.array(3.25),
        "one_element": np.array([[4.5]], dtype=np.float32),
        "array_like": ArrayLike(),
        "torch_like": FakeTorchTensor([[-8.0]]),
        "big_float": 1e39,
        "small_float": -1e39,
        "nan": float("nan"),
    }
    record = make_record()
    for name, value in values.items():
        record.add_value("scalar", name, value)
    record.record(0)
    record.close()
    [event] = disk.summary_steps(log_dir)
    got = disk.scalars_of(event)
    assert list(got) == list(values)
    assert got["float"] == 1.5
    assert got["int"] == 7.0
    assert got["bool_true"] == 1.0
    assert got["bool_false"] == 0.0
    assert got["np_float16"] == float(F32(np.float16(0.1)))
    assert got["np_float64"] == float(F32(1e-3))
    assert got["np_int64"] == -12.0
    assert got["np_uint8"] == 255.0
    assert got["np_bool"] == 1.0
    assert got["zero_d"] == 3.25
    assert got["one_element"] == 4.5
    assert got["array_like"] == 2.5
    assert got["torch_like"] == -8.0
    # float32 has no room for 1e39: it overflows to infinity, as numpy rounds it.
    assert got["big_float"] == float("inf")
    assert got["small_float"] == float("-inf")
    assert np.isnan(got["nan"])


def test_value_is_copied_when_added(make_record, log_dir, disk):
    weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    loss = np.array([1.0])
    record = make_record()
    record.add_value("tensor", "w", weights)
    record.add_value("scalar", "loss", loss)
    weights[:] = -1  # training goes on and updates the buffers in place
    loss[0] = -1
    record.record(1)
    record.close()
    [event] = disk.summary_steps(log_dir)
    expected = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(decoded_tensor(disk.value_of(event, "w")), expected)
    assert disk.scalars_of(event) == {"loss": 1.0}


# ------------------------------------------------------------- event layout


def _image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((1, 3, 2, 2), dtype=np.float32)


@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        (  # docs/file-format.md [verified]: image, scalar, histograms
            [
                ("image", "i1"),
                ("scalar", "s1"),
                ("histogram", "h1"),
                ("scalar", "s2"),
                ("image", "i2"),
                ("tensor", "t1"),
                ("histogram", "h2"),
            ],
            [
                ("image", "i1"),
                ("image", "i2"),
                ("scalar_value", "s1"),
                ("scalar_value", "s2"),
                ("histogram", "h1"),
                ("histogram", "h2"),
                ("tensor", "t1"),
            ],
        ),
        (
            [("scalar", "s1"), ("tensor", "t1"), ("scalar", "s2"), ("tensor", "t2")],
            [("scalar_value", "s1"), ("scalar_value", "s2"), ("tensor", "t1"), ("tensor", "t2")],
        ),
        (
            [
                ("tensor", "t1"),
                ("histogram", "h1"),
                ("scalar", "s1"),
                ("tensor", "t2"),
                ("scalar", "s2"),
            ],
            [
                ("tensor", "t1"),
                ("tensor", "t2"),
                ("histogram", "h1"),
                ("scalar_value", "s1"),
                ("scalar_value", "s2"),
            ],
        ),
    ],
)
def test_values_are_grouped_by_plugin_in_first_insertion_order(
    make_record, log_dir, disk, adds, expected
):
    values = {
        "scalar": 1.0,
        "image": _image(),
        "histogram": np.arange(10.0),
        "tensor": np.arange(3, dtype=np.int16),
    }
    record = make_record()
    for plugin, tag in adds:
        record.add_value(plugin, tag, values[plugin])
    record.record(4)
    record.close()
    [event] = disk.summary_steps(log_dir)
    assert event.step == 4
    assert disk.tags_of(event) == expected


@pytest.mark.parametrize(
    ("plugin", "first", "second"),
    [
        ("scalar", 1.0, 2.0),
        ("tensor", np.array([1, 2], dtype=np.int64), np.array([3, 4, 5], dtype=np.int64)),
    ],
)
def test_duplicate_tag_warns_and_keeps_only_the_newest(
    make_record, log_dir, disk, caplog, plugin, first, second
):
    record = make_record()
    record.add_value(plugin, "x", first)
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        record.add_value(plugin, "x", second)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "only the newest one will be recorded" in warnings[0].getMessage()
    assert "x" in warnings[0].getMessage()
    record.record(1)
    record.close()
    [event] = disk.summary_steps(log_dir)
    [value] = event.summary.value
    assert value.tag == "x"
    if plugin == "scalar":
        assert value.scalar_value == 2.0
    else:
        np.testing.assert_array_equal(decoded_tensor(value), second)


def test_same_tag_in_two_plugins_is_not_a_duplicate(make_record, log_dir, disk, caplog):
    record = make_record()
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        record.add_value("scalar", "w", 1.0)
        record.add_value("tensor", "w", np.ones(2))
        record.add_value("histogram", "w", np.ones(2))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    record.record(1)
    record.close()
    [event] = disk.summary_steps(log_dir)
    assert disk.tags_of(event) == [("scalar_value", "w"), ("tensor", "w"), ("histogram", "w")]


def test_duplicate_tags_in_different_steps_are_not_duplicates(make_record, log_dir, disk, caplog):
    record = make_record()
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        for step in range(3):
            record.add_value("scalar", "x", step)
            record.record(step)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    record.close()
    assert [disk.scalars_of(e) for e in disk.summary_steps(log_dir)] == [
        {"x": 0.0},
        {"x": 1.0},
        {"x": 2.0},
    ]


def test_plugin_filter_drops_whole_plugins(make_record, log_dir, disk):
    record = make_record()
    record.add_value("scalar", "loss", 1.0)
    record.add_value("tensor", "w", np.ones(3))
    record.add_value("histogram", "w", np.ones(3))
    record.add_value("train_lineage", "train", train_lineage())
    kept = []

    def keep(plugin):
        kept.append(plugin)
        return plugin not in ("tensor", "train_lineage")

    assert record.record(1, plugin_filter=keep) is True
    assert {"scalar", "tensor", "histogram", "train_lineage"} <= set(kept)
    # What was filtered out is discarded, not carried over to the next step.
    record.add_value("scalar", "loss", 2.0)
    record.record(2)
    record.close()
    events = disk.summary_steps(log_dir)
    assert [disk.tags_of(e) for e in events] == [
        [("scalar_value", "loss"), ("histogram", "w")],
        [("scalar_value", "loss")],
    ]
    assert disk.lineage_files(log_dir) == []


def test_plugin_filter_rejecting_everything_writes_nothing(make_record, log_dir):
    record = make_record()
    record.add_value("scalar", "loss", 1.0)
    assert record.record(1, plugin_filter=lambda plugin: False) is True
    record.close()
    assert os.listdir(log_dir) == []


def test_record_with_nothing_pending_writes_nothing(make_record, log_dir, disk):
    record = make_record()
    assert record.record(1) is True
    assert record.flush() is True
    assert os.listdir(log_dir) == []
    assert record.files == []
    record.add_value("scalar", "x", 1.0)
    record.record(2)
    assert record.record(3) is True  # nothing new since step 2
    record.close()
    assert [e.step for e in disk.summary_steps(log_dir)] == [2]


def test_eval_mode_still_records_added_values(make_record, log_dir, disk):
    record = make_record()
    record.set_mode("eval")
    record.add_value("scalar", "accuracy", 0.75)
    record.record(10)
    record.set_mode("train")
    record.add_value("scalar", "loss", 0.5)
    record.record(11)
    record.close()
    assert [disk.scalars_of(e) for e in disk.summary_steps(log_dir)] == [
        {"accuracy": 0.75},
        {"loss": 0.5},
    ]


# ------------------------------------------------------------ other plugins


@pytest.mark.parametrize(
    "array",
    [
        np.array([2**40 + 1, -(2**62), 2**63 - 1], dtype=np.int64),
        np.array([[0.1, 1e300], [-2.5e-310, np.pi]], dtype=np.float64),
        np.array([0.1, 65504, -0.0], dtype=np.float16),
        np.array([[True, False, True]]),
        np.array([0, 2**64 - 1], dtype=np.uint64),
        np.array([2**31 - 1, -(2**31)], dtype=np.int32),
        np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
        np.zeros((0, 3), dtype=np.float32),
    ],
    ids=lambda a: f"{a.dtype}{list(a.shape)}",
)
def test_tensor_round_trips_with_exact_dtype_and_values(make_record, log_dir, disk, array):
    record = make_record()
    record.add_value("tensor", "t", array)
    record.record(1)
    record.close()
    [event] = disk.summary_steps(log_dir)
    decoded = decoded_tensor(disk.value_of(event, "t"))
    assert decoded.dtype == array.dtype
    assert decoded.shape == array.shape
    np.testing.assert_array_equal(decoded, array)
    assert decoded.tobytes() == array.tobytes()  # -0.0 and NaN bits included


def test_histogram_counts_every_element(make_record, log_dir, disk):
    data = np.concatenate([np.linspace(-1, 1, 1000), [np.nan, np.inf, np.inf, -np.inf]])
    record = make_record()
    record.add_value("histogram", "h", data)
    record.record(1)
    record.close()
    [event] = disk.summary_steps(log_dir)
    histogram = disk.value_of(event, "h").histogram
    assert histogram.count == 1004
    assert (histogram.nan_count, histogram.pos_inf_count, histogram.neg_inf_count) == (1, 2, 1)
    assert sum(bucket.count for bucket in histogram.buckets) == 1000
    assert 0 < len(histogram.buckets) <= 90
    assert (histogram.min, histogram.max) == (-1.0, 1.0)


def test_image_is_a_png_of_the_tiled_canvas(make_record, log_dir, disk):
    record = make_record()
    record.add_value("image", "batch", np.random.default_rng(1).random((2, 3, 4, 5)))
    record.add_value("image", "gray", np.ones((9, 1, 2, 3), dtype=np.float32))
    record.record(1)
    record.close()
    [event] = disk.summary_steps(log_dir)
    batch = disk.value_of(event, "batch").image
    assert (batch.height, batch.width, batch.colorspace) == (4, 10, 3)  # as in docs/file-format.md
    assert batch.encoded_image.startswith(b"\x89PNG\r\n\x1a\n")
    gray = disk.value_of(event, "gray").image
    assert (gray.height, gray.width) == (2 * 2, 8 * 3)  # 9 images: 8 per row, 2 rows


def test_landscape_value_round_trips(make_record, log_dir, disk):
    landscape = summary_pb2.LossLandscape()
    landscape.metadata.decomposition = "PCA"
    landscape.metadata.unit = "step"
    landscape.metadata.step_per_epoch = 10
    landscape.loss_path.intervals.extend([1, 2, 3])
    record = make_record()
    record.add_value("landscape", "landscape", landscape)
    record.record(3)
    record.close()
    [event] = disk.summary_steps(log_dir)
    assert disk.value_of(event, "landscape").loss_landscape == landscape


# ------------------------------------------------------------------ lineage


def test_lineage_values_become_one_lineage_event_each_in_add_order(make_record, log_dir, disk):
    messages = [
        ("custom_lineage_data", "user_defined_info", user_info()),
        ("train_lineage", "train_lineage", train_lineage()),
        ("dataset_graph", "dataset_graph", dataset_graph()),
        ("eval_lineage", "evaluation_lineage", eval_lineage()),
    ]
    record = make_record()
    record.add_value("scalar", "loss", 1.0)
    for plugin, _, message in messages:
        record.add_value(plugin, plugin, message)
    record.record(7)
    record.close()

    [path] = disk.lineage_files(log_dir)
    events = disk.read_lineage(path)
    assert [e.WhichOneof("what") for e in events] == [field for _, field, _ in messages]
    for event, (_, field, message) in zip(events, messages, strict=True):
        assert getattr(event, field) == message
        assert not event.HasField("step")  # the original never sets it
        assert not event.HasField("version")  # no version record in lineage files
        assert abs(event.wall_time - time.time()) < 60
    # The summary values went to the _MS file, not there.
    [event] = disk.summary_steps(log_dir)
    assert disk.scalars_of(event) == {"loss": 1.0}


def test_lineage_only_run_has_no_summary_file(make_record, log_dir, disk):
    record = make_record()
    record.add_value("eval_lineage", "eval", eval_lineage())
    record.record(0)
    record.close()
    assert disk.summary_files(log_dir) == []
    [path] = disk.lineage_files(log_dir)
    assert record.files == [str(path)]


def test_summary_only_run_has_no_lineage_file(make_record, log_dir, disk):
    record = make_record()
    record.add_value("scalar", "x", 1.0)
    record.record(0)
    record.close()
    assert disk.lineage_files(log_dir) == []
    [path] = disk.summary_files(log_dir)
    assert record.files == [str(path)]


# -------------------------------------------------------------------- files


def test_file_names_share_one_timestamp(make_record, log_dir, disk):
    before = int(time.time())
    record = make_record()
    after = int(time.time())
    record.add_value("scalar", "x", 1.0)
    record.add_value("train_lineage", "t", train_lineage())
    record.record(1)
    record.close()
    names = sorted(os.listdir(log_dir))
    [summary, lineage] = names
    match = re.fullmatch(
        rf"events\.out\.events\.summary\.(\d+)\.0\.{re.escape(disk.HOST)}_MS", summary
    )
    assert match, summary
    timestamp = int(match.group(1))
    assert before <= timestamp <= after + 1
    assert lineage == f"events.out.events.summary.{timestamp}.0.{disk.HOST}_lineage"


@pytest.mark.parametrize("rank", [3, 0, "merged"])
def test_rank_appears_in_file_names(make_record, log_dir, disk, rank):
    record = make_record(rank=rank)
    record.add_value("scalar", "x", 1.0)
    record.add_value("train_lineage", "t", train_lineage())
    record.record(1)
    record.close()
    for path in (*disk.summary_files(log_dir), *disk.lineage_files(log_dir)):
        assert disk.NAME.match(path.name).group("rank") == str(rank)
    assert len(os.listdir(log_dir)) == 2


def test_prefix_and_suffix_shape_the_names(make_record, log_dir, disk):
    record = make_record(file_prefix="run_1.a", file_suffix="_train")
    record.add_value("scalar", "x", 1.0)
    record.add_value("train_lineage", "t", train_lineage())
    record.record(1)
    record.close()
    timestamp = disk.timestamp_of(record.files[0])
    assert sorted(os.listdir(log_dir)) == [
        f"run_1.a.out.events.summary.{timestamp}.0.{disk.HOST}_lineage",
        f"run_1.a.out.events.summary.{timestamp}.0.{disk.HOST}_train",
    ]
    assert [e.step for e in disk.read_events(log_dir / os.path.basename(record.log_dir))][1:] == [1]


def test_file_modes_0600_while_open_0400_after_close(make_record, log_dir, disk):
    record = make_record()
    record.add_value("scalar", "x", 1.0)
    record.add_value("train_lineage", "t", train_lineage())
    record.record(1)
    assert record.flush() is True
    [summary] = disk.summary_files(log_dir)
    [lineage] = disk.lineage_files(log_dir)
    assert disk.mode_of(summary) == 0o600
    assert disk.mode_of(lineage) == 0o600
    record.close()
    assert disk.mode_of(summary) == 0o400
    assert disk.mode_of(lineage) == 0o400


def test_log_dir_is_created_0700(make_record, tmp_path):
    directory = tmp_path / "a" / "b"
    make_record(directory)
    assert directory.is_dir()
    assert (os.stat(directory).st_mode & 0o777) == 0o700


def test_existing_log_dir_is_used(make_record, tmp_path, disk):
    tmp_path.joinpath("existing").mkdir()
    record = make_record(tmp_path / "existing")
    record.add_value("scalar", "x", 1.0)
    record.record(1)
    record.close()
    assert len(disk.summary_files(tmp_path / "existing")) == 1


def test_records_created_in_the_same_second_never_collide(make_record, log_dir, disk, monkeypatch):
    # Every record is made in the same second (the clock names a file by its creation time).
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.25)
    records = [make_record() for _ in range(4)]
    for index, record in enumerate(records):
        record.add_value("scalar", f"r{index}", float(index))
        record.add_value(
            "custom_lineage_data", "info", lineage_pb2.UserDefinedInfo(map_int32={"index": index})
        )
        record.record(index)
    for record in records:
        record.close()

    summaries = disk.summary_files(log_dir)
    lineages = disk.lineage_files(log_dir)
    assert len(summaries) == len(lineages) == 4
    assert len(set(os.listdir(log_dir))) == 8
    # Every file holds its own record's data only, whole.
    assert {tuple(disk.scalars_of(e)) for p in summaries for e in disk.read_events(p)[1:]} == {
        ("r0",),
        ("r1",),
        ("r2",),
        ("r3",),
    }
    for index, record in enumerate(records):
        [summary, lineage] = record.files
        assert disk.scalars_of(disk.read_events(summary)[1]) == {f"r{index}": float(index)}
        [event] = disk.read_lineage(lineage)
        assert event.user_defined_info.map_int32["index"] == index
        assert disk.timestamp_of(summary) == disk.timestamp_of(lineage)
        assert record.log_dir == summary
    assert len({record.log_dir for record in records}) == 4


def test_log_dir_property_is_the_summary_file_path(make_record, log_dir, disk):
    record = make_record()
    assert record.directory == str(log_dir)
    assert os.path.dirname(record.log_dir) == str(log_dir)
    assert record.log_dir.endswith(f".0.{disk.HOST}_MS")
    assert not os.path.exists(record.log_dir)  # lazily created
    record.add_value("scalar", "x", 1.0)
    record.record(1)
    record.flush()
    assert os.path.isfile(record.log_dir)
    assert record.files == [record.log_dir]


def test_relative_log_dir_is_made_absolute(make_record, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    record = make_record("relative")
    assert record.directory == str(tmp_path / "relative")
    assert os.path.isabs(record.log_dir)


def test_files_lists_every_created_file(make_record, log_dir, disk):
    record = make_record()
    assert record.files == []
    record.add_value("scalar", "x", 1.0)
    record.record(1)
    record.add_value("train_lineage", "t", train_lineage())
    record.record(2)
    record.close()
    assert sorted(record.files) == sorted(str(log_dir / name) for name in os.listdir(log_dir))
    assert len(record.files) == 2


def test_files_are_listed_in_creation_order(make_record, log_dir, disk):
    # The docstring of SummaryRecord.files: "in creation order".
    record = make_record()
    record.add_value("train_lineage", "t", train_lineage())
    record.record(1)
    record.flush()
    record.add_value("scalar", "x", 1.0)
    record.record(2)
    record.close()
    [summary] = disk.summary_files(log_dir)
    [lineage] = disk.lineage_files(log_dir)
    assert record.files == [str(lineage), str(summary)]


def test_a_small_pending_bound_still_writes_everything(make_record, log_dir, disk):
    # Each step is larger than the bound: it goes through alone, in order.
    record = make_record(max_pending_bytes=1000)
    for step in range(20):
        record.add_value("tensor", "w", np.full(25_000, step, dtype=np.float32))
        record.add_value("scalar", "loss", float(step))
        record.record(step)
    record.close()
    events = disk.summary_steps(log_dir)
    assert [e.step for e in events] == list(range(20))
    for event in events:
        assert decoded_tensor(disk.value_of(event, "w"))[0] == event.step


def test_tensor_values_from_array_likes(make_record, log_dir, disk):
    class FakeTorchTensor:
        def __init__(self, data):
            self.data = np.asarray(data)

        def detach(self):
            return self

        def cpu(self):
            return self

        def __array__(self, dtype=None, copy=None):
            return self.data

    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return np.array([[1, 2], [3, 4]], dtype=np.int16)

    record = make_record()
    record.add_value("tensor", "torch", FakeTorchTensor(np.arange(4, dtype=np.int64)))
    record.add_value("tensor", "array_like", ArrayLike())
    record.add_value("tensor", "list", [1.5, 2.5])
    record.add_value("histogram", "torch_hist", FakeTorchTensor(np.arange(10.0)))
    record.record(1)
    record.close()
    [event] = disk.summary_steps(log_dir)
    torch_value = decoded_tensor(disk.value_of(event, "torch"))
    assert torch_value.dtype == np.int64
    np.testing.assert_array_equal(torch_value, np.arange(4))
    np.testing.assert_array_equal(
        decoded_tensor(disk.value_of(event, "array_like")),
        np.array([[1, 2], [3, 4]], dtype=np.int16),
    )
    np.testing.assert_array_equal(decoded_tensor(disk.value_of(event, "list")), [1.5, 2.5])
    assert disk.value_of(event, "torch_hist").histogram.count == 10


# ------------------------------------------------------------ flush / close


def test_flush_returns_when_every_recorded_step_is_on_disk(make_record, log_dir, disk):
    record = make_record()
    for step in range(500):
        record.add_value("scalar", "loss", step)
        if step % 50 == 0:
            record.add_value("tensor", "w", np.full(5000, step, dtype=np.float32))
        record.record(step)
    assert record.flush() is True
    # Read while the writer is still open: nothing may be missing.
    [path] = disk.summary_files(log_dir)
    events = disk.read_events(path)[1:]
    assert [event.step for event in events] == list(range(500))
    assert [disk.scalars_of(e)["loss"] for e in events] == [float(s) for s in range(500)]
    tensor_steps = [e.step for e in events if ("tensor", "w") in disk.tags_of(e)]
    assert tensor_steps == list(range(0, 500, 50))
    assert disk.mode_of(path) == 0o600  # still open


def test_flush_again_after_more_steps(make_record, log_dir, disk):
    record = make_record()
    for step in range(3):
        record.add_value("scalar", "x", step)
        record.record(step)
        assert record.flush() is True
        assert [e.step for e in disk.summary_steps(log_dir)] == list(range(step + 1))


def test_close_is_idempotent(make_record, log_dir, disk):
    record = make_record()
    record.add_value("scalar", "x", 1.0)
    record.record(1)
    record.close()
    record.close()
    [path] = disk.summary_files(log_dir)
    assert disk.mode_of(path) == 0o400
    assert [e.step for e in disk.summary_steps(log_dir)] == [1]


def test_closed_record_refuses_new_values(make_record, log_dir, disk, caplog):
    record = make_record()
    record.add_value("scalar", "x", 1.0)
    record.record(1)
    record.close()
    for plugin, value in [
        ("scalar", 2.0),
        ("tensor", np.ones(2)),
        ("train_lineage", train_lineage()),
    ]:
        with pytest.raises(WriterStateError, match="closed") as raised:
            record.add_value(plugin, "x", value)
        assert isinstance(raised.value, RuntimeError)
    with caplog.at_level(logging.ERROR, logger="rankscribe"):
        assert record.record(2) is False
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "closed" in error.getMessage()
    assert "2" in error.getMessage()
    assert record.flush() is True
    assert [e.step for e in disk.summary_steps(log_dir)] == [1]


def test_context_manager_closes(make_record, log_dir, disk):
    with make_record() as record:
        record.add_value("scalar", "x", 1.0)
        record.record(1)
    [path] = disk.summary_files(log_dir)
    assert disk.mode_of(path) == 0o400
    with pytest.raises(WriterStateError):
        record.add_value("scalar", "x", 1.0)


def test_context_manager_closes_when_the_body_raises(make_record, log_dir, disk):
    with pytest.raises(KeyError), make_record() as record:
        record.add_value("scalar", "x", 1.0)
        record.record(1)
        raise KeyError("training failed")
    [path] = disk.summary_files(log_dir)
    assert disk.mode_of(path) == 0o400
    assert [e.step for e in disk.summary_steps(log_dir)] == [1]


def test_entering_a_closed_record_raises_value_error(make_record):
    # docs/file-format.md: the original raises ValueError; code written for it catches that.
    record = make_record()
    record.close()
    with pytest.raises(ValueError, match="closed") as raised, record:
        pass
    assert isinstance(raised.value, WriterError)


# -------------------------------------------------------------------- graph


def test_network_graph_is_written_once_before_the_first_summary(make_record, log_dir, disk):
    model = model_proto()
    network = Network(model)
    record = make_record(network=network)
    for step in (1, 2, 3):
        record.add_value("scalar", "loss", float(step))
        record.record(step)
    record.close()
    events = disk.all_summary_events(log_dir)
    assert [e.WhichOneof("what") for e in events] == [
        "version",
        "graph_def",
        "summary",
        "summary",
        "summary",
    ]
    assert events[1].graph_def == model.graph
    assert [e.step for e in events[2:]] == [1, 2, 3]
    assert network.calls == 1


@pytest.mark.parametrize("form", ["model", "graph", "bytes"])
def test_network_graph_proto_forms(make_record, log_dir, disk, form):
    model = model_proto(form)
    graph = {"model": model, "graph": model.graph, "bytes": model.SerializeToString()}[form]
    record = make_record(network=Network(graph))
    assert record.record(0) is True  # nothing else pending: the graph alone
    record.close()
    events = disk.all_summary_events(log_dir)
    assert [e.WhichOneof("what") for e in events] == ["version", "graph_def"]
    assert events[1].graph_def == model.graph


def test_train_network_given_to_record_supplies_the_graph(make_record, log_dir, disk):
    model = model_proto("train")
    record = make_record()
    record.add_value("scalar", "loss", 1.0)
    record.record(1, train_network=Network(model))
    record.add_value("scalar", "loss", 2.0)
    record.record(2, train_network=Network(model))
    record.close()
    events = disk.all_summary_events(log_dir)
    assert [e.WhichOneof("what") for e in events] == ["version", "graph_def", "summary", "summary"]
    assert events[1].graph_def == model.graph


def test_graph_added_as_model_proto_bytes(make_record, log_dir, disk):
    model = model_proto("added")
    record = make_record()
    record.add_value("graph", "graph", model.SerializeToString())
    record.add_value("scalar", "loss", 1.0)
    record.record(5)
    record.close()
    events = disk.all_summary_events(log_dir)
    assert [e.WhichOneof("what") for e in events] == ["version", "graph_def", "summary"]
    assert events[1].graph_def == model.graph
    assert events[1].graph_def.name == "added"


# -------------------------------------------------------------- TensorBoard


def test_tensorboard_target_is_readable_as_tf_events(make_record, log_dir, disk):
    record = make_record(formats=("mindinsight", "tensorboard"))
    data = np.concatenate([np.linspace(0, 1, 101), [np.nan, np.inf]])
    for step in (1, 2):
        record.add_value("scalar", "loss", 1.0 / step)
        record.add_value("histogram", "weights", data)
        record.add_value("image", "input", np.random.default_rng(step).random((2, 3, 4, 5)))
        record.add_value("text", "note", f"step {step} ✓")
        record.record(step)
    record.close()

    [path] = disk.tensorboard_files(log_dir)
    assert path.name.startswith("events.out.tfevents.")
    assert disk.mode_of(path) == 0o400
    events = disk.read_tensorboard(path)
    assert events[0].file_version == "brain.Event:2"
    assert [e.step for e in events[1:]] == [1, 2]
    for step, event in zip((1, 2), events[1:], strict=True):
        values = {value.tag: value for value in event.summary.value}
        assert set(values) == {"loss", "weights", "input", "note"}
        assert values["loss"].simple_value == float(F32(1.0 / step))
        histogram = values["weights"].histo
        assert sum(histogram.bucket) == 101  # the finite values
        assert len(histogram.bucket) == len(histogram.bucket_limit) > 0
        assert (histogram.min, histogram.max) == (0.0, 1.0)
        image = values["input"].image
        assert (image.height, image.width) == (4, 10)
        assert image.encoded_image_string.startswith(b"\x89PNG")
        note = values["note"]
        assert note.metadata.plugin_data.plugin_name == "text"
        assert note.tensor.string_val == [f"step {step} ✓".encode()]
    # The MindInsight file is written too, with the same steps.
    assert [e.step for e in disk.summary_steps(log_dir)] == [1, 2]


def test_tensorboard_only_writes_no_summary_file(make_record, log_dir, disk):
    record = make_record(formats=("tensorboard",))
    record.add_value("scalar", "loss", 0.5)
    record.record(3)
    record.close()
    assert disk.summary_files(log_dir) == []
    [path] = disk.tensorboard_files(log_dir)
    events = disk.read_tensorboard(path)
    assert events[1].step == 3
    assert events[1].summary.value[0].simple_value == 0.5


# -------------------------------------------------------- background failure


def test_background_failure_surfaces_on_the_next_call(make_record, log_dir, broken_appends, disk):
    broken_appends.fail_with(RuntimeError("disk controller on fire"))
    record = make_record()
    record.add_value("scalar", "x", 1.0)
    record.record(1)
    with pytest.raises(WriterFailedError) as raised:
        disk.run_with_timeout(record.flush, timeout=10)
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert "disk controller on fire" in str(raised.value.__cause__)
    assert "disk controller on fire" in str(raised.value)
    # The failure stays: every later call says so instead of hanging or losing data silently.
    record.add_value("scalar", "x", 2.0)
    with pytest.raises(WriterFailedError):
        disk.run_with_timeout(lambda: record.record(2), timeout=10)
    with pytest.raises(WriterFailedError):
        disk.run_with_timeout(record.flush, timeout=10)
    with contextlib.suppress(WriterFailedError):  # close may report the failure once more
        disk.run_with_timeout(record.close, timeout=10)
    disk.run_with_timeout(record.close, timeout=10)  # the second close is quiet


def test_background_failure_of_a_heavy_step_surfaces_on_record(make_record, broken_appends, disk):
    broken_appends.fail_with(RuntimeError("broken"))
    record = make_record()

    def train():
        for step in range(10_000):
            record.add_value("tensor", "w", np.ones(10_000, dtype=np.float32))
            record.record(step)
            time.sleep(0.001)

    with pytest.raises(WriterFailedError) as raised:
        disk.run_with_timeout(train, timeout=20)
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert len(broken_appends.calls) == 1  # the writer stopped at the first failure


# -------------------------------------------------------- step size limit


@pytest.mark.slow
@pytest.mark.parametrize("raise_exception", [True, False])
def test_step_over_2gib_is_refused_and_neighbours_are_recorded(
    make_record, log_dir, disk, caplog, raise_exception
):
    record = make_record(raise_exception=raise_exception)
    # One tensor alone over the limit: refused when added, before any copy is made.
    huge = np.zeros(540_000_000, dtype=np.uint8)
    with pytest.raises(WriterValueError) as raised:
        record.add_value("tensor", "huge", huge)
    assert isinstance(raised.value, ValueError)
    message = str(raised.value)
    assert "huge" in message
    assert "2,147,483,647" in message
    assert re.search(r"\d{1,3}(,\d{3}){3}", message.replace("2,147,483,647", ""))
    del huge

    record.add_value("scalar", "loss", 1.0)
    record.add_value("tensor", "small", np.arange(4, dtype=np.int64))
    record.record(4)

    # Two tensors that fit alone, but not together in one step.
    for name in ("a", "b"):
        record.add_value("tensor", name, np.zeros(300_000_000, dtype=np.uint8))
    record.add_value("scalar", "loss", 2.0)
    if raise_exception:
        with pytest.raises(StepTooLargeError) as step_error:
            record.record(5)
        error = step_error.value
        assert isinstance(error, ValueError)
    else:
        with caplog.at_level(logging.ERROR, logger="rankscribe"):
            returned = record.record(5)
        [logged] = [r for r in caplog.records if r.levelno >= logging.ERROR]
        error = logged.getMessage()
    text = str(error)
    assert "step 5" in text
    assert "2,147,483,647" in text
    size = int(re.search(r"holds ([\d,]+) bytes", text).group(1).replace(",", ""))
    assert size > 2_400_000_000

    record.add_value("scalar", "loss", 3.0)
    record.add_value("tensor", "small", np.arange(3, dtype=np.int64))
    record.record(6)
    record.close()
    events = disk.summary_steps(log_dir)
    assert [e.step for e in events] == [4, 6]
    assert [disk.scalars_of(e) for e in events] == [{"loss": 1.0}, {"loss": 3.0}]
    np.testing.assert_array_equal(decoded_tensor(disk.value_of(events[1], "small")), np.arange(3))
    if not raise_exception:
        # record()'s docstring: False "when ... the step is too large to be written".
        assert returned is False


def test_threads_are_gone_after_close(make_record):
    before = set(threading.enumerate())
    record = make_record()
    record.add_value("histogram", "h", np.ones(100_000))
    record.record(1)
    record.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [t for t in set(threading.enumerate()) - before if t.is_alive()]
        if not left:
            break
        time.sleep(0.05)
    assert not left, left


def test_unicode_and_long_tags_round_trip(make_record, log_dir, disk):
    tags = ["损失/loss ✓", "emoji 🚀", "a" * 300, "tab\tand space", "/leading/slash"]
    record = make_record()
    for index, tag in enumerate(tags):
        record.add_value("scalar", tag, float(index))
        record.add_value("tensor", tag, np.full(2, index))
    record.record(1)
    record.close()
    [event] = disk.summary_steps(log_dir)
    assert disk.scalars_of(event) == {tag: float(index) for index, tag in enumerate(tags)}
    assert [tag for kind, tag in disk.tags_of(event) if kind == "tensor"] == tags


def test_tensorboard_file_is_created_lazily_too(make_record, log_dir, disk):
    record = make_record(formats=("mindinsight", "tensorboard"))
    record.add_value("eval_lineage", "eval", eval_lineage())
    record.record(1)
    record.flush()
    assert disk.tensorboard_files(log_dir) == []
    assert disk.summary_files(log_dir) == []
    record.add_value("scalar", "loss", 1.0)
    record.record(2)
    record.flush()
    [board] = disk.tensorboard_files(log_dir)
    assert disk.mode_of(board) == 0o600
    record.close()
    assert disk.mode_of(board) == 0o400
