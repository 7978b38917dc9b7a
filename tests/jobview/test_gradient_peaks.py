"""The gradient rule's peak test: a bucket's largest row against the rest of the bucket.

docs/gradients.md, "The rule": where the probe records each bucket's peak (the largest
norm of a row of 256 consecutive elements), each rank's ``log(peak / sqrt(norm^2 -
peak^2))`` is judged against the ranks' median, like a norm. A factor of the whole
bucket cancels in it, so a flipped exponent is named where heavy-tailed noise of the
norms hides it; a scaled bucket leaves it as it was (the norm names that one).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rankscribe.jobview import GradientWatch, judge_gradients
from rankscribe.jobview.errors import JobViewParamValueError

RANKS, BUCKETS, STEPS = 16, 4, 400
SIZES = np.array([1e4, 1e5, 1e6, 1e8])


def heavy_tailed_job(seed: int, *, ranks: int = RANKS) -> tuple[np.ndarray, np.ndarray]:
    """(norms, peaks): each bucket's norm x a heavy-tailed factor of the whole bucket
    (Student's t, 3 degrees of freedom, x 8 % in the log: one rank-step in 10^4 is x2
    or more), its peak holding 3 times a typical row of 256 elements' share of the norm
    (sqrt(256 / size)), with 5 % noise of its own."""
    rng = np.random.default_rng(seed)
    scale = np.exp(rng.uniform(-3, 1, size=BUCKETS))
    norms = scale * np.exp(0.08 * rng.standard_t(3, size=(STEPS, ranks, BUCKETS)))
    shares = np.minimum(1.0, 3.0 * np.sqrt(256 / SIZES))
    peaks = norms * shares * np.exp(rng.normal(0.0, 0.05, size=norms.shape))
    return norms, peaks


def flip(norms: np.ndarray, peaks: np.ndarray, at: tuple[int, int, int], power: int = 16) -> None:
    """One element of the bucket's typical magnitude (norm / sqrt(size)) x 2**power, in a
    row of 256 typical elements."""
    step, rank, bucket = at
    element = norms[at] / math.sqrt(SIZES[bucket])
    grown = element * 2.0**power
    norms[at] = math.sqrt(norms[at] ** 2 + grown**2 - element**2)
    peaks[at] = max(peaks[at], math.sqrt(255 * element**2 + grown**2))
    assert step >= 0 and rank >= 0


@pytest.mark.parametrize(("seed", "bucket"), [(0, 1), (1, 2), (2, 3)])
def test_a_flip_hidden_by_heavy_tailed_norms_is_named_by_its_buckets_peak(
    seed: int, bucket: int
) -> None:
    norms, peaks = heavy_tailed_job(seed)
    at = (299, 5, bucket)
    flip(norms, peaks, at)
    # The norm alone: its heavy tail raised the bar above what x2^16 does to the norm
    # (x65 in 10^6 elements, x6.6 in 10^8).
    assert [(f.step, f.rank) for f in judge_gradients(norms) if f.step == 300] == []
    found = [f for f in judge_gradients(norms, peaks=peaks) if f.step == 300]
    assert [(f.rank, f.bucket, f.element) for f in found] == [(5, bucket, True)]
    # The grown element's row took most of the norm: the share is many times the others'.
    assert found[0].ratio > 5 and not found[0].nonfinite


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_a_flip_in_a_bucket_whose_largest_row_held_most_of_its_norm_is_named(seed: int) -> None:
    """Bucket 0 (10^4 elements, 39 rows) has one row 10 times a typical one: it holds 85 %
    of the norm (its odds against the other 38 rows', 10 / sqrt(38) = 1.6, x 5 % noise).
    A grown element takes nearly all of the norm, a share of 1.0 against 0.85 (x1.18, below
    the smallest ratio named), and the peak against the rest of its bucket x400 or more."""
    norms, peaks = heavy_tailed_job(seed)
    rng = np.random.default_rng(seed + 100)
    odds = 10.0 / math.sqrt(38.0) * np.exp(rng.normal(0.0, 0.05, size=norms.shape[:2]))
    peaks[:, :, 0] = norms[:, :, 0] * odds / np.sqrt(1.0 + odds * odds)
    at = (299, 5, 0)
    flip(norms, peaks, at)
    assert [(f.step, f.rank) for f in judge_gradients(norms) if f.step == 300] == []
    found = [f for f in judge_gradients(norms, peaks=peaks) if f.step == 300]
    assert [(f.rank, f.bucket, f.element) for f in found] == [(5, 0, True)]
    assert found[0].ratio > 100


def test_a_bucket_of_one_row_whose_peak_is_its_norm_names_nobody_by_its_peak() -> None:
    """Bucket 3 holds 200 elements: its one row's norm is the bucket's, read in float32
    (a share a rounding above or below 1 on each rank). No rest is smaller than the
    rounding: every rank's peak is as far from it, and nobody is apart."""
    norms, peaks = heavy_tailed_job(14)
    peaks[:, :, 3] = norms[:, :, 3].astype(np.float32)
    assert (peaks[:, :, 3] > norms[:, :, 3]).any() and (peaks[:, :, 3] < norms[:, :, 3]).any()
    assert judge_gradients(norms, peaks=peaks) == []


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_a_clean_heavy_tailed_job_with_its_peaks_names_nobody(seed: int) -> None:
    norms, peaks = heavy_tailed_job(seed)
    assert judge_gradients(norms, peaks=peaks) == []


def heavy_peaks_job(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A job of 64 ranks whose peaks' noise is as heavy-tailed as its norms' (Student's t, 3
    degrees of freedom, x 5 % in the log, each): what the peak cannot cancel."""
    rng = np.random.default_rng(seed)
    shape = (600, 64, BUCKETS)
    scale = np.exp(rng.uniform(-3, 1, size=BUCKETS))
    norms = scale * np.exp(0.05 * rng.standard_t(3, size=shape))
    shares = np.minimum(1.0, 3.0 * np.sqrt(256 / SIZES))
    peaks = np.minimum(norms, norms * shares * np.exp(0.05 * rng.standard_t(3, size=shape)))
    return norms, peaks


@pytest.mark.parametrize("seed", [22, 25])
def test_a_tail_that_is_clearly_a_powers_keeps_its_bar_where_its_moments_read_it_light(
    seed: int,
) -> None:
    """Clean jobs whose windows' moments fitted the tail's shape low at times (the bar with
    it, and a rank named at steps 53-60): Hill's estimate of a power tail's index keeps the
    shape up, and nobody is named."""
    norms, peaks = heavy_peaks_job(seed)
    assert judge_gradients(norms, peaks=peaks) == []


def test_a_scaled_bucket_leaves_its_peak_against_the_rest_as_it_was_and_the_norm_names_it() -> None:
    rng = np.random.default_rng(6)
    norms = np.exp(rng.normal(0.0, 0.05, size=(STEPS, RANKS, BUCKETS)))
    peaks = norms * 0.01 * np.exp(rng.normal(0.0, 0.05, size=norms.shape))
    norms[299, 3, 2] *= 10.0
    peaks[299, 3, 2] *= 10.0
    found = [f for f in judge_gradients(norms, peaks=peaks) if f.step == 300]
    assert [(f.rank, f.bucket, f.element) for f in found] == [(3, 2, False)]
    assert found[0].ratio == pytest.approx(10.0, rel=0.3)


def test_with_two_ranks_the_peak_is_judged_against_the_recent_gap() -> None:
    norms, peaks = heavy_tailed_job(7, ranks=2)
    flip(norms, peaks, (299, 1, 2))
    found = [f for f in judge_gradients(norms, peaks=peaks) if f.step == 300]
    assert [(f.rank, f.bucket, f.element) for f in found] == [(1, 2, True)]


def test_a_step_without_peaks_is_judged_on_its_norms_alone() -> None:
    norms, peaks = heavy_tailed_job(8)
    flip(norms, peaks, (299, 5, 2))
    watch = GradientWatch()
    for index, row in enumerate(norms):
        watch.add(index + 1, row, None if index == 299 else peaks[index])
    assert [f for f in watch.findings if f.step == 300] == []
    assert watch.findings == []


def test_a_zero_bucket_and_a_nonfinite_peak_name_nobody_by_their_share() -> None:
    norms, peaks = heavy_tailed_job(9)
    norms[:, 0, 0] = peaks[:, 0, 0] = 0.0  # a frozen bucket on rank 0: no share
    peaks[299, 4, 1] = math.nan  # a peak not read: no share at that rank-step
    found = judge_gradients(norms, peaks=peaks)
    # Rank 0's zero norm stands apart as a norm (it is one); no finding is a share's.
    assert not any(f.element for f in found)


@pytest.mark.parametrize(
    ("peaks", "message"),
    [
        (
            np.ones((RANKS, BUCKETS + 1)),
            r"peaks must have the norms' shape \(16, 4\), got \(16, 5\)",
        ),
        (-np.ones((RANKS, BUCKETS)), r"peaks must be >= 0 .* at step 1, rank row 0, bucket 0"),
    ],
)
def test_peaks_of_the_wrong_shape_or_below_zero_are_refused(
    peaks: np.ndarray, message: str
) -> None:
    with pytest.raises(JobViewParamValueError, match=message):
        GradientWatch().add(1, np.ones((RANKS, BUCKETS)), peaks)


def test_judge_gradients_refuses_peaks_of_another_shape_than_the_norms() -> None:
    norms, peaks = heavy_tailed_job(10)
    with pytest.raises(JobViewParamValueError, match=r"peaks must have the norms' shape"):
        judge_gradients(norms, peaks=peaks[:-1])
