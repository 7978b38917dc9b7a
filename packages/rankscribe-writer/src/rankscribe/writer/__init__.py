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

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}"):
        # A submodule the eager imports used to load as a side effect (``package.reader``).
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


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
