"""MindInsight's two lineage examples (rankscribe-lineage's README, "Recording"), run as written.

The examples leave ``Model``, ``train_network``, ``epoch_num`` and ``dataset`` to the
reader; this test gives them: a train-one-step wrapper holding an ``ArrayNetwork`` and
its optimizer (so the lineage finds the optimizer through the network, as MindInsight's
does), and a ``Model`` that drives a ``TrainLoop`` whose step records its loss with a
summary operator, as a MindSpore network's ``ScalarSummary`` does. ``Model.eval`` takes
the epoch count the evaluation example passes first (MindSpore's ``Model.eval`` never
took one). The one change to the blocks: the examples' checkpoint directory,
``/dir/to/save/model/``, is moved into the test's directory.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    SummaryStep,
    TrainLoop,
)
from rankscribe.lineage import get_summary_lineage
from rankscribe.writer import scalar_summary
from rankscribe.writer.events import load_dir
from tests._support.readme import ROOT, page_block

PAGE = ROOT / "packages" / "rankscribe-lineage" / "README.md"
TRAIN = "<!-- tested by tests/collector/test_lineage_examples.py: train -->"
EVAL = "<!-- tested by tests/collector/test_lineage_examples.py: eval -->"


class TrainOneStep:
    """MindSpore's TrainOneStepCell in miniature: the network and its optimizer."""

    def __init__(self, network: ArrayNetwork, optimizer: ArrayOptimizer) -> None:
        self.network = network
        self.optimizer = optimizer

    def named_parameters(self) -> list[tuple[str, Any]]:
        """A cell's parameters are its network's (what the checkpoint saves)."""
        return self.network.named_parameters()


class Model:
    """MindSpore's ``Model`` as the examples call it, over a ``TrainLoop``."""

    def __init__(self, network: TrainOneStep) -> None:
        self.steps = 0
        self.loop = TrainLoop(self._step, network=network, eval_fn=self._evaluate)

    def _step(self, batch: Any) -> float:
        self.steps += 1
        loss = 1.0 / self.steps
        scalar_summary("loss", loss)
        return loss

    def _evaluate(self, batch: Any) -> dict[str, float]:
        self.steps += 1
        scalar_summary("loss", 1.0 / self.steps)
        return {"acc": 0.75}

    def train(self, epoch: int, dataset: Iterable[Any], callbacks: Any) -> None:
        self.loop.train(epoch, dataset, callbacks=callbacks)

    def eval(self, epoch: int, dataset: Iterable[Any], callbacks: Any) -> Mapping[str, Any]:
        return self.loop.eval(dataset, callbacks=callbacks)


def run_example(marker: str, directory: Path, checkpoints: Path) -> None:
    network = ArrayNetwork({"w": np.ones(3, np.float32)}, name="Net")
    reader_names = {
        "Model": Model,
        "train_network": TrainOneStep(network, ArrayOptimizer(network, 0.01, name="Momentum")),
        "epoch_num": 3,
        "dataset": ArrayDataset(np.arange(4, dtype=np.float32), batch_size=2),
    }
    block = page_block(PAGE, marker)
    assert block.count('"/dir/to/save/model/"') == 1
    block = block.replace('"/dir/to/save/model/"', repr(str(checkpoints)))
    exec(compile(block, str(PAGE), "exec"), reader_names)


def recorded_losses(directory: Path) -> dict[int, float]:
    return {
        event.step: float(np.asarray(value.value))
        for event in load_dir(directory)
        if event.what == "summary" and event.step is not None
        for value in event.values
        if value.tag == "loss" and value.plugin == "scalar"
    }


def test_the_train_lineage_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_example(TRAIN, tmp_path, tmp_path / "model")
    # Six steps (3 epochs of 2 batches), recorded at every second one with that step's loss.
    assert recorded_losses(tmp_path) == pytest.approx({2: 1 / 2, 4: 1 / 4, 6: 1 / 6})
    lineage = get_summary_lineage(str(tmp_path))
    assert lineage["hyper_parameters"]["epoch"] == 3
    assert lineage["hyper_parameters"]["optimizer"] == "Momentum"
    assert lineage["hyper_parameters"]["learning_rate"] == 0.01
    assert lineage["algorithm"]["loss"] == pytest.approx(1 / 6)
    checkpoint = lineage["model"]["path"]
    assert str((tmp_path / "model").resolve()) in checkpoint and checkpoint.endswith('.ckpt"}')
    # Leaving the run closed the summary record: its files are read-only.
    files = [path for path in tmp_path.iterdir() if path.is_file()]
    assert files and all(stat.S_IMODE(path.stat().st_mode) == 0o400 for path in files)


def test_the_eval_lineage_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_example(EVAL, tmp_path, tmp_path / "model")
    assert recorded_losses(tmp_path) == pytest.approx({2: 1 / 2})
    lineage = get_summary_lineage(str(tmp_path))
    assert lineage["metric"] == {"acc": 0.75}
    assert lineage["valid_dataset"] == {"valid_dataset_size": 4}


@pytest.mark.parametrize("flush_step", [0, -2, 2.0, True, "2", None])
def test_flush_step_must_be_a_positive_int(tmp_path: Path, flush_step: Any) -> None:
    with pytest.raises(ValueError) as raised:
        SummaryStep(object(), flush_step=flush_step)
    assert str(raised.value) == (
        f"For 'SummaryStep', the argument 'flush_step' must be an int > 0, but got {flush_step!r}."
    )


def test_the_summary_must_be_a_summary_record() -> None:
    with pytest.raises(TypeError, match="the argument 'summary' must be a summary record"):
        SummaryStep("runs/exp1", flush_step=2)
