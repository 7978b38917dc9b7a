"""The rules other packages take from ``rankscribe.writer.files``: names, argument checks and
atomic writes, each stated once (``docs/file-format.md``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rankscribe.writer import SummaryRecord, events, files, reader
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


def test_the_writers_argument_errors_are_its_own_and_name_the_argument(tmp_path: Path) -> None:
    # The rule and its wording are rankscribe.ranks.arguments' (tests/ranks/test_arguments.py);
    # here: the writer raises its own errors, in that wording, naming its public function.
    with pytest.raises(WriterTypeError) as caught:
        SummaryRecord(tmp_path / "never", num_process=True)
    assert str(caught.value) == (
        "For 'SummaryRecord', the argument 'num_process' must be an int >= 1, but got True (bool)."
    )
    with pytest.raises(WriterValueError) as refused:
        SummaryRecord(tmp_path / "never", num_process=0)
    assert str(refused.value) == (
        "For 'SummaryRecord', the argument 'num_process' must be an int >= 1, but got 0."
    )
    assert not (tmp_path / "never").exists()
    with pytest.raises(WriterTypeError) as flag:
        events.read_events(tmp_path / "events", strict=1)  # type: ignore[arg-type]
    assert str(flag.value) == (
        "For 'read_events', the argument 'strict' must be a bool, but got 1 (int)."
    )


def test_every_file_opens_with_the_version_stated_in_files(tmp_path) -> None:
    with SummaryRecord(tmp_path, formats=("mindinsight", "tensorboard")) as record:
        record.add_value("scalar", "loss", 0.5)
        record.record(1)
    summary = next(iter(events.read_events(reader.list_summary_files(tmp_path, "summary")[0])))
    board = next(
        iter(events.read_tensorboard_events(reader.list_summary_files(tmp_path, "tensorboard")[0]))
    )
    assert summary.version == files.SUMMARY_FILE_VERSION == "MindSpore.Event:1"
    assert board.file_version == files.TENSORBOARD_FILE_VERSION == "brain.Event:2"
