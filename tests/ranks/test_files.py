"""The job's files (rankscribe.ranks.files): rank directory names, event file names,
atomic writes, and reading a file that someone else may have planted."""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from rankscribe.ranks import files
from rankscribe.ranks.errors import RanksTypeError, RanksValueError
from rankscribe.ranks.files import (
    RANK_DIRS_FILE_NAME,
    UnsafeFileError,
    read_rank_dirs,
    write_rank_dirs,
)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("events.out.events.summary.1795244534.0.vm_MS", "summary"),
        ("events.out.events.summary.1795244534.vm_MS_lineage", "lineage"),
        ("events.out.events.summary.1795244534.vm_explain", None),  # MindSpore 1.x XAI
        ("events.out.tfevents.1795244534.vm.1.0", "tensorboard"),
        ("my.tfevents", "tensorboard"),  # TensorBoard: "tfevents" anywhere
        ("summary.txt", None),
        ("rank_0", None),
        (".rankscribe-job", None),
    ],
)
def test_event_files_are_told_by_the_viewers_rules(name: str, kind: str | None) -> None:
    assert files.event_file_kind(name) == kind


# ------------------------------------------------------------- rank directories


@pytest.mark.parametrize("rank", [0, 1, 9, 10, 1023, 10**12])
def test_a_rank_dir_name_reads_back_as_its_rank(rank: int) -> None:
    name = files.rank_dir_name(rank)
    assert name == f"rank_{rank}"
    assert files.parse_rank_dir_name(name) == rank


@pytest.mark.parametrize(
    "name",
    [
        "rank_01",  # a leading zero: rank 1 has one name, rank_1
        "rank_00",
        "rank_\u0661",  # ARABIC-INDIC DIGIT ONE: int() would read it as 1
        "rank_\uff11",  # FULLWIDTH DIGIT ONE
        "rank_-1",
        "rank_+1",
        "rank_",
        "rank_1\n",
        "rank_1 ",
        " rank_1",
        "rank_1x",
        "Rank_1",
        "rank1",
        "rank_1.5",
        "",
    ],
)
def test_only_the_one_spelling_of_a_rank_is_a_rank_dir(name: str) -> None:
    assert files.parse_rank_dir_name(name) is None


def test_a_rank_dir_of_no_rank_is_refused_naming_rank() -> None:
    with pytest.raises(RanksValueError, match=r"rank must be an int >= 0, got -1"):
        files.rank_dir_name(-1)
    with pytest.raises(RanksTypeError, match=r"rank must be an int >= 0, got True \(bool\)"):
        files.rank_dir_name(True)
    with pytest.raises(RanksTypeError, match=r"rank must be an int >= 0, got '1' \(str\)"):
        files.rank_dir_name("1")  # type: ignore[arg-type]
    with pytest.raises(RanksTypeError, match=r"name must be a str, got bytes"):
        files.parse_rank_dir_name(b"rank_1")  # type: ignore[arg-type]


# ------------------------------------------------------------- atomic writes


def test_atomic_write_fsyncs_the_file_before_the_rename_and_the_directory_after(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, int, bool]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor: int) -> None:
        info = os.fstat(descriptor)
        calls.append(("fsync", info.st_ino, stat.S_ISDIR(info.st_mode)))
        real_fsync(descriptor)

    def replace(source: str, target: str) -> None:
        calls.append(("replace", os.lstat(source).st_ino, False))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = files.atomic_write(tmp_path / "index.json", [b"{", memoryview(b"}")])

    file_inode, directory_inode = os.stat(path).st_ino, os.stat(tmp_path).st_ino
    assert calls == [
        ("fsync", file_inode, False),  # the data is on disk before its name points at it
        ("replace", file_inode, False),
        ("fsync", directory_inode, True),  # and the new name survives a power loss
    ]
    assert (tmp_path / "index.json").read_bytes() == b"{}"


def test_a_file_written_to_drop_its_cache_is_advised_so_once_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[object, ...]] = []
    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:
        calls.append(("fsync", os.fstat(descriptor).st_ino))
        real_fsync(descriptor)

    def advise(descriptor: int, offset: int, length: int, advice: int) -> None:
        calls.append(("advise", os.fstat(descriptor).st_ino, offset, length, advice))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "posix_fadvise", advise, raising=False)
    path = files.atomic_write(tmp_path / "set.ckpt", [b"a" * 4096, b"b"], drop_cache=True)
    inode = os.stat(path).st_ino
    # After the file's fsync (its pages then hold what the disk holds), the whole file.
    assert calls[:2] == [("fsync", inode), ("advise", inode, 0, 0, os.POSIX_FADV_DONTNEED)]
    assert Path(path).read_bytes() == b"a" * 4096 + b"b"
    calls.clear()
    files.atomic_write(tmp_path / "index.json", [b"{}"])  # the default keeps the cache
    assert [call[0] for call in calls] == ["fsync", "fsync"]


def test_dropping_a_files_cache_is_advice_that_may_fail_or_be_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*arguments: int) -> None:
        raise OSError(errno.ESPIPE, "Illegal seek")

    monkeypatch.setattr(os, "posix_fadvise", refused, raising=False)
    path = files.atomic_write(tmp_path / "a.ckpt", [b"data"], drop_cache=True)
    assert Path(path).read_bytes() == b"data"
    monkeypatch.delattr(os, "posix_fadvise", raising=False)  # a system without it
    path = files.atomic_write(tmp_path / "b.ckpt", [b"more"], drop_cache=True)
    assert Path(path).read_bytes() == b"more"


def test_a_failed_fsync_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "index.json"
    files.atomic_write(target, [b"old"], mode=files.file_mode(False))

    def failing_fsync(descriptor: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        files.atomic_write(target, [b"new"])
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["index.json"]


# ------------------------------------------------------------- reading what others may plant


@pytest.fixture
def bounded() -> Iterator[None]:
    """A test here that blocks on a FIFO fails after 10 s instead of hanging the run."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise TimeoutError("blocked on the planted file")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def plant(tmp_path: Path, what: str) -> Path:
    """Something other than a regular file of ours at ``tmp_path/planted``."""
    path = tmp_path / "planted"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "link to a file":
        (tmp_path / "target").write_bytes(b"secret")
        path.symlink_to(tmp_path / "target")
    elif what == "link to a fifo":
        os.mkfifo(tmp_path / "pipe")
        path.symlink_to(tmp_path / "pipe")
    elif what == "dangling link":
        path.symlink_to(tmp_path / "nowhere")
    elif what == "directory":
        path.mkdir()
    elif what == "socket":
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.close()  # the socket file stays
    return path


@pytest.mark.parametrize(
    ("what", "found"),
    [
        ("fifo", "a FIFO"),
        ("link to a file", "a symbolic link"),
        ("link to a fifo", "a symbolic link"),
        ("dangling link", "a symbolic link"),
        ("directory", "a directory"),
        ("socket", "a socket"),
    ],
)
@pytest.mark.usefixtures("bounded")
def test_only_a_regular_file_is_opened_and_the_refusal_names_it(
    tmp_path: Path, what: str, found: str
) -> None:
    path = plant(tmp_path, what)
    expected = f"refusing to read {path}: it is {found}, not a regular file"
    with pytest.raises(UnsafeFileError, match=re.escape(expected)) as caught:
        files.open_regular(path)
    assert isinstance(caught.value, OSError)  # skipped wherever an unreadable file is
    assert caught.value.path == str(path)
    with pytest.raises(UnsafeFileError, match=re.escape(expected)):
        files.read_regular(path, limit=100)
    with pytest.raises(UnsafeFileError, match=re.escape(expected)):
        files.open_regular_descriptor(path)


def test_a_regular_file_reads_whole_or_up_to_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b"0123456789")
    with files.open_regular(path) as handle:
        assert handle.read() == b"0123456789"
    descriptor = files.open_regular_descriptor(path)
    try:
        assert os.read(descriptor, 100) == b"0123456789"
    finally:
        os.close(descriptor)
    assert files.read_regular(path) == b"0123456789"
    assert files.read_regular(path, limit=10) == b"0123456789"
    with pytest.raises(UnsafeFileError, match="it is longer than the 9 bytes expected"):
        files.read_regular(path, limit=9)
    with pytest.raises(FileNotFoundError):
        files.read_regular(tmp_path / "absent")
    with pytest.raises(RanksValueError, match="limit must be an int >= 0, got -1"):
        files.read_regular(path, limit=-1)


def test_a_file_others_may_write_is_refused_when_ownership_is_asked(tmp_path: Path) -> None:
    path = tmp_path / "index"
    path.write_bytes(b"ours")
    path.chmod(0o600)
    assert files.read_regular(path, owned=True) == b"ours"
    path.chmod(0o622)
    with pytest.raises(UnsafeFileError, match=r"others may write it \(mode 0622\)"):
        files.read_regular(path, owned=True)
    assert files.read_regular(path) == b"ours"  # no ownership rule asked: read


@pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a file to another user (uid 65534) needs root"
)
def test_a_file_of_another_user_is_refused_when_ownership_is_asked(tmp_path: Path) -> None:
    path = tmp_path / "index"
    path.write_bytes(b"theirs")
    path.chmod(0o644)
    os.chown(path, 65534, 65534)
    with pytest.raises(UnsafeFileError) as refused:
        files.read_regular(path, owned=True)
    assert refused.value.reason == (
        "it belongs to uid 65534 (nobody), not to this user, uid 0 (root)"
    )
    assert files.read_regular(path) == b"theirs"


@pytest.mark.usefixtures("bounded")
def test_fsync_directory_never_waits_on_a_fifo_at_the_name(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    files.fsync_directory(tmp_path / "pipe")  # best effort: returns, having synced nothing
    files.fsync_directory(tmp_path)


def test_the_directories_of_ranks_that_write_elsewhere_are_recorded(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    one, two, three = (str(tmp_path / name) for name in ("a/rank_1", "b/rank_2", "c/rank_1"))
    path = write_rank_dirs(job, {2: two, 1: one})
    assert path == str(job / RANK_DIRS_FILE_NAME)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o400
    assert read_rank_dirs(job) == {1: one, 2: two}
    write_rank_dirs(job, {1: three})  # replaced whole
    assert read_rank_dirs(job) == {1: three}


def test_a_rank_directory_must_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(RanksValueError, match=r"rank 1 must be an absolute path, got 'runs/a'"):
        write_rank_dirs(tmp_path, {1: "runs/a"})
    with pytest.raises(RanksTypeError, match=r"rank 1 must be a str \(an absolute path\), got int"):
        write_rank_dirs(tmp_path, {1: 5})  # type: ignore[dict-item]
    assert not (tmp_path / RANK_DIRS_FILE_NAME).exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b"[1]", b'{"rank_dirs": 3}', b'{"rank_dirs": {"x": "/a", "1": "rel"}}'],
)
def test_a_record_that_is_not_one_reads_as_none(tmp_path: Path, content: bytes) -> None:
    (tmp_path / RANK_DIRS_FILE_NAME).write_bytes(content)
    assert read_rank_dirs(tmp_path) == {}


def test_a_planted_link_or_fifo_is_not_read(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_rank_dirs(elsewhere, {1: "/runs/a/rank_1"})
    job = tmp_path / "job"
    job.mkdir()
    (job / RANK_DIRS_FILE_NAME).symlink_to(elsewhere / RANK_DIRS_FILE_NAME)
    assert read_rank_dirs(job) == {}
    fifo_job = tmp_path / "fifo"
    fifo_job.mkdir()
    os.mkfifo(fifo_job / RANK_DIRS_FILE_NAME)
    assert read_rank_dirs(fifo_job) == {}  # returns at once: never blocks on the FIFO
    assert read_rank_dirs(tmp_path / "missing") == {}
