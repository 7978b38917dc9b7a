"""A full disk: flush() never reports success for data that is not on disk, what fits is kept.

Two kinds of full disk: a small tmpfs mounted for the test (needs root, as in CI), and
a disk of a chosen size given to the writer's own write calls (runs everywhere), so the
logic is tested on every machine.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord
from rankscribe.writer.errors import WriterOSError
from tests._support.launchers import run_bounded

from .conftest import SmallDisk, read_events, summary_files


def steps_on_disk(directory: Path) -> list[int]:
    [summary] = summary_files(directory)
    events = read_events(summary)  # strict, no torn tail: a readable file
    assert events[0].version == "MindSpore.Event:1"
    return [event.step for event in events[1:]]


def record_steps(
    record: SummaryRecord, steps: range, *, flush_every: int = 10, payload: int = 0
) -> dict[int, bool]:
    """Record ``steps`` (a scalar, and a tensor of ``payload`` floats if given); return
    {last step covered: what flush returned} for a flush every ``flush_every`` steps."""
    flushed: dict[int, bool] = {}
    for step in steps:
        record.add_value("scalar", "loss", float(step))
        if payload:
            record.add_value("tensor", "w", np.full(payload, step, dtype=np.float32))
        assert record.record(step) is True
        if step % flush_every == flush_every - 1:
            flushed[step] = record.flush()
    return flushed


def test_flush_is_false_while_steps_wait_and_true_once_the_disk_has_room(
    tmp_path: Path, small_disk: SmallDisk, caplog: pytest.LogCaptureFixture
) -> None:
    small_disk.room = 3000  # the version event and about a hundred scalar steps
    record = SummaryRecord(tmp_path)
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        flushed = record_steps(record, range(300))
    assert small_disk.refusals
    assert flushed[9] is True
    assert flushed[299] is False  # steps wait in memory: no success reported
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("not everything recorded is on disk" in message for message in warnings)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "No space left on device" in errors[0]
    # Every step a successful flush covered is on disk; the records that fitted were kept.
    on_disk = steps_on_disk(tmp_path)
    assert on_disk == list(range(len(on_disk)))
    last_success = max(step for step, ok in flushed.items() if ok)
    assert len(on_disk) > last_success
    assert os.path.getsize(summary_files(tmp_path)[0]) <= 3000
    # Space returns: the waiting steps go out, and flush says so.
    small_disk.room = None
    assert record_steps(record, range(300, 310)) == {309: True}
    record.close()
    assert steps_on_disk(tmp_path) == list(range(310))


def test_a_failed_write_keeps_the_records_before_it(tmp_path: Path, small_disk: SmallDisk):
    # One buffer of many steps meets a disk that holds only part of it.
    small_disk.room = 64 << 10
    record = SummaryRecord(tmp_path)
    flushed = record_steps(record, range(300), flush_every=300, payload=64)
    assert flushed == {299: False}
    record.close()  # on a full disk: the file is closed and readable
    on_disk = steps_on_disk(tmp_path)
    assert 0 < len(on_disk) < 300
    assert on_disk == list(range(len(on_disk)))


def test_small_steps_joined_to_scalar_batches_meet_a_full_disk_in_order(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    # A small tensor every tenth step joins the open batch of scalar steps (a summary
    # operator's tensor among the collector's kept timings): a batch whose runs of scalars
    # and steps meet a full disk keeps what fitted, in order, and writes the rest once
    # there is room.
    small_disk.room = 4000
    record = SummaryRecord(tmp_path)
    flushed: dict[int, bool] = {}
    for step in range(200):
        record.add_value("scalar", "loss", float(step))
        if step % 10 == 5:
            record.add_value("tensor", "w", np.full(8, step, dtype=np.float32))
        assert record.record(step) is True
        if step % 50 == 49:
            flushed[step] = record.flush()
    assert small_disk.refusals
    assert flushed[199] is False
    on_disk = steps_on_disk(tmp_path)
    assert on_disk == list(range(len(on_disk))) and len(on_disk) < 200
    small_disk.room = None
    assert record.flush() is True
    record.close()
    [summary] = summary_files(tmp_path)
    events = read_events(summary)[1:]
    assert [event.step for event in events] == list(range(200))
    tensors = [
        (event.step, value.tag)
        for event in events
        for value in event.summary.value
        if value.tag == "w"
    ]
    assert tensors == [(step, "w") for step in range(5, 200, 10)]


def test_raise_exception_raises_the_writers_own_os_error(tmp_path: Path, small_disk: SmallDisk):
    small_disk.room = 2000
    record = SummaryRecord(tmp_path, raise_exception=True)
    with pytest.raises(WriterOSError) as raised:
        record_steps(record, range(300))
    assert isinstance(raised.value, OSError)
    assert raised.value.errno == errno.ENOSPC
    assert "writing" in str(raised.value) and "No space left on device" in str(raised.value)
    small_disk.room = None
    record.close()
    on_disk = steps_on_disk(tmp_path)
    assert on_disk == list(range(len(on_disk)))


def test_a_large_record_whose_write_fails_is_kept_for_the_next_write(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    small_disk.room = 1000
    record = SummaryRecord(tmp_path)
    record.add_value("tensor", "w", np.ones(50_000, dtype=np.float32))  # a direct write
    record.record(1)
    assert record.flush() is False
    small_disk.room = None
    assert record.flush() is True
    record.close()
    assert steps_on_disk(tmp_path) == [1]


# ---------------------------------------------------------------- a real small tmpfs


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: the tmpfs disk-full tests need one")
    result = run_bounded(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", path],
        timeout=60,
        check=False,
        stderr_apart=True,
    )
    if result.returncode != 0:
        pytest.skip(
            f"mounting a {size} tmpfs is not permitted here (needs root, as in CI): "
            f"{result.stderr.strip()}"
        )
    try:
        yield path
    finally:
        run_bounded(["umount", "-l", path], timeout=60, check=False)


def test_a_full_2mib_tmpfs_never_gets_a_successful_flush_for_lost_steps(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "2m") as disk:
        log_dir = disk / "logs"
        record = SummaryRecord(log_dir)
        flushed = record_steps(record, range(1500), payload=400)
        assert False in flushed.values()  # the disk filled up
        record.close()
        on_disk = steps_on_disk(log_dir)
        assert 0 < len(on_disk) < 1500
        assert on_disk == list(range(len(on_disk)))
        for step, ok in flushed.items():
            if ok:
                assert step < len(on_disk), f"flush after step {step} said True"


def test_a_64kib_tmpfs_keeps_what_fits_and_resumes_when_space_returns(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "64k") as disk:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * (40 << 10))  # another program's data: 24 KiB stay free
        log_dir = disk / "logs"
        record = SummaryRecord(log_dir)
        flushed = record_steps(record, range(300), flush_every=300, payload=32)  # ~50 KiB
        assert flushed == {299: False}
        on_disk = steps_on_disk(log_dir)
        assert 0 < len(on_disk) < 300  # what fitted is there
        assert on_disk == list(range(len(on_disk)))
        filler.unlink()  # space returns: the waiting steps go out
        assert record.flush() is True
        assert steps_on_disk(log_dir) == list(range(300))
        record.close()
        assert steps_on_disk(log_dir) == list(range(300))
