"""One rank of a torchrun DDP job (gloo, CPU) whose rank 1 has a slow backward, beside a clean one.

    torchrun --standalone --nproc_per_node 2 torchrun_backward.py <out_dir>

``<out_dir>/clean``: both ranks do the same work. ``<out_dir>/slow``: from step
SLOW_FROM, rank SLOW_RANK busy-waits SLOW_SECONDS in its backward, before any
gradient of its parameters is computed (the forward is unchanged). ``<out_dir>/both``:
the same, and at step CORRUPT_STEP a gradient hook multiplies the largest element of
rank SLOW_RANK's local ``fc1.weight`` gradient by CORRUPT_FACTOR (before the reduce).
DDP's all-reduce makes every rank's step wait for it, so the ranks' step times are
equal and their forward times too: only when each rank's last gradient bucket was ready
(the gradient probe's ready time, its arrival) tells the ranks apart. Each job is a ``TrainSession``
loop, the README's own-loop form. The forward's work is a sleep, as in the other
verdict jobs: two ranks busy on a 2-core machine (with gloo's threads and, in CI,
coverage's tracer) arrive apart by what the scheduler gives them (0.6 ms of a 13.6 ms
step for 39 steps in one CI run, named), which is no fault of either; the slow rank's
backward still busy-waits.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import SummaryCollector, TrainSession
from rankscribe.ranks import detect

STEPS, BATCH, COLLECT_FREQ = 150, 4, 10
BASE_SECONDS = 0.010
SLOW_RANK, SLOW_FROM, SLOW_SECONDS = 1, 50, 0.040
CORRUPT_STEP, CORRUPT_FACTOR = 100, 2.0**16

torch.set_num_threads(1)


def busy_wait(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


class SlowBackward(torch.autograd.Function):
    """Passes values and gradients through; its backward waits first (it runs before
    any parameter's gradient, being the forward's last operation)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, seconds: float) -> torch.Tensor:
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        busy_wait(ctx.seconds)
        return grad, None


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 8), nn.Linear(8, 3)
        self.backward_seconds = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(BASE_SECONDS)  # the forward's work: the same on every rank
        out = self.fc2(torch.relu(self.fc1(x.flatten(1))))
        return SlowBackward.apply(out, self.backward_seconds)


def job(summary: Path, slow: bool, corrupt: bool = False) -> None:
    info = detect()
    torch.manual_seed(0)  # the same initial parameters on every rank (DDP checks it too)
    net = Net()
    current = [0]

    def corrupted(gradient: torch.Tensor) -> torch.Tensor:
        if current[0] == CORRUPT_STEP and info.rank == SLOW_RANK:
            gradient = gradient.clone()  # its largest element (a dead unit's are 0)
            gradient.view(-1)[gradient.abs().argmax()] *= CORRUPT_FACTOR
        return gradient

    if corrupt:
        net.fc1.weight.register_hook(corrupted)
    model = DistributedDataParallel(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(0)
    rows = STEPS * BATCH * info.world_size
    images, labels = torch.rand(rows, 16, generator=generator), torch.arange(rows) % 3
    share = slice(info.rank, None, info.world_size)
    loader = DataLoader(TensorDataset(images[share], labels[share]), batch_size=BATCH)
    collector = SummaryCollector(
        summary,
        collect_freq=COLLECT_FREQ,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=60.0,
        job_view_interval=0,
    )
    with TrainSession(
        [collector], network=model, optimizer=optimizer, train_dataset=loader, epochs=1
    ) as session:
        for _ in session.epochs():
            for step, (x, y) in enumerate(loader, start=1):
                current[0] = step
                late = slow and info.rank == SLOW_RANK and step >= SLOW_FROM
                net.backward_seconds = SLOW_SECONDS if late else 0.0
                optimizer.zero_grad()
                loss = functional.cross_entropy(model(x), y)
                loss.backward()  # DDP's all-reduce: every rank waits for rank 1's last bucket
                optimizer.step()
                session.step((x, y), loss.detach())
    collector.close()


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo")
    job(out / "clean", slow=False)
    job(out / "slow", slow=True)
    job(out / "both", slow=True, corrupt=True)
    dist.destroy_process_group()
    print(f"rank {detect().rank} done", flush=True)


if __name__ == "__main__":
    main()
