"""The lineage package's parsers take time linear in their input, whatever it holds.

Each parser of what a file or a message another user may have written holds is run on a
hostile shape of its input at 1, 4 and 16 MB (``tests/_support/growth.py``): an
evaluation's metric text (parsed by ``query`` for every run), a run's lineage file, a
job-view partial, and a query's ``where`` expression (a user's input, parsed the same way).
The partials' tags each have steps of their own: tags sharing their length and first and
last steps are grouped by another rule, with its own test.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from rankscribe.jobview.protocol import (
    JobPartial,
    PartialFormatError,
    decode_message,
    encode_message,
)
from rankscribe.lineage import LineageError, filter_runs
from rankscribe.lineage.recording import EvalLineageInfo, parse_run
from rankscribe.writer.files import frame
from rankscribe.writer.pb import lineage_pb2
from tests._support.growth import MEGABYTE, SLOW_PARSE_BASE, assert_linear

_made = itertools.count()


def metrics(text: str) -> object:
    try:
        return EvalLineageInfo(text).metrics
    except ValueError:
        return None


def deep_then_open_escaped_string(size: int) -> str:
    return "[" * 200 + '"' + '\\"' * (size // 2)


def many_metrics(size: int) -> str:
    return (
        "{" + ",".join(f'"m{index:09d}": [0.5, {{"a": [1]}}]' for index in range(size // 32)) + "}"
    )


@pytest.mark.growth
@pytest.mark.parametrize("build", [deep_then_open_escaped_string, many_metrics])
def test_an_evaluations_metric_is_parsed_in_linear_time(build: Callable[[int], str]) -> None:
    assert_linear(metrics, build)


def lineage_run(folder: Path, events: list[lineage_pb2.LineageEvent], repeat: int) -> str:
    run = folder / f"run{next(_made)}"
    run.mkdir()
    path = run / "events.out.events.summary.1.0.vm_lineage"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(b"".join(frame(event.SerializeToString()) for event in events) * repeat)
    return str(run)


def many_evaluations(folder: Path) -> Callable[[int], str]:
    def build(size: int) -> str:
        event = lineage_pb2.LineageEvent(
            wall_time=3.0, evaluation_lineage=EvalLineageInfo.from_metrics({"acc": 0.5}).to_proto()
        )
        return lineage_run(folder, [event], size // (len(event.SerializeToString()) + 16))

    return build


def one_hostile_metric(folder: Path) -> Callable[[int], str]:
    def build(size: int) -> str:
        metric = EvalLineageInfo(deep_then_open_escaped_string(size)).to_proto()
        event = lineage_pb2.LineageEvent(wall_time=3.0, evaluation_lineage=metric)
        return lineage_run(folder, [event], 1)

    return build


@pytest.mark.growth
@pytest.mark.parametrize("shape", [many_evaluations, one_hostile_metric])
def test_a_runs_lineage_file_is_parsed_in_linear_time(
    tmp_path: Path, shape: Callable[[Path], Callable[[int], str]]
) -> None:
    assert_linear(parse_run, shape(tmp_path))


def partial_of_tags_at_their_own_steps(size: int) -> bytes:
    count = size // 120
    scalars = {f"tag{index:08d}": [(index, 0.5), (index + 1, 1.5)] for index in range(count)}
    return encode_message(JobPartial.of_rank(3, scalars, last_step=count + 1))


def partial_of_long_curves(size: int) -> bytes:
    steps = size // 40
    scalars = {f"tag{index}": [(step, 0.5) for step in range(steps)] for index in range(2)}
    return encode_message(JobPartial.of_rank(3, scalars, last_step=steps))


def decoded(message: bytes) -> object:
    try:
        return decode_message(message)
    except PartialFormatError:
        return None


@pytest.mark.growth
@pytest.mark.parametrize(
    ("build", "base"),
    [
        # 140,000 tags at 16 MB: 4 CPU s to decode, 8 s to encode: from 256 KB.
        pytest.param(partial_of_tags_at_their_own_steps, SLOW_PARSE_BASE, id="tags_at_own_steps"),
        pytest.param(partial_of_long_curves, MEGABYTE, id="long_curves"),
    ],
)
def test_a_job_view_partial_is_decoded_in_linear_time(
    build: Callable[[int], bytes], base: int
) -> None:
    assert_linear(decoded, build, base=base)


def test_a_hostile_metric_is_refused_and_a_partial_of_many_tags_read_back() -> None:
    with pytest.raises(ValueError, match="an evaluation's metric holds arrays or objects nested"):
        EvalLineageInfo(deep_then_open_escaped_string(100)).metrics  # noqa: B018
    assert set(EvalLineageInfo(many_metrics(100)).metrics) == {
        "m000000000",
        "m000000001",
        "m000000002",
    }
    partial = decode_message(partial_of_tags_at_their_own_steps(1200))
    assert partial.last_steps == {3: 11}


def where_of_many_clauses(size: int) -> str:
    return " and ".join(f"metric/m{index:06d} > 0.5" for index in range(size // 24))


def where_of_a_long_string(size: int) -> str:
    return "user_defined/note == '" + "\\'" * (size // 2)


@pytest.mark.growth
@pytest.mark.parametrize(
    ("build", "base"),
    [
        # Parsed clause by clause in Python: 700,000 clauses at 16 MB take ~13 CPU s.
        pytest.param(where_of_many_clauses, SLOW_PARSE_BASE, id="many_clauses"),
        pytest.param(where_of_a_long_string, MEGABYTE, id="long_string"),
    ],
)
def test_a_query_expression_is_parsed_in_linear_time(
    tmp_path: Path, build: Callable[[int], str], base: int
) -> None:
    folder = tmp_path / "base"
    folder.mkdir()

    def query(where: str) -> object:
        try:
            return filter_runs(folder, where, use_index=False)
        except LineageError:
            return None

    # The rounds get more than the default budget (a quadratic parser would take hours).
    assert_linear(query, build, base=base, budget=120)
