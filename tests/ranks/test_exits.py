"""A rank's program that ends on an uncaught exception aborts its MPI job, after the records close.

The exit handler's body (``abort_if_uncaught``) with a stand-in for mpi4py's ``MPI``; the
real job (plain ``python`` under ``mpiexec``, which hung before) is in
tests/integration/collector/test_mpi_collector.py.
"""

from __future__ import annotations

import atexit
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rankscribe.ranks.errors import RanksValueError
from rankscribe.ranks.exits import (
    ABORT_ENV,
    abort_if_uncaught,
    abort_on_uncaught_exception,
    before_abort,
)


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
