"""``SummaryRecord.write_scalars``: a program's own scalars, written apart from the script's.

What is pending for the script's next ``record`` (``add_value``, the summary operators)
stays pending through a ``write_scalars`` and lands at the script's own step
(docs/file-format.md, "Scalars written apart").
"""

from __future__ import annotations

import logging
import tempfile
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankscribe.writer import SummaryRecord, scalar_summary
from rankscribe.writer.errors import WriterValueError
from rankscribe.writer.reader import scalars

from .conftest import (
    raw_payloads,
    read_events,
    read_tensorboard,
    scalars_of,
    summary_files,
    summary_steps,
    tensorboard_files,
)


def steps_of(directory: Any) -> list[tuple[int, dict[str, float]]]:
    return [(event.step, scalars_of(event)) for event in summary_steps(directory)]


def board_tags(directory: Any) -> set[tuple[int, str]]:
    """(step, tag) of every value of the TensorBoard file in ``directory``."""
    [board] = tensorboard_files(directory)
    return {
        (event.step, value.tag)
        for event in read_tensorboard(board)
        if event.HasField("summary")
        for value in event.summary.value
    }


@pytest.mark.parametrize("options", [{}, {"formats": ("mindinsight", "tensorboard")}])
def test_pending_values_stay_for_the_scripts_own_record(
    make_record: Any, log_dir: Any, options: dict[str, Any]
) -> None:
    record = make_record(**options)
    record.add_value("scalar", "user/loss", 0.5)
    record.add_value("histogram", "user/weights", np.arange(10, dtype=np.float32))
    assert record.write_scalars(7, {"ours/time": 0.25, "ours/wait": 1})
    record.add_value("scalar", "user/accuracy", 0.75)
    record.record(9)
    record.flush()
    found = steps_of(log_dir)
    assert found[0] == (7, {"ours/time": 0.25, "ours/wait": 1.0})
    assert found[1][0] == 9
    assert found[1][1] == {"user/loss": 0.5, "user/accuracy": 0.75}
    [step_9] = [event for event in summary_steps(log_dir) if event.step == 9]
    assert [value.tag for value in step_9.summary.value if value.HasField("histogram")] == [
        "user/weights"
    ]
    assert sorted(scalars(log_dir)) == ["ours/time", "ours/wait", "user/accuracy", "user/loss"]
    if options:
        tags = board_tags(log_dir)
        assert {(7, "ours/time"), (9, "user/loss"), (9, "user/weights")} <= tags
        assert (7, "user/loss") not in tags


def test_summary_operators_values_stay_pending_too(make_record: Any, log_dir: Any) -> None:
    record = make_record()
    scalar_summary("user/op", 3.0)
    record.write_scalars(1, {"ours/time": 0.1})
    record.record(2)
    record.flush()
    assert steps_of(log_dir) == [(1, {"ours/time": pytest.approx(0.1)}), (2, {"user/op": 3.0})]


@pytest.mark.parametrize(
    "pend",
    [
        lambda record: record.add_value("scalar", "user/loss", 0.5),
        lambda record: record.add_value("histogram", "user/weights", np.arange(4.0)),
        lambda record: scalar_summary("user/op", 3.0),
    ],
    ids=["add_value scalar", "add_value histogram", "summary operator"],
)
def test_has_pending_says_what_waits_for_the_next_record(
    make_record: Any, log_dir: Any, pend: Any
) -> None:
    record = make_record()
    assert not record.has_pending
    pend(record)
    assert record.has_pending
    record.write_scalars(1, {"ours/time": 0.1})  # written apart: still pending
    assert record.has_pending
    record.record(2)
    assert not record.has_pending


def test_no_scalars_write_nothing(make_record: Any, log_dir: Any) -> None:
    record = make_record()
    assert record.write_scalars(3, {})
    record.flush()
    assert steps_of(log_dir) == []


@pytest.mark.parametrize(
    ("step", "values", "message"),
    [
        (1, {"": 1.0}, r"'name' must be a non-empty str"),
        (1, {"ours": "fast"}, r"scalar 'ours'"),
        (1, {"ours": np.zeros(3)}, r"exactly one element"),
        (2**63, {"ours": 1.0}, r"'step' must fit in an int64"),
    ],
)
def test_bad_scalars_are_refused_naming_what_is_wrong(
    make_record: Any, step: int, values: dict[str, Any], message: str
) -> None:
    record = make_record()
    with pytest.raises((WriterValueError, TypeError), match=message):
        record.write_scalars(step, values)


def test_a_closed_record_logs_and_returns_false(
    make_record: Any, caplog: pytest.LogCaptureFixture
) -> None:
    record = make_record()
    record.close()
    with caplog.at_level(logging.ERROR):
        assert record.write_scalars(4, {"ours": 1.0}) is False
    assert "step 4 was not recorded" in caplog.text


# ------------------------------------------------------------------ columns
# ``write_scalar_columns``: what ``write_scalars`` of each step does, the steps made on the
# writer thread, every column checked first.


@pytest.mark.parametrize("options", [{}, {"formats": ("mindinsight", "tensorboard")}])
def test_columns_land_as_steps_in_order_and_pending_values_stay(
    make_record: Any, log_dir: Any, options: dict[str, Any]
) -> None:
    record = make_record(**options)
    record.add_value("scalar", "user/loss", 0.5)
    columns = {
        "ours/time": ([5, 3, 4], [1.25, 0.75, 1.0]),  # out of order: written in step order
        "ours/wait": (array("q", [4, 6]), array("f", [0.5, 0.25])),  # the collector's arrays
        "ours/none": ([], []),
    }
    assert record.write_scalar_columns(columns)
    record.record(9)
    record.flush()
    assert steps_of(log_dir) == [
        (3, {"ours/time": 0.75}),
        (4, {"ours/time": 1.0, "ours/wait": 0.5}),
        (5, {"ours/time": 1.25}),
        (6, {"ours/wait": 0.25}),
        (9, {"user/loss": 0.5}),
    ]
    if options:
        tags = board_tags(log_dir)
        assert {(3, "ours/time"), (6, "ours/wait"), (9, "user/loss")} <= tags


def test_columns_follow_the_steps_written_before_them(make_record: Any, log_dir: Any) -> None:
    record = make_record()
    record.write_scalars(0, {"ours/time": 0.0})  # a batch of steps still open
    steps = list(range(1, 2500))
    assert record.write_scalar_columns({"ours/time": (steps, [float(step) for step in steps])})
    record.write_scalars(2500, {"ours/time": 2500.0})
    record.flush()
    assert scalars(log_dir)["ours/time"] == [(step, float(step)) for step in range(2501)]
    assert [step for step, _ in steps_of(log_dir)] == list(range(2501))


def test_a_name_twice_at_one_step_keeps_its_later_value(make_record: Any, log_dir: Any) -> None:
    record = make_record()
    record.write_scalar_columns({"ours": ([1, 2, 1], [0.5, 1.5, 2.5])})
    record.flush()
    assert steps_of(log_dir) == [(1, {"ours": 2.5}), (2, {"ours": 1.5})]


def payloads_without_wall_times(directory: Path) -> list[bytes]:
    """The summary file's events after its version event, each wall time's 8 bytes zeroed
    (every event begins with its wall time's key, 0x09, and the 8 bytes); no file (no
    step written): none."""
    paths = summary_files(directory) if directory.exists() else []
    assert len(paths) <= 1, paths
    return [
        payload[:1] + bytes(8) + payload[9:] for path in paths for payload in raw_payloads(path)[1:]
    ]


# Beyond float32, a float32 subnormal, a rounding, the signs of zero and infinity, NaN.
SPECIAL_VALUES = [3.5e38, -3.5e38, 1e-45, -0.0, 0.1, float("inf"), float("-inf"), float("nan")]
COLUMN_VALUES = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(SPECIAL_VALUES)
SHORT_STEPS = st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 300), max_size=8)
# Long columns (from 128 steps the writer makes their events as one table): evenly spaced
# steps from where a step's varint grows a byte (2^7, 2^14, 2^21) or is 10 bytes (< 0),
# or the collector's (every step from 1), a few of them given twice or out of order.
LONG_STEPS = st.builds(
    lambda start, count, stride, twice: [
        *range(start, start + count * stride, stride),
        *range(start + 1, start + 1 + twice),
    ],
    st.sampled_from([1, 100, 16_300, 2**21 - 150, -40, 2**63 - 2**10]),
    st.integers(128, 300),
    st.integers(1, 2),
    st.integers(0, 3),
)


def column_of(steps: list[int]) -> st.SearchStrategy[tuple[list[int], list[float]]]:
    if len(steps) <= len(SPECIAL_VALUES):
        values = st.lists(COLUMN_VALUES, min_size=len(steps), max_size=len(steps))
    else:  # a long column's values drawn from a seed, the special ones among them
        values = st.integers(0, 2**32 - 1).map(
            lambda seed: [
                *np.random.default_rng(seed).normal(0.0, 1e3, len(steps) - len(SPECIAL_VALUES)),
                *SPECIAL_VALUES,
            ]
        )
    return st.tuples(st.just(steps), values)


@settings(max_examples=60, deadline=None)
@given(
    columns=st.dictionaries(
        st.sampled_from(["ours/a", "ours/b", "theirs/c", "d"]),
        (SHORT_STEPS | LONG_STEPS).flatmap(column_of),
        min_size=1,
    ),
    as_arrays=st.booleans(),
    shared_steps=st.booleans(),
)
def test_columns_are_the_bytes_write_scalars_writes_step_by_step(
    columns: dict[str, tuple[list[int], list[float]]], as_arrays: bool, shared_steps: bool
) -> None:
    if shared_steps:  # every column at the same steps, ascending (the collector's timings)
        steps, values = next(iter(columns.values()))
        last = dict(zip(steps, values, strict=True))
        columns = {
            name: (sorted(last), [last[step] * (2 + index) for step in sorted(last)])
            for index, name in enumerate(columns)
        }
    # What write_scalar_columns documents, made step by step: steps ascending, each
    # holding the names with a point there in the columns' order, a name twice at one
    # step its later value.
    by_step: dict[int, dict[str, float]] = {}
    for name, (steps, values) in columns.items():
        for step, value in zip(steps, values, strict=True):
            by_step.setdefault(step, {})[name] = value
    given_columns = {
        name: (array("q", steps), array("d", values)) if as_arrays else (steps, values)
        for name, (steps, values) in columns.items()
    }
    with tempfile.TemporaryDirectory() as directory:
        by_columns, by_steps = Path(directory, "columns"), Path(directory, "steps")
        with SummaryRecord(by_columns) as record:
            # A step written first: the file is open when the columns come, so their
            # events are framed into its buffer as one batch.
            assert record.write_scalars(-1, {"first": 1.0})
            record.flush()
            assert record.write_scalar_columns(given_columns)
        with SummaryRecord(by_steps) as record:
            assert record.write_scalars(-1, {"first": 1.0})
            for step, scalars_of_step in sorted(by_step.items()):
                assert record.write_scalars(step, scalars_of_step)
        # Read with both checksums of every record checked.
        written = payloads_without_wall_times(by_columns)
        assert written == payloads_without_wall_times(by_steps)
    assert len(written) == 1 + len(by_step)


@pytest.mark.parametrize("limit", [None, 3000, 4096, 40_000])
def test_columns_fill_and_rotate_files_as_steps_written_one_by_one(
    tmp_path: Path, limit: int | None
) -> None:
    steps = list(range(1, 301))
    columns = {
        "rankscribe/step_time": (array("q", steps), array("d", [step / 1e4 for step in steps])),
        "rankscribe/data_wait": (array("q", steps), array("d", [step / 1e5 for step in steps])),
    }
    sizes = {}
    for how in ("columns", "steps"):
        with SummaryRecord(tmp_path / how, max_file_size=limit) as record:
            assert record.write_scalars(0, {"first": 1.0})
            record.flush()  # the file open: the columns' events come as one batch
            if how == "columns":
                assert record.write_scalar_columns(columns)
            else:
                for at, step in enumerate(steps):
                    assert record.write_scalars(
                        step, {name: values[at] for name, (_, values) in columns.items()}
                    )
        paths = summary_files(tmp_path / how)
        sizes[how] = [path.stat().st_size for path in paths]
        assert all(limit is None or size <= limit for size in sizes[how]), sizes
        # Every step once, in order, each file whole (both checksums of every record).
        events = [event for path in paths for event in read_events(path)[1:]]
        assert [event.step for event in events] == [0, *steps]
        assert scalars(tmp_path / how)["rankscribe/step_time"] == [
            (step, float(np.float32(step / 1e4))) for step in steps
        ]
    assert sizes["columns"] == sizes["steps"]
    # 300 steps take ~21 kB: past 3,000 or 4,096 bytes the files rotate (each batch of
    # events appended one by one); within 40,000 bytes they are framed as one batch.
    assert (len(sizes["columns"]) == 1) == (limit is None or limit > 30_000)


def test_a_batch_of_columns_fills_a_file_exactly_to_its_limit(tmp_path: Path) -> None:
    steps = array("q", range(1, 101))
    columns = {"ours/time": (steps, array("d", [0.5] * len(steps)))}

    def written(directory: Path, limit: int | None) -> tuple[int, list[int]]:
        """The file's size before the columns, and every file's size after them."""
        with SummaryRecord(directory, max_file_size=limit) as record:
            assert record.write_scalars(0, {"first": 1.0})
            record.flush()
            [opened] = summary_files(directory)
            before = opened.stat().st_size
            assert record.write_scalar_columns(columns)
        return before, [path.stat().st_size for path in summary_files(directory)]

    before, [whole] = written(tmp_path / "unlimited", None)
    exact = written(tmp_path / "exact", whole)[1]
    assert exact == [whole]  # the batch fits to the byte: one file
    short = written(tmp_path / "short", whole - 1)[1]
    # One byte short: the last step's event opens a second file, after its version event
    # (28 bytes and the 16 of its framing: docs/file-format.md).
    event = (whole - before) // len(steps)  # steps under 128: every event the same size
    assert short == [whole - event, 28 + 16 + event]


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"ok": ([1], [1.0]), "": ([2], [1.0])}, r"'name' must be a non-empty str"),
        ({"ok": ([1], [1.0]), "bad": ([2], ["fast"])}, r"'bad' must have real numbers"),
        ({"bad": ([1, 2], [1.0])}, r"'bad' has 2 steps and 1 values"),
        ({"bad": ([2**63], [1.0])}, r"'bad' must have int steps that fit in an int64"),
        ({"bad": ([1.5], [1.0])}, r"'bad' must have int steps"),
        ({"bad": ([True], [1.0])}, r"'bad' must have int steps"),
        ({"bad": ([[1, 2]], [[1.0, 2.0]])}, r"'bad' must be two flat sequences"),
        ({"bad": ([1], [1 + 2j])}, r"'bad' must have real numbers"),
        # The collector's arrays are taken as they are only when their type codes say
        # int64 steps and real values, of equal lengths; others are checked as lists are.
        ({"bad": (array("q", [1, 2]), array("f", [1.0]))}, r"'bad' has 2 steps and 1 values"),
        ({"bad": (array("Q", [2**64 - 1]), array("d", [1.0]))}, r"fit in an int64"),
        ({"bad": (array("d", [1.0]), array("d", [1.0]))}, r"'bad' must have int steps"),
        ({"bad": (array("q", [1]), array("u", "x"))}, r"'bad' must have real numbers"),
    ],
)
def test_a_bad_column_refuses_them_all_and_what_was_written_stays(
    make_record: Any, log_dir: Any, columns: dict[Any, Any], message: str
) -> None:
    record = make_record()
    record.write_scalars(0, {"ours": 0.5})
    with pytest.raises((WriterValueError, TypeError), match=message):
        record.write_scalar_columns(columns)
    record.flush()
    assert steps_of(log_dir) == [(0, {"ours": 0.5})]


def test_columns_to_a_closed_record_log_and_return_false(
    make_record: Any, caplog: pytest.LogCaptureFixture
) -> None:
    record = make_record()
    record.close()
    with caplog.at_level(logging.ERROR):
        assert record.write_scalar_columns({"a": ([4], [1.0]), "b": ([5], [2.0])}) is False
    assert "the scalars of 2 names were not recorded" in caplog.text
