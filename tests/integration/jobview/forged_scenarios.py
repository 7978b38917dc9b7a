"""A 2-rank live job whose rank 1 sends rank 0 hostile messages, by ``mpiexec -n 2``.

    python -m mpi4py forged_scenarios.py <out_dir> <steps> <interval>

Both ranks train as live_scenarios.py does. Rank 1's live view sends its
messages up the real tree channel, but its 2nd message names a "rank 7" (a
rank the job does not have, beside rank 1's own points) and its 3rd carries a
header nested 100,000 levels deep; every other message is its own. Rank 0
must refuse both with a warning naming rank 1 and carry on (test_mpi_forged.py).
"""

from __future__ import annotations

import io
import sys
import time
import zipfile
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
from rankscribe.jobview.protocol import JobPartial
from rankscribe.ranks import detect

STEP_SECONDS = 0.02
FORGED_RANK = 7
NESTING = 100_000


def nested_message() -> bytes:
    """A partial in the one container (docs/job-view.md, "Tree": an ``.npz`` of a
    ``document.json`` and ``.npy`` arrays), whose header is nested NESTING levels; written
    with zipfile and numpy as the container writes its entries, so that its CRCs and its
    directory are right and only the nesting is wrong."""
    nested = "[" * NESTING + "]" * NESTING
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(_entry("document.json"), nested.encode())
        for number, dtype in enumerate(("<i8", "<f8")):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.zeros(0, dtype=dtype), allow_pickle=False)
            archive.writestr(_entry(f"{number}.npy"), member.getvalue())
    return buffer.getvalue()


def _entry(name: str) -> zipfile.ZipInfo:
    """A member's entry as RankScribe writes it: a fixed date, made on Unix, mode 0600."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.create_system = 3
    info.external_attr = 0o600 << 16
    return info


def send_hostile_messages() -> None:
    """Rank 1's 2nd and 3rd messages up the tree: a forged rank, then a nested header."""
    original = JobPartial.to_bytes
    sent = [0]

    def to_bytes(self: JobPartial) -> bytes:
        sent[0] += 1
        if sent[0] == 2:
            forged = JobPartial.of_rank(FORGED_RANK, {"loss/auto": [(1, 0.5), (2, 0.25)]})
            forged.merge(self)
            print(f"rank 1: sends a message naming rank {FORGED_RANK}", flush=True)
            return original(forged)
        if sent[0] == 3:
            print("rank 1: sends a nested message", flush=True)
            return nested_message()
        return original(self)

    JobPartial.to_bytes = to_bytes  # type: ignore[method-assign]


def main() -> None:
    out, steps, interval = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    info = detect()
    if info.rank == 1:
        send_hostile_messages()
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
    )

    def step(batch: Any) -> np.float32:
        time.sleep(STEP_SECONDS)
        return np.float32(1.0 + info.rank)

    TrainLoop(step, network=network, optimizer=optimizer).train(1, data, callbacks=[collector])
    collector.close()
    print(f"rank {info.rank}: done", flush=True)


if __name__ == "__main__":
    main()
