#!/usr/bin/env python3
"""What sampling every rank's machine costs: CPU per hour, and a quiet step with and without it.

    python tools/bench/system.py [--samples 1000] [--fast-steps 1000] [--repeat 3]

1. One sample of the process and host (psutil: ``rankscribe/system/*`` without
   the GPU, which this machine lacks), ``--samples`` times on this thread: its
   CPU time (``time.thread_time``) and wall time, and what that makes in CPU
   seconds per hour of training at the default interval (``system_interval``
   10 s) and at 1 s. The sampler's own thread is timed the same way, at a
   100 ms interval for two seconds (its ``thread_cpu`` over its samples).
2. tools/bench/collector.py's quiet-step measurement (1 ms steps that collect
   nothing: the wall time from one step's start to the next, median), run
   alternately with the sampler off (``system_interval=0``), at the default,
   and at 0.1 s (100 times the default's rate, so its cost shows above the
   noise), in the same run. Printed: each median and its difference to off.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rankscribe.collector.system._readings import ProcessReadings
from rankscribe.collector.system._sampler import DEFAULT_SYSTEM_INTERVAL, SystemSampler

HERE = Path(__file__).resolve().parent


def sample_cost(samples: int) -> tuple[float, float]:
    """Median CPU and wall seconds of one process-and-host sample on this thread."""
    readings = ProcessReadings()
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(samples):
        began_cpu, began = time.thread_time(), time.perf_counter()
        readings.read()
        cpu.append(time.thread_time() - began_cpu)
        wall.append(time.perf_counter() - began)
    return statistics.median(cpu), statistics.median(wall)


def thread_cost(seconds: float = 2.0, interval: float = 0.1) -> tuple[float, int]:
    """The sampler thread's CPU seconds per sample, at ``interval``, over ``seconds``."""
    sampler = SystemSampler(interval, nvml_loader=lambda: None)
    sampler.start(lambda: 0)
    time.sleep(seconds)
    sampler.stop()
    return sampler.thread_cpu / max(sampler.samples, 1), sampler.samples


def quiet_steps(steps: int, repeat: int) -> dict[str, float]:
    spec = importlib.util.spec_from_file_location("collector_bench", HERE / "collector.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    settings = {"off": 0.0, f"{DEFAULT_SYSTEM_INTERVAL:g} s": None, "0.1 s": 0.1}
    medians: dict[str, list[float]] = {name: [] for name in settings}
    with tempfile.TemporaryDirectory(prefix="rankscribe-bench-system-") as work:
        for index in range(repeat):
            for name, interval in settings.items():
                vars(bench)["SYSTEM_INTERVAL"] = interval
                starts: list[float] = []
                bench.run_once(
                    1,
                    steps,
                    10,
                    Path(work) / f"{index}-{name.replace(' ', '')}",
                    bench.FAST_STEP_MS,
                    starts,
                )
                quiet = [step for step in range(1, steps) if not bench.collects(step, 10)]
                medians[name].append(
                    statistics.median(starts[step] - starts[step - 1] for step in quiet)
                )
    return {name: min(values) for name, values in medians.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--fast-steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    cpu, wall = sample_cost(arguments.samples)
    per_thread, taken = thread_cost()
    print(
        f"one sample (process and host, psutil): {cpu * 1e6:.0f} us CPU, {wall * 1e6:.0f} us wall"
    )
    for interval in (DEFAULT_SYSTEM_INTERVAL, 1.0):
        print(
            f"  at system_interval={interval:g} s: {cpu * 3600 / interval:.3f} CPU seconds per "
            f"hour of training ({cpu / interval:.5%} of a core)"
        )
    print(f"the sampler's thread: {per_thread * 1e6:.0f} us CPU a sample ({taken} samples)")
    medians = quiet_steps(arguments.fast_steps, arguments.repeat)
    off = medians["off"]
    print("a quiet 1 ms step with the collector (median, best of the repeats):")
    for name, value in medians.items():
        print(
            f"  sampler {name:>5}: {value * 1e6:8.1f} us  ({(value - off) * 1e6:+.1f} us, "
            f"{value / off:.3f}x off)"
        )


if __name__ == "__main__":
    main()
