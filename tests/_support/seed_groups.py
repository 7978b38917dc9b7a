"""Runs of two learning rates x three seeds, grouped by learning rate: what the groups'
viewer tests (TensorBoard, MindInsight) read back."""

from __future__ import annotations

import math
from pathlib import Path

from rankscribe.lineage import group_runs
from rankscribe.lineage.recording import Algorithm, HyperParameters, TrainLineageInfo
from rankscribe.writer import SummaryRecord

RATES = (0.1, 0.2)
SEEDS = (1, 2, 3)


def loss_at(rate: float, seed: int, step: int) -> float:
    """The ``loss/auto`` a run of ``rate`` and ``seed`` records at ``step``."""
    return 2.0 * math.exp(-rate * step) + 0.01 * seed * math.sin(step + seed)


def write_grouped_runs(root: Path, steps: int) -> Path:
    """Write the six runs of ``steps`` steps under ``root`` and group them by learning rate."""
    for rate in RATES:
        for seed in SEEDS:
            with SummaryRecord(root / f"lr{rate}-seed{seed}") as record:
                for step in range(1, steps + 1):
                    record.add_value("scalar", "loss/auto", loss_at(rate, seed, step))
                    record.record(step)
                train = TrainLineageInfo(
                    hyper_parameters=HyperParameters(learning_rate=rate),
                    algorithm=Algorithm(loss=loss_at(rate, seed, steps)),
                )
                record.add_value("train_lineage", "train", train.to_proto())
                record.record(steps)
    group_runs(root, by="learning_rate", workers=1)
    return root
