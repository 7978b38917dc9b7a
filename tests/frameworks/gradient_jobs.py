"""A short 2-process job of one framework, its script holding no gradient-probe code.

    python gradient_jobs.py lightning <summary dir>            (Lightning launches rank 1)
    torchrun --nproc_per_node 2 gradient_jobs.py transformers <summary dir>
    torchrun --nproc_per_node 2 gradient_jobs.py accelerate <summary dir>
    torchrun --nproc_per_node 2 gradient_jobs.py accelerate-own-hook <summary dir>

Each trains a small classifier for :data:`STEPS` steps under DDP (gloo, CPU) with the
framework's RankScribe integration and nothing else: the integration alone must find
the framework's ``DistributedDataParallel`` wrapper for the collector's gradient probe.
``accelerate-own-hook`` has Accelerate register a communication hook of its own
(``DistributedDataParallelKwargs(comm_hook=FP16)``) when it wraps the model.
"""

from __future__ import annotations

import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

STEPS = 24
BATCH = 8
SAMPLES = STEPS * BATCH * 2  # one epoch: each rank's DistributedSampler share is STEPS batches


def synthetic() -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(SAMPLES, 16, generator=generator)
    return TensorDataset(inputs, (inputs[:, :4].sum(dim=1) > 0).long())


def classifier() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))


def lightning_job(summary_dir: str) -> None:
    import lightning.pytorch as pl

    from rankscribe.collector.lightning import RankScribeLogger

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = classifier()

        def training_step(
            self, batch: tuple[torch.Tensor, torch.Tensor], index: int
        ) -> torch.Tensor:
            inputs, labels = batch
            return nn.functional.cross_entropy(self.net(inputs), labels)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.05)

    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_steps=STEPS,
        logger=RankScribeLogger(summary_dir, name="job", version="run"),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Module(), DataLoader(synthetic(), batch_size=BATCH))


class _Pairs(Dataset):  # type: ignore[type-arg]
    """The synthetic rows as the Trainer's keyword inputs."""

    def __init__(self) -> None:
        self.rows = synthetic()

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        inputs, labels = self.rows[index]
        return {"inputs": inputs, "labels": labels}


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = classifier()

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.net(inputs)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


def transformers_job(summary_dir: str) -> None:
    from transformers import Trainer, TrainingArguments

    from rankscribe.collector.transformers import RankScribeCallback

    arguments = TrainingArguments(
        output_dir=summary_dir + "-checkpoints",
        max_steps=STEPS,
        per_device_train_batch_size=BATCH,
        learning_rate=0.05,
        logging_steps=4,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        ddp_backend="gloo",
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(
        model=_Model(),
        args=arguments,
        train_dataset=_Pairs(),
        callbacks=[RankScribeCallback(summary_dir)],
    )
    trainer.train()


def accelerate_job(summary_dir: str, own_hook: bool = False) -> None:
    from accelerate import Accelerator
    from accelerate.utils import DDPCommunicationHookType, DistributedDataParallelKwargs

    from rankscribe.collector.accelerate import RankScribeTracker

    model = classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(synthetic(), batch_size=BATCH)
    handlers = (
        [DistributedDataParallelKwargs(comm_hook=DDPCommunicationHookType.FP16)] if own_hook else []
    )
    accelerator = Accelerator(
        cpu=True, log_with=[RankScribeTracker(summary_dir)], kwargs_handlers=handlers
    )
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    accelerator.init_trackers("job", config={"learning_rate": 0.05})
    for step, (inputs, labels) in enumerate(loader, start=1):
        loss = nn.functional.cross_entropy(model(inputs), labels)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        accelerator.log({"loss": loss.item()}, step=step)
    accelerator.end_training()


def main() -> None:
    framework, summary_dir = sys.argv[1], sys.argv[2]
    torch.manual_seed(int(os.environ.get("RANK", "0")))
    if framework == "accelerate-own-hook":  # Accelerate registers a DDP hook of its own
        accelerate_job(summary_dir, own_hook=True)
        return
    {"lightning": lightning_job, "transformers": transformers_job, "accelerate": accelerate_job}[
        framework
    ](summary_dir)


if __name__ == "__main__":
    main()
