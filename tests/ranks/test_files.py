"""The job's files (rankscribe.ranks.files): rank directory names, event file names,
atomic writes."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from rankscribe.ranks import files
from rankscribe.ranks.errors import RanksTypeError, RanksValueError


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
    with pytest.raises(RanksValueError, match=r"rank must be a non-negative int, got -1"):
        files.rank_dir_name(-1)
    with pytest.raises(RanksTypeError, match=r"rank must be an int, got bool True"):
        files.rank_dir_name(True)
    with pytest.raises(RanksTypeError, match=r"rank must be an int, got str '1'"):
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
