"""File names: a name another process took, or a name claim interrupted by fork, never
costs a record its data."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import time

import pytest

from rankscribe.writer import SummaryRecord, events, reader
from rankscribe.writer.pb import lineage_pb2
from tests._support.launchers import run_bounded

# Another process can take a file name first: files are created lazily, so two
# processes writing into one directory in the same second (two scripts with one
# log_dir, a pool of workers of rank 0) claim the same T. The one that opens second
# must write under a new name instead of losing everything it records.


def _scalars_of(path: os.PathLike[str] | str) -> dict[str, list[tuple[int, float]]]:
    return reader.scalars(path, strict=True)


def test_a_name_taken_by_another_process_is_not_fatal(tmp_path, disk):
    record = SummaryRecord(tmp_path)
    # Another process, created in the same second, claimed the same T and wrote first.
    taken = record.log_dir
    other = textwrap.dedent(f"""
        import time
        from rankscribe.writer import SummaryRecord
        time.time = lambda: {float(_timestamp(taken))}
        with SummaryRecord({os.fspath(tmp_path)!r}) as other:
            other.add_value("scalar", "other", 1.0)
            other.record(0)
    """)
    run_bounded([sys.executable, "-c", other], timeout=60)
    assert os.path.exists(taken)

    for step in range(3):
        record.add_value("scalar", "mine", float(step))
        record.record(step)
    record.close()

    files = disk.summary_files(tmp_path)
    assert len(files) == 2
    assert _scalars_of(taken) == {"other": [(0, 1.0)]}
    (mine,) = [path for path in files if os.fspath(path) != taken]
    assert _scalars_of(mine) == {"mine": [(0, 0.0), (1, 1.0), (2, 2.0)]}
    assert record.files == [os.fspath(mine)]
    assert record.log_dir == os.fspath(mine)


def test_lineage_and_tensorboard_files_also_move_to_a_free_name(tmp_path):
    record = SummaryRecord(tmp_path, formats=("mindinsight", "tensorboard"))
    lineage_name = record.log_dir[: -len("_MS")] + "_lineage"
    for path in (record.log_dir, lineage_name):
        with open(path, "wb"):
            pass
    record.add_value("scalar", "loss", 0.5)
    record.add_value("train_lineage", "train", lineage_pb2.TrainLineage())
    record.record(1)
    record.close()

    assert _scalars_of(tmp_path) == {"loss": [(1, 0.5)]}
    assert len(events.load_lineage_dir(tmp_path, strict=True)) == 1
    assert all(os.path.getsize(path) > 0 for path in record.files)
    assert len(record.files) == 3


def _timestamp(path: str) -> int:
    return int(os.path.basename(path).split(".")[4])


# A process forked while another thread was choosing a file name (the writer
# thread does so at every rotation) can still create its own SummaryRecord.


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_a_name_claim_can_record(tmp_path, name_claims):
    holding, release = threading.Event(), threading.Event()

    def rotating_writer():  # stands for the writer thread inside claim_timestamp
        with name_claims.lock():
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=rotating_writer)
    thread.start()
    holding.wait(30)
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 if it could record
            code = 1
            try:
                signal.alarm(5)
                with SummaryRecord(tmp_path / "child") as record:
                    record.add_value("scalar", "loss", 1.0)
                    record.record(1)
                code = 0
            finally:
                os._exit(code)
    finally:
        release.set()
        thread.join()
    deadline = time.monotonic() + 30
    while (waited := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    if waited == (0, 0):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung creating a SummaryRecord")
    assert os.waitstatus_to_exitcode(waited[1]) == 0
    assert len(os.listdir(tmp_path / "child")) == 1
