"""The rules other packages take from ``rankscribe.writer.files``: names, wire helpers and
atomic writes, each stated once (``docs/file-format.md``)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from rankscribe.writer import SummaryRecord, WriterTypeError, WriterValueError, files, reader
from rankscribe.writer.files import FileKind, file_kind, parse_file_name, tensorboard_file_name
from rankscribe.writer.pb import summary_pb2


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


def test_the_writers_argument_errors_are_its_own_and_name_the_argument(tmp_path: Path) -> None:
    # The rule and its wording are rankscribe.ranks.arguments' (tests/ranks/test_arguments.py);
    # here: the writer raises its own errors, in that wording, naming its public function.
    with pytest.raises(WriterTypeError) as caught:
        files.rank_dir_name(True)
    assert str(caught.value) == (
        "For 'rank_dir_name', the argument 'rank' must be an int >= 0, but got True (bool)."
    )
    with pytest.raises(WriterValueError) as refused:
        files.rank_dir_name(-1)
    assert str(refused.value) == (
        "For 'rank_dir_name', the argument 'rank' must be an int >= 0, but got -1."
    )
    with pytest.raises(WriterTypeError) as flag:
        reader.read_events(tmp_path / "events", strict=1)  # type: ignore[arg-type]
    assert str(flag.value) == (
        "For 'read_events', the argument 'strict' must be a bool, but got 1 (int)."
    )


# ------------------------------------------------------------- wire helpers


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        ((1 << 64) - 1, b"\xff" * 9 + b"\x01"),
        (-1, b"\xff" * 9 + b"\x01"),
    ],
)
def test_varint_is_protobufs_base_128_encoding(value: int, encoded: bytes) -> None:
    assert files.varint(value) == encoded


def test_varint_and_field_key_build_what_protobuf_parses() -> None:
    step = 1 << 40
    payload = files.varint(step)
    # Event.step is field 2 (varint); Event.version is field 3 (length-delimited).
    version = files.SUMMARY_FILE_VERSION.encode()
    event = summary_pb2.Event.FromString(
        b"\x10" + payload + files.field_key(3) + files.varint(len(version)) + version
    )
    assert (event.step, event.version) == (step, "MindSpore.Event:1")
    assert files.field_key(5) == b"\x2a"  # Event.summary
    assert files.field_key(16) == b"\x82\x01"  # a field number past 15 takes two bytes


@pytest.mark.parametrize("value", [True, 1.0, "1", None])
def test_varint_refuses_what_is_not_an_int(value: object) -> None:
    with pytest.raises(WriterTypeError, match="a varint encodes an int, but got"):
        files.varint(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [1 << 64, -(1 << 63) - 1])
def test_varint_refuses_what_no_64_bit_field_holds(value: int) -> None:
    with pytest.raises(WriterValueError, match=r"\[-2\*\*63, 2\*\*64 - 1\]"):
        files.varint(value)


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
    with pytest.raises(WriterValueError, match=r"'rank' must be an int >= 0, but got -1\."):
        files.rank_dir_name(-1)
    with pytest.raises(WriterTypeError, match=r"'rank' must be an int >= 0, but got True \(bool\)"):
        files.rank_dir_name(True)
    with pytest.raises(WriterTypeError, match=r"'rank' must be an int >= 0, but got '1' \(str\)"):
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
