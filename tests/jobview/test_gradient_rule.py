"""The gradient rule: the rank whose local gradient stands apart, named before the reduce.

docs/job-view.md, "Gradients": per step and bucket, each rank's log norm against
the other ranks' median, in spreads learnt from the recent clean steps; a change
of a rank's every bucket judged apart (a harder micro-batch is not a fault);
non-finite norms named at once. Simulated norms here; the injection harness
(tools/bench/gradients.py) measures detection and false names at scale.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rankscribe.jobview import (
    GradientFinding,
    GradientSettings,
    GradientWatch,
    judge_gradients,
)

RANKS, BUCKETS, STEPS = 4, 6, 500
SIZES = np.array([1e4, 1e5, 1e6, 1e7, 3e7, 1e8])


def clean_norms(
    seed: int, *, ranks: int = RANKS, steps: int = STEPS, noise: float = 0.05
) -> np.ndarray:
    """Norms of one distribution per step and bucket: a shared trend, per-rank noise."""
    rng = np.random.default_rng(seed)
    trend = np.exp(np.cumsum(rng.normal(0, 0.02, size=(steps, 1, BUCKETS)), axis=0))
    scale = np.exp(rng.uniform(-3, 1, size=BUCKETS))
    return trend * scale * np.exp(rng.normal(0, noise, size=(steps, ranks, BUCKETS)))


def flipped(norm: float, size: float, power: int) -> float:
    """The bucket's norm once one typical element is multiplied by 2**power."""
    element = norm / math.sqrt(size)
    return math.sqrt(norm * norm + element * element * (4.0**power - 1.0))


@pytest.mark.parametrize(
    ("seed", "step", "bucket"),
    [
        # Early in the run, before the noise's tail is learnt: a ratio of 8 or more
        # (x2^16 in a bucket of 10^7 elements, DDP's bucket size: x21).
        (0, 30, 3),
        (1, 30, 3),
        # Once it is learnt: x6.6 (x2^16 in a bucket of 10^8 elements).
        (2, 300, 5),
        (3, 300, 5),
    ],
)
def test_a_flipped_exponent_in_one_ranks_bucket_is_named_at_its_step(
    seed: int, step: int, bucket: int
) -> None:
    norms = clean_norms(seed)
    rank = 2
    norms[step - 1, rank, bucket] = flipped(norms[step - 1, rank, bucket], SIZES[bucket], 16)
    findings = judge_gradients(norms)
    assert [(f.step, f.rank, f.bucket) for f in findings] == [(step, rank, bucket)]
    [finding] = findings
    assert finding.ratio > 5 and not finding.nonfinite and not finding.persistent


def test_before_the_tail_is_learnt_a_smaller_ratio_waits() -> None:
    norms = clean_norms(4)
    norms[29, 2, 5] = flipped(norms[29, 2, 5], SIZES[5], 16)  # x6.6 at step 30
    assert judge_gradients(norms) == []


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_a_clean_run_names_nobody(seed: int) -> None:
    assert judge_gradients(clean_norms(seed, ranks=16)) == []


def test_a_spike_every_rank_sees_names_nobody() -> None:
    norms = clean_norms(6)
    norms[100] *= 50.0  # a loss spike: every rank's gradient at once
    norms[200:] *= 10.0  # a learning-rate change
    assert judge_gradients(norms) == []


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_nonfinite_local_norm_is_named_at_once_even_in_the_first_step(value: float) -> None:
    norms = clean_norms(7, ranks=2, steps=3)
    norms[0, 1, 3] = value
    [finding] = judge_gradients(norms)
    assert (finding.step, finding.rank, finding.bucket, finding.nonfinite) == (1, 1, 3, True)
    assert math.isnan(finding.ratio)


def test_a_bucket_nonfinite_on_every_rank_names_nobody_after_the_rank_that_began_it() -> None:
    """Rank 1's bucket 3 is NaN at step 20; the reduce spreads it, and from step 21 every
    rank's is NaN (then every bucket's): rank 1 at step 20 is the one finding."""
    norms = clean_norms(3, ranks=4, steps=40)
    norms[19, 1, 3] = math.nan
    norms[20:, :, 3] = math.nan
    norms[25:, :, :] = math.inf
    findings = judge_gradients(norms)
    assert [(f.step, f.rank, f.bucket, f.nonfinite) for f in findings] == [(20, 1, 3, True)]
    # Non-finite on some ranks but not all: each of them is named, at any step.
    partly = clean_norms(3, ranks=4, steps=40)
    partly[30, :3, 2] = math.inf  # three of four ranks: each is named
    assert [(f.step, f.rank, f.bucket) for f in judge_gradients(partly)] == [
        (31, 0, 2),
        (31, 1, 2),
        (31, 2, 2),
    ]


@pytest.mark.parametrize(("step", "factor"), [(60, 10.0), (550, 6.0)])
def test_a_rank_whose_every_bucket_changes_is_named_for_its_whole_gradient(
    step: int, factor: float
) -> None:
    norms = clean_norms(8, steps=600)
    norms[step - 1, 1, :] *= factor  # a bad micro-batch: all of rank 1's buckets
    [finding] = judge_gradients(norms)
    assert (finding.step, finding.rank, finding.bucket) == (step, 1, None)
    assert finding.ratio == pytest.approx(factor, rel=0.1)


def test_a_harder_micro_batch_below_the_whole_gradient_ratio_is_not_a_fault() -> None:
    norms = clean_norms(9, steps=600)
    norms[549, 1, :] *= 2.5  # far out of the noise, but below whole_ratio (4)
    assert judge_gradients(norms) == []
    named = judge_gradients(norms, settings=GradientSettings(whole_ratio=2.0))
    assert [(f.step, f.rank, f.bucket) for f in named] == [(550, 1, None)]


def test_ranks_of_identical_gradients_name_any_change_of_min_ratio() -> None:
    norms = np.ones((600, 4, BUCKETS)) * np.linspace(1, 2, BUCKETS)  # no noise at all
    norms[549, 0, 2] *= 1.6
    assert [(f.step, f.rank, f.bucket) for f in judge_gradients(norms)] == [(550, 0, 2)]


def test_with_two_ranks_the_rank_that_changed_against_its_own_steps_is_named() -> None:
    norms = clean_norms(10, ranks=2)
    norms[79, 1, 2] *= 100.0
    norms[80:] *= 3.0  # then both change together: nobody
    assert [(f.step, f.rank, f.bucket) for f in judge_gradients(norms)] == [(80, 1, 2)]


def test_a_ratio_below_min_ratio_is_never_named_however_quiet_the_noise() -> None:
    norms = clean_norms(11, noise=0.001)
    norms[99, 0, 1] *= 1.4
    norms[149, 0, 1] *= 1.7
    findings = judge_gradients(norms, settings=GradientSettings(min_ratio=1.5))
    assert [(f.step, f.rank) for f in findings] == [(150, 0)]


def test_during_the_warmup_only_a_large_ratio_is_named() -> None:
    norms = clean_norms(12)
    norms[2, 3, 0] *= 4.0  # below warmup_ratio (8) in the third step: not named
    norms[4, 3, 0] *= 20.0
    findings = judge_gradients(norms)
    assert [(f.step, f.rank, f.bucket) for f in findings] == [(5, 3, 0)]


def test_heavy_tailed_noise_raises_the_bar_it_learns() -> None:
    rng = np.random.default_rng(13)
    norms = np.exp(0.05 * rng.standard_t(3, size=(600, 16, BUCKETS)))
    # Normal noise of the same spread would have named dozens of these tails.
    assert judge_gradients(norms) == []
    norms[400, 5, 2] = math.inf
    assert [(f.step, f.rank) for f in judge_gradients(norms)] == [(401, 5)]


def test_a_rank_named_again_and_again_is_persistent() -> None:
    watch = GradientWatch()
    norms = clean_norms(14)
    for step in (50, 120, 190):
        norms[step - 1, 3, 4] *= 30.0
    found: list[GradientFinding] = []
    for step, row in enumerate(norms, start=1):
        found += watch.add(step, row)
    assert [(f.step, f.repeats, f.persistent) for f in found] == [
        (50, 0, False),
        (120, 1, False),
        (190, 2, True),
    ]
    assert watch.findings == found


def test_steps_name_the_rows() -> None:
    norms = clean_norms(15, steps=60)
    norms[40, 0, 0] = math.nan
    [finding] = judge_gradients(norms, steps=range(1000, 1060))
    assert finding.step == 1040


@pytest.mark.parametrize(
    ("norms", "message"),
    [
        (np.ones((5, 1, 3)), r"2 or more ranks, got shape \(1, 3\)"),
        (np.ones(5), r"\(steps, ranks, buckets\) or \(steps, ranks\), got shape \(5,\)"),
    ],
)
def test_norms_of_the_wrong_shape_are_refused(norms: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        judge_gradients(norms)


def test_steps_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(ValueError, match="steps must give one step per row: 2 for 5"):
        judge_gradients(np.ones((5, 3)), steps=[1, 2])


def test_a_changed_number_of_buckets_is_refused() -> None:
    watch = GradientWatch()
    for step in range(1, 20):
        watch.add(step, np.ones((4, 3)))
    with pytest.raises(ValueError, match="keep the number of buckets: 3 before, 2 now"):
        watch.add(20, np.ones((4, 2)))


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("false_alarms", 0.0, r"a number in \(0, 0.5\)"),
        ("min_ratio", 1.0, "a number > 1"),
        ("whole_ratio", True, "a number > 1"),
        ("window", 0, "an int >= 1"),
        ("warmup", 2.5, "an int >= 1"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(
    field: str, value: object, expected: str
) -> None:
    with pytest.raises(ValueError, match=f"GradientSettings {field} must be {expected}"):
        GradientSettings(**{field: value})  # type: ignore[arg-type]


def test_each_bucket_learns_its_own_spread() -> None:
    # One bucket's norms vary 20 times more across ranks than the others' (a small
    # layer's gradient): its noise is not a fault, and the others' faults still show.
    rng = np.random.default_rng(16)
    spread = np.array([0.2, 0.01, 0.01, 0.01, 0.01, 0.01])
    norms = np.exp(rng.normal(0, 1, size=(600, 8, BUCKETS)) * spread)
    norms[499, 3, 1] *= 1.6
    assert [(f.step, f.rank, f.bucket) for f in judge_gradients(norms)] == [(500, 3, 1)]


def test_settings_of_another_type_are_refused() -> None:
    with pytest.raises(TypeError, match="settings must be a GradientSettings or None, got dict"):
        GradientWatch({"window": 5})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (5, "steps must be a sequence of int steps or None, got int"),
        ("01", "steps must be a sequence of int steps or None, got str"),
        ([1.5, 2.0], r"steps must be a sequence of int steps, got \[1.5, 2.0\]"),
    ],
)
def test_steps_that_are_not_int_steps_are_refused(steps: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        judge_gradients(np.ones((2, 3)), steps=steps)  # type: ignore[arg-type]


def test_norms_that_are_not_numbers_and_a_step_that_is_not_an_int_are_refused() -> None:
    with pytest.raises(TypeError, match="norms must be an array of numbers, got list"):
        judge_gradients([["a", "b"]])
    with pytest.raises(TypeError, match="step must be an int, got str"):
        GradientWatch().add("1", np.ones(3))  # type: ignore[arg-type]


def test_with_three_ranks_only_the_rank_apart_is_named() -> None:
    norms = clean_norms(17, ranks=3, steps=600)
    norms[499, 2, 4] *= 3.0
    assert [(f.step, f.rank, f.bucket) for f in judge_gradients(norms)] == [(500, 2, 4)]


@pytest.mark.parametrize("seed", [18, 19])
def test_in_normal_noise_of_five_percent_a_bucket_twice_the_others_is_named(seed: int) -> None:
    # The bar a normal window learns is about 8 spreads (the budget's normal quantile
    # is 5.7): 1.9 times the others' median is 12 spreads here.
    norms = clean_norms(seed, ranks=16, steps=600)
    norms[499, 7, 2] *= 1.9
    assert [(f.step, f.rank, f.bucket) for f in judge_gradients(norms)] == [(500, 7, 2)]
