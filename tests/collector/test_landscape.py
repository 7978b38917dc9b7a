"""Landscape parameter files and train_metadata.json (written once per run, under a lock)."""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from rankscribe.collector import (
    ArrayNetwork,
    CallbackParams,
    RunContext,
    SummaryCollector,
    TrainLoop,
)


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


def run_steps(
    collectors: list[SummaryCollector],
    network: Any,
    steps: list[int],
    before: Any = None,
    begin: bool = True,
) -> None:
    """Drive ``collectors`` through ``steps`` of one epoch, as a training loop would.

    ``before(step)`` runs ahead of each step's callbacks (to change the parameters);
    ``begin=False`` goes on with a training already begun.
    """

    def context(step: int) -> RunContext:
        params = CallbackParams(
            mode="train",
            epoch_num=1,
            batch_num=10,
            cur_step_num=step,
            cur_epoch_num=1,
            train_network=network,
            net_outputs=0.5,
        )
        return RunContext(params)

    for item in collectors if begin else ():
        item.begin(context(steps[0]))
    for step in steps:
        if before is not None:
            before(step)
        for item in collectors:
            item.step_end(context(step))


def landscape_collector(directory: Path, intervals: list[list[int]]) -> SummaryCollector:
    specified = {"collect_landscape": {"intervals": intervals}}
    return SummaryCollector(directory, collect_specified_data=specified)


def file_map(directory: Path) -> dict[str, str]:
    metadata = json.loads((directory / "ckpt_dir" / "train_metadata.json").read_text())
    files: dict[str, str] = metadata["model_params_file_map"]
    return files


def test_metadata_is_written_once_by_concurrent_writers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Six collectors of one directory end their training at once: one metadata file.
    networks = [ArrayNetwork({"w": np.zeros(2, np.float32)}, name=f"Net{i}") for i in range(6)]
    collectors = [landscape_collector(tmp_path, [[1, 2, 3]]) for _ in networks]
    for item, network in zip(collectors, networks, strict=True):
        run_steps([item], network, [1])
    barrier = threading.Barrier(len(collectors))
    failures: list[BaseException] = []

    def end(item: SummaryCollector, network: Any) -> None:
        try:
            barrier.wait(timeout=10)
            item.end(RunContext(CallbackParams(mode="train", train_network=network)))
        except BaseException as error:  # reported below, not lost in the thread
            failures.append(error)

    threads = [
        threading.Thread(target=end, args=(item, network))
        for item, network in zip(collectors, networks, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # Training ended in those threads, which cannot put SIGTERM's default handler back
    # (Python sets handlers from the main thread only): the handler left acts as the
    # default (tests/ranks/test_exits.py); the test's process gets the default back.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert failures == []
    assert caplog.text.count("train_metadata.json already exists; it is kept as it is") == 5
    [written] = file_map(tmp_path).values()
    assert written in {str(tmp_path / "ckpt_dir" / f"Net{i}_1_step.ckpt") for i in range(6)}


def test_a_concurrent_writer_keeps_the_first_metadata(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Two collectors of one run's directory (no start of training between their ends):
    # the first to end wins. A second *run* clears the first run's files first
    # (test_landscape_runs.py).
    first, second = (
        ArrayNetwork({"w": np.zeros(2, np.float32)}, name=name) for name in ("First", "Second")
    )
    collectors = [landscape_collector(tmp_path, [[1, 2, 3]]) for _ in range(2)]
    run_steps(collectors[:1], first, [1])
    run_steps(collectors[1:], second, [1])
    collectors[0].end(RunContext(CallbackParams(mode="train", train_network=first)))
    collectors[1].end(RunContext(CallbackParams(mode="train", train_network=second)))
    assert file_map(tmp_path) == {"1": str(tmp_path / "ckpt_dir" / "First_1_step.ckpt")}
    assert "already exists; it is kept as it is" in caplog.text


@pytest.mark.parametrize("network", [object(), None], ids=["no-parameters", "none"])
def test_a_network_without_parameters_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, network: Any
) -> None:
    item = landscape_collector(tmp_path, [[1, 2, 3]])
    run_steps([item], network, [1, 2, 3])
    item.end(RunContext(CallbackParams(mode="train", train_network=network)))
    assert file_map(tmp_path) == {}
    assert [name for name in os.listdir(tmp_path / "ckpt_dir") if name.endswith(".ckpt")] == []
    if network is not None:  # a network that cannot be read is named; no network, nothing
        assert "Saving the landscape parameters of step 1 failed" in caplog.text


def test_files_hold_their_step_and_one_that_failed_is_left_out_of_the_metadata(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def full_disk_at_step_2(path: Any, flags: int, *args: Any, **options: Any) -> int:
        # The landscape file's temporary (.Net_2_step.ckpt.<random>.tmp) cannot be created.
        if "Net_2_step.ckpt" in os.fspath(path):
            raise OSError(28, "No space left on device")
        return real_open(path, flags, *args, **options)

    monkeypatch.setattr(os, "open", full_disk_at_step_2)
    item = landscape_collector(tmp_path, [[1, 2, 3]])
    network = ArrayNetwork({"w": np.zeros(3, np.float32)}, name="Net")

    def set_parameters(step: int) -> None:
        network["w"][:] = step

    run_steps([item], network, [1, 2, 3], before=set_parameters)
    network["w"][:] = 9  # after the last save: no file holds it
    run_steps([item], network, [3], begin=False)  # step 3 again: saved already, not a second time
    item.end(RunContext(CallbackParams(mode="train", train_network=network)))
    files = file_map(tmp_path)
    assert sorted(files) == ["1", "3"]
    for step in ("1", "3"):
        assert files[step] == str(tmp_path / "ckpt_dir" / f"Net_{step}_step.ckpt")
        np.testing.assert_array_equal(load_file(files[step])["w"], np.full(3, int(step)))
    assert not (tmp_path / "ckpt_dir" / "Net_2_step.ckpt").exists()
    assert (
        "Saving the landscape parameters of step 2 failed: [Errno 28] No space left on device"
    ) in caplog.text


def test_only_the_numbers_of_an_interval_are_saved(tmp_path: Path) -> None:
    item = landscape_collector(tmp_path, [[2, 4, 6]])
    network = ArrayNetwork({"w": np.zeros(3, np.float32)}, name="Net")
    run_steps([item], network, list(range(1, 8)))
    item.end(RunContext(CallbackParams(mode="train", train_network=network)))
    assert sorted(file_map(tmp_path), key=int) == ["2", "4", "6"]
    assert sorted(os.listdir(tmp_path / "ckpt_dir")) == [
        "Net_2_step.ckpt",
        "Net_4_step.ckpt",
        "Net_6_step.ckpt",
        "train_metadata.json",
    ]


class WithLossCell:
    """MindSpore's loss wrapper: the network it wraps is its ``_backbone``."""

    def __init__(self, backbone: Any) -> None:
        self._backbone = backbone


class TrainOneStepCell:
    def __init__(self, network: Any) -> None:
        self.network = network


def test_files_are_named_after_the_backbone_the_train_network_wraps(tmp_path: Path) -> None:
    # As MindSpore's SummaryCollector: a run that gives only its train network saves
    # the backbone's parameters, in files named after the backbone.
    backbone = ArrayNetwork({"fc.weight": np.ones((2, 2), np.float32)}, name="LeNet5")
    collector = landscape_collector(tmp_path, [[1, 2, 3]])
    run_steps([collector], TrainOneStepCell(WithLossCell(backbone)), [1, 2, 3])
    collector.end(RunContext(CallbackParams(mode="train", train_network=backbone)))
    files = file_map(tmp_path)
    assert files == {
        str(step): str(tmp_path / "ckpt_dir" / f"LeNet5_{step}_step.ckpt") for step in (1, 2, 3)
    }
    assert sorted(load_file(files["2"])) == ["fc.weight"]
