#!/usr/bin/env python3
"""What the collector's gradient probe costs a real DDP step (docs/gradients.md, "The probe").

    torchrun --standalone --nproc_per_node 2 tools/bench/gradient_probe.py [--steps N]
             [--reps R] [--width W] [--batch B] [--device cpu|cuda] [--verify]

Two DDP copies of one MLP (4 layers of ``width`` x ``width``, batch ``batch``) train in the
same processes, in alternating blocks of ``steps`` steps: one bare (DDP's own
reduction), one with the probe the collector installs (its communication hook:
each bucket's float64 norm and ready time, then the same reduction; its
``take`` at every step's end, as the collector's ``step_end`` calls it). Rank 0
prints each copy's median step time over the blocks and the difference, in ms
and in percent of the bare step. On CUDA the step's end waits for the device
(``torch.cuda.synchronize``) in both copies alike, so the wall step is the device's.

Rank 0 then times the probe's own work on one bucket of the model's size, alternately:
the norm with the scaling fused into its pass (what the probe does where it reduces)
against the norm's pass followed by a scaling pass (as with a chained hook of the
user's, and as the probe did before the two were fused); the median of each.

``--verify``: a third copy trains 10 steps with the probe and, chained behind it, a
hook of its own that takes each bucket's float64 norm; rank 0 prints the largest
relative difference between the two, how many norms the probe handed on (on a device,
a step or more later), and, on CUDA, that ``take`` ran under
``torch.cuda.set_sync_debug_mode("error")`` (a synchronisation there raises).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from rankscribe.collector.adapters._torch_gradients import _host_norm, gradient_probe


def mlp(width: int) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(4):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def block(model: Any, optimizer: Any, batch: Any, steps: int, probe: Any, device: str) -> float:
    """The median seconds of ``steps`` steps."""
    times = []
    for step in range(steps):
        started = time.perf_counter()
        optimizer.zero_grad()
        model(batch).square().mean().backward()
        optimizer.step()
        if probe is not None:
            probe.take(step, started)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bucket_passes(elements: int, scale: float, rounds: int) -> tuple[float, float]:
    """Median seconds of the norm and scaling of one bucket: fused, then in two passes."""
    bucket = torch.randn(elements) * 1e-3
    times: list[list[float]] = [[], []]
    for _ in range(rounds):
        started = time.perf_counter()
        _host_norm(bucket, scale)
        times[0].append(time.perf_counter() - started)
        started = time.perf_counter()
        _host_norm(bucket)
        bucket.mul_(scale)
        times[1].append(time.perf_counter() - started)
        bucket.mul_(1.0 / scale / scale)  # back to the gradient's size (both scaled it)
    fused, two = (statistics.median(values) for values in times)
    return fused, two


def verify(width: int, batch: Any, device: Any, cuda: bool) -> str:
    """The probe's norms against a chained hook's float64 norms (see the docstring)."""
    model = DistributedDataParallel(mlp(width).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    probe = gradient_probe(model)
    assert probe is not None
    expected: dict[tuple[int, int], float] = {}
    pending: list[tuple[int, int, Any]] = []
    current = [0]

    # Unannotated: DDP checks a hook's annotations, and this module's are strings.
    def reference(state, bucket):  # type: ignore[no-untyped-def]
        norm = torch.linalg.vector_norm(bucket.buffer(), dtype=torch.float64)
        pending.append((current[0], bucket.index(), norm))
        return allreduce_hook(state, bucket)

    model.register_comm_hook(None, reference)
    found: dict[tuple[int, int], float] = {}
    for step in range(1, 11):
        current[0] = step
        started = time.perf_counter()
        optimizer.zero_grad()
        model(batch).square().mean().backward()
        optimizer.step()
        if cuda:
            torch.cuda.set_sync_debug_mode("error")
        try:
            taken = probe.take(step, started)
        finally:
            if cuda:
                torch.cuda.set_sync_debug_mode("default")
        for number, norms, _ in taken:
            found.update({(number, index): norm for index, norm, _peak in norms})
    for number, norms, _ in probe.finish():
        found.update({(number, index): norm for index, norm, _peak in norms})
    expected = {(step, index): float(norm) for step, index, norm in pending}
    assert found.keys() == expected.keys(), (sorted(found), sorted(expected))
    worst = max(abs(found[key] - expected[key]) / expected[key] for key in expected)
    return f"verify: {len(found)} norms, largest relative difference {worst:.2e}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--verify", action="store_true")
    arguments = parser.parse_args()
    dist.init_process_group("nccl" if arguments.device == "cuda" else "gloo")
    rank = dist.get_rank()
    device = torch.device(arguments.device, rank) if arguments.device == "cuda" else "cpu"
    if arguments.device == "cpu":
        torch.set_num_threads(1)
    torch.manual_seed(0)
    models = [DistributedDataParallel(mlp(arguments.width).to(device)) for _ in range(2)]
    optimizers = [torch.optim.SGD(model.parameters(), lr=1e-4) for model in models]
    probe = gradient_probe(models[1])
    assert probe is not None
    batch = torch.randn(arguments.batch, arguments.width, device=device)
    medians: list[list[float]] = [[], []]
    for _ in range(arguments.reps):
        for which in (0, 1):
            medians[which].append(
                block(
                    models[which],
                    optimizers[which],
                    batch,
                    arguments.steps,
                    probe if which else None,
                    arguments.device,
                )
            )
    probe.finish()
    bare, probed = (statistics.median(values) for values in medians)
    parameters = sum(parameter.numel() for parameter in models[0].parameters())
    if rank == 0:
        print(
            f"{arguments.device}, {dist.get_world_size()} ranks, width {arguments.width}, "
            f"batch {arguments.batch} ({parameters:,} parameters): bare {bare * 1e3:.3f} ms, "
            f"probed {probed * 1e3:.3f} ms, probe {(probed - bare) * 1e3:+.3f} ms "
            f"({(probed - bare) / bare:+.2%})"
        )
    if rank == 0 and arguments.device == "cpu":
        fused, two = bucket_passes(parameters, 1.0 / dist.get_world_size(), arguments.reps * 10)
        print(
            f"one bucket of {parameters:,} elements ({parameters * 4 / 1e6:.1f} MB): norm and "
            f"scaling fused {fused * 1e3:.3f} ms, in two passes {two * 1e3:.3f} ms"
        )
    if arguments.verify:
        checked = verify(arguments.width, batch, device, arguments.device == "cuda")
        if rank == 0:
            print(checked)
    # Every rank past its last collective before any leaves the group, and the DDP
    # networks (their reducers hold the group) gone before it is destroyed: otherwise a
    # rank sometimes aborted at exit ("terminate called without an active exception").
    dist.barrier()
    del models, optimizers, probe
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
