"""Every public function of the writer, every argument in an obvious wrong form.

For each name of ``rankscribe.writer.__all__`` that takes arguments, a call
that works is given below; the sweep replaces one argument at a time with
wrong values chosen from its annotation (None or an int where a path belongs,
a str, a bool or a float where an int belongs, a str where a flag belongs, an
int where a str or a mapping belongs). Each must be refused with the
package's error (:class:`WriterError`) naming the argument, not with a raw
``TypeError``/``AttributeError`` from deep inside, and not accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rankscribe import writer
from rankscribe.writer import SummaryRecord, WriterError, events, files, reader
from tests._support.sweeps import (
    ValidCalls,
    assert_swept_or_left_out,
    public_callables,
    refusal,
    sweep_cases,
)


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    with SummaryRecord(run, formats=("mindinsight", "tensorboard")) as record:
        record.add_value("scalar", "loss", 0.5)
        record.record(1)
    return run


def _file(tmp_path: Path, kind: str = "summary") -> Path:
    return reader.list_summary_files(_run(tmp_path), kind)[0]


def _lineage_file(tmp_path: Path) -> Path:
    path = tmp_path / "events.out.events.summary.1700000000.0.vm_lineage"
    path.write_bytes(b"")
    return path


# name -> a call that works: (positional, keyword) arguments made in tmp_path
VALID: ValidCalls = {
    "RecordReader": lambda t: ((_file(t),), {}),
    "SummaryRecord": lambda t: ((t / "new",), {}),
    "list_summary_files": lambda t: ((_run(t),), {}),
    "load_dir": lambda t: ((_run(t),), {}),
    "load_lineage_dir": lambda t: ((_run(t),), {}),
    "parse_file_name": lambda t: ((_file(t),), {}),
    "read_events": lambda t: ((_file(t),), {}),
    "read_lineage_events": lambda t: ((_lineage_file(t),), {}),
    "read_records": lambda t: ((_file(t),), {}),
    "read_tensorboard_events": lambda t: ((_file(t, "tensorboard"),), {}),
    "scalars": lambda t: ((_file(t),), {}),
}
# Public names without a row above, and why the sweep leaves them out.
LEFT_OUT = {
    # Decode a protobuf message already read: their argument is the message.
    "decode_event",
    "decode_lineage_event",
    # MindSpore's summary operators: test_operators.py checks their names and values.
    "histogram_summary",
    "image_summary",
    "scalar_summary",
    "tensor_summary",
}


#: Names the package once listed at its top level and now lists only in their home module
#: (one spelling per name, docs/contributing.md): swept there.
MOVED_HOME = {
    "RecordReader": files,
    "read_records": files,
    "parse_file_name": files,
    "decode_event": events,
    "decode_lineage_event": events,
    "list_summary_files": reader,
    "load_dir": events,
    "load_lineage_dir": events,
    "read_events": events,
    "read_lineage_events": events,
    "read_tensorboard_events": events,
    "scalars": reader,
}


def _public() -> dict[str, Callable[..., Any]]:
    found = public_callables(writer)
    for name, home in MOVED_HOME.items():
        assert name in home.__all__, f"{name} is not public in {home.__name__}"
        found.setdefault(name, getattr(home, name))
    return found


def _wrong_values(name: str, annotation: str) -> list[Any]:
    """Obvious wrong values for an argument annotated ``annotation``."""
    optional = "None" in annotation
    if "PathLike" in annotation:
        return [5] + ([] if optional else [None])
    if annotation.startswith(("Mapping", "dict")):
        return [5, "text"] + ([] if optional else [None])
    if annotation.startswith("bool"):
        return ["yes", 1] + ([] if optional else [None])
    if annotation.startswith("int"):
        # A rank may also be a word ("merged"): a str is not wrong there.
        text = [] if "str" in annotation else ["1"]
        return [*text, True, 1.5] + ([] if optional else [None])
    if annotation.startswith("str"):
        return [5] + ([] if optional else [None])
    return []


def test_every_public_name_is_swept_or_left_out_with_a_reason() -> None:
    assert_swept_or_left_out(_public(), VALID, LEFT_OUT)


@pytest.mark.parametrize(
    ("function_name", "argument", "wrong"), sweep_cases(_public(), VALID, _wrong_values)
)
def test_a_wrong_argument_is_refused_by_name(
    tmp_path: Path, function_name: str, argument: str, wrong: Any
) -> None:
    refusal(_public()[function_name], VALID[function_name](tmp_path), argument, wrong, WriterError)


@pytest.mark.parametrize("function_name", sorted(VALID))
def test_the_valid_call_of_the_sweep_works(tmp_path: Path, function_name: str) -> None:
    positional, keywords = VALID[function_name](tmp_path)
    made = _public()[function_name](*positional, **keywords)
    if isinstance(made, SummaryRecord):
        made.close()  # an open record would keep the operators' values of later tests
