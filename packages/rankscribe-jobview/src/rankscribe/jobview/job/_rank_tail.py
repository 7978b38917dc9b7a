"""The scalars a rank's summary files gained since the last read (the live view's input).

Each round of the live job view (``_rank_view.py``; ``docs/job-view.md``,
"Live") reads what the rank's own summary files gained: whole records only,
so the live view holds exactly what the offline merge of the same files
computes.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from rankscribe.jobview.job._samples import is_sample_tag
from rankscribe.ranks.files import open_regular
from rankscribe.writer import files, reader
from rankscribe.writer.pb import summary_pb2

logger = logging.getLogger(__name__)

__all__ = ["RankFileTail"]


class RankFileTail:
    """The scalars a rank's summary files gained since the last read.

    What the files held when the tail starts belongs to an earlier run and is
    left alone (a file of this collector's record that the new run appends to
    is read from its size at the start). Each file is read from where the last
    read stopped; a record still
    being written is read next time; a file damaged before its end is read up
    to the damage (with a warning) and then left alone.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        self._offsets: dict[str, int] = {}
        for path in self._files():
            try:
                self._offsets[path] = os.path.getsize(path)
            except OSError:
                continue
        self._done: set[str] = set()
        self.last_step = -1

    def _files(self) -> list[str]:
        try:
            return [
                os.fspath(path) for path in reader.list_summary_files(self.directory, "summary")
            ]
        except OSError:
            return []

    def read_new(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``tag -> (steps, values)`` of the points written since the last call."""
        points: dict[str, tuple[list[int], list[float]]] = {}
        for path in self._files():
            if path not in self._done:
                self._read_file(path, points)
        found = {
            tag: (np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64))
            for tag, (steps, values) in points.items()
        }
        return found

    def _read_file(self, path: str, points: dict[str, tuple[list[int], list[float]]]) -> None:
        offset = self._offsets.get(path, 0)
        try:
            opened = open_regular(path)  # a link or a FIFO planted here is refused
        except OSError as error:
            logger.warning("live job view: %s cannot be read (%s); left out", path, error)
            self._done.add(path)
            return
        with opened as stream:
            stream.seek(offset)
            records = files.RecordReader(stream, strict=False)
            for record in records:
                self._take(record.payload, points)
                self._offsets[path] = offset + record.offset + record.record_length
            if records.corruptions:
                logger.warning(
                    "live job view: %s is damaged (%s); the rest of it is left out",
                    path,
                    records.corruptions[0],
                )
                self._done.add(path)

    def _take(self, payload: bytes, points: dict[str, tuple[list[int], list[float]]]) -> None:
        try:
            event = summary_pb2.Event.FromString(payload)
        except Exception:  # a record that is not an Event: not ours to judge here
            return
        if event.WhichOneof("what") != "summary":
            return
        for value in event.summary.value:
            if value.WhichOneof("value") == "scalar_value":
                steps, values = points.setdefault(value.tag, ([], []))
                steps.append(event.step)
                values.append(value.scalar_value)
                if not is_sample_tag(value.tag):  # the end sample is after the last step
                    self.last_step = max(self.last_step, event.step)
