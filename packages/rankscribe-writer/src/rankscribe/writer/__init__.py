"""rankscribe.writer: summary files for training jobs.

Writes scalars, histograms, images, tensors, graphs and lineage into
MindSpore-format summary files (readable by MindInsight) and, optionally, into
TensorBoard event files; reads them back.
"""

from __future__ import annotations

from rankscribe.writer.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    StepTooLargeError,
    WriterError,
    WriterFailedError,
    WriterStateError,
    WriterTypeError,
    WriterValueError,
)
from rankscribe.writer.framing import RecordReader, read_records

__version__ = "0.1.0"

__all__ = [
    "CorruptRecordError",
    "RecordReader",
    "RecordTooLargeError",
    "StepTooLargeError",
    "WriterError",
    "WriterFailedError",
    "WriterStateError",
    "WriterTypeError",
    "WriterValueError",
    "__version__",
    "read_records",
]
