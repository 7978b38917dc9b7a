"""rankscribe.writer: summary files for training jobs.

Writes scalars, histograms, images, tensors, graphs and lineage into
MindSpore-format summary files (readable by MindInsight) and, optionally, into
TensorBoard event files, off the training thread; reads them back.

Here: :class:`SummaryRecord`, the summary operators and :class:`WriterError`;
reading is :mod:`rankscribe.writer.reader`, file names, framing and atomic
writes :mod:`rankscribe.writer.files`, every error :mod:`rankscribe.writer.errors`.

    from rankscribe.writer import SummaryRecord

    with SummaryRecord("runs/exp1") as record:
        record.add_value("scalar", "loss", 0.25)
        record.record(step=1)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankscribe.ranks.imports import lazy_attributes

if TYPE_CHECKING:
    from rankscribe.writer.errors import CorruptRecordError as CorruptRecordError
    from rankscribe.writer.errors import RecordTooLargeError as RecordTooLargeError
    from rankscribe.writer.errors import StepTooLargeError as StepTooLargeError
    from rankscribe.writer.errors import WriterError
    from rankscribe.writer.errors import WriterFailedError as WriterFailedError
    from rankscribe.writer.errors import WriterOSError as WriterOSError
    from rankscribe.writer.errors import WriterStateError as WriterStateError
    from rankscribe.writer.errors import WriterTypeError as WriterTypeError
    from rankscribe.writer.errors import WriterValueError as WriterValueError
    from rankscribe.writer.files import RecordReader as RecordReader
    from rankscribe.writer.files import read_records as read_records
    from rankscribe.writer.operators import (
        histogram_summary,
        image_summary,
        scalar_summary,
        tensor_summary,
    )
    from rankscribe.writer.reader import decode_event as decode_event
    from rankscribe.writer.reader import decode_lineage_event as decode_lineage_event
    from rankscribe.writer.reader import list_summary_files as list_summary_files
    from rankscribe.writer.reader import load_dir as load_dir
    from rankscribe.writer.reader import load_lineage_dir as load_lineage_dir
    from rankscribe.writer.reader import parse_file_name as parse_file_name
    from rankscribe.writer.reader import read_events as read_events
    from rankscribe.writer.reader import read_lineage_events as read_lineage_events
    from rankscribe.writer.reader import read_tensorboard_events as read_tensorboard_events
    from rankscribe.writer.reader import scalars as scalars
    from rankscribe.writer.record._record import SummaryRecord

# Where each name lives, imported on first use (PEP 562): a program that needs only
# file names or framing (``rankscribe.writer.files``) does not load numpy and Pillow.
_HOMES = {
    "CorruptRecordError": "rankscribe.writer.errors",
    "RecordTooLargeError": "rankscribe.writer.errors",
    "StepTooLargeError": "rankscribe.writer.errors",
    "WriterError": "rankscribe.writer.errors",
    "WriterFailedError": "rankscribe.writer.errors",
    "WriterOSError": "rankscribe.writer.errors",
    "WriterStateError": "rankscribe.writer.errors",
    "WriterTypeError": "rankscribe.writer.errors",
    "WriterValueError": "rankscribe.writer.errors",
    "RecordReader": "rankscribe.writer.files",
    "read_records": "rankscribe.writer.files",
    "histogram_summary": "rankscribe.writer.operators",
    "image_summary": "rankscribe.writer.operators",
    "scalar_summary": "rankscribe.writer.operators",
    "tensor_summary": "rankscribe.writer.operators",
    "decode_event": "rankscribe.writer.reader",
    "decode_lineage_event": "rankscribe.writer.reader",
    "list_summary_files": "rankscribe.writer.reader",
    "load_dir": "rankscribe.writer.reader",
    "load_lineage_dir": "rankscribe.writer.reader",
    "parse_file_name": "rankscribe.writer.reader",
    "read_events": "rankscribe.writer.reader",
    "read_lineage_events": "rankscribe.writer.reader",
    "read_tensorboard_events": "rankscribe.writer.reader",
    "scalars": "rankscribe.writer.reader",
    "SummaryRecord": "rankscribe.writer.record._record",
}

__getattr__, __dir__ = lazy_attributes(__name__, _HOMES, globals())


__version__ = "0.1.0"

# The `name as name` imports above stay importable for code written against earlier
# versions; they are not listed here: each has one home (errors, files, reader) where
# the docs, the examples and the other packages spell it (docs/contributing.md).
__all__ = [
    "SummaryRecord",
    "WriterError",
    "__version__",
    "histogram_summary",
    "image_summary",
    "scalar_summary",
    "tensor_summary",
]
