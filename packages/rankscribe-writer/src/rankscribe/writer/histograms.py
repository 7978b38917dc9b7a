"""Histograms whose buckets are counted outside the writer.

    from rankscribe.writer.histograms import HistogramData, histogram_edges

A sibling-facing module (docs/contributing.md, "Sibling modules"). The writer buckets an
array by MindSpore's rule when it encodes the step (``encoding/_histogram.py``). A sibling
that can count faster where the values live (the collector counts an accelerator's
tensors on the device and sends only the counts to the host: docs/file-format.md,
"Histograms of accelerator tensors") takes the edges from :func:`histogram_edges`, counts,
and hands ``SummaryRecord.add_value("histogram", name, ...)`` a :class:`HistogramData`;
the writer writes it as it is, to the summary and the TensorBoard file alike.

The rule itself is here too, for siblings and tests that bucket an array the writer's way:
:func:`compute_histogram`, :func:`bucket_count`, and the two messages a histogram becomes
(:func:`histogram_proto`, MindSpore's ``Summary.Histogram``; :func:`histogram_to_tensorboard`,
TensorBoard's ``HistogramProto``). docs/file-format.md, "What goes in each file".
"""

from __future__ import annotations

from rankscribe.writer.encoding._histogram import (
    MAX_BUCKETS,
    HistogramData,
    bucket_count,
    compute_histogram,
    histogram_edges,
    histogram_proto,
    histogram_to_tensorboard,
    no_finite_histogram,
)

__all__ = [
    "MAX_BUCKETS",
    "HistogramData",
    "bucket_count",
    "compute_histogram",
    "histogram_edges",
    "histogram_proto",
    "histogram_to_tensorboard",
    "no_finite_histogram",
]
