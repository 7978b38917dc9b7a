"""The command line grows no faster than n log n in the number of runs.

The console script is run, as a user runs it (a new process), on generated bases
of 1,000 and 4,000 runs with a warm index. What the command itself costs at each
size is its time less the time on a base of 10 runs (the interpreter, the imports);
the ratio between the sizes must stay within a generous margin of n log n's
(4 x log 4000 / log 1000 = 4.8). The default table was quadratic before (it
looked for the columns of every run once per run): 16x between these sizes.
No absolute time is asserted; speed is measured by ``tools/bench/cli.py``.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rankscribe.lineage.recording import EvalLineageInfo, UserDefinedInfo
from rankscribe.writer.files import frame
from rankscribe.writer.pb import lineage_pb2

SIZES = (10, 1000, 4000)
MARGIN = 2.5  # machines are shared: only growth far beyond n log n fails
OLD = 1_600_000_000
DISTINCT = 97  # payloads written in turn: generating thousands of runs stays quick


def payload(index: int) -> bytes:
    """A run like the benchmark's: many columns, most of them differing between runs."""
    custom = UserDefinedInfo.from_values({"seed": index, "note": f"run {index}"}).to_proto()
    train = lineage_pb2.LineageEvent(wall_time=2.0)
    hyper = train.train_lineage.hyper_parameters
    hyper.optimizer = ("Adam", "SGD", "Momentum")[index % 3]
    hyper.learning_rate = (0.1, 0.01, 0.001)[index % 3]
    hyper.epoch = 1 + index % 90
    hyper.batch_size = 32 << (index % 3)
    train.train_lineage.algorithm.network = ("ResNet50", "VGG16")[index % 2]
    train.train_lineage.algorithm.loss = index / DISTINCT
    metrics = EvalLineageInfo.from_metrics({"acc": 1 - index / DISTINCT, "top5": 0.9})
    events = [
        lineage_pb2.LineageEvent(wall_time=1.0, user_defined_info=custom),
        train,
        lineage_pb2.LineageEvent(wall_time=3.0, evaluation_lineage=metrics.to_proto()),
    ]
    return b"".join(frame(event.SerializeToString()) for event in events)


def generate(root: Path, count: int) -> Path:
    payloads = [payload(index) for index in range(DISTINCT)]
    root.mkdir()
    for index in range(count):
        directory = root / f"run{index:05d}"
        directory.mkdir()
        path = directory / "events.out.events.summary.1.0.vm_lineage"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        try:
            os.write(descriptor, payloads[index % DISTINCT])
        finally:
            os.close(descriptor)
        os.utime(path, (OLD, OLD))  # finished long ago, as most runs of a base are
        os.utime(directory, (OLD, OLD))
    return root


def console_script() -> list[str]:
    beside = Path(sys.executable).parent / "rankscribe-lineage"
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", "rankscribe.lineage.cli"]


def seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=600
    )
    return time.perf_counter() - started


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("scaling")
    made = {count: generate(root / f"base{count}", count) for count in SIZES}
    for base in made.values():
        seconds([*console_script(), "query", str(base)])  # writes the index: later runs warm
    return made


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [[], ["--where", "loss < 0.5", "--sort", "metric/acc desc"]],
    ids=["default-table", "where-and-sort"],
)
def test_query_time_grows_no_faster_than_n_log_n(
    bases: dict[int, Path], options: list[str]
) -> None:
    script = console_script()
    best = dict.fromkeys(SIZES, math.inf)
    for _ in range(3):  # interleaved, so that the machine's load moves all sizes alike
        for count, base in bases.items():
            best[count] = min(best[count], seconds([*script, "query", str(base), *options]))
    fixed = best[10]
    # A floor under the smaller size's own time: noise must not make it look tiny.
    growth = (best[4000] - fixed) / max(best[1000] - fixed, 0.05)
    n_log_n = 4000 * math.log(4000) / (1000 * math.log(1000))
    assert growth <= MARGIN * n_log_n, (
        f"4,000 runs cost {growth:.1f}x 1,000 runs (n log n: {n_log_n:.1f}x); times {best}"
    )
