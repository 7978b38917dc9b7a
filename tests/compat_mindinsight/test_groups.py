"""MindInsight 2.3.1 reads the groups' summary files (``rankscribe-lineage group``).

Six runs (two learning rates x three seeds) grouped by learning rate: MindInsight's
data loader, on each ``BASE/_groups/<group>/`` folder, loads the group's curves
without error, and its ``loss/auto/mean`` at every step is the mean of the three
runs' loss at that step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.writer import reader
from tests._support.seed_groups import RATES, SEEDS, loss_at, write_grouped_runs

STEPS = 12


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_grouped_runs(tmp_path_factory.mktemp("runs"), STEPS)


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
