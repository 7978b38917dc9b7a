"""tools/bench/detection.py: its simulator through the public door, on a small job."""

from __future__ import annotations

import re
from types import ModuleType

import numpy as np
import pytest

from rankscribe.jobview import VerdictSettings, judge_timings
from tests._support.records import assert_same_records
from tests._support.tool_modules import load_tool


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_tool("bench/detection.py", "detection_bench")


@pytest.mark.parametrize("seed", range(3))
def test_a_clean_simulated_job_gives_no_verdict(bench: ModuleType, seed: int) -> None:
    rng = np.random.default_rng(seed)
    timings, step_time, faulty, _ = bench.simulate(rng, 64, 300, bench.CLEAN)
    assert len(faulty) == 0
    assert judge_timings(timings, step_time=step_time) == []


@pytest.mark.parametrize("seed", range(3))
def test_a_rank_1_5x_slower_is_named_with_what_it_costs_the_job(
    bench: ModuleType, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    fault = bench.Fault("1 rank forward +50 %", 0.5)
    timings, step_time, faulty, saving = bench.simulate(rng, 64, 300, fault)
    records = judge_timings(timings, step_time=step_time)
    # Named on its forward and on its arrival, each with what the job waits for it.
    assert sorted(record["timing"] for record in records) == ["arrival", "forward"]
    assert all(record["ranks"] == faulty.tolist() for record in records)
    [record] = [record for record in records if record["timing"] == "forward"]
    assert record["cost_basis"] == "arrival"
    assert bench.ONSET - 16 <= record["since_step"] <= bench.ONSET
    # What the job saves without the fault: the same stream run again without it.
    truth = float(saving[0, record["since_step"] :].mean())
    assert record["cost_seconds_per_step"] == pytest.approx(truth, rel=0.1)


def test_a_trial_tallies_latency_recall_and_cost(bench: ModuleType) -> None:
    tally = bench.Tally()
    rng = np.random.default_rng(0)
    fault = bench.Fault("1 rank forward +50 %", 0.5)
    bench.run_trial(rng, 64, fault, tally, 100, 10, VerdictSettings())
    assert (tally.trials, tally.faulty, tally.found_end) == (1, 1, 1)
    assert tally.false_names == 0
    assert tally.clean_rank_steps == 63 * bench.STEPS_JUDGED
    [latency] = tally.latencies
    assert 0 < latency <= 50
    [error] = tally.cost_errors
    assert error < 0.05


def test_a_trial_tallies_the_saving_and_the_false_names_that_save_nothing(
    bench: ModuleType,
) -> None:
    """Each faulty run's saving is the measured cost since the onset over the median step;
    a name of a clean rank counts among the cheap ones only where its own lead saves the
    job under 0.5 % of the step."""
    tally = bench.Tally()
    rng = np.random.default_rng(0)
    fault = bench.Fault("1 rank forward +50 %", 0.5)
    bench.run_trial(rng, 64, fault, tally, 100, 10, VerdictSettings())
    [saving] = tally.savings
    rng = np.random.default_rng(0)  # the same draws again: the saving as the bench measures it
    _, step_time, _, cost = bench.simulate(rng, 64, bench.ONSET + bench.AFTER, fault)
    assert saving == pytest.approx(float(cost[:, bench.ONSET :].mean()) / np.median(step_time))
    assert saving > 0.02
    clean = bench.Tally()
    bench.run_trial(np.random.default_rng(0), 64, bench.CLEAN, clean, 100, 10, VerdictSettings())
    assert clean.savings == [] and clean.cheap_names == 0
    # A record naming a rank that leads nobody (the earliest at every step) is cheap; one
    # naming the step's latest rank, 1 ms ahead of the rest in a 5 ms step, is not.
    arrival = np.tile(np.arange(1.0, 5.0)[:, None], (1, 20)) * 1e-3
    records = [{"ranks": [0]}, {"ranks": [3]}]
    assert bench._cheap_names(records, set(), arrival, slice(0, 20)) == 1
    assert bench._cheap_names(records, {0}, arrival, slice(0, 20)) == 0


def test_the_detection_curve_is_binned_by_the_measured_saving(bench: ModuleType) -> None:
    outcomes = [(0.001, False, False), (0.03, True, True), (0.035, False, True), (0.2, True, True)]
    curve = bench._by_saving(outcomes)
    assert curve == (
        "0.0%-0.5%: 0/1 within 50, 0/1 at the end; "
        "3.0%-4.0%: 1/2 within 50, 2/2 at the end; "
        ">= 10.0%: 1/1 within 50, 1/1 at the end"
    )
    named = bench.family_trial(0, 64, "gc pauses", "rank", 0.5, VerdictSettings())
    [(saving, early, end)] = named.outcomes
    assert saving == named.savings[0] and (early, end) == (True, True)
    unnamed = bench.family_trial(0, 64, "gc pauses", "rank", 0.05, VerdictSettings())
    [(saving, early, end)] = unnamed.outcomes
    assert saving == unnamed.savings[0] < 0.02 and (early, end) == (False, False)


def test_a_trial_lists_each_false_name_with_its_run_and_window(bench: ModuleType) -> None:
    """Thresholds loose enough to name clean ranks: each name is listed where it was made."""
    tally = bench.Tally()
    loose = VerdictSettings(cost_floor_share=0.001, confidence=3.0)
    rng = np.random.default_rng(0)
    bench.run_trial(rng, 64, bench.CLEAN, tally, 100, 10, loose, label="clean, seed 0 run 1")
    assert tally.false_names > 0
    assert len(tally.false_named) == tally.false_names
    pattern = (
        r"clean, seed 0 run 1, (steps \d+-\d+|the whole run): rank \d+ on [a-z_/]+ "
        r"\(its record: \d+\.\d\d% of the step since step \d+, in \d+% of steps(, a burst)?\)"
    )
    for said in tally.false_named:
        assert re.fullmatch(pattern, said), said


def test_a_family_run_measures_the_saving_by_a_run_without_the_fault(bench: ModuleType) -> None:
    """The same draws without the fault: equal steps before the onset, and the slow rank's
    record costs what the steps lost (within the bound the benchmark checks)."""
    _, step, clean, faulty = bench.family_run(0, 64, "node-shared", "none", 0.0)
    assert len(faulty) == 0 and np.array_equal(step, clean)
    timings, step, clean, faulty = bench.family_run(0, 64, "node-shared", "rank", 0.5)
    onset = bench.FAMILY_ONSET
    assert np.array_equal(step[:onset], clean[:onset])
    records = judge_timings(timings, step_time=step)
    [record] = [record for record in records if record["timing"] == "arrival"]
    assert record["ranks"] == faulty.tolist()
    saving = float((step - clean)[record["since_step"] :].mean())
    assert saving > 0.04 * float(step.mean())
    assert record["cost_seconds_per_step"] == pytest.approx(saving, rel=0.2)


def test_a_family_trial_tallies_recall_cost_and_false_names(bench: ModuleType) -> None:
    tally = bench.family_trial(0, 64, "gc pauses", "rank", 0.5, VerdictSettings())
    assert (tally.runs, tally.faults, tally.material, tally.found_early) == (1, 1, 1, 1)
    assert (tally.found_end, tally.costed, tally.within) == (1, 1, 1)
    assert tally.false_names == 0
    assert tally.clean_rank_steps == 63 * bench.FAMILY_STEPS


def test_the_whole_run_is_judged_as_a_runs_evidence_the_same_as_one_window_below_8192(
    bench: ModuleType,
) -> None:
    """The end of a family run is judged from a run's evidence, its rounds added as a live
    view adds them; at 64 ranks its blocks are a window's (32), so its records are
    judge_timings' of the whole run."""
    timings, step, _, faulty = bench.family_run(0, 64, "gc pauses", "rank", 0.5)
    records = bench._run_records(timings, step, VerdictSettings())
    assert [record["ranks"] for record in records] == [faulty.tolist()] * 2
    whole = judge_timings(timings, step_time=step, steps=np.arange(bench.FAMILY_STEPS))
    assert_same_records(records, whole)


@pytest.mark.parametrize("seed", [3, 11])
def test_ranks_whose_speed_wanders_beside_a_slow_one_are_not_named_by_the_dozen(
    bench: ModuleType, seed: int
) -> None:
    # 1,024 ranks whose speeds drift (sd 3 %), one 20 % slower from step 150 (saving ~2 %
    # of the step, under the floor alone). Before: the whole run named it with 51 drifting
    # ranks on the forward and 191 on the arrival, each too small to act on, for the sum of
    # their waits. Now more than four such ranks are no verdict: no record at the default
    # floor, and at a floor of 1 % (under its own cost) the slow rank alone.
    timings, step, _, faulty = bench.family_run(seed, 1024, "wandering speed", "rank", 0.2)
    records = judge_timings(timings, step_time=step)
    assert all(len(record["ranks"]) <= 4 for record in records), [
        (record["timing"], len(record["ranks"])) for record in records
    ]
    lower = VerdictSettings(cost_floor_share=0.01)
    records = judge_timings(timings, step_time=step, settings=lower)
    assert [record["ranks"] for record in records] == [faulty.tolist()] * 2
