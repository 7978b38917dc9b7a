#!/usr/bin/env python3
"""How well the straggler rule detects: latency, precision, recall, false alarms, cost error.

    python tools/bench/detection.py [--ranks 64 1024 16384] [--quick] [--floor SHARE]
                                    [--window 100] [--stride 10] [--seed 0]

Simulated per-rank, per-step timings of a synchronous data-parallel job (10 ms
steps) go through the rule's public door, ``rankscribe.lineage.judge_timings``,
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
``--window`` steps every ``--stride`` steps, up to 100 steps after the onset)
and whole at its end (what the end of training judges). Printed per scenario:
trials; latency (steps from the onset to the first live window naming the
rank, median, and in seconds at the simulated median step time: the slowest
arrival sets the step, ~12 ms at 64 ranks, more at scale); recall within 50 steps of the
onset (live) and at the end (whole run); precision (live names after the onset
that are faulty ranks); the cost estimate's error against the injected cost
at the end (median, and the share of trials within 10 %); false alarms per
10^6 rank-steps: every name of a rank without a fault, live or at the end,
over the non-faulty ranks' steps of every run, clean and faulty. Last, the
smallest forward slowdown of one rank found at the end with recall >= 0.97.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankscribe.lineage import VerdictSettings, judge_timings

STEP = 0.010
BASE = {"forward": 0.005, "section/optimizer": 0.001, "data_wait": 0.0005}
JITTER = {"forward": 0.07, "section/optimizer": 0.05, "data_wait": 0.5}
BACKWARD, BACKWARD_JITTER, ALLREDUCE = 0.003, 0.07, 0.001
STATIC_SPREAD, SHARED_JITTER = 0.005, 0.03
SPIKE_RATE, HICCUP_RATE = 2e-6, 2e-6
BUSY_EVERY, BUSY_STEPS, STALL_RATE = 512, (100, 400), 0.2
STALL_MEDIAN, STALL_RANGE = 2.5e-3, (1e-3, 6e-3)
COLLECT_EVERY, CHECKPOINT_EVERY, CHECKPOINT_WAIT = 10, 500, 2.0
ONSET, AFTER, LIVE = 200, 300, 100
#: Each run's steps, every one judged by the live windows, the whole run, or both.
STEPS_JUDGED = ONSET + AFTER
NODE = 8


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
SWEEP = [0.03, 0.04, 0.05, 0.07, 0.10]


def simulate(
    rng: np.random.Generator, ranks: int, steps: int, fault: Fault
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """(timings, step time, faulty ranks, injected seconds of the faulty ranks per step)."""
    numbers = np.arange(steps)
    shared = rng.lognormal(-(SHARED_JITTER**2) / 2, SHARED_JITTER, (1, steps))
    timings: dict[str, np.ndarray] = {}
    for name, base in BASE.items():
        sigma = JITTER[name]
        static = 1.0 + STATIC_SPREAD * rng.standard_normal((ranks, 1))
        values = base * static * shared * rng.lognormal(-(sigma**2) / 2, sigma, (ranks, steps))
        spikes = rng.random((ranks, steps)) < SPIKE_RATE
        values[spikes] *= 1.0 + 3.0 * rng.pareto(1.5, int(spikes.sum()))
        timings[name] = values
    timings["forward"][:, numbers % COLLECT_EVERY == 0] *= 1.05
    _hiccups(rng, timings["data_wait"])
    timings["data_wait"][:, numbers % CHECKPOINT_EVERY == CHECKPOINT_EVERY // 2] += CHECKPOINT_WAIT
    if fault.tiny:  # a busy rank computes a little more: faulty, but not to be named
        return finish(rng, timings, np.zeros(0, np.int64), np.zeros((0, steps)), fault.tiny)
    faulty = rng.choice(ranks, size=0 if fault is CLEAN else fault.ranks, replace=False)
    injected = np.zeros((len(faulty), steps))
    if len(faulty):
        if fault.ranks > 1:  # a node: consecutive ranks
            first = int(rng.integers(0, ranks // fault.ranks)) * fault.ranks
            faulty = np.arange(first, first + fault.ranks)
        before = timings[fault.timing][faulty]
        if fault.timing == "data_wait":  # a slower loader: +slowdown x its base wait
            injected = np.broadcast_to(
                (fault.factor(numbers) - 1.0) * BASE["data_wait"], before.shape
            ).copy()
        else:
            injected = before * (fault.factor(numbers) - 1.0)
        timings[fault.timing][faulty] = before + injected
    return finish(rng, timings, faulty, injected)


def finish(
    rng: np.random.Generator,
    timings: dict[str, np.ndarray],
    faulty: np.ndarray,
    injected: np.ndarray,
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
    return timings, step_time, faulty, injected


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
    clean_rank_steps: int = 0
    true_names: int = 0
    wrong_names: int = 0
    latencies: list[int] = field(default_factory=list)
    found_early: int = 0
    found_end: int = 0
    faulty: int = 0
    cost_errors: list[float] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _names(records: list[dict[str, Any]]) -> set[int]:
    return {rank for record in records for rank in record["ranks"]}


def run_trial(
    rng: np.random.Generator,
    ranks: int,
    fault: Fault,
    tally: Tally,
    window: int,
    stride: int,
    settings: VerdictSettings,
    sliding: bool = True,
) -> None:
    """One simulated run: the live windows up to ``LIVE`` steps after the onset, then the
    whole run judged at once (the end of training)."""
    steps = ONSET + AFTER
    timings, step_time, faulty, injected = simulate(rng, ranks, steps, fault)
    bad = set(faulty.tolist())
    tally.step_times.append(float(np.median(step_time)))
    first_named: dict[int, int] = {}
    # Live windows from 50 steps before the onset (earlier steps: the whole run's judgement).
    first_end = max(window, ONSET - 50)
    ends = list(range(first_end, ONSET + LIVE + 1, stride)) if sliding else []
    for end in ends:
        part = {name: values[:, end - window : end] for name, values in timings.items()}
        named = _names(
            judge_timings(
                part,
                step_time=step_time[end - window : end],
                steps=np.arange(end - window, end),
                settings=settings,
            )
        )
        tally.false_names += len(named - bad)
        if end > ONSET:
            tally.true_names += len(named & bad)
            tally.wrong_names += len(named - bad)
        for rank in named & bad:
            first_named.setdefault(rank, end)
    whole = judge_timings(timings, step_time=step_time, settings=settings)
    tally.false_names += len(_names(whole) - bad)
    tally.trials += 1
    tally.clean_rank_steps += (ranks - len(bad)) * STEPS_JUDGED
    tally.faulty += len(bad)
    for rank in bad:
        if rank in first_named:
            tally.latencies.append(first_named[rank] - ONSET)
            tally.found_early += first_named[rank] - ONSET <= 50
    tally.found_end += len(bad & _names(whole))
    named_last = [record for record in whole if bad & set(record["ranks"])]
    if named_last and fault.every == 1 and not fault.ramp:
        record = named_last[0]
        since = int(record["since_step"])
        # The injected cost: each faulty rank's mean extra time since the onset found;
        # a node's is its costliest rank's (what the record reports for a node).
        truth = float(injected[:, since:].mean(axis=1).max())
        estimate = float(record["cost_seconds_per_step"])
        tally.cost_errors.append(abs(estimate - truth) / truth)


def _row(label: str, ranks: int, tally: Tally) -> str:
    step = float(np.median(tally.step_times)) if tally.step_times else STEP
    latency = (
        f"{np.median(tally.latencies):5.0f} {np.median(tally.latencies) * step:5.2f}s"
        if tally.latencies
        else "    -      -"
    )
    recall_early = tally.found_early / tally.faulty if tally.faulty else math.nan
    recall_end = tally.found_end / tally.faulty if tally.faulty else math.nan
    named = tally.true_names + tally.wrong_names
    precision = tally.true_names / named if named else math.nan
    fa = tally.false_names / tally.clean_rank_steps * 1e6 if tally.clean_rank_steps else 0.0
    errors = (
        f"{np.median(tally.cost_errors):6.1%} {np.mean(np.array(tally.cost_errors) <= 0.1):6.2f}"
        if tally.cost_errors
        else "     -      -"
    )
    return (
        f"{ranks:>6} {label:<28} {tally.trials:>3} {latency} {recall_early:7.3f} "
        f"{recall_end:7.3f} {precision:7.3f} {errors} {fa:8.3f} "
        f"{tally.clean_rank_steps / 1e6:7.1f}M {tally.seconds:6.1f}"
    )


def trials_for(ranks: int, quick: bool) -> int:
    if quick:
        return 2 if ranks <= 64 else 1
    return {64: 40, 1024: 5}.get(ranks, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 1024, 16384])
    parser.add_argument("--quick", action="store_true", help="64 ranks, few trials")
    parser.add_argument("--floor", type=float, default=None, help="cost_floor_share")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--stride", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=None, help="trials per scenario")
    parser.add_argument(
        "--sweep", type=float, nargs="+", default=SWEEP, help="forward slowdowns to sweep"
    )
    parser.add_argument("--sweep-trials", type=int, default=None, help="trials per slowdown")
    parser.add_argument("--sweep-only", action="store_true", help="only the smallest slowdown")
    arguments = parser.parse_args()
    settings = (
        VerdictSettings()
        if arguments.floor is None
        else VerdictSettings(cost_floor_share=arguments.floor)
    )
    ranks_list = [64] if arguments.quick else arguments.ranks
    print(
        f"settings: {settings}; window {arguments.window} steps judged every "
        f"{arguments.stride} steps; steps of ~{STEP * 1e3:.0f} ms; onset at step {ONSET} of "
        f"{ONSET + AFTER}"
    )
    print(
        f"{'ranks':>6} {'scenario':<28} {'n':>3} {'lat':>5} {'lat_s':>6} {'rec50':>7} "
        f"{'rec_end':>7} {'prec':>7} {'cost_e':>6} {'c<=10%':>6} {'FA/1e6':>8} "
        f"{'rk-stp':>8} {'secs':>6}"
    )
    rng = np.random.default_rng(arguments.seed)
    for ranks in ranks_list:
        trials = arguments.trials or trials_for(ranks, arguments.quick)
        clean_total = Tally()
        for fault in [] if arguments.sweep_only else FAULTS:
            tally = Tally()
            started = time.perf_counter()
            for _ in range(trials):
                run_trial(rng, ranks, fault, tally, arguments.window, arguments.stride, settings)
            tally.seconds = time.perf_counter() - started
            clean_total.false_names += tally.false_names
            clean_total.clean_rank_steps += tally.clean_rank_steps
            print(_row(fault.name, ranks, tally), flush=True)
        smallest = _smallest(rng, ranks, trials, arguments, settings)
        fa = clean_total.false_names / max(clean_total.clean_rank_steps, 1) * 1e6
        print(
            f"{ranks:>6} all runs: {clean_total.false_names} false names in "
            f"{clean_total.clean_rank_steps / 1e6:.1f}M non-faulty rank-steps = {fa:.3f} per "
            f"10^6; smallest forward slowdown found with recall >= 0.97: {smallest}",
            flush=True,
        )


def _smallest(
    rng: np.random.Generator,
    ranks: int,
    trials: int,
    arguments: argparse.Namespace,
    settings: VerdictSettings,
) -> str:
    """The smallest forward slowdown of one rank named at the run's end in >= 97 % of trials."""
    sweep_trials = arguments.sweep_trials or max(trials, 34 if ranks <= 1024 else 10)
    found = []
    for slowdown in arguments.sweep:
        tally = Tally()
        for _ in range(sweep_trials):
            run_trial(
                rng,
                ranks,
                Fault(f"sweep {slowdown:.0%}", slowdown),
                tally,
                arguments.window,
                arguments.stride,
                settings,
                sliding=False,  # the whole run alone, judged at its end
            )
        recall = tally.found_end / tally.faulty
        found.append(f"{slowdown:.0%}: {recall:.2f}")
        if recall >= 0.97:
            return f"{slowdown:.0%} ({', '.join(found)}; {sweep_trials} trials each)"
    return f"none of {', '.join(found)} ({sweep_trials} trials each)"


if __name__ == "__main__":
    main()
