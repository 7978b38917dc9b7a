"""Tags that cannot be written as UTF-8 (lone surrogates, as os.fsdecode makes of
undecodable file names) are refused by add_value, and never cost the steps around them."""

from __future__ import annotations

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord, reader
from rankscribe.writer.errors import WriterValueError

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
