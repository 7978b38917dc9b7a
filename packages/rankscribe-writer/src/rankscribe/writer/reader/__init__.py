"""Read summary, lineage and TensorBoard event files back.

Four layers, each usable alone:

1. **File names** (:mod:`rankscribe.writer.files`, their one home) —
   ``files.parse_file_name`` splits
   ``{prefix}.out.events.summary.{T}.{rank}.{host}{suffix}`` (and the older
   forms) into an ``EventFileName``; ``files.file_kind`` classifies a name the
   way MindInsight and TensorBoard do; :func:`list_summary_files` (also here,
   as scripts use it) lists a directory in reading order.
2. **Events** — :func:`read_events`, :func:`read_lineage_events` and
   :func:`read_tensorboard_events` return an :class:`EventReader`: iterate it
   for the protobuf messages of one file, or call :meth:`EventReader.records`
   for their byte offsets too. Both CRCs of every record are checked. A torn
   last record (the writer died mid-write) ends the iteration, is logged and
   is left in :attr:`EventReader.torn_tail`; damage before the end raises
   :class:`~rankscribe.writer.errors.CorruptRecordError` when ``strict``, and is
   otherwise logged, kept in :attr:`EventReader.corruptions` and skipped.
3. **Plain Python values** — :func:`decode_event` turns a summary ``Event``
   into a :class:`SummaryEvent` (floats, NumPy arrays, :class:`Histogram`,
   :class:`Image`, :class:`Graph`); :func:`decode_lineage_event` turns a
   ``LineageEvent`` into a :class:`LineageRecord` whose ``data`` is a dict.
   :func:`scalars`, :func:`load_dir` and :func:`load_lineage_dir` do all of it
   for a whole directory.
4. **Columns** — :func:`scalar_arrays` returns each scalar curve as two NumPy
   arrays (steps, values), from summary and TensorBoard files alike, reading
   only the tags asked for, at millions of points a second (docs/reading.md).

Example::

    from rankscribe.writer import reader

    for event in reader.load_dir("runs/exp1"):
        for value in event.values:
            print(event.step, value.tag, value.plugin, value.value)
    curves = reader.scalars("runs/exp1")   # {"loss": [(1, 2.375), ...], ...}
    steps, losses = reader.scalar_arrays("runs/exp1", tags=["loss"])["loss"]
"""

from __future__ import annotations

from rankscribe.writer.files import EventFileName as EventFileName
from rankscribe.writer.files import FileKind as FileKind
from rankscribe.writer.files import file_kind as file_kind
from rankscribe.writer.files import list_summary_files
from rankscribe.writer.files import parse_file_name as parse_file_name
from rankscribe.writer.reader._columns import scalar_arrays
from rankscribe.writer.reader._decoded import (
    Graph,
    GraphNode,
    Histogram,
    HistogramBucket,
    Image,
    Landscape,
    LandscapePoint,
    LineageRecord,
    SummaryEvent,
    SummaryValue,
    decode_event,
    decode_lineage_event,
    decode_value,
    message_to_dict,
)
from rankscribe.writer.reader._directories import load_dir, load_lineage_dir, scalars
from rankscribe.writer.reader._readers import (
    EventReader,
    EventRecord,
    open_events,
    read_events,
    read_lineage_events,
    read_tensorboard_events,
)

__all__ = [
    "EventReader",
    "EventRecord",
    "Graph",
    "GraphNode",
    "Histogram",
    "HistogramBucket",
    "Image",
    "Landscape",
    "LandscapePoint",
    "LineageRecord",
    "SummaryEvent",
    "SummaryValue",
    "decode_event",
    "decode_lineage_event",
    "decode_value",
    "list_summary_files",
    "load_dir",
    "load_lineage_dir",
    "message_to_dict",
    "open_events",
    "read_events",
    "read_lineage_events",
    "read_tensorboard_events",
    "scalar_arrays",
    "scalars",
]
