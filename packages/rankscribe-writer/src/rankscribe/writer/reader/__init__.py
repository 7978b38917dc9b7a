"""Read summary and TensorBoard event files back: the scalars a run recorded.

What users read (``docs/reading.md``):

- :func:`scalar_arrays` returns each scalar curve as two NumPy arrays (steps, values),
  from summary and TensorBoard files alike, reading only the tags asked for, at
  millions of points a second; :func:`scalars` the same points as lists of
  ``(step, value)`` tuples.
- :func:`list_summary_files` lists a directory's event files in reading order
  (MindInsight's); the file-name rules themselves live in :mod:`rankscribe.writer.files`.
- :func:`decode_value` turns one summary value into plain Python values (the tags
  shown as ``rankscribe-dump`` shows them).
- :class:`EventReader` iterates one file's protobuf messages, both CRCs of every
  record checked. A torn last record (the writer died mid-write) ends the iteration,
  is logged and is left in :attr:`EventReader.torn_tail`; damage before the end raises
  :class:`~rankscribe.writer.errors.CorruptRecordError` when ``strict``, and is
  otherwise logged, kept in :attr:`EventReader.corruptions` and skipped.

Every event read back and decoded (``read_events``, ``load_dir``, the decoded types)
is in the sibling-facing :mod:`rankscribe.writer.events`.

Example::

    from rankscribe.writer import reader

    curves = reader.scalars("runs/exp1")   # {"loss": [(1, 2.375), ...], ...}
    steps, losses = reader.scalar_arrays("runs/exp1", tags=["loss"])["loss"]
"""

from __future__ import annotations

from rankscribe.writer.files import list_summary_files
from rankscribe.writer.reader._columns import scalar_arrays
from rankscribe.writer.reader._decoded import decode_value
from rankscribe.writer.reader._directories import scalars
from rankscribe.writer.reader._readers import EventReader

__all__ = ["EventReader", "decode_value", "list_summary_files", "scalar_arrays", "scalars"]
