"""The README's NumPy training script runs as written and records what it says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.lineage import get_summary_lineage
from rankscribe.writer import events
from rankscribe.writer.reader import scalars
from tests._support.readme import README, readme_block

MARKER = "<!-- tested by tests/collector/test_readme_numpy.py -->"


def test_the_numpy_training_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    names: dict[str, Any] = {}
    exec(compile(readme_block(MARKER), str(README), "exec"), names)
    run = tmp_path / "runs" / "numpy"
    losses = scalars(run)["loss/auto"]
    assert [step for step, _ in losses] == [1, 4, 8, 12, 16]  # 2 epochs of 8 steps
    # The step trained the very array the network names, in place.
    assert names["net"].parameters["w"] is names["w"] and np.abs(names["w"]).sum() > 0
    histogram_tags = {
        value.tag
        for event in events.load_dir(str(run))
        if event.what == "summary"
        for value in event.values
        if value.plugin == "histogram"
    }
    assert histogram_tags == {"w/auto"}  # the network's array
    lineage = get_summary_lineage(str(run))
    assert lineage["hyper_parameters"]["optimizer"] == "ArrayOptimizer"
    assert lineage["hyper_parameters"]["learning_rate"] == pytest.approx(0.1)
    assert lineage["hyper_parameters"]["epoch"] == 2
