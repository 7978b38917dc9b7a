"""The rules other packages take from ``rankscribe.writer.files``: names, wire helpers and
atomic writes, each stated once (``docs/file-format.md``)."""

from __future__ import annotations

import os

import numpy as np
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
