"""The README's TrainSession example run twice under ``mpiexec -n 2``: the rerun keeps out.

The example's ``ModelCheckpoint(directory="runs/session/ckpt")`` is made before its
``SummaryCollector("runs/session")`` claims the job. The second job finds
``runs/session`` taken and writes into ``runs/session-2``; its checkpoints follow it into
``runs/session-2/ckpt``, and the first job's files stay byte for byte as they were
(docs/layout.md, "Checkpoints inside the job directory").
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rankscribe.collector import load_checkpoint
from rankscribe.lineage import get_summary_lineage
from tests._support.readme import readme_block
from tests._support.snapshots import snapshot


def _sibling(name: str) -> ModuleType:
    """A test module beside this one (tests are imported with --import-mode=importlib)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The bounded launch of the example's own test (a clean environment, mpiexec beside python).
EXAMPLE_TEST = _sibling("test_torch_example")
MARKER = "<!-- tested by tests/collector_torch/test_readme_session.py -->"

# What the README leaves to the reader (the model, its optimizer, loss and data), then the
# README's block as written.
PRELUDE = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, 10)

    def forward(self, images):
        return self.head(torch.relu(self.conv(images)).flatten(1))

torch.set_num_threads(1)
torch.manual_seed(0)
model = TinyCNN()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
images, labels = torch.rand(16, 1, 8, 8), torch.randint(0, 10, (16,))
loader = DataLoader(TensorDataset(images, labels), batch_size=4)
"""


def checkpoints(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("*.ckpt"))


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], str]:
    """Run the example twice in one directory; the first job's files between the runs."""
    base = tmp_path_factory.mktemp("rerun")
    script = base / "session.py"
    script.write_text(PRELUDE + readme_block(MARKER))
    command = [EXAMPLE_TEST._launcher("mpiexec"), "-n", "2", sys.executable, str(script)]
    EXAMPLE_TEST._launch(command, cwd=base)
    first = snapshot(base / "runs" / "session")
    output = EXAMPLE_TEST._launch(command, cwd=base)
    return base, first, output


@pytest.mark.slow
def test_the_rerun_leaves_the_first_jobs_checkpoints_alone(
    two_jobs: tuple[Path, dict[str, str], str],
) -> None:
    base, first, _ = two_jobs
    job = base / "runs" / "session"
    # CheckpointConfig's defaults: every step saved (4 a epoch, 3 epochs), the newest 5 kept.
    newest = [f"CKP-3_{step}.ckpt" for step in (1, 2, 3, 4)] + ["CKP-2_4.ckpt"]
    for rank in (0, 1):
        assert checkpoints(job / "ckpt" / f"rank_{rank}") == sorted(newest)
    assert snapshot(job) == first  # not a byte of the first job changed, nothing added
    assert sorted(os.listdir(job / "ckpt")) == ["rank_0", "rank_1"]


@pytest.mark.slow
def test_the_rerun_writes_its_checkpoints_into_its_own_job(
    two_jobs: tuple[Path, dict[str, str], str],
) -> None:
    base, _, output = two_jobs
    second = base / "runs" / "session-2"
    assert "belongs to another job" in output  # rank 0 says where the job went
    for rank in (0, 1):
        rank_ckpt = second / "ckpt" / f"rank_{rank}"
        # The rerun's own prefix: its directory held no checkpoints.
        assert checkpoints(rank_ckpt) == checkpoints(base / "runs/session/ckpt/rank_0")
        parameters, _ = load_checkpoint(rank_ckpt / "CKP-3_4.ckpt")
        assert set(parameters) == {"conv.weight", "conv.bias", "head.weight", "head.bias"}
    lineage = get_summary_lineage(str(second))
    model = lineage["model"]
    path = json.loads(model["path"])["ckpt"] if isinstance(model["path"], str) else model["path"]
    assert Path(path) == (second / "ckpt" / "rank_0" / "CKP-3_4.ckpt").resolve()
    assert model["size"] == (second / "ckpt" / "rank_0" / "CKP-3_4.ckpt").stat().st_size
    # no lock file left in either job (the merge's, the landscape metadata's)
    assert sorted(base.rglob("*.lock")) == []
