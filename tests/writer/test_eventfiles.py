"""rankscribe.writer.eventfiles: the files the other packages write, read back as users read them.

Scalars laid out by step decode to the values given (float32) in both formats, byte for
byte what protobuf writes; whole files are replaced atomically with their mode; an
appended file follows SummaryRecord's rules (created exclusively, 0600 while written,
0400 closed, rotated, nothing lost after a failed write).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankscribe.writer import events
from rankscribe.writer.errors import RecordTooLargeError, WriterTypeError, WriterValueError
from rankscribe.writer.eventfiles import (
    EventFileAppender,
    EventRecords,
    ScalarSteps,
    write_event_file,
)
from rankscribe.writer.files import read_records, summary_file_name

# private: the event file's open/rotate rule (patched to inject faults)
from rankscribe.writer.pb import (
    lineage_pb2,
    summary_pb2,
    tensorboard_custom_scalars_pb2,
    tensorboard_hparams_pb2,
    tensorboard_pb2,
)

from .conftest import SmallDisk

WALL_TIME = 1_750_000_000.25


def mode_of(path: str | os.PathLike[str]) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def summary_events(path: str | os.PathLike[str]) -> list[summary_pb2.Event]:
    return list(events.read_events(path, strict=True))


def board_events(path: str | os.PathLike[str]) -> list[tensorboard_pb2.Event]:
    return list(events.read_tensorboard_events(path, strict=True))


def job_name(timestamp: int) -> str:
    return summary_file_name("events", timestamp, "job", "node", "_MS")


def two_columns() -> ScalarSteps:
    return ScalarSteps(
        [
            ("loss/mean", np.array([0, 1, 2, 300]), np.array([0.5, 0.25, 1e39, -0.0])),
            ("loss/max", np.array([1, 300]), np.array([2.0, float("nan")])),
        ]
    )


def test_a_full_disk_names_the_file_it_could_not_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write's or fsync's ENOSPC names no file: a merge on a full disk said only
    # "[Errno 28] No space left on device".
    def full(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    records = EventRecords("mindinsight")
    records.add_version(WALL_TIME)
    target = tmp_path / "events.out.events.summary.1.job_MS"
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as raised:
        write_event_file(target, records)
    assert raised.value.errno == errno.ENOSPC
    assert str(raised.value) == f"[Errno 28] No space left on device: '{target}'"
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ scalars by step


@pytest.mark.parametrize("file_format", ["mindinsight", "tensorboard"])
def test_scalars_by_step_read_back_one_event_per_step(tmp_path: Path, file_format: str) -> None:
    records = EventRecords(file_format)
    records.add_version(WALL_TIME)
    records.add_scalars(two_columns(), WALL_TIME)
    path = write_event_file(tmp_path / "file", records)
    events: list[summary_pb2.Event] | list[tensorboard_pb2.Event]
    if file_format == "mindinsight":
        events = summary_events(path)
        assert events[0].version == "MindSpore.Event:1"
        found = {(e.step, v.tag): v.scalar_value for e in events[1:] for v in e.summary.value}
    else:
        events = board_events(path)
        assert events[0].file_version == "brain.Event:2"
        found = {(e.step, v.tag): v.simple_value for e in events[1:] for v in e.summary.value}
    assert [event.step for event in events[1:]] == [0, 1, 2, 300]
    assert all(event.wall_time == WALL_TIME for event in events)
    assert [v.tag for v in events[2].summary.value] == ["loss/mean", "loss/max"]  # column order
    assert found[(0, "loss/mean")] == 0.5
    assert found[(1, "loss/max")] == 2.0
    assert found[(2, "loss/mean")] == float("inf")  # beyond float32
    assert np.isnan(found[(300, "loss/max")])
    assert (2, "loss/max") not in found  # a column without the step has no value there


def test_both_formats_come_from_one_table_with_the_same_values() -> None:
    steps = two_columns()
    assert steps.steps.tolist() == [0, 1, 2, 300]
    assert len(steps) == 4
    steps.steps[0] = 99  # a copy: the table keeps its steps
    assert steps.steps.tolist() == [0, 1, 2, 300]
    nothing = EventRecords("tensorboard")
    nothing.add_scalars(ScalarSteps([]), WALL_TIME)
    assert len(nothing) == 0


TAGS = st.text(min_size=1, max_size=40)
COLUMN = st.tuples(
    TAGS,
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=6, unique=True),
    st.floats(allow_nan=False, width=32),
)


@settings(max_examples=150, deadline=None)
@given(
    columns=st.lists(COLUMN, min_size=1, max_size=4),
    wall_time=st.sampled_from([0.0, WALL_TIME]),
)
def test_each_step_is_the_bytes_protobuf_writes(
    columns: list[tuple[str, list[int], float]], wall_time: float
) -> None:
    table = ScalarSteps(
        [
            (tag, np.array(sorted(steps)), np.full(len(steps), value))
            for tag, steps, value in columns
        ]
    )
    all_steps = sorted({step for _, steps, _ in columns for step in steps})
    for file_format, event_type in (("mindinsight", summary_pb2), ("tensorboard", tensorboard_pb2)):
        records = EventRecords(file_format)
        records.add_scalars(table, wall_time)
        with tempfile.TemporaryDirectory() as directory:
            payloads = list(read_records(write_event_file(Path(directory) / "file", records)))
        assert len(payloads) == len(all_steps)
        for step, payload in zip(all_steps, payloads, strict=True):
            expected = event_type.Event(wall_time=wall_time, step=step)
            for tag, steps, value in columns:
                if step in steps:
                    if file_format == "mindinsight":
                        expected.summary.value.add(tag=tag, scalar_value=value)
                    else:
                        expected.summary.value.add(tag=tag, simple_value=value)
            assert payload == expected.SerializeToString()


@pytest.mark.parametrize("tags", [3, 64, 65, 70])
def test_steps_of_many_layouts_are_the_bytes_protobuf_writes(tags: int) -> None:
    # Each tag at its own every-k-th step (k = 1 + 5 x tag % 11) from 2^14 - 100 (where a step's
    # varint grows a byte): steps holding many different sets of tags, their bits packed
    # into one byte to nine (the table groups steps by those bytes).
    start = 2**14 - 100
    rng = np.random.default_rng(tags)
    columns = []
    for number in range(tags):
        steps = np.arange(start, start + 300, 1 + 5 * number % 11)
        columns.append(
            (f"tag/{number}", steps, rng.normal(0.0, 1.0, len(steps)).astype(np.float32))
        )
    records = EventRecords("mindinsight")
    records.add_scalars(ScalarSteps(columns), WALL_TIME)
    with tempfile.TemporaryDirectory() as directory:
        payloads = list(read_records(write_event_file(Path(directory) / "file", records)))
    assert len(payloads) == 300
    for offset, payload in enumerate(payloads):
        expected = summary_pb2.Event(wall_time=WALL_TIME, step=start + offset)
        for tag, steps, values in columns:
            if offset % (steps[1] - steps[0]) == 0:
                expected.summary.value.add(
                    tag=tag, scalar_value=values[offset // (steps[1] - steps[0])]
                )
        assert payload == expected.SerializeToString(), start + offset


@pytest.mark.parametrize(
    ("columns", "error", "message"),
    [
        ("loss", WriterTypeError, "'columns' must be a sequence of"),
        ([("loss", [1])], WriterTypeError, r"column 0 must be a \(tag, steps, values\) tuple"),
        ([("", [1], [1.0])], WriterTypeError, "the tag must be a non-empty str, but got ''"),
        ([("loss", [1.5], [1.0])], WriterTypeError, "steps must be a 1-D array of integers"),
        ([("loss", [1], ["a"])], WriterTypeError, "values must be a 1-D array of numbers"),
        ([("loss", [1, 2], [1.0])], WriterValueError, "2 steps and 1 values"),
        ([("loss", [2**64 - 1], [1.0])], WriterValueError, "steps must fit an int64"),
    ],
)
def test_a_malformed_column_is_refused_by_name(
    columns: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ScalarSteps(columns)  # type: ignore[arg-type]


# ------------------------------------------------------------------ other events


def test_protobuf_events_of_the_files_format_are_framed_as_given(tmp_path: Path) -> None:
    lineage = EventRecords("mindinsight")
    event = lineage_pb2.LineageEvent(wall_time=WALL_TIME)
    event.evaluation_lineage.metric = '{"acc": 0.5}'
    lineage.add_event(event)
    path = write_event_file(tmp_path / "x_lineage", lineage)
    assert list(events.read_lineage_events(path, strict=True)) == [event]
    with pytest.raises(
        WriterTypeError, match=r"must be a tensorboard_pb2.Event in a 'tensorboard'"
    ):
        EventRecords("tensorboard").add_event(summary_pb2.Event())  # type: ignore[arg-type]
    with pytest.raises(WriterTypeError, match=r"summary_pb2\.Event or lineage_pb2\.LineageEvent"):
        EventRecords("mindinsight").add_event(tensorboard_pb2.Event())  # type: ignore[arg-type]


def test_the_layout_is_a_custom_scalars_category(tmp_path: Path) -> None:
    records = EventRecords("tensorboard")
    records.add_layout(
        WALL_TIME,
        "job",
        margin_charts={"loss": ("loss/mean", "loss/min", "loss/max")},
        line_charts={"job/skew (s)": ["job/skew (s)"]},
    )
    [event] = board_events(write_event_file(tmp_path / "board", records))
    [value] = event.summary.value
    assert value.tag == "custom_scalars__config__"
    assert value.metadata.plugin_data.plugin_name == "custom_scalars"
    layout = tensorboard_custom_scalars_pb2.Layout.FromString(value.tensor.string_val[0])
    [category] = layout.category
    assert category.title == "job"
    margin, lines = category.chart
    assert (margin.title, margin.margin.series[0].value) == ("loss", "loss/mean")
    assert (margin.margin.series[0].lower, margin.margin.series[0].upper) == (
        "loss/min",
        "loss/max",
    )
    assert list(lines.multiline.tag) == [r"job/skew\ \(s\)"]  # a tag, not a pattern


def test_hparams_experiment_and_session_read_back(tmp_path: Path) -> None:
    records = EventRecords("tensorboard")
    records.add_hparams_experiment(
        WALL_TIME,
        {"lr": [0.1, 0.2], "opt": ["sgd", "adam", "sgd"], "flag": [True], "mixed": [1.0, "a"]},
        ["loss"],
    )
    records.add_hparams_session(
        WALL_TIME,
        group="run",
        start_time=10.0,
        end_time=20.0,
        hparams={"lr": 0.1, "opt": "sgd", "flag": True},
        metrics={"loss": 0.5},
        step=7,
    )
    records.add_hparams_session(
        WALL_TIME, group="", start_time=1.0, end_time=1.0, hparams={}, metrics={}
    )
    events = board_events(write_event_file(tmp_path / "board", records))
    assert [[v.tag for v in e.summary.value] for e in events] == [
        ["_hparams_/experiment"],
        ["_hparams_/session_start_info"],
        ["loss"],
        ["_hparams_/session_end_info"],
        ["_hparams_/session_start_info"],  # no metrics: no scalar event
        ["_hparams_/session_end_info"],
    ]

    def plugin_data(event: tensorboard_pb2.Event) -> tensorboard_hparams_pb2.HParamsPluginData:
        content = event.summary.value[0].metadata.plugin_data.content
        return tensorboard_hparams_pb2.HParamsPluginData.FromString(content)

    infos = {info.name: info for info in plugin_data(events[0]).experiment.hparam_infos}
    assert infos["lr"].type == tensorboard_hparams_pb2.DATA_TYPE_FLOAT64
    assert infos["flag"].type == tensorboard_hparams_pb2.DATA_TYPE_BOOL
    assert infos["opt"].type == tensorboard_hparams_pb2.DATA_TYPE_STRING
    assert [v.string_value for v in infos["opt"].domain_discrete.values] == ["adam", "sgd"]
    assert infos["mixed"].type == tensorboard_hparams_pb2.DATA_TYPE_UNSET
    start = plugin_data(events[1]).session_start_info
    assert (start.group_name, start.start_time_secs) == ("run", 10.0)
    assert start.hparams["lr"].number_value == 0.1
    assert start.hparams["opt"].string_value == "sgd"
    assert start.hparams["flag"].bool_value is True
    assert (events[2].step, events[2].summary.value[0].simple_value) == (7, 0.5)
    end = plugin_data(events[3]).session_end_info
    assert (end.status, end.end_time_secs) == (tensorboard_hparams_pb2.STATUS_SUCCESS, 20.0)


def test_plugin_events_exist_in_the_tensorboard_format_only() -> None:
    records = EventRecords("mindinsight")
    with pytest.raises(WriterValueError, match=r"For 'add_layout', .* 'tensorboard' format"):
        records.add_layout(WALL_TIME, "job", margin_charts={}, line_charts={})
    with pytest.raises(WriterValueError, match="add_hparams_session"):
        records.add_hparams_session(
            WALL_TIME, group="", start_time=0.0, end_time=0.0, hparams={}, metrics={}
        )
    assert len(records) == 0


@pytest.mark.parametrize("file_format", ["MS", "TensorBoard", None])
def test_an_unknown_format_is_refused(file_format: object) -> None:
    with pytest.raises(WriterValueError, match=r"'format' must be 'mindinsight' or 'tensorboard'"):
        EventRecords(file_format)  # type: ignore[arg-type]


def test_a_wall_time_must_be_a_number() -> None:
    with pytest.raises(WriterTypeError, match=r"'wall_time' must be a number \(seconds\)"):
        EventRecords("mindinsight").add_version("now")  # type: ignore[arg-type]


# ------------------------------------------------------------------ whole files


def test_a_whole_file_replaces_a_planted_link_and_takes_its_mode(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    target = tmp_path / "events.out.tfevents.1.node.job"
    target.symlink_to(victim)
    records = EventRecords("tensorboard")
    records.add_version(WALL_TIME)
    assert write_event_file(target, records) == str(target)
    assert victim.read_bytes() == b"keep me"
    assert not target.is_symlink()
    assert mode_of(target) == 0o400
    assert board_events(target)[0].file_version == "brain.Event:2"
    rewritable = write_event_file(tmp_path / "hparams", records, final=False, group_readable=True)
    assert mode_of(rewritable) == 0o640


# ------------------------------------------------------------------ appended files


def test_an_appended_file_is_private_while_written_and_read_only_once_closed(
    tmp_path: Path,
) -> None:
    appender = EventFileAppender(tmp_path, job_name, format="mindinsight", timestamp=1000)
    [path] = appender.paths
    assert os.path.basename(path) == job_name(1000)
    assert mode_of(path) == 0o600
    assert [event.version for event in summary_events(path)] == ["MindSpore.Event:1"]
    records = EventRecords("mindinsight")
    records.add_scalars(two_columns(), WALL_TIME)
    appender.append(records)
    assert [event.step for event in summary_events(path)] == [0, 0, 1, 2, 300]  # at once
    appender.close()
    appender.close()  # idempotent
    assert mode_of(path) == 0o400
    with pytest.raises(WriterValueError, match="is closed"):
        appender.append(records)


def test_a_link_planted_at_the_name_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    (tmp_path / job_name(1000)).symlink_to(victim)
    with EventFileAppender(tmp_path, job_name, format="mindinsight", timestamp=1000) as appender:
        [path] = appender.paths
    assert victim.read_bytes() == b"keep me"
    assert os.path.basename(path) != job_name(1000)  # a later creation time
    assert not os.path.islink(path)
    assert mode_of(path) == 0o400


def test_an_appended_file_rotates_at_its_size_and_each_file_opens_with_the_version(
    tmp_path: Path,
) -> None:
    steps = ScalarSteps([("loss", np.arange(40), np.arange(40.0))])
    with EventFileAppender(
        tmp_path, job_name, format="mindinsight", timestamp=1000, max_file_size=400
    ) as appender:
        records = EventRecords("mindinsight")
        records.add_scalars(steps, WALL_TIME)
        appender.append(records)
        paths = appender.paths
    assert len(paths) > 2
    assert all(os.path.getsize(path) <= 400 for path in paths)
    events = [summary_events(path) for path in paths]
    assert all(file_events[0].version == "MindSpore.Event:1" for file_events in events)
    assert [e.step for file_events in events for e in file_events[1:]] == list(range(40))
    huge = EventRecords("mindinsight")
    huge.add_scalars(ScalarSteps([("x" * 500, np.array([1]), np.array([1.0]))]), WALL_TIME)
    with (
        EventFileAppender(tmp_path, job_name, format="mindinsight", max_file_size=400) as appender,
        pytest.raises(RecordTooLargeError),
    ):
        appender.append(huge)


def test_records_of_another_format_are_refused(tmp_path: Path) -> None:
    with EventFileAppender(tmp_path, job_name, format="tensorboard") as appender:
        with pytest.raises(WriterValueError, match="in the file's format 'tensorboard'"):
            appender.append(EventRecords("mindinsight"))
        with pytest.raises(WriterTypeError, match="must be an EventRecords"):
            appender.append([b"raw"])  # type: ignore[arg-type]


def test_records_a_full_disk_refused_are_written_by_the_next_append(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    appender = EventFileAppender(tmp_path, job_name, format="mindinsight", timestamp=1000)
    [path] = appender.paths
    first = EventRecords("mindinsight")
    first.add_scalars(ScalarSteps([("loss", np.array([1, 2]), np.array([1.0, 2.0]))]), WALL_TIME)

    small_disk.room = 0  # the disk is full
    with pytest.raises(OSError, match="No space left"):
        appender.append(first)
    small_disk.room = None
    second = EventRecords("mindinsight")
    second.add_scalars(ScalarSteps([("loss", np.array([3]), np.array([3.0]))]), WALL_TIME)
    appender.append(second)
    appender.close()
    assert [event.step for event in summary_events(path)[1:]] == [1, 2, 3]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"name": "fixed"}, "'name' must be a function of the creation time"),
        ({"timestamp": 0}, "'timestamp' must be None or an int > 0, but got 0"),
        ({"max_file_size": True}, "'max_file_size' must be None or an int > 0, but got True"),
        ({"format": "summary"}, "'format' must be 'mindinsight' or 'tensorboard'"),
    ],
)
def test_appender_arguments_are_checked_before_anything_is_created(
    tmp_path: Path, arguments: dict[str, object], message: str
) -> None:
    given = {"name": job_name, "format": "mindinsight", **arguments}
    with pytest.raises((WriterTypeError, WriterValueError), match=message):
        EventFileAppender(tmp_path, **given)  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []
