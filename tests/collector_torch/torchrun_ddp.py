"""One rank of a torchrun DistributedDataParallel job (gloo, CPU), two jobs in one launch.

    torchrun --standalone --nproc_per_node 2 torchrun_ddp.py <out_dir>

``<out_dir>/clean``: every rank does the same work. ``<out_dir>/slow``: rank
SLOW_RANK spends SLOW_SECONDS more inside its model's ``forward`` at every
step. DDP averages the gradients in ``backward``, so every rank's wall step
time is the slowest rank's; the collector times the forward with module hooks
(the script hands the DDP-wrapped model to the loop; nothing else changes).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.ranks import detect

STEPS, BATCH, COLLECT_FREQ = 12, 4, 4
BASE_SECONDS = 0.005
SLOW_RANK, SLOW_SECONDS = 1, 0.040

torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self, extra: float) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 8), nn.Linear(8, 3)
        self.extra = extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(BASE_SECONDS + self.extra)  # the forward's work; the slow rank's is longer
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def job(summary: Path, extra: float) -> None:
    info = detect()
    torch.manual_seed(0)  # the same initial parameters on every rank (DDP checks it too)
    model = DistributedDataParallel(Net(extra))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(0)
    rows = STEPS * BATCH * info.world_size
    images, labels = torch.rand(rows, 16, generator=generator), torch.arange(rows) % 3
    share = slice(info.rank, None, info.world_size)
    loader = DataLoader(TensorDataset(images[share], labels[share]), batch_size=BATCH)

    def step(batch: list[torch.Tensor]) -> torch.Tensor:
        optimizer.zero_grad()
        loss = functional.cross_entropy(model(batch[0]), batch[1])
        loss.backward()  # DDP averages the gradients here: every rank waits for the slowest
        optimizer.step()
        return loss

    collector = SummaryCollector(
        summary,
        collect_freq=COLLECT_FREQ,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=60.0,
    )
    TrainLoop(step, network=model, optimizer=optimizer).train(1, loader, callbacks=[collector])
    collector.close()


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo")
    rank = detect().rank
    job(out / "clean", 0.0)
    job(out / "slow", SLOW_SECONDS if rank == SLOW_RANK else 0.0)
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
