"""A short 2-process Accelerate job, its script holding no gradient-probe code.

    torchrun --nproc_per_node 2 gradient_jobs.py accelerate <summary dir>
    torchrun --nproc_per_node 2 gradient_jobs.py accelerate-own-hook <summary dir>

It trains a small classifier for :data:`STEPS` steps under DDP (gloo, CPU) with the
RankScribe tracker and nothing else — no ``watch``: the tracker alone must find the
``DistributedDataParallel`` module ``prepare`` made, for the collector's gradient probe
(the examples' jobs, which call ``watch`` with the prepared model, are checked in
test_accelerate.py). ``accelerate-own-hook`` has Accelerate register a communication hook
of its own (``DistributedDataParallelKwargs(comm_hook=FP16)``) when it wraps the model:
DDP takes one hook, so the probe stays off.
"""

from __future__ import annotations

import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STEPS = 24
BATCH = 8
SAMPLES = STEPS * BATCH * 2  # one epoch: each rank's DistributedSampler share is STEPS batches


def synthetic() -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(SAMPLES, 16, generator=generator)
    return TensorDataset(inputs, (inputs[:, :4].sum(dim=1) > 0).long())


def classifier() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))


def accelerate_job(summary_dir: str, own_hook: bool) -> None:
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
    if framework not in ("accelerate", "accelerate-own-hook"):
        raise SystemExit(f"unknown job {framework!r}: accelerate or accelerate-own-hook")
    accelerate_job(summary_dir, own_hook=framework == "accelerate-own-hook")


if __name__ == "__main__":
    main()
