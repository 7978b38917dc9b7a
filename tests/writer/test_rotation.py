"""max_file_size: files rotate instead of dropping data; a record too large for any file is refused.

The issue's rule: when the next record would not fit, the file is closed and a new one
started (nothing is dropped); a single record larger than the limit is refused with a
clear error or warning (per ``raise_exception``), and nothing partial is written.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import pytest

from rankscribe.writer import WriterError
from rankscribe.writer.errors import RecordTooLargeError
from rankscribe.writer.pb import lineage_pb2

VERSION_RECORD = 28 + 16  # docs/file-format.md: the version event is 28 bytes, plus framing


def check_rotated_files(disk, paths, limit, *, version_first: bool = True) -> None:
    assert len(paths) > 1
    timestamps = [disk.timestamp_of(path) for path in paths]
    assert timestamps == sorted(set(timestamps)), "each file has its own, later T"
    for path in paths:
        assert os.path.getsize(path) <= limit, path
        events = disk.read_events(path)  # strict: every record whole
        if version_first:
            assert events[0].version == "MindSpore.Event:1", path
            assert [e.WhichOneof("what") for e in events[1:]].count("version") == 0
        assert len(events) > (1 if version_first else 0), f"{path} holds no data"


def test_small_limit_rotates_and_keeps_every_step_in_order(make_record, log_dir, disk):
    limit = 2000
    record = make_record(max_file_size=limit)
    for step in range(200):
        record.add_value("scalar", "loss", step / 7)
        if step % 3 == 0:
            record.add_value("tensor", "w", np.full(40, step, dtype=np.float32))
        record.record(step)
    record.flush()
    paths = disk.summary_files(log_dir)
    # Files already left behind are closed and read-only; the current one is still open.
    assert [disk.mode_of(p) for p in paths] == [0o400] * (len(paths) - 1) + [0o600]
    record.close()

    check_rotated_files(disk, paths, limit)
    assert all(disk.mode_of(p) == 0o400 for p in paths)
    steps = disk.summary_steps(log_dir)
    assert [e.step for e in steps] == list(range(200))
    assert [disk.scalars_of(e)["loss"] for e in steps] == [
        float(np.float32(step / 7)) for step in range(200)
    ]
    assert [e.step for e in steps if ("tensor", "w") in disk.tags_of(e)] == list(range(0, 200, 3))
    assert sorted(record.files) == sorted(map(str, paths))
    # The first file is the one log_dir names; all share prefix, rank, host and suffix.
    assert str(paths[0]) == record.log_dir
    shapes = {disk.NAME.match(p.name).group("prefix", "rank", "host", "suffix") for p in paths}
    assert shapes == {("events", "0", disk.HOST, "_MS")}


def test_a_file_is_filled_exactly_up_to_the_limit(make_record, tmp_path, disk):
    # Measure one scalar record (same tag, steps < 128: same size every step).
    probe = make_record(tmp_path / "probe")
    probe.add_value("scalar", "x", 1.0)
    probe.record(1)
    probe.close()
    [path] = disk.summary_files(tmp_path / "probe")
    scalar_record = os.path.getsize(path) - VERSION_RECORD
    assert scalar_record > 16

    per_file = 3
    limit = VERSION_RECORD + per_file * scalar_record  # a full file is exactly the limit
    record = make_record(tmp_path / "run", max_file_size=limit)
    for step in range(10):
        record.add_value("scalar", "x", float(step))
        record.record(step)
    record.close()
    paths = disk.summary_files(tmp_path / "run")
    assert [os.path.getsize(p) for p in paths] == [limit] * 3 + [VERSION_RECORD + scalar_record]
    assert [[e.step for e in disk.read_events(p)[1:]] for p in paths] == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
        [9],
    ]


def test_original_example_of_100_bytes(make_record, log_dir, disk):
    # docs/file-format.md: with max_file_size=100 one file holds the version and one scalar (86
    # bytes). The original then dropped everything; here every step gets a file.
    record = make_record(max_file_size=100)
    for step in range(3):
        record.add_value("scalar", "s", 1.0)
        record.record(step)
    record.close()
    paths = disk.summary_files(log_dir)
    assert len(paths) == 3
    assert all(os.path.getsize(p) <= 100 for p in paths)
    assert [e.step for e in disk.summary_steps(log_dir)] == [0, 1, 2]


def test_large_records_rotate_too(make_record, log_dir, disk):
    limit = 200_000
    record = make_record(max_file_size=limit)
    for step in range(9):
        record.add_value("tensor", "w", np.full(20_000, step, dtype=np.float32))  # ~80 kB
        record.record(step)
    record.close()
    paths = disk.summary_files(log_dir)
    check_rotated_files(disk, paths, limit)
    assert [[e.step for e in disk.read_events(p)[1:]] for p in paths] == [
        [0, 1],
        [2, 3],
        [4, 5],
        [6, 7],
        [8],
    ]


def test_lineage_file_rotates_without_version_records(make_record, log_dir, disk):
    limit = 300
    record = make_record(max_file_size=limit)
    for index in range(40):
        record.add_value(
            "custom_lineage_data", "info", lineage_pb2.UserDefinedInfo(map_int32={"index": index})
        )
        record.record(index)
    record.close()
    paths = disk.lineage_files(log_dir)
    assert len(paths) > 1
    assert disk.summary_files(log_dir) == []
    for path in paths:
        assert os.path.getsize(path) <= limit
    events = disk.all_lineage_events(log_dir)
    assert [e.WhichOneof("what") for e in events] == ["user_defined_info"] * 40
    assert [e.user_defined_info.map_int32["index"] for e in events] == list(range(40))
    # The first lineage file shares the summary file's T (the name log_dir gives).
    assert disk.timestamp_of(paths[0]) == disk.timestamp_of(record.log_dir)


def test_tensorboard_file_rotates_too(make_record, log_dir, disk):
    limit = 500
    record = make_record(max_file_size=limit, formats=("tensorboard",))
    for step in range(400):
        record.add_value("scalar", "loss", float(step))
        record.record(step)
    record.close()
    # TensorBoard reads the event files of a directory in alphabetical order of their
    # names (DirectoryWatcher sorts the paths) and drops data when a step goes back, so
    # the names of rotated files must sort in the order they were written.
    paths = sorted(log_dir.iterdir(), key=lambda path: path.name)
    assert len(paths) > 11  # enough files for a counter to reach two digits
    steps = []
    for path in paths:
        assert path.name.startswith("events.out.tfevents.")
        assert os.path.getsize(path) <= limit
        file_events = disk.read_tensorboard(path)
        assert file_events[0].file_version == "brain.Event:2"
        steps += [(e.step, e.summary.value[0].simple_value) for e in file_events[1:]]
    assert steps == [(step, float(step)) for step in range(400)]


# ------------------------------------------------------ a record over the limit


def record_with_one_oversized_step(record, oversized_step=5, steps=10):
    """Record the steps; return the refusals that surfaced during these calls already.

    A refusal reaches the caller on its next call after the writer met it: one
    of the later record() calls when the writer was quick, else flush or close.
    """
    raised = []
    for step in range(steps):
        record.add_value("scalar", "loss", float(step))
        if step == oversized_step:
            record.add_value("tensor", "big", np.ones(2000, dtype=np.float32))  # > 8 kB
        try:
            record.record(step)
        except RecordTooLargeError as error:
            raised.append(error)
    return raised


def check_all_but(disk, log_dir, refused, steps=10, limit=1000):
    for path in disk.summary_files(log_dir):
        assert os.path.getsize(path) <= limit
        disk.read_events(path)  # strict: no partial record anywhere
    got = [e.step for e in disk.summary_steps(log_dir)]
    assert got == [step for step in range(steps) if step != refused]


def check_too_large(error, limit=1000):
    assert isinstance(error, RecordTooLargeError)
    assert isinstance(error, ValueError)
    assert isinstance(error, WriterError)
    message = str(error)
    assert "max_file_size" in message
    assert f"{limit:,}" in message
    assert error.max_file_size == limit
    assert error.record_size > limit
    assert f"{error.record_size:,}" in message


def test_oversized_record_raises_on_flush(make_record, log_dir, disk):
    record = make_record(max_file_size=1000, raise_exception=True)
    raised = record_with_one_oversized_step(record)
    if not raised:
        with pytest.raises(RecordTooLargeError) as flushed:
            disk.run_with_timeout(record.flush)
        raised.append(flushed.value)
    [error] = raised
    check_too_large(error)
    assert record.flush() is True  # raised once; the writer goes on
    record.close()
    check_all_but(disk, log_dir, refused=5)


def test_oversized_record_raises_on_close(make_record, log_dir, disk):
    record = make_record(max_file_size=1000, raise_exception=True)
    raised = record_with_one_oversized_step(record)
    if raised:
        disk.run_with_timeout(record.close)  # already reported: close is quiet
    else:
        with pytest.raises(RecordTooLargeError) as closed:
            disk.run_with_timeout(record.close)
        raised.append(closed.value)
    [error] = raised
    check_too_large(error)
    check_all_but(disk, log_dir, refused=5)
    assert all(disk.mode_of(p) == 0o400 for p in disk.summary_files(log_dir))
    record.close()  # already closed: quiet


@pytest.mark.parametrize("later_steps", ["scalars", "tensors"])
def test_oversized_record_raises_on_a_later_record_and_loses_nothing_else(
    make_record, log_dir, disk, later_steps
):
    record = make_record(max_file_size=1000, raise_exception=True)
    record.add_value("tensor", "big", np.ones(2000, dtype=np.float32))
    record.record(0)
    caught = None
    step = 0
    deadline = time.monotonic() + 10
    while caught is None and time.monotonic() < deadline:
        step += 1
        record.add_value("scalar", "loss", float(step))
        if later_steps == "tensors":
            record.add_value("tensor", "small", np.full(3, step, dtype=np.int32))
        try:
            record.record(step)
        except RecordTooLargeError as error:
            caught = error
        time.sleep(0.005)
    assert caught is not None, "the refusal never reached the caller"
    check_too_large(caught)
    raised_at = step
    for _ in range(3):  # training goes on after the error
        step += 1
        record.add_value("scalar", "loss", float(step))
        if later_steps == "tensors":
            record.add_value("tensor", "small", np.full(3, step, dtype=np.int32))
        assert record.record(step) is True
    record.close()
    events = disk.summary_steps(log_dir)
    # Only step 0 was too large; the step whose record() reported the error is a
    # different, valid step and must be written like every other one.
    assert [e.step for e in events] == list(range(1, step + 1)), f"raised at step {raised_at}"
    assert [disk.scalars_of(e)["loss"] for e in events] == [float(s) for s in range(1, step + 1)]


def test_oversized_record_is_logged_when_not_raising(make_record, log_dir, disk, caplog):
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        record = make_record(max_file_size=1000, raise_exception=False)
        assert record_with_one_oversized_step(record) == []  # logged, never raised
        assert record.flush() is True
        record.add_value("scalar", "loss", 10.0)
        assert record.record(10) is True
        record.close()
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(problems) == 1
    message = problems[0].getMessage()
    assert "max_file_size" in message
    assert "1,000" in message
    check_all_but(disk, log_dir, refused=5, steps=11)


def test_oversized_first_record_creates_no_file(make_record, log_dir, disk):
    record = make_record(max_file_size=1000)
    record.add_value("tensor", "big", np.ones(2000, dtype=np.float32))
    record.record(0)
    record.close()
    assert disk.summary_files(log_dir) == []
    assert record.files == []


def test_oversized_lineage_record_is_refused_alone(make_record, log_dir, disk, caplog):
    record = make_record(max_file_size=500)
    huge = lineage_pb2.UserDefinedInfo(map_str={"notes": "x" * 1000})
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        record.add_value("custom_lineage_data", "huge", huge)
        record.add_value("scalar", "loss", 1.0)
        record.record(1)
        record.add_value(
            "custom_lineage_data", "small", lineage_pb2.UserDefinedInfo(map_str={"notes": "ok"})
        )
        record.record(2)
        record.close()
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    [event] = disk.all_lineage_events(log_dir)
    assert event.user_defined_info.map_str["notes"] == "ok"
    assert [e.step for e in disk.summary_steps(log_dir)] == [1]


def test_every_oversized_record_reaches_the_caller(make_record, log_dir, disk):
    record = make_record(max_file_size=1000, raise_exception=True)
    raised = []
    for step in range(8):
        record.add_value("scalar", "loss", float(step))
        if step in (2, 5):
            record.add_value("tensor", "big", np.ones(2000, dtype=np.float32))
        try:  # a refusal surfaces on the next call: this one, if the writer was quick
            record.record(step)
        except RecordTooLargeError as error:
            raised.append(error)
    for _ in range(5):  # one error per call; calls after the last one are quiet
        try:
            disk.run_with_timeout(record.flush)
        except RecordTooLargeError as error:
            raised.append(error)
    record.close()
    assert len(raised) == 2
    for error in raised:
        check_too_large(error)
    assert [e.step for e in disk.summary_steps(log_dir)] == [0, 1, 3, 4, 6, 7]


def test_every_oversized_record_is_logged_when_not_raising(make_record, log_dir, disk, caplog):
    # Unlike a full disk (one condition, logged once), each refused record is its own
    # loss of data, at its own step: each gets its warning.
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        record = make_record(max_file_size=1000)
        for step in range(8):
            record.add_value("scalar", "loss", float(step))
            if step in (2, 5):
                record.add_value("tensor", "big", np.ones(2000, dtype=np.float32))
            record.record(step)
        record.close()
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(problems) == 2, problems
    assert all("max_file_size" in message for message in problems)
    assert [e.step for e in disk.summary_steps(log_dir)] == [0, 1, 3, 4, 6, 7]
