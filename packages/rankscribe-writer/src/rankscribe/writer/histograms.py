"""Histograms whose buckets are counted outside the writer.

    from rankscribe.writer.histograms import HistogramData, histogram_edges

A sibling-facing module (docs/contributing.md, "Sibling modules"). The writer buckets an
array by MindSpore's rule when it encodes the step (``encoding/_histogram.py``). A sibling
that can count faster where the values live (the collector counts an accelerator's
tensors on the device and sends only the counts to the host: docs/file-format.md,
"Histograms of accelerator tensors") takes the edges from :func:`histogram_edges`, counts,
and hands ``SummaryRecord.add_value("histogram", name, ...)`` a :class:`HistogramData`;
the writer writes it as it is, to the summary and the TensorBoard file alike.
"""

from __future__ import annotations

from rankscribe.writer.encoding._histogram import (
    MAX_BUCKETS,
    HistogramData,
    bucket_count,
    compute_histogram,
    histogram_edges,
    no_finite_histogram,
)

__all__ = [
    "MAX_BUCKETS",
    "HistogramData",
    "bucket_count",
    "compute_histogram",
    "histogram_edges",
    "no_finite_histogram",
]
