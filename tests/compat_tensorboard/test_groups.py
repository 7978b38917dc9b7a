"""The groups' TensorBoard files (``rankscribe-lineage group``), read back by tensorboard itself.

Six runs (two learning rates x three seeds) are written by the writer and
grouped by learning rate; TensorBoard pointed at the base lists each group
as a run under ``_groups/`` and its Custom Scalars dashboard draws each tag
as the mean within the min..max band of the group's runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tensorboard import context
from tensorboard.backend.event_processing import data_provider
from tensorboard.backend.event_processing import plugin_event_multiplexer as multiplexer
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins import base_plugin
from tensorboard.plugins.custom_scalar import custom_scalars_plugin

from rankscribe.writer import reader
from tests._support.seed_groups import RATES, SEEDS, loss_at, write_grouped_runs

pytestmark = pytest.mark.tensorboard  # the tensorboard env runs it, where tensorboard is installed

STEPS = 15


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_grouped_runs(tmp_path_factory.mktemp("runs"), STEPS)


def test_tensorboard_reads_each_group_mean_as_the_mean_of_its_runs(base: Path) -> None:
    for rate in RATES:
        folder = base / "_groups" / f"learning_rate={rate}"
        (board,) = folder.glob("events.out.tfevents.*")
        accumulator = EventAccumulator(str(board), size_guidance={"scalars": 0})
        accumulator.Reload()
        means = accumulator.Scalars("loss/auto/mean")
        assert [event.step for event in means] == list(range(1, STEPS + 1))
        for event in means:
            runs = [np.float32(loss_at(rate, seed, event.step)) for seed in SEEDS]
            assert event.value == pytest.approx(float(np.mean(runs, dtype=np.float64)), rel=1e-6)
        assert {event.value for event in accumulator.Scalars("loss/auto/runs")} == {3.0}
        # the same values as the group's MindSpore summary file
        summary = reader.scalars(folder)
        for suffix in ("mean", "min", "max", "std", "runs"):
            tag = f"loss/auto/{suffix}"
            assert [(e.step, e.value) for e in accumulator.Scalars(tag)] == summary[tag]


def test_the_custom_scalars_dashboard_draws_each_group_as_a_band(base: Path) -> None:
    events = multiplexer.EventMultiplexer()
    events.AddRunsFromDirectory(str(base))
    events.Reload()
    assert {"_groups/learning_rate=0.1", "_groups/learning_rate=0.2"} <= set(events.Runs())
    provider = data_provider.MultiplexerDataProvider(events, str(base))
    plugin = custom_scalars_plugin.CustomScalarsPlugin(
        base_plugin.TBContext(logdir=str(base), multiplexer=events, data_provider=provider)
    )
    layout = json.loads(plugin.layout_impl(context.RequestContext(), ""))
    charts = {chart["title"]: chart for chart in layout["category"][0]["chart"]}
    assert charts["loss/auto"]["margin"]["series"] == [
        {"value": "loss/auto/mean", "lower": "loss/auto/min", "upper": "loss/auto/max"}
    ]
