#!/usr/bin/env python3
"""How well the straggler rule detects: latency, precision, recall, false alarms, cost error.

    python tools/bench/detection.py [--ranks 1024 16384] [--seeds 3] [--trials N]
                                    [--jobs 2] [--scenarios TEXT ...] [--floor SHARE]
                                    [--confidence SE] [--window 100] [--stride 10]
                                    [--seed 0] [--quick]

Simulated per-rank, per-step timings of a synchronous data-parallel job (10 ms
steps) go through the rule's public door, ``rankscribe.jobview.judge_timings``,
as a live view would call it: every ``--stride`` steps on the last
``--window`` steps. The noise is meant to be realistic, not easy:

- log-normal jitter per rank and step: forward 5 ms (CV 7 %), a marked section
  ``optimizer`` 1 ms (CV 5 %), data wait 0.5 ms (CV ~50 %), an unmeasured
  backward of 3 ms (CV 7 %) and a 1 ms all-reduce;
- a static spread between ranks (0.5 % of each timing: identical hardware is
  not identical);
- noise every rank shares at a step (clocks, a loaded machine: CV 3 %), the
  collector's collection steps (every 10th step, forward +5 % on every rank)
  and checkpoints (every 500 steps, a 2 s data wait on every rank);
- heavy tails: one-off spikes on random ranks (1 in 500,000 rank-steps of
  each timing, x(1 + 3 Pareto(1.5)): at 16,384 ranks a spike every ~10 steps
  somewhere in the job; ten times that made every step of a 16,384-rank job
  twice as long, which no one runs), and data-loader hiccups (as often, 5-30
  ms more data wait for 1-5 steps);
- descheduling on a busy machine: one rank in 512 (at least one a run)
  shares its core with another process for 100-400 steps, and in that while
  is stalled in a fifth of its steps by 1-6 ms of forward (log-normal,
  median 2.5 ms). A real cost of ~5 % of the step, but in few steps: not the
  material, persistent slowness a verdict is for.

The step time of every rank is the slowest rank's arrival at the all-reduce
plus the all-reduce, less its own data wait: the straggler hides in it.

Faults start mid-run (step 200 of 500): one rank's forward 5/10/20/50 %
slower, a node of 8 ranks 20 % slower, one rank 50 % slower every 4th step
(intermittent), one rank degrading to 30 % slower over 100 steps (gradual),
one rank's data loader 3 ms slower; and one that must *not* be named, a
rank computing 100 us (1 % of the step) more on a busy core (the stalls
above, from the start, always on that rank). Each run is judged live (the last
``--window`` steps every ``--stride`` steps, from 50 steps before the onset to
``LIVE`` steps after it) and whole at its end (what the end of training judges).

Each scenario runs ``--trials`` runs on each of ``--seeds`` independent random
streams (one per seed, scenario and job size, so the figures do not depend on
the order or the ``--jobs`` worker processes that run them). Printed per
scenario, over every run and (after ``/``) the worst seed's: runs; the saving
(what the fault cost the job since the onset, measured as below, as a share of the
median step: the median run's; a fault that saves less than the floor is not a
verdict, however slow its rank); latency
(steps from the onset to the first live window naming the rank, median, in
seconds at the simulated median step time, and the longest); recall within 50
steps of the onset (live) and at the end (whole run); precision (live names
after the onset that are faulty ranks); the cost estimate's error against the
true cost at the end (median, largest, and the share of runs within 10 %):
what the job saves without the fault, measured by running the same random
stream again without it (the step time with the fault less without); false alarms
per 10^6 rank-steps: every name of a rank without a fault, live or at the end,
over the non-faulty ranks' steps of every run, clean and faulty, and (``FA<.5%``)
those of ranks whose own lead saves the job under 0.5 % of the step (the families'
false names, ``_own_saving``: a busy core's rank the job really waits for is not one); and the CPU
seconds the scenario took. Each rank's arrival at the all-reduce is judged too
(``arrival``), as the DDP gradient hook records it. Last, per job size, the
smallest forward slowdown of one rank found at the end with recall >= 0.97
(``--sweep``), and each false name (the first 20): its scenario, seed, run and
window, and what the record said.

``--families`` runs another table (``families_main``): arrivals per rank and step
(data wait, forward and backward; the step is the latest arrival and a 1 ms
collective) under five noise families, GC pauses and Pareto tails (the
"tuning" rows, seeds from 1000) and node-shared noise, slowly wandering speeds
and a skewed data wait (the "held-out" rows, seeds from 0), each with the
faults one rank 5-50 % slower, a stall of 150 ms in 10 % of steps, the forward
doubled every 10th step, a slow node (8 ranks +10 %), a slow quarter (+6 %) and
the forward tripled every 10th step (10 ms of extra work: material periodic work).
Each fault's saving is measured by a re-run of the same draws without it. The
whole run is judged at its end as a job's end of training judges it: a run's
evidence with its rounds of 50 steps added as a live view adds them, whose blocks
are coarser from 16,384 ranks (16 a rank there, 4 from 65,536; a window judged live
keeps 32). Per row: the saving, recall within 50 steps of the faults saving >= 4 % of the step,
recall at the end, the reported cost within 20 % (or 0.1 % of the step) of the
saving, its error, and names of ranks saving < 0.5 % per 10^6 rank-steps (a
record's ranks judged together); then the held-out detection curve of one slow
rank (its saving against how often it is named): by the slowdown injected, and by
each run's measured saving, in bins around the floor (``SAVING_BINS``).
"""

from __future__ import annotations

import argparse
import copy
import itertools
import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankscribe.jobview import StragglerEvidence, VerdictSettings, judge_timings
from rankscribe.jobview.protocol import straggler_records, timing_tag

STEP = 0.010
BASE = {"forward": 0.005, "section/optimizer": 0.001, "data_wait": 0.0005}
JITTER = {"forward": 0.07, "section/optimizer": 0.05, "data_wait": 0.5}
BACKWARD, BACKWARD_JITTER, ALLREDUCE = 0.003, 0.07, 0.001
STATIC_SPREAD, SHARED_JITTER = 0.005, 0.03
SPIKE_RATE, HICCUP_RATE = 2e-6, 2e-6
BUSY_EVERY, BUSY_STEPS, STALL_RATE = 512, (100, 400), 0.2
STALL_MEDIAN, STALL_RANGE = 2.5e-3, (1e-3, 6e-3)
COLLECT_EVERY, CHECKPOINT_EVERY, CHECKPOINT_WAIT = 10, 500, 2.0
ONSET, AFTER, LIVE = 200, 300, 50
#: Each run's steps, every one judged by the live windows, the whole run, or both.
STEPS_JUDGED = ONSET + AFTER
NODE = 8
#: False names listed after the table, each with its run, window and record.
FALSE_NAMES_SHOWN = 20


@dataclass(frozen=True)
class Fault:
    """``factor`` - 1 more time in ``timing`` for ``ranks`` ranks from the onset."""

    name: str
    slowdown: float = 0.0
    ranks: int = 1
    timing: str = "forward"
    every: int = 1
    ramp: int = 0
    #: Seconds more a step from the start, on a busy core: a difference not to be named.
    tiny: float = 0.0

    def factor(self, steps: np.ndarray) -> np.ndarray:
        since = steps - ONSET
        on = since >= 0
        if self.every > 1:
            on &= since % self.every == 0
        scale = np.clip((since + 1) / self.ramp, 0.0, 1.0) if self.ramp else 1.0
        return 1.0 + np.where(on, self.slowdown * scale, 0.0)


CLEAN = Fault("clean")
FAULTS = [
    CLEAN,
    Fault("1 rank forward +5 %", 0.05),
    Fault("1 rank forward +10 %", 0.10),
    Fault("1 rank forward +20 %", 0.20),
    Fault("1 rank forward +50 %", 0.50),
    Fault("node of 8 forward +20 %", 0.20, ranks=NODE),
    Fault("1 rank data wait +3 ms", 6.0, timing="data_wait"),
    Fault("1 rank +50 % every 4th step", 0.50, every=4),
    Fault("1 rank gradual to +30 %", 0.30, ramp=100),
    Fault("1 rank +1 % on a busy core", tiny=1e-4),
]
SWEEP = [0.04, 0.05, 0.07, 0.10]


def simulate(
    rng: np.random.Generator, ranks: int, steps: int, fault: Fault
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """(timings, step time, faulty ranks, the fault's true cost per step: ``(1, steps)``).

    The true cost is measured, not modelled: the same random stream is run again
    without the fault (the same draws, the same stalls), and the cost at a step is the
    step time with the fault less without it: what the job would save had the faulty
    ranks arrived with the rest."""
    numbers = np.arange(steps)
    shared = rng.lognormal(-(SHARED_JITTER**2) / 2, SHARED_JITTER, (1, steps))
    timings: dict[str, np.ndarray] = {}
    jitter: dict[str, np.ndarray] = {}
    for name, base in BASE.items():
        sigma = JITTER[name]
        static = 1.0 + STATIC_SPREAD * rng.standard_normal((ranks, 1))
        expected = base * static * shared
        draws = rng.lognormal(-(sigma**2) / 2, sigma, (ranks, steps))
        values = expected * draws
        jitter[name] = values - expected
        spikes = rng.random((ranks, steps)) < SPIKE_RATE
        values[spikes] *= 1.0 + 3.0 * rng.pareto(1.5, int(spikes.sum()))
        timings[name] = values
    collected = numbers % COLLECT_EVERY == 0
    timings["forward"][:, collected] *= 1.05
    jitter["forward"][:, collected] *= 1.05
    _hiccups(rng, timings["data_wait"])
    timings["data_wait"][:, numbers % CHECKPOINT_EVERY == CHECKPOINT_EVERY // 2] += CHECKPOINT_WAIT
    if fault.tiny:  # a busy rank computes a little more: faulty, but not to be named
        return finish(rng, timings, np.zeros(0, np.int64), np.zeros((0, steps)), fault.tiny)
    faulty = rng.choice(ranks, size=0 if fault == CLEAN else fault.ranks, replace=False)
    if len(faulty) == 0:
        return finish(rng, timings, faulty, np.zeros((0, steps)))
    if fault.ranks > 1:  # a node: consecutive ranks
        first = int(rng.integers(0, ranks // fault.ranks)) * fault.ranks
        faulty = np.arange(first, first + fault.ranks)
    clean = {name: values.copy() for name, values in timings.items()}
    twin = copy.deepcopy(rng)  # the rest of the stream, drawn again for the run without it
    before = timings[fault.timing][faulty]
    if fault.timing == "data_wait":  # a slower loader: +slowdown x its base wait
        timings[fault.timing][faulty] = before + (fault.factor(numbers) - 1.0) * BASE["data_wait"]
    else:
        timings[fault.timing][faulty] = before * fault.factor(numbers)
    timings, step_time, faulty, _ = finish(rng, timings, faulty, np.zeros((0, steps)))
    _, clean_step, _, _ = finish(twin, clean, faulty, np.zeros((0, steps)))
    return timings, step_time, faulty, (step_time - clean_step)[None, :]


def finish(
    rng: np.random.Generator,
    timings: dict[str, np.ndarray],
    faulty: np.ndarray,
    cost: np.ndarray,
    tiny: float = 0.0,
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """The busy cores' stalls (``tiny`` more a step on the first busy rank, from the start),
    and the step time: the slowest arrival at the all-reduce, the all-reduce, less the wait."""
    ranks, steps = timings["forward"].shape
    backward = BACKWARD * rng.lognormal(-(BACKWARD_JITTER**2) / 2, BACKWARD_JITTER, (ranks, steps))
    busy = _stalls(rng, timings["forward"], whole=tiny > 0)
    timings["forward"][busy] += tiny
    arrival = sum(timings.values()) + backward
    step_time = arrival.max(axis=0) + ALLREDUCE - np.median(timings["data_wait"], axis=0)
    # Each rank's arrival at the all-reduce, as the DDP gradient hook records it.
    timings["arrival"] = arrival
    return timings, step_time, faulty, cost


def _stalls(rng: np.random.Generator, forward: np.ndarray, whole: bool) -> np.ndarray:
    """Busy cores: ranks stalled in a share of the steps of a while; the first busy rank.

    With ``whole``, the first busy rank is busy from the start to the end."""
    ranks, steps = forward.shape
    busy = rng.choice(ranks, size=max(1, ranks // BUSY_EVERY), replace=False)
    for index, rank in enumerate(busy):
        length = steps if whole and index == 0 else min(int(rng.integers(*BUSY_STEPS)), steps)
        start = int(rng.integers(0, steps - length + 1))
        stalled = np.flatnonzero(rng.random(length) < STALL_RATE) + start
        stall = rng.lognormal(math.log(STALL_MEDIAN), 0.5, len(stalled))
        forward[rank, stalled] += np.clip(stall, *STALL_RANGE)
    return np.asarray(busy[:1])


def _hiccups(rng: np.random.Generator, wait: np.ndarray) -> None:
    """Data-loader hiccups: 5-30 ms more wait on one rank for 1-5 steps."""
    starts = np.argwhere(rng.random(wait.shape) < HICCUP_RATE)
    for rank, step in starts:
        length = int(rng.integers(1, 6))
        wait[rank, step : step + length] += rng.uniform(0.005, 0.030)


@dataclass
class Tally:
    trials: int = 0
    false_names: int = 0
    #: ... of them, the names of ranks that save the job under 0.5 % of the step (the
    #: families' false names): a busy core's rank the job really waits for is not one.
    cheap_names: int = 0
    clean_rank_steps: int = 0
    true_names: int = 0
    wrong_names: int = 0
    latencies: list[int] = field(default_factory=list)
    found_early: int = 0
    found_end: int = 0
    faulty: int = 0
    cost_errors: list[float] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)
    #: Per run with a fault, what it cost the job since the onset (measured: the same draws
    #: without it), as a share of the median step: what naming it would save.
    savings: list[float] = field(default_factory=list)
    #: Each name of a rank without a fault: where and what (printed after the table).
    false_named: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, other: Tally) -> None:
        for name, value in vars(other).items():
            if isinstance(value, list):
                getattr(self, name).extend(value)
            else:
                setattr(self, name, getattr(self, name) + value)

    def recall_early(self) -> float:
        return self.found_early / self.faulty if self.faulty else math.nan

    def recall_end(self) -> float:
        return self.found_end / self.faulty if self.faulty else math.nan

    def precision(self) -> float:
        named = self.true_names + self.wrong_names
        return self.true_names / named if named else math.nan

    def within(self) -> float:
        errors = np.array(self.cost_errors)
        return float(np.mean(errors <= 0.1)) if len(errors) else math.nan

    def false_alarms(self) -> float:
        return self.false_names / self.clean_rank_steps * 1e6 if self.clean_rank_steps else 0.0

    def cheap_alarms(self) -> float:
        return self.cheap_names / self.clean_rank_steps * 1e6 if self.clean_rank_steps else 0.0


def _names(records: Sequence[Mapping[str, Any]]) -> set[int]:
    return {rank for record in records for rank in record["ranks"]}


def _cheap_names(
    records: Sequence[Mapping[str, Any]], bad: set[int], arrival: np.ndarray, window: slice
) -> int:
    """Names of ranks without a fault that save the job under 0.5 % of the step in
    ``window`` (a record's such ranks judged together, :func:`_own_saving`)."""
    cheap = 0
    for record in records:
        clean_ranks = sorted(set(record["ranks"]) - bad)
        if clean_ranks and _own_saving(arrival, clean_ranks, window) < 0.005:
            cheap += len(clean_ranks)
    return cheap


def _false_named(records: Sequence[Mapping[str, Any]], bad: set[int], where: str) -> list[str]:
    """What the records say of each rank they name without a fault (its costliest record)."""
    said = []
    for rank in sorted(_names(records) - bad):
        record = next(record for record in records if rank in record["ranks"])
        said.append(
            f"{where}: rank {rank} on {record['timing']} (its record: "
            f"{record['cost_share']:.2%} of the step since step {record['since_step']}, "
            f"in {record['share_of_steps']:.0%} of steps"
            f"{'' if record['persistent'] else ', a burst'})"
        )
    return said


def run_trial(
    rng: np.random.Generator,
    ranks: int,
    fault: Fault,
    tally: Tally,
    window: int,
    stride: int,
    settings: VerdictSettings,
    sliding: bool = True,
    label: str = "",
) -> None:
    """One simulated run: the live windows up to ``LIVE`` steps after the onset, then the
    whole run judged at once (the end of training). ``label`` names the run in
    ``tally.false_named``."""
    steps = ONSET + AFTER
    timings, step_time, faulty, cost = simulate(rng, ranks, steps, fault)
    bad = set(faulty.tolist())
    tally.step_times.append(float(np.median(step_time)))
    first_named: dict[int, int] = {}
    # Live windows from 50 steps before the onset (earlier steps: the whole run's judgement).
    first_end = max(window, ONSET - 50)
    ends = list(range(first_end, ONSET + LIVE + 1, stride)) if sliding else []
    for end in ends:
        part = {name: values[:, end - window : end] for name, values in timings.items()}
        records = judge_timings(
            part,
            step_time=step_time[end - window : end],
            steps=np.arange(end - window, end),
            settings=settings,
        )
        named = _names(records)
        tally.false_names += len(named - bad)
        live = slice(end - window, end)
        tally.cheap_names += _cheap_names(records, bad, timings["arrival"], live)
        tally.false_named += _false_named(records, bad, f"{label}, steps {end - window}-{end}")
        if end > ONSET:
            tally.true_names += len(named & bad)
            tally.wrong_names += len(named - bad)
        for rank in named & bad:
            first_named.setdefault(rank, end)
    whole = judge_timings(timings, step_time=step_time, settings=settings)
    tally.false_names += len(_names(whole) - bad)
    tally.cheap_names += _cheap_names(whole, bad, timings["arrival"], slice(0, steps))
    tally.false_named += _false_named(whole, bad, f"{label}, the whole run")
    tally.trials += 1
    tally.clean_rank_steps += (ranks - len(bad)) * STEPS_JUDGED
    tally.faulty += len(bad)
    if bad:
        tally.savings.append(float(cost[:, ONSET:].mean(axis=1).max() / np.median(step_time)))
    for rank in bad:
        if rank in first_named:
            tally.latencies.append(first_named[rank] - ONSET)
            tally.found_early += first_named[rank] - ONSET <= 50
    tally.found_end += len(bad & _names(whole))
    named_last = [record for record in whole if bad & set(record["ranks"])]
    if named_last:
        record = named_last[0]
        since = int(record["since_step"])
        # The true cost since the onset found: the step time it added (a node's as a whole).
        truth = float(cost[:, since:].mean(axis=1).max())
        estimate = float(record["cost_seconds_per_step"])
        tally.cost_errors.append(abs(estimate - truth) / truth)


def _worst(values: list[float], highest: bool = False) -> float:
    known = [value for value in values if not math.isnan(value)]
    if not known:
        return math.nan
    return max(known) if highest else min(known)


def _row(label: str, ranks: int, seeds: list[Tally]) -> str:
    """One scenario over every seed: the pooled figures, and the worst seed's (after /)."""
    tally = Tally()
    for each in seeds:
        tally.add(each)
    step = float(np.median(tally.step_times)) if tally.step_times else STEP
    latency = (
        f"{np.median(tally.latencies):5.0f} {np.median(tally.latencies) * step:5.2f}s "
        f"{max(tally.latencies):4d}"
        if tally.latencies
        else "    -      -    -"
    )
    errors = (
        f"{np.median(tally.cost_errors):6.1%} {np.max(tally.cost_errors):6.1%}"
        if tally.cost_errors
        else "     -      -"
    )

    def pair(total: float, worst: float) -> str:
        return f"{total:5.3f}/{worst:5.3f}"

    saving = f"{np.median(tally.savings):6.2%}" if tally.savings else "     -"
    return (
        f"{ranks:>6} {label:<28} {len(seeds):>2}x{tally.trials // max(len(seeds), 1):<3} "
        f"{saving} {latency} "
        f"{pair(tally.recall_early(), _worst([t.recall_early() for t in seeds]))} "
        f"{pair(tally.recall_end(), _worst([t.recall_end() for t in seeds]))} "
        f"{pair(tally.precision(), _worst([t.precision() for t in seeds]))} {errors} "
        f"{pair(tally.within(), _worst([t.within() for t in seeds]))} "
        f"{tally.false_alarms():6.3f}/{_worst([t.false_alarms() for t in seeds], True):6.3f} "
        f"{tally.cheap_alarms():6.3f}/{_worst([t.cheap_alarms() for t in seeds], True):6.3f} "
        f"{tally.clean_rank_steps / 1e6:6.1f}M {tally.seconds:6.1f}"
    )


def trials_for(ranks: int, quick: bool) -> int:
    """Runs per scenario and seed."""
    if quick:
        return 2 if ranks <= 64 else 1
    return {64: 10, 1024: 2}.get(ranks, 1)


HEADER = (
    f"{'ranks':>6} {'scenario':<28} {'runs':<6} {'saving':>6} {'lat':>5} {'lat_s':>6} {'max':>4} "
    f"{'rec50':>11} {'rec_end':>11} {'prec':>11} {'cost_e':>6} {'c_max':>6} "
    f"{'c<=10%':>11} {'FA/1e6':>13} {'FA<.5%/1e6':>13} {'rk-stp':>7} {'cpu_s':>6}"
)


@dataclass(frozen=True)
class Task:
    """Runs of one scenario on one seed's own stream (so tasks run in any order)."""

    ranks: int
    fault: Fault
    seed: int
    trials: int
    window: int
    stride: int
    settings: VerdictSettings
    sliding: bool = True


def run_task(task: Task) -> Tally:
    started = time.process_time()
    scenario = FAULTS.index(task.fault) if task.fault in FAULTS else len(FAULTS)
    rng = np.random.default_rng(
        [task.seed, task.ranks, scenario, round(task.fault.slowdown * 1000)]
    )
    tally = Tally()
    for trial in range(task.trials):
        run_trial(
            rng,
            task.ranks,
            task.fault,
            tally,
            task.window,
            task.stride,
            task.settings,
            sliding=task.sliding,
            label=f"{task.fault.name}, seed {task.seed} run {trial + 1}",
        )
    tally.seconds = time.process_time() - started
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 16384])
    parser.add_argument("--quick", action="store_true", help="64 ranks, few trials")
    parser.add_argument("--floor", type=float, default=None, help="cost_floor_share")
    parser.add_argument("--confidence", type=float, default=None, help="confidence")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--stride", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=3, help="seeds (independent streams)")
    parser.add_argument("--trials", type=int, default=None, help="runs per scenario and seed")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--scenarios", nargs="+", default=None, help="only the scenarios whose name holds one"
    )
    parser.add_argument(
        "--sweep", type=float, nargs="+", default=SWEEP, help="forward slowdowns to sweep"
    )
    parser.add_argument("--sweep-trials", type=int, default=None, help="runs per slowdown")
    parser.add_argument("--sweep-only", action="store_true", help="only the smallest slowdown")
    parser.add_argument("--no-sweep", action="store_true", help="no smallest slowdown")
    parser.add_argument(
        "--families",
        action="store_true",
        help="the arrival families (tuning and held-out), each cost measured by a re-run",
    )
    arguments = parser.parse_args()
    for name in ("seeds", "jobs"):
        if getattr(arguments, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(arguments, name)}")
    chosen = {
        name: value
        for name, value in (
            ("cost_floor_share", arguments.floor),
            ("confidence", arguments.confidence),
        )
        if value is not None
    }
    settings = VerdictSettings(**chosen)
    if arguments.families:
        families_main(arguments, settings)
        return
    ranks_list = [64] if arguments.quick else arguments.ranks
    seeds = list(range(arguments.seed, arguments.seed + arguments.seeds))
    print(
        f"settings: {settings}; window {arguments.window} steps judged every "
        f"{arguments.stride} steps up to {LIVE} after the onset; steps of ~{STEP * 1e3:.0f} "
        f"ms; onset at step {ONSET} of {ONSET + AFTER}; seeds {seeds[0]}..{seeds[-1]}; "
        f"{arguments.jobs} worker(s); each figure: all seeds / worst seed"
    )
    print(HEADER, flush=True)
    faults = [] if arguments.sweep_only else FAULTS
    if arguments.scenarios:
        faults = [f for f in faults if any(part in f.name for part in arguments.scenarios)]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=arguments.jobs) as pool:
        for ranks in ranks_list:
            trials = arguments.trials or trials_for(ranks, arguments.quick)
            tasks = [
                Task(ranks, fault, seed, trials, arguments.window, arguments.stride, settings)
                for fault in faults
                for seed in seeds
            ]
            results = iter(pool.map(run_task, tasks))
            every_run = [Tally() for _ in seeds]
            for fault in faults:
                tallies = [next(results) for _ in seeds]
                for total, tally in zip(every_run, tallies, strict=True):
                    total.false_names += tally.false_names
                    total.clean_rank_steps += tally.clean_rank_steps
                    total.false_named += tally.false_named
                print(_row(fault.name, ranks, tallies), flush=True)
            pooled = Tally()
            for total in every_run:
                pooled.add(total)
            smallest = (
                "(not swept)"
                if arguments.no_sweep
                else _smallest(pool, seeds, ranks, trials, arguments, settings)
            )
            print(
                f"{ranks:>6} all runs: {pooled.false_names} false names in "
                f"{pooled.clean_rank_steps / 1e6:.1f}M non-faulty rank-steps = "
                f"{pooled.false_alarms():.3f} per 10^6 (worst seed "
                f"{_worst([t.false_alarms() for t in every_run], True):.3f}), "
                f"{pooled.cheap_names} of ranks saving under 0.5 % ({pooled.cheap_alarms():.3f} "
                f"per 10^6); smallest forward "
                f"slowdown found with recall >= 0.97: {smallest}",
                flush=True,
            )
            for said in pooled.false_named[:FALSE_NAMES_SHOWN]:
                print(f"{ranks:>6}   false name: {said}", flush=True)
            if len(pooled.false_named) > FALSE_NAMES_SHOWN:
                print(f"{ranks:>6}   ... and {len(pooled.false_named) - FALSE_NAMES_SHOWN} more")
    print(f"wall {time.perf_counter() - started:.0f} s", flush=True)


def _smallest(
    pool: ProcessPoolExecutor,
    seeds: list[int],
    ranks: int,
    trials: int,
    arguments: argparse.Namespace,
    settings: VerdictSettings,
) -> str:
    """The smallest forward slowdown of one rank named at the run's end in >= 97 % of runs
    (over every seed)."""
    per_seed = arguments.sweep_trials or max(
        trials, math.ceil((34 if ranks <= 1024 else 12) / len(seeds))
    )
    tasks = [
        Task(
            ranks,
            Fault(f"sweep {slowdown:.0%}", slowdown),
            seed,
            per_seed,
            arguments.window,
            arguments.stride,
            settings,
            sliding=False,  # the whole run alone, judged at its end
        )
        for slowdown in arguments.sweep
        for seed in seeds
    ]
    results = iter(pool.map(run_task, tasks))
    found = []
    smallest = None
    for slowdown in arguments.sweep:
        tally = Tally()
        for _ in seeds:
            tally.add(next(results))
        recall = tally.found_end / tally.faulty
        found.append(f"{slowdown:.0%}: {recall:.2f}")
        if recall >= 0.97 and smallest is None:
            smallest = slowdown
    runs = f"{per_seed * len(seeds)} runs each"
    if smallest is None:
        return f"none of {', '.join(found)} ({runs})"
    return f"{smallest:.0%} ({', '.join(found)}; {runs})"


# -- Families: arrivals per rank and step, each scenario's true cost measured ------------------
#
# ``--families`` runs these instead of the scenarios above. Each rank's arrival at the
# collective is its data wait, forward and backward; the step is the latest arrival and the
# collective. A fault's true cost is measured: the same random draws run again without it,
# the saving a step is the step time with the fault less without. The rule sees the
# arrivals, the forwards and the data waits (judge_timings), live windows and the whole run.

FAMILY_STEPS, FAMILY_ONSET, FAMILY_NODE = 400, 150, 8
FAMILY_BASE = {"data_wait": 0.0005, "forward": 0.005, "backward": 0.003}
FAMILY_CV = {"data_wait": 0.3, "forward": 0.05, "backward": 0.05}
COLLECTIVE = 0.001
#: The noise every rank of a run has (none is a fault): which the rule is tuned on, and
#: which it is reported on.
TUNING_NOISE = ("gc pauses", "pareto tails")
HELD_OUT_NOISE = ("node-shared", "wandering speed", "skewed wait")
#: The faults: (name, kind, size). ``rank``: one rank's forward and backward x(1 + size);
#: ``stall``: one rank 150 ms more in 10 % of its steps; ``periodic``: one rank's forward
#: x(1 + size) every 10th step (x3: 10 ms of extra work every 10th step, which saves 6-7 %
#: of the step where the noise leaves it the latest); ``node``: 8 ranks x(1 + size);
#: ``quarter``: a quarter of the ranks x(1 + size).
FAMILY_FAULTS = (
    ("clean", "none", 0.0),
    ("1 rank +5 %", "rank", 0.05),
    ("1 rank +10 %", "rank", 0.10),
    ("1 rank +20 %", "rank", 0.20),
    ("1 rank +50 %", "rank", 0.50),
    ("stall 150 ms in 10 %", "stall", 0.150),
    ("forward x2 every 10th", "periodic", 1.0),
    ("slow node +10 %", "node", 0.10),
    ("slow quarter +6 %", "quarter", 0.06),
    ("forward x3 every 10th", "periodic", 2.0),
)
CURVE_SIZES = (0.10, 0.15, 0.20, 0.25, 0.30, 0.40)


def _family_noise(rng: np.random.Generator, noise: str, ranks: int) -> dict[str, np.ndarray]:
    """The timings of a run without a fault: log-normal jitter and the family's noise."""
    steps = FAMILY_STEPS
    parts = {
        name: base * rng.lognormal(-(FAMILY_CV[name] ** 2) / 2, FAMILY_CV[name], (ranks, steps))
        for name, base in FAMILY_BASE.items()
    }
    if noise == "gc pauses":  # 2 % of rank-steps pause 2-8 ms
        pauses = rng.random((ranks, steps)) < 0.02
        parts["forward"] += np.where(pauses, rng.uniform(0.002, 0.008, (ranks, steps)), 0.0)
    elif noise == "pareto tails":
        parts["forward"] *= 1.0 + 0.02 * rng.pareto(2.5, (ranks, steps))
    elif noise == "node-shared":  # every rank of a node slowed together, CV 4 %
        shared = rng.lognormal(-(0.04**2) / 2, 0.04, (-(-ranks // FAMILY_NODE), steps))
        scale = np.repeat(shared, FAMILY_NODE, axis=0)[:ranks]
        parts["forward"] *= scale
        parts["backward"] *= scale
    elif noise == "wandering speed":  # each rank's speed drifts slowly (sd 3 %, ~200 steps)
        drift = np.zeros((ranks, steps))
        kicks = rng.normal(0.0, 0.03 * math.sqrt(1 - 0.995**2), (ranks, steps))
        drift[:, 0] = rng.normal(0.0, 0.03, ranks)
        for step in range(1, steps):
            drift[:, step] = 0.995 * drift[:, step - 1] + kicks[:, step]
        parts["forward"] *= 1.0 + drift
        parts["backward"] *= 1.0 + drift
    elif noise == "skewed wait":  # a data wait of CV 100 %
        parts["data_wait"] = rng.exponential(0.001, (ranks, steps))
    return parts


def _family_fault(
    rng: np.random.Generator, parts: dict[str, np.ndarray], kind: str, size: float
) -> np.ndarray:
    """Apply the fault in place from the onset; return the faulty ranks."""
    ranks, steps = parts["forward"].shape
    on = np.arange(steps) >= FAMILY_ONSET
    if kind == "none":
        return np.zeros(0, np.int64)
    if kind in ("node", "quarter"):
        count = FAMILY_NODE if kind == "node" else ranks // 4
        first = int(rng.integers(0, ranks // count)) * count
        faulty = np.arange(first, first + count)
    else:
        faulty = rng.choice(ranks, size=1, replace=False)
    if kind == "stall":
        stalled = on & (rng.random(steps) < 0.10)
        parts["forward"][faulty[:, None], np.flatnonzero(stalled)[None, :]] += size
    elif kind == "periodic":
        every = on & (np.arange(steps) % 10 == 0)
        parts["forward"][faulty[:, None], np.flatnonzero(every)[None, :]] *= 1.0 + size
    else:
        for name in ("forward", "backward"):
            parts[name][faulty[:, None], np.flatnonzero(on)[None, :]] *= 1.0 + size
    return faulty


def family_run(
    seed: int, ranks: int, noise: str, kind: str, size: float
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """(timings judged, step time with the fault, without it, faulty ranks) of one run."""
    streams = np.random.SeedSequence([seed, ranks, sum(map(ord, noise))]).spawn(2)
    parts = _family_noise(np.random.default_rng(streams[0]), noise, ranks)
    clean = {name: values.copy() for name, values in parts.items()}
    faulty = _family_fault(np.random.default_rng(streams[1]), parts, kind, size)

    def step_of(timings: dict[str, np.ndarray]) -> np.ndarray:
        latest: np.ndarray = np.asarray(sum(timings.values()), dtype=np.float64).max(axis=0)
        return latest + COLLECTIVE

    arrival = np.asarray(sum(parts.values()), dtype=np.float64)
    judged = {"arrival": arrival, "forward": parts["forward"], "data_wait": parts["data_wait"]}
    return judged, step_of(parts), step_of(clean), faulty


@dataclass
class FamilyTally:
    runs: int = 0
    faults: int = 0
    material: int = 0  # faults whose saving is >= 4 % of the step
    found_early: int = 0  # ... of them named within 50 steps of the onset
    found_end: int = 0
    costed: int = 0  # faults named at the end whose cost was checked
    within: int = 0  # ... within the bound
    errors: list[float] = field(default_factory=list)
    savings: list[float] = field(default_factory=list)
    #: Per fault: (its saving, named live within 50 steps of the onset, named at the end).
    outcomes: list[tuple[float, bool, bool]] = field(default_factory=list)
    false_names: int = 0
    clean_rank_steps: int = 0
    seconds: float = 0.0

    def add(self, other: FamilyTally) -> None:
        for name, value in vars(other).items():
            if isinstance(value, list):
                getattr(self, name).extend(value)
            else:
                setattr(self, name, getattr(self, name) + value)


def _own_saving(arrival: np.ndarray, ranks: list[int], window: slice) -> float:
    """What the job would save a step in ``window`` had ``ranks`` (a record's ranks without
    a fault, as a group) arrived as the rest's latest: the share of the step they lead by."""
    part = arrival[:, window]
    rest = np.delete(part, ranks, axis=0).max(axis=0)
    return float((part.max(axis=0) - rest).mean() / (part.max(axis=0) + COLLECTIVE).mean())


#: Steps a live view adds to a run's evidence at a time (one round of the job view).
FAMILY_ROUND = 50


def _run_records(
    timings: Mapping[str, np.ndarray], step: np.ndarray, settings: VerdictSettings
) -> list[Any]:
    """The whole run judged as the end of training judges it: a run's evidence, its
    rounds added as a live view adds them (its blocks those a run keeps at its ranks:
    32 a rank up to 8,192 ranks, 16 at 16,384), not one window of 32 blocks."""
    evidence = StragglerEvidence()
    ranks = range(next(iter(timings.values())).shape[0])
    for start in range(0, FAMILY_STEPS, FAMILY_ROUND):
        rows = slice(start, min(start + FAMILY_ROUND, FAMILY_STEPS))
        for name, values in timings.items():
            evidence.add_timings(
                timing_tag(name),
                np.arange(FAMILY_STEPS)[rows],
                ranks,
                values[:, rows].T,
                step[rows],
            )
    return straggler_records(evidence, settings)


def family_trial(
    seed: int, ranks: int, noise: str, kind: str, size: float, settings: VerdictSettings
) -> FamilyTally:
    """One run: live windows of 100 steps every 10 from 50 before the onset to 50 after,
    and the whole run at its end (a run's evidence: :func:`_run_records`)."""
    started = time.process_time()
    timings, step, clean, faulty = family_run(seed, ranks, noise, kind, size)
    bad = set(faulty.tolist())
    tally = FamilyTally(runs=1, faults=int(len(bad) > 0))
    saving_share = float((step - clean)[FAMILY_ONSET:].mean() / step[FAMILY_ONSET:].mean())
    first_named = None
    windows = [slice(end - 100, end) for end in range(FAMILY_ONSET - 50, FAMILY_ONSET + 51, 10)]
    for window in [*windows, slice(0, FAMILY_STEPS)]:
        part = {name: values[:, window] for name, values in timings.items()}
        if window.stop - window.start == FAMILY_STEPS:
            records = _run_records(part, step, settings)
        else:
            records = judge_timings(
                part,
                step_time=step[window],
                steps=np.arange(FAMILY_STEPS)[window],
                settings=settings,
            )
        named = _names(records)
        # False names: ranks (a record's, together) saving < 0.5 %.
        tally.false_names += _cheap_names(records, bad, timings["arrival"], window)
        if named & bad and first_named is None and window.stop <= FAMILY_STEPS - 1:
            first_named = window.stop
    tally.clean_rank_steps = (ranks - len(bad)) * FAMILY_STEPS
    if bad:
        tally.savings.append(saving_share)
        material = saving_share >= 0.04
        tally.material += material
        tally.found_early += material and first_named is not None
        tally.found_early -= material and (first_named or 0) > FAMILY_ONSET + 50
        whole = [record for record in records if bad & set(record["ranks"])]
        tally.found_end += bool(whole)
        early = first_named is not None and first_named <= FAMILY_ONSET + 50
        tally.outcomes.append((saving_share, early, bool(whole)))
        if whole:
            record = max(whole, key=lambda item: float(item["cost_seconds_per_step"]))
            since = int(record["since_step"])
            truth = float((step - clean)[since:].mean())
            estimate = float(record["cost_seconds_per_step"])
            bound = max(0.2 * truth, 0.001 * float(step[since:].mean()))
            tally.costed += 1
            tally.within += abs(estimate - truth) <= bound
            tally.errors.append((estimate - truth) / truth if truth > 0 else math.inf)
    tally.seconds = time.process_time() - started
    return tally


def _family_task(task: tuple[int, int, str, str, float, VerdictSettings]) -> FamilyTally:
    return family_trial(*task)


#: The savings (shares of the step) that bound the detection curve's bins: the default
#: floor (2 %) and twice it (4 %, the recall target's) among them.
SAVING_BINS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.04, 0.06, 0.10)


def _by_saving(outcomes: Sequence[tuple[float, bool, bool]]) -> str:
    """The detection curve binned by each run's measured saving, not by the slowdown
    injected (a slowdown saves different shares under different noise: a forward 50 %
    slower beside a skewed data wait saves under 1 %, beside the others 14-20 %): per bin,
    named live within 50 steps of the onset and named at the end, of its runs."""
    parts = []
    edges = [*SAVING_BINS, math.inf]
    for low, high in itertools.pairwise(edges):
        inside = [item for item in outcomes if low <= item[0] < high]
        if not inside:
            continue
        label = f">= {low:.1%}" if high == math.inf else f"{low:.1%}-{high:.1%}"
        early = sum(item[1] for item in inside)
        end = sum(item[2] for item in inside)
        parts.append(f"{label}: {early}/{len(inside)} within 50, {end}/{len(inside)} at the end")
    return "; ".join(parts)


def _family_row(split: str, noise: str, fault: str, ranks: int, tally: FamilyTally) -> str:
    saving = f"{np.median(tally.savings):6.2%}" if tally.savings else "     -"
    errors = (
        f"{np.median(tally.errors):+7.1%} {max(tally.errors, key=abs):+7.1%}"
        if tally.errors
        else "      -       -"
    )

    def ratio(count: int, total: int) -> str:
        return f"{count:>3}/{total:<3}" if total else "    -  "

    rate = tally.false_names / tally.clean_rank_steps * 1e6 if tally.clean_rank_steps else 0.0
    return (
        f"{split:<8} {ranks:>6} {noise:<16} {fault:<22} {tally.runs:>4} {saving} "
        f"{ratio(tally.found_early, tally.material)} {ratio(tally.found_end, tally.faults)} "
        f"{ratio(tally.within, tally.costed)} {errors} {rate:7.3f} {tally.seconds:6.1f}"
    )


def families_main(arguments: argparse.Namespace, settings: VerdictSettings) -> None:
    """The families' table: tuning rows, then held-out rows, then the detection curve."""
    ranks_list = [64] if arguments.quick else arguments.ranks
    seeds = 1 if arguments.quick else arguments.seeds
    splits = [
        ("tuning", TUNING_NOISE, [arguments.seed + 1000 + index for index in range(seeds)]),
        ("held-out", HELD_OUT_NOISE, [arguments.seed + index for index in range(seeds)]),
    ]
    print(
        f"families: {FAMILY_STEPS} steps, onset {FAMILY_ONSET}; settings {settings}; "
        f"tuning noise {', '.join(TUNING_NOISE)} (seeds from {arguments.seed + 1000}); "
        f"held-out noise {', '.join(HELD_OUT_NOISE)} (seeds from {arguments.seed}); "
        f"saving: the measured one (the same draws re-run without the fault), as a share "
        f"of the step; rec50: named live within 50 steps, of faults saving >= 4 %; cost ok: "
        f"within 20 % or 0.1 % of the step; err: (reported - measured) / measured, median "
        f"and worst; FA/1e6: names of ranks saving < 0.5 % per 10^6 rank-steps"
    )
    print(
        f"{'split':<8} {'ranks':>6} {'noise':<16} {'fault':<22} {'runs':>4} {'saving':>6} "
        f"{'rec50':>7} {'rec_end':>7} {'cost_ok':>7} {'err':>7} {'err_max':>7} "
        f"{'FA/1e6':>7} {'cpu_s':>6}",
        flush=True,
    )
    faults = FAMILY_FAULTS[:3] + FAMILY_FAULTS[5:] if arguments.quick else FAMILY_FAULTS
    with ProcessPoolExecutor(max_workers=arguments.jobs) as pool:
        for ranks in ranks_list:
            for split, noises, split_seeds in splits:
                tasks = [
                    (seed, ranks, noise, kind, size, settings)
                    for noise in noises
                    for _, kind, size in faults
                    for seed in split_seeds
                ]
                results = iter(pool.map(_family_task, tasks))
                for noise in noises:
                    for name, _, _ in faults:
                        tally = FamilyTally()
                        for _ in split_seeds:
                            tally.add(next(results))
                        print(_family_row(split, noise, name, ranks, tally), flush=True)
            curve = [
                (seed, ranks, noise, "rank", size, settings)
                for size in CURVE_SIZES
                for noise in HELD_OUT_NOISE
                for seed in splits[1][2]
            ]
            results = iter(pool.map(_family_task, curve))
            points = []
            every = FamilyTally()
            for size in CURVE_SIZES:
                tally = FamilyTally()
                for _ in range(len(HELD_OUT_NOISE) * len(splits[1][2])):
                    tally.add(next(results))
                every.add(tally)
                points.append(
                    f"+{size:.0%}: saving {np.median(tally.savings):.2%}, named "
                    f"{tally.found_end}/{tally.faults}"
                )
            print(f"held-out {ranks:>6} detection curve (1 rank): {'; '.join(points)}")
            print(f"held-out {ranks:>6} by saving: {_by_saving(every.outcomes)}", flush=True)


if __name__ == "__main__":
    main()
