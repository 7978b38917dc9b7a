"""The writer's names: one spelling each, in its home module; the top lists what users need."""

from __future__ import annotations

import types

import pytest

from rankscribe import writer
from rankscribe.writer import errors, eventfiles, events, files, operators, reader

# Names the package top does not list: each has one home, where the docs spell it.
HOMES = {
    **{name: errors for name in errors.__all__ if name != "WriterError"},
    "RecordReader": files,
    "read_records": files,
    "parse_file_name": files,
    **{name: reader for name in ("list_summary_files", "scalars")},
    **{
        name: events
        for name in (
            "decode_event",
            "decode_lineage_event",
            "load_dir",
            "load_lineage_dir",
            "read_events",
            "read_lineage_events",
            "read_tensorboard_events",
        )
    },
}


@pytest.mark.parametrize("name", sorted(HOMES))
def test_a_name_has_one_spelling_in_its_home_module(name: str) -> None:
    assert name not in writer.__all__
    assert name in HOMES[name].__all__
    with pytest.raises(AttributeError, match=name):
        getattr(writer, name)


@pytest.mark.parametrize("name", ["EventFileName", "FileKind", "file_kind", "parse_file_name"])
def test_file_name_helpers_are_listed_in_files_only(name: str) -> None:
    assert name in files.__all__ and name not in reader.__all__
    assert not hasattr(reader, name)  # no second spelling


def test_the_reader_lists_what_the_reading_docs_show_and_events_the_rest() -> None:
    assert set(reader.__all__) == {
        "EventReader",
        "decode_value",
        "list_summary_files",
        "scalar_arrays",
        "scalars",
    }
    assert not set(events.__all__) & set(reader.__all__)


@pytest.mark.parametrize("module", [files, eventfiles, events, operators], ids=lambda m: m.__name__)
def test_a_sibling_modules_names_are_not_the_packages(module: types.ModuleType) -> None:
    exported = set(module.__all__)
    assert exported
    assert not exported & set(writer.__all__)


def test_the_operators_are_spelled_at_the_package_only() -> None:
    for name in ("histogram_summary", "image_summary", "scalar_summary", "tensor_summary"):
        assert name in writer.__all__ and name not in operators.__all__
        assert getattr(writer, name) is getattr(operators, name)


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
