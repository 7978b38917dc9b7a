"""Crashes, exits without close() and full disks, in real child processes.

Each child is ``sys.executable`` running a short script; every wait on it has a
timeout, so a writer that hangs fails the test instead of the run. What the
child left on disk is then read with strict framing (both CRCs checked).
"""

from __future__ import annotations

import errno
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from rankscribe.writer.files import RecordReader
from rankscribe.writer.pb import lineage_pb2, summary_pb2

TIMEOUT = 60

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and rlimits")


def start_child(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_child(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def read_line(process: subprocess.Popen[str], timeout: float = TIMEOUT) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        process.kill()
        pytest.fail(f"the child printed nothing in {timeout} s")


def records_of(path):
    """(payloads, reader) with strict checks; a torn tail ends the list, it is not raised."""
    reader = RecordReader(path, strict=True)
    return [record for record in reader], reader


# ------------------------------------------------------------------ SIGKILL

KILL_CHILD = """
    import sys
    import time
    import numpy as np
    from rankscribe.writer.pb import lineage_pb2
    from rankscribe.writer import SummaryRecord

    record = SummaryRecord(sys.argv[1])
    flushed_step = int(sys.argv[2])
    step = 0
    while True:
        record.add_value("scalar", "loss", float(step))
        if step % 7 == 0:
            # ~120 kB: written straight through, not via the small-record buffer
            record.add_value("tensor", "w", np.full(30_000, step, dtype=np.float32))
        if step % 5 == 0:
            record.add_value("custom_lineage_data", "info",
                             lineage_pb2.UserDefinedInfo(map_int32={"step": step}))
        record.record(step)
        if step == flushed_step:
            assert record.flush() is True
            print("FLUSHED", step, flush=True)
        if step > flushed_step:
            time.sleep(0.002)  # keep writing until killed, without filling the disk
        step += 1
"""


def test_sigkill_after_flush_keeps_every_flushed_step(tmp_path, disk):
    log_dir = tmp_path / "logs"
    flushed = 300
    child = start_child(KILL_CHILD, str(log_dir), str(flushed))
    try:
        assert read_line(child).split() == ["FLUSHED", str(flushed)]
        # Let it write on for a moment, so the kill lands in the middle of writing.
        threading.Event().wait(0.3)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(TIMEOUT)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL

    [summary] = disk.summary_files(log_dir)
    records, reader = records_of(summary)  # strict: no CRC error anywhere
    if reader.torn_tail is not None:
        # A torn tail is where the last complete record ends.
        assert reader.torn_tail.offset == records[-1].offset + records[-1].record_length
    events = [summary_pb2.Event.FromString(record.payload) for record in records]
    assert events[0].version == "MindSpore.Event:1"
    steps = [event.step for event in events[1:]]
    # Every step up to the flushed one, then whatever followed, in order, with no gap.
    assert steps == list(range(len(steps)))
    assert len(steps) >= flushed + 1
    for event in events[1:]:
        assert disk.scalars_of(event)["loss"] == float(event.step)
        has_tensor = ("tensor", "w") in disk.tags_of(event)
        assert has_tensor == (event.step % 7 == 0)

    [lineage] = disk.lineage_files(log_dir)
    records, _ = records_of(lineage)
    indexes = [
        lineage_pb2.LineageEvent.FromString(r.payload).user_defined_info.map_int32["step"]
        for r in records
    ]
    assert indexes == list(range(0, 5 * len(indexes), 5))
    assert indexes[-1] >= flushed

    # The files were never closed: still 0600, as the writer left them.
    assert disk.mode_of(summary) == 0o600

    # And a file torn inside its last record reads back the same way, minus that record.
    torn = tmp_path / "torn"
    complete, _ = records_of(summary)
    last = complete[-1]
    for cut in (1, 11, 12, last.record_length - 1):
        shutil.copyfile(summary, torn)
        os.truncate(torn, last.offset + cut)
        kept, torn_reader = records_of(torn)
        assert [r.payload for r in kept] == [r.payload for r in complete[:-1]]
        assert torn_reader.torn_tail is not None
        assert torn_reader.torn_tail.offset == last.offset


# --------------------------------------------------------- exit without close

NO_CLOSE_CHILD = """
    import sys
    import numpy as np
    from rankscribe.writer.pb import lineage_pb2
    from rankscribe.writer import SummaryRecord

    def train(log_dir):
        record = SummaryRecord(log_dir, formats=("mindinsight", "tensorboard"),
                               export_options={"tensor_format": "npy"})
        for step in range(200):
            record.add_value("scalar", "loss", float(step))
            if step % 20 == 0:
                record.add_value("tensor", "w", np.full(50_000, step, dtype=np.float32))
                record.add_value("histogram", "h", np.arange(1000.0) + step)
                record.add_value("train_lineage", "train", lineage_pb2.TrainLineage())
            record.record(step)
        return record

    how = sys.argv[2]
    if how == "dropped":
        train(sys.argv[1])  # the only reference is gone; close() was never called
    elif how == "kept":
        kept = train(sys.argv[1])
    elif how == "exception":
        kept = train(sys.argv[1])
        raise RuntimeError("training crashed")
    elif how == "exit":
        kept = train(sys.argv[1])
        sys.exit(3)
"""


@pytest.mark.parametrize(
    ("how", "returncode"), [("dropped", 0), ("kept", 0), ("exception", 1), ("exit", 3)]
)
def test_exit_without_close_leaves_complete_read_only_files(tmp_path, disk, how, returncode):
    log_dir = tmp_path / "logs"
    result = run_child(NO_CLOSE_CHILD, str(log_dir), how)
    assert result.returncode == returncode, result.stderr
    if how == "exception":
        assert "training crashed" in result.stderr

    [summary] = disk.summary_files(log_dir)
    [lineage] = disk.lineage_files(log_dir)
    [board] = disk.tensorboard_files(log_dir)
    for path in (summary, lineage, board):
        assert disk.mode_of(path) == 0o400, path
    steps = disk.summary_steps(log_dir)  # strict, no torn tail allowed
    assert [e.step for e in steps] == list(range(200))
    assert [e.step for e in steps if ("tensor", "w") in disk.tags_of(e)] == list(range(0, 200, 20))
    assert len(disk.read_lineage(lineage)) == 10
    assert [e.step for e in disk.read_tensorboard(board)[1:]] == list(range(200))
    exported = os.listdir(next(log_dir.glob("export_*")) / "tensor")
    assert sorted(exported) == sorted(f"w_{step}.npy" for step in range(0, 200, 20))


# ---------------------------------------------------------------- disk full

DISK_FULL_CHILD = """
    import json, logging, resource, signal, sys
    import numpy as np
    from rankscribe.writer import SummaryRecord

    log_dir, limit, raise_exception = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "raise"
    errors = []
    STEPS = 2000

    class Collect(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.ERROR:
                errors.append(record.getMessage())

    logging.getLogger("rankscribe").addHandler(Collect())
    record = SummaryRecord(log_dir, raise_exception=raise_exception)
    # Writes past `limit` bytes fail with EFBIG, as on a full disk.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    caught, returned = [], []
    for step in range(STEPS):
        record.add_value("scalar", "loss", float(step))
        if step % 10 == 0:
            record.add_value("tensor", "w", np.full(20_000, step, dtype=np.float32))
        try:
            returned.append(record.record(step))
        except OSError as error:
            caught.append(["record", step, error.errno])
        if step % 50 == 49:
            try:
                record.flush()
            except OSError as error:
                caught.append(["flush", step, error.errno])
    try:
        record.close()
    except OSError as error:
        caught.append(["close", None, error.errno])
    print(json.dumps({"caught": caught, "returned": returned, "errors": errors}))
"""


def check_full_disk_files(disk, log_dir, limit):
    [summary] = disk.summary_files(log_dir)
    assert os.path.getsize(summary) <= limit
    assert disk.mode_of(summary) == 0o400  # closed normally despite the errors
    events = disk.read_events(summary)  # strict and no torn tail: no partial record
    assert events[0].version == "MindSpore.Event:1"
    steps = [event.step for event in events[1:]]
    assert steps == sorted(set(steps))
    assert steps[:10] == list(range(10))  # what was written before the disk filled up
    for event in events[1:]:
        assert disk.scalars_of(event)["loss"] == float(event.step)
    return steps


@pytest.mark.parametrize("raise_exception", [True, False])
def test_disk_full(tmp_path, disk, raise_exception):
    log_dir = tmp_path / "logs"
    # Room for the first tensor step and some scalar-only steps: then the large
    # records fail first and the small buffered ones later, as a disk fills up.
    limit = 100_000
    result = run_child(
        DISK_FULL_CHILD, str(log_dir), str(limit), "raise" if raise_exception else "log"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    steps = check_full_disk_files(disk, log_dir, limit)
    assert len(steps) < 2000  # the limit was hit
    assert steps[-1] < 1999  # even the small scalar records stopped fitting

    if raise_exception:
        assert report["caught"], "no OSError reached the caller"
        assert {errno_ for _, _, errno_ in report["caught"]} == {errno.EFBIG}
        assert {where for where, _, _ in report["caught"]} <= {"record", "flush", "close"}
    else:
        assert report["caught"] == []
        assert report["returned"] == [True] * 2000
        # Logged once, not once per failed write (nor once per internal code path).
        assert len(report["errors"]) == 1, report["errors"]
        assert "File too large" in report["errors"][0] or "27" in report["errors"][0]


RECOVERY_CHILD = """
    import resource, signal, sys
    import numpy as np
    from rankscribe.writer import SummaryRecord

    log_dir, limit = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    record = SummaryRecord(log_dir)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))  # the disk is full already
    # The first step (~40 kB, below the direct-write size) cannot be written.
    record.add_value("tensor", "w", np.ones(10_000, dtype=np.float32))
    record.add_value("scalar", "loss", 0.0)
    record.record(0)
    record.flush()
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space was freed
    for step in range(1, 51):
        record.add_value("scalar", "loss", float(step))
        record.record(step)
    record.close()
"""


def test_writing_resumes_when_the_disk_has_room_again(tmp_path, disk):
    log_dir = tmp_path / "logs"
    result = run_child(RECOVERY_CHILD, str(log_dir), "20000")
    assert result.returncode == 0, result.stderr
    assert "File too large" in result.stderr  # logged (raise_exception=False)
    [summary] = disk.summary_files(log_dir)
    events = disk.read_events(summary)  # strict: no partial record
    # docs/file-format.md: the first record of a summary file is the version event, even when
    # the first write into it failed.
    assert events[0].WhichOneof("what") == "version"
    assert events[0].version == "MindSpore.Event:1"
    # The step whose write failed stayed buffered and went out once there was room:
    # every step is there, in order.
    assert [e.step for e in events[1:]] == list(range(51))


FORK_CHILD = """
    import json, os, sys, time
    from rankscribe.writer import SummaryRecord

    record = SummaryRecord(sys.argv[1])
    step, modes = 0, []
    for _ in range(10):
        for _ in range(300):
            record.add_value("scalar", "x", float(step))
            record.record(step)
            step += 1
        time.sleep(0.005)  # the writer has taken the steps, not yet handed them to the OS
        # Its thread creates the file with the first record it takes: on a busy machine
        # that may come after the first 300 steps (bounded wait, 10 s).
        deadline = time.monotonic() + 10.0
        while not os.path.exists(record.log_dir) and time.monotonic() < deadline:
            time.sleep(0.001)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # a child of the training process ends normally (atexit runs)
        os.waitpid(pid, 0)
        modes.append(os.stat(record.log_dir).st_mode & 0o777)
    record.close()
    print(json.dumps(modes))
"""


def test_a_forked_child_leaves_the_parents_files_alone(tmp_path, disk):
    log_dir = tmp_path / "logs"
    result = run_child(FORK_CHILD, str(log_dir))
    assert result.returncode == 0, result.stderr
    # Every step once, in order: no child wrote the parent's buffered records again.
    steps = [e.step for e in disk.summary_steps(log_dir)]
    assert len(steps) == 3000, f"{len(steps)} events for 3000 steps"
    assert steps == list(range(3000))
    # Nor closed them: the parent's file stayed 0600 while the parent was writing it.
    assert {oct(mode) for mode in json.loads(result.stdout)} == {"0o600"}
