"""``on_verdict`` through the Lightning, Transformers and Accelerate integrations.

Each test runs a short single-process training in this process with the
integration given ``on_verdict``, and records every ``SummaryCollector`` the
integration makes (a subclass put in place of the name the integration module
calls). The collector made for the run must have been given the user's
callable. One process names no straggler, so the verdict is then driven
through an injected job view: the live job view of a 3-rank job whose rank 1
computes 1.5x, given the ``on_verdict`` the run's collector received; the
user's callable must get the record (a real multi-rank framework job with a
slow rank costs a minute; ``tests/integration/jobview/test_mpi_verdicts.py``
runs the collector's own path with real ranks).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import SummaryCollector
from rankscribe.jobview import LiveJobView
from rankscribe.jobview.feed import STEP_TIME_TAG
from rankscribe.jobview.protocol import JobPartial
from tests.frameworks.checks import quiet_trainer

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")

COMPUTE = "rankscribe/section/compute"


def _record_collectors(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[Any]:
    """Every SummaryCollector ``module`` makes from now on: (directory, keyword arguments)."""
    made: list[Any] = []

    class Recorded(SummaryCollector):
        def __init__(self, summary_dir: Any, **options: Any) -> None:
            made.append((Path(summary_dir), options))
            super().__init__(summary_dir, **options)

    monkeypatch.setattr(module, "SummaryCollector", Recorded)
    return made


def _drive_a_verdict(directory: Path, on_verdict: Any) -> None:
    """A live job view of 3 ranks, rank 1 computing 1.5x (8 -> 12 ms), judged once."""
    rng = np.random.default_rng(0)
    steps = np.arange(1, 201, dtype=np.int64)
    compute = 0.008 * rng.lognormal(0.0, 0.05, size=(3, len(steps)))
    compute[1] *= 1.5
    step = compute.max(axis=0) + 0.001
    directory.mkdir()
    view = LiveJobView(directory, world_size=3, on_verdict=on_verdict)
    merged = None
    for rank in range(3):
        part = JobPartial.of_rank(
            rank, {COMPUTE: (steps, compute[rank]), STEP_TIME_TAG: (steps, step.copy())}
        )
        if merged is None:
            merged = part
        else:
            merged.merge(part)
    assert merged is not None
    view.add(merged)
    view.judge()


def _check_the_run_and_the_record(
    made: list[Any], job: Path, called: list[dict[str, Any]], tmp_path: Path
) -> None:
    runs = [options for directory, options in made if directory == job]
    assert runs, f"no collector was made for {job}: {[str(d) for d, _ in made]}"
    on_verdict = runs[-1]["on_verdict"]
    assert called == []  # one process: no verdict of its own
    _drive_a_verdict(tmp_path / "view", on_verdict)
    [record] = called
    assert record["kind"] == "straggler"
    assert record["ranks"] == [1]
    assert record["timing"] == "section/compute"
    assert record["cost_seconds_per_step"] == pytest.approx(0.004, rel=0.15)
    assert 0.25 <= record["cost_share"] <= 0.4
    assert record["persistent"] is True


def test_lightning_hands_on_verdict_to_its_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lightning = pytest.importorskip("lightning.pytorch")
    from rankscribe.collector import lightning as integration

    made = _record_collectors(monkeypatch, integration)
    called: list[dict[str, Any]] = []

    class Tiny(lightning.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, index: int) -> Any:
            features, target = batch
            return torch.nn.functional.mse_loss(self.layer(features), target)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    logger = integration.RankScribeLogger(tmp_path / "runs", on_verdict=called.append)
    trainer = quiet_trainer(lightning, logger, max_steps=3)
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4))
    _check_the_run_and_the_record(made, Path(logger.log_dir), called, tmp_path)


def test_transformers_hands_on_verdict_to_its_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transformers = pytest.importorskip("transformers")
    from rankscribe.collector import transformers as integration

    made = _record_collectors(monkeypatch, integration)
    called: list[dict[str, Any]] = []
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=16,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=8,
        num_labels=2,
    )
    model = transformers.BertForSequenceClassification(config)
    ids = torch.randint(1, 16, (8, 6))
    samples = [{"input_ids": ids[i], "labels": torch.tensor(i % 2)} for i in range(8)]
    callback = integration.RankScribeCallback(tmp_path / "runs" / "hf", on_verdict=called.append)
    arguments = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    transformers.Trainer(
        model=model, args=arguments, train_dataset=samples, callbacks=[callback]
    ).train()
    _check_the_run_and_the_record(made, tmp_path / "runs" / "hf", called, tmp_path)


def test_accelerate_hands_on_verdict_to_its_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    accelerate = pytest.importorskip("accelerate")
    from rankscribe.collector import accelerate as integration

    made = _record_collectors(monkeypatch, integration)
    called: list[dict[str, Any]] = []
    tracker = integration.RankScribeTracker(tmp_path / "runs" / "acc", on_verdict=called.append)
    accelerator = accelerate.Accelerator(cpu=True, log_with=[tracker])
    accelerator.init_trackers("tiny", config={"learning_rate": 0.1, "epochs": 1})
    for step in range(1, 4):
        accelerator.log({"loss": 1.0 / step}, step=step)
    accelerator.end_training()
    _check_the_run_and_the_record(made, tmp_path / "runs" / "acc", called, tmp_path)
