"""Ranks sent SIGTERM together wait for each other's marks before their processes end
(``rankscribe.ranks.exits.mark_terminated_and_wait``): the first rank done no longer has
``mpiexec`` kill the others while they write. The real job:
tests/integration/collector/test_mpi_collector.py."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from rankscribe.ranks.errors import RanksTypeError, RanksValueError
from rankscribe.ranks.exits import (
    TERMINATED_MARK_PREFIX,
    forget_terminated_mark,
    mark_terminated_and_wait,
)


def test_a_rank_waits_for_the_marks_still_to_come(tmp_path: Path) -> None:
    (tmp_path / f"{TERMINATED_MARK_PREFIX}0").touch()
    late = threading.Timer(0.3, (tmp_path / f"{TERMINATED_MARK_PREFIX}2").touch)
    late.start()
    started = time.monotonic()
    assert mark_terminated_and_wait(str(tmp_path), 1, 3, timeout=10.0) == []
    assert 0.25 <= time.monotonic() - started < 5.0
    late.join()
    assert (tmp_path / f"{TERMINATED_MARK_PREFIX}1").is_file()


def test_marks_that_never_come_are_named_after_the_bound(tmp_path: Path) -> None:
    started = time.monotonic()
    assert mark_terminated_and_wait(str(tmp_path), 0, 3, timeout=0.2) == [1, 2]
    assert time.monotonic() - started >= 0.2


def test_a_run_forgets_its_own_stale_mark_and_no_other(tmp_path: Path) -> None:
    for rank in (0, 1):
        (tmp_path / f"{TERMINATED_MARK_PREFIX}{rank}").touch()
    forget_terminated_mark(str(tmp_path), 1)
    forget_terminated_mark(str(tmp_path), 1)  # none left: nothing to do
    assert sorted(os.listdir(tmp_path)) == [f"{TERMINATED_MARK_PREFIX}0"]


def test_a_mark_is_never_written_through_a_planted_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / f"{TERMINATED_MARK_PREFIX}0").symlink_to(target)
    with pytest.raises(OSError):  # O_NOFOLLOW: the link is refused
        mark_terminated_and_wait(str(tmp_path), 0, 1, timeout=0.0)
    assert target.read_text() == "keep"


def test_a_fifo_planted_at_the_mark_fails_at_once_instead_of_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / f"{TERMINATED_MARK_PREFIX}0")
    started = time.monotonic()
    with pytest.raises(OSError):  # ENXIO: a FIFO without a reader, opened non-blocking
        mark_terminated_and_wait(str(tmp_path), 0, 1, timeout=0.0)
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ((1, 2), RanksTypeError, "job_dir"),
        (("d", -1, 2), RanksValueError, "rank"),
        (("d", 2, 2), RanksValueError, "rank"),
        (("d", 0, 0), RanksValueError, "world_size"),
        (("d", 0, 2.5), RanksTypeError, "world_size"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    tmp_path: Path, arguments: tuple[object, ...], error: type[Exception], words: str
) -> None:
    call = mark_terminated_and_wait if len(arguments) == 3 else forget_terminated_mark
    with pytest.raises(error, match=words):
        call(*arguments)  # type: ignore[arg-type]
    with pytest.raises(RanksValueError, match="timeout"):
        mark_terminated_and_wait(str(tmp_path), 0, 1, timeout=float("inf"))
    assert os.listdir(tmp_path) == []
