"""One rank of a torchrun DistributedDataParallel job (gloo, CPU) watched by the gradient probe.

    torchrun --standalone --nproc_per_node <n> torchrun_gradients.py <out_dir> <scenario> [steps]

Scenarios (each trains a fresh DDP network with SummaryCollector into ``<out_dir>/<name>``
and writes ``<out_dir>/<name>/rank_<r>.json``: the parameters after training, and the
norms the user's own hook saw, when it has one):

- ``probe`` / ``plain``: the same training with the probe on / off
  (``gradient_probe=False``): the parameters must come out bit-identical; the same
  with ``gradient_as_bucket_view=True`` in ``probe_view`` / ``plain_view``;
- ``chained``: a communication hook of the user's, registered once training has
  begun (so the probe chains it), records each bucket's local norm in float64
  and then reduces as DDP does;
- ``early``: the user's hook registered before training begins, where DDP has no
  place left for the probe's: the probe is off (one warning), training goes on;
- ``probe_large`` / ``plain_large`` / ``chained_large``: the same on a wider network in
  DDP's default buckets (one of about 10^6 elements: the probe's float32 rows, its
  blocks and its tail), and in ``probe_large`` each parameter's local gradient's
  float64 sum of squares per step, taken by a tensor hook before DDP sees it;
- ``clean`` / ``corrupt``: the probe alone; in ``corrupt`` a gradient hook on one
  parameter multiplies one element of rank CORRUPT_RANK's local gradient by 2**16
  at step CORRUPT_STEP, in its backward (before the bucket is reduced);
- ``probe_accum`` / ``plain_accum``: gradient accumulation, as the frameworks do it: each
  step's first half batch backward under ``model.no_sync()`` (no reduce), the second
  synchronised; in ``probe_accum`` each step's accumulated local gradient's float64 sum
  of squares (the first half's gradients plus the second's, taken by a tensor hook).

The live job view runs every LIVE_INTERVAL seconds; the records rank 0's
``on_verdict`` received are in ``verdicts``.
"""

# No `from __future__ import annotations`: DDP checks a hook's annotations as objects.
import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.ranks import detect

BATCH, COLLECT_FREQ = 8, 10
CORRUPT_RANK, CORRUPT_STEP, CORRUPT_FACTOR = 2, 30, 2.0**16
#: Small buckets: the network's three layers fill several (each has its own norm).
BUCKET_MB = 0.001
#: Seconds between the live job view's rounds: several in a job of a few seconds.
LIVE_INTERVAL = 0.5

torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class WideNet(nn.Module):
    """A layer of 10^6 weights (not a multiple of the probe's rows, nor of its blocks)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (
            nn.Linear(16, 1000),
            nn.Linear(1000, 1000),
            nn.Linear(1000, 3),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class UserHook:
    """The user's own hook: its bucket norms and peaks (the largest float64 norm of 256
    consecutive elements) per step, then DDP's reduction."""

    def __init__(self) -> None:
        self.step = 0
        self.norms: dict[int, dict[int, float]] = {}
        self.peaks: dict[int, dict[int, float]] = {}

    def __call__(
        self,
        state: Any,
        bucket: dist.GradBucket,  # type: ignore[name-defined]  # (not in its stubs)
    ) -> torch.futures.Future[torch.Tensor]:
        buffer = bucket.buffer()
        norm = float(torch.linalg.vector_norm(buffer, dtype=torch.float64))
        self.norms.setdefault(self.step, {})[bucket.index()] = norm
        rows = torch.split(buffer.reshape(-1).double(), 256)
        peak = max(float(torch.linalg.vector_norm(row)) for row in rows)
        self.peaks.setdefault(self.step, {})[bucket.index()] = peak
        return allreduce_hook(state, bucket)


def job(out: Path, scenario: str, steps: int) -> None:
    info = detect()
    torch.manual_seed(0)  # the same initial parameters on every rank (DDP checks it too)
    large = scenario.endswith("_large")
    model = DistributedDataParallel(
        WideNet() if large else Net(),
        bucket_cap_mb=None if large else BUCKET_MB,
        gradient_as_bucket_view=scenario.endswith("_view"),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(1)
    rows = steps * BATCH * info.world_size
    images = torch.randn(rows, 16, generator=generator)
    labels = torch.randint(0, 3, (rows,), generator=generator)
    share = slice(info.rank, None, info.world_size)
    loader = DataLoader(TensorDataset(images[share], labels[share]), batch_size=BATCH)
    hook = UserHook() if scenario in ("chained", "early", "chained_large") else None
    if hook is not None and scenario == "early":
        model.register_comm_hook(dist.group.WORLD, hook.__call__)
    steps_done = [0]

    def corrupt(gradient: torch.Tensor) -> torch.Tensor:
        if steps_done[0] == CORRUPT_STEP and info.rank == CORRUPT_RANK:
            gradient = gradient.clone()
            gradient.view(-1)[5] *= CORRUPT_FACTOR
        return gradient

    if scenario == "corrupt":
        model.module.fc2.weight.register_hook(corrupt)
    squares: dict[int, float] = {}  # step -> the local gradient's float64 sum of squares
    accumulate = scenario.endswith("_accum")
    accumulated: dict[int, torch.Tensor] = {}  # id(parameter) -> its first half's gradient
    first_half = [False]  # a first half's backward under way (its gradients are not summed)

    def square(parameter: nn.Parameter) -> Any:
        def add(gradient: torch.Tensor) -> None:
            if first_half[0]:
                return
            local = gradient.double() + accumulated.pop(id(parameter), 0.0)
            total = float(local.square().sum())
            squares[steps_done[0]] = squares.get(steps_done[0], 0.0) + total

        return add

    if scenario in ("probe_large", "probe_accum"):
        for parameter in model.module.parameters():
            parameter.register_hook(square(parameter))

    def step(batch: list[torch.Tensor]) -> torch.Tensor:
        steps_done[0] += 1
        if hook is not None:
            # Training has begun: the collector's probe is in place, and chains this hook.
            if hook.step == 0 and scenario != "early":
                model.register_comm_hook(dist.group.WORLD, hook.__call__)
            hook.step += 1
        optimizer.zero_grad()
        images, labels = batch
        if accumulate:
            half = len(images) // 2
            first_half[0] = True
            with model.no_sync():  # the first half: no reduce, its gradients accumulate
                functional.cross_entropy(model(images[:half]), labels[:half]).backward()
            first_half[0] = False
            accumulated.update(
                (id(parameter), parameter.grad.double().clone())
                for parameter in model.module.parameters()
                if parameter.grad is not None
            )
            images, labels = images[half:], labels[half:]
        loss = functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    directory = out / scenario
    verdicts: list[Any] = []  # what rank 0's live view hands on_verdict
    collector = SummaryCollector(
        directory,
        collect_freq=COLLECT_FREQ,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=60.0,
        gradient_probe=not scenario.startswith("plain"),
        job_view_interval=LIVE_INTERVAL,
        on_verdict=verdicts.append,
    )
    TrainLoop(step, network=model, optimizer=optimizer).train(1, loader, callbacks=[collector])
    collector.close()
    parameters = {
        name: value.detach().reshape(-1).tolist() for name, value in model.named_parameters()
    }
    norms, peaks = ({}, {}) if hook is None else (hook.norms, hook.peaks)
    (directory / f"rank_{info.rank}.json").write_text(
        json.dumps(
            {
                "parameters": parameters,
                "norms": norms,
                "peaks": peaks,
                "verdicts": verdicts,
                "squares": squares,
            }
        )
    )


def main() -> None:
    out, scenario = Path(sys.argv[1]), sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    dist.init_process_group("gloo")
    for name in scenario.split(","):
        job(out, name, steps)
    dist.destroy_process_group()
    print(f"rank {detect().rank} done", flush=True)


if __name__ == "__main__":
    main()
