"""Histograms of accelerator tensors, counted on the device.

A weight histogram needs every value of the tensor. Copying a GPU's parameters to the
host at each collected step and bucketing them there costs the training thread the copy
(and the wait for the device) and the writer a pass over every value: measured on an
H100, a 7.1 ms step of a 33.5 M-parameter model went to 51 ms with histograms every 10
steps. Here the device does the passes and only a few numbers per tensor travel:

1. Per tensor, min and max in one pass and the float64 sum (NaN propagates through min and
   max, so two finite extremes prove there is no NaN or infinity; only a tensor that
   holds one pays a second pass for the NaN, +inf, -inf and finite counts). The numbers
   of every tensor come to the host together: one wait.
2. The writer's edges for that finite count, range and dtype
   (:func:`rankscribe.writer.histograms.histogram_edges`, MindSpore's rule), every
   tensor's before any pass and sent to the device in one copy (a copy from the host
   waits for the device's queue: one per tensor would idle the device), then one
   pass per tensor that finds each value's bucket by comparing it with the edges
   (``torch.bucketize``: exact comparisons, in the tensor's own float32 when the edges
   are float32 values, else in float64) and counts the buckets (``histc``; under
   ``torch.use_deterministic_algorithms(True)``, by sorting). The counts of every
   tensor come to the host together: the second wait.

The counts are those the host would count: the same edges, the same comparisons
(``edges[i] <= v < edges[i + 1]``, the last bucket closed). The float64 sum may differ
from the host's in its last bits (the device adds in another order). docs/file-format.md,
"Histograms of accelerator tensors".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from rankscribe.writer.histograms import (
    MAX_BUCKETS,
    HistogramData,
    histogram_edges,
    no_finite_histogram,
)

__all__ = [
    "device_event",
    "device_histogram_dtype",
    "device_histograms",
    "start_host_copy",
    "to_host",
]

# Values bucketed per pass: at most 2**24, so that their float32 counts are exact (and the
# int32 bucket indices a pass holds stay at 64 MB).
_CHUNK = 1 << 24

_EXACT_DTYPES: dict[torch.dtype, np.dtype[Any]] = {
    torch.float16: np.dtype(np.float16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
}


def device_histogram_dtype(tensor: Any) -> np.dtype[Any] | None:
    """The dtype whose edges a device histogram of ``tensor`` uses, or None (not countable).

    Dense floating tensors; bfloat16 and the float8 formats are bucketed as float32, as
    the host path reads them. (Which tensors take this path is the adapter's choice:
    those on an accelerator.)
    """
    if not isinstance(tensor, torch.Tensor) or not tensor.dtype.is_floating_point:
        return None
    if tensor.layout != torch.strided or tensor.is_quantized:
        return None
    exact = _EXACT_DTYPES.get(tensor.dtype)
    return exact if exact is not None else np.dtype(np.float32)


def device_histograms(tensors: Sequence[Any]) -> list[HistogramData]:
    """The histograms of floating ``tensors`` (each on its device), two waits in all."""
    flats = [_flat(tensor) for tensor in tensors]
    first = _gather([_extremes(flat) for flat in flats])
    stats: list[tuple[int, int, int, int, float, float, float]] = []
    for flat, (low, high, total) in zip(flats, first, strict=True):
        count = flat.numel()
        if count and math.isfinite(low) and math.isfinite(high):
            stats.append((count, 0, 0, 0, low, high, total))
        else:
            stats.append(_with_non_finite(flat))
    plans: list[tuple[np.ndarray, np.ndarray] | None] = []
    for tensor, (count, nan, pos_inf, neg_inf, low, high, _) in zip(tensors, stats, strict=True):
        finite = count - nan - pos_inf - neg_inf
        if finite == 0:
            plans.append(None)
            continue
        dtype = device_histogram_dtype(tensor) or np.dtype(np.float32)
        plans.append(histogram_edges(finite, low, high, dtype))
    # Every tensor's edges first, then its passes: the edges go to the device in one copy
    # (a copy from the host waits for the device's queue; one per tensor would make the
    # device wait for the host's Python between the tensors' passes).
    to_count = [
        (flat, plan, stat)
        for flat, plan, stat in zip(flats, plans, stats, strict=True)
        if plan is not None
    ]
    exact = [_exact_in_float32(flat, plan[0]) for flat, plan, _ in to_count]
    boundaries = _on_devices(
        [plan[0] for _, plan, _ in to_count],
        [flat.device for flat, _, _ in to_count],
        exact,
    )
    pending = [
        _bucket_counts(flat, bounds, in_float32, non_finite=stat[1] + stat[2] + stat[3])
        for (flat, _, stat), bounds, in_float32 in zip(to_count, boundaries, exact, strict=True)
    ]
    counted = iter([row.astype(np.int64) for row in to_host(pending)])
    histograms = []
    for plan, (count, nan, pos_inf, neg_inf, low, high, total) in zip(plans, stats, strict=True):
        if plan is None:
            histograms.append(no_finite_histogram(count, nan, pos_inf, neg_inf))
            continue
        edges, widths = plan
        counts = next(counted)[: edges.size - 1]
        histograms.append(
            HistogramData(
                count=count,
                nan_count=nan,
                pos_inf_count=pos_inf,
                neg_inf_count=neg_inf,
                min=low,
                max=high,
                sum=total,
                edges=edges,
                widths=widths,
                counts=counts,
            )
        )
    return histograms


def _flat(tensor: Any) -> torch.Tensor:
    flat: torch.Tensor = tensor.detach().reshape(-1)
    if flat.dtype not in _EXACT_DTYPES:
        flat = flat.to(torch.float32)  # exact for bfloat16 and the float8 formats
    return flat


def to_host(parts: list[torch.Tensor]) -> list[np.ndarray]:
    """Each of the equal-shaped ``parts`` on the host: one copy per device they are on
    (the histograms' numbers here, the device fingerprints' sums in ``_torch.py``)."""
    rows: list[np.ndarray | None] = [None] * len(parts)
    by_device: dict[torch.device, list[int]] = {}
    for index, part in enumerate(parts):
        by_device.setdefault(part.device, []).append(index)
    for indices in by_device.values():
        host = _host_copy(torch.stack([parts[index] for index in indices])).numpy()
        for index, row in zip(indices, host, strict=True):
            rows[index] = row
    return [row for row in rows if row is not None]


def _extremes(flat: torch.Tensor) -> torch.Tensor:
    """min, max (NaN if any value is NaN) and the float64 sum, as one float64 tensor."""
    if flat.numel() == 0:
        return torch.full((3,), math.nan, dtype=torch.float64, device=flat.device)
    low, high = torch.aminmax(flat)  # one pass for both
    return torch.stack(
        [low.to(torch.float64), high.to(torch.float64), flat.sum(dtype=torch.float64)]
    )


def _host_copy(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor.cpu()``; from a CUDA device without spinning: :func:`start_host_copy`, then
    a wait for its event (``.cpu()`` waits for the stream with a spin, taking a core for
    as long as the device takes to get there, which the cost budget then counts as the
    collector's threads' CPU)."""
    if tensor.device.type != "cuda":
        return tensor.cpu()
    host, done = start_host_copy(tensor)
    if done is not None:
        done.synchronize()
    return host


def start_host_copy(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """A non-blocking copy of a device ``tensor`` into pinned host memory, and the event
    after it (:func:`device_event`): the host waits for nothing until it waits for that
    (``_device_reads.TorchDevices``, and the histograms' numbers here)."""
    try:  # a copy into pageable memory would make the host wait for it
        host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    except RuntimeError:  # a device whose memory cannot be pinned: still no wait asked
        host = torch.empty(tensor.shape, dtype=tensor.dtype)
    host.copy_(tensor, non_blocking=True)
    return host, device_event(tensor.device)


def device_event(device: torch.device) -> Any:
    """An event recorded now on ``device``'s current stream (None on the CPU).

    On CUDA a blocking one: the thread that waits for it (the writer's) sleeps until the
    device gets there. CUDA's default event, and torch.Event's only kind, has it spin,
    taking a core for as long as the device is behind (on an H200 the writer spent a
    core's worth of CPU on waits at a 7 ms step).
    """
    if device.type == "cpu":
        return None
    if device.type == "cuda":
        blocking = torch.cuda.Event(blocking=True)  # type: ignore[no-untyped-call, unused-ignore]
        blocking.record(torch.cuda.current_stream(device))
        return blocking
    event = torch.Event(device=device)
    event.record()
    return event


def _gather(parts: list[torch.Tensor]) -> list[tuple[float, float, float]]:
    """Bring the tensors' numbers to the host, one copy per device."""
    return [(float(low), float(high), float(total)) for low, high, total in to_host(parts)]


def _with_non_finite(flat: torch.Tensor) -> tuple[int, int, int, int, float, float, float]:
    """A tensor holding NaN or infinities (rare): the second pass with masks."""
    count = flat.numel()
    if count == 0:
        return (0, 0, 0, 0, math.nan, math.nan, math.nan)
    finite = torch.isfinite(flat)
    numbers = torch.stack(
        [
            torch.isnan(flat).sum().to(torch.float64),
            (flat == math.inf).sum().to(torch.float64),
            finite.sum().to(torch.float64),
            torch.where(finite, flat, math.inf).amin().to(torch.float64),
            torch.where(finite, flat, -math.inf).amax().to(torch.float64),
            # The host sums the array with the non-finite values set to 0 (MindSpore's way).
            torch.where(finite, flat, 0).sum(dtype=torch.float64),
        ]
    ).tolist()
    nan, pos_inf, finite_count = (int(value) for value in numbers[:3])
    neg_inf = count - nan - pos_inf - finite_count
    return (count, nan, pos_inf, neg_inf, numbers[3], numbers[4], numbers[5])


def _exact_in_float32(flat: torch.Tensor, edges: np.ndarray) -> bool:
    """Whether ``flat`` is bucketed in float32: it is not float64 and every edge is a
    float32 value (so the comparisons in float32 are the exact ones)."""
    return flat.dtype != torch.float64 and bool(
        np.array_equal(edges.astype(np.float32).astype(np.float64), edges)
    )


def _on_devices(
    edges: list[np.ndarray], devices: list[torch.device], in_float32: list[bool]
) -> list[torch.Tensor]:
    """Each tensor's edges on its device (in float32 where ``in_float32``, else float64):
    one copy per device, as float32 when every edge on it is one (a device without
    float64, Apple's MPS, takes those), else float64, converted there (exactly)."""
    result: list[torch.Tensor | None] = [None] * len(edges)
    by_device: dict[torch.device, list[int]] = {}
    for index, device in enumerate(devices):
        by_device.setdefault(device, []).append(index)
    for device, indices in by_device.items():
        narrow = all(in_float32[index] for index in indices)
        joined = np.concatenate([edges[index] for index in indices])
        source = torch.from_numpy(joined.astype(np.float32) if narrow else joined)
        if device.type == "cuda":
            # From pinned memory the copy is queued like a kernel: the host waits for nothing
            # (from pageable memory it would wait for the stream's queue).
            copied = source.pin_memory().to(device, non_blocking=True)
        else:
            copied = source.to(device)
        parts = torch.split(copied, [edges[index].size for index in indices])
        for index, part in zip(indices, parts, strict=True):
            result[index] = part.to(torch.float32 if in_float32[index] else torch.float64)
    return [part for part in result if part is not None]


def _bucket_counts(
    flat: torch.Tensor, boundaries: torch.Tensor, in_float32: bool, non_finite: int
) -> torch.Tensor:
    """Per-bucket counts (MAX_BUCKETS long, zero-padded) of the finite values, on the device.

    ``boundaries``: the edges on the device, in the dtype the values are compared in.
    Non-finite values are replaced by the first edge and taken back out of bucket 0.
    """
    bins = boundaries.numel() - 1
    work = torch.float32 if in_float32 else torch.float64
    counts = torch.zeros(MAX_BUCKETS, dtype=torch.int64, device=flat.device)
    for start in range(0, flat.numel(), _CHUNK):
        chunk = flat[start : start + _CHUNK].to(work)
        if non_finite:
            chunk = torch.where(torch.isfinite(chunk), chunk, boundaries[0])
        # k in 1..bins: the value is in bucket k - 1; bins + 1: it equals the last edge
        # (the last bucket is closed). The k are counted as floats by a histogram of
        # bins + 1 unit-wide buckets centred on them (no rounding can move a whole number
        # half a bucket), exact while a chunk holds at most 2**24 values, and without the
        # waits ``bincount`` has on a GPU (it reads the largest index on the host).
        found = torch.bucketize(chunk, boundaries, right=True, out_int32=True)
        if torch.are_deterministic_algorithms_enabled():
            per_k = _sorted_counts(found, bins + 1)  # histc's atomic adds are refused there
        else:
            per_k = torch.histc(found.to(torch.float32), bins=bins + 1, min=0.5, max=bins + 1.5)
        counts[:bins] += per_k[:bins].to(torch.int64)
        counts[bins - 1] += per_k[bins].to(torch.int64)
    if non_finite:
        counts[0] -= non_finite
    return counts


def _sorted_counts(found: torch.Tensor, largest: int) -> torch.Tensor:
    """How many of ``found`` are 1, 2, ... ``largest`` (whole numbers in that range), by
    sorting them and finding where each number starts: no atomic adds, so it runs under
    ``torch.use_deterministic_algorithms(True)``, which refuses ``histc`` on a GPU."""
    ordered = torch.sort(found).values
    numbers = torch.arange(1, largest + 2, dtype=found.dtype, device=found.device)
    starts = torch.searchsorted(ordered, numbers)  # the first place of each number
    return starts[1:] - starts[:-1]
