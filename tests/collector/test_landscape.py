"""Landscape parameter files and train_metadata.json (written once per run, under a lock)."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from rankscribe.collector import ArrayNetwork, SummaryCollector, TrainLoop

# private: the collect_specified_data normalisation rule, no public door
from rankscribe.collector.collection._options import process_specified_data

# private: the landscape saver's file rule, no public door
from rankscribe.collector.landscape import _saver as _landscape


def test_default_collection_saves_steps_1_to_19(model: Any, tmp_path: Path) -> None:
    data = model(12)

    def step(batch: Any) -> float:
        data.network["fc.bias"][:] += 1.0
        return 0.5

    TrainLoop(step, network=data.network, optimizer=data.optimizer).train(
        2, data.dataset, callbacks=[SummaryCollector(tmp_path)]
    )
    directory = tmp_path / "ckpt_dir"
    metadata = json.loads((directory / "train_metadata.json").read_text())
    files = metadata.pop("model_params_file_map")
    assert metadata == {
        "epoch_group": {"0": list(range(1, 10)), "1": list(range(10, 20))},
        "step_per_epoch": 12,
        "unit": "step",
        "num_samples": 2048,
        "landscape_size": 40,
        "create_landscape": {"train": True, "result": True},
    }
    assert sorted(files, key=int) == [str(step) for step in range(1, 20)]
    assert files["7"] == str(directory / "TinyNet_7_step.ckpt")
    saved = load_file(files["7"])
    assert sorted(saved) == sorted(name for name, _ in data.network.named_parameters())
    np.testing.assert_array_equal(saved["fc.bias"], np.full(3, 7.0, np.float32))
    assert stat.S_IMODE(os.stat(files["7"]).st_mode) == 0o400
    assert stat.S_IMODE(os.stat(directory / "train_metadata.json").st_mode) == 0o400
    assert not [name for name in os.listdir(directory) if name.endswith(".tmp")]


def test_epoch_unit(model: Any, tmp_path: Path) -> None:
    data = model(2)
    specified = {"collect_landscape": {"unit": "epoch", "intervals": [[1, 2, 3]]}}
    TrainLoop(lambda batch: 0.5, network=data.network).train(
        4, data.dataset, callbacks=[SummaryCollector(tmp_path, collect_specified_data=specified)]
    )
    metadata = json.loads((tmp_path / "ckpt_dir" / "train_metadata.json").read_text())
    assert sorted(metadata["model_params_file_map"]) == ["1", "2", "3"]
    assert metadata["unit"] == "epoch" and metadata["epoch_group"] == {"0": [1, 2, 3]}
    assert sorted(os.listdir(tmp_path / "ckpt_dir")) == [
        "TinyNet_1_epoch.ckpt",
        "TinyNet_2_epoch.ckpt",
        "TinyNet_3_epoch.ckpt",
        "train_metadata.json",
    ]  # the lock file is gone once released


def test_no_landscape_without_collect_landscape(model: Any, tmp_path: Path) -> None:
    data = model(2)
    TrainLoop(lambda batch: 0.5, network=data.network).train(
        1,
        data.dataset,
        callbacks=[SummaryCollector(tmp_path, collect_specified_data={"collect_landscape": None})],
    )
    assert not (tmp_path / "ckpt_dir").exists()


def saver(directory: Path, **landscape: Any) -> _landscape.LandscapeSaver:
    specified = {"collect_landscape": landscape} if landscape else None
    options = process_specified_data(specified, True).landscape
    assert options is not None
    return _landscape.LandscapeSaver(directory, options)


def test_metadata_is_written_once_by_concurrent_writers(tmp_path: Path) -> None:
    savers = [saver(tmp_path) for _ in range(6)]
    for index, item in enumerate(savers):
        item.files["1"] = f"from-{index}"
    barrier = threading.Barrier(len(savers))
    results: list[bool] = []

    def write(item: _landscape.LandscapeSaver) -> None:
        barrier.wait(timeout=10)
        results.append(item.write_metadata(5))

    threads = [threading.Thread(target=write, args=(item,)) for item in savers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == [False] * 5 + [True]
    metadata = json.loads((tmp_path / "ckpt_dir" / "train_metadata.json").read_text())
    assert metadata["model_params_file_map"]["1"] in {f"from-{i}" for i in range(6)}


def test_a_concurrent_writer_keeps_the_first_metadata(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Two savers of one run's directory (no start_training between them): the first wins.
    # A second *run* clears the first run's files first (test_landscape_runs.py).
    first, second = saver(tmp_path), saver(tmp_path)
    first.files["1"], second.files["1"] = "first", "second"
    assert first.write_metadata(3) and not second.write_metadata(3)
    metadata = json.loads((tmp_path / "ckpt_dir" / "train_metadata.json").read_text())
    assert metadata["model_params_file_map"] == {"1": "first"}
    assert "already exists; it is kept as it is" in caplog.text


def test_a_network_without_parameters_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    item = saver(tmp_path)
    assert item.save(1, object()) is None
    assert item.save(1, None) is None
    assert "Saving the landscape parameters of step 1 failed" in caplog.text
    assert item.files == {}


def test_files_hold_their_step_and_one_that_failed_is_left_out_of_the_metadata(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = _landscape.atomic_write

    def full_disk_at_step_2(path: Any, chunks: Any, **options: Any) -> str:
        if str(path).endswith("_2_step.ckpt"):
            raise OSError(28, "No space left on device")
        return real_write(path, chunks, **options)

    monkeypatch.setattr(_landscape, "atomic_write", full_disk_at_step_2)
    item = saver(tmp_path, intervals=[[1, 2, 3]])
    network = ArrayNetwork({"w": np.zeros(3, np.float32)}, name="Net")
    for step in (1, 2, 3):
        network["w"][:] = step
        assert item.wants(step)
        assert item.save(step, network) == str(tmp_path / "ckpt_dir" / f"Net_{step}_step.ckpt")
        assert not item.wants(step)  # being written: not saved a second time
    network["w"][:] = 9  # after the last save: no file holds it
    assert item.write_metadata(3)
    metadata = json.loads((tmp_path / "ckpt_dir" / "train_metadata.json").read_text())
    files = metadata["model_params_file_map"]
    assert sorted(files) == ["1", "3"]
    for step in ("1", "3"):
        np.testing.assert_array_equal(load_file(files[step])["w"], np.full(3, int(step)))
    assert not (tmp_path / "ckpt_dir" / "Net_2_step.ckpt").exists()
    assert (
        "Saving the landscape parameters of step 2 failed: [Errno 28] No space left on device"
    ) in caplog.text


def test_wants_only_unsaved_numbers_in_an_interval(tmp_path: Path) -> None:
    item = saver(tmp_path, intervals=[[2, 4, 6]])
    assert [number for number in range(1, 8) if item.wants(number)] == [2, 4, 6]
    item.files["4"] = "x"
    assert not item.wants(4)
