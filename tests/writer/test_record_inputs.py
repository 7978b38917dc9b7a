"""Inputs at the edges of what SummaryRecord accepts: NumPy steps, huge ints, text."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord, WriterTypeError, WriterValueError, load_dir


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
