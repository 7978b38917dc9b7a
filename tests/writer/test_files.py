"""The rules other packages take from ``rankscribe.writer.files``: names, argument checks and
atomic writes, each stated once (``docs/file-format.md``)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rankscribe.writer import SummaryRecord, files, reader
from rankscribe.writer.errors import WriterTypeError, WriterValueError
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
    # private: the argument-check rules themselves (one family, no public door)
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
