"""The rules other packages take from ``rankscribe.writer.files``: names, argument checks and
atomic writes, each stated once (``docs/file-format.md``)."""

from __future__ import annotations

import errno
import os
import stat

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord, WriterTypeError, WriterValueError, files, reader
from rankscribe.writer.files import FileKind, file_kind, parse_file_name, tensorboard_file_name


def test_a_tensorboard_name_without_a_label_is_unique_per_writer() -> None:
    first = tensorboard_file_name(1795245260, "vm")
    second = tensorboard_file_name(1795245260, "vm")
    assert first != second
    for name in (first, second):
        assert name.startswith(f"events.out.tfevents.1795245260.vm.{os.getpid()}.")
        assert file_kind(name) is FileKind.TENSORBOARD


def test_a_labelled_tensorboard_name_is_fixed_and_read_by_tensorboards_rule() -> None:
    name = tensorboard_file_name(1795245260, "vm", label="rankscribe-hparams")
    assert name == "events.out.tfevents.1795245260.vm.rankscribe-hparams"
    assert name == tensorboard_file_name(1795245260, "vm", label="rankscribe-hparams")
    parsed = parse_file_name(name)
    assert (parsed.kind, parsed.timestamp) == (FileKind.TENSORBOARD, 1795245260)


@pytest.mark.parametrize("label", ["", "a/b", "..\x00", "job\n", "jöb", 7])
def test_a_label_that_is_no_plain_word_is_refused(label: object) -> None:
    with pytest.raises(WriterValueError, match="label must be a non-empty word"):
        tensorboard_file_name(1795245260, "vm", label=label)  # type: ignore[arg-type]


# ------------------------------------------------------------- argument checks


def test_the_writers_int_rule_refuses_bool_everywhere() -> None:
    from rankscribe.writer._arguments import check_bool, check_int, is_int, is_integral, is_real

    assert [is_int(value) for value in (3, -1, True, False, 3.0, "3")] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert is_integral(np.int64(3)) and not is_integral(np.bool_(True)) and not is_integral(True)
    assert is_real(np.float32(0.5)) and is_real(2) and not is_real(True)
    with pytest.raises(
        WriterTypeError,
        match=r"For 'f', the argument 'n' must be an int, but "
        r"got bool\.",
    ):
        check_int(True, "n", caller="f")
    with pytest.raises(WriterValueError, match=r"'n' must be >= 0, but got -1\."):
        check_int(-1, "n", caller="f", minimum=0)
    with pytest.raises(WriterValueError, match=r"'n' must be greater than 0, but got 0\."):
        check_int(0, "n", caller="f", minimum=1)
    assert check_int(0, "n", caller="f", minimum=0) == 0
    with pytest.raises(WriterTypeError, match=r"'flag' must be a bool, but got int\."):
        check_bool(1, "flag", caller="f")


def test_every_file_opens_with_the_version_stated_in_files(tmp_path) -> None:
    with SummaryRecord(tmp_path, formats=("mindinsight", "tensorboard")) as record:
        record.add_value("scalar", "loss", 0.5)
        record.record(1)
    summary = next(iter(reader.read_events(reader.list_summary_files(tmp_path, "summary")[0])))
    board = next(
        iter(reader.read_tensorboard_events(reader.list_summary_files(tmp_path, "tensorboard")[0]))
    )
    assert summary.version == files.SUMMARY_FILE_VERSION == "MindSpore.Event:1"
    assert board.file_version == files.TENSORBOARD_FILE_VERSION == "brain.Event:2"


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
    with pytest.raises(WriterValueError, match=r"'rank' must be >= 0, but got -1"):
        files.rank_dir_name(-1)
    with pytest.raises(WriterTypeError, match=r"'rank' must be an int, but got bool"):
        files.rank_dir_name(True)
    with pytest.raises(WriterTypeError, match=r"'rank' must be an int, but got str"):
        files.rank_dir_name("1")  # type: ignore[arg-type]
    with pytest.raises(WriterTypeError, match=r"'name' must be a str, but got bytes"):
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
