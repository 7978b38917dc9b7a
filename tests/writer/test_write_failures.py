"""Write failures in the background never end the writer and never drop what waits to be written."""

from __future__ import annotations

import errno
import logging
import os

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord
from rankscribe.writer.events import load_dir
from rankscribe.writer.files import read_records


def test_a_failed_write_at_rotation_keeps_the_buffered_records(tmp_path, small_disk, event_files):
    names = iter(range(100))
    stream = event_files.EventFile(
        lambda: str(tmp_path / f"part-{next(names):02d}"), max_file_size=400
    )
    payloads = [bytes([index]) * 40 for index in range(30)]
    for payload in payloads[:7]:
        stream.append(payload)  # buffered: 7 records of 56 bytes, 392 of the 400
    small_disk.room = 0  # the disk is full: every write refused
    with pytest.raises(OSError) as raised:
        stream.append(payloads[7])  # does not fit: rotation, whose write fails
    assert raised.value.errno == errno.ENOSPC
    small_disk.room = None
    for payload in payloads[7:]:  # the refused record is the caller's to retry
        stream.append(payload)
    stream.close()
    written = [record for path in sorted(tmp_path.iterdir()) for record in read_records(path)]
    assert written == payloads  # nothing lost, nothing twice, in order
    assert all(os.path.getsize(path) <= 400 for path in tmp_path.iterdir())


def test_text_that_utf8_cannot_hold_is_refused_where_it_is_added(tmp_path):
    with SummaryRecord(tmp_path, formats=("tensorboard",)) as record:
        with pytest.raises(ValueError, match="text 'note' cannot be encoded as UTF-8"):
            record.add_value("text", "note", "broken \udc80 surrogate")
        record.add_value("text", "note", "fine")
        assert record.record(1) is True


def test_an_export_that_would_leave_its_folder_is_refused_and_writing_goes_on(tmp_path, caplog):
    record = SummaryRecord(tmp_path / "logs", export_options={"tensor_format": "npy"})
    record.add_value("tensor", "w", np.arange(3))
    record.record(1)
    record.flush()
    [folder] = (tmp_path / "logs").glob("export_*/tensor")
    outside = tmp_path / "elsewhere.npy"
    outside.write_bytes(b"")
    (folder / "w_2.npy").symlink_to(outside)  # someone plants a link under the next name
    with caplog.at_level(logging.ERROR, logger="rankscribe.writer.record._write_errors"):
        for step in (2, 3):
            record.add_value("tensor", "w", np.arange(3) + step)
            assert record.record(step) is True
        record.close()
    assert outside.read_bytes() == b""  # nothing written through the link
    assert any("escapes" in message for message in caplog.messages)
    steps = [event.step for event in load_dir(tmp_path / "logs") if event.values]
    assert steps == [1, 2, 3]  # the summary file still got every step
    assert (folder / "w_3.npy").is_file()


def test_a_step_over_the_limit_after_encoding_is_dropped_and_writing_goes_on(
    tmp_path, monkeypatch, caplog
):
    # record() refuses over-limit steps from an upper-bound estimate, so the
    # encoder's own check is a last guard: make it the one that fires.
    # private: patches the step encoder to inject a failure mid-write
    from rankscribe.writer.encoding import _steps as steps

    monkeypatch.setattr(steps, "MAX_STEP_BYTES", 1_000)
    with (
        caplog.at_level(logging.ERROR, logger="rankscribe.writer.encoding._steps"),
        SummaryRecord(tmp_path) as record,
    ):
        record.add_value("tensor", "big", np.ones(500, dtype=np.float32))
        assert record.record(1) is True
        record.add_value("tensor", "small", np.ones(2, dtype=np.float32))
        assert record.record(2) is True
    assert any("step 1 encodes to" in message for message in caplog.messages)
    assert [event.step for event in load_dir(tmp_path) if event.values] == [2]
