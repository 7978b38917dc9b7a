"""The job's own files: cross-rank curves as a summary file and a TensorBoard file.

Both files are built whole in memory and written with the writer's
``atomic_write`` (0400, never through a planted link), under a fresh
name; the job files an earlier run left are removed once the new ones are in
place, so a reader sees every point once (or, for an instant, the old file
beside the new one — never a half-written file).

Scalars are encoded from byte templates that protobuf itself serialized once
per tag (a ``Summary.Value`` holding the tag and the float 1.0, whose last 4
bytes are the float): a job of 10,000 steps holds ~750,000 values, and one
protobuf object per value would take seconds. ``docs/job-view.md`` lists the
files and tags.
"""

from __future__ import annotations

import os
import re
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.lineage._hparams import HParamsRun, session_records
from rankscribe.ranks.files import atomic_write, file_mode, fsync_directory
from rankscribe.writer import files
from rankscribe.writer.pb import summary_pb2, tensorboard_custom_scalars_pb2, tensorboard_pb2

if TYPE_CHECKING:
    import numpy.typing as npt

    from rankscribe.lineage.job._statistics import TagStatistics

__all__ = [
    "STATISTIC_SUFFIXES",
    "AppendedJobFiles",
    "Curve",
    "StepTable",
    "job_file_names",
    "step_table",
    "summary_file_bytes",
    "tag_curves",
    "tensorboard_file_bytes",
    "write_job_files",
]

#: What each job tag adds to the rank tag, in file order.
STATISTIC_SUFFIXES = ("mean", "min", "max", "std", "ranks", "min_rank", "max_rank")
SUMMARY_PREFIX = "events"
JOB_MARK = "job"
SUMMARY_SUFFIX = files.SUMMARY_SUFFIX
MINDSPORE_VERSION = files.SUMMARY_FILE_VERSION
TENSORBOARD_VERSION = files.TENSORBOARD_FILE_VERSION
CUSTOM_SCALARS_TAG = "custom_scalars__config__"
CUSTOM_SCALARS_PLUGIN = "custom_scalars"

_JOB_SUMMARY_NAME = re.compile(r"\.out\.events\.summary\.\d+\.job\..*_MS$")
_JOB_TENSORBOARD_NAME = re.compile(r"^events\.out\.tfevents\.\d+\..*\.job$")
_ONE = struct.pack("<f", 1.0)


@dataclass
class Curve:
    """One job tag: its steps (ascending) and values."""

    tag: str
    steps: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]


def tag_curves(tag: str, statistics: TagStatistics) -> list[Curve]:
    """The job curves of one rank tag: ``<tag>/<suffix>`` for each of STATISTIC_SUFFIXES."""
    columns: dict[str, npt.NDArray[Any]] = {
        "mean": statistics.mean,
        "min": statistics.minimum,
        "max": statistics.maximum,
        "std": statistics.std,
        "ranks": statistics.count,
        "min_rank": statistics.min_rank,
        "max_rank": statistics.max_rank,
    }
    return [
        Curve(f"{tag}/{suffix}", statistics.steps, columns[suffix].astype(np.float64))
        for suffix in STATISTIC_SUFFIXES
    ]


def _value_template(serialize: Callable[[str], bytes], tag: str) -> bytes:
    """The serialized repeated ``Summary.value`` entry of ``tag`` minus its 4 float bytes."""
    encoded = serialize(tag)
    if not encoded.endswith(_ONE):
        raise RuntimeError(f"unexpected encoding of a scalar summary value for {tag!r}")
    return encoded[: -len(_ONE)]


def _summary_value(tag: str) -> bytes:
    value = summary_pb2.Summary.Value(tag=tag, scalar_value=1.0)
    return bytes(summary_pb2.Summary(value=[value]).SerializeToString())


def _tensorboard_value(tag: str) -> bytes:
    value = tensorboard_pb2.Summary.Value(tag=tag, simple_value=1.0)
    return bytes(tensorboard_pb2.Summary(value=[value]).SerializeToString())


@dataclass
class StepTable:
    """Every curve's value at every step, and which curves each step holds.

    Steps holding the same curves share one byte layout (the value templates
    with 4-byte holes for the floats): each such group is filled with a few
    array assignments instead of one bytes object per value.
    """

    steps: npt.NDArray[np.int64]
    values: npt.NDArray[np.float32]  # (steps, curves)
    groups: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]  # (rows, columns)

    @classmethod
    def of(cls, curves: Sequence[Curve]) -> StepTable:
        steps = np.unique(np.concatenate([curve.steps for curve in curves]))
        present = np.zeros((len(steps), len(curves)), dtype=bool)
        values = np.zeros((len(steps), len(curves)), dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            for column, curve in enumerate(curves):
                rows = np.searchsorted(steps, curve.steps)
                present[rows, column] = True
                values[rows, column] = curve.values
        rows_of_layout: dict[bytes, list[int]] = {}
        for row, key in enumerate(np.packbits(present, axis=1)):
            rows_of_layout.setdefault(key.tobytes(), []).append(row)
        groups = []
        for members in rows_of_layout.values():
            selected = np.asarray(members, dtype=np.int64)
            groups.append((selected, np.flatnonzero(present[selected[0]])))
        return cls(steps, values, groups)

    def summaries(self, templates: Sequence[bytes]) -> list[bytes]:
        """Each step's serialized ``Summary`` (one templated value per curve it holds)."""
        result: list[bytes] = [b""] * len(self.steps)
        for rows, columns in self.groups:
            holes = []
            skeleton = bytearray()
            for column in columns.tolist():
                skeleton += templates[column]
                holes.append(len(skeleton))
                skeleton += bytes(4)
            filled = np.tile(np.frombuffer(bytes(skeleton), dtype=np.uint8), (len(rows), 1))
            floats = self.values[np.ix_(rows, columns)].astype("<f4").view(np.uint8)
            for index, hole in enumerate(holes):
                filled[:, hole : hole + 4] = floats[:, 4 * index : 4 * index + 4]
            for row, summary in zip(rows.tolist(), filled, strict=True):
                result[row] = summary.tobytes()
        return result


def _step_events(
    curves: Sequence[Curve],
    table: StepTable | None,
    value_template: Callable[[str], bytes],
    event_head: Callable[[int], bytes],
    summary_key: bytes,
) -> list[bytes]:
    """One framed event per step holding every curve's value at that step, in curve order."""
    if not curves or table is None:
        return []
    templates = [_value_template(value_template, curve.tag) for curve in curves]
    return [
        files.frame(event_head(step) + summary_key + files.varint(len(summary)) + summary)
        for step, summary in zip(table.steps.tolist(), table.summaries(templates), strict=True)
    ]


def step_table(curves: Sequence[Curve]) -> StepTable | None:
    """The :class:`StepTable` of ``curves`` (None without any), shared by both job files."""
    return StepTable.of(curves) if curves else None


def _summary_key(message: Any) -> bytes:
    """The key of the length-delimited ``summary`` field of an ``Event``."""
    number = message.DESCRIPTOR.fields_by_name["summary"].number
    return files.field_key(number)


def summary_file_bytes(
    curves: Sequence[Curve], wall_time: float, table: StepTable | None = None
) -> list[bytes]:
    """The framed records of the job's summary (``_MS``) file: version, then one per step."""
    version = summary_pb2.Event(wall_time=wall_time, version=MINDSPORE_VERSION)
    records = [files.frame(version.SerializeToString())]

    def head(step: int) -> bytes:
        return bytes(summary_pb2.Event(wall_time=wall_time, step=step).SerializeToString())

    if table is None:
        table = step_table(curves)
    records.extend(
        _step_events(curves, table, _summary_value, head, _summary_key(summary_pb2.Event))
    )
    return records


def _layout(tags: Sequence[str], extra_lines: Sequence[str]) -> bytes:
    """A Custom Scalars layout: per tag, a margin chart of the mean within min..max."""
    layout = tensorboard_custom_scalars_pb2.Layout()
    category = layout.category.add(title="job: mean of the ranks, band from min to max")
    for tag in tags:
        chart = category.chart.add(title=tag)
        chart.margin.series.add(value=f"{tag}/mean", lower=f"{tag}/min", upper=f"{tag}/max")
    for line in extra_lines:
        chart = category.chart.add(title=line)
        chart.multiline.tag.append(re.escape(line))
    return bytes(layout.SerializeToString())


def _layout_event(wall_time: float, layout: bytes) -> bytes:
    value = tensorboard_pb2.Summary.Value(tag=CUSTOM_SCALARS_TAG)
    value.metadata.plugin_data.plugin_name = CUSTOM_SCALARS_PLUGIN
    value.tensor.dtype = tensorboard_pb2.DT_STRING
    value.tensor.tensor_shape.SetInParent()
    value.tensor.string_val.append(layout)
    event = tensorboard_pb2.Event(wall_time=wall_time, step=0)
    event.summary.value.append(value)
    return files.frame(event.SerializeToString())


def tensorboard_file_bytes(
    curves: Sequence[Curve],
    wall_time: float,
    *,
    margin_tags: Sequence[str],
    line_tags: Sequence[str],
    session: HParamsRun | None,
    table: StepTable | None = None,
) -> list[bytes]:
    """The framed records of the job's TensorBoard file.

    Version, the Custom Scalars layout, the HParams session (when given), then
    the same scalars as the summary file.
    """
    version = tensorboard_pb2.Event(wall_time=wall_time, file_version=TENSORBOARD_VERSION)
    records = [
        files.frame(version.SerializeToString()),
        _layout_event(wall_time, _layout(margin_tags, line_tags)),
    ]
    if table is None:
        table = step_table(curves)
    if session is not None:
        # The final values at the job's last step, not lone points at step 0.
        last_step = int(table.steps[-1]) if table is not None and len(table.steps) else 0
        records.append(session_records(session, wall_time, last_step))

    def head(step: int) -> bytes:
        return bytes(tensorboard_pb2.Event(wall_time=wall_time, step=step).SerializeToString())

    records.extend(
        _step_events(curves, table, _tensorboard_value, head, _summary_key(tensorboard_pb2.Event))
    )
    return records


def job_file_names(directory: str) -> list[str]:
    """The job files (summary and TensorBoard) directly in ``directory``."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(
        name
        for name in names
        if _JOB_SUMMARY_NAME.search(name) or _JOB_TENSORBOARD_NAME.match(name)
    )


def write_job_files(
    directory: str,
    contents: Mapping[str, list[bytes]],
    *,
    host: str | None = None,
) -> list[str]:
    """Write the job files (``"summary"``/``"tensorboard"`` -> records); return their paths.

    New names get a creation time no file of ``directory`` uses yet, so they
    sort after the files they replace; those are removed once the new files
    are in place.
    """
    earlier = job_file_names(directory)
    machine = host or files.host_name()
    timestamp = files.claim_timestamp(directory)
    written = []
    for kind, records in contents.items():
        if kind == "summary":
            name = files.summary_file_name(
                SUMMARY_PREFIX, timestamp, JOB_MARK, machine, SUMMARY_SUFFIX
            )
        else:
            name = files.tensorboard_file_name(timestamp, machine, label=JOB_MARK)
        # One write call: the records are already whole in memory.
        written.append(atomic_write(os.path.join(directory, name), [b"".join(records)]))
    kept = {os.path.basename(path) for path in written}
    for name in earlier:
        if name not in kept:
            with suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
    fsync_directory(directory)
    return written


class AppendedJobFiles:
    """The job files of a live job view: created once, then appended to, interval by interval.

    Each file is created with ``O_EXCL | O_NOFOLLOW`` (a planted link is
    refused, never followed), 0600 while it grows and 0400 once closed; the
    job files an earlier run left are removed once the new ones exist. Each
    interval's records are appended with one ``write`` and fsynced: a reader
    sees every record before them whole, and at most a tail still being
    written, which every reader (ours, TensorBoard's, MindInsight's) treats as
    not there yet. ``docs/job-view.md``, "Live".
    """

    def __init__(self, directory: str, *, tensorboard: bool, host: str | None = None) -> None:
        self.directory = directory
        earlier = job_file_names(directory)
        machine = host or files.host_name()
        timestamp = files.claim_timestamp(directory)
        wall_time = now()
        self.paths: dict[str, str] = {}
        self._descriptors: dict[str, int] = {}
        first = {
            "summary": [
                files.frame(
                    summary_pb2.Event(
                        wall_time=wall_time, version=MINDSPORE_VERSION
                    ).SerializeToString()
                )
            ],
        }
        names = {
            "summary": files.summary_file_name(
                SUMMARY_PREFIX, timestamp, JOB_MARK, machine, SUMMARY_SUFFIX
            )
        }
        if tensorboard:
            first["tensorboard"] = [
                files.frame(
                    tensorboard_pb2.Event(
                        wall_time=wall_time, file_version=TENSORBOARD_VERSION
                    ).SerializeToString()
                )
            ]
            names["tensorboard"] = f"events.out.tfevents.{timestamp}.{machine}.{JOB_MARK}"
        try:
            for kind, name in names.items():
                path = os.path.join(directory, name)
                self._descriptors[kind] = os.open(path, _APPEND_FLAGS, file_mode(False))
                self.paths[kind] = path
            self._append(first)
        except BaseException:
            self.close()
            raise
        for name in earlier:
            with suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
        fsync_directory(directory)

    @property
    def tensorboard(self) -> bool:
        return "tensorboard" in self._descriptors

    def append(
        self,
        curves: Sequence[Curve],
        wall_time: float,
        *,
        layout: tuple[Sequence[str], Sequence[str]] | None = None,
        session: HParamsRun | None = None,
    ) -> None:
        """Append one event per step of ``curves`` (and, to TensorBoard, a new layout/session)."""
        table = step_table(curves)

        def summary_head(step: int) -> bytes:
            return bytes(summary_pb2.Event(wall_time=wall_time, step=step).SerializeToString())

        records = {
            "summary": _step_events(
                curves, table, _summary_value, summary_head, _summary_key(summary_pb2.Event)
            )
        }
        if self.tensorboard:

            def board_head(step: int) -> bytes:
                return bytes(
                    tensorboard_pb2.Event(wall_time=wall_time, step=step).SerializeToString()
                )

            board: list[bytes] = []
            if layout is not None:
                board.append(_layout_event(wall_time, _layout(layout[0], layout[1])))
            if session is not None:
                board.append(session_records(session, wall_time))
            board.extend(
                _step_events(
                    curves,
                    table,
                    _tensorboard_value,
                    board_head,
                    _summary_key(tensorboard_pb2.Event),
                )
            )
            records["tensorboard"] = board
        self._append(records)

    def _append(self, records: Mapping[str, list[bytes]]) -> None:
        for kind, chunks in records.items():
            descriptor = self._descriptors.get(kind)
            if descriptor is None or not chunks:
                continue
            data = memoryview(b"".join(chunks))
            while data:  # a regular file takes it in one write; a short one continues it
                data = data[os.write(descriptor, data) :]
            os.fsync(descriptor)

    def close(self) -> None:
        """Make the files read-only (0400) and close them. Idempotent."""
        for kind, descriptor in list(self._descriptors.items()):
            with suppress(OSError):
                os.fchmod(descriptor, file_mode(True))
            with suppress(OSError):
                os.close(descriptor)
            del self._descriptors[kind]


_APPEND_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | os.O_APPEND
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def now() -> float:
    """The wall time stamped on the job's events."""
    return time.time()
