"""The writer's second spellings: out of ``rankscribe.writer.__all__``, still importable."""

from __future__ import annotations

import importlib

import pytest

from rankscribe import writer
from rankscribe.writer import errors, files, reader

# Names the package top no longer lists: each has one home, where the docs spell it.
UNLISTED = {
    **{name: errors for name in errors.__all__ if name != "WriterError"},
    "RecordReader": files,
    "read_records": files,
    "parse_file_name": files,
    **{
        name: reader
        for name in (
            "decode_event",
            "decode_lineage_event",
            "list_summary_files",
            "load_dir",
            "load_lineage_dir",
            "read_events",
            "read_lineage_events",
            "read_tensorboard_events",
            "scalars",
        )
    },
}


@pytest.mark.parametrize("name", sorted(UNLISTED))
def test_an_unlisted_name_still_imports_as_its_home_object(name: str) -> None:
    assert name not in writer.__all__
    assert getattr(importlib.import_module("rankscribe.writer"), name) is getattr(
        UNLISTED[name], name
    )
    assert name in UNLISTED[name].__all__


@pytest.mark.parametrize("name", ["EventFileName", "FileKind", "file_kind", "parse_file_name"])
def test_file_name_helpers_are_listed_in_files_not_reader(name: str) -> None:
    assert name in files.__all__ and name not in reader.__all__
    assert getattr(reader, name) is getattr(files, name)


def test_the_package_lists_the_record_the_operators_and_the_base_error() -> None:
    assert set(writer.__all__) == {
        "SummaryRecord",
        "WriterError",
        "__version__",
        "histogram_summary",
        "image_summary",
        "scalar_summary",
        "tensor_summary",
    }
