"""``rankscribe.ranks.files.exclusive_lock``: a lock between processes that leaves no file.

docs/layout.md, "Lock files". ``flock`` locks an open file, so two acquisitions in one
process (two opens of the name) exclude each other as two processes do.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from rankscribe.ranks.errors import UnsafeFileError
from rankscribe.ranks.files import GROUP_READABLE_ENV, LockTimeoutError, exclusive_lock
from tests._support.launchers import Launches, clean_environment


@pytest.mark.parametrize("shared, expected", [(False, 0o600), (True, 0o640)])
def test_the_lock_file_is_private_while_held_and_gone_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool, expected: int
) -> None:
    if shared:
        monkeypatch.setenv(GROUP_READABLE_ENV, "1")
    path = tmp_path / "x.lock"
    with exclusive_lock(path, timeout=1.0):
        assert stat.S_IMODE(os.lstat(path).st_mode) == expected
    assert os.listdir(tmp_path) == []


def test_a_held_lock_is_refused_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with exclusive_lock(path, timeout=1.0):
        with pytest.raises(LockTimeoutError) as caught, exclusive_lock(path, timeout=0):
            pass
        assert isinstance(caught.value, TimeoutError)
        assert str(path) in str(caught.value)
        assert path.exists()  # the refused one removed nothing
    assert not path.exists()
    with exclusive_lock(path, timeout=0):  # free again
        pass


def test_an_error_inside_still_releases_and_removes(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with pytest.raises(KeyError), exclusive_lock(path, timeout=1.0):
        raise KeyError("inside")
    assert not path.exists()
    with exclusive_lock(path, timeout=0):
        pass


def test_a_planted_link_or_fifo_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_bytes(b"keep")
    (tmp_path / "link.lock").symlink_to(target)
    with (
        pytest.raises(UnsafeFileError, match="symbolic link"),
        exclusive_lock(tmp_path / "link.lock", timeout=1.0),
    ):
        pass
    assert target.read_bytes() == b"keep"
    assert (tmp_path / "link.lock").is_symlink()  # not ours: left where it is
    os.mkfifo(tmp_path / "fifo.lock")
    with (
        pytest.raises(UnsafeFileError, match="FIFO"),
        exclusive_lock(tmp_path / "fifo.lock", timeout=1.0),
    ):
        pass


def test_a_file_removed_between_open_and_lock_is_not_taken_for_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a removed lock file opens: B opens the file, its holder A removes it and
    unlocks, C makes a new file and locks it, then B locks the file it opened. B must see
    that its file is no longer the one at the name, and wait for C's."""
    path = tmp_path / "x.lock"
    first = exclusive_lock(path, timeout=1.0)
    first.__enter__()
    third = exclusive_lock(path, timeout=1.0)
    real_open = os.open
    interleaved: list[str] = []

    def open_then_let_the_others_run(name: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        descriptor = real_open(name, flags, *args, **kwargs)
        if os.fspath(name) == str(path) and not interleaved:
            interleaved.append("B opened")
            first.__exit__(None, None, None)  # A: removes its file, then unlocks
            third.__enter__()  # C: a new file at the name, locked
        return descriptor

    monkeypatch.setattr(os, "open", open_then_let_the_others_run)
    with pytest.raises(LockTimeoutError), exclusive_lock(path, timeout=0):
        pytest.fail("B holds the lock while C holds it")
    monkeypatch.undo()
    assert interleaved == ["B opened"]
    assert path.exists()  # C's, still held
    third.__exit__(None, None, None)
    assert not path.exists()


# Each process takes the lock many times; inside it, it marks itself present (a file made
# with O_EXCL: a second holder would find it there) and increments a shared counter by a
# read and a write apart, which loses counts if two ever hold the lock together.
_WORKER = """
import os, sys
from rankscribe.ranks.files import exclusive_lock
lock, inside, counter, times = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for _ in range(times):
    with exclusive_lock(lock, timeout=60.0):
        os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        with open(counter) as handle:
            value = int(handle.read())
        with open(counter, "w") as handle:
            handle.write(str(value + 1))
        os.unlink(inside)
"""


def test_processes_never_hold_it_together_and_no_file_is_left(tmp_path: Path) -> None:
    lock, inside, counter = tmp_path / "job.lock", tmp_path / "inside", tmp_path / "counter"
    counter.write_text("0")
    processes, times = 3, 150
    with Launches(60.0) as launches:
        for _ in range(processes):
            launches.start(
                [sys.executable, "-c", _WORKER, lock, inside, counter, str(times)],
                env=clean_environment(),
            )
        launches.wait()  # a worker that found another inside fails here (FileExistsError)
    assert int(counter.read_text()) == processes * times
    assert sorted(os.listdir(tmp_path)) == ["counter"]
