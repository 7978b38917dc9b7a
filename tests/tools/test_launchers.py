"""tests/_support/launchers.py: no job outlives its timeout; a failure shows what it printed."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from tests._support.launchers import LAUNCHER_VARIABLES, Launches, clean_environment, run_bounded

# A "launcher" that starts a "rank" in its own process group, says so, then waits on it.
LAUNCHER = """
import subprocess, sys
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("rank", rank.pid, flush=True)
print("on stderr", file=sys.stderr, flush=True)
rank.wait()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of the killed launcher may linger as a zombie until init reaps it.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def assert_the_rank_died(message: str) -> None:
    """The rank LAUNCHER started, named in a failure's ``message``, is gone within 10 s."""
    said = re.search(r"rank (\d+)", message)
    assert said is not None
    rank = int(said.group(1))
    deadline = time.monotonic() + 10
    while _alive(rank) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(rank)


def test_a_job_past_its_timeout_is_killed_with_its_ranks_and_fails_with_its_output() -> None:
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        run_bounded([sys.executable, "-c", LAUNCHER], timeout=3)
    assert time.monotonic() - started < 30
    message = str(failed.value)
    assert "did not end within 3 s; every process group was killed" in message
    assert "on stderr" in message
    assert_the_rank_died(message)


def test_a_failed_job_fails_the_test_with_what_it_printed(tmp_path: Path) -> None:
    script = "import sys; print('half done', flush=True); sys.exit(3)"
    with pytest.raises(
        pytest.fail.Exception, match=r"exited 3\.\n.*\(exit 3\) printed:\nhalf done"
    ):
        run_bounded([sys.executable, "-c", script], timeout=60, cwd=tmp_path)
    run = run_bounded([sys.executable, "-c", script], timeout=60, check=False)
    assert (run.returncode, run.stdout, run.stderr, run.output) == (
        3,
        "half done\n",
        "",
        "half done\n",
    )


def test_processes_end_in_their_order_with_stderr_apart_on_request(tmp_path: Path) -> None:
    code = "import os, sys; print(os.environ['RANK'], os.getcwd()); print('e', file=sys.stderr)"
    with Launches(timeout=60) as launches:
        for rank in (1, 0):
            launches.start(  # -u: stdout unbuffered, so the merged output keeps print order
                [sys.executable, "-u", "-c", code],
                env=clean_environment(RANK=str(rank)),
                cwd=tmp_path,
                stderr_apart=rank == 0,
            )
        ends = launches.wait()
    assert [(end.stdout, end.stderr) for end in ends] == [
        (f"1 {tmp_path}\ne\n", ""),
        (f"0 {tmp_path}\n", "e\n"),
    ]


def test_the_clean_environment_has_no_launcher_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("RANKSCRIBE_TEST_KEPT", "yes")
    environment = clean_environment(OMP_NUM_THREADS="1")
    assert not set(LAUNCHER_VARIABLES) & set(environment)
    assert (environment["RANKSCRIBE_TEST_KEPT"], environment["OMP_NUM_THREADS"]) == ("yes", "1")


def test_a_failure_among_several_shows_what_each_printed() -> None:
    with pytest.raises(pytest.fail.Exception) as failed, Launches(timeout=60) as launches:
        launches.start([sys.executable, "-c", "print('rank 0 waited')"])
        launches.start([sys.executable, "-c", "import sys; print('rank 1 broke'); sys.exit(1)"])
        launches.wait()
    message = str(failed.value)
    assert "exited 1." in message
    assert "(exit 0) printed:\nrank 0 waited" in message
    assert "(exit 1) printed:\nrank 1 broke" in message


def test_reading_a_running_process_s_output_leaves_what_it_prints_next_intact() -> None:
    code = "import sys, time; print('ready', flush=True); sys.stdin.read(); time.sleep(0.5)"
    code += "; print('after', flush=True)"
    with Launches(timeout=60) as launches:
        process = launches.start([sys.executable, "-c", code])
        deadline = time.monotonic() + 30
        while launches.printed(process) != "ready\n" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert launches.printed(process) == "ready\n"
        [end] = launches.wait()
    assert end.output == "ready\nafter\n"


def test_wait_until_returns_the_condition_s_value_while_the_process_runs() -> None:
    code = "import time; print('ready', flush=True); time.sleep(600)"
    with Launches(timeout=60) as launches:
        process = launches.start([sys.executable, "-c", code])
        said = launches.wait_until(
            process, lambda: "ready" in launches.printed(process) and "said", "ready"
        )
        assert said == "said"
        assert process.poll() is None  # still running: the test decides what happens to it
    assert process.poll() is not None  # killed on leaving the block


def test_wait_until_fails_with_the_output_when_the_process_ends_first() -> None:
    code = "import sys; print('gave up', flush=True); sys.exit(2)"
    with pytest.raises(pytest.fail.Exception) as failed, Launches(timeout=60) as launches:
        process = launches.start([sys.executable, "-c", code])
        launches.wait_until(process, lambda: False, "the first step")
    message = str(failed.value)
    assert "the first step did not happen before the process ended." in message
    assert "(exit 2) printed:\ngave up" in message


def test_wait_until_fails_on_its_timeout_and_kills_the_group() -> None:
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed, Launches(timeout=60) as launches:
        process = launches.start([sys.executable, "-c", LAUNCHER])
        launches.wait_until(process, lambda: False, "the first step", timeout=2)
    assert time.monotonic() - started < 30
    message = str(failed.value)
    assert "the first step did not happen within 2 s; every process group was killed" in message
    assert_the_rank_died(message)
