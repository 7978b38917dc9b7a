"""The job's own files: cross-rank curves as a summary file and a TensorBoard file.

The writer frames and writes them (:mod:`rankscribe.writer.eventfiles`, the one
event writer): the offline merge's and ``write_job_view``'s files are built whole
in memory and written atomically (0400, never through a planted link), under a
fresh name; the job files an earlier run left are removed once the new ones are
in place, so a reader sees every point once (or, for an instant, the old file
beside the new one — never a half-written file). The live view's files grow by
appends. Each step's scalars are one event, encoded in bulk from the curves'
arrays. ``docs/job-view.md`` lists the files and tags.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview._session import FINAL_PREFIX, HParamsRun, add_session
from rankscribe.jobview.job.verdicts._sentences import verdict_lines
from rankscribe.ranks.files import fsync_directory, make_private_dir
from rankscribe.writer import files
from rankscribe.writer.eventfiles import (
    EventFileAppender,
    EventRecords,
    ScalarSteps,
    write_event_file,
)
from rankscribe.writer.pb import tensorboard_pb2

if TYPE_CHECKING:
    import numpy.typing as npt

    from rankscribe.jobview.job._statistics import TagStatistics

__all__ = [
    "BOARD_FOLDER",
    "STATISTIC_SUFFIXES",
    "AppendedJobFiles",
    "Curve",
    "board_curves",
    "board_session",
    "job_file_names",
    "step_table",
    "summary_file_records",
    "tag_curves",
    "tensorboard_file_records",
    "write_job_files",
]

#: What each job tag adds to the rank tag, in file order.
STATISTIC_SUFFIXES = ("mean", "min", "max", "std", "ranks", "min_rank", "max_rank")
SUMMARY_PREFIX = "events"
JOB_MARK = "job"
SUMMARY_SUFFIX = files.SUMMARY_SUFFIX
LAYOUT_TITLE = "job: mean of the ranks, band from min to max"

#: The job's TensorBoard file lies in this folder of the job dir. TensorBoard names a run
#: by the folder holding its event files, relative to ``--logdir``: a file in the job dir
#: itself is the run ``.`` when the job dir is the logdir; here it is ``job`` (and
#: ``<job>/job`` from the base dir), beside the ranks' ``rank_<n>``.
BOARD_FOLDER = "job"
#: Job tags holding a rank's number: TensorBoard's smoothing (0.6 by default) would draw
#: them as fractions of a rank. They stay in the summary file; TensorBoard compares the
#: ranks as runs of their own.
RANK_NUMBER_SUFFIXES = ("/min_rank", "/max_rank", "/slowest_rank")
#: The live view's verdicts so far: job scalars in the summary file, text in TensorBoard.
VERDICT_PREFIX = "job/"
#: TensorBoard's text tab lists the job's verdicts under this tag.
VERDICTS_TEXT_TAG = "verdicts"

_JOB_SUMMARY_NAME = re.compile(r"\.out\.events\.summary\.\d+\.job\..*_MS$")
_JOB_TENSORBOARD_NAME = re.compile(r"^events\.out\.tfevents\.\d+\..*\.job$")


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


def step_table(curves: Sequence[Curve]) -> ScalarSteps | None:
    """The curves laid out by step (None without any), shared by both job files."""
    if not curves:
        return None
    return ScalarSteps([(curve.tag, curve.steps, curve.values) for curve in curves])


def summary_file_records(
    curves: Sequence[Curve], wall_time: float, table: ScalarSteps | None = None
) -> EventRecords:
    """The records of the job's summary (``_MS``) file: version, then one per step."""
    records = EventRecords("mindinsight")
    records.add_version(wall_time)
    if table is None:
        table = step_table(curves)
    if table is not None:
        records.add_scalars(table, wall_time)
    return records


def add_layout(
    records: EventRecords, wall_time: float, tags: Sequence[str], extra_lines: Sequence[str]
) -> None:
    """A Custom Scalars layout: per tag, a margin chart of the mean within min..max."""
    records.add_layout(
        wall_time,
        LAYOUT_TITLE,
        margin_charts={tag: (f"{tag}/mean", f"{tag}/min", f"{tag}/max") for tag in tags},
        line_charts={line: [line] for line in extra_lines},
    )


def board_curves(curves: Sequence[Curve]) -> list[Curve]:
    """The curves TensorBoard's Scalars tab draws: no rank numbers, no verdicts.

    A rank number smoothed is no rank, and a verdict is a sentence, not a curve: the
    summary file keeps both (``docs/job-view.md``, "In the viewers").
    """
    return [
        curve
        for curve in curves
        if not curve.tag.startswith(VERDICT_PREFIX) and not curve.tag.endswith(RANK_NUMBER_SUFFIXES)
    ]


def board_session(session: HParamsRun) -> HParamsRun:
    """The job's HParams session with its results as ``final/loss``, ``final/metric/<k>``.

    The results are scalars (HParams reads a metric's value from the Scalars data),
    one point each at the job's last step: under their own names they never join a
    curve's chart (a ``loss`` point would sit on the ranks' ``loss`` curves). The
    merge's notes and the verdicts are no results: ``rankscribe-lineage show``, the
    report, the text tab and the ``hparams`` export carry them.
    """
    finals = {
        f"{FINAL_PREFIX}{name}": value
        for name, value in session.metrics.items()
        if name == "loss" or name.startswith("metric/")
    }
    return HParamsRun(session.name, dict(session.hparams), finals, session.start_time)


def _text_event(wall_time: float, step: int, text: str) -> tensorboard_pb2.Event:
    """A string under TensorBoard's ``text`` plugin (markdown), at ``step``."""
    metadata = tensorboard_pb2.SummaryMetadata(
        plugin_data=tensorboard_pb2.SummaryMetadata.PluginData(plugin_name="text")
    )
    tensor = tensorboard_pb2.TensorProto(
        dtype=tensorboard_pb2.DT_STRING,
        tensor_shape=tensorboard_pb2.TensorShapeProto(),
        string_val=[text.encode("utf-8")],
    )
    value = tensorboard_pb2.Summary.Value(tag=VERDICTS_TEXT_TAG, metadata=metadata, tensor=tensor)
    return tensorboard_pb2.Event(
        wall_time=wall_time, step=step, summary=tensorboard_pb2.Summary(value=[value])
    )


def verdicts_markdown(verdicts: Mapping[str, Any]) -> str:
    """The merged verdicts as a markdown list of sentences (``verdict_lines``)."""
    return "\n".join(f"- {line}" for line in verdict_lines(verdicts))


def tensorboard_file_records(
    curves: Sequence[Curve],
    wall_time: float,
    *,
    margin_tags: Sequence[str],
    line_tags: Sequence[str],
    session: HParamsRun | None,
    table: ScalarSteps | None = None,
    verdicts: Mapping[str, Any] | None = None,
) -> EventRecords:
    """The records of the job's TensorBoard file.

    Version, the Custom Scalars layout, the HParams session (when given; its
    results as ``final/...`` at the job's last step), the curves TensorBoard draws
    (:func:`board_curves`; ``table``, when given, holds those), then the verdicts
    as text at the last step (when given).
    """
    records = EventRecords("tensorboard")
    records.add_version(wall_time)
    add_layout(records, wall_time, margin_tags, line_tags)
    if table is None:
        table = step_table(board_curves(curves))
    last_step = int(table.steps[-1]) if table is not None and len(table) else 0
    if session is not None:
        # The final values at the job's last step, not lone points at step 0.
        add_session(records, board_session(session), wall_time, last_step)
    if table is not None:
        records.add_scalars(table, wall_time)
    text = verdicts_markdown(verdicts) if verdicts else ""
    if text:
        records.add_event(_text_event(wall_time, last_step, text))
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


def _board_directory(directory: str) -> str:
    """The job's TensorBoard folder, made private; a link at its name is replaced, never
    followed (``docs/job-view.md``, "Files")."""
    board = os.path.join(directory, BOARD_FOLDER)
    if os.path.islink(board):
        os.unlink(board)
    return make_private_dir(board)


def _earlier_files(directory: str, board: str | None) -> list[str]:
    """The job files in ``directory`` (and in its TensorBoard folder), as paths."""
    paths = [os.path.join(directory, name) for name in job_file_names(directory)]
    if board is not None and not os.path.islink(board):
        paths += [os.path.join(board, name) for name in job_file_names(board)]
    return paths


def write_job_files(
    directory: str,
    contents: Mapping[str, EventRecords],
    *,
    host: str | None = None,
    board_folder: bool = True,
) -> list[str]:
    """Write the job files (``"summary"``/``"tensorboard"`` -> records); return their paths.

    The TensorBoard file goes in the job dir's :data:`BOARD_FOLDER` (with
    ``board_folder=False``, in ``directory`` itself: a folder already named for
    its run, such as a group's). New names get a creation time no file of
    ``directory`` uses yet, so they sort after the files they replace; those are
    removed once the new files are in place.
    """
    board = os.path.join(directory, BOARD_FOLDER) if board_folder else None
    earlier = _earlier_files(directory, board)
    machine = host or files.host_name()
    timestamp = files.claim_timestamp(directory)
    written = []
    for kind, records in contents.items():
        name = _job_file_name(kind, timestamp, machine)
        folder = directory
        if kind == "tensorboard" and board_folder:
            folder = _board_directory(directory)
        written.append(write_event_file(os.path.join(folder, name), records))
    kept = set(written)
    for path in earlier:
        if path not in kept:
            with suppress(FileNotFoundError):
                os.unlink(path)
    if board is not None and os.path.isdir(board) and not os.path.islink(board):
        fsync_directory(board)
    fsync_directory(directory)
    return written


def _job_file_name(kind: str, timestamp: int, machine: str) -> str:
    if kind == "summary":
        return files.summary_file_name(SUMMARY_PREFIX, timestamp, JOB_MARK, machine, SUMMARY_SUFFIX)
    return files.tensorboard_file_name(timestamp, machine, label=JOB_MARK)


class AppendedJobFiles:
    """The job files of a live job view: created once, then appended to, interval by interval.

    Each file is the writer's :class:`~rankscribe.writer.eventfiles.EventFileAppender`:
    created with ``O_EXCL | O_NOFOLLOW`` (a planted link is refused, never
    followed), 0600 while it grows and 0400 once closed; the job files an
    earlier run left are removed once the new ones exist. Each interval's
    records are appended and fsynced: a reader sees every record before them
    whole, and at most a tail still being written, which every reader (ours,
    TensorBoard's, MindInsight's) treats as not there yet. ``docs/job-view.md``,
    "Live".
    """

    def __init__(self, directory: str, *, tensorboard: bool, host: str | None = None) -> None:
        self.directory = directory
        earlier = _earlier_files(directory, os.path.join(directory, BOARD_FOLDER))
        machine = host or files.host_name()
        timestamp = files.claim_timestamp(directory)
        self._appenders: dict[str, EventFileAppender] = {}
        self._last_step = 0
        formats = {"summary": "mindinsight"}
        if tensorboard:
            formats["tensorboard"] = "tensorboard"
        try:
            for kind, file_format in formats.items():
                folder = _board_directory(directory) if kind == "tensorboard" else directory
                self._appenders[kind] = EventFileAppender(
                    folder,
                    partial(_job_file_name, kind, machine=machine),
                    format=file_format,
                    timestamp=timestamp,
                )
        except BaseException:
            self.close()
            raise
        for path in earlier:
            with suppress(FileNotFoundError):
                os.unlink(path)
        fsync_directory(directory)

    @property
    def paths(self) -> dict[str, str]:
        """The file of each kind (``"summary"``, ``"tensorboard"``)."""
        return {kind: appender.paths[0] for kind, appender in self._appenders.items()}

    @property
    def tensorboard(self) -> bool:
        return "tensorboard" in self._appenders

    def append(
        self,
        curves: Sequence[Curve],
        wall_time: float,
        *,
        layout: tuple[Sequence[str], Sequence[str]] | None = None,
        session: HParamsRun | None = None,
        verdicts: Mapping[str, Any] | None = None,
        verdict_text: Sequence[str] = (),
    ) -> None:
        """Append one event per step of ``curves``; to TensorBoard, the curves it draws
        (:func:`board_curves`), and a new layout, the session and the verdicts as
        sentences when given: ``verdicts`` (a merged lineage's keys, :func:`verdicts_markdown`)
        or ``verdict_text`` (the live view's sentences, as ``show`` prints them)."""
        table = step_table(curves)
        summary = EventRecords("mindinsight")
        if table is not None:
            summary.add_scalars(table, wall_time)
            self._last_step = max(self._last_step, int(table.steps[-1]))
        self._append("summary", summary)
        if self.tensorboard:
            board = EventRecords("tensorboard")
            if layout is not None:
                add_layout(board, wall_time, layout[0], layout[1])
            if session is not None:
                # The final values at the last step written, not lone points at step 0.
                add_session(board, board_session(session), wall_time, self._last_step)
            board_table = step_table(board_curves(curves))
            if board_table is not None:
                board.add_scalars(board_table, wall_time)
            text = (
                verdicts_markdown(verdicts)
                if verdicts
                else "\n".join(f"- {line}" for line in verdict_text)
            )
            if text:
                board.add_event(_text_event(wall_time, self._last_step, text))
            self._append("tensorboard", board)

    def _append(self, kind: str, records: EventRecords) -> None:
        appender = self._appenders.get(kind)
        if appender is not None and len(records):
            appender.append(records)

    def close(self) -> None:
        """Make the files read-only (0400) and close them. Idempotent."""
        failure: OSError | None = None
        for appender in self._appenders.values():
            try:
                appender.close()
            except OSError as error:  # the other file is closed all the same
                failure = failure or error
        if failure is not None:
            raise failure


def now() -> float:
    """The wall time stamped on the job's events."""
    return time.time()
