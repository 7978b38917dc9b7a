#!/usr/bin/env python3
"""Writer throughput against tensorboardX, on the same work, in the same process run.

    tox -e bench                      # or: python tools/bench/writer.py [--quick]

Each workload is run alternately by RankScribe's SummaryRecord and by
tensorboardX's SummaryWriter, best of --repeat runs each; a run is timed from
the first call to the end of close(), so everything is on disk. Printed per
workload: both rates, the ratio ours/theirs, and what our calls cost the
training thread (time spent inside add_value + record). Also printed: the rate
of plain file writes of the tensor workload's bytes, the process's CPU a block of
the timing columns when one comes every 50 ms (as the collector's come between
training steps, the writer's thread woken for each), and the CPU an idle open
writer uses.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.proto.tensor_pb2 import TensorProto
from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto

from rankscribe.writer import SummaryRecord


@dataclass
class Timing:
    seconds: float  # first call to end of close()
    caller_seconds: float  # inside our add_value + record (tensorboardX: inside add_*)


@dataclass
class Workload:
    name: str
    unit: str
    count: int
    ours: Callable[[SummaryRecord, int], None]
    theirs: Callable[[SummaryWriter, int], None]
    bytes_per_item: int = 0


def _timed(
    make: Callable[[str], object],
    step: Callable[[object, int], None],
    count: int,
    close: Callable[[object], None],
) -> Timing:
    directory = tempfile.mkdtemp(prefix="rankscribe-bench-")
    try:
        writer = make(directory)
        caller = 0.0
        start = time.perf_counter()
        for index in range(count):
            before = time.perf_counter()
            step(writer, index)
            caller += time.perf_counter() - before
        close(writer)
        return Timing(time.perf_counter() - start, caller)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _close(writer: object) -> None:
    writer.close()  # type: ignore[attr-defined]


def _ours(workload: Workload) -> Timing:
    return _timed(SummaryRecord, workload.ours, workload.count, _close)  # type: ignore[arg-type]


def _theirs(workload: Workload) -> Timing:
    return _timed(SummaryWriter, workload.theirs, workload.count, _close)  # type: ignore[arg-type]


def _workloads(quick: bool) -> list[Workload]:
    scale = 10 if quick else 1
    rng = np.random.default_rng(0)
    histogram = rng.standard_normal(1_000_000).astype(np.float32)
    picture = rng.random((3, 224, 224), dtype=np.float32)
    batch = picture[None]
    tensor = rng.standard_normal(1_000_000).astype(np.float32)  # 4 MB

    def scalar_ours(record: SummaryRecord, step: int) -> None:
        record.add_value("scalar", "loss", 0.5 + step * 1e-6)
        record.record(step)

    def scalar_theirs(writer: SummaryWriter, step: int) -> None:
        writer.add_scalar("loss", 0.5 + step * 1e-6, step)

    # The collector's kept timings: every 256 quiet steps, two names' columns in one call
    # (SummaryRecord.write_scalar_columns); the peer adds each point.
    block = 256
    timings = rng.random((2, block)) * 1e-2

    def columns_ours(record: SummaryRecord, index: int) -> None:
        steps = array("q", range(index * block, (index + 1) * block))
        record.write_scalar_columns(
            {
                "rankscribe/step_time": (steps, array("d", timings[0])),
                "rankscribe/data_wait": (steps, array("d", timings[1])),
            }
        )

    def columns_theirs(writer: SummaryWriter, index: int) -> None:
        for offset in range(block):
            step = index * block + offset
            writer.add_scalar("rankscribe/step_time", timings[0, offset], step)
            writer.add_scalar("rankscribe/data_wait", timings[1, offset], step)

    # Between two records of a fast step's collector: 4,096 steps of four names, not all
    # at every step (a data wait from each epoch's second step, the loss every 10th):
    # steps of four sets of names.
    mixed = 4096
    mixed_values = rng.random((4, mixed)) * 1e-2

    def mixed_columns(index: int) -> dict[str, tuple[array[int], array[float]]]:
        first = index * mixed
        every = array("q", range(first, first + mixed))
        waited = array("q", (step for step in every if step % 44))
        loss = array("q", range(first, first + mixed, 10))
        return {
            "rankscribe/step_time": (every, array("d", mixed_values[0])),
            "rankscribe/data_wait": (waited, array("d", mixed_values[1, : len(waited)])),
            "rankscribe/section/compute": (every, array("d", mixed_values[2])),
            "loss/auto": (loss, array("d", mixed_values[3, : len(loss)])),
        }

    def mixed_ours(record: SummaryRecord, index: int) -> None:
        record.write_scalar_columns(mixed_columns(index))

    def mixed_theirs(writer: SummaryWriter, index: int) -> None:
        for name, (steps, values) in mixed_columns(index).items():
            for step, value in zip(steps, values, strict=True):
                writer.add_scalar(name, value, step)

    def histogram_ours(record: SummaryRecord, step: int) -> None:
        record.add_value("histogram", "weights", histogram)
        record.record(step)

    def histogram_theirs(writer: SummaryWriter, step: int) -> None:
        writer.add_histogram("weights", histogram, step)

    def image_ours(record: SummaryRecord, step: int) -> None:
        record.add_value("image", "input", batch)
        record.record(step)

    def image_theirs(writer: SummaryWriter, step: int) -> None:
        writer.add_image("input", picture, step)

    def tensor_ours(record: SummaryRecord, step: int) -> None:
        record.add_value("tensor", "activations", tensor)
        record.record(step)

    def tensor_theirs(writer: SummaryWriter, step: int) -> None:
        # tensorboardX has no public tensor call; this is how its own add_mesh
        # encodes a float tensor.
        proto = TensorProto(
            dtype="DT_FLOAT",
            float_val=tensor.reshape(-1).tolist(),
            tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=tensor.size)]),
        )
        writer._get_file_writer().add_summary(  # the peer's own path
            Summary(value=[Summary.Value(tag="activations", tensor=proto)]), step
        )

    return [
        Workload("scalar steps", "steps/s", 100_000 // scale, scalar_ours, scalar_theirs),
        Workload("256-step timing columns", "blk/s", 400 // scale, columns_ours, columns_theirs),
        Workload("4096 steps, mixed names", "blk/s", 40 // scale or 4, mixed_ours, mixed_theirs),
        Workload(
            "1M-float32 histograms", "hist/s", 40 // scale or 4, histogram_ours, histogram_theirs
        ),
        Workload("3x224x224 images", "img/s", 200 // scale, image_ours, image_theirs),
        Workload(
            "4 MB float32 tensors",
            "MB/s",
            100 // scale,
            tensor_ours,
            tensor_theirs,
            bytes_per_item=tensor.nbytes,
        ),
    ]


def _best(run: Callable[[Workload], Timing], workload: Workload, repeat: int) -> Timing:
    return min((run(workload) for _ in range(repeat)), key=lambda timing: timing.seconds)


def _rate(workload: Workload, timing: Timing) -> float:
    per_second = workload.count / timing.seconds
    return per_second * workload.bytes_per_item / 1e6 if workload.bytes_per_item else per_second


def _plain_write_rate(total: int, chunk: int) -> float:
    """MB/s of os.write of ``total`` bytes in ``chunk``-sized pieces, closed and fsynced."""
    data = os.urandom(chunk)
    handle, path = tempfile.mkstemp(prefix="rankscribe-bench-")
    try:
        start = time.perf_counter()
        for _ in range(total // chunk):
            os.write(handle, data)
        os.fsync(handle)
        return total / (time.perf_counter() - start) / 1e6
    finally:
        os.close(handle)
        os.unlink(path)


def _idle_cpu(seconds: float) -> float:
    directory = tempfile.mkdtemp(prefix="rankscribe-bench-")
    try:
        with SummaryRecord(directory) as record:
            record.add_value("scalar", "warmup", 1.0)
            record.record(0)
            record.flush()
            before = time.process_time()
            time.sleep(seconds)
            return time.process_time() - before
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _woken_cpu(write: Callable[[object, int], None], make: Callable[[str], object]) -> float:
    """Process CPU seconds per block of ``write``, one block every 50 ms (the writer's
    thread woken each time, its caches cold, as in training), until the file is closed."""
    blocks = 40
    directory = tempfile.mkdtemp(prefix="rankscribe-bench-")
    try:
        writer = make(directory)
        started = time.process_time()
        for index in range(blocks):
            write(writer, index)
            time.sleep(0.05)
        _close(writer)
        return (time.process_time() - started) / blocks
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the work, one run each")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    print(f"{'workload':<24}{'ours':>14}{'tensorboardX':>16}{'ratio':>8}{'our caller cost':>20}")
    for workload in _workloads(args.quick):
        ours = _best(_ours, workload, repeat)
        theirs = _best(_theirs, workload, repeat)
        rate_ours, rate_theirs = _rate(workload, ours), _rate(workload, theirs)
        per_call = ours.caller_seconds / workload.count
        cost = (
            f"{per_call * 1e6:.1f} us/call" if per_call < 1e-3 else f"{per_call * 1e3:.2f} ms/call"
        )
        print(
            f"{workload.name:<24}{rate_ours:>10.0f} {workload.unit:<4}{rate_theirs:>11.0f} "
            f"{workload.unit:<4}{rate_ours / rate_theirs:>7.1f}x{cost:>20}"
        )
        if workload.bytes_per_item:
            plain = _plain_write_rate(
                workload.bytes_per_item * workload.count, workload.bytes_per_item
            )
            print(
                f"{'  plain file writes':<24}{plain:>10.0f} MB/s   ours = "
                f"{rate_ours / plain:.0%} of plain writes"
            )
        if workload.name == "256-step timing columns":
            # What a training process pays: the blocks come between steps, 50 ms apart.
            cpu_ours = min(_woken_cpu(workload.ours, SummaryRecord) for _ in range(repeat))  # type: ignore[arg-type]
            cpu_theirs = min(_woken_cpu(workload.theirs, SummaryWriter) for _ in range(repeat))  # type: ignore[arg-type]
            print(
                f"{'  one every 50 ms':<24}{cpu_ours * 1e3:>10.2f} ms CPU{cpu_theirs * 1e3:>9.2f} "
                f"ms CPU{cpu_ours / cpu_theirs:>5.2f}x   (process CPU a block, best of runs)"
            )
    print(f"CPU used by an idle open writer in 1 s: {_idle_cpu(1.0) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
