"""The train lineage known when training starts, kept on disk for a run that never ends.

A rank's lineage file gets its train lineage at the end of training; a job
killed before that (Ctrl-C, a crash, a time limit) would leave only the
dataset graph, and its merged lineage no network, optimizer or learning rate.
So when training starts the collector writes what it knows then (network,
optimizer, learning rate, loss function, batch size, epochs, dataset) as one
``train_lineage`` event in :data:`TRAIN_START_FILE_NAME`, beside the rank's
files: written whole, fsynced and renamed into place
(:func:`rankscribe.writer.eventfiles.write_event_file`), so a killed rank keeps
it. When training ends the train lineage goes into the lineage file as it
always did and the start file is removed.

Only the merge reads the start file (:func:`parse_rank_run`): a rank whose
lineage files hold no train lineage gets the start file's, when the file is
the user's own (a file of another user is skipped with a warning naming its
owner: ``docs/layout.md``, "Files of another user"). Its name does not
end in ``_lineage``, so MindInsight and the lineage queries never read it as a
run's file; a finished run's files are what they were without it
(``docs/layout.md``, "An interrupted job").
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

from rankscribe.lineage._checks import check_path
from rankscribe.lineage.errors import LineageParamTypeError, LineageSummaryAnalyzeException
from rankscribe.lineage.record._model import TrainLineageInfo
from rankscribe.lineage.record._parser import ParsedRun, RunLineage, parse_run, read_lineage_file
from rankscribe.ranks.files import UnsafeFileError
from rankscribe.writer.eventfiles import EventRecords, write_event_file
from rankscribe.writer.pb import lineage_pb2

logger = logging.getLogger(__name__)

__all__ = [
    "TRAIN_START_FILE_NAME",
    "parse_rank_run",
    "remove_train_start",
    "write_train_start",
]

#: The file, in a rank's directory, holding the train lineage known at the start of training.
TRAIN_START_FILE_NAME = ".rankscribe-train-start"
_TRAIN_SECTIONS = ("hyper_parameters", "train_dataset", "algorithm", "model")


def write_train_start(directory: str | os.PathLike[str], lineage: TrainLineageInfo) -> str:
    """Write ``lineage`` as ``directory``'s start record (replacing any); return its path."""
    target = check_path("directory", directory)
    if not isinstance(lineage, TrainLineageInfo):
        raise LineageParamTypeError(
            f"lineage must be a TrainLineageInfo, got {type(lineage).__name__}"
        )
    records = EventRecords("mindinsight")
    event = lineage_pb2.LineageEvent(wall_time=time.time(), train_lineage=lineage.to_proto())
    records.add_event(event)
    # Not final (0600): the next training run of the same collector replaces it.
    return write_event_file(os.path.join(target, TRAIN_START_FILE_NAME), records, final=False)


def remove_train_start(directory: str | os.PathLike[str]) -> None:
    """Remove ``directory``'s start record, if any (the run's train lineage is on disk)."""
    target = check_path("directory", directory)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(target, TRAIN_START_FILE_NAME))


def _train_start(directory: str, parsed: ParsedRun) -> TrainLineageInfo | None:
    path = os.path.join(directory, TRAIN_START_FILE_NAME)
    if not os.path.lexists(path):
        return None
    try:
        # Regular files only, never through a link, never blocking on a FIFO; and this
        # user's only: another user's would put its lineage into the job's.
        content = read_lineage_file(path, owned=True)
    except LineageSummaryAnalyzeException as error:
        cause = error.__cause__
        why = cause.reason if isinstance(cause, UnsafeFileError) else error.message
        parsed.warnings.append(f"skipping the training start record {path}: {why}")
        return None
    return content.train


def parse_rank_run(directory: str) -> ParsedRun:
    """:func:`~rankscribe.lineage.record._parser.parse_run`, completed by the start record.

    When the run's lineage files hold no train lineage (training was
    interrupted) and the directory holds a start record, the record's
    sections stand in for it; the dataset graph and user-defined values read
    from the files are kept. A run whose files hold a train lineage is read
    exactly as :func:`parse_run` reads it.
    """
    directory = check_path("directory", directory)
    parsed = parse_run(directory)
    lineage = parsed.lineage
    if lineage is not None and any(lineage.section(name) for name in _TRAIN_SECTIONS):
        return parsed
    start = _train_start(directory, parsed)
    if start is None:
        return parsed
    if lineage is None:
        lineage = parsed.lineage = RunLineage(directory)
    lineage.sections.update(start.to_query_dict())
    logger.debug("%s: the train lineage is the one known when training started", directory)
    return parsed
