#!/usr/bin/env python3
"""Record a small fake training run with SummaryRecord, then read it back.

    python examples/quickstart.py runs/quickstart

Writes loss and learning-rate scalars, a weight histogram, an input image
batch and a tensor every few steps, plus a train lineage, into the given
directory (MindInsight format, and TensorBoard format next to it), and prints
what the files hold.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from rankscribe.writer import SummaryRecord, reader
from rankscribe.writer.pb import lineage_pb2


def train(summary_dir: str, steps: int) -> None:
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((64, 10)).astype(np.float32)
    with SummaryRecord(summary_dir, formats=("mindinsight", "tensorboard")) as record:
        for step in range(1, steps + 1):
            loss = 2.3 * np.exp(-step / 15) + 0.05 * rng.random()
            weights -= 0.01 * rng.standard_normal(weights.shape).astype(np.float32)
            record.add_value("scalar", "loss", loss)
            record.add_value("scalar", "learning_rate", 0.1)
            if step % 10 == 0:
                record.add_value("histogram", "dense/weight", weights)
                record.add_value("image", "input", rng.random((4, 1, 8, 8), dtype=np.float32))
                record.add_value("tensor", "dense/weight", weights)
            record.record(step)
        lineage = lineage_pb2.TrainLineage()
        lineage.hyper_parameters.optimizer = "SGD"
        lineage.hyper_parameters.learning_rate = 0.1
        lineage.hyper_parameters.epoch = 1
        lineage.hyper_parameters.batch_size = 32
        lineage.algorithm.network = "TinyMLP"
        lineage.algorithm.loss = float(loss)
        record.add_value("train_lineage", "train_lineage", lineage)
        record.record(steps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summary_dir")
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    train(args.summary_dir, args.steps)
    for path in reader.list_summary_files(args.summary_dir):
        print(path)
    for tag, points in reader.scalars(args.summary_dir).items():
        last_step, last_value = points[-1]
        print(f"  {tag:<16} {len(points)} points, step {last_step}: {last_value:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
