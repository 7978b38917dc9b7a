"""Inputs at the edges of what SummaryRecord accepts: NumPy steps, huge ints, text."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord, reader
from rankscribe.writer.errors import WriterTypeError, WriterValueError
from rankscribe.writer.events import load_dir


def test_numpy_integer_steps_are_steps(tmp_path):
    with SummaryRecord(tmp_path) as record:
        for step in (np.int64(3), np.uint8(4), np.int32(5)):
            record.add_value("scalar", "loss", 1.0)
            assert record.record(step) is True
    assert [event.step for event in load_dir(tmp_path) if event.values] == [3, 4, 5]


@pytest.mark.parametrize("step", [np.float64(3.0), 3.0, True, np.bool_(True), "3"])
def test_non_integer_steps_are_refused(tmp_path, step):
    with (
        SummaryRecord(tmp_path) as record,
        pytest.raises(WriterTypeError, match="'step' must be an int"),
    ):
        record.record(step)


def test_an_int_too_large_for_a_float_is_refused_with_its_name(tmp_path):
    with SummaryRecord(tmp_path) as record:
        with pytest.raises(WriterValueError, match=r"scalar 'big' is an int too large.*401 digits"):
            record.add_value("scalar", "big", 10**400)
        record.add_value("scalar", "fine", 10**30)
        record.record(1)
    [event] = [event for event in load_dir(tmp_path) if event.values]
    assert event.values[0].value == float(np.float32(1e30))


def test_text_without_the_tensorboard_target_is_warned_about_once(tmp_path, caplog):
    with (
        caplog.at_level(logging.WARNING, logger="rankscribe.writer.record._record"),
        SummaryRecord(tmp_path) as record,
    ):
        for step in range(3):
            record.add_value("text", "note", f"step {step}")
            record.record(step)
    warnings = [
        record.getMessage()
        for record in caplog.records
        if "TensorBoard target only" in record.getMessage()
    ]
    assert warnings == [
        "text values are shown by the TensorBoard target only; add 'tensorboard' "
        "to formats to record 'note'"
    ]


# Tags that cannot be written as UTF-8 (lone surrogates, as os.fsdecode makes of
# undecodable file names) are refused by add_value, and never cost the steps around them.

BAD_TAG = "loss_\udc80"  # os.fsdecode(b"loss_\x80")


@pytest.mark.parametrize("plugin", ["scalar", "histogram", "tensor"])
def test_a_tag_that_is_not_utf8_is_refused_naming_the_argument(tmp_path, plugin):
    value = 1.0 if plugin == "scalar" else np.arange(4.0)
    with SummaryRecord(tmp_path) as record, pytest.raises(WriterValueError, match=r"'name'.*UTF-8"):
        record.add_value(plugin, BAD_TAG, value)


def test_steps_around_a_refused_tag_are_all_written(tmp_path):
    with SummaryRecord(tmp_path) as record:
        record.add_value("scalar", "loss", 1.0)
        record.record(1)
        with pytest.raises(WriterValueError):
            record.add_value("scalar", BAD_TAG, 2.0)
        record.add_value("scalar", "loss", 2.0)
        record.record(2)
        record.flush()
        record.add_value("scalar", "loss", 3.0)
        record.record(3)

    assert reader.scalars(tmp_path, strict=True) == {"loss": [(1, 1.0), (2, 2.0), (3, 3.0)]}


def test_non_ascii_tags_are_written_as_given(tmp_path):
    with SummaryRecord(tmp_path) as record:
        record.add_value("scalar", "损失", 0.5)
        record.add_value("scalar", "loss", 0.25)
        record.add_value("histogram", "权重", np.arange(3.0))
        record.record(7)
        record.add_value("scalar", "损失", 0.75)
        record.record(8)

    events = [event for event in load_dir(tmp_path, strict=True) if event.what == "summary"]
    assert [[(value.tag, value.plugin) for value in event.values] for event in events] == [
        [("损失", "scalar"), ("loss", "scalar"), ("权重", "histogram")],
        [("损失", "scalar")],
    ]
    assert reader.scalars(tmp_path) == {"损失": [(7, 0.5), (8, 0.75)], "loss": [(7, 0.25)]}


# ------------------------------------------------ bad arguments never lose data silently


def test_a_prefix_too_long_for_a_file_name_is_refused_at_construction(tmp_path):
    log_dir = tmp_path / "logs"
    with pytest.raises(WriterValueError, match=r"'file_prefix'.*longer than the 255 bytes"):
        SummaryRecord(log_dir, file_prefix="p" * 300)
    with pytest.raises(WriterValueError, match="'file_suffix'"):
        SummaryRecord(log_dir, file_suffix="_" + "s" * 250)
    assert not log_dir.exists()  # nothing created for a record that cannot write
    with SummaryRecord(log_dir, file_prefix="p" * 150) as record:  # a long name that fits
        record.add_value("scalar", "loss", 1.0)
        assert record.record(1) is True
    assert [event.step for event in load_dir(log_dir) if event.values] == [1]


def test_a_plugin_filter_that_is_not_callable_is_refused_before_anything_is_taken(tmp_path):
    with SummaryRecord(tmp_path) as record:
        record.add_value("scalar", "loss", 1.0)
        record.add_value("histogram", "w", np.arange(4.0))
        with pytest.raises(TypeError, match=r"'plugin_filter' must be None or a callable.*int"):
            record.record(2, plugin_filter=5)
        assert record.record(2) is True  # the retry records what was added
    [event] = [event for event in load_dir(tmp_path) if event.values]
    assert event.step == 2
    assert sorted(value.tag for value in event.values) == ["loss", "w"]


def test_a_plugin_filter_that_raises_keeps_the_steps_values(tmp_path):
    def broken(plugin):
        raise KeyError(plugin)

    with SummaryRecord(tmp_path) as record:
        record.add_value("scalar", "loss", 1.0)
        with pytest.raises(KeyError):
            record.record(2, plugin_filter=broken)
        assert record.record(2, plugin_filter=lambda plugin: True) is True
    assert [event.step for event in load_dir(tmp_path) if event.values] == [2]


def test_a_graph_proto_that_raises_keeps_the_steps_values(tmp_path):
    class Broken:
        def graph_proto(self):
            raise RuntimeError("graph not ready")

    with SummaryRecord(tmp_path) as record:
        record.add_value("scalar", "loss", 1.0)
        record.add_value("tensor", "t", np.arange(3))
        with pytest.raises(RuntimeError, match="graph not ready"):
            record.record(3, train_network=Broken())
        assert record.record(3) is True
    [event] = [event for event in load_dir(tmp_path) if event.values]
    assert (event.step, sorted(value.tag for value in event.values)) == (3, ["loss", "t"])


def test_a_nul_in_log_dir_is_refused_naming_log_dir(tmp_path):
    with pytest.raises(ValueError, match=r"'log_dir' must be a path without NUL"):
        SummaryRecord(str(tmp_path / "a\0b"))


@pytest.mark.parametrize("timeout", ["x", [1], True])
def test_a_flush_timeout_that_is_not_a_number_is_refused_naming_timeout(tmp_path, timeout):
    with SummaryRecord(tmp_path) as record:
        record.add_value("scalar", "loss", 1.0)
        record.record(1)
        with pytest.raises(TypeError, match=r"'timeout' must be None or a number of seconds"):
            record.flush(timeout=timeout)
        with pytest.raises(ValueError, match=r"'timeout' must be >= 0"):
            record.flush(timeout=-1)
        assert record.flush(timeout=5) is True
    assert [event.step for event in load_dir(tmp_path) if event.values] == [1]
