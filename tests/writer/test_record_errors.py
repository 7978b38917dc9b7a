"""Every bad input to SummaryRecord: the error type, its built-in base, and what it says.

docs/file-format.md and docs/contributing.md: each error is a WriterError that also derives from the
built-in the original raised (ValueError or TypeError), and its message names the
argument, the value received and the form expected.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from rankscribe.writer import WriterError
from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.pb import anf_ir_pb2, lineage_pb2, summary_pb2


def check_error(raised: pytest.ExceptionInfo, expected: type, *parts: str) -> None:
    """The error is of ``expected`` (a Writer* class), its built-in, and mentions ``parts``."""
    error = raised.value
    assert type(error) is expected, f"{type(error).__name__}: {error}"
    assert isinstance(error, WriterError)
    builtin = ValueError if expected is WriterValueError else TypeError
    assert isinstance(error, builtin)
    message = str(error)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


# ------------------------------------------------------------- constructor


@pytest.mark.parametrize(
    ("options", "expected", "parts"),
    [
        ({"file_prefix": ""}, WriterValueError, ["file_prefix", "''"]),
        ({"file_prefix": "a b"}, WriterValueError, ["file_prefix", "'a b'"]),
        ({"file_prefix": "é"}, WriterValueError, ["file_prefix", "'é'", "ASCII"]),
        ({"file_prefix": "../up"}, WriterValueError, ["file_prefix", "'../up'"]),
        ({"file_suffix": ""}, WriterValueError, ["file_suffix", "''"]),
        ({"file_suffix": "_a/b"}, WriterValueError, ["file_suffix", "'_a/b'"]),
        ({"num_process": 0}, WriterValueError, ["num_process", "an int >= 1", "0"]),
        ({"num_process": -3}, WriterValueError, ["num_process", "-3"]),
        ({"num_process": "2"}, WriterTypeError, ["num_process", "int", "str"]),
        ({"num_process": 2.0}, WriterTypeError, ["num_process", "int", "float"]),
        ({"max_file_size": "10"}, WriterTypeError, ["max_file_size", "int", "str"]),
        ({"max_file_size": 10.5}, WriterTypeError, ["max_file_size", "float"]),
        ({"max_file_size": 0}, WriterValueError, ["max_file_size", "greater than 0", "0"]),
        ({"raise_exception": "yes"}, WriterTypeError, ["raise_exception", "bool", "str"]),
        ({"raise_exception": 1}, WriterTypeError, ["raise_exception", "bool", "int"]),
        (
            {"export_options": {"format": "npy"}},
            WriterValueError,
            ["export_options", "tensor_format", "format"],
        ),
        (
            {"export_options": {"tensor_format": "csv"}},
            WriterValueError,
            ["export_options", "tensor_format", "'csv'", "npy"],
        ),
        ({"export_options": ["npy"]}, WriterTypeError, ["export_options", "dict", "list"]),
        ({"export_options": "npy"}, WriterTypeError, ["export_options", "dict", "str"]),
        ({"formats": ()}, WriterValueError, ["formats", "mindinsight", "tensorboard", "()"]),
        ({"formats": ("png",)}, WriterValueError, ["formats", "'png'"]),
        ({"formats": ("mindinsight", "png")}, WriterValueError, ["formats", "'png'"]),
        ({"formats": "png"}, WriterValueError, ["formats", "'png'"]),
        ({"rank": -1}, WriterValueError, ["rank", "-1"]),
        ({"rank": "a b"}, WriterValueError, ["rank", "'a b'"]),
        ({"rank": "../x"}, WriterValueError, ["rank", "'../x'"]),
        ({"rank": True}, WriterValueError, ["rank", "True"]),
        ({"network": object()}, WriterTypeError, ["network", "graph_proto", "object"]),
        ({"max_pending_bytes": 0}, WriterValueError, ["max_pending_bytes", "0"]),
        # bool is an int subclass: True is never taken as a count, a size or a flag's 1
        ({"num_process": True}, WriterTypeError, ["num_process", "int", "bool"]),
        ({"max_pending_bytes": True}, WriterTypeError, ["max_pending_bytes", "int", "bool"]),
        ({"max_file_size": True}, WriterTypeError, ["max_file_size", "int or None", "bool"]),
        ({"group_readable": 1}, WriterTypeError, ["group_readable", "bool", "int"]),
    ],
    ids=lambda value: repr(value)[:40] if isinstance(value, dict) else None,
)
def test_bad_constructor_argument(make_record, log_dir, options, expected, parts):
    with pytest.raises(expected) as raised:
        make_record(**options)
    check_error(raised, expected, *parts)
    assert not log_dir.exists()  # refused before anything was created


def test_log_dir_that_is_a_file(make_record, tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    with pytest.raises(WriterValueError) as raised:
        make_record(path)
    check_error(raised, WriterValueError, "log_dir", str(path), "file")
    assert path.read_text() == "x"


@pytest.mark.parametrize("log_dir", [None, 42, ""])
def test_log_dir_of_the_wrong_kind(log_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from rankscribe.writer import SummaryRecord

    with pytest.raises(WriterTypeError) as raised:
        SummaryRecord(log_dir)
    check_error(raised, WriterTypeError, "log_dir", repr(log_dir))
    assert os.listdir(tmp_path) == []


def test_network_graph_proto_of_the_wrong_type_is_reported_at_record(make_record):
    class Network:
        def graph_proto(self):
            return 42

    record = make_record(network=Network())
    with pytest.raises(WriterTypeError) as raised:
        record.record(1)
    check_error(raised, WriterTypeError, "GraphProto", "ModelProto", "int")


def test_set_mode_test(make_record):
    record = make_record()
    with pytest.raises(WriterValueError) as raised:
        record.set_mode("test")
    check_error(raised, WriterValueError, "mode", "'test'", "train", "eval")


# --------------------------------------------------------------- add_value

IMAGE = np.zeros((1, 3, 4, 4), dtype=np.float32)


@pytest.mark.parametrize(
    ("plugin", "name", "value", "expected", "parts"),
    [
        ("audio", "x", 1.0, WriterValueError, ["plugin", "'audio'", "scalar", "histogram"]),
        ("Scalar", "x", 1.0, WriterValueError, ["plugin", "'Scalar'"]),
        (None, "x", 1.0, WriterValueError, ["plugin", "None"]),
        ("scalar", "", 1.0, WriterValueError, ["name", "non-empty str", "''"]),
        ("scalar", 3, 1.0, WriterValueError, ["name", "non-empty str", "3"]),
        ("scalar", None, 1.0, WriterValueError, ["name", "None"]),
        ("tensor", "", np.ones(2), WriterValueError, ["name", "''"]),
        ("scalar", "s", "1.0", WriterTypeError, ["scalar", "'s'", "str"]),
        ("scalar", "s", None, WriterTypeError, ["scalar", "'s'", "NoneType"]),
        ("scalar", "s", 1 + 2j, WriterTypeError, ["scalar", "'s'", "complex"]),
        ("scalar", "s", np.array([1 + 2j]), WriterTypeError, ["scalar", "'s'", "complex128"]),
        ("scalar", "s", object(), WriterTypeError, ["scalar", "'s'"]),
        ("scalar", "s", np.ones(2), WriterValueError, ["scalar", "'s'", "one element", "(2,)"]),
        ("scalar", "s", [1.0, 2.0], WriterValueError, ["scalar", "'s'", "(2,)"]),
        ("scalar", "s", np.ones((0,)), WriterValueError, ["scalar", "'s'", "(0,)"]),
        ("image", "i", np.zeros((3, 4, 4)), WriterValueError, ["image", "'i'", "4-D", "(3, 4, 4)"]),
        ("image", "i", np.zeros((1, 1, 3, 4, 4)), WriterValueError, ["image", "(1, 1, 3, 4, 4)"]),
        ("image", "i", np.zeros((1, 2, 4, 4)), WriterValueError, ["image", "'i'", "(1, 2, 4, 4)"]),
        ("image", "i", np.zeros((1, 4, 4, 4)), WriterValueError, ["image", "(1, 4, 4, 4)"]),
        ("image", "i", np.zeros((0, 3, 4, 4)), WriterValueError, ["image", "(0, 3, 4, 4)"]),
        ("image", "i", np.zeros((1, 3, 0, 4)), WriterValueError, ["image", "(1, 3, 0, 4)"]),
        ("image", "i", np.zeros((1, 3, 4, 0)), WriterValueError, ["image", "(1, 3, 4, 0)"]),
        ("image", "i", IMAGE.astype(np.complex64), WriterTypeError, ["image", "'i'", "complex"]),
        ("tensor", "t", np.array(1.0), WriterValueError, ["tensor", "'t'", "0-d"]),
        ("tensor", "t", 3.0, WriterValueError, ["tensor", "'t'", "0-d"]),
        ("histogram", "h", np.array(1.0), WriterValueError, ["histogram", "'h'", "0-d"]),
        ("histogram", "h", 2, WriterValueError, ["histogram", "'h'", "0-d"]),
        (
            "tensor",
            "t",
            np.ones(3, dtype=np.complex64),
            WriterTypeError,
            ["tensor", "'t'", "complex64"],
        ),
        ("tensor", "t", np.array(["a", "b"]), WriterTypeError, ["tensor", "'t'", "<U1"]),
        (
            "tensor",
            "t",
            np.array([1, 2], dtype="datetime64[s]"),
            WriterTypeError,
            ["tensor", "'t'", "datetime64"],
        ),
        ("tensor", "t", "abc", WriterTypeError, ["tensor", "'t'", "str"]),
        (
            "histogram",
            "h",
            np.ones(3, dtype=np.complex128),
            WriterTypeError,
            ["histogram", "'h'", "complex128"],
        ),
        (
            "train_lineage",
            "l",
            lineage_pb2.EvaluationLineage(),
            WriterTypeError,
            ["train_lineage", "TrainLineage", "EvaluationLineage"],
        ),
        (
            "eval_lineage",
            "l",
            {"metric": "{}"},
            WriterTypeError,
            ["eval_lineage", "EvaluationLineage", "dict"],
        ),
        (
            "dataset_graph",
            "l",
            lineage_pb2.TrainLineage(),
            WriterTypeError,
            ["dataset_graph", "DatasetGraph", "TrainLineage"],
        ),
        (
            "custom_lineage_data",
            "l",
            {"a": 1},
            WriterTypeError,
            ["custom_lineage_data", "UserDefinedInfo", "dict"],
        ),
        (
            "custom_lineage_data",
            "l",
            lineage_pb2.UserDefinedInfo().SerializeToString(),
            WriterTypeError,
            ["UserDefinedInfo", "bytes"],
        ),
        ("landscape", "l", b"", WriterTypeError, ["landscape", "LossLandscape", "bytes"]),
        ("graph", "g", 42, WriterTypeError, ["graph", "GraphProto", "ModelProto", "int"]),
        ("graph", "g", "graph", WriterTypeError, ["graph", "str"]),
        ("graph", "g", summary_pb2.Event(), WriterTypeError, ["graph", "Event"]),
        ("graph", "g", b"\xff\xff\xff\xff", WriterValueError, ["graph", "ModelProto"]),
        ("text", "t", 42, WriterTypeError, ["text", "'t'", "str", "int"]),
        ("text", "t", b"bytes", WriterTypeError, ["text", "'t'", "bytes"]),
    ],
)
def test_bad_add_value(make_record, log_dir, disk, plugin, name, value, expected, parts):
    record = make_record()
    record.add_value("scalar", "kept", 1.0)
    with pytest.raises(expected) as raised:
        record.add_value(plugin, name, value)
    check_error(raised, expected, *parts)
    # The refused value is not recorded; what was added before it still is.
    record.record(1)
    record.close()
    [event] = disk.summary_steps(log_dir)
    assert disk.tags_of(event) == [("scalar_value", "kept")]
    assert disk.lineage_files(log_dir) == []


def test_good_graph_bytes_are_accepted(make_record, log_dir, disk):
    # The counterpart of the unparsable bytes above: the same plugin with valid bytes.
    model = anf_ir_pb2.ModelProto()
    model.graph.name = "ok"
    record = make_record()
    record.add_value("graph", "g", model.SerializeToString())
    record.record(1)
    record.close()
    assert disk.all_summary_events(log_dir)[1].graph_def.name == "ok"


# ------------------------------------------------------------------ record


@pytest.mark.parametrize(
    ("step", "parts"),
    [
        (True, ["step", "int", "bool"]),
        (1.0, ["step", "int", "float"]),
        ("1", ["step", "int", "str"]),
        (None, ["step", "int", "NoneType"]),
        (np.float32(2), ["step", "int", "float32"]),
    ],
    ids=repr,
)
def test_bad_step_type(make_record, log_dir, disk, step, parts):
    record = make_record()
    record.add_value("scalar", "x", 1.0)
    with pytest.raises(WriterTypeError) as raised:
        record.record(step)
    check_error(raised, WriterTypeError, *parts)
    # The refused call kept the pending values for the next good one.
    record.record(7)
    record.close()
    [event] = disk.summary_steps(log_dir)
    assert (event.step, disk.scalars_of(event)) == (7, {"x": 1.0})


@pytest.mark.parametrize("step", [2**63, -(2**63) - 1, 2**64])
def test_step_outside_int64_is_refused(make_record, log_dir, disk, step):
    # Event.step is an int64: a step it cannot hold must not be written as another step.
    record = make_record()
    record.add_value("scalar", "x", 1.0)
    with pytest.raises(ValueError, match="step") as raised:
        record.record(step)
    assert isinstance(raised.value, WriterError)
    assert str(step) in str(raised.value)
    record.close()
    assert disk.summary_steps(log_dir) == []


@pytest.mark.parametrize("step", [2**63 - 1, -(2**63), -1, 0])
def test_steps_at_the_int64_limits_are_written_exactly(make_record, log_dir, disk, step):
    record = make_record()
    record.add_value("scalar", "x", 1.0)
    record.record(step)
    record.add_value("tensor", "t", np.ones(1))
    record.record(step)
    record.close()
    assert [e.step for e in disk.summary_steps(log_dir)] == [step, step]


def test_negative_max_file_size_warns_and_means_no_limit(make_record, log_dir, disk, caplog):
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        record = make_record(max_file_size=-5)
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "max_file_size" in warning.getMessage()
    assert "-5" in warning.getMessage()
    for step in range(50):
        record.add_value("tensor", "t", np.ones(100, dtype=np.float32))
        record.record(step)
    record.close()
    assert len(disk.summary_files(log_dir)) == 1
    assert len(disk.summary_steps(log_dir)) == 50
