"""An Accelerate run recorded by every process: ``RankScribeTracker``.

    accelerate launch --num_processes 2 --cpu examples/accelerate/train.py --summary-dir runs/acc
    torchrun --nproc_per_node 2 examples/accelerate/train.py --summary-dir runs/acc

A small classifier on synthetic data (nothing downloaded). Each process writes
``runs/acc/rank_<r>/``; at ``end_training`` rank 0 writes the job's merged
lineage and job view into ``runs/acc/`` (a rerun goes to ``runs/acc-2``).
"""

from __future__ import annotations

import argparse

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector.accelerate import RankScribeTracker


def synthetic(samples: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(samples, 16, generator=generator)
    return TensorDataset(inputs, (inputs[:, :4].sum(dim=1) > 0).long())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary-dir", default="runs/accelerate")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = {"learning_rate": 0.05, "batch_size": 32, "epochs": args.epochs, "optimizer": "SGD"}
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["learning_rate"])
    loader = DataLoader(synthetic(256, 1), batch_size=config["batch_size"], shuffle=True)
    tracker = RankScribeTracker(args.summary_dir, collect_freq=4)
    accelerator = Accelerator(cpu=True, log_with=[tracker])
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    tracker.watch(model, optimizer, loader)
    accelerator.init_trackers("accelerate-example", config=config)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    for _ in range(args.epochs):
        for inputs, labels in loader:
            step += 1
            loss = loss_fn(model(inputs), labels)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            accelerator.log({"loss": loss.item()}, step=step)
    accelerator.end_training()


if __name__ == "__main__":
    main()
