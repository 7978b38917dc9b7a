#!/usr/bin/env python3
"""How well the gradient rule names a corrupted local gradient, and how often it names a clean one.

    python tools/bench/gradients.py [--ranks 64 1024] [--buckets 8] [--steps 2000]
                                    [--injections 40] [--seed 0] [--quick] [--norms-only]
                                    [--sizes 1e4 1e6 1e8]

Simulated local gradient norms of a data-parallel job, per rank, step and bucket,
go through the rule (``judge_gradients``'s step-by-step form, as a live view
calls it), with each bucket's peak (the largest norm of a row of 256 consecutive
elements, as the probe takes it) unless ``--norms-only``. Bucket sizes are spread
log-uniformly from 10^4 to 10^8 elements; a bucket's typical element is its
norm / sqrt(size). A clean peak is a bucket's largest row, 1 to 10 times a typical
row (a bucket's rows differ: biases, layers of larger gradients), against the rest of
its rows, with noise of its own (``SHARE_NOISE``: what scales the whole bucket
cancels in it); it holds about sqrt(256 / size) x 1 to 10 of a large bucket's norm.

Clean noise models (the ranks' micro-batches are drawn alike, so their norms are
samples of one distribution at a step):

- ``gaussian``: log-normal per rank and step, 5 %;
- ``small-batch``: the same, 25 % (a local batch of a few samples);
- ``loss-spikes``: 8 %, and in 1 % of steps every rank's norms x(1 + Pareto(1.5));
- ``heterogeneous``: 5 %, and a fixed 5 % offset per rank (shards that differ);
- ``heavy-tail``: Student's t (3 degrees of freedom) x 5 % in the log, a factor of
  the whole bucket (its peak's noise 5 %, normal);
- ``heavy-peaks``: the same, its peak's noise heavy-tailed too (what the peak
  cannot cancel);
- ``warmup``: 8 %, every rank's norms growing x20 over the first 300 steps;
- ``hard-batches``: 8 %, and one rank-step in 1,000 a harder micro-batch,
  x(1 + Exponential(0.3));
- ``converging``: normal in the log, its spread growing from 20 % to 100 % over the
  first 150 steps (a real 2-rank DDP job's norms as its loss fell), the peak's 20 %.

The rule's constants were chosen on the first four models with seeds 0 and 1
(``TUNED``, before the peak test, which added none); the table marks them, and the
others (every other model, and every seed from 2 on) are what the rule is judged on.

Faults, one per injection, in one random rank and bucket at a random step after
the warm-up, each in its own run of the same random stream (the clean run is
the same stream without it): an exponent bit flip of one element (x2^4 to
x2^64: the bucket's norm becomes sqrt(norm^2 + element^2 (4^k - 1)), its peak
the larger of its peak and the grown element's row), a flip of the top mantissa bit
(x1.5 of one element), a scaled bucket (x1.5 to x100: the peak too), NaN and
+inf. Printed per model and job size: each fault's detection rate (named at its
step, with its rank and bucket), false names per 10^7 rank-steps (any name in
the clean run), and the CPU seconds taken.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
for package in ("ranks", "jobview"):
    sys.path.insert(0, str(ROOT / "packages" / f"rankscribe-{package}" / "src"))

from rankscribe.jobview import GradientSettings, GradientWatch  # noqa: E402

# The models the rule's constants were chosen on (with seeds 0 and 1); the rest are held out.
TUNED = ("gaussian", "small-batch", "loss-spikes", "heterogeneous")
FIRST_FAULT_STEP = 30

Noise = Callable[[np.random.Generator, int, int, int], np.ndarray]


def _lognormal(sigma: float) -> Noise:
    def noise(rng: np.random.Generator, steps: int, ranks: int, buckets: int) -> np.ndarray:
        return np.exp(rng.normal(0.0, sigma, size=(steps, ranks, buckets)))

    return noise


def _loss_spikes(rng: np.random.Generator, steps: int, ranks: int, buckets: int) -> np.ndarray:
    factors = _lognormal(0.08)(rng, steps, ranks, buckets)
    spiked = rng.random(steps) < 0.01
    factors[spiked] *= (1.0 + rng.pareto(1.5, size=int(spiked.sum())))[:, None, None]
    return factors


def _heterogeneous(rng: np.random.Generator, steps: int, ranks: int, buckets: int) -> np.ndarray:
    offsets = np.exp(rng.normal(0.0, 0.05, size=(1, ranks, 1)))
    return _lognormal(0.05)(rng, steps, ranks, buckets) * offsets


def _heavy_tail(rng: np.random.Generator, steps: int, ranks: int, buckets: int) -> np.ndarray:
    return np.exp(0.05 * rng.standard_t(3, size=(steps, ranks, buckets)))


def _warmup(rng: np.random.Generator, steps: int, ranks: int, buckets: int) -> np.ndarray:
    growth = np.minimum(1.0, (np.arange(steps) + 1) / 300.0) * 20.0
    return _lognormal(0.08)(rng, steps, ranks, buckets) * np.maximum(growth, 1.0)[:, None, None]


def _hard_batches(rng: np.random.Generator, steps: int, ranks: int, buckets: int) -> np.ndarray:
    factors = _lognormal(0.08)(rng, steps, ranks, buckets)
    hard = rng.random((steps, ranks)) < 1e-3
    factors[hard] *= (1.0 + rng.exponential(0.3, size=int(hard.sum())))[:, None]
    return factors


def _converging(rng: np.random.Generator, steps: int, ranks: int, buckets: int) -> np.ndarray:
    """Training that converges: micro-batches' norms part as the loss falls (one of
    all-correct samples has almost no gradient). Normal in the log, its spread growing
    from 20 % to 100 % over the first 150 steps: a real 2-rank DDP job's two ranks'
    norms (tests/jobview/data) parted from a spread of x1.56 to x4.5 in their gap."""
    spread = 0.2 + 0.8 * np.minimum(1.0, np.arange(steps) / 150.0)
    return np.exp(spread[:, None, None] * rng.normal(0.0, 1.0, size=(steps, ranks, buckets)))


def _heavy_shares(rng: np.random.Generator, steps: int, ranks: int, buckets: int) -> np.ndarray:
    return np.exp(0.05 * rng.standard_t(3, size=(steps, ranks, buckets)))


MODELS: dict[str, Noise] = {
    "gaussian": _lognormal(0.05),
    "small-batch": _lognormal(0.25),
    "loss-spikes": _loss_spikes,
    "heterogeneous": _heterogeneous,
    "heavy-tail": _heavy_tail,
    "heavy-peaks": _heavy_tail,
    "warmup": _warmup,
    "hard-batches": _hard_batches,
    "converging": _converging,
}
#: Each model's noise of a bucket's peak (its largest row) against the rest of its rows.
#: What scales a whole bucket (a loss spike, a harder micro-batch, the warm-up, a
#: heavy-tailed factor of the whole bucket) leaves it as it was; it still moves with the
#: micro-batch as much as a norm of the same model does. ``heavy-peaks`` is ``heavy-tail``
#: whose heavy tail is in the peak too: what the peak test cannot cancel.
SHARE_NOISE: dict[str, Noise] = {
    "gaussian": _lognormal(0.05),
    "small-batch": _lognormal(0.25),
    "loss-spikes": _lognormal(0.08),
    "heterogeneous": _heterogeneous,
    "heavy-tail": _lognormal(0.05),
    "heavy-peaks": _heavy_shares,
    "warmup": _lognormal(0.08),
    "hard-batches": _lognormal(0.08),
    "converging": _lognormal(0.2),  # that job's peaks against their rest: x1.35 apart
}


#: A fault: (norm, peak, size) of the bucket -> its (norm, peak) after the fault.
Fault = Callable[[float, float, float], tuple[float, float]]


#: Elements of a row whose norm the probe's peak is the largest of.
ROW = 256


def _grown(factor: float) -> Fault:
    """One element of the bucket's typical magnitude (norm / sqrt(size)) x ``factor``, in a
    row of typical elements."""

    def fault(norm: float, peak: float, size: float) -> tuple[float, float]:
        element = norm / math.sqrt(size)
        grown = math.sqrt(norm * norm + element * element * (factor * factor - 1.0))
        row = element * math.sqrt(ROW - 1.0 + factor * factor)
        return grown, max(peak, row)

    return fault


def _scaled(factor: float) -> Fault:
    return lambda norm, peak, _size: (norm * factor, peak * factor)


FAULTS: dict[str, Fault] = {
    **{f"flip x2^{power}": _grown(2.0**power) for power in (4, 8, 12, 16, 32, 64)},
    "mantissa top bit": _grown(1.5),
    **{f"bucket x{factor:g}": _scaled(factor) for factor in (1.5, 2, 5, 10, 100)},
    "NaN": lambda _norm, _peak, _size: (math.nan, math.nan),
    "+inf": lambda _norm, _peak, _size: (math.inf, math.inf),
}


def _run(norms: np.ndarray, peaks: np.ndarray | None, settings: GradientSettings) -> GradientWatch:
    watch = GradientWatch(settings)
    for step, row in enumerate(norms, start=1):
        watch.add(step, row, None if peaks is None else peaks[step - 1])
    return watch


def _clean_peaks(
    rng: np.random.Generator, model: str, norms: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """Each bucket's peak: its norm x the share its largest row holds. A bucket's rows
    differ (a bias, a layer of larger gradients): its largest is 1 to 10 times a typical
    row (log-uniform, the same on every rank), against the rest of its rows, typical
    ones, x the model's noise of that ratio (:data:`SHARE_NOISE`). The largest row of
    ``size / ROW`` rows then holds ``odds / sqrt(1 + odds^2)`` of the norm, ``odds`` its
    norm against the rest's: about ``sqrt(ROW / size)`` x 1 to 10 in a large bucket, and
    never all of it while the other rows hold anything."""
    steps, ranks, buckets = norms.shape
    heavier = np.exp(rng.uniform(0.0, math.log(10.0), size=buckets))
    rest = np.sqrt(np.maximum(sizes / ROW - 1.0, 1e-12))  # the other rows' norm, in rows
    odds = (heavier / rest)[None, None, :] * SHARE_NOISE[model](rng, steps, ranks, buckets)
    peaks: np.ndarray = norms * odds / np.sqrt(1.0 + odds * odds)
    return peaks


def bench(
    model: str,
    ranks: int,
    buckets: int,
    steps: int,
    injections: int,
    seed: int,
    peaks: bool,
    size: float | None = None,
) -> dict[str, Any]:
    """One model's run (``size``: every bucket of that many elements, else log-uniform
    from 10^4 to 10^8; the same random stream either way)."""
    rng = np.random.default_rng([seed, ranks, list(MODELS).index(model)])
    sizes = np.exp(rng.uniform(math.log(1e4), math.log(1e8), size=buckets))
    if size is not None:
        sizes = np.full(buckets, size)
    base = np.exp(rng.uniform(-3.0, 1.0, size=buckets))
    norms = MODELS[model](rng, steps, ranks, buckets) * base[None, None, :]
    largest = _clean_peaks(rng, model, norms, sizes)
    settings = GradientSettings()
    started = time.process_time()
    clean = _run(norms, largest if peaks else None, settings)
    false_names = len(clean.findings)
    detected: dict[str, int] = {}
    short, short_peaks = norms[: FIRST_FAULT_STEP + 40], largest[: FIRST_FAULT_STEP + 40]
    for name, fault in FAULTS.items():
        hits = 0
        for _ in range(injections):
            step = int(rng.integers(FIRST_FAULT_STEP, len(short)))
            rank, bucket = int(rng.integers(ranks)), int(rng.integers(buckets))
            faulty, faulty_peaks = short[: step + 1].copy(), short_peaks[: step + 1].copy()
            norm, peak = faulty[step, rank, bucket], faulty_peaks[step, rank, bucket]
            faulty[step, rank, bucket], faulty_peaks[step, rank, bucket] = fault(
                float(norm), float(peak), float(sizes[bucket])
            )
            found = _run(faulty, faulty_peaks if peaks else None, settings).findings
            hits += any(f.step == step + 1 and f.rank == rank and f.bucket == bucket for f in found)
        detected[name] = hits
    return {
        "false": false_names / (steps * ranks) * 1e7,
        "detected": {
            name: hits / injections if injections else math.nan for name, hits in detected.items()
        },
        "cpu": time.process_time() - started,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument(
        "--injections", type=int, default=40, help="per fault (0: the clean run's false names only)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--quick", action="store_true", help="64 ranks, 300 steps, 10 injections")
    parser.add_argument(
        "--sizes",
        type=float,
        nargs="+",
        default=None,
        help="a run per bucket size (elements, every bucket that size): the detection curve",
    )
    parser.add_argument(
        "--norms-only",
        action="store_true",
        help="the rule without the peaks (the norms alone, as a probe that records no peak)",
    )
    args = parser.parse_args(argv)
    if args.injections < 0:
        parser.error(f"--injections must be an int >= 0, got {args.injections}")
    if args.sizes is not None and not all(256 <= size <= 1e12 for size in args.sizes):
        parser.error(f"--sizes must be bucket sizes in elements, 256 to 1e12, got {args.sizes}")
    if args.quick:
        args.ranks, args.steps, args.injections = [64], 300, 10
    header = ["model", "set", "ranks", "bucket size", "false/1e7", *FAULTS, "cpu s"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for ranks, model, size in itertools.product(args.ranks, args.models, args.sizes or [None]):
        result = bench(
            model,
            ranks,
            args.buckets,
            args.steps,
            args.injections,
            args.seed,
            not args.norms_only,
            size,
        )
        tuned = model in TUNED and args.seed < 2
        row = [
            model,
            "tuned" if tuned else "held out",
            str(ranks),
            "1e4-1e8" if size is None else f"{size:.0e}",
            f"{result['false']:.2f}",
            *(f"{rate:.2f}" for rate in result["detected"].values()),
            f"{result['cpu']:.1f}",
        ]
        print(" | ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
