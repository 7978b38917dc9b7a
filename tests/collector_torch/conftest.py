"""Fixtures of the PyTorch adapter tests: small torch models and a clean environment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn

from tests._support.clocks import collector_clock  # noqa: F401 - the fixture, for every test here
from tests._support.launchers import drop_launcher_variables

torch.set_num_threads(1)  # CI has 2 shared cores; these models are tiny


class Block(nn.Module):
    """A module fx traces into: a Linear, a function, a direct parameter read."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)) * self.scale + x


class Net(nn.Module):
    """Nested modules, a buffer-holding BatchNorm, methods called on tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.bn = nn.BatchNorm1d(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.bn(self.block(x)).flatten(1)).softmax(-1)


@pytest.fixture
def net() -> Net:
    torch.manual_seed(0)
    return Net()


@pytest.fixture(autouse=True)
def _no_hyper_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests do not inherit a MINDINSIGHT_HYPER_CONFIG or a launcher's rank variables."""
    monkeypatch.delenv("MINDINSIGHT_HYPER_CONFIG", raising=False)
    drop_launcher_variables(monkeypatch)
    yield
