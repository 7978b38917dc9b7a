"""Whole directories (or single files) read and decoded in one call."""

from __future__ import annotations

import os
from pathlib import Path

from rankscribe.writer._arguments import check_bool, check_path
from rankscribe.writer.files import FileKind, list_summary_files
from rankscribe.writer.reader._columns import scalar_arrays
from rankscribe.writer.reader._decoded import (
    LineageRecord,
    SummaryEvent,
    decode_event,
    decode_lineage_event,
)
from rankscribe.writer.reader._readers import read_events, read_lineage_events


def _summary_files(source: str | os.PathLike[str]) -> list[Path]:
    path = Path(source)
    if path.is_dir():
        return list_summary_files(path, FileKind.SUMMARY)
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {os.fspath(path)!r}")
    return [path]


def load_dir(directory: str | os.PathLike[str], *, strict: bool = False) -> list[SummaryEvent]:
    """Return every event of every summary (``_MS``) file in ``directory``, decoded.

    Files come in :func:`list_summary_files` order and events in file order.
    ``directory`` may also name a single summary file.
    """
    check_path("directory", directory, owner="load_dir")
    check_bool("strict", strict, owner="load_dir")
    return [
        decode_event(event)
        for path in _summary_files(directory)
        for event in read_events(path, strict=strict)
    ]


def load_lineage_dir(
    directory: str | os.PathLike[str], *, strict: bool = False
) -> list[LineageRecord]:
    """Return every record of every ``_lineage`` file in ``directory``, decoded, in order."""
    check_path("directory", directory, owner="load_lineage_dir")
    check_bool("strict", strict, owner="load_lineage_dir")
    return [
        decode_lineage_event(event)
        for path in list_summary_files(directory, FileKind.LINEAGE)
        for event in read_lineage_events(path, strict=strict)
    ]


def scalars(
    source: str | os.PathLike[str], *, strict: bool = False
) -> dict[str, list[tuple[int, float]]]:
    """Return every scalar in an event file or directory: ``{tag: [(step, value), ...]}``.

    The same points as :func:`scalar_arrays` (which reads them; see it for the
    files read and for tags that are not UTF-8), as Python lists of tuples.
    Tags keep their first-seen order and each list keeps file order. Nothing is
    merged: a tag written twice in one step appears twice (MindInsight would
    keep only the last). An event without a step counts as step 0, as it does
    for MindInsight. Values are the stored float32, widened.
    """
    check_path("source", source, owner="scalars")
    check_bool("strict", strict, owner="scalars")
    return {
        tag: list(zip(steps.tolist(), values.tolist(), strict=True))
        for tag, (steps, values) in scalar_arrays(source, strict=strict).items()
    }
