"""One rank of a torchrun job: TrainLoop and SummaryCollector, with no rendezvous_dir.

    torchrun --standalone --nproc_per_node 2 torchrun_train.py <summary_dir> <out_dir>
        <scenario> <merge_timeout>

The script initialises torch.distributed (gloo, CPU) as a torchrun script
does, and trains a tiny network on its share of the data: no gradient is
reduced across ranks, so a rank that leaves early cannot hang the others in
training. Scenarios: ``clean`` (every rank trains to the end), ``skip``
(the last rank stops at SKIP_AT_STEP and leaves without the end of training,
so it never takes part in the merge; it exits normally, as torchrun would
otherwise stop the other rank) and ``no_process_group`` (as ``clean``, but the
script never initialises torch.distributed). Each rank writes
<out_dir>/rank_<r>.json.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.ranks import detect

EPOCHS, ROWS, BATCH, COLLECT_FREQ = 2, 16, 2, 2  # 4 batches per rank and epoch: 8 steps
SKIP_AT_STEP = 3

torch.set_num_threads(1)


class LeaveEarlyError(Exception):
    """This rank leaves training before its end."""


def main() -> None:
    summary_dir, out, scenario = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    merge_timeout = float(sys.argv[4])
    if scenario != "no_process_group":
        dist.init_process_group("gloo")
    info = detect()
    torch.manual_seed(0)  # the same initial parameters on every rank
    network = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(0)
    images, labels = torch.rand(ROWS, 1, 4, 4, generator=generator), torch.arange(ROWS) % 3
    share = slice(info.rank, None, info.world_size)
    loader = DataLoader(TensorDataset(images[share], labels[share]), batch_size=BATCH)
    steps = 0

    def step(batch: list[torch.Tensor]) -> torch.Tensor:
        nonlocal steps
        steps += 1
        if scenario == "skip" and info.rank == info.world_size - 1 and steps == SKIP_AT_STEP:
            raise LeaveEarlyError
        optimizer.zero_grad()
        loss = functional.cross_entropy(network(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return loss

    loop = TrainLoop(step, network=network, optimizer=optimizer, loss_fn=nn.CrossEntropyLoss())
    collector = SummaryCollector(
        summary_dir,
        collect_freq=COLLECT_FREQ,
        merge_timeout=merge_timeout,
        # The rank that leaves early must reach rank 0 through nothing but the end's last
        # round, which it skips: no live rounds, whose timing would decide whether its first
        # steps' points travelled before it left (docs/job-view.md, "Live").
        job_view_interval=0 if scenario == "skip" else None,
    )
    started = time.monotonic()
    finished = True
    try:
        loop.train(EPOCHS, loader, callbacks=[collector])
    except LeaveEarlyError:
        finished = False
    record = {
        "rank": info.rank,
        "world_size": info.world_size,
        "launcher": info.launcher,
        "finished": finished,
        "steps": steps,
        "train_seconds": time.monotonic() - started,
    }
    temporary = out / f".rank_{info.rank}.json.tmp"
    temporary.write_text(json.dumps(record))
    os.replace(temporary, out / f"rank_{info.rank}.json")
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
