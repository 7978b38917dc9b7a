#!/usr/bin/env python3
"""The live job view in a real ``mpiexec -n 32`` job: it completes, and equals the offline merge.

    python tools/bench/live.py [--ranks 32] [--steps 600] [--step-ms 20] [--interval 1]
                               [--timeout 900] [--keep DIR]

Not part of tox (32 processes on a 2-core machine take a minute or more).
The launcher side (this script) starts ``mpiexec -n RANKS python -m mpi4py
tools/bench/live.py --rank-job JOB ...``; each rank trains a tiny NumPy model
with TrainLoop and SummaryCollector (``job_view_interval=INTERVAL``, every
step collected, a script tag of its own with a rank-dependent value), each
step sleeping STEP_MS. While the job runs the launcher reads the job's live
summary file every second (how many steps it holds). After the job ends, it
copies the ``rank_<n>`` dirs elsewhere, runs the offline merge
(``rankscribe.lineage.merge_run_dir``) on the copy and compares every job tag
of the live file with the offline one, step by step. Printed: the job's
wall time and CPU time (all ranks together: a rank that busy-polled would
show as a core kept busy), when the first live interval appeared, how the live file grew,
the live state (intervals, late points), the offline merge's time and the
largest difference of the statistics (target: the same steps, and values
equal to float32 rounding: rel <= 1e-5).

When the live view dropped points (a rank that looked stalled on the loaded
machine: docs/job-view.md, "Live"), the end of training rewrote the job
files from the rank dirs, so the comparison would be of that rewrite: the
script says so, and fails.

MPICH (the ``mpich`` wheel, ch4) with more ranks than cores: its blocking
calls busy-poll, but the job view never makes one on its thread (the tree
polls ``Test`` with sleeps), and the lineage gather at the end polls too,
so no MPICH setting is needed; ``--env NAME=VALUE`` passes extra settings
to the ranks to compare (e.g. ``MPIR_CVAR_CH4_NUM_VCIS=1``).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rankscribe.collector import ArrayDataset, ArrayNetwork, ArrayOptimizer
from rankscribe.collector._collector import SummaryCollector
from rankscribe.collector.loop._loop import TrainLoop
from rankscribe.jobview.job._live import read_live_state
from rankscribe.lineage import merge_run_dir
from rankscribe.ranks import detect
from rankscribe.writer.reader import scalars

SCRIPT_TAG = "bench/rank_value"


# --------------------------------------------------------------------- one rank of the job


def rank_job(job: Path, steps: int, step_ms: float, interval: float) -> None:

    info = detect()
    rng = np.random.default_rng(info.rank)
    network = ArrayNetwork(
        {"fc.weight": rng.normal(size=(4, 3)).astype(np.float32)}, name="TinyNet"
    )
    optimizer = ArrayOptimizer(network, learning_rate=0.05, name="SGD")
    data = ArrayDataset(
        rng.random((steps, 1, 4, 4)).astype(np.float32), rng.integers(0, 3, steps), batch_size=1
    )
    collector = SummaryCollector(
        job,
        collect_freq=1,
        merge_timeout=120.0,
        collect_specified_data={"collect_landscape": None},
        job_view_interval=interval,
    )
    done = [0]

    def step(batch: Any) -> np.float32:
        done[0] += 1
        network["fc.weight"][:] *= np.float32(0.999)
        record = collector.record
        assert record is not None
        record.add_value("scalar", SCRIPT_TAG, math.sin(done[0] / 50) + info.rank / 10)
        time.sleep(step_ms / 1000)
        return np.float32(1.0 + info.rank / 100 + 1 / done[0])

    started = time.monotonic()
    TrainLoop(step, network=network, optimizer=optimizer).train(1, data, callbacks=[collector])
    collector.close()
    if info.rank == 0:
        print(f"rank 0: trained and merged in {time.monotonic() - started:.1f} s", flush=True)


# --------------------------------------------------------------------- the launcher


def job_points(job: Path) -> dict[str, dict[int, float]]:

    found: dict[str, dict[int, float]] = {}
    for path in sorted(job.glob("*.job.*_MS")):
        for tag, points in scalars(path).items():
            found.setdefault(tag, {}).update(points)
    return found


def written_steps(job: Path) -> int:
    try:
        return len(job_points(job).get(f"{SCRIPT_TAG}/ranks", {}))
    except (OSError, ValueError):
        return 0


def compare(live: dict[str, dict[int, float]], offline: dict[str, dict[int, float]]) -> list[str]:
    """What differs between the two (empty: equal); prints the largest difference."""
    problems: list[str] = []
    compared = 0
    worst = (0.0, "", -1)
    # The offline view has no live-only tags (job/ranks_in_interval, the verdicts so far).
    tags = sorted(tag for tag in offline if not tag.startswith("job/"))
    for tag in tags:
        if tag not in live:
            problems.append(f"{tag}: not in the live file")
            continue
        if set(live[tag]) != set(offline[tag]):
            only = sorted(set(offline[tag]) ^ set(live[tag]))
            problems.append(f"{tag}: the steps differ ({len(only)} steps, first {only[:5]})")
        for step, value in offline[tag].items():
            if step not in live[tag]:
                continue
            compared += 1
            mine = live[tag][step]
            if math.isnan(value) and math.isnan(mine):
                continue
            scale = max(abs(value), 1e-12)
            difference = abs(mine - value) / scale
            if difference > worst[0]:
                worst = (difference, tag, step)
            if not math.isclose(mine, value, rel_tol=1e-5, abs_tol=1e-9):
                problems.append(f"{tag} at step {step}: live {mine!r}, offline {value!r}")
    print(
        f"compared {compared} points of {len(tags)} tags; largest relative difference "
        f"{worst[0]:.2e}" + (f" ({worst[1]} at step {worst[2]})" if worst[1] else "")
    )
    return problems


def launch(arguments: argparse.Namespace, job: Path) -> tuple[int, float, str]:
    command = [
        arguments.mpiexec,
        "-n",
        str(arguments.ranks),
        sys.executable,
        "-m",
        "mpi4py",
        os.path.abspath(__file__),
        "--rank-job",
        str(job),
        "--steps",
        str(arguments.steps),
        "--step-ms",
        str(arguments.step_ms),
        "--interval",
        str(arguments.interval),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for setting in arguments.env:
        name, _, value = setting.partition("=")
        env[name] = value
    log = job.parent / "job.log"
    started = time.monotonic()
    with open(log, "w") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        first: float | None = None
        growth: list[tuple[float, int]] = []
        try:
            while process.poll() is None:
                elapsed = time.monotonic() - started
                if elapsed > arguments.timeout:
                    raise subprocess.TimeoutExpired(command, arguments.timeout)
                steps = written_steps(job)
                if steps and first is None:
                    first = elapsed
                if not growth or steps != growth[-1][1]:
                    growth.append((elapsed, steps))
                time.sleep(1.0)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            print(Path(log).read_text()[-4000:])
            sys.exit(f"the job hung past {arguments.timeout} s (killed)")
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    wall = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    # No rank busy-polls: the job's CPU stays far below cores x wall time.
    cpu = usage.ru_utime + usage.ru_stime
    print(
        f"CPU of the whole job (every rank and mpiexec): {usage.ru_utime:.1f} s user + "
        f"{usage.ru_stime:.1f} s system in {wall:.1f} s = {cpu / wall:.2f} cores busy on "
        f"average, of {os.cpu_count()}"
    )
    print(
        f"first live interval in the job file after {first:.1f} s"
        if first is not None
        else "no live interval appeared while the job ran"
    )
    shown = ", ".join(f"{seconds:.0f}s:{steps}" for seconds, steps in growth[-12:])
    print(f"live file growth (seconds since launch: steps written): {shown}")
    return process.returncode, wall, Path(log).read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--steps", type=int, default=600, help="training steps per rank")
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--interval", type=float, default=1.0, help="job_view_interval (s)")
    parser.add_argument("--timeout", type=float, default=900.0, help="the job is killed after")
    parser.add_argument("--mpiexec", default=shutil.which("mpiexec") or "mpiexec")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the ranks")
    parser.add_argument("--keep", type=Path, help="work in this dir and keep it")
    parser.add_argument("--rank-job", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.rank_job is not None:
        rank_job(arguments.rank_job, arguments.steps, arguments.step_ms, arguments.interval)
        return

    base = Path(arguments.keep or tempfile.mkdtemp(prefix="rankscribe-live-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    job = base / "job"
    if job.exists():
        shutil.rmtree(job)
    print(
        f"mpiexec -n {arguments.ranks}: {arguments.steps} steps of {arguments.step_ms:g} ms, "
        f"job_view_interval {arguments.interval:g} s, on {os.cpu_count()} cores "
        f"(load {os.getloadavg()[0]:.2f})"
    )
    try:
        code, wall, log = launch(arguments, job)
        print(f"job: exit {code} after {wall:.1f} s (load now {os.getloadavg()[0]:.2f})")
        for line in log.splitlines():
            if line.startswith("rank 0:") or "late" in line or "stall" in line:
                print("  |", line)
        if code != 0:
            print(log[-4000:])
            sys.exit("the job failed")
        check(job, base, arguments.ranks)
    finally:
        if arguments.keep is None:
            shutil.rmtree(base, ignore_errors=True)


def check(job: Path, base: Path, ranks: int) -> None:
    """The live job file against the offline merge of a copy of the rank dirs."""
    state = read_live_state(job) or {}
    print(
        f"live state: {state.get('interval')} intervals, final {state.get('final')}, "
        f"late points dropped {state.get('dropped_points')}"
    )
    live = job_points(job)
    offline_dir = base / "offline"
    if offline_dir.exists():
        shutil.rmtree(offline_dir)
    offline_dir.mkdir()
    for rank_dir in job.glob("rank_*"):
        shutil.copytree(rank_dir, offline_dir / rank_dir.name)
    started = time.monotonic()
    merge_run_dir(offline_dir, world_size=ranks)
    print(f"offline merge of {ranks} rank dirs: {time.monotonic() - started:.2f} s")
    offline = job_points(offline_dir)
    counts = offline.get(f"{SCRIPT_TAG}/ranks", {})
    print(
        f"offline: {len(counts)} steps of {SCRIPT_TAG}, ranks per step "
        f"{sorted(set(counts.values()))}; live: {len(live.get(f'{SCRIPT_TAG}/ranks', {}))}"
    )
    problems = compare(live, offline)
    if state.get("dropped_points"):
        problems.append(
            "the live view dropped late points, so the end rewrote the job files from the "
            "rank dirs: this compares that rewrite, not the live file"
        )
    for problem in problems[:20]:
        print("DIFFERENT:", problem)
    print("live == offline: " + ("yes" if not problems else f"NO ({len(problems)} differences)"))
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
