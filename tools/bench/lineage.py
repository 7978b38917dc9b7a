#!/usr/bin/env python3
"""Lineage query timings over 1,000 and 10,000 generated runs.

    python tools/bench/lineage.py [--runs 1000 10000] [--repeat 5] [--keep DIR]

For each size it writes that many run directories (a ``_MS`` file and a
``_lineage`` file with a dataset graph, custom data, a train and an eval
lineage, as MindSpore's SummaryCollector leaves them) into a temporary base
dir, then times, in the same process:

- parse once: ``filter_summary_lineage`` with the index off, i.e. every file
  read and parsed once (what MindInsight does on every query);
- cold: a query with the index on but no index yet (parses everything and
  writes the index) — it should cost about the same as parsing once;
- warm: the same query again, served from the index;
- warm, string filter: ``filter_runs`` with the same condition.

Each time is a median (parse once and cold alternate, --repeat // 2 times
each; warm --repeat times). The query is a top-10: ``loss < 0.5``, sorted by
``metric/acc`` descending, limit 10. The OS page cache is warm in every case; "cold" means no index.
Reference points measured elsewhere on this kind of machine, not by this
script: MindInsight 2.3.1 re-reads every file on each query at 0.67 ms per run
and stops at 999 runs; MLflow 3 on sqlite answers a top-10 over 10,000 runs in
2.45 s warm.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rankscribe.lineage import (
    DatasetGraphInfo,
    EvalLineageInfo,
    UserDefinedInfo,
    filter_runs,
    filter_summary_lineage,
)
from rankscribe.lineage._cache import INDEX_NAME
from rankscribe.writer.files import frame
from rankscribe.writer.pb import lineage_pb2

CONDITION = {"loss": {"lt": 0.5}, "sorted_name": "metric/acc", "sorted_type": "descending",
             "limit": 10}
WHERE = "loss < 0.5"
ORDER = ["metric/acc desc"]
GRAPHS = [
    {"op_type": "Batch", "batch_size": size, "drop_remainder": True, "children": [
        {"op_type": "Map", "input_columns": ["image"], "operations": [
            {"tensor_op_name": "Resize", "tensor_op_params": '{"size": [32, 32]}'},
            {"tensor_op_name": "Rescale", "tensor_op_params": '{"rescale": 0.0039}'}],
         "children": [{"op_type": "Cifar10Dataset", "dataset_dir": "/data/cifar10",
                       "sampler": {"sampler_name": "RandomSampler", "num_samples": 0},
                       "children": []}]}]}
    for size in (32, 64, 128)
]
OPTIMIZERS = ("Adam", "Momentum", "SGD", "Lamb")


def run_payload(index: int, rng: random.Random) -> bytes:
    graph = GRAPHS[index % len(GRAPHS)]
    events = [
        lineage_pb2.LineageEvent(
            wall_time=1.0, dataset_graph=DatasetGraphInfo.from_graph_dict(graph).to_proto()),
        lineage_pb2.LineageEvent(wall_time=1.0, user_defined_info=UserDefinedInfo.from_values(
            {"seed": index, "note": f"run {index}", "dropout": rng.random()}).to_proto()),
    ]
    train = lineage_pb2.LineageEvent(wall_time=2.0)
    hyper = train.train_lineage.hyper_parameters
    hyper.optimizer = OPTIMIZERS[index % len(OPTIMIZERS)]
    hyper.learning_rate = rng.choice((0.1, 0.01, 0.001))
    hyper.loss_function = "SoftmaxCrossEntropyWithLogits"
    hyper.epoch = rng.randint(1, 90)
    hyper.parallel_mode = "data_parallel"
    hyper.device_num = 8
    hyper.batch_size = graph["batch_size"]
    train.train_lineage.train_dataset.train_dataset_path = "/data/cifar10"
    train.train_lineage.train_dataset.train_dataset_size = 50000
    train.train_lineage.algorithm.network = rng.choice(("ResNet50", "VGG16", "LeNet5"))
    train.train_lineage.algorithm.loss = rng.random()
    train.train_lineage.model.path = json.dumps({"ckpt": f"/ckpt/run{index}.ckpt"})
    train.train_lineage.model.size = rng.randint(10**6, 10**8)
    evaluation = EvalLineageInfo.from_metrics({"acc": rng.random(), "loss": rng.random()})
    events += [train, lineage_pb2.LineageEvent(wall_time=3.0,
                                                evaluation_lineage=evaluation.to_proto())]
    return b"".join(frame(event.SerializeToString()) for event in events)


def generate(base: Path, count: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    version = frame(b"\x09" + b"\x00" * 8 + b"\x1a\x11MindSpore.Event:1")
    stamp = 1_700_000_000
    for index in range(count):
        directory = base / f"run{index:05d}"
        directory.mkdir()
        name = f"events.out.events.summary.{stamp + index}.0.bench"
        (directory / f"{name}_MS").write_bytes(version)
        (directory / f"{name}_lineage").write_bytes(run_payload(index, rng))


def timed(function: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - started, result


def measure(count: int, repeat: int, keep: Path | None) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix=f"lineage-bench-{count}-", dir=keep))
    try:
        generate_seconds, _ = timed(generate, root, count)
        _, expected = timed(filter_summary_lineage, str(root), dict(CONDITION), use_index=False)
        assert expected["count"] > 0
        # Alternate the two so that neither gets a warmer cache than the other.
        parse_times, cold_times = [], []
        for _ in range(max(1, repeat // 2)):
            seconds, result = timed(filter_summary_lineage, str(root), dict(CONDITION),
                                    use_index=False)
            parse_times.append(seconds)
            (root / INDEX_NAME).unlink(missing_ok=True)
            seconds, result = timed(filter_summary_lineage, str(root), dict(CONDITION),
                                    use_index=True)
            assert result == expected
            cold_times.append(seconds)
        parse_once, cold = statistics.median(parse_times), statistics.median(cold_times)
        warm_times = []
        for _ in range(repeat):
            seconds, result = timed(filter_summary_lineage, str(root), dict(CONDITION))
            assert result == expected
            warm_times.append(seconds)
        string_times = []
        for _ in range(repeat):
            seconds, result = timed(filter_runs, root, WHERE, order_by=ORDER, limit=10)
            assert result["count"] == expected["count"]
            string_times.append(seconds)
        return {
            "runs": count,
            "generate_s": generate_seconds,
            "parse_once_s": parse_once,
            "cold_s": cold,
            "warm_s": statistics.median(warm_times),
            "warm_string_s": statistics.median(string_times),
            "index_bytes": (root / INDEX_NAME).stat().st_size,
            "matches": expected["count"],
        }
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="generate under DIR and keep the runs")
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; query: top-10 of "
          f"loss < 0.5 by metric/acc desc")
    header = (f"{'runs':>6} {'parse once':>11} {'cold':>8} {'cold/parse':>10} {'warm':>8} "
              f"{'warm/run':>9} {'warm str':>9} {'index':>9} {'matches':>8}")
    print(header)
    for count in args.runs:
        row = measure(count, args.repeat, args.keep)
        print(f"{row['runs']:>6} {row['parse_once_s']:>10.3f}s {row['cold_s']:>7.3f}s "
              f"{row['cold_s'] / row['parse_once_s']:>10.2f} {row['warm_s']:>7.3f}s "
              f"{row['warm_s'] / count * 1e6:>7.1f}us {row['warm_string_s']:>8.3f}s "
              f"{row['index_bytes'] / 1e6:>7.1f}MB {row['matches']:>8}")
    print("reference (measured elsewhere, not by this script): MindInsight 2.3.1 0.67 ms/run "
          "per query, capped at 999 runs; MLflow 3 sqlite top-10 of 10,000 runs 2.45 s warm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
