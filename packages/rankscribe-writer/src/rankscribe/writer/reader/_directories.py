"""Whole directories (or single files) read and decoded in one call."""

from __future__ import annotations

import os
from pathlib import Path

from rankscribe.writer.files import FileKind, list_summary_files
from rankscribe.writer.reader._decoded import (
    LineageRecord,
    SummaryEvent,
    decode_event,
    decode_lineage_event,
)
from rankscribe.writer.reader._readers import read_events, read_lineage_events

PathLike = str | os.PathLike[str]


def _summary_files(source: PathLike) -> list[Path]:
    path = Path(source)
    if path.is_dir():
        return list_summary_files(path, FileKind.SUMMARY)
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {os.fspath(path)!r}")
    return [path]


def load_dir(directory: PathLike, *, strict: bool = False) -> list[SummaryEvent]:
    """Return every event of every summary (``_MS``) file in ``directory``, decoded.

    Files come in :func:`list_summary_files` order and events in file order.
    ``directory`` may also name a single summary file.
    """
    return [
        decode_event(event)
        for path in _summary_files(directory)
        for event in read_events(path, strict=strict)
    ]


def load_lineage_dir(directory: PathLike, *, strict: bool = False) -> list[LineageRecord]:
    """Return every record of every ``_lineage`` file in ``directory``, decoded, in order."""
    return [
        decode_lineage_event(event)
        for path in list_summary_files(directory, FileKind.LINEAGE)
        for event in read_lineage_events(path, strict=strict)
    ]


def scalars(source: PathLike, *, strict: bool = False) -> dict[str, list[tuple[int, float]]]:
    """Return every scalar in a summary file or directory: ``{tag: [(step, value), ...]}``.

    Tags keep their first-seen order and each list keeps file order. Nothing is
    merged: a tag written twice in one step appears twice (MindInsight would
    keep only the last). An event without a step counts as step 0, as it does
    for MindInsight. Values are the stored float32, widened.
    """
    curves: dict[str, list[tuple[int, float]]] = {}
    for path in _summary_files(source):
        # Straight from the protobuf: no need to decode the tensors and
        # images that share these events.
        for event in read_events(path, strict=strict):
            if event.WhichOneof("what") != "summary":
                continue
            for value in event.summary.value:
                if value.WhichOneof("value") == "scalar_value":
                    curves.setdefault(value.tag, []).append((event.step, value.scalar_value))
    return curves
