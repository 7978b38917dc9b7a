"""rankscribe.writer: summary files for training jobs.

Writes scalars, histograms, images, tensors, graphs and lineage into
MindSpore-format summary files (readable by MindInsight) and, optionally, into
TensorBoard event files, off the training thread; reads them back.

    from rankscribe.writer import SummaryRecord

    with SummaryRecord("runs/exp1") as record:
        record.add_value("scalar", "loss", 0.25)
        record.record(step=1)
"""

from __future__ import annotations

from rankscribe.writer.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    StepTooLargeError,
    WriterError,
    WriterFailedError,
    WriterOSError,
    WriterStateError,
    WriterTypeError,
    WriterValueError,
)
from rankscribe.writer.files import RecordReader, read_records
from rankscribe.writer.operators import (
    histogram_summary,
    image_summary,
    scalar_summary,
    tensor_summary,
)
from rankscribe.writer.reader import (
    decode_event,
    decode_lineage_event,
    list_summary_files,
    load_dir,
    load_lineage_dir,
    parse_file_name,
    read_events,
    read_lineage_events,
    read_tensorboard_events,
    scalars,
)
from rankscribe.writer.record._record import SummaryRecord

__version__ = "0.1.0"

__all__ = [
    "CorruptRecordError",
    "RecordReader",
    "RecordTooLargeError",
    "StepTooLargeError",
    "SummaryRecord",
    "WriterError",
    "WriterFailedError",
    "WriterOSError",
    "WriterStateError",
    "WriterTypeError",
    "WriterValueError",
    "__version__",
    "decode_event",
    "decode_lineage_event",
    "histogram_summary",
    "image_summary",
    "list_summary_files",
    "load_dir",
    "load_lineage_dir",
    "parse_file_name",
    "read_events",
    "read_lineage_events",
    "read_records",
    "read_tensorboard_events",
    "scalar_summary",
    "scalars",
    "tensor_summary",
]
