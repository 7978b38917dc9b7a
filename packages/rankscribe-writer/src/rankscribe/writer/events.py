"""Every event of a file read back, for RankScribe's other packages and its tests.

The user reads scalars with :mod:`rankscribe.writer.reader` (``docs/reading.md``);
this module is the rest of the way back, public to the sibling packages (and to the
project's tests and tools) and outside the writer's user API (``docs/contributing.md``,
"Sibling modules"):

- **Events**: :func:`read_events`, :func:`read_lineage_events` and
  :func:`read_tensorboard_events` (and :func:`open_events`, which picks by the file's
  name) return a :class:`~rankscribe.writer.reader.EventReader` over one file's
  protobuf messages; :meth:`~rankscribe.writer.reader.EventReader.records` gives each
  with its byte offset (:class:`EventRecord`). Both CRCs of every record are checked;
  damage is reported as ``docs/file-format.md`` says.
- **Plain Python values**: :func:`decode_event` turns a summary ``Event`` into a
  :class:`SummaryEvent` (floats, NumPy arrays, :class:`Histogram`, :class:`Image`,
  :class:`Graph`, :class:`Landscape`); :func:`decode_lineage_event` turns a
  ``LineageEvent`` into a :class:`LineageRecord`; :func:`message_to_dict` is the
  dict form both use. :func:`load_dir` and :func:`load_lineage_dir` do it for a whole
  directory, in :func:`~rankscribe.writer.reader.list_summary_files` order.

Example::

    from rankscribe.writer import events

    for event in events.load_dir("runs/exp1"):
        for value in event.values:
            print(event.step, value.tag, value.plugin, value.value)
"""

from __future__ import annotations

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
    message_to_dict,
)
from rankscribe.writer.reader._directories import load_dir, load_lineage_dir
from rankscribe.writer.reader._readers import (
    EventRecord,
    open_events,
    read_events,
    read_lineage_events,
    read_tensorboard_events,
)

__all__ = [
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
    "load_dir",
    "load_lineage_dir",
    "message_to_dict",
    "open_events",
    "read_events",
    "read_lineage_events",
    "read_tensorboard_events",
]
