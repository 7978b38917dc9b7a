"""One rank of a torchrun DistributedDataParallel job (gloo, CPU) whose rank 1 is killed.

    torchrun --standalone --nproc_per_node 2 torchrun_killed.py <summary_dir>

Rank KILLED_RANK sends itself SIGKILL at step KILLED_AT (the out-of-memory killer's way:
no exception, no stop record, its kept steps unwritten). The other rank, waiting in
DDP's all-reduce, raises gloo's error on the connection the dead rank's end closed.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.ranks import detect

STEPS, BATCH = 400, 4
KILLED_RANK, KILLED_AT = 1, 300

torch.set_num_threads(1)


def main() -> None:
    summary = Path(sys.argv[1])
    dist.init_process_group("gloo")
    info = detect()
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(info.rank)
    images, labels = (
        torch.rand(STEPS * BATCH, 16, generator=generator),
        torch.zeros(STEPS * BATCH, dtype=torch.long),
    )
    loader = DataLoader(TensorDataset(images, labels), batch_size=BATCH)
    steps = [0]

    def step(batch: list[torch.Tensor]) -> torch.Tensor:
        steps[0] += 1
        if info.rank == KILLED_RANK and steps[0] == KILLED_AT:
            os.kill(os.getpid(), signal.SIGKILL)
        optimizer.zero_grad()
        loss = functional.cross_entropy(model(batch[0]), batch[1])
        loss.backward()  # DDP's all-reduce: the rank left raises when its peer is gone
        optimizer.step()
        return loss

    collector = SummaryCollector(
        summary, collect_freq=50, collect_specified_data={"collect_landscape": None}
    )
    TrainLoop(step, network=model, optimizer=optimizer).train(1, loader, callbacks=[collector])
    collector.close()


if __name__ == "__main__":
    main()
