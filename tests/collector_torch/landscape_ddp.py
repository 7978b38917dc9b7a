"""One rank of a new user's toy DDP job at the collector's defaults, under torchrun (gloo, CPU).

    torchrun --standalone --nproc_per_node 2 landscape_ddp.py <out_dir>

A 3-layer MLP of width 1024 (1.1 M parameters, 4.5 MB a parameter set) trains
100 steps on each rank, recorded by ``SummaryCollector(dir, collect_freq=10)``:
MindSpore's landscape default would save 19 sets, 85.6 MB per rank. Two jobs in
one launch: ``<out_dir>/default`` (the default budget, 64 MB per rank) and
``<out_dir>/all`` (``landscape_budget="all"``). Warnings go to stderr as
``rank <r> <logger>: <message>``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.ranks import detect

STEPS, BATCH, FEATURES, WIDTH, CLASSES = 100, 64, 64, 1024, 10

torch.set_num_threads(1)


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, WIDTH),
        nn.ReLU(),
        nn.Linear(WIDTH, WIDTH),
        nn.ReLU(),
        nn.Linear(WIDTH, CLASSES),
    )


def job(summary: Path, **collector: Any) -> None:
    info = detect()
    torch.manual_seed(0)  # the same initial parameters on every rank (DDP checks it too)
    model = DistributedDataParallel(mlp())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(info.rank)
    inputs = torch.randn(STEPS * BATCH, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (STEPS * BATCH,), generator=generator)
    loader = DataLoader(TensorDataset(inputs, labels), batch_size=BATCH)

    def step(batch: list[torch.Tensor]) -> torch.Tensor:
        optimizer.zero_grad()
        loss = functional.cross_entropy(model(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return loss.detach()

    recorder = SummaryCollector(summary, collect_freq=10, merge_timeout=60.0, **collector)
    TrainLoop(step, network=model, optimizer=optimizer).train(1, loader, callbacks=[recorder])
    recorder.close()


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo")
    rank = detect().rank
    logging.basicConfig(level=logging.WARNING, format=f"rank {rank} %(name)s: %(message)s")
    job(out / "default")
    job(out / "all", landscape_budget="all")
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
