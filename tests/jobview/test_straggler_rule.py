"""The parts of the straggler rule, each at work: a case on each side of each one.

Each test builds timings in which one documented part of the rule (``docs/job-view.md``,
"Straggler") decides: a constant's margin, a setting's gate, who a group names, what a
record lists. ``tools/mutate_rule.py`` changes each part alone; these are among the tests
that must then fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from rankscribe.jobview import StragglerRecord, VerdictSettings, judge_timings

STEP = 0.010


def _halves(mean: float, half: float, above: int, steps: int = 400, ranks: int = 64) -> np.ndarray:
    """``ranks`` ranks of 5 ms at every step; rank 1's excess is ``mean + half`` (as shares
    of a 10 ms step) in ``above`` of its steps and ``mean - half`` in the others, in a
    shuffled order (no period). The others have no noise: rank 1's standard error is its
    own, ``half / sqrt(steps - 1)`` for ``above = steps / 2``."""
    rng = np.random.default_rng(7)
    if above * 2 == steps:  # exactly half in every block of 16 steps (the evidence's)
        order = np.concatenate(
            [rng.permutation(np.repeat([1.0, -1.0], 8)) for _ in range(steps // 16)]
        )
    else:
        order = rng.permutation(np.repeat([1.0, -1.0], [above, steps - above]))
    forward = np.full((ranks, steps), 0.005)
    forward[1] = 0.005 + STEP * (mean + half * order)
    return forward


def _names(forward: np.ndarray, settings: VerdictSettings | None = None) -> list[list[int]]:
    step = np.full(forward.shape[1], STEP)
    return [
        r["ranks"] for r in judge_timings({"forward": forward}, step_time=step, settings=settings)
    ]


@pytest.mark.parametrize(("errors", "named"), [(0.75, False), (1.25, True)])
def test_a_rank_slow_in_half_its_steps_must_clear_five_floors_by_one_standard_error(
    errors: float, named: bool
) -> None:
    """Slow in half of its steps (0.18 of the step in those, -0.02 in the others: not
    material in most steps), a rank is named by its mean (0.08) only when that clears five
    floors by one standard error (``BURST_FLOORS``, ``FLOOR_ERRORS``): with the floor set
    so that it clears them by 0.75 standard errors it is not, by 1.25 it is."""
    error = 0.1 / np.sqrt(399)
    floor = VerdictSettings(cost_floor_share=(0.08 - errors * error) / 5, cost_floor_seconds=0.0)
    assert _names(_halves(0.08, 0.1, 200), floor) == ([[1]] if named else [])


@pytest.mark.parametrize(("above", "named"), [(204, False), (206, True)])
def test_a_rank_is_material_when_above_the_floor_in_more_than_half_its_steps(
    above: int, named: bool
) -> None:
    """Above the floor of 2 % of the step in ``above`` of its 400 steps (4 % in those, 1 %
    in the others; mean ~2.5 %): material when the count clears half the steps by half a
    standard error of a sign test (``MATERIAL_ERRORS``: 2 x 206 - 400 = 12 >= 0.5 x 20),
    not at 204 (8 < 10); the mean alone (under five floors) names nobody."""
    floor = VerdictSettings(cost_floor_seconds=0.0)
    assert _names(_halves(0.025, 0.015, above), floor) == ([[1]] if named else [])


@pytest.mark.parametrize(("slow", "named"), [(0.41, False), (0.46, True)])
def test_a_rank_slow_in_just_over_half_its_steps_is_judged_on_its_own_spread(
    slow: float, named: bool
) -> None:
    """Three ranks of 5 ms; rank 1 ``slow`` of a 10 ms step above them in the steps marked
    S and ``0.48 - slow`` below in the others. Since its onset (step 4) it is slow in 11 of
    20 steps: over half, short of the sign test's margin (2 x 11 - 20 = 2 < 0.5 x sqrt(20)),
    so it is no steady rank, and its spread (the slow steps' and the fast ones') is its
    own: its mean must clear the bar on it. Pooled with the others' noise, as a steady
    rank's is (``_moderated``), the same mean clears the bar at 0.41 too."""
    pattern = "....S.S.SS.SSSS....SSS.."
    steps = np.arange(len(pattern))
    forward = np.full((3, len(pattern)), 0.005)
    forward[0] += STEP * 0.01 * np.sin(steps * 2.1)
    forward[2] += STEP * 0.01 * np.cos(steps * 1.7)
    forward[1] = 0.005 + STEP * np.where([c == "S" for c in pattern], slow, slow - 0.48)
    settings = VerdictSettings(cost_floor_seconds=0.0, confidence=4.0)
    records = judge_timings(
        {"forward": forward}, step_time=np.full(len(pattern), STEP), settings=settings
    )
    assert [(r["ranks"], r["since_step"], r["steps"]) for r in records] == (
        [([1], 4, 20)] if named else []
    )


def _job(seed: int = 0, ranks: int = 16, steps: int = 300) -> np.ndarray:
    """Forwards of ~6 ms (CV 7 %) in a 10 ms step."""
    return 0.006 * np.random.default_rng(seed).lognormal(0.0, 0.07, (ranks, steps))


def _judged(forward: np.ndarray, settings: VerdictSettings | None = None) -> list:
    step = forward.max(axis=0) + 0.003
    return judge_timings({"forward": forward}, step_time=step, settings=settings)


def test_a_rank_is_named_over_min_steps_since_its_onset_only() -> None:
    forward = _job()
    forward[5, 250:] *= 1.5  # the last 50 steps
    [record] = _judged(forward)
    assert record["ranks"] == [5] and record["steps"] < 100
    assert _judged(forward, VerdictSettings(min_steps=100)) == []


def test_a_rank_stalled_on_arrival_is_named_over_min_steps_since_its_onset_only() -> None:
    rng = np.random.default_rng(3)
    arrival = 0.008 * rng.lognormal(0.0, 0.05, (512, 100))
    arrival[17, [62, 72, 82, 92]] += 0.150
    step = arrival.max(axis=0) + 0.001
    [record] = judge_timings({"arrival": arrival}, step_time=step)
    assert record["ranks"] == [17] and record["steps"] < 50
    assert (
        judge_timings({"arrival": arrival}, step_time=step, settings=VerdictSettings(min_steps=50))
        == []
    )


def test_the_cost_must_reach_the_floor_in_seconds_too() -> None:
    forward = _job()
    forward[5] *= 1.5
    [record] = _judged(forward)
    cost = record["cost_seconds_per_step"]
    assert _judged(forward, VerdictSettings(cost_floor_seconds=cost * 1.01)) == []
    [again] = _judged(forward, VerdictSettings(cost_floor_seconds=cost * 0.99))
    assert again["ranks"] == [5]


def test_a_node_named_whole_must_reach_the_floor_in_seconds_too() -> None:
    forward = _job()
    forward[8:11] *= 1.3  # three ranks of the node of ranks 8-11, none costly alone
    [record] = _judged(forward)
    assert sorted(record["ranks"]) == [8, 9, 10]
    cost = record["cost_seconds_per_step"]
    assert _judged(forward, VerdictSettings(cost_floor_seconds=cost * 1.01)) == []


def test_a_node_whose_one_rank_costs_the_floor_alone_names_that_rank_when_the_rest_add_little() -> (
    None
):
    """Rank 8 1.5x, ranks 9 and 10 of its node 1.07x (slow, but hidden behind rank 8): the
    node as a whole costs less than a floor more than rank 8 alone, so rank 8 is named
    alone; ranks 9 and 10 are listed, at no cost."""
    forward = _job()
    forward[8] *= 1.5
    forward[9:11] *= 1.07
    [record] = _judged(forward)
    assert record["ranks"] == [8]
    assert {item["rank"]: item["cost_share"] for item in record["top"]}.keys() == {8, 9, 10}


def test_a_verdict_slow_in_some_steps_at_random_is_not_persistent() -> None:
    forward = _job()
    slow = np.random.default_rng(1).random(300) < 0.3
    forward[5, slow] *= 3.0
    [record] = _judged(forward)
    assert record["ranks"] == [5]
    assert (record["persistent"], record["period_steps"]) == (False, 0)
    assert record["share_of_steps"] < 0.5


def _two_ranks(slow: slice, seed: int = 3) -> list[StragglerRecord]:
    """Two ranks' compute sections of ~5 ms (x log-normal 5 %), 400 steps; rank 1's 4 ms
    longer over ``slow``; the step the later of the two and 4 ms more."""
    compute = 0.005 * np.random.default_rng(seed).lognormal(0.0, 0.05, (2, 400))
    compute[1, slow] += 0.004
    step = compute.max(axis=0) + 0.004
    return judge_timings({"section/compute": compute}, step_time=step)


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_of_two_ranks_one_slow_in_half_its_steps_since_its_onset_is_a_burst(seed: int) -> None:
    """Of two ranks each one's excess is the other's negated, so the median rank's variance
    is the slow rank's own, its slowness in it: its share of slow steps is read beyond its
    own noise before its onset. Rank 1 slow over steps 200-299 of 400 (from its onset, a
    block before, to the end: about 0.49 of the steps) is a burst, not persistent (it read
    0.81, persistent, beyond the median rank's variance)."""
    [record] = _two_ranks(slice(200, 300), seed)
    assert record["ranks"] == [1]
    assert abs(int(record["since_step"]) - 200) <= 16
    assert record["share_of_steps"] == pytest.approx(100 / (400 - record["since_step"]), abs=0.08)
    assert record["persistent"] is False


def test_of_two_ranks_one_slow_from_its_onset_to_the_end_is_persistent() -> None:
    """The same job with rank 1 slow from step 100 to the end: slow in all of its steps
    since its onset, chronic (beside its noise before the onset, as above)."""
    [record] = _two_ranks(slice(100, None))
    assert record["ranks"] == [1]
    assert record["share_of_steps"] > 0.9
    assert record["persistent"] is True


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_of_many_ranks_the_share_of_slow_steps_is_read_beyond_the_others_noise(
    seed: int,
) -> None:
    """Of 64 ranks, rank 5 noisy before step 200 (x log-normal 30 %, the others 5 %), then
    3x slower in 30 % of its steps at random with the others' noise: its share of slow
    steps is read beyond the median rank's variance, the noise of the steps it is judged
    on, not beyond its own before its onset (a noise it no longer has: read so, 0.37-0.44)."""
    rng = np.random.default_rng(seed)
    forward = 0.005 * rng.lognormal(0.0, 0.05, (64, 400))
    forward[5, :200] = 0.005 * rng.lognormal(0.0, 0.3, 200)
    forward[5, 200:][rng.random(200) < 0.3] *= 3.0
    [record] = judge_timings({"forward": forward}, step_time=forward.max(axis=0) + 0.004)
    assert record["ranks"] == [5]
    assert record["share_of_steps"] == pytest.approx(0.3, abs=0.05)
    assert record["persistent"] is False


def test_a_rank_slow_every_2nd_step_is_intermittent_not_persistent() -> None:
    forward = _job()
    forward[5, ::2] *= 2.0
    [record] = _judged(forward)
    assert record["ranks"] == [5]
    assert (record["persistent"], record["period_steps"]) == (False, 2)


def test_the_top_lists_costly_ranks_that_are_not_named() -> None:
    """Rank 5 2x slower every 2nd step is named; rank 9 1.5x slower in 40 of the other
    steps leads the job in those, a cost under the floor: listed in the top with that
    cost, not named."""
    forward = _job()
    forward[5, ::2] *= 2.0
    forward[9, np.random.default_rng(2).choice(np.arange(1, 300, 2), 40, replace=False)] *= 1.5
    [record] = _judged(forward)
    assert record["ranks"] == [5]
    listed = {item["rank"]: item for item in record["top"]}
    assert 0.0 < listed[9]["cost_share"] < 0.02


def test_five_ranks_each_costing_the_floor_alone_are_all_named() -> None:
    """Five ranks of different nodes, each 2x slower in every 5th step at its own phase:
    each one leads the job in its steps and costs the floor alone."""
    forward = _job(ranks=64)
    slow = [3, 17, 33, 41, 60]
    for phase, rank in enumerate(slow):
        forward[rank, phase::5] *= 2.0
    records = _judged(forward)
    assert sorted(rank for record in records for rank in record["ranks"]) == slow


def test_two_ranks_that_often_lead_by_a_step_are_no_verdict_and_no_error() -> None:
    """With two ranks each leads the other by more than a step in many steps: their long
    leads are as common as the other's (the Poisson tail is not taken where it is not
    small), and neither is named."""
    rng = np.random.default_rng(0)
    arrival = 0.008 + np.where(rng.random((2, 200)) < 0.3, 0.02, 0.0)
    step = arrival.max(axis=0) + 0.001
    assert judge_timings({"arrival": arrival}, step_time=step) == []


def test_a_rank_slow_in_two_steps_of_three_is_intermittent_not_persistent() -> None:
    """Slow in two thirds of its steps, but by a period: intermittent, whatever the share."""
    forward = _job()
    forward[5, np.arange(300) % 3 != 0] *= 1.6
    [record] = _judged(forward)
    assert record["ranks"] == [5]
    assert record["share_of_steps"] > 0.5
    assert (record["persistent"], record["period_steps"]) == (False, 3)


def test_an_arrival_no_other_timing_explains_is_ordered_by_its_cost() -> None:
    """Rank 5's forward 1.3x explains its late arrivals; rank 17's 150 ms stalls on arrival
    have no timing that explains them, and cost the job the most: that record leads."""
    rng = np.random.default_rng(4)
    forward = 0.006 * rng.lognormal(0.0, 0.07, (64, 100))
    forward[5] *= 1.3
    arrival = forward + 0.001 * rng.lognormal(0.0, 0.07, (64, 100))
    arrival[17, [62, 72, 82, 92]] += 0.150
    step = arrival.max(axis=0) + 0.001
    records = judge_timings({"forward": forward, "arrival": arrival}, step_time=step)
    assert [(record["timing"], record["ranks"][0]) for record in records] == [
        ("arrival", 17),
        ("forward", 5),
    ]


def test_ranks_costing_the_floor_alone_are_named_without_the_slow_ranks_behind_them() -> None:
    """Ranks 3 and 40 each 2x slower in every other step (each leads the job in its
    steps); rank 20 1.07x slower in every step, but never what the job waits for: ranks
    3 and 40 are named, rank 20 is listed."""
    forward = _job(ranks=64)
    forward[3, 0::2] *= 2.0
    forward[40, 1::2] *= 2.0
    forward[20] *= 1.07
    [record] = _judged(forward)
    assert sorted(record["ranks"]) == [3, 40]
    assert 20 in [item["rank"] for item in record["top"]]


@pytest.mark.parametrize("factor", [1.05, 1.08])
def test_two_slow_ranks_that_cost_the_job_little_together_are_no_verdict(factor: float) -> None:
    """Ranks 3 and 40 (not one node) each a few percent slower: slow by their timings,
    but the job waits for the pair beyond the rest less than the floor."""
    forward = _job(ranks=64)
    forward[[3, 40]] *= factor
    assert _judged(forward) == []


def _steady_at(high: float, above: int = 300, steps: int = 400, ranks: int = 64) -> np.ndarray:
    """As :func:`_halves`, rank 1's excess ``high`` (a share of the step) in ``above`` of
    its steps and 1 % in the others: slow in most steps, its mean near the 2 % floor."""
    order = np.random.default_rng(7).permutation(np.repeat([True, False], [above, steps - above]))
    forward = np.full((ranks, steps), 0.005)
    forward[1] = 0.005 + STEP * np.where(order, high, 0.010)
    return forward


@pytest.mark.parametrize(("high", "named"), [(0.0236, False), (0.024, True)])
def test_a_rank_slow_in_most_steps_must_clear_the_floor_by_one_standard_error(
    high: float, named: bool
) -> None:
    """Above the 2 % floor in 300 of 400 steps: its mean excess is 2.02 % with 2.36 % in
    those (one standard error below it, 1.99 %: under the floor) and 2.05 % with 2.4 %
    (2.02 % one standard error below): only the second clears the floor by
    ``FLOOR_ERRORS``, though both are clear of zero and cost the floor."""
    floor = VerdictSettings(cost_floor_seconds=0.0)
    assert _names(_steady_at(high), floor) == ([[1]] if named else [])


def test_a_rank_named_on_arrival_by_its_long_leads_must_cost_the_floor() -> None:
    """Stalled 150 ms four times in 40 steps of 512 ranks: its long leads name it on
    arrival when it costs the floor, as any verdict must: with the floor 1 % above its
    cost it is not named, 1 % below it is."""
    rng = np.random.default_rng(3)
    arrival = 0.008 * rng.lognormal(0.0, 0.05, (512, 100))
    arrival[17, [62, 72, 82, 92]] += 0.150
    step = arrival.max(axis=0) + 0.001
    [record] = judge_timings({"arrival": arrival}, step_time=step)
    cost = record["cost_share"]
    above = VerdictSettings(cost_floor_share=cost * 1.01)
    assert judge_timings({"arrival": arrival}, step_time=step, settings=above) == []
    below = VerdictSettings(cost_floor_share=cost * 0.99)
    [again] = judge_timings({"arrival": arrival}, step_time=step, settings=below)
    assert again["ranks"] == [17]


@pytest.mark.parametrize("seed", [0, 1])
def test_extra_work_every_10th_step_is_named_by_its_long_leads_within_50_steps(
    seed: int,
) -> None:
    """10 ms more every 10th step of ~9 ms steps from step 50 of 100, 512 ranks: five long
    leads in the 50 steps since, costing the job ~7.5 % of its time (under five floors,
    and too few slow steps for its mean to be clear yet). Named on its arrival, with what
    the job waited for it: within a fifth of the saving of the same draws without it."""
    rng = np.random.default_rng(seed)
    arrival = 0.008 * rng.lognormal(0.0, 0.05, (512, 100))
    clean = arrival.copy()
    arrival[17, 50::10] += 0.010
    step = arrival.max(axis=0) + 0.001
    [record] = judge_timings({"arrival": arrival}, step_time=step)
    saving = float((step - clean.max(axis=0) - 0.001)[50:].mean())
    assert record["ranks"] == [17]
    assert 0.02 < record["cost_share"] < 0.10
    assert abs(record["cost_seconds_per_step"] - saving) <= 0.2 * saving
    assert abs(record["since_step"] - 50) <= 4


@pytest.mark.parametrize("period", [9, 10, 12, 16])
def test_a_rank_slow_every_kth_step_is_named_with_its_period(period: int) -> None:
    """3x slower every ``period``-th step: the components found are those of the divisors
    of the period up to 8 (every 10th: the 5th's and the 2nd's), their least common
    multiple (10, 12) taken to the multiple its share of slow steps gives (9: 3 found, a
    ninth of the steps slow; 16: 8 found, a sixteenth)."""
    forward = _job(steps=600)
    forward[5, ::period] *= 3.0
    [record] = _judged(forward)
    assert record["ranks"] == [5]
    assert (record["persistent"], record["period_steps"]) == (False, period)
    assert record["message"].endswith(f"(intermittent: every {period}th step)")


@pytest.mark.parametrize("period", [32, 40])
def test_a_rank_slow_in_few_long_steps_is_judged_by_its_share_of_the_jobs_time(
    period: int,
) -> None:
    """3x slower every 32nd or 40th step costs the job 3.6 % or 2.9 % of its time, over the
    2 % floor; the mean of each step's excess share is 1.8 % or 1.5 %, under it (its slow
    steps are the long ones, whose share of their own step is 0.57): the floor is judged
    on the excess seconds over the step times, summed, and the rank is named with its
    period and the cost the job would save."""
    forward = _job(steps=40 * period)
    forward[5, ::period] *= 3.0
    step = forward.max(axis=0) + 0.003
    saving = float((forward.max(axis=0) - np.delete(forward, 5, axis=0).max(axis=0)).mean())
    assert 0.028 < saving / step.mean() < 0.037
    [record] = _judged(forward)
    assert record["ranks"] == [5]
    assert (record["persistent"], record["period_steps"]) == (False, period)
    assert record["cost_share"] == pytest.approx(saving / step.mean(), rel=0.1)


def test_a_period_of_21_steps_is_said_as_every_21st() -> None:
    forward = _job(steps=840)
    forward[5, ::21] *= 5.0
    [record] = _judged(forward)
    assert record["period_steps"] == 21
    assert record["message"].endswith("(intermittent: every 21st step)")


def test_a_rank_stalled_in_its_forward_is_named_in_a_job_without_arrivals() -> None:
    """Without arrivals, each timing's own wall clock is the job's: a rank whose forward
    stalls 150 ms four times in 40 steps leads the job by 15 steps in each, as no rank's
    GC pause of a few ms does, and is named on its forward. Its clipped excess (one step
    per stall) alone would not name it."""
    rng = np.random.default_rng(3)
    forward = 0.008 * rng.lognormal(0.0, 0.05, (512, 100))
    pauses = rng.random((512, 100)) < 0.02
    forward += np.where(pauses, rng.uniform(0.002, 0.008, (512, 100)), 0.0)
    forward[17, [62, 72, 82, 92]] += 0.150
    step = forward.max(axis=0) + 0.001
    [record] = judge_timings({"forward": forward}, step_time=step)
    assert (record["ranks"], record["timing"], record["cost_basis"]) == ([17], "forward", "timing")
    without = np.delete(forward, 17, axis=0).max(axis=0) + 0.001
    saving = float((step - without)[record["since_step"] :].mean())
    assert record["cost_seconds_per_step"] == pytest.approx(saving, rel=0.05)


def test_a_rank_stalled_in_most_of_its_steps_is_slow_in_most_of_them() -> None:
    """Stalled by 15 % of the step in 55 % of its steps and 1 % slower in the rest: every
    step counts in the material test, stalls too, so it is named, with what the job
    waits for it (its mean of 9 % is under five floors: not named as a burst)."""
    rng = np.random.default_rng(1)
    forward = 0.005 * rng.lognormal(0.0, 0.05, (64, 400))
    forward[1] += STEP * (0.01 + np.where(rng.random(400) < 0.55, 0.15, 0.0))
    step = np.full(400, STEP)
    [record] = judge_timings({"forward": forward}, step_time=step)
    assert record["ranks"] == [1]
    saving = float((forward.max(axis=0) - np.delete(forward, 1, axis=0).max(axis=0)).mean())
    assert record["cost_seconds_per_step"] == pytest.approx(saving, rel=0.05)
