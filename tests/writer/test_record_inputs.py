"""Inputs at the edges of what SummaryRecord accepts: NumPy steps, huge ints, text."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord, WriterTypeError, WriterValueError, load_dir, reader


def test_numpy_integer_steps_are_steps(tmp_path):
    with SummaryRecord(tmp_path) as record:
        for step in (np.int64(3), np.uint8(4), np.int32(5)):
            record.add_value("scalar", "loss", 1.0)
            assert record.record(step) is True
    assert [event.step for event in load_dir(tmp_path) if event.values] == [3, 4, 5]


@pytest.mark.parametrize("step", [np.float64(3.0), 3.0, True, np.bool_(True), "3"])
def test_non_integer_steps_are_refused(tmp_path, step):
    with SummaryRecord(tmp_path) as record, \
            pytest.raises(WriterTypeError, match="'step' must be an int"):
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
    with caplog.at_level(logging.WARNING, logger="rankscribe.writer._record"), \
            SummaryRecord(tmp_path) as record:
        for step in range(3):
            record.add_value("text", "note", f"step {step}")
            record.record(step)
    warnings = [record.getMessage() for record in caplog.records
                if "TensorBoard target only" in record.getMessage()]
    assert warnings == ["text values are shown by the TensorBoard target only; add 'tensorboard' "
                        "to formats to record 'note'"]


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

    events = [event for event in reader.load_dir(tmp_path, strict=True) if event.what == "summary"]
    assert [[(value.tag, value.plugin) for value in event.values] for event in events] == [
        [("损失", "scalar"), ("loss", "scalar"), ("权重", "histogram")],
        [("损失", "scalar")],
    ]
    assert reader.scalars(tmp_path) == {"损失": [(7, 0.5), (8, 0.75)], "loss": [(7, 0.25)]}
