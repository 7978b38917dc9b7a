"""A 2-rank job's merged straggler verdict checked against the timings its ranks recorded.

Used where a job computes for real on a shared machine (the main job, the demo): its two
ranks need not run at one speed there (the same pinned NumPy loop ran 1.0-1.5x apart on
the project's CI machine's two cores, changing from second to second), so whether a rank
is named is the machine's doing; what is checked is that a verdict, when there is one, is
true of the timings the job recorded. Naming nobody on a clean job is asserted where the
ranks' work cannot depend on the core (tests/integration/jobview/test_mpi_verdicts.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rankscribe.jobview import VerdictSettings
from rankscribe.lineage import get_run_lineage
from rankscribe.writer.reader import scalars

STEP_TIME_TAG = "rankscribe/step_time"
ARRIVAL_TAG = "rankscribe/arrival_time"
#: The evidence's blocks of steps per timing and rank, at most (docs/job-view.md).
BLOCKS = 32


def check_the_straggler_verdict(job: Path) -> None:
    """A 2-rank job's straggler verdict (merged lineage) against its ranks' recorded timings.

    None named: its cost reads 0. A rank named: its cost is what the docs define
    (docs/job-view.md, "What a straggler costs"), measured here from the per-step
    scalars each rank wrote: over the steps since the verdict's onset, how long the
    job waited for it beyond the other rank (a 2-rank job: the other rank is the
    next-latest), ``max(0, mine - theirs)`` averaged, less what it would still wait
    for with the rest: the other rank's mean lead over every step, or, where less, the
    named rank's own before its onset (its steps before the evidence block before the
    onset's, when there are ``min_steps`` of them; blocks of the smallest power of two
    that holds the run in 32); its share is that wait over the steps' summed step time
    (a mean of each step's share weighs a 0.5 ms step as much as a 5 ms one, and read
    0.066 where the job lost 0.147 of its time). The wait is that of the ranks'
    arrivals where the job records them (its collective marked ``sync``), whatever
    timing named the rank; else of the named timing's own values. Within 5 % (or 5 us
    and 1 point; local runs matched to every digit): the verdict reads the same timings
    through the job view's evidence. The plain mean excess since the onset is no
    measure of it: it read 89 us where the rule's 64 us was the definition's (the other
    rank's slow first steps were its noise term then).
    """
    lineage = get_run_lineage(str(job))
    assert lineage is not None, job
    verdict = lineage.section("user_defined")
    named = verdict["job/straggler_rank"]
    if named == -1:
        assert verdict["job/straggler_ranks"] == "", verdict
        assert verdict["job/straggler_cost_seconds"] == 0.0, verdict
        return
    tag, since = verdict["job/straggler_timing"], verdict["job/straggler_since_step"]
    ranks = {rank: scalars(job / f"rank_{rank}") for rank in (0, 1)}
    other = 1 - named
    if ARRIVAL_TAG in ranks[named] and ARRIVAL_TAG in ranks[other]:
        tag = ARRIVAL_TAG
    mine, theirs = (dict(ranks[rank][tag]) for rank in (named, other))
    times = [dict(ranks[rank][STEP_TIME_TAG]) for rank in (0, 1)]
    every = sorted(set(mine) & set(theirs))
    steps = [step for step in every if step >= since]
    # The rule names a rank over at least min_steps steps since its onset (a rank that
    # slowed near the end of the run is named over a few).
    assert len(steps) >= VerdictSettings().min_steps, (job, verdict, len(steps))
    excess = np.array([mine[step] - theirs[step] for step in steps])
    noise = float(np.mean([max(0.0, theirs[step] - mine[step]) for step in every]))
    size = 1
    while every[-1] // size - every[0] // size + 1 > BLOCKS:
        size *= 2
    before = [step for step in every if step < since - size]
    if len(before) >= VerdictSettings().min_steps:
        own = float(np.mean([max(0.0, mine[step] - theirs[step]) for step in before]))
        noise = min(noise, own)
    waited = max(float(np.maximum(excess, 0.0).sum()) - noise * len(steps), 0.0)
    step_time = sum(float(np.median([rank[step] for rank in times])) for step in steps)
    seen = (verdict["job/straggler_cost_seconds"], verdict["job/straggler_cost_share"])
    measured = (waited / len(steps), waited / step_time)
    shown = f"{job.name}: verdict {verdict}, measured cost {measured} over {len(steps)} steps"
    if verdict["job/straggler_persistent"] == 1:  # slow in most steps since the onset
        assert np.median(excess) > 0, shown
    assert measured[0] > 0, shown
    assert abs(seen[0] - measured[0]) <= max(0.05 * measured[0], 5e-6), shown
    assert abs(seen[1] - measured[1]) <= max(0.05 * measured[1], 0.01), shown
    # What the job waited for reaches the floor the verdicts alarm at.
    settings = VerdictSettings()
    assert seen[0] >= settings.cost_floor_seconds, shown
    assert seen[1] >= settings.cost_floor_share, shown
