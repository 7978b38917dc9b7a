"""The README's TrainSession example runs as written on a plain torch model and data loader.

The README leaves ``model``, ``optimizer``, ``loss_fn`` and ``loader`` to the reader;
this test gives them (a small CNN on random 8x8 images) and checks what the example
leaves on disk: the loss at the collected steps, the lineage, a checkpoint, and the
progress lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.lineage import get_summary_lineage
from rankscribe.writer.reader import scalars
from tests._support.readme import README, readme_block

MARKER = "<!-- tested by tests/collector_torch/test_readme_session.py -->"


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(images)).flatten(1))


def test_the_train_session_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    model = TinyCNN()
    images, labels = torch.rand(40, 1, 8, 8), torch.randint(0, 10, (40,))
    names = {
        "model": model,
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
        "loss_fn": nn.CrossEntropyLoss(),
        "loader": DataLoader(TensorDataset(images, labels), batch_size=4),
    }
    exec(compile(readme_block(MARKER), str(README), "exec"), names)

    losses = scalars("runs/session")["loss/auto"]
    assert [step for step, _ in losses] == [1, 10, 20, 30]  # 3 epochs of 10 steps
    assert all(value > 0 for _, value in losses)
    lineage = get_summary_lineage(str(tmp_path / "runs" / "session"))
    assert lineage["algorithm"]["network"] == "TinyCNN"
    assert lineage["hyper_parameters"]["epoch"] == 3
    assert lineage["hyper_parameters"]["loss_function"] == "CrossEntropyLoss"
    # CheckpointConfig's defaults: every step saved, the newest 5 kept
    assert sorted(path.name for path in (tmp_path / "runs/session/ckpt").glob("*.ckpt")) == [
        f"CKP-3_{step}.ckpt" for step in (10, 6, 7, 8, 9)
    ]
    # the landscape default is on in the example: 19 parameter sets of 30 steps
    assert len(list((tmp_path / "runs/session/ckpt_dir").glob("TinyCNN_*_step.ckpt"))) == 19
    assert "trained 30 steps" in capsys.readouterr().err  # Progress, not a terminal
