#!/usr/bin/env python3
"""What the parameter fingerprint costs a collected step, against a copy of the same bytes.

    python tools/bench/fingerprint.py [--parameters 100_000_000] [--budget BYTES] [--repeat 3]

A model of ``--parameters`` float32 parameters (100 tensors of equal size;
400 MB by default) is fingerprinted as the collector does at its collected
steps: the slice of at most ``--budget`` bytes (the collector's default,
``DEFAULT_FINGERPRINT_BUDGET``) that each step's rotation picks, CRC-32C of
the host bytes in place. Printed, per collected step: the median time over
one full rotation (every slice of the model once), as a share of a 100 ms
step (target <= 0.5 %), and the same per training step with the default
``collect_freq`` of 10; the baseline, in the same run, is ``np.copyto`` of
the same slice (what reading the bytes once costs). Also printed: what the
whole model's fingerprint costs, which the collector pays once, at step 0.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rankscribe.collector._fingerprint import (
    DEFAULT_FINGERPRINT_BUDGET,
    HostPart,
    slice_bounds,
    slice_fingerprint,
)

STEP_MS = 100.0
COLLECT_FREQ = 10
TENSORS = 100


def copy_slice(arrays: list[np.ndarray], target: np.ndarray, start: int, stop: int) -> None:
    """Copy bytes ``[start, stop)`` of the arrays laid end to end into ``target``."""
    offset = written = 0
    for array in arrays:
        raw = array.reshape(-1).view(np.uint8)
        low, high = max(start - offset, 0), min(stop - offset, raw.size)
        if low < high:
            np.copyto(target[written : written + high - low], raw[low:high])
            written += high - low
        offset += raw.size
        if offset >= stop:
            break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parameters", type=int, default=100_000_000)
    parser.add_argument("--budget", type=int, default=DEFAULT_FINGERPRINT_BUDGET)
    parser.add_argument("--repeat", type=int, default=3, help="full rotations timed")
    arguments = parser.parse_args()
    per_tensor = arguments.parameters // TENSORS
    rng = np.random.default_rng(0)
    arrays = [rng.random(per_tensor, dtype=np.float32) for _ in range(TENSORS)]
    parts = [HostPart(array) for array in arrays]
    total = sum(part.nbytes for part in parts)
    target = np.empty(arguments.budget, dtype=np.uint8)
    slices = -(-total // arguments.budget)
    steps = [index * COLLECT_FREQ for index in range(slices)]  # one rotation
    fingerprints: list[float] = []
    copies: list[float] = []
    for _ in range(arguments.repeat):
        for step in steps:
            start, stop = slice_bounds(total, arguments.budget, step, COLLECT_FREQ)
            began = time.perf_counter()
            slice_fingerprint(parts, start, stop)
            fingerprints.append(time.perf_counter() - began)
            began = time.perf_counter()
            copy_slice(arrays, target, start, stop)
            copies.append(time.perf_counter() - began)
    began = time.perf_counter()
    slice_fingerprint(parts, 0, total)
    whole = time.perf_counter() - began
    fingerprint, copy = statistics.median(fingerprints), statistics.median(copies)
    print(
        f"Fingerprint of {arguments.parameters:,} float32 parameters ({total / 1e6:.0f} MB), "
        f"budget {arguments.budget / (1 << 20):g} MiB per collected step: {slices} slices, "
        f"median over {arguments.repeat} rotations"
    )
    print(
        f"  per collected step   {fingerprint * 1000:7.3f} ms = "
        f"{fingerprint * 1000 / STEP_MS:.2%} of a {STEP_MS:g} ms step (target <= 0.5%)"
    )
    print(
        f"  per step at collect_freq={COLLECT_FREQ}: "
        f"{fingerprint * 1000 / COLLECT_FREQ / STEP_MS:.3%} of a {STEP_MS:g} ms step"
    )
    print(
        f"  copy of the same bytes (baseline) {copy * 1000:7.3f} ms; fingerprint / copy = "
        f"{fingerprint / copy:.2f}"
    )
    print(f"  whole model once (step 0, when training begins): {whole * 1000:.1f} ms")


if __name__ == "__main__":
    main()
