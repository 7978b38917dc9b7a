"""The forward time of steps a TrainSession logs without calling the collector (its quiet
steps: docs/collector-cost.md, "Quiet steps"): each forward call goes
to the step it ran in, whatever the number of calls a step makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from rankscribe.collector import SummaryCollector, TrainSession
from rankscribe.jobview.feed import FORWARD_TIME_TAG, STEP_TIME_TAG
from rankscribe.writer.reader import scalars
from tests._support.callbacks import EveryStep
from tests._support.clocks import ManualClock

STEPS = 120


class SlowNet(nn.Module):
    """A linear layer whose forward takes ``seconds`` of the collector's clock."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.clock = clock
        self.seconds = 0.001

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.clock.advance(self.seconds)
        return self.fc(x)


def forwards_at(step: int) -> int:
    """How many forward calls a step makes: none, one or two."""
    return 0 if step % 11 == 0 else 2 if step % 3 == 0 else 1


def forward_seconds(step: int) -> float:
    return 0.0005 * (1 + step % 4)


def rank_scalars(directory: Path) -> dict[str, dict[int, float]]:
    [path] = [path for path in directory.iterdir() if path.name.endswith("_MS")]
    return {tag: dict(points) for tag, points in scalars(path).items()}


def train(directory: Path, clock: ManualClock, *, beside: bool, parallel: bool = False) -> None:
    torch.manual_seed(0)
    network = SlowNet(clock)
    model: nn.Module = nn.DataParallel(network) if parallel else network
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    collector = SummaryCollector(
        directory,
        collect_freq=10,
        # (the graph is traced through a forward call of the collector's own)
        collect_specified_data={"collect_landscape": None, "collect_graph": False},
        system_interval=0,
    )
    callbacks: list[Any] = [collector, EveryStep()] if beside else [collector]
    x, y = torch.rand(2, 4), torch.tensor([0, 1])
    with TrainSession(
        callbacks, network=model, optimizer=optimizer, epochs=1, steps_per_epoch=STEPS
    ) as session:
        for _ in session.epochs():
            for step in range(1, STEPS + 1):
                network.seconds = forward_seconds(step)
                optimizer.zero_grad()
                losses = [
                    nn.functional.cross_entropy(model(x), y) for _ in range(forwards_at(step))
                ]
                loss = torch.stack(losses).sum() if losses else torch.zeros((), requires_grad=True)
                loss.backward()
                optimizer.step()
                clock.advance(0.002)  # the rest of the step
                session.step((x, y), loss)


@pytest.mark.parametrize("parallel", [False, True], ids=["forward", "hooks"])
def test_each_logged_steps_forward_calls_are_its_own(
    tmp_path: Path, collector_clock: ManualClock, parallel: bool
) -> None:
    train(tmp_path / "alone", collector_clock, beside=False, parallel=parallel)
    train(tmp_path / "beside", collector_clock, beside=True, parallel=parallel)
    alone = rank_scalars(tmp_path / "alone")
    assert alone == rank_scalars(tmp_path / "beside")
    assert alone[FORWARD_TIME_TAG] == {
        step: pytest.approx(forwards_at(step) * forward_seconds(step))
        for step in range(1, STEPS + 1)
        if forwards_at(step)
    }
    assert alone[STEP_TIME_TAG] == {
        step: pytest.approx(0.002 + forwards_at(step) * forward_seconds(step))
        for step in range(1, STEPS + 1)
    }
