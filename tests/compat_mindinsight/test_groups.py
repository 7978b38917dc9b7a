"""MindInsight 2.3.1 reads the groups' summary files (``rankscribe-lineage group``).

Six runs (two learning rates x three seeds) grouped by learning rate: MindInsight's
data loader, on each ``BASE/_groups/<group>/`` folder, loads the group's curves
without error, and its ``loss/auto/mean`` at every step is the mean of the three
runs' loss at that step.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.lineage import group_runs
from rankscribe.lineage.recording import Algorithm, HyperParameters, TrainLineageInfo
from rankscribe.writer import SummaryRecord, reader

STEPS = 12
RATES = (0.1, 0.2)
SEEDS = (1, 2, 3)


def loss_at(rate: float, seed: int, step: int) -> float:
    return 2.0 * math.exp(-rate * step) + 0.01 * seed * math.sin(step + seed)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    for rate in RATES:
        for seed in SEEDS:
            with SummaryRecord(root / f"lr{rate}-seed{seed}") as record:
                for step in range(1, STEPS + 1):
                    record.add_value("scalar", "loss/auto", loss_at(rate, seed, step))
                    record.record(step)
                train = TrainLineageInfo(
                    hyper_parameters=HyperParameters(learning_rate=rate),
                    algorithm=Algorithm(loss=loss_at(rate, seed, STEPS)),
                )
                record.add_value("train_lineage", "train", train.to_proto())
                record.record(STEPS)
    group_runs(root, by="learning_rate", workers=1)
    return root


def test_mindinsight_loads_each_group_mean_as_the_mean_of_its_runs(
    base: Path, mindinsight: Any
) -> None:
    folders = {rate: base / "_groups" / f"learning_rate={rate}" for rate in RATES}
    loaded = mindinsight.load(*folders.values())
    for rate, folder in folders.items():
        run = loaded[str(folder)]
        assert run["integrity"] is True
        scalars = run["plugins"]["scalar"]
        for suffix in ("mean", "min", "max", "std", "runs"):
            tag = f"loss/auto/{suffix}"
            # MindInsight names a scalar's tag with the plugin after it.
            shown = [(point["step"], point["value"]) for point in scalars[f"{tag}/scalar"]]
            assert shown == pytest.approx(reader.scalars(folder)[tag], rel=1e-7)
        means = scalars["loss/auto/mean/scalar"]
        assert [point["step"] for point in means] == list(range(1, STEPS + 1))
        for point in means:
            runs = [np.float32(loss_at(rate, seed, point["step"])) for seed in SEEDS]
            assert point["value"] == pytest.approx(float(np.mean(runs, dtype=np.float64)), rel=1e-6)
        assert {point["value"] for point in scalars["loss/auto/runs/scalar"]} == {3.0}
