"""A Lightning run recorded by every rank: ``RankScribeLogger``.

    python examples/lightning/train.py --save-dir runs/lightning --devices 2

trains a small classifier on synthetic data with ``Trainer(accelerator="cpu",
devices=N, strategy="ddp")`` (Lightning launches the other ranks itself). Each
rank writes ``runs/lightning/digits/version_<n>/rank_<r>/``; rank 0 writes the
job's merged lineage and job view into ``version_<n>/``. Nothing is downloaded.
"""

from __future__ import annotations

import argparse

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector.lightning import RankScribeLogger


def synthetic(samples: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(samples, 16, generator=generator)
    labels = (inputs[:, :4].sum(dim=1) > 0).long()
    return TensorDataset(inputs, labels)


class Classifier(pl.LightningModule):
    def __init__(self, learning_rate: float = 0.05, hidden: int = 32) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, 2))
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.net(inputs)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        inputs, labels = batch
        loss = self.loss_fn(self(inputs), labels)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> None:
        inputs, labels = batch
        logits = self(inputs)
        self.log("val_loss", self.loss_fn(logits, labels), sync_dist=True)
        self.log("val_accuracy", (logits.argmax(dim=1) == labels).float().mean(), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.learning_rate, momentum=0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save-dir", default="runs/lightning")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--version", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    train = DataLoader(synthetic(256, 1), batch_size=32, shuffle=True)
    valid = DataLoader(synthetic(96, 2), batch_size=32)
    logger = RankScribeLogger(args.save_dir, name="digits", version=args.version, collect_freq=4)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        max_epochs=args.epochs,
        logger=logger,
        log_every_n_steps=2,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=args.save_dir,
    )
    trainer.fit(Classifier(), train, valid)
    if trainer.global_rank == 0:
        print(f"recorded into {logger.log_dir}")


if __name__ == "__main__":
    main()
