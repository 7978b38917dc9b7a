"""A base dir as training leaves it: single-process runs and a 2-rank job, merged offline.

Everything is written through the public APIs a training script uses: the
writer's SummaryRecord for the scalars and the lineage, and
``merge_run_dir`` for the job's merged lineage, job view and verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from rankscribe.lineage import merge_run_dir
from rankscribe.lineage.recording import (
    Algorithm,
    EvalLineageInfo,
    HyperParameters,
    TrainDataset,
    TrainLineageInfo,
    UserDefinedInfo,
)
from rankscribe.writer import SummaryRecord

SINGLE_RUNS = {
    "run-adam": ("Adam", 0.01),
    "run-sgd": ("SGD", 0.1),
    "run-momentum": ("Momentum", 0.05),
}
JOB = "job-2ranks"
JOB_STEPS = 1500  # more than the default 1,000 drawn points: the job's curves get thinned
SINGLE_STEPS = 60


@dataclass
class Base:
    path: Path
    runs: list[str]  # every run's name, as the report's table shows it
    job: str


def add_lineage(
    record: SummaryRecord,
    optimizer: str,
    lr: float,
    *,
    device_num: int,
    loss: float,
    accuracy: float,
    seed: int,
) -> None:
    train = TrainLineageInfo(
        hyper_parameters=HyperParameters(
            optimizer=optimizer,
            learning_rate=lr,
            epoch=3,
            batch_size=32,
            device_num=device_num,
        ),
        train_dataset=TrainDataset(train_dataset_path="/data/digits", train_dataset_size=1437),
        algorithm=Algorithm(network="MLP", loss=loss),
    )
    record.add_value("train_lineage", "train", train.to_proto())
    evaluation = EvalLineageInfo.from_metrics({"accuracy": accuracy})
    record.add_value("eval_lineage", "eval", evaluation.to_proto())
    record.add_value(
        "custom_lineage_data", "custom", UserDefinedInfo.from_values({"seed": seed}).to_proto()
    )


def curve(step: int, rate: float) -> float:
    return 2.3 * math.exp(-rate * step) + 0.05 * math.sin(step)


def write_single_run(directory: Path, optimizer: str, lr: float, seed: int) -> None:
    with SummaryRecord(directory) as record:
        for step in range(1, SINGLE_STEPS + 1):
            record.add_value("scalar", "loss", curve(step, lr))
            record.add_value("scalar", "accuracy", 1 - curve(step, lr) / 2.5)
            record.record(step)
        final = curve(SINGLE_STEPS, lr)
        add_lineage(
            record, optimizer, lr, device_num=1, loss=final, accuracy=1 - final / 2.5, seed=seed
        )
        record.record(SINGLE_STEPS)


def write_job(directory: Path, *, straggler: int = 1) -> None:
    """Two ranks; ``straggler`` takes twice as long per step (a chronic straggler)."""
    for rank in range(2):
        with SummaryRecord(directory / f"rank_{rank}", rank=rank) as record:
            for step in range(1, JOB_STEPS + 1):
                record.add_value("scalar", "loss", curve(step, 0.002) + 0.01 * rank)
                slow = 2.0 if rank == straggler else 1.0
                record.add_value(
                    "scalar", "rankscribe/step_time", slow * (0.01 + 0.001 * (step % 7))
                )
                if step % 10 == 0:
                    record.add_value("scalar", "rankscribe/param_fingerprint", float(step))
                    record.add_value("scalar", "accuracy", 1 - curve(step, 0.002) / 2.5)
                record.record(step)
            final = curve(JOB_STEPS, 0.002)
            add_lineage(
                record, "Momentum", 0.02, device_num=2, loss=final, accuracy=1 - final / 2.5, seed=7
            )
            record.record(JOB_STEPS)
    merge_run_dir(directory, world_size=2)


@pytest.fixture(scope="session")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    root = tmp_path_factory.mktemp("base")
    for seed, (name, (optimizer, lr)) in enumerate(SINGLE_RUNS.items()):
        write_single_run(root / name, optimizer, lr, seed)
    write_job(root / JOB)
    return Base(root, sorted([*SINGLE_RUNS, JOB]), JOB)
