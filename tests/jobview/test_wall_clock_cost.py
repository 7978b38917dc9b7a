"""A straggler's cost is the wall clock the job would save: what everyone waited for it at
the collective beyond the next-latest arrival (a node: the group's latest against the
rest's), judged on constructed arrivals through judge_timings."""

from __future__ import annotations

import numpy as np
import pytest

from rankscribe.jobview import judge_timings

RANKS, STEPS, STEP = 64, 300, 0.010


def _job(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, arrival) of a clean job: a 6 ms forward and an 8 ms arrival, each rank
    0-0.4 ms later than the earliest at random in each step."""
    rng = np.random.default_rng(seed)
    forward = 0.006 + rng.uniform(0.0, 0.0004, (RANKS, STEPS))
    arrival = forward + 0.002
    return forward, arrival


def _step(arrival: np.ndarray) -> np.ndarray:
    """The step: the latest arrival and a 2 ms collective."""
    return arrival.max(axis=0) + 0.002


def _waited(arrival: np.ndarray, group: list[int]) -> float:
    """What the job would save a step had ``group`` arrived with the rest (re-run without
    it: the step's latest of the rest)."""
    rest = np.delete(arrival, group, axis=0)
    return float((_step(arrival) - np.maximum(_step(rest), 0.0)).mean())


def test_a_rank_alone_late_costs_its_lead_over_the_next_latest() -> None:
    forward, arrival = _job()
    forward[3] += 0.001
    arrival[3] += 0.001
    step = _step(arrival)
    records = judge_timings({"forward": forward, "arrival": arrival}, step_time=step)
    assert [record["ranks"] for record in records] == [[3], [3]]
    saving = _waited(arrival, [3])
    # ~0.8 ms, not the 1.0 ms it is over the others' median: the latest of them is 0.2 ms
    # above their median.
    assert 0.0007 < saving < 0.0009
    for record in records:
        assert record["cost_basis"] == "arrival"
        assert record["cost_seconds_per_step"] == pytest.approx(saving, rel=1e-6)
        assert record["cost_share"] == pytest.approx(saving / step.mean(), rel=1e-6)
        assert record["message"].startswith(f"rank 3 costs {saving * 1e6:.0f} us a step")


def test_a_rank_named_by_its_forward_and_its_arrival_is_told_by_its_forward_first() -> None:
    """The arrival says when the job waited; the forward says where the time went: a rank
    whose forward is late leads with its forward, whatever the onsets make of the two
    (equal) wall-clock costs; the arrival's record follows."""
    forward, arrival = _job()
    forward[3, 40:] += 0.001
    arrival[3, 40:] += 0.001
    arrival[3, :40] += 0.001  # late on arrival from the start: its arrival cost is higher
    records = judge_timings({"forward": forward, "arrival": arrival}, step_time=_step(arrival))
    assert [(record["ranks"], record["timing"]) for record in records] == [
        ([3], "forward"),
        ([3], "arrival"),
    ]
    assert records[1]["cost_seconds_per_step"] >= records[0]["cost_seconds_per_step"]


def test_a_rank_hidden_behind_another_ranks_noise_costs_nothing_and_is_no_verdict() -> None:
    """Rank 3's forward is 1.5x the others' at every step, but rank 40 (another node: ranks
    are numbered node by node) pauses 4-6 ms in every step: the job waits for rank 40 and
    would save nothing without rank 3's slowness."""
    forward, arrival = _job()
    forward[3] *= 1.5
    arrival[3] += 0.5 * 0.006
    rng = np.random.default_rng(1)
    arrival[40] += rng.uniform(0.004, 0.006, STEPS)
    step = _step(arrival)
    assert _waited(arrival, [3]) == 0.0
    records = judge_timings({"forward": forward, "arrival": arrival}, step_time=step)
    assert all(3 not in record["ranks"] for record in records)
    # The pausing rank is what the job waits for: named on its arrival, at its lead.
    [record] = records
    assert (record["ranks"], record["timing"]) == ([40], "arrival")
    assert record["cost_seconds_per_step"] == pytest.approx(_waited(arrival, [40]), rel=1e-6)
    # Rank 3 is listed as what it is: slow, and costing the job nothing today.
    [hidden] = [item for item in record["top"] if item["rank"] == 3]
    assert hidden["cost_seconds_per_step"] == 0.0
    assert hidden.get("note", "").endswith("costs the job 0.0% today")


def test_a_slow_rank_in_a_job_whose_step_it_does_not_set_is_not_an_alarm() -> None:
    """Forward 1.5x the others' on rank 3, arriving no later than they do (its slowness is
    outside the synchronised part of the step): no verdict."""
    forward, arrival = _job()
    forward[3] *= 1.5
    records = judge_timings({"forward": forward, "arrival": arrival}, step_time=_step(arrival))
    assert records == []
    # Without arrivals, the forward's own lead over the next-latest stands in.
    [record] = judge_timings({"forward": forward}, step_time=_step(arrival))
    assert (record["ranks"], record["cost_basis"]) == ([3], "timing")


def test_a_slow_node_costs_its_latest_against_the_rests_latest() -> None:
    """Ranks 8-15 (a node) arrive 1 ms later: each one alone would save little (the others
    of the node arrive as late), the node as a whole what its latest leads the rest by."""
    forward, arrival = _job()
    node = list(range(8, 16))
    forward[node] += 0.001
    arrival[node] += 0.001
    step = _step(arrival)
    alone = max(_waited(arrival, [rank]) for rank in node)
    saving = _waited(arrival, node)
    assert alone < 0.2 * saving
    records = judge_timings({"forward": forward, "arrival": arrival}, step_time=step)
    assert records
    for record in records:
        assert sorted(record["ranks"]) == node
        assert record["cost_seconds_per_step"] == pytest.approx(saving, rel=1e-6)
        assert record["cost_share"] == pytest.approx(saving / step.mean(), rel=1e-6)


def test_a_rank_stalled_150_ms_in_a_tenth_of_its_steps_is_named_by_its_arrival() -> None:
    """Slow in few steps, its excess clipped at a step: its timing says little, but the job
    waits for it in every stall. A rank descheduled 1-4 ms in a fifth of its steps (a busy
    core, a few percent) is not named so."""
    forward, arrival = _job()
    rng = np.random.default_rng(2)
    stalled = np.flatnonzero(rng.random(STEPS) < 0.10)
    forward[5, stalled] += 0.150
    arrival[5, stalled] += 0.150
    busy = np.flatnonzero(rng.random(STEPS) < 0.20)
    descheduled = rng.uniform(0.001, 0.004, len(busy))
    forward[9, busy] += descheduled
    arrival[9, busy] += descheduled
    step = _step(arrival)
    records = judge_timings({"forward": forward, "arrival": arrival}, step_time=step)
    assert [(record["ranks"], record["timing"]) for record in records] == [([5], "arrival")]
    [record] = records
    saving = _waited(arrival[:, record["since_step"] :], [5])  # since its onset
    assert saving > 0.01  # ~15 ms a step
    assert record["cost_seconds_per_step"] == pytest.approx(saving, rel=0.05)


@pytest.mark.parametrize("seed", range(3))
def test_a_rank_late_beside_a_rank_that_pauses_now_and_then_costs_what_fixing_it_saves(
    seed: int,
) -> None:
    """Two ranks; rank 0 pauses 2 ms in 5 % of its steps (the rank that writes the job's
    files), rank 1 arrives 0.3 ms later from step 100. Fixing rank 1 saves its lead less
    what it led by before (nearly nothing): rank 0's pauses are no measure of rank 1's
    noise. Taken as the noise term, they read the cost at 0.56-0.94 of the saving."""
    rng = np.random.default_rng(seed)
    clean = 0.001 + rng.uniform(0.0, 0.0001, (2, STEPS))
    clean[0] += np.where(rng.random(STEPS) < 0.05, 0.002, 0.0)
    arrival = clean.copy()
    arrival[1, 100:] += 0.0003
    step = arrival.max(axis=0) + 0.0005
    records = judge_timings({"arrival": arrival}, step_time=step)
    assert [record["ranks"] for record in records] == [[1]]
    since = records[0]["since_step"]
    assert 90 <= since <= 112  # the onset's block
    saving = float((arrival.max(axis=0) - clean.max(axis=0))[since:].mean())  # a re-run
    assert records[0]["cost_seconds_per_step"] == pytest.approx(saving, rel=0.05)


def test_a_node_whose_one_rank_leads_the_rest_of_it_is_named_whole() -> None:
    """Ranks 8-15 arrive 1 ms later and rank 9 0.6 ms later still: fixing rank 9 alone
    would save its lead over the rest of its node (a few percent); the node as a whole
    saves far more, and is what is named."""
    forward, arrival = _job()
    node = list(range(8, 16))
    for values in (forward, arrival):
        values[node] += 0.001
        values[9] += 0.0006
    step = _step(arrival)
    saving = _waited(arrival, node)
    assert _waited(arrival, [9]) < 0.5 * saving
    records = judge_timings({"forward": forward, "arrival": arrival}, step_time=step)
    assert records
    for record in records:
        assert sorted(record["ranks"]) == node and record["ranks"][0] == 9
        assert record["cost_seconds_per_step"] == pytest.approx(saving, rel=1e-6)
