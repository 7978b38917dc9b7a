"""A rank directory's scalars, read fast, for the offline merge's worker processes.

The offline merge reads every scalar of every rank (``docs/job-view.md``,
"Offline merge"): 64 ranks x 10,000 steps x 10 tags is 6.4 million values,
and asking protobuf for each value's tag and number costs ~2 us apiece. But
a rank's steps almost always hold the same tags in the same order, so their
``Summary`` messages are the same bytes except for the 4 bytes of each
float. The records are therefore grouped by such a layout (learnt from one
record with protobuf, as the bytes protobuf itself serializes for those
tags); each group is checked byte for byte against its layout and its floats
are read as one array. A record that matches no layout (histograms, images,
another tag order) is decoded with protobuf as before, so every scalar counts
either way. Records are framed and CRC-checked by the writer's
``files.RecordReader``; a torn or damaged file gives what can be read.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.writer import WriterError, files, reader
from rankscribe.writer.pb import summary_pb2

if TYPE_CHECKING:
    import numpy.typing as npt

logger = logging.getLogger(__name__)

__all__ = ["rank_dir_scalars"]

_WALL_TIME_KEY = 0x09  # field 1, fixed64
_STEP_KEY = 0x10  # field 2, varint
_SUMMARY_KEY = 0x2A  # field 5, length-delimited
_ONE = np.float32(1.0).tobytes()

#: tag -> (steps, values, sequence numbers of their records) in pieces.
Columns = dict[
    str,
    tuple[
        list["npt.NDArray[np.int64]"],
        list["npt.NDArray[np.float64]"],
        list["npt.NDArray[np.int64]"],
    ],
]
Row = tuple[int, bytes, int]  # step, summary bytes, sequence number


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("a truncated varint")
        byte = data[position]
        result |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            return result, position
        shift += 7


def _split_event(payload: bytes) -> tuple[int, bytes] | None:
    """(step, summary bytes) of an event that is wall time, step and summary only, else None."""
    try:
        position = 0
        if payload[:1] == b"\x09":
            position = 9
        step = 0
        if payload[position : position + 1] == b"\x10":
            step, position = _varint(payload, position + 1)
            if step >= 1 << 63:
                step -= 1 << 64  # int64 on the wire
        if payload[position : position + 1] != b"\x2a":
            return None
        size, position = _varint(payload, position + 1)
    except ValueError:
        return None
    if position + size != len(payload):
        return None
    return step, payload[position:]


@dataclass
class _Layout:
    """The bytes of a ``Summary`` of scalar values, with the float positions as holes."""

    tags: list[str]
    skeleton: npt.NDArray[np.uint8]
    holes: list[int]
    fixed: npt.NDArray[np.bool_]  # columns that must equal the skeleton

    @classmethod
    def of(cls, summary: bytes) -> _Layout | None:
        try:
            message = summary_pb2.Summary.FromString(summary)
        except Exception:
            return None
        tags: list[str] = []
        skeleton = bytearray()
        holes: list[int] = []
        for value in message.value:
            if value.WhichOneof("value") != "scalar_value":
                return None
            tag = (
                value.tag
                if isinstance(value.tag, str)
                else bytes(value.tag).decode("utf-8", "replace")
            )
            single = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, scalar_value=1.0)]
            ).SerializeToString()
            if not single.endswith(_ONE):
                return None
            skeleton += single[: -len(_ONE)]
            holes.append(len(skeleton))
            skeleton += bytes(4)
            tags.append(tag)
        if bytes(skeleton) != _masked(summary, holes):
            return None
        fixed = np.ones(len(skeleton), dtype=bool)
        for hole in holes:
            fixed[hole : hole + 4] = False
        return cls(tags, np.frombuffer(bytes(skeleton), dtype=np.uint8), holes, fixed)


def _masked(summary: bytes, holes: Iterable[int]) -> bytes:
    masked = bytearray(summary)
    for hole in holes:
        masked[hole : hole + 4] = bytes(4)
    return bytes(masked)


def _decode_slowly(payload: bytes, sequence: int, columns: Columns) -> None:
    try:
        event = summary_pb2.Event.FromString(payload)
    except Exception:
        return  # not an event (the framing's CRC passed: a foreign record)
    if event.WhichOneof("what") == "summary":
        _add_summary(event.step, event.summary, sequence, columns)


def _add_summary(step: int, summary: Any, sequence: int, columns: Columns) -> None:
    for value in summary.value:
        if value.WhichOneof("value") == "scalar_value":
            tag = (
                value.tag
                if isinstance(value.tag, str)
                else bytes(value.tag).decode("utf-8", "replace")
            )
            steps, values, order = columns.setdefault(tag, ([], [], []))
            steps.append(np.asarray([step], dtype=np.int64))
            values.append(np.asarray([value.scalar_value], dtype=np.float64))
            order.append(np.asarray([sequence], dtype=np.int64))


def _decode_group(rows: list[Row], columns: Columns) -> None:
    """Rows of one summary length: by layout where the bytes match one, else one by one."""
    while rows:
        layout = _Layout.of(rows[0][1])
        if layout is None:
            step, summary, sequence = rows.pop(0)
            try:
                message = summary_pb2.Summary.FromString(summary)
            except Exception:
                continue  # not a summary: nothing of it is a scalar
            _add_summary(step, message, sequence, columns)
            continue
        block = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.uint8)
        block = block.reshape(len(rows), len(layout.skeleton))
        matches = np.all(block[:, layout.fixed] == layout.skeleton[layout.fixed], axis=1)
        steps = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        order = np.fromiter((row[2] for row in rows), dtype=np.int64, count=len(rows))
        chosen = block[matches]
        for tag, hole in zip(layout.tags, layout.holes, strict=True):
            floats = np.ascontiguousarray(chosen[:, hole : hole + 4]).view("<f4").reshape(-1)
            target = columns.setdefault(tag, ([], [], []))
            target[0].append(steps[matches])
            target[1].append(floats.astype(np.float64))
            target[2].append(order[matches])
        rows = [row for row, matched in zip(rows, matches.tolist(), strict=True) if not matched]


def _read_file(path: str, columns: Columns, first: int) -> int:
    """Read one file into ``columns``; its records are numbered from ``first``; return the next."""
    # Grouped by length: one layout's rows have one length.
    by_length: dict[int, list[Row]] = {}
    records = files.RecordReader(path, strict=False)
    sequence = first
    for record in records:
        sequence += 1
        split = _split_event(record.payload)
        if split is None:
            _decode_slowly(record.payload, sequence, columns)
            continue
        by_length.setdefault(len(split[1]), []).append((split[0], split[1], sequence))
    for rows in by_length.values():
        _decode_group(rows, columns)
    for damage in records.corruptions:
        logger.warning("%s", damage)
    if records.torn_tail is not None:
        logger.warning("%s: a torn last record (%s) is left out", path, records.torn_tail.reason)
    return sequence


def rank_dir_scalars(directory: str | os.PathLike[str]) -> dict[str, tuple[Any, Any]]:
    """``tag -> (steps, values)`` of every scalar in the summary files of ``directory``.

    Sorted by step; a step recorded twice keeps its last value (in file
    order), as the job statistics of
    :func:`rankscribe.lineage.jobview.series_from_dir` have it. A file that
    cannot be read is skipped with a warning.
    """
    columns: Columns = {}
    sequence = 0
    for path in reader.list_summary_files(os.fspath(directory), "summary"):
        try:
            sequence = _read_file(os.fspath(path), columns, sequence)
        except (OSError, WriterError) as error:
            logger.warning("%s: skipped, it could not be read (%s)", path, error)
    found = {}
    for tag, (steps, values, order) in columns.items():
        all_steps, all_values = np.concatenate(steps), np.concatenate(values)
        ranking = np.lexsort((np.concatenate(order), all_steps))  # by step, then file order
        all_steps, all_values = all_steps[ranking], all_values[ranking]
        last_of_step = np.append(all_steps[1:] != all_steps[:-1], True)
        found[tag] = (all_steps[last_of_step], all_values[last_of_step])
    return found
