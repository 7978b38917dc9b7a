"""A process forked while another thread was choosing a file name (the writer
thread does so at every rotation) can still create its own SummaryRecord."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from rankscribe.writer import SummaryRecord, _names

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def test_a_child_forked_during_a_name_claim_can_record(tmp_path):
    holding, release = threading.Event(), threading.Event()

    def rotating_writer():  # stands for the writer thread inside claim_timestamp
        with _names._claim_lock:
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
