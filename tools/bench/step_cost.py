#!/usr/bin/env python3
"""What the SummaryCollector costs a training step, read against a bare copy of the same
training in the same process, step by step.

    python tools/bench/step_cost.py [--rows mlp-1ms,mlp-10ms,budget] [--steps 1000]
                                    [--reps 3] [--warmup 50] [--quick]
                                    [--widths W1,W10]
    mpiexec -n 2 python tools/bench/step_cost.py ...     # rank 0 against rank 1

``tools/bench/collector.py`` compares whole runs, bare and collected one after the
other. On a shared VM a run's speed drifts: its bare runs of one row were 13-76 % apart
within minutes, so a cost of a few percent of the step moves with the run it is paired
with. Here two copies of the same model (the same seed, the same batches in the same
order) train in one process: the collected copy in a ``TrainSession`` with
``SummaryCollector(dir, collect_freq=10)``, as the README shows, and the bare copy beside
it, one step of each in turn, the order swapped each step and the swap's phase turned
each collect period (a step right after the other copy's finds the caches that copy left,
and the second of the pair ran ~5 % slower here: every kind of step, the collected ones
among them, has each place half the time; with a plain swap the collected steps, every
tenth, always ran second). A drift of the machine's speed lands on both copies' steps alike.

Per step, each copy's wall time (``time.perf_counter``) and the training thread's CPU
time (``time.thread_time``; torch's own worker threads are not in it) from the step's
start to the end of its work, the collected copy's ``session.step`` included; the data
loading, the same for both, is left out. Printed per row, as +% of the bare copy's:

- quiet step: the median of the steps that collect nothing (not step 1, not a multiple
  of the collect frequency, not a landscape step, not an epoch's last step);
- collected step: the median of the multiples of the collect frequency;
- mean/step: the mean of every step after ``--warmup`` (collected steps included), wall
  and training-thread CPU.

Then the cost the collector recorded for itself against the mean/step overhead, over
the runs together: each run's overhead one measurement, their mean with a 95 % t
interval, the recorded cost's ratio to it and to the interval's ends, and whether it is
within 1.5x of all of the interval (``pooled``, ``agreement``).

Frees: the session keeps the step's batch and loss for its callbacks (as MindSpore's
callback parameters do) until the next ``session.step``, which drops them, freeing the
previous batch inside the collected copy's timed step. A loop frees its previous batch
when its ``for`` takes the next, outside the timed step here. So the bare copy keeps its
last batch and loss the same way and drops them in its next timed step: each copy's timed
step frees the same tensors, as every iteration of a real loop does (the ~1 ms step's quiet
cost with the free on the collected side only, and on both, differed by less than the
runs' spread: +2.8 to +4.2 % against +2.9 to +3.4 %, three alternating runs of each).

Under ``mpiexec`` every rank trains both copies in the same order, and each copy averages
its gradients over the ranks every step, as a data-parallel job does
(``tools/bench/collector.py``'s ``gradient_sync``; the collected copy's inside
``collector.section("sync")``, as docs/job-view.md asks of a loop's own collective): a
copy's step ends when the same copy's step on every rank has reached the average, so the
collected copy's step holds what any rank's collector cost the job that step. The
collectors make one job of their ranks (rank 0 runs the live job view and, at the end,
the merge); the other ranks print nothing, rank 0 prints each rank's figures and rank 0's
against rank 1's (the bound: rank 1's + 1 %).

What it does not measure, by design: the collector's background threads run beside both
copies, so their CPU and their contention land on both; the run's once costs (its first
steps, the end of training, the merge). ``tools/bench/collector.py`` measures those,
with the run-to-run drift. So that what the figures leave out is known, the threads' own
CPU over the steps after the warm-up (each thread of the process whose name starts with
``rankscribe``, read from its own CPU clock by ``tools/bench/collector.py``'s
``ThreadCpu``) is printed beside them, per step and as a
share of the bare copy's mean step: about what a job would pay beyond the mean/step
figure for them, were all of it to delay its training thread (a thread that ended within
those steps is not counted; NaN where a thread's CPU clock cannot be read).

A ``TrainSession`` times a step from one ``session.step`` to the next, which here holds
the bare copy's step and both copies' batches too: the session's clock is started at the
collected copy's own step (``session._previous_step``), less what the collector did
after the last call's clock read (a light step's loss read, which a session's next step
holds), so the collector sees the step time it would alone (the cost budget's share of
the step and its slowdown depend on it). That bookkeeping is the bench's, done just
outside the collected copy's timed step: inside it, it read as the collector's (its
clock reads and attributes, on the caches the step turned over: the collected step
+6.8 % of the bare step against +5.9 % outside, the medians of ten alternated runs of
the ~1 ms row).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rankscribe.collector import SummaryCollector, TrainSession
from rankscribe.ranks.launchers import launcher_rank
from rankscribe.writer.reader import scalars

HERE = Path(__file__).resolve().parent
COLLECT_FREQ = 10
#: The collector's loss tag (a torch loss it records itself).
LOSS_TAG = "loss/auto"
#: The step time the collector records (docs/job-view.md, "Timings").
STEP_TIME_TAG = "rankscribe/step_time"


def _collector_bench() -> Any:
    """tools/bench/collector.py, for its models and settings (one definition of each)."""
    spec = importlib.util.spec_from_file_location("collector_bench", HERE / "collector.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    return bench


BENCH = _collector_bench()


@dataclass(frozen=True)
class Row:
    key: str
    title: str
    #: The MLP's hidden width, or the key of collector.py's ``WIDTHS`` that holds it.
    width: int | str
    batch: int
    #: The bounds the collector aims at, in percent: quiet step, mean/step wall.
    quiet_target: float
    mean_target: float


ROWS = {
    row.key: row
    for row in (
        Row("mlp-1ms", "torch MLP ~1 ms step", "w1", BENCH.MLP_BATCH, 2.0, 2.0),
        Row("mlp-10ms", "torch MLP ~10 ms step", "w10", BENCH.MLP_BATCH, 1.0, 2.0),
        Row(
            "budget",
            "wide MLP, small batches (its histograms shed)",
            BENCH.WIDTH_BUDGET,
            BENCH.BUDGET_BATCH,
            2.0,
            2.0,
        ),
    )
}


@dataclass
class Steps:
    """Per step (1-based, in order): each copy's wall and training-thread CPU seconds."""

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]
    per_epoch: int
    #: The loss points the collected copy's record holds, read back from its files: the
    #: collector really recorded (at step 1 and every ``COLLECT_FREQ``-th).
    recorded: int = 0
    #: The median step time the collector recorded (seconds): its copy's own step, not
    #: the two copies' together.
    recorded_step: float = float("nan")
    #: The median of the same steps as this bench timed the collected copy's (seconds):
    #: what ``recorded_step`` is read against (each from its own clock, over one set of
    #: steps, so a loaded machine's slow steps are in both).
    timed_step: float = float("nan")
    #: What the collector recorded it cost its copy's step's wall clock, seconds per step
    #: over the run (``rankscribe/collector_cost/wall``; NaN: no cost window closed).
    recorded_cost: float = float("nan")
    #: The collector's threads' CPU seconds over the steps after the warm-up, and the
    #: number of those steps (:func:`threads_into`; NaN: not read here).
    threads_cpu: float = float("nan")
    threads_steps: int = 0


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.thread_time()
    work()
    return time.perf_counter() - wall, time.thread_time() - cpu


def threads_into(found: Steps, threads: Any, steps: int) -> None:
    """Into ``found``: the CPU seconds of the threads named ``rankscribe...`` that
    ``threads`` (``tools/bench/collector.py``'s ``ThreadCpu``, exited) saw, over ``steps``
    steps; left NaN where it saw none (no thread's CPU readable here, or ``threads``
    never entered: no step after the warm-up)."""
    seen = {
        name: seconds
        for name, seconds in threads.by_name().items()
        if name.startswith("rankscribe")
    }
    if not seen or steps <= 0:
        return
    found.threads_cpu = sum(seen.values())
    found.threads_steps = steps


def own_directory(directory: Path) -> Path:
    """This rank's summary dir: under a launcher the ranks share ``directory``, each in its
    ``rank_<n>`` dir (docs/job-view.md)."""
    launched = launcher_rank(os.environ)
    return directory / f"rank_{launched.rank}" if launched is not None else directory


def set_widths(rows: list[str], given: dict[str, int] | None, world: Any) -> None:
    """The MLP widths of ``rows``: ``given`` (``--widths``), or found here."""
    if any(isinstance(ROWS[key].width, str) for key in rows):
        BENCH.WIDTHS.update(given or BENCH.find_widths(world))


class SessionStart:
    """Where the collected copy's session starts timing its next step.

    A session times a step from the clock read at the start of its last ``step`` call.
    Here the bare copy's step and both copies' batches come between two such calls: the
    start is moved to the collected copy's own step, less what the collector did in the
    last call after that read (a light step's loss read), so the session times the step
    as it would alone, the collector's work in it included.
    """

    def __init__(self) -> None:
        #: When the last ``session.step`` call returned (None: none yet in this epoch).
        self.returned: float | None = None

    def start(self, session: TrainSession) -> None:
        now = time.perf_counter()
        last = session._previous_step
        if self.returned is not None and last is not None:
            now -= self.returned - last
        session._previous_step = now


def interleaved(row: Row, steps: int, directory: Path, warmup: int) -> Steps:
    """One run: the collected copy and the bare copy, one step of each in turn; the
    collector's threads' CPU over the steps after ``warmup``."""
    per_epoch = BENCH.mlp_steps_per_epoch(steps)
    epochs = BENCH.mlp_epochs(steps)
    copies = {
        name: BENCH.mlp_parts(BENCH.mlp_width(row.width), per_epoch, "cpu", row.batch)
        for name in ("collected", "bare")
    }
    # Under mpiexec: each copy's gradients averaged over the ranks (None alone).
    syncs = {name: BENCH.gradient_sync(copies[name][0]) for name in copies}
    found = Steps({"collected": [], "bare": []}, {"collected": [], "bare": []}, per_epoch)
    collector = SummaryCollector(directory, collect_freq=COLLECT_FREQ)
    sections = {"collected": lambda: collector.section("sync"), "bare": contextlib.nullcontext}

    def train_step(name: str, images: Any, labels: Any) -> Any:
        model, optimizer, loss_fn, _ = copies[name]
        optimizer.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        sync = syncs[name]
        if sync is not None:
            with sections[name]():
                sync()
        optimizer.step()
        return loss

    model, optimizer, loss_fn, loader = copies["collected"]
    BENCH.align_ranks()
    # The bare copy's last batch and loss (see the module's docstring, "Frees").
    held: dict[str, object] = {}
    index = 0
    start = SessionStart()
    # The collector's threads' CPU from the end of the warm-up (entered then) to the last
    # step: `measuring` exits before the session, whose end of training is not counted.
    threads = BENCH.ThreadCpu()
    with (
        TrainSession(
            [collector],
            network=model,
            optimizer=optimizer,
            loss_fn=loss_fn,
            train_dataset=loader,
            epochs=epochs,
        ) as session,
        contextlib.ExitStack() as measuring,
    ):
        for _ in session.epochs():
            start.returned = None  # (the session's clock starts anew at each epoch)
            bare_batches = iter(copies["bare"][3])
            for images, labels in loader:
                bare_images, bare_labels = next(bare_batches)
                if index == warmup:
                    measuring.enter_context(threads)

                def collected_step(images: Any = images, labels: Any = labels) -> None:
                    loss = train_step("collected", images, labels)
                    session.step((images, labels), loss.detach())

                def bare_step(images: Any = bare_images, labels: Any = bare_labels) -> None:
                    loss = train_step("bare", images, labels)
                    # Held to the next step and dropped in it, as the session does.
                    held["bare"] = ((images, labels), loss.detach())

                # Swapped each step, and each collect period starts with the other order
                # than the last: every kind of step (the collected ones among them, all
                # at one phase of the swap otherwise) runs first half the time.
                swapped = (index + index // COLLECT_FREQ) % 2
                order = (bare_step, collected_step) if swapped else (collected_step, bare_step)
                for step in order:
                    # The session's clock moved to the collected copy's own step: this
                    # bench's bookkeeping, outside the step it times.
                    collected = step is collected_step
                    if collected:
                        start.start(session)
                    wall, cpu = _timed(step)
                    if collected:
                        start.returned = time.perf_counter()
                    name = "collected" if collected else "bare"
                    found.wall[name].append(wall)
                    found.cpu[name].append(cpu)
                index += 1
    threads_into(found, threads, index - warmup)
    read_back(found, directory)
    return found


def read_back(found: Steps, directory: Path) -> None:
    """Fill in ``found`` what the collected copy's record (under ``directory``) holds."""
    kept = scalars(own_directory(directory))
    found.recorded = len(kept.get(LOSS_TAG, []))
    step_times = kept.get(STEP_TIME_TAG, [])
    if step_times:
        found.recorded_step = statistics.median(value for _, value in step_times)
        walls = found.wall["collected"]
        found.timed_step = statistics.median(walls[int(step) - 1] for step, _ in step_times)
    cost = BENCH.recorded_cost(directory, BENCH.OWN_WALL_TAG)
    if cost is not None:
        found.recorded_cost = cost


def figures(found: Steps, warmup: int) -> dict[str, float]:
    """A run's +% figures (and the copies' quiet steps, in ms): the quiet step and the
    mean step as ``tools/bench/collector.py`` takes them, and the collected steps' median."""
    wall, cpu = found.wall, found.cpu

    def quiet(values: list[float]) -> float:
        return float(BENCH.quiet_median(values, warmup, found.per_epoch, COLLECT_FREQ))

    def collected(values: list[float]) -> float:
        # Steps COLLECT_FREQ, 2 x COLLECT_FREQ, ... (interval k is step k + 1), from the
        # first whose interval is past the warm-up.
        kept = values[COLLECT_FREQ - 1 :: COLLECT_FREQ][warmup // COLLECT_FREQ :]
        return statistics.median(kept) if kept else float("nan")

    def steady(values: list[float]) -> float:
        return float(BENCH.steady(values, warmup))

    def over_bare(measure: Callable[[list[float]], float], times: dict[str, list[float]]) -> float:
        return float(BENCH.percent(measure(times["collected"]), measure(times["bare"])))

    bare_mean = steady(wall["bare"])
    mean = over_bare(steady, wall)
    own = 100.0 * found.recorded_cost / bare_mean
    per_step = found.threads_cpu / found.threads_steps if found.threads_steps else math.nan
    return {
        "recorded": float(found.recorded),
        # The collector's own recorded cost, as +% of the bare copy's mean step, and its
        # ratio to the mean/step overhead measured here (1: the collector knows its cost).
        "own_cost": own,
        "own_ratio": own / mean if mean > 0 else float("nan"),
        "recorded_step_ms": 1000.0 * found.recorded_step,
        "timed_step_ms": 1000.0 * found.timed_step,
        "bare_ms": 1000.0 * quiet(wall["bare"]),
        "quiet": over_bare(quiet, wall),
        "quiet_cpu": over_bare(quiet, cpu),
        "collected": over_bare(collected, wall),
        "mean": mean,
        "mean_cpu": over_bare(steady, cpu),
        # The collector's threads' CPU a step after the warm-up, in us and as +% of the
        # bare copy's mean step (beside both copies here: in neither's figures).
        "threads_us": 1e6 * per_step,
        "threads": 100.0 * per_step / bare_mean,
    }


#: Student's t at 97.5 % for 1 to 30 degrees of freedom: a 95 % interval of a mean over
#: a few runs (the normal's 1.96 would read it too narrow). More runs take the last, an
#: interval a little wider than theirs.
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
#: The factor within which the collector's recorded cost should meet the overhead measured.
OWN_FACTOR = 1.5


def pooled(runs: list[dict[str, float]]) -> dict[str, float] | None:
    """The recorded cost against the overhead measured, over every run: each run's
    mean/step overhead is one measurement (the machine's state differs more between runs
    than between a run's steps, so the runs, not the steps, are the units), their mean
    with a 95 % t interval, and the runs' recorded costs' mean over it (``ratio``, and
    ``low``/``high``: over the interval's ends; infinite over an overhead of 0 or less).
    None with fewer than 2 runs that recorded a cost."""
    kept = [run for run in runs if not math.isnan(run["own_cost"])]
    if len(kept) < 2:
        return None
    means = [run["mean"] for run in kept]
    mean = statistics.fmean(means)
    half = T_975[min(len(means) - 1, len(T_975)) - 1] * statistics.stdev(means)
    half /= math.sqrt(len(means))
    own = statistics.fmean(run["own_cost"] for run in kept)

    def over(measured: float) -> float:
        return own / measured if measured > 0 else math.inf

    return {
        "runs": float(len(kept)),
        "mean": mean,
        "half": half,
        "own": own,
        "ratio": over(mean),
        "low": over(mean + half),
        "high": over(mean - half),
    }


def agreement(figures: dict[str, float]) -> str:
    """Whether the recorded cost is within :data:`OWN_FACTOR` of every overhead the
    interval holds ("yes"), of none ("no"), or of some: the interval is too wide to say
    ("not decided"; more runs narrow it)."""
    ends = (figures["low"], figures["high"])

    def within(ratio: float) -> bool:
        return 1 / OWN_FACTOR <= ratio <= OWN_FACTOR

    if all(within(end) for end in ends):
        return "yes"
    low, high = ends
    if low > OWN_FACTOR or high < 1 / OWN_FACTOR:
        return "no"
    return "not decided"


def _judged(value: float, target: float) -> str:
    return f"{value:+.2f}% (<={target:g} {'ok' if value <= target else 'MISS'})"


def report(row: Row, runs: list[dict[str, float]]) -> None:
    """The row's medians over the runs, then each run's figures."""

    def middle(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    print(
        f"{row.key:<10}{middle('bare_ms'):>9.3f} ms"
        f"   quiet {_judged(middle('quiet'), row.quiet_target)}"
        f"   collected step {middle('collected'):+.1f}%"
        f"   mean/step {_judged(middle('mean'), row.mean_target)}"
        f"   CPU: quiet {middle('quiet_cpu'):+.2f}%, mean {middle('mean_cpu'):+.2f}%"
    )
    for key, label in (("quiet", "quiet"), ("collected", "collected step"), ("mean", "mean/step")):
        listed = ", ".join(f"{run[key]:+.2f}%" for run in runs)
        print(f"    {label} by run: {listed}")
    recorded = ", ".join(f"{run['recorded']:.0f}" for run in runs)
    print(f"    the collected copy's record, loss points read back by run: {recorded}")
    timed = ", ".join(
        f"{run['recorded_step_ms']:.3f} ms ({run['timed_step_ms']:.3f} ms)" for run in runs
    )
    print(f"    its median step time recorded by run (the same steps timed here): {timed}")
    owned = ", ".join(
        "not recorded"
        if math.isnan(run["own_cost"])
        else f"{run['own_cost']:+.2f}% (no overhead measured)"
        if math.isnan(run["own_ratio"])
        else f"{run['own_cost']:+.2f}% (x{run['own_ratio']:.2f})"
        for run in runs
    )
    print(f"    its own recorded cost (wall) by run, of the bare step (x the mean/step): {owned}")
    threads = ", ".join(f"{run['threads_us']:.1f} us ({run['threads']:+.2f}%)" for run in runs)
    print(
        "    the collector's threads' CPU a step by run (of the bare step; beside both "
        f"copies, in neither's figures): {threads}"
    )
    together = pooled(runs)
    if together is not None:

        def times(ratio: float) -> str:
            return "x inf" if math.isinf(ratio) else f"x{ratio:.2f}"

        print(
            f"    over the {together['runs']:.0f} runs: mean/step {together['mean']:+.2f}% "
            f"(95 % interval {together['mean'] - together['half']:+.2f} to "
            f"{together['mean'] + together['half']:+.2f}%), recorded {together['own']:+.2f}%: "
            f"{times(together['ratio'])} ({times(together['low'])} to "
            f"{times(together['high'])} over the interval); within {OWN_FACTOR:g}x of all "
            f"of it: {agreement(together)}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="mlp-1ms,mlp-10ms", help=f"of {', '.join(ROWS)}")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3, help="interleaved runs per row")
    parser.add_argument("--warmup", type=int, default=50, help="first steps left out")
    parser.add_argument("--quick", action="store_true", help="60 steps, 1 run (tests)")
    parser.add_argument(
        "--widths",
        type=BENCH.parse_widths,
        default=None,
        help="the ~1 ms and ~10 ms MLPs' widths, e.g. 384,1408 (default: found here, as "
        "tools/bench/collector.py finds them)",
    )
    args = parser.parse_args(argv)
    rows = [key.strip() for key in args.rows.split(",") if key.strip()]
    unknown = [key for key in rows if key not in ROWS]
    if unknown or not rows:
        parser.error(f"--rows must name rows of {', '.join(ROWS)}, got {args.rows!r}")
    if args.quick:
        args.steps, args.reps, args.warmup = 60, 1, 20
    if args.steps <= args.warmup + COLLECT_FREQ or args.reps < 1:
        parser.error("--steps must exceed --warmup by a collect period, and --reps be >= 1")
    import torch  # here: the figures' own code (and its tests) need no torch

    torch.set_num_threads(BENCH.torch_threads())
    world = BENCH._mpi_world()
    rank = world.Get_rank() if world is not None else 0
    ranks = f"; {world.Get_size()} ranks, each copy's gradients averaged" if world else ""
    set_widths(rows, args.widths, world)
    if rank == 0:
        print(
            "SummaryCollector cost per step, against a bare copy interleaved in one process "
            f"(the order swapped each step); {args.reps} run(s) of {args.steps} steps, the "
            f"first {args.warmup} left out; torch threads {torch.get_num_threads()}{ranks}; "
            f"the MLPs' widths {BENCH.WIDTHS['w1']} (~1 ms), {BENCH.WIDTHS['w10']} (~10 ms); "
            "the collector's threads run beside both copies (their CPU is printed; "
            "tools/bench/collector.py measures whole runs)",
            flush=True,
        )
    with contextlib.ExitStack() as stack:
        stack.enter_context(BENCH.quiet_frameworks())
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="rankscribe-step-cost-"))
        if world is not None:
            work = BENCH.share_text(world, work)  # rank 0's: the ranks make one job
        figured = {
            key: [
                figures(
                    interleaved(ROWS[key], args.steps, Path(work) / f"{key}-{rep}", args.warmup),
                    args.warmup,
                )
                for rep in range(args.reps)
            ]
            for key in rows
        }
        if world is None:
            for key in rows:
                report(ROWS[key], figured[key])
            return 0
        everyone = [json.loads(text) for text in BENCH.gather_texts(world, json.dumps(figured))]
        BENCH.align_ranks()  # rank 0's directory stays until every rank is done with it
    for index, ranked in enumerate(everyone):
        print(f"rank {index}:")
        for key in rows:
            report(ROWS[key], ranked[key])
    if len(everyone) > 1:
        print("rank 0 against rank 1 (bound: rank 1's number + 1 %):")
        for key in rows:
            cells = []
            for figure, name in (("mean", "mean/step"), ("quiet", "quiet")):
                zero, one = (statistics.median(run[figure] for run in r[key]) for r in everyone[:2])
                cells.append(
                    f"{name} {zero:+.2f}% vs {one:+.2f}% {'ok' if zero <= one + 1 else 'MISS'}"
                )
            print(f"  {key:<10}  " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
