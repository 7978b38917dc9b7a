"""The rules other packages take from ``rankscribe.writer.files``: names, wire helpers and
atomic writes, each stated once (``docs/file-format.md``)."""

from __future__ import annotations

import os

import pytest

from rankscribe.writer import WriterValueError
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

