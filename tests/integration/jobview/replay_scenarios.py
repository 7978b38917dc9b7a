"""A 2-rank live job whose rank 1's tree channel repeats and reorders its messages.

    python -m mpi4py replay_scenarios.py <out_dir> <steps> <interval> clean|faulted

Both ranks train as live_scenarios.py does (``script/rank_value``: rank + step /
1000), with a ``job_view_interval`` longer than the training, so every round's
message waits in rank 0's view until the end of training writes it. With
``faulted``, rank 1's channel puts on the wire (below the envelope: what a
transport that repeats or reorders would deliver) its 2nd message twice (a
duplicate), its 4th before its 3rd (two rounds swapped) and, after its 5th, its
1st again (a replay of an earlier round), and rank 0 finds hostile control files
in the job directory while it trains (:data:`CONTROL_FILES`: 2,000 nested brackets,
a number of 4,000 digits, bytes that are not text), each of which must be one
warning, the live view going on. The job's files must be those of a ``clean`` run
(test_mpi_replay.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.ranks import detect
from rankscribe.ranks.tree import TreeChannel

STEP_SECONDS = 0.02
SCRIPT_TAG = "script/rank_value"
CONTROL_NAME = ".rankscribe-control.json"  # rankscribe.jobview.feed.CONTROL_NAME
#: step -> what rank 0 of a faulted job puts in the control file at that step.
CONTROL_FILES = {
    100: b"[" * 2000 + b"]" * 2000,
    300: b'{"confidence": 1' + b"0" * 4000 + b"}",
    500: bytes(range(256)) * 8,
}


class RepeatingWire:
    """A channel's own ``_send`` (envelope, deadline, backoff), with repeats and a swap."""

    def __init__(self, send: Callable[..., bool]) -> None:
        self.send = send
        self.sent: list[bytes] = []
        self.held: bytes | None = None

    def __call__(self, envelope: bytes, *wait: Any) -> bool:
        self.sent.append(envelope)
        number = len(self.sent)
        if number == 3:
            print("rank 1: holds message 3 back", flush=True)
            self.held = envelope
            return True
        delivered = self.send(envelope, *wait)
        if number == 2:
            print("rank 1: sends message 2 twice", flush=True)
            delivered = self.send(envelope, *wait) and delivered
        if number == 4 and self.held is not None:
            print("rank 1: sends message 3 after message 4", flush=True)
            delivered = self.send(self.held, *wait) and delivered
        if number == 5:
            print("rank 1: sends message 1 again", flush=True)
            delivered = self.send(self.sent[0], *wait) and delivered
        return delivered


def repeat_and_reorder() -> None:
    """Rank 1's channel, whichever transport it is, goes through a RepeatingWire."""
    original = TreeChannel.send

    def send(
        self: TreeChannel,
        round_number: int,
        payload: bytes,
        timeout: float,
        *,
        prompt: bool = False,
    ) -> bool:
        if not isinstance(vars(self).get("_send"), RepeatingWire):
            self._send = RepeatingWire(self._send)  # type: ignore[method-assign,assignment]
        return original(self, round_number, payload, timeout, prompt=prompt)

    TreeChannel.send = send  # type: ignore[method-assign]


def main() -> None:
    out, steps, interval = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    faulted = sys.argv[4] == "faulted"
    info = detect()
    if faulted and info.rank == 1:
        repeat_and_reorder()
    rng = np.random.default_rng(0)
    network = ArrayNetwork(
        {"fc.weight": rng.normal(size=(4, 3)).astype(np.float32)}, name="TinyNet"
    )
    optimizer = ArrayOptimizer(network, learning_rate=0.05, name="SGD")
    rows = steps * info.world_size
    data = ArrayDataset(
        rng.random((rows, 1, 4, 4)).astype(np.float32), rng.integers(0, 3, rows), batch_size=1
    ).shard(info.world_size, info.rank)
    collector = SummaryCollector(
        out,
        collect_freq=1,
        merge_timeout=20.0,
        collect_specified_data={"collect_landscape": None},
        job_view_interval=interval,
        # Each rank's cost budget decides from its own clocks: on a crowded machine one
        # rank of one job may shed its fingerprint and not the other, which changes the
        # ranks counted at its steps, the one thing the test compares between the jobs.
        cost_budget="off",
    )
    done = [0]

    def step(batch: Any) -> np.float32:
        done[0] += 1
        hostile = CONTROL_FILES.get(done[0]) if faulted and info.rank == 0 else None
        if hostile is not None:
            staged = out / f"{CONTROL_NAME}.{done[0]}"
            staged.write_bytes(hostile)
            staged.replace(out / CONTROL_NAME)  # whole, never read half-written
            print(f"rank 0: a hostile control file at step {done[0]}", flush=True)
        record = collector.record
        assert record is not None
        record.add_value("scalar", SCRIPT_TAG, float(info.rank + done[0] / 1000))
        time.sleep(STEP_SECONDS)
        return np.float32(1.0 + info.rank)

    TrainLoop(step, network=network, optimizer=optimizer).train(1, data, callbacks=[collector])
    collector.close()
    print(f"rank {info.rank}: done", flush=True)


if __name__ == "__main__":
    main()
