"""The cost budget in a plain torch loop: a large layer's histograms shed, all else kept.

The network holds a 2048 x 2048 layer (4 M weights) and a step trains only a tiny head:
the step takes well under a millisecond, while each collected step's histograms copy and
bucket 4 M values, many times the 2 % budget on any machine. So the collector sheds them
(docs/collector-cost.md, "The cost budget") and says so once; the loss, the step times
and the lineage stay. No timing is asserted: only what was recorded and said.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from torch import nn

from rankscribe.collector import SummaryCollector, TrainSession
from rankscribe.jobview.feed import STEP_TIME_TAG
from rankscribe.lineage import get_summary_lineage
from rankscribe.writer.events import load_dir
from rankscribe.writer.reader import scalars

STEPS = 300
COLLECT_FREQ = 10


class LargeLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.large = nn.Linear(2048, 2048, bias=False)
        self.head = nn.Linear(8, 1)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(inputs)


def histogram_steps(directory: Path) -> list[int]:
    return sorted(
        {
            event.step
            for event in load_dir(directory)
            if event.what == "summary" and event.step is not None
            for value in event.values
            if value.plugin == "histogram"
        }
    )


def test_a_large_layers_histograms_are_shed_and_the_rest_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(0)
    model = LargeLayer()
    # The large layer first: the default histograms are of the first five parameters.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    collector = SummaryCollector(
        tmp_path,
        collect_freq=COLLECT_FREQ,
        collect_specified_data={"collect_landscape": None},
        fingerprints=False,
        system_interval=0,
    )
    inputs, targets = torch.ones(4, 8), torch.zeros(4, 1)
    with (
        caplog.at_level(logging.INFO),
        TrainSession(
            [collector], network=model, optimizer=optimizer, epochs=1, steps_per_epoch=STEPS
        ) as session,
    ):
        for _ in session.epochs():
            for _ in range(STEPS):
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(model(inputs), targets)
                loss.backward()
                optimizer.step()
                session.step((inputs, targets), loss.detach())
    said = [
        record.getMessage()
        for record in caplog.records
        if record.name == "rankscribe.collector.cost._budget" and record.levelno >= logging.WARNING
    ]
    assert len(said) == 1, said
    assert "it sheds the parameter histograms" in said[0]
    assert "fingerprint" not in said[0]  # off in this run: nothing to shed
    assert "cost_budget='off'" in said[0]
    # The run records no input images (its batches are not 4-D): no decision, at any
    # level, says it sheds them.
    logged = [
        record.getMessage()
        for record in caplog.records
        if record.name == "rankscribe.collector.cost._budget"
    ]
    assert not any("input images" in message for message in logged), logged
    found = scalars(tmp_path)
    # Histograms at every collected step of the first window (its one, step 20: a cost
    # this far over the budget is decided at its end, step 30) at most, then fewer (or
    # none).
    shed = [step for step in histogram_steps(tmp_path) if step > 50]
    assert len(shed) < len(range(60, STEPS + 1, COLLECT_FREQ)) // 4, shed
    # Never shed: the loss at every collected step, every step time, the lineage.
    assert [step for step, _ in found["loss/auto"]] == [1, *range(10, STEPS + 1, 10)]
    assert [step for step, _ in found[STEP_TIME_TAG]] == list(range(1, STEPS + 1))
    assert get_summary_lineage(str(tmp_path))["hyper_parameters"]["optimizer"] == "SGD"
    # The cost recorded: seconds per step, positive, and less than the whole run took.
    costs = dict(found["rankscribe/collector_cost/training"])
    assert min(costs) >= 30 and all(0 < value < 60 for value in costs.values()), costs
    assert all(value >= 0 for _, value in found["rankscribe/collector_cost/threads"])
