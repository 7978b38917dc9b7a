"""One rank's side of a collector scenario, run by ``mpiexec -n N python -m mpi4py``.

    python -m mpi4py collector_scenarios.py <scenario> <out_dir> [<scenario's arguments>]

Every rank trains the same tiny NumPy model on its shard of the data with a
SummaryCollector writing into ``<out_dir>/summary`` (the script does nothing
rank-specific: the collector finds its rank itself), then writes what it saw
to ``<out_dir>/rank_<r>.json`` for the pytest side (test_mpi_collector.py).

``python -m mpi4py`` turns an uncaught exception on any rank into
``MPI_Abort``, so a failing rank ends the job instead of leaving the others
waiting; the pytest side also kills the job at its own timeout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    Callback,
    RunContext,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.ranks import detect
from rankscribe.writer import tensor_summary

EPOCHS = 2
STEPS_PER_EPOCH = 30
BATCH_SIZE = 2
COLLECT_FREQ = 3
#: The merge timeout of the scenario in which a rank is late.
SHORT_MERGE_TIMEOUT = 3.0
#: How late that rank reaches the end of training.
LATENESS = 5.0


def make_run(world_size: int, rank: int) -> tuple[ArrayNetwork, ArrayOptimizer, ArrayDataset]:
    rng = np.random.default_rng(0)  # the same model and data on every rank
    network = ArrayNetwork(
        {
            "fc.weight": rng.normal(size=(4, 3)).astype(np.float32),
            "fc.bias": np.zeros(3, np.float32),
        },
        name="TinyNet",
    )
    optimizer = ArrayOptimizer(network, learning_rate=0.05, name="Momentum")
    rows = STEPS_PER_EPOCH * BATCH_SIZE * world_size
    full = ArrayDataset(
        rng.random((rows, 1, 4, 4)).astype(np.float32),
        rng.integers(0, 3, rows),
        batch_size=BATCH_SIZE,
        path="/data/tiny",
        description={"op_type": "ArrayDataset", "batch_size": BATCH_SIZE, "children": []},
    )
    return network, optimizer, full.shard(world_size, rank)


class Unsized:
    """A shard's batches with no ``len()``: the loop cannot tell the run's length."""

    def __init__(self, batches: Any) -> None:
        self.batches = batches

    def __iter__(self) -> Any:
        return iter(self.batches)


class Late(Callback):
    """Makes this rank reach the end of training ``seconds`` late."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def end(self, run_context: RunContext) -> None:
        time.sleep(self.seconds)


def train(
    out: Path,
    merge_timeout: float,
    late: float = 0.0,
    evaluate: bool = True,
    summary: Path | None = None,
    first_loss: float = 1.0,
    unsized: bool = False,
    **options: Any,
) -> dict[str, Any]:
    info = detect()
    network, optimizer, shard = make_run(info.world_size, info.rank)
    # rank r reports loss first_loss + r: the merge averages them
    loss = float(first_loss + info.rank)

    def step(batch: Any) -> float:
        tensor_summary("weights", network["fc.weight"])
        return loss

    collector = SummaryCollector(
        out / "summary" if summary is None else summary,
        collect_freq=COLLECT_FREQ,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=merge_timeout,
        **options,
    )
    loop = TrainLoop(
        step,
        network=network,
        optimizer=optimizer,
        eval_fn=lambda batch: {"acc": 0.5 + 0.25 * info.rank},
    )
    callbacks: list[Callback] = [Late(late)] if late else []
    started = time.monotonic()
    batches: Any = Unsized(shard) if unsized else shard
    loop.train(EPOCHS, batches, callbacks=[*callbacks, collector])
    trained = time.monotonic() - started
    schedule = collector.schedule
    assert schedule is not None
    record = {
        "rank_dir": str(collector.directory),
        "summary_dir": collector.summary_dir,
        "own_tensor_units": schedule.own_tensor_units,
        "job_tensor_units": schedule.job_tensor_units,
        "train_seconds": trained,
    }
    if evaluate:
        loop.eval(shard, callbacks=[collector])
    collector.close()
    return record


def scenario_train(out: Path) -> dict[str, Any]:
    """Every rank trains and evaluates; rank 0 merges the lineage."""
    return train(out, merge_timeout=30.0)


def scenario_no_length(out: Path) -> dict[str, Any]:
    """Every rank trains over batches with no length (no rank knows its run's length)."""
    return train(out, merge_timeout=30.0, evaluate=False, unsized=True)


def scenario_late_rank(out: Path) -> dict[str, Any]:
    """The last rank reaches the end late: rank 0 merges without it, names it, and goes on."""
    info = detect()
    late = LATENESS if info.rank == info.world_size - 1 else 0.0
    return train(out, merge_timeout=SHORT_MERGE_TIMEOUT, late=late, evaluate=False)


def scenario_job(out: Path) -> dict[str, Any]:
    """A job into a summary dir another job may use: <summary_dir> <on_exists> <loss of rank 0>."""
    summary, on_exists, first_loss = sys.argv[3], sys.argv[4], float(sys.argv[5])
    return train(
        out,
        merge_timeout=30.0,
        evaluate=False,
        summary=Path(summary),
        first_loss=first_loss,
        on_exists=on_exists,
    )


#: The step at which the last rank of the ``raise`` scenario raises.
RAISING_STEP = 20


def scenario_raise(out: Path) -> dict[str, Any]:
    """Every step ends in the job's own blocking MPI collective (no timeout, as a user's
    script has); the last rank raises at RAISING_STEP. Run with plain ``python``: the
    others would wait in the collective for it, and it in ``MPI_Finalize`` for them."""
    from mpi4py import MPI  # (the collector's coordinator loaded MPI)

    info = detect()
    network, optimizer, shard = make_run(info.world_size, info.rank)
    steps = [0]

    def step(batch: Any) -> float:
        steps[0] += 1
        if info.rank == info.world_size - 1 and steps[0] == RAISING_STEP:
            raise RuntimeError(f"rank {info.rank} raises on purpose")
        return float(MPI.COMM_WORLD.allreduce(1.0))

    return train_by(step, out, network, optimizer, shard)


def train_by(
    step: Any, out: Path, network: ArrayNetwork, optimizer: ArrayOptimizer, shard: ArrayDataset
) -> dict[str, Any]:
    """TrainLoop of ``step``, with the collector as a script sets it (no landscape)."""
    collector = SummaryCollector(
        out / "summary",
        collect_freq=COLLECT_FREQ,
        collect_specified_data={"collect_landscape": None},
    )
    TrainLoop(step, network=network, optimizer=optimizer).train(
        EPOCHS, shard, callbacks=[collector]
    )
    return {}


#: The step at which every rank of the ``sigterm`` scenario is sent SIGTERM.
SIGTERM_STEP = 40


def scenario_sigterm(out: Path) -> dict[str, Any]:
    """Every rank is sent SIGTERM at SIGTERM_STEP, after the step's collective, as a
    scheduler signals every rank at its time limit; the steps are quick, so each rank
    holds steps it has not written yet."""
    import signal

    from mpi4py import MPI  # (the collector's coordinator loaded MPI)

    info = detect()
    network, optimizer, shard = make_run(info.world_size, info.rank)
    steps = [0]

    def step(batch: Any) -> float:
        steps[0] += 1
        loss = float(MPI.COMM_WORLD.allreduce(1.0))
        if steps[0] == SIGTERM_STEP:
            os.kill(os.getpid(), signal.SIGTERM)
        return loss

    return train_by(step, out, network, optimizer, shard)


def main() -> None:
    scenario, out = sys.argv[1], Path(sys.argv[2])
    info = detect()
    record = {
        "rank": info.rank,
        "world_size": info.world_size,
        **globals()[f"scenario_{scenario}"](out),
    }
    temporary = out / f".rank_{info.rank}.json.tmp"
    temporary.write_text(json.dumps(record))
    os.replace(temporary, out / f"rank_{info.rank}.json")
    print(f"rank {info.rank} of {info.world_size}: {scenario} done", flush=True)


if __name__ == "__main__":
    main()
