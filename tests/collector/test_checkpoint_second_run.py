"""One ModelCheckpoint used for two training runs: the second run is saved too."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    CheckpointConfig,
    ModelCheckpoint,
    TrainLoop,
    load_checkpoint,
)


def train_twice(tmp_path: Path, keep: int) -> tuple[ModelCheckpoint, list[str], list[str]]:
    weights = {"w": np.zeros(3, dtype=np.float32)}
    network = ArrayNetwork(weights)
    dataset = ArrayDataset(np.arange(8.0), batch_size=2)  # 4 steps an epoch

    def step(batch: tuple[np.ndarray]) -> float:
        weights["w"] += 1.0
        return float(batch[0].mean())

    saver = ModelCheckpoint(
        prefix="net",
        directory=tmp_path,
        config=CheckpointConfig(save_checkpoint_steps=2, keep_checkpoint_max=keep),
    )
    loop = TrainLoop(step, network=network)
    loop.train(1, dataset, callbacks=[saver])
    first = sorted(path.name for path in tmp_path.glob("*.ckpt"))
    loop.train(1, dataset, callbacks=[saver])
    both = sorted(path.name for path in tmp_path.glob("*.ckpt"))
    return saver, first, both


def test_the_second_run_saves_under_a_fresh_prefix_and_keeps_the_first(tmp_path: Path) -> None:
    saver, first, both = train_twice(tmp_path, keep=5)
    assert first == ["net-1_2.ckpt", "net-1_4.ckpt"]
    assert both == ["net-1_2.ckpt", "net-1_4.ckpt", "net_1-1_2.ckpt", "net_1-1_4.ckpt"]
    assert saver.prefix == "net_1"
    assert saver.latest_ckpt_file_name == str(tmp_path / "net_1-1_4.ckpt")
    parameters, _ = load_checkpoint(saver.latest_ckpt_file_name)
    np.testing.assert_array_equal(parameters["w"], np.full(3, 8.0))  # after 8 steps in all


def test_retention_counts_each_runs_own_files(tmp_path: Path) -> None:
    _, first, both = train_twice(tmp_path, keep=1)
    assert first == ["net-1_4.ckpt"]
    # The second run keeps its newest file and leaves the first run's alone.
    assert both == ["net-1_4.ckpt", "net_1-1_4.ckpt"]
