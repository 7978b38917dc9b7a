"""The straggler evidence keeps what the job waited for each step's latest rank (its
leads) at that rank only: one entry per (rank, block) that had a latest step, so at most
one per step whatever the ranks, summed exactly as the blocks' other sums are."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rankscribe.jobview import StragglerEvidence
from rankscribe.jobview.protocol import timings_evidence

ARRIVAL = "rankscribe/arrival_time"


def _shipped(evidence: StragglerEvidence) -> dict[str, np.ndarray]:
    arrays = evidence.to_arrays()
    return {key: np.asarray(value) for key, value in arrays.items() if key != "tags"}


def _hand_leads(table: np.ndarray, scale: np.ndarray, block: int) -> dict[tuple[int, int], float]:
    """Per (rank, block of ``block`` steps): the sum of each step's lead of its latest rank
    over the next-latest (0 on a tie), in step order; steps without a point or a step time
    have no latest rank. ``table`` is (ranks, steps)."""
    leads: dict[tuple[int, int], float] = {}
    for step in range(table.shape[1]):
        column = table[:, step]
        if np.isnan(column).all() or not scale[step] > 0:
            continue
        filled = np.where(np.isnan(column), -np.inf, column)
        latest = int(np.argmax(filled))  # a tie: the lowest rank
        ordered = np.sort(filled)
        lead = ordered[-1] - ordered[-2]
        key = (latest, step // block)
        leads[key] = leads.get(key, 0.0) + (float(lead) if np.isfinite(lead) else 0.0)
    return leads


def _fed_by_intervals(arrival: np.ndarray, scale: np.ndarray) -> StragglerEvidence:
    """The evidence of ``arrival`` (ranks x steps) added 16 steps at a time, as a live view
    adds interval after interval."""
    ranks, steps = arrival.shape
    evidence = StragglerEvidence()
    for start in range(0, steps, 16):
        window = slice(start, start + 16)
        evidence.add_timings(
            ARRIVAL, np.arange(steps)[window], range(ranks), arrival[:, window].T, scale[window]
        )
    return evidence


def test_the_leads_are_kept_at_each_steps_latest_rank_only() -> None:
    """4,096 ranks x 64 steps, fed interval by interval as a live view does: the leads are
    at most one entry a step (not 4,096 ranks' worth per block), each the sum of the
    leads of the steps its rank was the latest in."""
    ranks, steps = 4096, 64
    rng = np.random.default_rng(5)
    arrival = 0.008 + rng.uniform(0.0, 0.0004, (ranks, steps))
    arrival[7, ::3] += 0.002  # rank 7 the latest in every third step
    scale = np.full(steps, 0.010)
    arrays = _shipped(_fed_by_intervals(arrival, scale))
    block_size, first_block, _, _, _, entries = arrays["layout"][0]
    assert first_block == 0
    assert entries == len(arrays["lead_ranks"]) <= steps
    # 9 block sizes, then the top 2, 3 and 4, then the long leads' 4 counts
    assert arrays["leads"].size == entries * 16
    hand = _hand_leads(arrival, scale, int(block_size))
    keys = list(zip(arrays["lead_ranks"].tolist(), arrays["lead_blocks"].tolist(), strict=True))
    assert keys == sorted(hand)  # in the order of rank, then block
    rank_leads = arrays["leads"].reshape(-1, 16)[:, 0]
    assert rank_leads.tolist() == pytest.approx([hand[key] for key in keys], rel=1e-12)
    # Rank 7 leads the latest of the others by ~1.8 ms in each of its 22 steps.
    mine = [lead for (rank, _), lead in zip(keys, rank_leads, strict=True) if rank == 7]
    assert sum(mine) == pytest.approx(22 * 0.0018, rel=0.1)


def test_the_steps_a_rank_led_by_more_than_a_share_of_the_step_are_counted_at_it() -> None:
    """The long leads: per edge of 0.5, 1, 2 and 4 steps, the steps in which the latest rank
    led the next-latest by more than that many steps, counted at the latest rank. A step is
    what the job would have taken without waiting for it: a synchronous job's step ends
    after its latest arrival (here: and a 1 ms collective), so its step time holds the
    lead, and a rank 2.6 steps late is late by 0.72 of its own step's time."""
    ranks, steps = 64, 40
    rng = np.random.default_rng(3)
    arrival = 0.008 + rng.uniform(0.0, 0.0004, (ranks, steps))
    arrival[5, [3, 13, 23]] += 0.015  # 1.6 steps of 9.4 ms late, three times
    arrival[9, 30] += 0.025  # 2.6 steps late once
    arrival[17, 38] += 0.150  # 16 steps late once (a stall)
    arrival[11, 35] += 0.004  # under half a step
    step = arrival.max(axis=0) + 0.001
    evidence = timings_evidence({"arrival": arrival}, step_time=step)
    # Rank 11's lead under half a step counts nowhere; no other rank has a long lead.
    assert _long_lead_counts(evidence) == {
        5: [3.0, 3.0, 0.0, 0.0],
        9: [1.0, 1.0, 1.0, 0.0],
        17: [1.0, 1.0, 1.0, 1.0],
    }


def _long_lead_counts(evidence: StragglerEvidence) -> dict[int, list[float]]:
    arrays = _shipped(evidence)
    counts: dict[int, np.ndarray] = {}
    rows = arrays["leads"].reshape(-1, 16)
    for rank, row in zip(arrays["lead_ranks"].tolist(), rows, strict=True):
        counts[rank] = counts.get(rank, np.zeros(4)) + row[12:]
    return {rank: values.tolist() for rank, values in counts.items() if values.any()}


def test_a_run_of_long_leads_across_two_intervals_is_one_episode_as_at_once() -> None:
    """A live view adds interval after interval: a rank late at steps 14-17 (across the
    border of 16) and again at 30 has two episodes, as when the steps come at once."""
    ranks, steps = 32, 48
    rng = np.random.default_rng(4)
    arrival = 0.008 + rng.uniform(0.0, 0.0004, (ranks, steps))
    arrival[6, [14, 15, 16, 17, 30]] += 0.015
    scale = arrival.max(axis=0) + 0.001  # a synchronous job's step: 1.6 steps late
    live = _fed_by_intervals(arrival, scale)
    whole = StragglerEvidence()
    whole.add_timings(ARRIVAL, np.arange(steps), range(ranks), arrival.T, scale)
    assert _long_lead_counts(live) == _long_lead_counts(whole) == {6: [2.0, 2.0, 0.0, 0.0]}


def test_a_tie_for_latest_a_missing_point_and_an_untimed_step() -> None:
    """A tie at the latest: the lowest of the tied ranks holds the step, with no lead (no one
    waited for it alone). A rank without a point at a step is not its latest; a step
    without any point, or without a step time, has no latest rank."""
    table = np.array(
        [
            [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, np.nan, 1.0],
            [2.0, 1.0, 3.0, 1.0, 1.0, 1.0, np.nan, 5.0],
            [1.0, 1.0, 1.0, 1.0, 1.5, 1.0, np.nan, 1.0],
            [1.0, 1.0, 3.0, 2.5, np.nan, 1.0, np.nan, 1.0],  # step 4: no point
        ]
    )
    scale = np.array([4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, np.nan])  # step 7: no step time
    evidence = timings_evidence({"arrival": table}, step_time=scale)
    arrays = _shipped(evidence)
    assert arrays["layout"][0][0] == 1  # one step a block
    keys = list(zip(arrays["lead_ranks"].tolist(), arrays["lead_blocks"].tolist(), strict=True))
    # step 0: rank 1 by 1.0; 1: all tie (rank 0, 0); 2: ranks 1 and 3 tie (rank 1, 0);
    # 3: rank 3 by 1.5; 4: rank 2 by 0.5; 5: all tie (rank 0); 6: no point; 7: no step time.
    assert keys == [(0, 1), (0, 5), (1, 0), (1, 2), (2, 4), (3, 3)]
    rank_leads = arrays["leads"].reshape(-1, 16)[:, 0].tolist()
    assert rank_leads == [0.0, 0.0, 1.0, 0.0, 0.5, 1.5]
    assert _hand_leads(table, scale, 1) == dict(zip(keys, rank_leads, strict=True))


def test_partials_of_one_block_merge_into_one_entry_in_any_order() -> None:
    """Intervals that share a block (a live view's rounds, 100 steps in blocks of 4 cut in
    a block's middle) and groups of ranks merge, in any order, into one entry per (rank,
    block): the whole's entries, with its sums."""
    rng = np.random.default_rng(11)
    ranks, steps = 6, 100
    arrival = rng.uniform(0.0, 1.0, (ranks, steps))
    scale = np.full(steps, 4.0)
    numbers = np.arange(1000, 1000 + steps)
    whole = timings_evidence({"arrival": arrival}, step_time=scale, steps=numbers)
    pieces = [
        timings_evidence({"arrival": arrival[:, cut]}, step_time=scale[cut], steps=numbers[cut])
        for cut in (slice(0, 50), slice(50, 73), slice(73, 100))
    ]
    wanted = _shipped(whole)
    assert wanted["layout"][0][0] == 4  # blocks of 4: steps 1048-1051 lie in two pieces
    for order in ((0, 1, 2), (2, 0, 1), (1, 2, 0)):
        merged = StragglerEvidence()
        for index in order:
            merged.merge(pieces[index])
        got = _shipped(merged)
        np.testing.assert_array_equal(got["layout"], wanted["layout"])
        np.testing.assert_array_equal(got["lead_ranks"], wanted["lead_ranks"])
        np.testing.assert_array_equal(got["lead_blocks"], wanted["lead_blocks"])
        np.testing.assert_allclose(got["leads"], wanted["leads"], rtol=1e-12)
        np.testing.assert_allclose(got["blocks"], wanted["blocks"], rtol=1e-12)
    # Groups of ranks: each group's latest at each step (its own leads), side by side.
    groups = [
        timings_evidence({"arrival": arrival[rows]}, step_time=scale, ranks=np.arange(6)[rows])
        for rows in (slice(0, 3), slice(3, 6))
    ]
    merged = StragglerEvidence()
    for group in groups:
        merged.merge(group)
    got = _shipped(merged)
    keys = list(zip(got["lead_ranks"].tolist(), got["lead_blocks"].tolist(), strict=True))
    assert keys == sorted(
        key
        for group in groups
        for key in zip(
            _shipped(group)["lead_ranks"].tolist(),
            _shipped(group)["lead_blocks"].tolist(),
            strict=True,
        )
    )


@pytest.mark.parametrize(
    ("key", "change"),
    [
        ("lead_ranks", lambda values: np.where(values == values[0], 99, values)),
        ("lead_blocks", lambda values: values + 40),
        ("lead_ranks", lambda values: np.r_[values, values[:1]]),
    ],
    ids=["a rank without evidence", "a block out of range", "an entry more than the layout"],
)
def test_malformed_leads_are_refused(key: str, change: Callable[[np.ndarray], np.ndarray]) -> None:
    rng = np.random.default_rng(2)
    evidence = timings_evidence({"arrival": rng.uniform(0.0, 1.0, (4, 20))})
    arrays = evidence.to_arrays()
    arrays[key] = change(np.asarray(arrays[key]))
    with pytest.raises(ValueError, match="malformed"):
        StragglerEvidence.from_arrays(arrays)


def test_one_rank_and_block_twice_is_refused() -> None:
    rng = np.random.default_rng(2)
    evidence = timings_evidence({"arrival": rng.uniform(0.0, 1.0, (4, 20))})
    arrays = evidence.to_arrays()
    ranks, blocks = np.asarray(arrays["lead_ranks"]), np.asarray(arrays["lead_blocks"])
    ranks[1], blocks[1] = ranks[0], blocks[0]
    with pytest.raises(ValueError, match="malformed"):
        StragglerEvidence.from_arrays(arrays)
