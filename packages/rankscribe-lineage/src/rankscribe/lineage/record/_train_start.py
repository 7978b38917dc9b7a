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

Beside it, a rank whose training stopped on an exception writes its stop record
(:data:`TRAIN_STOP_FILE_NAME`: the exception's class name, as JSON, written whole): the
merge hands the names to the job view, whose stop verdict names the rank that raised
among those that may have stopped first (``docs/job-view.md``, "Where each rank
stopped"). A rank whose training a SIGTERM or a Ctrl-C (SIGINT) stopped says so in its
record (``signal``): it did not raise on its own, and it wrote every step it ran; and so
does a rank whose
exception said it lost its connection to another rank (``lost_peer``: under torchrun, the
ranks left raise so when one is killed). A new start record removes an earlier run's stop
record.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import time
from typing import NamedTuple

from rankscribe.lineage._checks import check_path
from rankscribe.lineage.errors import (
    LineageParamTypeError,
    LineageParamValueError,
    LineageSummaryAnalyzeException,
)
from rankscribe.lineage.record._model import TrainLineageInfo
from rankscribe.lineage.record._parser import ParsedRun, RunLineage, parse_run, read_lineage_file
from rankscribe.ranks.files import UnsafeFileError, atomic_write, read_regular
from rankscribe.ranks.jsondata import JSONDataError, parse_json
from rankscribe.writer.eventfiles import EventRecords, write_event_file
from rankscribe.writer.pb import lineage_pb2

logger = logging.getLogger(__name__)

__all__ = [
    "TRAIN_START_FILE_NAME",
    "TRAIN_STOP_FILE_NAME",
    "TrainStop",
    "parse_rank_run",
    "read_train_stop",
    "remove_train_start",
    "write_train_start",
    "write_train_stop",
]

#: The file, in a rank's directory, holding the train lineage known at the start of training.
TRAIN_START_FILE_NAME = ".rankscribe-train-start"
_TRAIN_SECTIONS = ("hyper_parameters", "train_dataset", "algorithm", "model")
#: The file, in a rank's directory, naming the exception its training stopped on.
TRAIN_STOP_FILE_NAME = ".rankscribe-train-stop"
#: The longest exception name a stop record keeps, and the most bytes read of one.
_MAX_EXCEPTION_NAME = 200
_MAX_HOST_NAME = 255
_MAX_STOP_BYTES = 1024


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
    with contextlib.suppress(FileNotFoundError):  # an earlier run's: this one has not stopped
        os.unlink(os.path.join(target, TRAIN_STOP_FILE_NAME))
    # Not final (0600): the next training run of the same collector replaces it.
    return write_event_file(os.path.join(target, TRAIN_START_FILE_NAME), records, final=False)


#: The signals a stop record may name: SIGTERM, which RankScribe turns into an end that
#: writes what was recorded (``rankscribe.ranks.exits.end_cleanly_on_sigterm``), and
#: SIGINT (Ctrl-C; Python raises ``KeyboardInterrupt``), whose record a rank writes once
#: its files are closed.
STOP_SIGNALS = ("SIGTERM", "SIGINT")


def write_train_stop(
    directory: str | os.PathLike[str],
    exception: str,
    *,
    signal: str | None = None,
    lost_peer: bool = False,
) -> str:
    """Write ``directory``'s stop record: its training stopped on ``exception`` (a class
    name; the first 200 characters kept), raised by ``signal`` (one of
    :data:`STOP_SIGNALS`; None: by the program itself); ``lost_peer``: the exception
    said the rank lost its connection to another rank (a consequence of that rank's
    end, not a fault of its own). Returns its path."""
    target = check_path("directory", directory)
    if not isinstance(exception, str) or not exception:
        raise LineageParamTypeError(
            f"exception must be an exception's name (a non-empty str), got {exception!r}"
        )
    if signal is not None and signal not in STOP_SIGNALS:
        raise LineageParamValueError(
            f"signal must be None or one of {', '.join(STOP_SIGNALS)}, got {signal!r}"
        )
    if not isinstance(lost_peer, bool):
        raise LineageParamTypeError(f"lost_peer must be a bool, got {lost_peer!r}")
    record: dict[str, object] = {
        "exception": exception[:_MAX_EXCEPTION_NAME],
        "wall_time": time.time(),
        "host": socket.gethostname()[:_MAX_HOST_NAME],
    }
    if signal is not None:
        record["signal"] = signal
    if lost_peer:
        record["lost_peer"] = True
    text = json.dumps(record)
    return atomic_write(os.path.join(target, TRAIN_STOP_FILE_NAME), [text.encode()])


class TrainStop(NamedTuple):
    """A rank's stop record: the exception its training stopped on, when and where the
    record was written (None where the record lacks them), the signal that raised
    the exception (None: the program raised it; a record naming another signal than
    :data:`STOP_SIGNALS` counts as none), and whether the exception said the rank lost
    its connection to another rank."""

    exception: str
    wall_time: float | None
    host: str | None
    signal: str | None = None
    lost_peer: bool = False


def read_train_stop(directory: str | os.PathLike[str]) -> TrainStop | None:
    """``directory``'s stop record: the exception its training stopped on, its wall time
    and host; None without one. A record that is not this user's regular file, or not
    what :func:`write_train_stop` writes, is skipped with a warning (None)."""
    path = os.path.join(check_path("directory", directory), TRAIN_STOP_FILE_NAME)
    if not os.path.lexists(path):
        return None
    try:
        record = parse_json(
            read_regular(path, limit=_MAX_STOP_BYTES, owned=True),
            what=f"the training stop record {path}",
            max_bytes=_MAX_STOP_BYTES,
        )
    except (OSError, JSONDataError) as error:
        why = error.reason if isinstance(error, UnsafeFileError) else error
        logger.warning("skipping the training stop record %s: %s", path, why)
        return None
    exception = record.get("exception") if isinstance(record, dict) else None
    if not isinstance(exception, str) or not exception:
        logger.warning("skipping the training stop record %s: it names no exception", path)
        return None
    assert isinstance(record, dict)
    wall_time, host = record.get("wall_time"), record.get("host")
    when: float | None = None
    if isinstance(wall_time, (int, float)) and not isinstance(wall_time, bool):
        when = float(wall_time) if math.isfinite(wall_time) else None
    signal = record.get("signal")
    return TrainStop(
        exception[:_MAX_EXCEPTION_NAME],
        when,
        host[:_MAX_HOST_NAME] if isinstance(host, str) and host else None,
        signal if signal in STOP_SIGNALS else None,
        record.get("lost_peer") is True,
    )


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
