"""A rank's program that ends on an uncaught exception aborts its MPI job, after the records close;
one sent SIGTERM during training unwinds, runs the same callbacks, and ends by the signal.

The exit handler's body (``abort_if_uncaught``) with a stand-in for mpi4py's ``MPI``; the
real job (plain ``python`` under ``mpiexec``, which hung before) is in
tests/integration/collector/test_mpi_collector.py.
"""

from __future__ import annotations

import atexit
import logging
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rankscribe.ranks.errors import RanksTypeError, RanksValueError
from rankscribe.ranks.exits import (
    ABORT_ENV,
    abort_if_uncaught,
    abort_on_uncaught_exception,
    before_abort,
    end_cleanly_on_sigterm,
)
from tests._support.children import start_until_ready


class World:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def Get_rank(self) -> int:  # (mpi4py's names)
        return 1

    def Get_size(self) -> int:
        return 2

    def Abort(self, code: int) -> None:
        self.calls.append(f"Abort({code})")


class Mpi:
    def __init__(self, finalized: bool = False) -> None:
        self.calls: list[str] = []
        self.COMM_WORLD = World(self.calls)
        self.finalized = finalized

    def Is_finalized(self) -> bool:
        return self.finalized


@pytest.fixture
def registered(mpi: Mpi) -> Iterator[Callable[[Callable[[], object]], None]]:
    """Registers callbacks for one test, forgotten after it."""
    forget: list[Callable[[], None]] = []
    yield lambda callback: forget.append(before_abort(callback))
    for undo in forget:
        undo()


@pytest.fixture
def mpi() -> Mpi:
    return Mpi()


def ending_on(monkeypatch: pytest.MonkeyPatch, error: BaseException | None) -> None:
    """The program ends on ``error`` (Python keeps an uncaught exception as sys.last_*)."""
    for name in ("last_exc", "last_value"):
        monkeypatch.setattr(sys, name, error, raising=False)


def test_an_uncaught_exception_closes_first_then_aborts_the_job(
    mpi: Mpi, registered: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    registered(lambda: mpi.calls.append("close records"))
    registered(lambda: mpi.calls.append("say how to merge"))
    ending_on(monkeypatch, RuntimeError("data error"))
    assert abort_if_uncaught(mpi) is True
    assert mpi.calls[-3:] == ["close records", "say how to merge", "Abort(1)"]
    said = capsys.readouterr().err
    assert (
        "rank 1 of 2: the program ended on an uncaught RuntimeError; aborting the MPI job" in said
    )
    assert f"{ABORT_ENV}=0" in said


def test_a_failing_callback_is_logged_and_the_abort_still_comes(
    mpi: Mpi, registered: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise OSError("disk full")

    registered(broken)
    registered(lambda: mpi.calls.append("next"))
    ending_on(monkeypatch, ValueError("bad batch"))
    with caplog.at_level(logging.ERROR):
        abort_if_uncaught(mpi)
    assert mpi.calls[-2:] == ["next", "Abort(1)"]
    assert "before aborting the job failed" in caplog.text and "disk full" in caplog.text


@pytest.mark.parametrize(
    "error", [None, KeyboardInterrupt()], ids=["no uncaught exception", "Ctrl-C"]
)
def test_no_abort_without_an_uncaught_exception_or_on_ctrl_c(
    mpi: Mpi, registered: Any, monkeypatch: pytest.MonkeyPatch, error: BaseException | None
) -> None:
    registered(lambda: mpi.calls.append("close records"))
    ending_on(monkeypatch, error)
    assert abort_if_uncaught(mpi) is False
    assert mpi.calls == []


def test_no_abort_once_mpi_is_finalised(monkeypatch: pytest.MonkeyPatch) -> None:
    finalized = Mpi(finalized=True)
    ending_on(monkeypatch, RuntimeError("late"))
    assert abort_if_uncaught(finalized) is False
    assert finalized.calls == []


def test_a_callback_given_twice_runs_once_and_is_forgotten_when_asked(
    mpi: Mpi, monkeypatch: pytest.MonkeyPatch
) -> None:
    def close() -> None:
        mpi.calls.append("close")

    before_abort(close)
    forget = before_abort(close)
    ending_on(monkeypatch, RuntimeError("x"))
    abort_if_uncaught(mpi)
    assert mpi.calls.count("close") == 1
    forget()
    abort_if_uncaught(mpi)
    assert mpi.calls.count("close") == 1


def test_callbacks_given_first_run_before_the_others_in_the_order_given(
    mpi: Mpi, monkeypatch: pytest.MonkeyPatch
) -> None:
    ending_on(monkeypatch, RuntimeError("data error"))
    ran: list[str] = []
    forget = [
        before_abort(lambda: ran.append("closes the records")),
        before_abort(lambda: ran.append("writes into them"), first=True),
        before_abort(lambda: ran.append("waits for the others")),
        before_abort(lambda: ran.append("writes too"), first=True),
    ]
    try:
        assert abort_if_uncaught(mpi)
    finally:
        for undo in forget:
            undo()
    assert ran == ["writes into them", "writes too", "closes the records", "waits for the others"]


def test_a_callback_that_cannot_be_hashed_may_go_first(
    mpi: Mpi, monkeypatch: pytest.MonkeyPatch
) -> None:
    ending_on(monkeypatch, RuntimeError("data error"))

    class Writes:
        __hash__ = None  # type: ignore[assignment]

        def __init__(self) -> None:
            self.calls = 0

        def __eq__(self, other: object) -> bool:
            return self is other

        def __call__(self) -> None:
            self.calls += 1

    writes = Writes()
    forget = before_abort(writes, first=True)
    try:
        assert abort_if_uncaught(mpi)
    finally:
        forget()
    assert writes.calls == 1


def test_before_abort_refuses_a_first_that_is_not_a_bool() -> None:
    with pytest.raises(RanksTypeError, match="first must be a bool, got str"):
        before_abort(print, first="yes")  # type: ignore[arg-type]


def test_before_abort_refuses_what_it_cannot_call() -> None:
    with pytest.raises(RanksValueError, match="callback must be callable, got str"):
        before_abort("close")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["yes", "2", ""])
def test_a_bad_abort_setting_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, mpi: Mpi, value: str
) -> None:
    monkeypatch.setenv(ABORT_ENV, value)
    with pytest.raises(RanksValueError, match=f"{ABORT_ENV} must be 0 or 1, got '{value}'"):
        abort_on_uncaught_exception(mpi)


def test_the_abort_setting_0_installs_no_exit_handler(
    monkeypatch: pytest.MonkeyPatch, mpi: Mpi
) -> None:
    installed: list[Any] = []
    monkeypatch.setattr(atexit, "register", lambda *args: installed.append(args))
    monkeypatch.setenv(ABORT_ENV, "0")
    abort_on_uncaught_exception(mpi)
    assert installed == []


ABORTING = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from rankscribe.ranks.exits import abort_if_uncaught

    out = Path(sys.argv[1])

    class World:
        def Get_rank(self): return 1
        def Get_size(self): return 2
        def Abort(self, code):
            (out / "aborted").write_text(repr(time.monotonic()))

    class Mpi:
        COMM_WORLD = World()
        def Is_finalized(self): return False

    print("ready", flush=True)
    sys.last_exc = sys.last_value = RuntimeError("the error's own line")
    sys.stderr.write("RuntimeError: the error's own line\\n" * 200)  # a long traceback
    abort_if_uncaught(Mpi())
    """
)


@pytest.mark.parametrize("reads_after", [0.3, 3.0])
def test_the_abort_waits_for_the_launcher_to_read_the_traceback_at_most_a_second(
    tmp_path: Path, reads_after: float
) -> None:
    """The launcher (here the test) reads the rank's stderr through a pipe: MPICH's
    dropped what it had not read at the abort. A launcher that never reads does not hold
    the abort past a second."""
    child = start_until_ready(ABORTING, str(tmp_path))
    time.sleep(reads_after)
    reading = time.monotonic()
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr
    assert stderr.count("RuntimeError: the error's own line") == 200
    assert stderr.endswith(
        "the program ended on an uncaught RuntimeError; aborting the MPI "
        "job so that the other ranks do not wait for this one "
        f"({ABORT_ENV}=0 waits instead)\n"
    )
    aborted = float((tmp_path / "aborted").read_text())
    if reads_after < 1.0:
        assert aborted >= reading  # the abort came once the launcher had read it all
    else:
        assert aborted < reading  # not after the launcher read


# --------------------------------------------------------------------------- SIGTERM
# The signal and the end by it are the process's: the program runs in a child process.


EXITS = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from rankscribe.ranks.exits import before_abort, end_cleanly_on_sigterm

    out = Path(sys.argv[1])
    before_abort(lambda: (out / "callback").write_text("ran"))
    release = end_cleanly_on_sigterm()
    try:
        print("ready", flush=True)
        while True:
            time.sleep(0.01)
    except Exception:
        (out / "caught").write_text("an except Exception stopped it")
    finally:
        print("unwinding", flush=True)
        time.sleep(float(sys.argv[2]))
        (out / "finally").write_text("ran")
    """
)


def test_the_program_unwinds_and_the_exit_callbacks_run_before_the_signal_ends_it(
    tmp_path: Path,
) -> None:
    child = start_until_ready(EXITS, str(tmp_path), "0")
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM, stderr
    assert (tmp_path / "finally").read_text() == "ran"
    assert (tmp_path / "callback").read_text() == "ran"  # before_abort's, at exit
    assert not (tmp_path / "caught").exists()  # a SystemExit: no except Exception takes it


def test_a_second_sigterm_while_the_program_unwinds_does_not_cut_its_writing_short(
    tmp_path: Path,
) -> None:
    child = start_until_ready(EXITS, str(tmp_path), "1.0")
    child.send_signal(signal.SIGTERM)
    assert child.stdout is not None
    assert child.stdout.readline() == "unwinding\n"
    child.send_signal(signal.SIGTERM)  # while its finally block sleeps
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM, stderr
    assert (tmp_path / "finally").read_text() == "ran"
    assert stderr.count("SIGTERM during training") == 1


def test_without_the_collector_a_sigterm_still_ends_the_process_at_once(tmp_path: Path) -> None:
    # The same program, the handler never set: the default action, nothing unwinds.
    script = EXITS.replace("release = end_cleanly_on_sigterm()", "")
    child = start_until_ready(script, str(tmp_path), "0")
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM
    assert not (tmp_path / "finally").exists()


def test_a_sigterm_handler_of_the_programs_own_is_left_alone() -> None:
    def own(signum: int, frame: object) -> None:
        """The program's."""

    before = signal.signal(signal.SIGTERM, own)
    try:
        release = end_cleanly_on_sigterm()
        assert signal.getsignal(signal.SIGTERM) is own
        release()
        assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, before)


def test_sigterm_is_set_for_nested_runs_and_the_default_comes_back_with_the_last() -> None:
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    outer = end_cleanly_on_sigterm()
    inner = end_cleanly_on_sigterm()
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    inner()
    inner()  # a release given twice counts once
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    outer()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_training_that_ended_in_another_thread_leaves_sigterm_its_default_action(
    tmp_path: Path,
) -> None:
    """The release came from a thread, which cannot set a handler: the handler left
    ends the process at once, as the default would (nothing unwinds)."""
    script = EXITS.replace(
        "release = end_cleanly_on_sigterm()",
        "import threading\n"
        "release = end_cleanly_on_sigterm()\n"
        "ender = threading.Thread(target=release)\n"
        "ender.start()\n"
        "ender.join()",
    )
    child = start_until_ready(script, str(tmp_path), "0")
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM, stderr
    assert not (tmp_path / "finally").exists()
    assert "SIGTERM during training" not in stderr


def test_outside_the_main_thread_sigterm_is_not_touched() -> None:
    releases: list[Callable[[], None]] = []
    thread = threading.Thread(target=lambda: releases.append(end_cleanly_on_sigterm()))
    thread.start()
    thread.join(10)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    releases[0]()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
