"""The straggler rule's layers: excess over the others' median, bounded evidence, verdicts."""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankscribe.jobview import RankSeries, StragglerEvidence, verdict_lines, write_job_view
from rankscribe.jobview.feed import (
    DATA_WAIT_TAG,
    FORWARD_TIME_TAG,
    SECTION_TAG_PREFIX,
    STEP_TIME_TAG,
)

# The evidence's field layout (COUNT, ABOVE, EDGES, ...) reads each block's counts.
# The blocks a cost since a step is read from (blocks_since) are the evidence's too.
# private: the straggler rule's medians (row_medians, others_medians) and its evidence's fields
from rankscribe.jobview.job.verdicts._stragglers import (
    ABOVE,
    ABOVE_EDGES,
    COUNT,
    EDGES,
    FIELDS,
    PERIODIC,
    SLOWEST,
    STEP_SECONDS,
    blocks_since,
    middle_medians,
    others_medians,
    row_medians,
    row_middles,
    window_totals,
)
from rankscribe.jobview.protocol import (
    LIVE_STATE_NAME,
    paired_ratios,
    straggler_records,
    straggler_verdicts,
    timings_evidence,
)

STEPS = 120


def test_paired_ratios_divide_by_the_step_median_and_make_0_over_0_one() -> None:
    values = np.array(
        [
            [1.0, 2.0, 3.0],
            [0.0, 0.0, 0.0],
            [0.0, 0.0, 5.0],
            [4.0, np.nan, np.nan],  # one rank: skipped
            [2.0, np.nan, 6.0],
        ]
    )
    ratios = paired_ratios(values)
    np.testing.assert_allclose(ratios[0], [0.5, 1.0, 1.5])
    np.testing.assert_array_equal(ratios[1], [1.0, 1.0, 1.0])
    assert ratios[2].tolist() == [1.0, 1.0, np.inf]
    assert np.isnan(ratios[3]).all()
    np.testing.assert_allclose(ratios[4], [0.5, np.nan, 1.5])


def test_the_floor_is_added_to_both_sides() -> None:
    ratios = paired_ratios(np.array([[0.001, 0.003]]), floor=[0.05])
    np.testing.assert_allclose(ratios[0], [0.051 / 0.052, 0.053 / 0.052])


def test_paired_ratios_refuse_a_flat_array() -> None:
    with pytest.raises(ValueError, match=r"\(steps, ranks\)"):
        paired_ratios(np.ones(3))


def _evidence(
    levels: dict[int, float],
    steps: int = STEPS,
    seed: int = 0,
    noise: float = 0.1,
    tag: str = STEP_TIME_TAG,
) -> StragglerEvidence:
    """Each rank's timing around its level (seconds), judged against a step of 1 s."""
    rng = np.random.default_rng(seed)
    ranks = sorted(levels)
    values = np.array(
        [
            [levels[rank] * (1 + noise * rng.standard_normal()) for rank in ranks]
            for _ in range(steps)
        ]
    ).clip(1e-6)
    evidence = StragglerEvidence()
    evidence.add_timings(tag, np.arange(steps), ranks, values, np.ones(steps))
    return evidence


def test_others_medians_leave_each_rank_out() -> None:
    values = np.array(
        [[1.0, 2.0, 3.0, 4.0], [1.0, np.nan, 5.0, 2.0], [4.0, np.nan, np.nan, np.nan]]
    )
    expected = np.array([[3.0, 3.0, 2.0, 2.0], [3.5, np.nan, 1.5, 3.0], [np.nan] * 4])
    np.testing.assert_array_equal(others_medians(values), expected)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=2, max_value=9).flatmap(
        lambda columns: st.lists(
            st.lists(
                st.sampled_from([-np.inf, -3.0, 0.0, 1.0, 2.5, 3.0, 7.0, 1e300, np.inf]),
                min_size=columns,
                max_size=columns,
            ),
            min_size=1,
            max_size=5,
        )
    )
)
def test_others_medians_of_full_rows_equal_the_median_of_the_rest(rows: list[list[float]]) -> None:
    """Rows without a gap take a partition, not a sort: ties, infinities, negative and
    large values included, the same medians (NaN where infinities of opposite signs meet)."""
    table = np.array(rows, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        expected = np.array(
            [[np.median(np.delete(row, rank)) for rank in range(len(row))] for row in table]
        )
    np.testing.assert_array_equal(others_medians(table), expected)


def _wide_rows(width: int) -> np.ndarray:
    """Rows of ``width`` points that a sample of them can misjudge: sorted either way,
    constant, two values, mostly one value, a short cycle, infinities, a heavy tail."""
    rng = np.random.default_rng(width)
    rows = [
        rng.random(width),
        np.sort(rng.random(width)),
        np.sort(rng.random(width))[::-1],
        np.ones(width),
        rng.integers(0, 2, width).astype(float),
        np.r_[np.zeros(width - 3), np.inf, np.inf, 1.0],
        np.r_[np.full(width // 2 + 5, 2.0), rng.random(width - width // 2 - 5)],
        np.resize(np.arange(8.0), width),
        rng.pareto(0.5, width),
        np.r_[rng.random(width - 1), 1e30],
    ]
    return np.stack(rows)


@pytest.mark.parametrize("width", [4095, 4096, 4097, 16_384, 16_385])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_middle_of_wide_rows_is_selected_exactly(
    width: int, dtype: type[np.floating[Any]]
) -> None:
    """Rows of 4,096 ranks or more have their middle selected among the points near a
    sample's middle: the medians and the others' medians are still each row's own, bit for
    bit, whatever the order of the row (sorted rows and ties among them)."""
    table = _wide_rows(width).astype(dtype)
    middle = row_middles(table)
    assert middle is not None
    assert middle_medians(middle).tobytes() == row_medians(table).tobytes()
    others = others_medians(table)
    wide = table.astype(np.float64)
    for column in (0, 1, width // 2 - 1, width // 2, width - 1):
        expected = [np.median(np.delete(row, column)) for row in wide]
        np.testing.assert_array_equal(others[:, column], expected)


@pytest.mark.parametrize("ranks", [3, 5, 1025])
@pytest.mark.parametrize("fault", ["no step time", "a step time of 0", "an infinite share"])
def test_a_step_without_a_scale_or_a_finite_reference_share_is_not_counted(
    ranks: int, fault: str
) -> None:
    """A table without a gap whose every step is counted but one: without a step time
    (NaN), with a step time of 0, or whose others' median is not a finite share of its
    step (1e300 s over a 1e-10 s step). Each rank's count and step time are those of the
    other steps, whatever the ranks (a chunk of one rank included); without the fault,
    every step's."""
    steps, faulty = 12, 9
    rng = np.random.default_rng(ranks)
    values = 0.01 + 0.001 * rng.random((steps, ranks))
    step_time = np.full(steps, 0.02)

    def sums() -> tuple[list[float], np.ndarray]:
        evidence = StragglerEvidence()
        evidence.add_timings(
            FORWARD_TIME_TAG, np.arange(steps), list(range(ranks)), values, step_time
        )
        blocks = np.asarray(evidence.to_arrays()["blocks"]).reshape(ranks, -1, FIELDS)
        return blocks[:, :, COUNT].sum(axis=1).tolist(), blocks[:, :, STEP_SECONDS].sum(axis=1)

    counts, seconds = sums()
    assert counts == [steps] * ranks
    np.testing.assert_allclose(seconds, 0.02 * steps)
    if fault == "no step time":
        step_time[faulty] = np.nan
    elif fault == "a step time of 0":
        step_time[faulty] = 0.0
    else:
        values[faulty], step_time[faulty] = 1e300, 1e-10
    counts, seconds = sums()
    assert counts == [steps - 1] * ranks
    np.testing.assert_allclose(seconds, 0.02 * (steps - 1))


@pytest.mark.parametrize(
    ("ranks", "slow"), [(8, [3, 6]), (16, list(range(8, 16))), (4, [1, 2]), (2, [1])]
)
def test_a_slow_node_is_named_whole(ranks: int, slow: list[int]) -> None:
    """2 of 8 and 8 of 16 ranks 50 % slower: every one of them, and no other.

    Where the node is half the job, the others' median of each of its ranks holds
    the rest of the node, so its cost reads low (docs/job-view.md, "Straggler").
    """
    evidence = _evidence({rank: 1.5 if rank in slow else 1.0 for rank in range(ranks)})
    verdicts = straggler_verdicts(evidence)
    assert verdicts["job/straggler_ranks"] == ",".join(map(str, slow))
    assert verdicts["job/straggler_rank"] in slow
    assert verdicts["job/straggler_timing"] == STEP_TIME_TAG
    low = 0.3 if 2 * len(slow) >= ranks > 2 else 0.42
    assert low <= float(verdicts["job/straggler_excess"]) <= 0.58
    assert low <= float(verdicts["job/straggler_cost_seconds"]) <= 0.58
    for rank in slow:
        assert verdicts[f"job/straggler_timing/{rank}"] == STEP_TIME_TAG


@pytest.mark.parametrize("ranks", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("seed", range(4))
def test_noisy_balanced_ranks_are_never_named(ranks: int, seed: int) -> None:
    verdicts = straggler_verdicts(_evidence(dict.fromkeys(range(ranks), 1.0), seed=seed, noise=0.3))
    assert (verdicts["job/straggler_rank"], verdicts["job/straggler_ranks"]) == (-1, "")
    assert verdicts["job/straggler_timing"] == ""
    assert "job/straggler_excess" not in verdicts


def test_all_zero_timings_name_nobody() -> None:
    evidence = StragglerEvidence()
    evidence.add_timings(DATA_WAIT_TAG, np.arange(50), [0, 1, 2], np.zeros((50, 3)), 0.01)
    assert straggler_verdicts(evidence)["job/straggler_rank"] == -1
    assert evidence.ranks(DATA_WAIT_TAG) == [0, 1, 2]


def test_evidence_merged_from_blocks_and_rank_groups_equals_the_whole() -> None:
    """The sums need each step's whole row; merged in any order they equal the whole."""
    rng = np.random.default_rng(3)
    values = rng.random((90, 4)) + np.array([1.0, 1.0, 1.0, 2.0])
    steps = np.arange(100, 190)
    whole = StragglerEvidence()
    whole.add_timings(FORWARD_TIME_TAG, steps, range(4), values, 4.0)
    parts = []
    for block in (slice(0, 30), slice(30, 90)):
        part = StragglerEvidence()
        part.add_timings(FORWARD_TIME_TAG, steps[block], range(4), values[block], 4.0)
        parts.append(part)
    merged = StragglerEvidence()
    for part in reversed(parts):
        merged.merge(part)
    assert merged.to_arrays()["tags"] == [FORWARD_TIME_TAG]
    np.testing.assert_allclose(
        np.asarray(merged.to_arrays()["blocks"]), np.asarray(whole.to_arrays()["blocks"])
    )
    shipped = StragglerEvidence.from_arrays(merged.to_arrays())
    shipped_verdicts, whole_verdicts = straggler_verdicts(shipped), straggler_verdicts(whole)
    assert shipped_verdicts.keys() == whole_verdicts.keys()
    # The numbers within rounding, the text ("3") exactly: approx takes numbers only.
    numbers = [key for key, value in whole_verdicts.items() if isinstance(value, (int, float))]
    assert [shipped_verdicts[key] for key in numbers] == pytest.approx(
        [whole_verdicts[key] for key in numbers], rel=1e-12
    )
    assert {key: value for key, value in shipped_verdicts.items() if key not in numbers} == {
        key: value for key, value in whole_verdicts.items() if key not in numbers
    }
    assert straggler_verdicts(merged)["job/straggler_ranks"] == "3"


@pytest.mark.parametrize(("ranks", "blocks"), [(8192, 32), (16384, 16), (65536, 4), (131072, 4)])
def test_a_runs_evidence_keeps_fewer_blocks_a_rank_as_the_ranks_grow(
    ranks: int, blocks: int
) -> None:
    """Rank 0 holds a run's evidence of every rank: 32 blocks of sums a rank up to 8,192
    ranks, half as many for each doubling beyond, never fewer than 4 (at 65,536 ranks 54.5
    MB a timing, not 436 MB). Steps 0 to 999 then lie in blocks of the size that fits. A
    window judged once keeps 32 blocks whatever the ranks (its sums are not held)."""
    steps = np.array([0, 999])
    values = np.full((2, ranks), 0.01, dtype=np.float32)
    run = StragglerEvidence()
    run.add_timings(FORWARD_TIME_TAG, steps, range(ranks), values, 0.02)
    shipped = run.to_arrays()
    assert np.asarray(shipped["layout"])[0, 0] == 1024 // blocks  # the block size
    assert np.asarray(shipped["blocks"]).size == ranks * blocks * FIELDS
    window = timings_evidence({"forward": values.T}, steps=steps, step_time=np.full(2, 0.02))
    assert np.asarray(window.to_arrays()["layout"])[0, 0] == 32


def test_malformed_evidence_arrays_are_refused() -> None:
    arrays = _evidence({0: 1.0, 1: 1.0}).to_arrays()
    arrays["tags"] = ["one", "two"]
    with pytest.raises(ValueError, match="malformed"):
        StragglerEvidence.from_arrays(arrays)


def _synchronised_job(slow_rank: int, timing: str, ranks: int = 2) -> dict[int, RankSeries]:
    """Every rank's step time equal (a collective ends each step); one rank's work longer."""
    rng = np.random.default_rng(1)
    series = {}
    for rank in range(ranks):
        work = [
            (step, 0.010 * (2.5 if rank == slow_rank else 1.0) * (1 + 0.05 * rng.standard_normal()))
            for step in range(1, STEPS + 1)
        ]
        step_time = [(step, 0.026 + 0.0005 * rng.standard_normal()) for step in range(1, STEPS + 1)]
        series[rank] = RankSeries(
            rank,
            {
                STEP_TIME_TAG: step_time,
                timing: work,
                DATA_WAIT_TAG: [(step, 1e-5 * (1 + rank)) for step in range(1, STEPS + 1)],
            },
        )
    return series


@pytest.mark.parametrize("timing", [FORWARD_TIME_TAG, f"{SECTION_TAG_PREFIX}compute"])
def test_the_work_timing_names_the_rank_a_collective_hides(tmp_path: Path, timing: str) -> None:
    view = write_job_view(tmp_path, _synchronised_job(1, timing), world_size=2)
    verdicts = view.verdicts
    skew = verdicts["job/step_time_skew"]
    assert isinstance(skew, float) and skew < 1.1  # the wall step time is the same on both
    assert (verdicts["job/straggler_rank"], verdicts["job/straggler_ranks"]) == (1, "1")
    assert verdicts["job/straggler_timing"] == timing
    [line] = [line for line in verdict_lines(verdicts) if line.startswith("straggler:")]
    # 25 ms of work against 10 ms in a 26 ms step (5 % noise): 15 ms, 58 %.
    assert re.match(
        r"straggler: rank 1 costs 1[45]\.[0-9] ms a step \(5[6-9]% of the step\): "
        r"(forward|section 'compute') 2\.[45][0-9]x the others' median since step 1, "
        r"in 100% of steps; step-time skew 1\.0[0-9]$",
        line,
    ), line
    named = "forward" if timing == FORWARD_TIME_TAG else "section 'compute'"
    assert f"): {named} " in line


def test_the_sync_section_is_the_wait_and_names_nobody(tmp_path: Path) -> None:
    """A job marking its collective ``sync``: the fast rank waits longest in it. The work
    names the slow rank; the wait is never judged (it would name the fast one)."""
    series = _synchronised_job(1, f"{SECTION_TAG_PREFIX}compute")
    waits = {}
    for rank, one in series.items():
        work = dict(one.scalars[f"{SECTION_TAG_PREFIX}compute"])
        one.scalars[f"{SECTION_TAG_PREFIX}sync"] = [
            (step, seconds - work[step]) for step, seconds in one.scalars[STEP_TIME_TAG]
        ]
        waits[rank] = np.median([wait for _, wait in one.scalars[f"{SECTION_TAG_PREFIX}sync"]])
    assert waits[0] > 1.5 * waits[1]  # 16 ms against 1 ms
    verdicts = write_job_view(tmp_path, series, world_size=2).verdicts
    assert (verdicts["job/straggler_rank"], verdicts["job/straggler_ranks"]) == (1, "1")
    assert not any(
        value == f"{SECTION_TAG_PREFIX}sync" for key, value in verdicts.items() if "timing" in key
    ), verdicts
    with pytest.raises(ValueError, match=r"timings\['section/sync'\] is the collective's wait"):
        timings_evidence({"section/sync": np.ones((2, 3))})


def _slow_from(step: int, steps: int = STEPS) -> dict[int, RankSeries]:
    """Two ranks, every step time equal; rank 1's compute 2.5x the other's from ``step``."""
    rng = np.random.default_rng(2)
    series = {}
    for rank in (0, 1):
        work = [
            (
                n,
                0.010
                * (2.5 if rank == 1 and n >= step else 1.0)
                * (1 + 0.02 * rng.standard_normal()),
            )
            for n in range(1, steps + 1)
        ]
        series[rank] = RankSeries(
            rank,
            {
                STEP_TIME_TAG: [(n, 0.030) for n in range(1, steps + 1)],
                f"{SECTION_TAG_PREFIX}compute": work,
            },
        )
    return series


def _with_live_onset(folder: Path, since_step: int) -> Path:
    """``folder``, made, with a live state whose one record names rank 1's compute since
    ``since_step`` (what a live view leaves for the end of training)."""
    folder.mkdir()
    tag = f"{SECTION_TAG_PREFIX}compute"
    record = {"kind": "straggler", "tag": tag, "ranks": [1], "since_step": since_step}
    (folder / LIVE_STATE_NAME).write_text(json.dumps({"verdict_records": [record]}))
    os.chmod(folder / LIVE_STATE_NAME, 0o600)
    return folder


def test_a_live_onset_kept_at_the_end_is_the_onset_of_the_cost_too(tmp_path: Path) -> None:
    """The merge of a job the live view named at an earlier onset than the whole run finds
    reports that onset, and the cost over the steps since it: its clean steps count."""
    (tmp_path / "whole").mkdir()
    whole = write_job_view(tmp_path / "whole", _slow_from(60), world_size=2).verdicts
    assert (whole["job/straggler_rank"], whole["job/straggler_since_step"]) == (1, 60)
    watched = _with_live_onset(tmp_path / "watched", 41)
    live = write_job_view(watched, _slow_from(60), world_size=2).verdicts
    assert (live["job/straggler_rank"], live["job/straggler_since_step"]) == (1, 41)
    # Steps 44-120 (blocks of 4, from the first that begins at or after 41): 77 steps, 61
    # of them slow, against 61 of 61.
    cost = float(live["job/straggler_cost_seconds"])
    whole_cost = float(whole["job/straggler_cost_seconds"])
    assert cost == pytest.approx(whole_cost * 61 / 77, rel=0.01), (cost, whole_cost)
    assert live["job/straggler_cost_seconds/1"] == cost
    assert f"costs {cost * 1e3:.1f} ms a step" in str(live["job/straggler_message"])
    assert " since step 41," in str(live["job/straggler_message"])


def test_a_live_onset_within_a_block_costs_what_the_steps_since_it_cost(tmp_path: Path) -> None:
    """Rank 1 is slow from step 501 of 1,500, and the live view named it since step 504.
    The whole run's blocks are 64 steps, and 504 lies in block 448-511, 53 of whose steps
    are before the slowness: counted from that block, the cost was the slowness's diluted
    by them (0.95 of it). It is counted from the first block that begins after the onset:
    what the whole run's own verdict, since step 512, says a step costs."""
    (tmp_path / "whole").mkdir()
    whole = write_job_view(tmp_path / "whole", _slow_from(501, 1500), world_size=2).verdicts
    assert (whole["job/straggler_rank"], whole["job/straggler_since_step"]) == (1, 512)
    watched = _with_live_onset(tmp_path / "watched", 504)
    live = write_job_view(watched, _slow_from(501, 1500), world_size=2).verdicts
    assert (live["job/straggler_rank"], live["job/straggler_since_step"]) == (1, 504)
    cost = float(live["job/straggler_cost_seconds"])
    assert cost == pytest.approx(float(whole["job/straggler_cost_seconds"]), rel=1e-9)
    # About the 15 ms a step that rank 1's 25 ms compute makes the job wait for the 10 ms
    # of rank 0's.
    assert cost == pytest.approx(0.015, rel=0.02)
    assert " since step 504," in str(live["job/straggler_message"])


@pytest.mark.parametrize(
    ("since", "block"),
    [
        (0, 0),  # before the evidence: from its first block
        (6, 0),  # the evidence's first step, within block 4-7: that block, read from there
        (7, 1),  # within the first block: from the next
        (8, 1),  # a block's first step: that block
        (9, 2),
        (12, 2),  # the last block's first step
        (13, 2),  # within the last block, none after it: the last
        (15, 2),
        (16, 3),  # after every block: none
        (40, 3),
    ],
)
def test_a_cost_since_a_step_is_read_from_the_first_block_that_begins_at_or_after_it(
    since: int, block: int
) -> None:
    """Three blocks of 4 steps from block 1 (steps 4-7, 8-11 and 12-15), the evidence's
    first step 6."""
    assert blocks_since(1, 4, 6, 3, np.array([since])).tolist() == [block]
    assert blocks_since(1, 4, 6, 0, np.array([since])).tolist() == [0]  # no blocks: none


def _slow_compute(first: int, last: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1 to ``steps`` and three ranks' compute of 8 ms (2 % noise) at them, rank 1's
    1.25x over steps ``first`` to ``last``."""
    rng = np.random.default_rng(5)
    numbers = np.arange(1, steps + 1)
    compute = 0.008 * (1 + 0.02 * rng.standard_normal((3, steps)))
    compute[1, (numbers >= first) & (numbers <= last)] *= 1.25
    return numbers, compute


def _slow_over(first: int, last: int, steps: int = 1500) -> StragglerEvidence:
    """:func:`_slow_compute`'s evidence of the whole run (blocks of 64 at 1,500)."""
    numbers, compute = _slow_compute(first, last, steps)
    return timings_evidence(
        {"section/compute": compute}, step_time=np.full(steps, 0.010), steps=numbers
    )


def test_the_evidence_says_until_which_step_a_rank_was_slow_to_a_block() -> None:
    tag = f"{SECTION_TAG_PREFIX}compute"
    evidence = _slow_over(101, 500)
    assert evidence.block_size(tag) == 64
    # The block of steps 448-511 holds the last slow step (500): its last step.
    assert evidence.slow_until(tag, 1, 101) == 511
    assert evidence.slow_until(tag, 1, 130) == 511  # from another onset, the same end
    # Slow to the end: the last step; slow in the first block after the onset alone: that
    # block's last step.
    assert _slow_over(101, 1500).slow_until(tag, 1, 101) == 1500
    assert _slow_over(101, 150).slow_until(tag, 1, 101) == 191
    # No excess since the onset, or nothing known of the rank or the timing: None.
    assert evidence.slow_until(tag, 1, 700) is None
    assert evidence.slow_until(tag, 7, 101) is None
    assert evidence.slow_until(FORWARD_TIME_TAG, 1, 101) is None


def test_the_evidence_says_whether_a_ranks_slowness_is_over() -> None:
    """Over: its last slow step before the last step judged, and the steps after it, at
    least ``least`` of them, no slower than the floor on the mean (rank 1 25 % of a 10 ms
    step slower while slow, then as the others)."""
    tag = f"{SECTION_TAG_PREFIX}compute"
    evidence = _slow_over(101, 500)
    assert evidence.slowness_over(tag, 1, 101, 0.02, 8) == 511  # slow_until's step
    # Slow to the end: not over. A block after it, but fewer steps than asked for: not yet.
    assert _slow_over(101, 1500).slowness_over(tag, 1, 101, 0.02, 8) is None
    assert evidence.slowness_over(tag, 1, 101, 0.02, 990) is None
    assert evidence.slowness_over(tag, 1, 101, 0.02, 989) == 511  # steps 512-1500
    # Still slower than the floor after its clearest end (1.05x after 1.25x: 4 % of the
    # step on the mean, above a floor of 2 % and below one of 5 %): not over.
    numbers, compute = _slow_compute(101, 500, 1500)
    compute[1, numbers > 500] *= 1.05
    slower = timings_evidence(
        {"section/compute": compute}, step_time=np.full(1500, 0.010), steps=numbers
    )
    assert slower.slowness_over(tag, 1, 101, 0.02, 8) is None
    assert slower.slowness_over(tag, 1, 101, 0.05, 8) == 511
    # Nothing known of the rank, the timing, or no excess since the onset: None.
    assert evidence.slowness_over(tag, 7, 101, 0.02, 8) is None
    assert evidence.slowness_over(FORWARD_TIME_TAG, 1, 101, 0.02, 8) is None
    assert evidence.slowness_over(tag, 1, 700, 0.02, 8) is None


def test_the_evidence_through_a_step_is_judged_over_those_steps_alone() -> None:
    """Rank 1 2 ms slower (1.25x of 8 ms) over steps 101-500 of 1,500: through the block
    holding step 511, the judgement names it at what it cost while slow; over the whole
    run, its cost since its onset is spread over the clean steps after."""
    tag = f"{SECTION_TAG_PREFIX}compute"
    evidence = _slow_over(101, 500)

    def arrays(of: StragglerEvidence) -> dict[str, np.ndarray]:
        return {key: np.asarray(value) for key, value in of.to_arrays().items()}

    before = arrays(evidence)
    span = evidence.through(511)
    assert arrays(span)["layout"][0].tolist()[:4] == [64, 0, 1, 511]  # blocks of 64 from 0
    assert arrays(span)["blocks"].size == 3 * 8 * FIELDS  # 8 blocks of 3 ranks
    [record] = straggler_records(span)
    assert (record["ranks"], record["since_step"]) == ([1], 128)
    # What the job waited for it a step over the span's blocks since the onset (steps
    # 128-511, 373 of them slow): its lead over the latest of the others.
    numbers, compute = _slow_compute(101, 500, 1500)
    held = (numbers >= 128) & (numbers <= 511)
    lead = np.maximum(compute[1] - np.maximum(compute[0], compute[2]), 0.0)[held].mean()
    assert record["cost_seconds_per_step"] == pytest.approx(lead, rel=0.03)
    whole = [r["cost_seconds_per_step"] for r in straggler_records(evidence) if r["tag"] == tag]
    assert all(cost < 0.5 * record["cost_seconds_per_step"] for cost in whole), whole
    # Another step: the block holding it ends the copy; before the first step, no timing.
    assert span.slow_until(tag, 1, 101) == 511
    assert arrays(evidence.through(100))["layout"][0].tolist()[3] == 100
    assert evidence.through(0).tags == []
    # The evidence itself is unchanged.
    after = arrays(evidence)
    assert all(np.array_equal(before[key], after[key]) for key in before)


def test_a_tiny_data_wait_difference_names_nobody(tmp_path: Path) -> None:
    """Rank 1 waits twice as long for its data, but 10 us of a 26 ms step is noise."""
    series = _synchronised_job(-1, FORWARD_TIME_TAG)
    assert write_job_view(tmp_path, series, world_size=2).verdicts["job/straggler_rank"] == -1


def test_two_stragglers_are_both_in_the_sentences(tmp_path: Path) -> None:
    series = _synchronised_job(1, FORWARD_TIME_TAG, ranks=4)
    series[2].scalars[FORWARD_TIME_TAG] = [
        (step, value * 2.0) for step, value in series[2].scalars[FORWARD_TIME_TAG]
    ]
    verdicts = write_job_view(tmp_path, series, world_size=4).verdicts
    # Rank 2's 2x forward ends before rank 1's 2.5x at every step: the job waits for rank
    # 1 alone and would save nothing without rank 2's slowness today (measured on these
    # series: 0 s a step), so rank 1 alone is named, with what it leads rank 2 by.
    assert verdicts["job/straggler_ranks"] == "1"
    assert verdicts["job/straggler_rank"] == 1  # 2.5x beats 2x
    lines = verdict_lines(verdicts)
    assert any(re.match(r"straggler: rank 1 costs [45]\.[0-9] ms a step", line) for line in lines)


def test_evidence_reduced_elsewhere_decides_the_verdict(tmp_path: Path) -> None:
    """A live view hands over evidence merged from blocks; the series' own is not used."""
    series = _synchronised_job(-1, FORWARD_TIME_TAG)  # balanced: names nobody by itself
    assert write_job_view(tmp_path, series, world_size=2).verdicts["job/straggler_rank"] == -1
    evidence = StragglerEvidence()
    start = 0
    for block in range(3):
        part = StragglerEvidence()
        steps = np.arange(start, start + 40 + block)
        start = int(steps[-1]) + 1
        part.add_timings(
            FORWARD_TIME_TAG, steps, [0, 1], np.tile([[0.01, 0.02]], (len(steps), 1)), 0.03
        )
        evidence.merge(part)
    verdicts = write_job_view(tmp_path, series, world_size=2, straggler_evidence=evidence).verdicts
    assert (verdicts["job/straggler_rank"], verdicts["job/straggler_timing"]) == (
        1,
        FORWARD_TIME_TAG,
    )
    assert verdicts["job/straggler_excess"] == pytest.approx(1.0, abs=0.03)
    assert verdicts["job/straggler_cost_seconds"] == pytest.approx(0.01, rel=0.01)
    assert verdicts["job/straggler_cost_share"] == pytest.approx(1 / 3, rel=0.01)


def _fast_steps(extra_wait: dict[int, float]) -> dict[int, RankSeries]:
    """Sub-millisecond steps (an Allreduce evens them out); ``extra_wait`` per rank."""
    rng = np.random.default_rng(5)
    return {
        rank: RankSeries(
            rank,
            {
                STEP_TIME_TAG: [
                    (step, 0.0004 * (1 + 0.05 * rng.standard_normal()))
                    for step in range(1, STEPS + 1)
                ],
                DATA_WAIT_TAG: [
                    (step, 6e-5 + extra_wait.get(rank, 0.0) + 5e-6 * rng.random())
                    for step in range(1, STEPS + 1)
                ],
            },
        )
        for rank in range(2)
    }


def test_a_callback_on_rank_0_between_short_steps_names_nobody(tmp_path: Path) -> None:
    """+20 us of data wait on rank 0 (its progress callback): under the 100 us floor."""
    verdicts = write_job_view(tmp_path, _fast_steps({0: 2e-5}), world_size=2).verdicts
    assert verdicts["job/straggler_rank"] == -1


def test_a_slow_data_loader_is_named_by_the_data_wait(tmp_path: Path) -> None:
    verdicts = write_job_view(tmp_path, _fast_steps({1: 2e-3}), world_size=2).verdicts
    assert (verdicts["job/straggler_rank"], verdicts["job/straggler_timing"]) == (1, DATA_WAIT_TAG)


_POINTS = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, 1.0, 2.5, -3.0, 7.0, 1e-300])


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=0, max_value=6).flatmap(
        lambda columns: st.lists(st.lists(_POINTS, min_size=columns, max_size=columns), max_size=6)
    )
)
def test_row_medians_equal_numpys_nanmedian(rows: list[list[float]]) -> None:
    table = np.array(rows, dtype=np.float64).reshape(len(rows), -1 if rows else 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns on all-NaN rows
        expected = np.nanmedian(table, axis=1) if table.shape[1] else np.full(len(table), np.nan)
    assert np.array_equal(row_medians(table), expected, equal_nan=True)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=3, max_value=9).flatmap(
        lambda columns: st.lists(
            st.lists(
                st.sampled_from([np.inf, -np.inf, 0.0, 1.0, 2.5, -3.0, 7.0, 1e-300]),
                min_size=columns,
                max_size=columns,
            ),
            min_size=1,
            max_size=6,
        )
    )
)
def test_the_medians_from_the_middle_order_statistics_are_row_medians_bit_for_bit(
    rows: list[list[float]],
) -> None:
    """The step time's medians come from the partition that makes its others' medians:
    the same bits as row_medians (infinities and ties included; of two zeros of either
    sign tied at the middle, a partition keeps either), odd and even rows alike."""
    table = np.array(rows, dtype=np.float64)
    middle = row_middles(table)
    assert middle is not None
    assert middle_medians(middle).tobytes() == row_medians(table).tobytes()
    gap = table.copy()
    gap[0, 0] = np.nan
    assert row_middles(gap) is None  # a row with a gap is sorted, as row_medians does
    assert row_middles(table[:, :2]) is None


@pytest.mark.parametrize("gap", [False, True])
@pytest.mark.parametrize("ranks", [2, 7, 40])
def test_a_float32_table_gives_the_evidence_of_its_float64_values_bit_for_bit(
    ranks: int, gap: bool
) -> None:
    """Timings read from summary files are float32: the live view keeps their tables so
    (half the memory) and the rule widens what it computes with, so every sum is the one
    the float64 table of the same numbers gives (ties, a slow rank with stalls whose
    leads a float32 subtraction would round, a gap, two rounds)."""
    rng = np.random.default_rng(ranks)
    narrow = (0.01 * rng.lognormal(0.0, 0.6, (2, 60, ranks))).astype(np.float32)
    narrow[:, :, 1] *= np.float32(1.4)
    narrow[:, ::7, 1] *= np.float32(13.0)  # stalls: leads no float32 difference holds
    narrow[:, ::3, 0] = narrow[:, ::3, -1]  # ties across ranks
    if gap:
        narrow[1, 5, 1] = np.nan
    evidence = {np.float32: StragglerEvidence(), np.float64: StragglerEvidence()}
    for dtype, held in evidence.items():
        for round_index in range(2):
            table = narrow[round_index].astype(dtype)
            steps = np.arange(1 + 60 * round_index, 61 + 60 * round_index)
            step_time = np.full(60, 0.012)
            held.add_timings(STEP_TIME_TAG, steps, range(ranks), table, step_time)
    wide, kept = evidence[np.float64].to_arrays(), evidence[np.float32].to_arrays()
    assert wide.keys() == kept.keys()
    for key, value in wide.items():
        assert np.asarray(kept[key]).tobytes() == np.asarray(value).tobytes(), key
    assert straggler_verdicts(evidence[np.float32]) == straggler_verdicts(evidence[np.float64])


@pytest.mark.parametrize("gaps", [False, True])
@pytest.mark.parametrize("steps", [40, 20_000])
def test_each_blocks_counts_are_those_of_its_steps(steps: int, gaps: bool) -> None:
    """The counting sums of each (rank, block), counted point by point here: the steps the
    rank was compared at, those whose excess share was above 0 and above each of
    ``EDGES``, and those it was the one slowest rank at (two ranks tied at the top every
    third step: neither). 20,000 steps make blocks of 1,024 (counts no byte holds); gaps
    are points not counted (and the table then takes the sorted path to its medians)."""
    rng = np.random.default_rng(steps)
    ranks, step_seconds = 5, 0.02
    values = 0.01 * rng.lognormal(0.0, 0.4, (steps, ranks))
    values[:, 3] += 0.002
    if gaps:
        values[rng.random(values.shape) < 0.05] = np.nan
    values[::3, 1] = values[::3, 2] = np.nanmax(values[::3], axis=1) + 0.001
    numbers = np.arange(1, steps + 1)
    evidence = StragglerEvidence()
    evidence.add_timings(FORWARD_TIME_TAG, numbers, range(ranks), values, step_seconds)
    shipped = evidence.to_arrays()
    size, first = (int(value) for value in np.asarray(shipped["layout"])[0, :2])
    blocks = np.asarray(shipped["blocks"]).reshape(ranks, -1, FIELDS)
    assert size == (1024 if steps == 20_000 else 2)
    share = np.clip(values - others_medians(values), -step_seconds, step_seconds) / step_seconds
    compared = ~np.isnan(share)
    filled = np.where(compared, values, -np.inf)
    at_top = filled == filled.max(axis=1, keepdims=True)
    slowest = at_top & (at_top.sum(axis=1, keepdims=True) == 1) & compared
    assert not slowest[::3].any() and slowest.sum() > steps // 2
    block_of = numbers // size - first
    for block in range(blocks.shape[1]):
        rows = block_of == block
        np.testing.assert_array_equal(blocks[:, block, COUNT], compared[rows].sum(axis=0))
        np.testing.assert_array_equal(blocks[:, block, SLOWEST], slowest[rows].sum(axis=0))
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(blocks[:, block, ABOVE], (share[rows] > 0).sum(axis=0))
            for offset, edge in enumerate(EDGES):
                np.testing.assert_array_equal(
                    blocks[:, block, ABOVE_EDGES + offset], (share[rows] > edge).sum(axis=0)
                )
    if steps == 20_000 and not gaps:
        assert blocks[:, :, COUNT].max() == 1024  # more than a byte holds


def _shipped(ranks: int, size: int, first_step: int, blocks: np.ndarray) -> StragglerEvidence:
    """Evidence of one tag whose ``(ranks, blocks, FIELDS)`` sums are ``blocks``, the
    first of them ``first_step``'s block of ``size`` steps (what a merge receives)."""
    first = first_step // size
    last_step = (first + blocks.shape[1]) * size - 1
    return StragglerEvidence.from_arrays(
        {
            "tags": [FORWARD_TIME_TAG],
            "layout": np.array([[size, first, first_step, last_step, ranks, 0]]),
            "ranks": np.arange(ranks),
            "blocks": blocks.reshape(-1),
            "lead_ranks": np.empty(0, np.int64),
            "lead_blocks": np.empty(0, np.int64),
            "leads": np.empty(0),
        }
    )


@settings(max_examples=60, deadline=None)
@given(
    ranks=st.sampled_from([1, 3, 300, 700]),
    sizes=st.sampled_from([(1, 1), (1, 2), (2, 2), (3, 4), (4, 3), (5, 8), (8, 5)]),
    first_block=st.integers(0, 40),
    widths=st.tuples(st.integers(1, 32), st.integers(1, 32)),
    later=st.integers(0, 200),
    seed=st.integers(0, 2**16),
)
def test_evidence_coarsened_in_place_holds_the_sums_of_its_blocks(
    ranks: int,
    sizes: tuple[int, int],
    first_block: int,
    widths: tuple[int, int],
    later: int,
    seed: int,
) -> None:
    """A live view merges each interval into the evidence it holds, coarsening its blocks
    in place when the steps outgrow them: every coarser block is then the sum of the
    blocks it covers, added in their order (block sizes that are multiples and ones that
    are not, first blocks that do not begin a coarser one, zeros of either sign, more
    ranks than are coarsened at once). The blocks after them are zeros, into which a
    later interval's sums are added."""
    rng = np.random.default_rng(seed)
    pieces = []
    for size, width in zip(sizes, widths, strict=True):
        sums = rng.standard_normal((ranks, width, FIELDS))
        sums[rng.random(sums.shape) < 0.3] = -0.0
        sums[rng.random(sums.shape) < 0.1] = 0.0
        pieces.append((size, sums))
    (known_size, known), (part_size, part) = pieces
    known_first_step = first_block * known_size
    part_first_step = known_first_step + later
    evidence = _shipped(ranks, known_size, known_first_step, known)
    evidence.merge(_shipped(ranks, part_size, part_first_step, part))
    shipped = evidence.to_arrays()
    size, first = (int(value) for value in np.asarray(shipped["layout"])[0, :2])
    merged = np.asarray(shipped["blocks"]).reshape(ranks, -1, FIELDS)
    expected = np.zeros_like(merged)
    filled = np.zeros(merged.shape[1], dtype=bool)
    for piece_size, piece_first_step, sums in (
        (known_size, known_first_step, known),
        (part_size, part_first_step, part),
    ):
        for column in range(sums.shape[1]):
            start = (piece_first_step // piece_size + column) * piece_size
            index = start // size - first
            if filled[index] or sums is part:
                expected[:, index] += sums[:, column]
            else:  # a coarser block begins as the first of the held blocks it covers
                expected[:, index], filled[index] = sums[:, column], True
    assert merged.shape[1] <= 32
    assert merged.tobytes() == expected.tobytes()  # the sums in their order, bit for bit


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("gaps", [False, True])
def test_a_windows_periodic_sums_made_later_are_those_made_at_once(dtype: Any, gaps: bool) -> None:
    # Made later, for the ranks asked, from each one's group of 1,024 ranks again: each
    # rank's sums since its own onset, bit for bit those made for every rank at once; NaN
    # in since and whole until asked. Three ranks slow every 3rd step from step 40 (a
    # first, a middle and a last group of one rank), the table with gaps or without.
    rng = np.random.default_rng(5)
    ranks, steps = 2049, 90
    forward = 0.006 * rng.lognormal(0.0, 0.2, (ranks, steps))
    slow = np.array([3, 1500, 2048])
    forward[np.ix_(slow, np.arange(40, steps, 3))] *= 1.8
    if gaps:
        forward[rng.random(forward.shape) < 0.01] = np.nan
    step = np.nanmax(forward, axis=0) + 0.002
    table = np.ascontiguousarray(forward.T).astype(dtype)
    arguments = (np.arange(steps), range(ranks), table, step)
    at_once = window_totals(*arguments)
    later = window_totals(*arguments, periodic_later=True)
    periodic = slice(PERIODIC, STEP_SECONDS)
    assert np.isnan(later.since[:, periodic]).all() and np.isnan(later.whole[:, periodic]).all()
    assert (later.onset[slow] > 0).all()  # from each rank's own onset, not the window's start
    for rows in (np.arange(ranks), slow, np.array([2048, 5])):
        assert later.periodic_since(rows).tobytes() == at_once.since[rows, periodic].tobytes()
    made = at_once.periodic_since(slow)  # (made at once: read from since)
    assert made.tobytes() == at_once.since[slow, periodic].tobytes()
