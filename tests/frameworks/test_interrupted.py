"""A Lightning fit stopped by an exception: rank 0 of several says how to merge.

The end of training, which merges the job's lineage, never comes when the
fit raises; Lightning tells its callbacks (``on_exception``) and then its
loggers (``finalize("failed")``). The logger closes the run with the
exception, as a training loop would, and rank 0 of a job of several warns
with the command that makes the job's lineage. The rank is rank 0 of 2
(injected into the collector the integration makes, with a coordinator whose
rank 1 never reports), so this runs in one process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscribe.collector import SummaryCollector
from rankscribe.ranks import RankInfo
from tests.collector.coordinators import RankZeroAlone
from tests.frameworks.checks import quiet_trainer

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")


def _fit(lightning: Any, integration: Any, directory: Path, fail_at: int | None) -> str:
    """A 4-step fit whose step ``fail_at`` raises; the job's directory."""

    class Tiny(lightning.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, index: int) -> Any:
            if index == fail_at:
                raise RuntimeError("the data ran out")
            features, target = batch
            return torch.nn.functional.mse_loss(self.layer(features), target)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    logger = integration.RankScribeLogger(
        directory, collect_specified_data={"collect_landscape": None}
    )
    trainer = quiet_trainer(lightning, logger, max_steps=4)
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    if fail_at is None:
        trainer.fit(Tiny(), loader)
    else:
        with pytest.raises(RuntimeError, match="the data ran out"):
            trainer.fit(Tiny(), loader)
    return str(logger.log_dir)


def test_rank_zero_of_a_failed_fit_says_how_to_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lightning = pytest.importorskip("lightning.pytorch")
    from rankscribe.collector import lightning as integration

    rank = RankInfo(0, 2, 0, 2, "host", "pmi")

    class RankZeroOfTwo(SummaryCollector):
        def __init__(self, summary_dir: Any, **options: Any) -> None:
            options.update(rank_info=rank, coordinator=RankZeroAlone(rank))
            super().__init__(summary_dir, **options)

    monkeypatch.setattr(integration, "SummaryCollector", RankZeroOfTwo)
    job = _fit(lightning, integration, tmp_path / "failed", fail_at=2)
    said = [r.getMessage() for r in caplog.records if "rankscribe-lineage merge" in r.getMessage()]
    assert said == [
        "Training stopped (RuntimeError) before the job's lineage was merged: run "
        f"`rankscribe-lineage merge {job}` once every rank has stopped."
    ]
    caplog.clear()
    _fit(lightning, integration, tmp_path / "finished", fail_at=None)
    assert [r for r in caplog.records if "rankscribe-lineage merge" in r.getMessage()] == []
