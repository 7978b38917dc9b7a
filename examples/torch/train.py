#!/usr/bin/env python3
"""Data-parallel PyTorch training of a small CNN on scikit-learn's digits, recorded by RankScribe.

    python examples/torch/train.py --summary-dir runs/torch                          # one process
    torchrun --nproc_per_node 2 examples/torch/train.py --summary-dir runs/torch     # torchrun
    mpiexec -n 2 python examples/torch/train.py --summary-dir runs/torch             # MPI

The script sets up ``torch.distributed`` (gloo, CPU) from whichever launcher
started it, wraps the model in ``DistributedDataParallel`` and trains each rank
on its ``DistributedSampler`` shard. ``SummaryCollector`` records loss, weight
histograms, input images and the lineage of every rank into
``<summary-dir>/rank_<r>/``, and rank 0 merges the job's lineage and its
cross-rank curves into ``<summary-dir>/`` (under torchrun the ranks meet through
torch.distributed's store; under mpiexec through MPI); ``ModelCheckpoint`` saves each rank's
weights beside its summaries; ``Progress`` shows rank 0's progress (a bar on a
terminal, a line every 10 s otherwise). The digits (1,797 8x8 images) ship with
scikit-learn: nothing is downloaded. A summary dir that already holds a run is
never written into again: rank 0 claims the directory for this job
(``rankscribe.ranks.claim_job_dir``, the rule every RankScribe job follows), so a
rerun goes to ``<dir>-2``, ``<dir>-3``, ... and two jobs started at once never share one.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from rankscribe.collector import (
    Callback,
    CheckpointConfig,
    ModelCheckpoint,
    Progress,
    RunContext,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.lineage import get_summary_lineage
from rankscribe.ranks import Coordinator, claim_job_dir, create_coordinator, detect, rank_dir
from rankscribe.ranks.errors import BackendUnavailableError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--summary-dir", required=True, help="where the job's summaries go")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size per rank")
    parser.add_argument("--collect-freq", type=int, default=10, help="collect every N steps")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_size", "collect_freq"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.lr <= 0:
        parser.error("--lr must be greater than 0")
    return args


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions and a linear head: 8x8 one-channel images, ten classes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.head = nn.Linear(16 * 4 * 4, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.conv1(images))
        hidden = functional.max_pool2d(torch.relu(self.conv2(hidden)), 2)
        return self.head(hidden.flatten(1))


class Digits(TensorDataset):
    """scikit-learn's digits as float NCHW images in [0, 1]; ``root`` says where they are from."""

    root = "sklearn.datasets.load_digits"

    def __init__(self, train: bool) -> None:
        digits = load_digits()
        images = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
        labels = torch.tensor(digits.target, dtype=torch.long)
        cut = int(0.8 * len(labels))  # a fixed split: the same on every rank
        rows = slice(None, cut) if train else slice(cut, None)
        super().__init__(images[rows], labels[rows])


def start_distributed() -> tuple[int, int, Coordinator]:
    """Join the job's process group (gloo) however it was launched.

    Returns (rank, world size, the job's coordinator). torchrun exports
    ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE``, and the coordinator then uses
    the process group's store; under ``mpiexec`` the coordinator uses MPI, and rank 0
    tells the others a free port through it. A single process starts no group at all.
    """
    if "MASTER_ADDR" in os.environ and "RANK" in os.environ:
        dist.init_process_group("gloo")
        return dist.get_rank(), dist.get_world_size(), create_coordinator(timeout=60.0)
    info = detect()
    # Under mpiexec this loads MPI, and says in one line what to install when it cannot.
    coordinator = create_coordinator(info, timeout=60.0)
    if info.world_size == 1:
        return 0, 1, coordinator
    address = coordinator.bcast(_free_address() if info.rank == 0 else None, root=0)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = address[0], str(address[1])
    dist.init_process_group("gloo", rank=info.rank, world_size=info.world_size)
    return info.rank, info.world_size, coordinator


def _free_address() -> tuple[str, int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return "127.0.0.1", probe.getsockname()[1]


class ShuffleEachEpoch(Callback):
    """A DistributedSampler reshuffles only when told the epoch (its documented rule)."""

    def __init__(self, sampler: DistributedSampler[Any] | None) -> None:
        self.sampler = sampler

    def epoch_begin(self, run_context: RunContext) -> None:
        if self.sampler is not None:
            self.sampler.set_epoch(run_context.original_args().cur_epoch_num - 1)


def train(args: argparse.Namespace) -> dict[str, Any] | None:
    rank, world_size, coordinator = start_distributed()
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = DigitsCNN()
    parallel = DistributedDataParallel(model) if world_size > 1 else model
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    train_set, test_set = Digits(train=True), Digits(train=False)
    sampler = (
        DistributedSampler(
            train_set,
            num_replicas=world_size,
            rank=rank,
            shuffle=True,
            seed=args.seed,
            drop_last=True,
        )
        if world_size > 1
        else None
    )
    loader = DataLoader(
        train_set,
        batch_size=args.batch_size,
        sampler=sampler,
        shuffle=sampler is None,
        drop_last=True,
    )
    test_loader = DataLoader(test_set, batch_size=len(test_set))

    def step(batch: list[torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        optimizer.zero_grad()
        loss = functional.cross_entropy(parallel(images), labels)
        loss.backward()  # DistributedDataParallel averages the gradients over the ranks
        optimizer.step()
        return loss.detach()

    @torch.no_grad()
    def evaluate(batch: list[torch.Tensor]) -> dict[str, float]:
        images, labels = batch
        return {"accuracy": float((model(images).argmax(1) == labels).float().mean())}

    # Every rank: rank 0 claims the summary dir for this job (or the next free <dir>-N).
    summary_dir = claim_job_dir(args.summary_dir, coordinator=coordinator).directory
    if coordinator.rank == 0 and summary_dir.name != Path(args.summary_dir).name:
        moved = Path(args.summary_dir).parent / summary_dir.name
        print(f"{args.summary_dir} already holds a run; this one goes to {moved}", flush=True)
    # The DDP network: the collector records each rank's local gradient norms before DDP's
    # reduce and when its gradient was ready (docs/gradients.md), for the job view's
    # gradient and straggler verdicts; its lineage, histograms and checkpoints are the
    # model's own (DigitsCNN, its parameters' names).
    loop = TrainLoop(
        step,
        network=parallel,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        eval_fn=evaluate,
    )
    collector = SummaryCollector(
        str(summary_dir),
        collect_freq=args.collect_freq,
        # The loss landscape saves many full parameter sets; this example does not draw it.
        collect_specified_data={"collect_landscape": None},
        custom_lineage_data={"seed": args.seed},
        coordinator=coordinator,
    )
    config = CheckpointConfig(save_checkpoint_steps=len(loader), keep_checkpoint_max=2)
    checkpoint = ModelCheckpoint(
        prefix="digits-cnn", config=config, directory=str(rank_dir(summary_dir, detect()))
    )
    loop.train(
        args.epochs,
        loader,
        callbacks=[checkpoint, collector, ShuffleEachEpoch(sampler), Progress()],
    )
    metrics = loop.eval(test_loader, callbacks=[collector])
    coordinator.close()
    if dist.is_initialized():
        dist.destroy_process_group()
    if rank != 0:
        return None
    print(
        f"trained {args.epochs} epochs on {world_size} rank(s); "
        f"test accuracy {metrics['accuracy']:.3f}"
    )
    return get_summary_lineage(str(summary_dir.resolve()))


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    try:
        lineage = train(parse_args(argv))
    except BackendUnavailableError as error:
        # mpiexec without an MPI library mpi4py can load: one line (from rank 0), no traceback.
        if detect().rank == 0:
            print(f"train.py: {error}", file=sys.stderr)
        return 1
    if lineage is not None:
        hyper, metric = lineage["hyper_parameters"], lineage.get("metric") or {}
        print(
            f"merged lineage: {hyper.get('optimizer')} lr={hyper.get('learning_rate')} "
            f"batch_size={hyper.get('batch_size')} device_num={hyper.get('device_num')} "
            f"loss={lineage['algorithm'].get('loss'):.4f} "
            f"accuracy={metric.get('accuracy', float('nan')):.3f}"
        )
        print(f"summaries in {Path(lineage['summary_dir'])}")
    return 0


if __name__ == "__main__":
    np.seterr(all="raise")
    sys.exit(main())
