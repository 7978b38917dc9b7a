"""rankscribe.writer: summary files for training jobs.

Writes scalars, histograms, images, tensors, graphs and lineage into
MindSpore-format summary files (readable by MindInsight) and, optionally, into
TensorBoard event files, off the training thread; reads them back.

Here: :class:`SummaryRecord`, the summary operators and :class:`WriterError`;
reading is :mod:`rankscribe.writer.reader`, every error :mod:`rankscribe.writer.errors`.

    from rankscribe.writer import SummaryRecord

    with SummaryRecord("runs/exp1") as record:
        record.add_value("scalar", "loss", 0.25)
        record.record(step=1)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankscribe.ranks.imports import lazy_attributes

if TYPE_CHECKING:
    from rankscribe.writer.errors import WriterError
    from rankscribe.writer.operators import (
        histogram_summary,
        image_summary,
        scalar_summary,
        tensor_summary,
    )
    from rankscribe.writer.record._record import SummaryRecord

# Where each name lives, imported on first use (PEP 562): a program that needs only
# file names or framing (``rankscribe.writer.files``) does not load numpy and Pillow.
_HOMES = {
    "WriterError": "rankscribe.writer.errors",
    "histogram_summary": "rankscribe.writer.operators",
    "image_summary": "rankscribe.writer.operators",
    "scalar_summary": "rankscribe.writer.operators",
    "tensor_summary": "rankscribe.writer.operators",
    "SummaryRecord": "rankscribe.writer.record._record",
}

__getattr__, __dir__ = lazy_attributes(__name__, _HOMES, globals())


__version__ = "0.1.0"

# The user's API (docs/contributing.md): every error but WriterError lives in
# rankscribe.writer.errors, reading in rankscribe.writer.reader.
__all__ = [
    "SummaryRecord",
    "WriterError",
    "__version__",
    "histogram_summary",
    "image_summary",
    "scalar_summary",
    "tensor_summary",
]
