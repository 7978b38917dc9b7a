"""tools/bench/step_cost.py: which steps each figure reads, and its arguments (its real
torch runs: tests/collector_torch/test_step_cost_run.py)."""

from __future__ import annotations

import math
import threading
import time
from types import ModuleType
from typing import Any

import pytest

from tests._support.tool_modules import load_tool


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_tool("bench/step_cost.py", "step_cost_bench")


def _steps(bench: ModuleType, count: int, per_epoch: int) -> Any:
    """The bare copy 1 ms a step; the collected copy 10 % more at a quiet step, twice as
    long at a collected one, 5x at an epoch's last step and 4x at the landscape's steps."""
    bare, collected = [], []
    for step in range(1, count + 1):
        bare.append(0.001)
        if step % per_epoch == 0:
            collected.append(0.005)
        elif step % bench.COLLECT_FREQ == 0:
            collected.append(0.002)
        elif step < 20:
            collected.append(0.004)
        else:
            collected.append(0.0011)
    return bench.Steps(
        {"collected": collected, "bare": bare},
        {"collected": [value / 2 for value in collected], "bare": [value / 2 for value in bare]},
        per_epoch,
    )


def test_the_quiet_step_reads_neither_collected_landscape_nor_epoch_end_steps(
    bench: ModuleType,
) -> None:
    found = bench.figures(_steps(bench, 500, 250), warmup=0)
    assert found["bare_ms"] == pytest.approx(1.0)
    assert found["quiet"] == pytest.approx(10.0)
    assert found["quiet_cpu"] == pytest.approx(10.0)
    # The epochs' last steps (250, 500) are multiples of the collect frequency too.
    assert found["collected"] == pytest.approx(100.0)
    # Every step: 19 landscape steps (step 10 among them is a collected one), 48 collected
    # steps, 2 epoch ends, the rest quiet.
    quiet = 500 - 18 - 48 - 2
    total = 18 * 0.004 + 48 * 0.002 + 2 * 0.005 + quiet * 0.0011
    assert found["mean"] == pytest.approx(100 * (total / 0.5 - 1))
    assert found["mean_cpu"] == pytest.approx(found["mean"])


def test_the_warm_up_is_left_out_of_every_figure(bench: ModuleType) -> None:
    found = bench.figures(_steps(bench, 500, 250), warmup=100)
    # Steps 101-500: 38 collected steps, 2 epoch ends (250, 500), the rest quiet.
    quiet = 400 - 38 - 2
    total = 38 * 0.002 + 2 * 0.005 + quiet * 0.0011
    assert found["mean"] == pytest.approx(100 * (total / 0.4 - 1))
    assert found["quiet"] == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--rows", "mlp-1ms,nope"], "--rows must name rows of mlp-1ms, mlp-10ms, budget"),
        (["--rows", ","], "--rows must name rows of"),
        (["--steps", "55", "--warmup", "50"], "--steps must exceed --warmup by a collect period"),
        (["--reps", "0"], "--reps be >= 1"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    bench: ModuleType, arguments: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        bench.main(arguments)
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err


def test_a_short_run_whose_landscape_steps_outnumber_its_quiet_ones_reads_them_apart(
    bench: ModuleType,
) -> None:
    # 40 steps: 18 landscape steps (1-19 but 10), 4 collected, 18 quiet; a median over
    # the landscape steps too would read (4 + 1.1) / 2 ms.
    found = bench.figures(_steps(bench, 40, 40), warmup=0)
    assert found["quiet"] == pytest.approx(10.0)
    assert found["collected"] == pytest.approx(100.0)  # the median of 2, 2, 2 and 5 ms


def test_the_recorded_cost_is_read_against_the_bare_step_and_the_overhead_measured(
    bench: ModuleType,
) -> None:
    steps = _steps(bench, 500, 250)
    steps.recorded_cost = 0.00005  # 50 us a step, recorded by the collector
    found = bench.figures(steps, warmup=100)
    assert found["own_cost"] == pytest.approx(5.0)  # of the bare copy's 1 ms step
    assert found["own_ratio"] == pytest.approx(5.0 / found["mean"])
    # No cost window closed: nothing recorded, nothing compared.
    unrecorded = bench.figures(_steps(bench, 500, 250), warmup=100)
    assert math.isnan(unrecorded["own_cost"]) and math.isnan(unrecorded["own_ratio"])


def test_the_collectors_threads_cpu_is_read_per_step_against_the_bare_step(
    bench: ModuleType,
) -> None:
    steps = _steps(bench, 500, 250)
    steps.threads_cpu, steps.threads_steps = 0.002, 400  # 5 us a step over 400 steps
    found = bench.figures(steps, warmup=100)
    assert found["threads_us"] == pytest.approx(5.0)
    assert found["threads"] == pytest.approx(0.5)  # of the bare copy's 1 ms step
    # Not read (no thread clock, or the warm-up never ended): not a number, not 0.
    unread = bench.figures(_steps(bench, 500, 250), warmup=100)
    assert math.isnan(unread["threads_us"]) and math.isnan(unread["threads"])


def test_only_the_threads_named_rankscribe_are_counted_from_start_to_stop(
    bench: ModuleType,
) -> None:
    def burn(seconds: float, burnt: threading.Event, until: threading.Event) -> None:
        began = time.thread_time()
        while time.thread_time() - began < seconds:
            pass
        burnt.set()
        until.wait(60)

    done = threading.Event()
    burners = {
        name: (threading.Event(), seconds)
        for name, seconds in (("rankscribe-test-burner", 0.05), ("someone-elses", 0.2))
    }
    threads = [
        threading.Thread(target=burn, args=(seconds, burnt, done), name=name)
        for name, (burnt, seconds) in burners.items()
    ]
    steps = _steps(bench, 500, 250)
    clock = bench.BENCH.ThreadCpu()  # what the bench reads them with (collector.py's)
    try:
        with clock:
            for thread in threads:
                thread.start()
            assert all(burnt.wait(60) for burnt, _ in burners.values())
        bench.threads_into(steps, clock, 100)
    finally:
        done.set()
        for thread in threads:
            if thread.is_alive():
                thread.join()
    # The 0.05 s of the thread named rankscribe-..., started once the clock was entered;
    # not the other thread's 0.2 s, nor this one's.
    assert steps.threads_steps == 100
    assert 0.05 <= steps.threads_cpu < 0.2


def _runs(means: list[float], owns: list[float]) -> list[dict[str, float]]:
    return [{"mean": mean, "own_cost": own} for mean, own in zip(means, owns, strict=True)]


def test_the_runs_together_give_the_overheads_mean_with_its_t_interval(bench: ModuleType) -> None:
    together = bench.pooled(_runs([2.0, 3.0, 4.0, 3.0], [2.5, 2.5, 3.5, 3.5]))
    assert together["runs"] == 4
    assert together["mean"] == pytest.approx(3.0)
    # Standard deviation sqrt(2/3), four runs: t(0.975, 3) = 3.182.
    assert together["half"] == pytest.approx(3.182 * math.sqrt(2 / 3) / 2)
    assert together["own"] == pytest.approx(3.0)
    assert together["ratio"] == pytest.approx(1.0)
    assert together["low"] == pytest.approx(3.0 / (3.0 + together["half"]))
    assert together["high"] == pytest.approx(3.0 / (3.0 - together["half"]))


def test_runs_without_a_recorded_cost_are_left_out_and_one_run_is_no_interval(
    bench: ModuleType,
) -> None:
    runs = _runs([2.0, 9.0, 4.0], [2.0, float("nan"), 4.0])
    together = bench.pooled(runs)
    assert together["runs"] == 2 and together["mean"] == pytest.approx(3.0)
    assert together["half"] == pytest.approx(12.706 * math.sqrt(2) / math.sqrt(2))
    assert bench.pooled(runs[:2]) is None
    assert bench.pooled([]) is None
    # An interval that reaches below 0: the recorded cost is no bound above it.
    wide = bench.pooled(_runs([-1.0, 3.0], [1.0, 1.0]))
    assert wide["low"] == pytest.approx(1.0 / (1.0 + wide["half"]))
    assert wide["high"] == math.inf


@pytest.mark.parametrize(
    ("low", "high", "said"),
    [
        (0.7, 1.4, "yes"),
        (1 / 1.5, 1.5, "yes"),  # the factor itself is within it
        (0.6, 1.4, "not decided"),
        (0.7, 1.6, "not decided"),
        (0.5, math.inf, "not decided"),  # the interval reaches 0: no upper end
        (1.6, 2.0, "no"),
        (0.4, 0.6, "no"),
        (math.inf, math.inf, "no"),  # a cost recorded, none measured
    ],
)
def test_agreement_holds_only_over_the_whole_interval(
    bench: ModuleType, low: float, high: float, said: str
) -> None:
    assert bench.agreement({"low": low, "high": high}) == said


def test_the_report_prints_the_runs_together(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = _steps(bench, 500, 250)
    steps.recorded_cost = 0.00005
    runs = [bench.figures(steps, warmup=100) for _ in range(3)]
    runs[1]["mean"] += 1.0  # runs that differ: an interval of some width
    bench.report(bench.ROWS["budget"], runs)
    printed = capsys.readouterr().out
    together = bench.pooled(runs)
    low, high = together["mean"] - together["half"], together["mean"] + together["half"]
    assert (
        f"over the 3 runs: mean/step {together['mean']:+.2f}% (95 % interval "
        f"{low:+.2f} to {high:+.2f}%), recorded +5.00%: x{together['ratio']:.2f}"
    ) in printed
    assert f"within 1.5x of all of it: {bench.agreement(together)}" in printed
