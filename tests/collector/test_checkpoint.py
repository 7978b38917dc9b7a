"""ModelCheckpoint: file names, prefix renaming, save triggers, retention, end, append info.

Every test drives the callback like a training loop would and looks at what a
user sees: the files in the directory, what they load back as, and errors.
Time is a fake clock passed to the callback, never a sleep.
"""

from __future__ import annotations

import math
import os
import re
import signal
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import (
    CallbackParams,
    CheckpointConfig,
    CheckpointManager,
    ModelCheckpoint,
    RunContext,
    load_checkpoint,
    save_checkpoint,
)
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from tests._support.launchers import clean_environment, drop_launcher_variables, run_bounded


class FakeClock:
    """Seconds that only move when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class DictNetwork:
    """A framework-free network: a ``parameters`` dict of arrays."""

    def __init__(self) -> None:
        self.parameters = {
            "dense.weight": np.zeros((3, 2), np.float32),
            "dense.bias": np.zeros(3, np.float32),
        }

    def set_step(self, step: int) -> None:
        # In place, as an optimizer updates weights.
        for value in self.parameters.values():
            value[...] = step


def train(
    callback: ModelCheckpoint,
    network: Any,
    epochs: int,
    batch_num: int,
    clock: FakeClock | None = None,
    seconds_per_step: float = 0.0,
    mode: str = "train",
) -> CallbackParams:
    """Drive ``callback`` through ``epochs`` x ``batch_num`` steps, as a training loop."""
    params = CallbackParams(train_network=network, epoch_num=epochs, batch_num=batch_num, mode=mode)
    context = RunContext(params)
    with callback:
        callback.begin(context)
        for epoch in range(1, epochs + 1):
            params.cur_epoch_num = epoch
            callback.epoch_begin(context)
            for _ in range(batch_num):
                params.cur_step_num += 1
                if hasattr(network, "set_step"):
                    network.set_step(params.cur_step_num)
                callback.step_begin(context)
                if clock is not None:
                    clock.now += seconds_per_step
                callback.step_end(context)
            callback.epoch_end(context)
        callback.end(context)
    return params


def checkpoints(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".ckpt"))


def saved_step(path: Path) -> int:
    parameters, _ = load_checkpoint(path)
    return int(parameters["dense.bias"][0])


@pytest.fixture
def single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """No launcher variables: rank detection sees one process."""
    drop_launcher_variables(monkeypatch)


pytestmark = pytest.mark.usefixtures("single_process")


# --- names --------------------------------------------------------------------------


def test_default_config_names_files_by_epoch_and_step_in_epoch(tmp_path: Path) -> None:
    callback = ModelCheckpoint(directory=tmp_path)
    train(callback, DictNetwork(), epochs=2, batch_num=3)
    # save_checkpoint_steps=1 saves all 6 steps; keep_checkpoint_max=5 drops the first.
    assert checkpoints(tmp_path) == [
        "CKP-1_2.ckpt",
        "CKP-1_3.ckpt",
        "CKP-2_1.ckpt",
        "CKP-2_2.ckpt",
        "CKP-2_3.ckpt",
    ]
    assert saved_step(tmp_path / "CKP-2_1.ckpt") == 4
    assert saved_step(tmp_path / "CKP-2_3.ckpt") == 6


def test_custom_prefix(tmp_path: Path) -> None:
    callback = ModelCheckpoint("resnet50", tmp_path, CheckpointConfig(save_checkpoint_steps=2))
    train(callback, DictNetwork(), epochs=1, batch_num=4)
    assert checkpoints(tmp_path) == ["resnet50-1_2.ckpt", "resnet50-1_4.ckpt"]


def test_without_batch_num_the_step_is_the_global_step(tmp_path: Path) -> None:
    callback = ModelCheckpoint(directory=tmp_path, config=CheckpointConfig(keep_checkpoint_max=9))
    params = CallbackParams(train_network=DictNetwork(), cur_epoch_num=1)
    for step in (1, 2):
        params.cur_step_num = step
        callback.step_end(RunContext(params))
    assert checkpoints(tmp_path) == ["CKP-1_1.ckpt", "CKP-1_2.ckpt"]


# --- prefix renaming ----------------------------------------------------------------


def touch(directory: Path, *names: str) -> None:
    for name in names:
        (directory / name).write_bytes(b"")


def test_existing_prefix_is_renamed(tmp_path: Path) -> None:
    touch(tmp_path, "CKP-1_1.ckpt")
    callback = ModelCheckpoint(directory=tmp_path)
    assert callback.prefix == "CKP_1"
    train(callback, DictNetwork(), epochs=1, batch_num=1)
    assert checkpoints(tmp_path) == ["CKP-1_1.ckpt", "CKP_1-1_1.ckpt"]


def test_renaming_goes_past_the_highest_suffix(tmp_path: Path) -> None:
    touch(tmp_path, "CKP-1_1.ckpt", "CKP_1-1_1.ckpt", "CKP_3-2_5.ckpt")
    assert ModelCheckpoint(directory=tmp_path).prefix == "CKP_4"


@pytest.mark.parametrize(
    "names",
    [
        ["CKPT-1_1.ckpt"],  # another prefix that merely starts with CKP
        ["CKP_best-1_1.ckpt"],  # likewise: the suffix must be a number
        ["CKP-graph.meta", "CKP-1_1.txt"],  # not checkpoints
        [".CKP-1_1.ckpt.x1y2.tmp"],  # a temporary file of an interrupted save
    ],
)
def test_other_files_do_not_rename_the_prefix(tmp_path: Path, names: list[str]) -> None:
    touch(tmp_path, *names)
    assert ModelCheckpoint(directory=tmp_path).prefix == "CKP"


def test_second_run_in_the_same_directory_keeps_the_first_runs_files(tmp_path: Path) -> None:
    first = ModelCheckpoint(directory=tmp_path, config=CheckpointConfig(keep_checkpoint_max=2))
    train(first, DictNetwork(), epochs=1, batch_num=3)
    second = ModelCheckpoint(directory=tmp_path, config=CheckpointConfig(keep_checkpoint_max=1))
    train(second, DictNetwork(), epochs=1, batch_num=3)
    # The second callback deletes only what it wrote itself.
    assert checkpoints(tmp_path) == ["CKP-1_2.ckpt", "CKP-1_3.ckpt", "CKP_1-1_3.ckpt"]


# --- triggers -----------------------------------------------------------------------


def test_every_n_steps_across_epochs_and_last_at_end(tmp_path: Path) -> None:
    config = CheckpointConfig(save_checkpoint_steps=4, keep_checkpoint_max=10)
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    train(callback, DictNetwork(), epochs=2, batch_num=5)
    # Global steps 4 and 8 by the trigger, 10 by end.
    assert checkpoints(tmp_path) == ["CKP-1_4.ckpt", "CKP-2_3.ckpt", "CKP-2_5.ckpt"]
    assert [saved_step(tmp_path / name) for name in checkpoints(tmp_path)] == [4, 8, 10]


def test_end_does_not_save_a_step_already_saved(tmp_path: Path) -> None:
    config = CheckpointConfig(save_checkpoint_steps=3, keep_checkpoint_max=10)
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    train(callback, DictNetwork(), epochs=1, batch_num=6)
    assert checkpoints(tmp_path) == ["CKP-1_3.ckpt", "CKP-1_6.ckpt"]
    assert callback.manager.ckpoint_num == 2


def test_sink_mode_steps_jump(tmp_path: Path) -> None:
    """In sink mode cur_step_num advances by a whole epoch per call."""
    config = CheckpointConfig(save_checkpoint_steps=4, keep_checkpoint_max=10)
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    params = CallbackParams(train_network=DictNetwork(), batch_num=3, dataset_sink_mode=True)
    context = RunContext(params)
    for epoch in (1, 2, 3):
        params.cur_epoch_num, params.cur_step_num = epoch, 3 * epoch
        callback.step_end(context)
    callback.end(context)
    # 6 >= 0 + 4 triggers; 9 < 6 + 4 waits for end.
    assert checkpoints(tmp_path) == ["CKP-2_3.ckpt", "CKP-3_3.ckpt"]


def test_every_n_seconds(tmp_path: Path) -> None:
    clock = FakeClock()
    config = CheckpointConfig(
        save_checkpoint_steps=0, save_checkpoint_seconds=10, keep_checkpoint_max=10
    )
    callback = ModelCheckpoint(directory=tmp_path, config=config, clock=clock)
    train(callback, DictNetwork(), epochs=1, batch_num=10, clock=clock, seconds_per_step=4)
    # More than 10 s since the last save at steps 3 (12 s), 6, 9; end saves 10.
    assert checkpoints(tmp_path) == [
        "CKP-1_10.ckpt",
        "CKP-1_3.ckpt",
        "CKP-1_6.ckpt",
        "CKP-1_9.ckpt",
    ]


def test_seconds_are_strictly_more_than(tmp_path: Path) -> None:
    clock = FakeClock()
    config = CheckpointConfig(
        save_checkpoint_steps=0, save_checkpoint_seconds=10, keep_checkpoint_max=10
    )
    callback = ModelCheckpoint(directory=tmp_path, config=config, clock=clock)
    train(callback, DictNetwork(), epochs=1, batch_num=5, clock=clock, seconds_per_step=5)
    # Exactly 10 s at step 2 is not enough; 15 s at step 3 is; then 10 s at 5 is not.
    assert checkpoints(tmp_path) == ["CKP-1_3.ckpt", "CKP-1_5.ckpt"]
    assert [saved_step(tmp_path / name) for name in checkpoints(tmp_path)] == [3, 5]


def test_seconds_count_from_begin(tmp_path: Path) -> None:
    clock = FakeClock()
    config = CheckpointConfig(save_checkpoint_steps=0, save_checkpoint_seconds=10)
    callback = ModelCheckpoint(directory=tmp_path, config=config, clock=clock)
    clock.now += 3600  # time between construction and training does not count
    train(callback, DictNetwork(), epochs=1, batch_num=3, clock=clock, seconds_per_step=1)
    assert checkpoints(tmp_path) == ["CKP-1_3.ckpt"]


def test_an_evaluation_run_does_not_restart_the_seconds(tmp_path: Path) -> None:
    clock = FakeClock()
    config = CheckpointConfig(save_checkpoint_steps=0, save_checkpoint_seconds=10)
    callback = ModelCheckpoint(directory=tmp_path, config=config, clock=clock)
    params = CallbackParams(train_network=DictNetwork(), cur_epoch_num=1, batch_num=10)
    callback.begin(RunContext(params))
    clock.now += 8
    callback.begin(RunContext(CallbackParams(mode="eval")))  # evaluation in between
    clock.now += 8
    params.cur_step_num = 1
    callback.step_end(RunContext(params))
    assert checkpoints(tmp_path) == ["CKP-1_1.ckpt"]


def test_steps_take_precedence_over_seconds(tmp_path: Path) -> None:
    clock = FakeClock()
    config = CheckpointConfig(
        save_checkpoint_steps=2, save_checkpoint_seconds=1, keep_checkpoint_max=10
    )
    callback = ModelCheckpoint(directory=tmp_path, config=config, clock=clock)
    train(callback, DictNetwork(), epochs=1, batch_num=5, clock=clock, seconds_per_step=100)
    assert checkpoints(tmp_path) == ["CKP-1_2.ckpt", "CKP-1_4.ckpt", "CKP-1_5.ckpt"]


# --- retention ----------------------------------------------------------------------


def test_keep_checkpoint_max_deletes_the_oldest(tmp_path: Path) -> None:
    config = CheckpointConfig(save_checkpoint_steps=1, keep_checkpoint_max=3)
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    train(callback, DictNetwork(), epochs=1, batch_num=7)
    assert checkpoints(tmp_path) == ["CKP-1_5.ckpt", "CKP-1_6.ckpt", "CKP-1_7.ckpt"]
    assert callback.manager.ckpoint_filelist == [
        str(tmp_path / name) for name in ("CKP-1_5.ckpt", "CKP-1_6.ckpt", "CKP-1_7.ckpt")
    ]


def test_no_keep_rule_keeps_only_the_newest(tmp_path: Path) -> None:
    config = CheckpointConfig(keep_checkpoint_max=0, keep_checkpoint_per_n_minutes=0)
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    train(callback, DictNetwork(), epochs=2, batch_num=2)
    assert checkpoints(tmp_path) == ["CKP-2_2.ckpt"]


def test_one_per_n_minutes(tmp_path: Path) -> None:
    clock = FakeClock()
    config = CheckpointConfig(
        save_checkpoint_steps=1, keep_checkpoint_max=0, keep_checkpoint_per_n_minutes=1
    )
    callback = ModelCheckpoint(directory=tmp_path, config=config, clock=clock)
    train(callback, DictNetwork(), epochs=1, batch_num=13, clock=clock, seconds_per_step=10)
    # Saves every 10 s. Each save keeps only the oldest of the files younger than
    # a minute: step 1 survives until it ages out, then 6 (60 s later), then 11,
    # plus the newest.
    assert sorted(saved_step(tmp_path / name) for name in checkpoints(tmp_path)) == [
        1,
        6,
        11,
        13,
    ]


def test_per_n_minutes_keeps_everything_saved_further_apart(tmp_path: Path) -> None:
    clock = FakeClock()
    config = CheckpointConfig(
        save_checkpoint_steps=1, keep_checkpoint_max=0, keep_checkpoint_per_n_minutes=1
    )
    callback = ModelCheckpoint(directory=tmp_path, config=config, clock=clock)
    train(callback, DictNetwork(), epochs=1, batch_num=5, clock=clock, seconds_per_step=61)
    assert len(checkpoints(tmp_path)) == 5


def test_keep_max_wins_over_per_n_minutes(tmp_path: Path) -> None:
    clock = FakeClock()
    config = CheckpointConfig(keep_checkpoint_max=2, keep_checkpoint_per_n_minutes=1)
    callback = ModelCheckpoint(directory=tmp_path, config=config, clock=clock)
    train(callback, DictNetwork(), epochs=1, batch_num=6, clock=clock, seconds_per_step=10)
    assert checkpoints(tmp_path) == ["CKP-1_5.ckpt", "CKP-1_6.ckpt"]


def test_files_deleted_by_someone_else_are_forgotten(tmp_path: Path) -> None:
    config = CheckpointConfig(keep_checkpoint_max=3)
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    params = CallbackParams(train_network=DictNetwork(), cur_epoch_num=1, batch_num=100)
    for step in (1, 2, 3):
        params.cur_step_num = step
        callback.step_end(RunContext(params))
    os.remove(tmp_path / "CKP-1_1.ckpt")
    params.cur_step_num = 4
    callback.step_end(RunContext(params))
    # Three files again: 2 was not deleted to make room for one that was already gone.
    assert checkpoints(tmp_path) == ["CKP-1_2.ckpt", "CKP-1_3.ckpt", "CKP-1_4.ckpt"]


# --- end, latest, eval ----------------------------------------------------------------


def test_latest_ckpt_file_name(tmp_path: Path) -> None:
    config = CheckpointConfig(save_checkpoint_steps=2)
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    assert callback.latest_ckpt_file_name is None
    params = CallbackParams(train_network=DictNetwork(), cur_epoch_num=1, batch_num=3)
    params.cur_step_num = 1
    callback.step_end(RunContext(params))
    assert callback.latest_ckpt_file_name is None
    params.cur_step_num = 2
    callback.step_end(RunContext(params))
    assert callback.latest_ckpt_file_name == str(tmp_path / "CKP-1_2.ckpt")
    params.cur_step_num = 3
    callback.end(RunContext(params))
    latest = callback.latest_ckpt_file_name
    assert latest == str(tmp_path / "CKP-1_3.ckpt")
    assert os.path.isabs(str(latest))


def test_relative_directory_gives_absolute_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    callback = ModelCheckpoint(directory="ckpts")
    train(callback, DictNetwork(), epochs=1, batch_num=1)
    assert callback.latest_ckpt_file_name == str(tmp_path / "ckpts" / "CKP-1_1.ckpt")
    assert callback.directory == str(tmp_path / "ckpts")


def test_default_directory_is_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    callback = ModelCheckpoint()
    train(callback, DictNetwork(), epochs=1, batch_num=1)
    assert checkpoints(tmp_path) == ["CKP-1_1.ckpt"]


def test_end_without_steps_saves_nothing(tmp_path: Path) -> None:
    callback = ModelCheckpoint(directory=tmp_path)
    train(callback, DictNetwork(), epochs=0, batch_num=5)
    assert checkpoints(tmp_path) == []
    assert callback.latest_ckpt_file_name is None


def test_evaluation_saves_nothing(tmp_path: Path) -> None:
    callback = ModelCheckpoint(directory=tmp_path)
    train(callback, DictNetwork(), epochs=1, batch_num=3, mode="eval")
    assert checkpoints(tmp_path) == []


# --- what is saved --------------------------------------------------------------------


def test_append_info_epoch_and_step_and_values(tmp_path: Path) -> None:
    mask = np.array([[1, 0], [0, 1]], np.int8)
    config = CheckpointConfig(
        save_checkpoint_steps=3,
        keep_checkpoint_max=10,
        append_info=[
            "epoch_num",
            "step_num",
            {"lr": 0.01, "frozen": False, "seed": 7, "mask": mask},
        ],
    )
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    train(callback, DictNetwork(), epochs=2, batch_num=4)
    _, info = load_checkpoint(tmp_path / "CKP-2_2.ckpt")  # global step 6
    assert info["epoch_num"] == 2
    assert info["step_num"] == 6
    assert info["lr"] == 0.01
    assert info["frozen"] is False
    assert info["seed"] == 7
    assert type(info["seed"]) is int
    assert isinstance(info["mask"], np.ndarray)
    np.testing.assert_array_equal(info["mask"], mask)
    assert info["mask"].dtype == np.int8
    _, last = load_checkpoint(tmp_path / "CKP-2_4.ckpt")
    assert (last["epoch_num"], last["step_num"]) == (2, 8)


def test_append_info_offsets_for_resumed_runs(tmp_path: Path) -> None:
    config = CheckpointConfig(append_info=[{"epoch_num": 10, "step_num": 500}])
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    train(callback, DictNetwork(), epochs=1, batch_num=2)
    _, info = load_checkpoint(tmp_path / "CKP-1_2.ckpt")
    assert info == {"epoch_num": 11, "step_num": 502}


def test_no_append_info(tmp_path: Path) -> None:
    callback = ModelCheckpoint(directory=tmp_path)
    train(callback, DictNetwork(), epochs=1, batch_num=1)
    _, info = load_checkpoint(tmp_path / "CKP-1_1.ckpt")
    assert info == {}


class FakeTensor:
    """Quacks like a torch tensor: detach().cpu().numpy()."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.calls: list[str] = []

    def detach(self) -> FakeTensor:
        self.calls.append("detach")
        return self

    def cpu(self) -> FakeTensor:
        self.calls.append("cpu")
        return self

    def numpy(self) -> np.ndarray:
        self.calls.append("numpy")
        return self.array


class TorchLikeNetwork:
    def __init__(self) -> None:
        self.weight = FakeTensor(np.full((2, 2), 1.5, np.float32))
        self.bias = FakeTensor(np.array([0.5], np.float64))

    def named_parameters(self) -> Iterator[tuple[str, FakeTensor]]:
        yield "layer.weight", self.weight
        yield "layer.bias", self.bias

    def parameters(self) -> Iterator[FakeTensor]:  # nameless, as torch's
        yield self.weight
        yield self.bias


def test_torch_free_duck_typed_network(tmp_path: Path) -> None:
    network = TorchLikeNetwork()
    callback = ModelCheckpoint(directory=tmp_path)
    train(callback, network, epochs=1, batch_num=1)
    parameters, _ = load_checkpoint(tmp_path / "CKP-1_1.ckpt")
    assert set(parameters) == {"layer.weight", "layer.bias"}
    np.testing.assert_array_equal(parameters["layer.weight"], np.full((2, 2), 1.5, np.float32))
    assert parameters["layer.bias"].dtype == np.float64
    assert network.weight.calls == ["detach", "cpu", "numpy"]


def test_network_falls_back_to_cb_params_network(tmp_path: Path) -> None:
    callback = ModelCheckpoint(directory=tmp_path)
    params = CallbackParams(network={"w": np.ones(2)}, cur_epoch_num=1, cur_step_num=1, batch_num=1)
    callback.step_end(RunContext(params))
    assert set(load_checkpoint(tmp_path / "CKP-1_1.ckpt").parameters) == {"w"}


def test_saved_network_overrides_the_trained_one(tmp_path: Path) -> None:
    config = CheckpointConfig(saved_network={"backbone.w": np.arange(4.0)})
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    train(callback, DictNetwork(), epochs=1, batch_num=1)
    parameters, _ = load_checkpoint(tmp_path / "CKP-1_1.ckpt")
    assert list(parameters) == ["backbone.w"]


def test_no_network_is_a_clear_error(tmp_path: Path) -> None:
    callback = ModelCheckpoint(directory=tmp_path)
    params = CallbackParams(cur_epoch_num=1, cur_step_num=1, batch_num=1)
    with pytest.raises(
        CollectorValueError,
        match="ModelCheckpoint has no network to save: set "
        r"CheckpointConfig\(saved_network=...\) or train_network",
    ):
        callback.step_end(RunContext(params))


def saved_parameters(network: object, directory: Path) -> dict[str, np.ndarray]:
    """The parameters a checkpoint of ``network`` holds, read back: which parameters a
    network gives is the rule save_checkpoint and ModelCheckpoint share."""
    return load_checkpoint(save_checkpoint(network, directory / "network")).parameters


def test_network_parameters_sources(tmp_path: Path) -> None:
    class Cell:  # MindSpore style
        def parameters_and_names(self) -> Iterator[tuple[str, np.ndarray]]:
            yield "conv.weight", np.ones(2)

    class StateDict:
        def state_dict(self) -> dict[str, np.ndarray]:
            return {"fc.bias": np.zeros(1)}

    class ParametersMethod:
        def parameters(self) -> dict[str, np.ndarray]:
            return {"p": np.zeros(3)}

    class AsNumpy:
        def asnumpy(self) -> np.ndarray:
            return np.full(2, 4.0)

    assert list(saved_parameters(Cell(), tmp_path)) == ["conv.weight"]
    assert list(saved_parameters(StateDict(), tmp_path)) == ["fc.bias"]
    assert list(saved_parameters(ParametersMethod(), tmp_path)) == ["p"]
    # Both parameters of a plain dict; the order a loaded checkpoint lists them in is the
    # safetensors reader's (sorted by name in recent versions, file order in the oldest
    # the minimums env installs), so the names are compared as a set.
    assert set(saved_parameters(DictNetwork(), tmp_path)) == {"dense.bias", "dense.weight"}
    ((name, value),) = saved_parameters({"x": AsNumpy()}, tmp_path).items()
    assert name == "x"
    np.testing.assert_array_equal(value, [4.0, 4.0])
    ((_, listed),) = saved_parameters({"y": [1, 2, 3]}, tmp_path).items()
    np.testing.assert_array_equal(listed, [1, 2, 3])


def test_tensor_that_numpy_cannot_hold(tmp_path: Path) -> None:
    class BFloat16Tensor(FakeTensor):
        def numpy(self) -> np.ndarray:
            raise TypeError("Got unsupported ScalarType BFloat16")

    with pytest.raises(CollectorTypeError) as caught:
        saved_parameters({"w": BFloat16Tensor(np.zeros(1))}, tmp_path)
    assert str(caught.value) == (
        "parameter 'w' (BFloat16Tensor) cannot be converted to a NumPy array: Got unsupported "
        "ScalarType BFloat16; convert it to a NumPy-supported dtype such as float32 first"
    )


def test_network_parameters_of_an_unknown_object(tmp_path: Path) -> None:
    with pytest.raises(CollectorTypeError) as caught:
        saved_parameters(object(), tmp_path)
    assert isinstance(caught.value, TypeError)
    assert str(caught.value).startswith(
        "cannot read parameters from a object: expected a network with named_parameters()"
    )


def test_network_parameters_refuses_non_numeric_values(tmp_path: Path) -> None:
    with pytest.raises(
        CollectorTypeError,
        match="parameter 'w' must be an array or tensor of numbers or booleans, got dict",
    ):
        saved_parameters({"w": {"nested": 1}}, tmp_path)


# --- directories and ranks -----------------------------------------------------------


def test_new_directory_is_private(tmp_path: Path) -> None:
    target = tmp_path / "runs" / "exp1"
    ModelCheckpoint(directory=target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o700


def test_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "shared"
    target.mkdir()
    target.chmod(0o750)
    ModelCheckpoint(directory=target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o750


def test_checkpoint_files_are_read_only(tmp_path: Path) -> None:
    callback = ModelCheckpoint(directory=tmp_path)
    train(callback, DictNetwork(), epochs=1, batch_num=1)
    assert stat.S_IMODE(os.stat(tmp_path / "CKP-1_1.ckpt").st_mode) == 0o400


def as_rank(monkeypatch: pytest.MonkeyPatch, rank: int, size: int) -> None:
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", str(rank))
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", str(size))
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", str(rank))
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", str(size))


def test_each_rank_gets_its_own_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    as_rank(monkeypatch, 1, 2)
    callback = ModelCheckpoint(directory=tmp_path / "run")
    assert callback.directory == str(tmp_path / "run" / "rank_1")
    train(callback, DictNetwork(), epochs=1, batch_num=1)
    assert checkpoints(tmp_path / "run" / "rank_1") == ["CKP-1_1.ckpt"]
    assert stat.S_IMODE(os.stat(tmp_path / "run" / "rank_1").st_mode) == 0o700


def test_a_rank_directory_passed_in_is_not_nested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_rank(monkeypatch, 1, 2)
    callback = ModelCheckpoint(directory=tmp_path / "run" / "rank_1")
    assert callback.directory == str(tmp_path / "run" / "rank_1")


def test_single_process_writes_straight_into_directory(tmp_path: Path) -> None:
    assert ModelCheckpoint(directory=tmp_path / "run").directory == str(tmp_path / "run")


# --- constructor errors ----------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["a/b", "", 3, None, "x\0y"])
def test_bad_prefix(tmp_path: Path, prefix: Any) -> None:
    with pytest.raises(CollectorValueError) as caught:
        ModelCheckpoint(prefix, tmp_path)
    assert isinstance(caught.value, ValueError)
    # The original's words (MindSpore's ModelCheckpoint), the value shown as a repr.
    assert str(caught.value) == (
        "For 'ModelCheckpoint', the argument 'prefix' for checkpoint file name is invalid, "
        f"it must be a non-empty string and does not contain '/', but got {prefix!r}."
    )


def test_an_empty_prefix_is_refused(tmp_path: Path) -> None:
    # MindSpore accepts prefix='' (files '-1_1.ckpt'); refused here
    # (docs/mindinsight-differences.md, "empty-prefix"), and nothing is written.
    with pytest.raises(CollectorValueError, match=r"non-empty string .* but got ''\.$"):
        ModelCheckpoint("", tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_bad_config(tmp_path: Path) -> None:
    with pytest.raises(
        CollectorTypeError,
        match=r"^For 'ModelCheckpoint', the type of argument 'config' should be "
        r"'CheckpointConfig' or None, but got dict\.$",
    ):
        ModelCheckpoint(directory=tmp_path, config={"save_checkpoint_steps": 1})  # type: ignore[arg-type]


def test_bad_directory_type() -> None:
    with pytest.raises(
        CollectorTypeError, match=r"^directory must be a str, os.PathLike or None, got int$"
    ):
        ModelCheckpoint(directory=3)  # type: ignore[arg-type]


def test_directory_with_a_nul_character(tmp_path: Path) -> None:
    directory = f"{tmp_path}/ck\0pt"
    with pytest.raises(CollectorValueError) as caught:
        ModelCheckpoint(directory=directory)
    assert str(caught.value) == (
        f"directory must be a path without NUL characters ('\\0'), got {directory!r}"
    )
    assert os.listdir(tmp_path) == []


def test_directory_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match="cannot create checkpoint directory"):
        ModelCheckpoint(directory=tmp_path / "file")


@pytest.mark.parametrize(
    "timeout, error", [(0, ValueError), (-1.0, ValueError), ("5", TypeError), (True, TypeError)]
)
def test_bad_save_timeout(tmp_path: Path, timeout: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="save_timeout must be"):
        ModelCheckpoint(directory=tmp_path, save_timeout=timeout)


@pytest.mark.parametrize("timeout", [math.inf, math.nan])
def test_a_non_finite_save_timeout_is_refused(tmp_path: Path, timeout: float) -> None:
    # Thread.join cannot wait forever on a timestamp: an infinite timeout would crash the
    # second background save with an OverflowError instead.
    with pytest.raises(ValueError, match="save_timeout must be"):
        ModelCheckpoint(
            directory=tmp_path, config=CheckpointConfig(async_save=True), save_timeout=timeout
        )


def test_bad_clock(tmp_path: Path) -> None:
    with pytest.raises(CollectorTypeError, match=r"^clock must be callable, got float$"):
        ModelCheckpoint(directory=tmp_path, clock=3.0)  # type: ignore[arg-type]


# --- temporaries of killed saves ---------------------------------------------------------

KILLED_SAVE = """
import os, signal, sys
import numpy as np
from rankscribe.collector import CallbackParams, ModelCheckpoint, RunContext

class DiesHalfway:
    # The checkpoint's temporary file: half of its first chunk is written, then the
    # process is killed.
    def __init__(self, handle):
        self.handle = handle

    def write(self, chunk):
        self.handle.write(chunk[: len(chunk) // 2])
        self.handle.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.handle.close()

real_fdopen = os.fdopen

def fdopen(descriptor, *args, **options):
    handle = real_fdopen(descriptor, *args, **options)
    if ".ckpt." in os.readlink(f"/proc/self/fd/{descriptor}"):
        return DiesHalfway(handle)
    return handle

os.fdopen = fdopen  # the call the checkpoint's atomic write opens its file with
callback = ModelCheckpoint(directory=sys.argv[1])
params = CallbackParams(train_network={"w": np.zeros(1000)}, cur_epoch_num=1, cur_step_num=1,
                        batch_num=1)
callback.begin(RunContext(params))
callback.step_end(RunContext(params))
"""


def hidden(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith("."))


def test_a_killed_save_leaves_a_temporary_the_next_run_removes(tmp_path: Path) -> None:
    killed = run_bounded(
        [sys.executable, "-c", KILLED_SAVE, tmp_path],
        timeout=120,
        env=clean_environment(),
        check=False,
        stderr_apart=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [temporary] = hidden(tmp_path)
    assert re.fullmatch(r"\.CKP-1_1\.ckpt\.[0-9a-f]+\.tmp", temporary)
    assert checkpoints(tmp_path) == []

    train(ModelCheckpoint(directory=tmp_path), DictNetwork(), epochs=1, batch_num=2)
    assert hidden(tmp_path) == []
    assert checkpoints(tmp_path) == ["CKP-1_1.ckpt", "CKP-1_2.ckpt"]


def test_only_this_prefixs_regular_temporaries_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    directory.mkdir()
    mine = [".CKP-1_3.ckpt.0123456789ab.tmp", ".CKP_2-4_1.ckpt.ba9876543210.tmp"]
    others = [
        ".OTHER-1_1.ckpt.0123456789ab.tmp",
        ".CKPT-1_1.ckpt.0123456789ab.tmp",
        ".CKP-1_1.ckpt",
        "CKP-notes.tmp",
        ".CKP-1_1.ckpt.0123456789ab.tmp.keep",
    ]
    for name in mine + others:
        (directory / name).write_bytes(b"partial")
    outside = tmp_path / "precious"
    outside.write_bytes(b"keep me")
    (directory / ".CKP-1_4.ckpt.aaaaaaaaaaaa.tmp").symlink_to(outside)
    (directory / ".CKP-1_5.ckpt.bbbbbbbbbbbb.tmp").mkdir()

    train(ModelCheckpoint(directory=directory), DictNetwork(), epochs=1, batch_num=1)

    left = set(os.listdir(directory))
    assert not left & set(mine)
    assert set(others) <= left
    assert os.path.islink(directory / ".CKP-1_4.ckpt.aaaaaaaaaaaa.tmp")
    assert outside.read_bytes() == b"keep me"
    assert os.path.isdir(directory / ".CKP-1_5.ckpt.bbbbbbbbbbbb.tmp")


# --- neither save trigger ----------------------------------------------------------------


def test_without_a_save_trigger_only_the_final_step_is_saved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = CheckpointConfig(
        save_checkpoint_steps=0, save_checkpoint_seconds=0, keep_checkpoint_max=3
    )
    callback = ModelCheckpoint(directory=tmp_path, config=config)
    assert "saves the final step only, at the end of training" in caplog.text
    train(callback, DictNetwork(), epochs=2, batch_num=3)
    assert checkpoints(tmp_path) == ["CKP-2_3.ckpt"]
    assert saved_step(tmp_path / "CKP-2_3.ckpt") == 6


# --- the graph file ----------------------------------------------------------------------


def test_graph_meta_is_written_once_per_run(tmp_path: Path, model: Any) -> None:
    from rankscribe.collector.adapters import AdapterRegistry
    from rankscribe.writer.pb import anf_ir_pb2

    network = model(batches=2).network
    callback = ModelCheckpoint(directory=tmp_path)
    train(callback, network, epochs=1, batch_num=2)
    graph = anf_ir_pb2.GraphProto.FromString((tmp_path / "CKP-graph.meta").read_bytes())
    view = AdapterRegistry().network_view(network)
    assert view is not None
    assert graph == view.graph()
    assert [node.op_type for node in graph.node] == ["Input", "MatMul", "Add"]
    assert stat.S_IMODE(os.stat(tmp_path / "CKP-graph.meta").st_mode) == 0o400

    (tmp_path / "CKP-graph.meta").chmod(0o600)
    (tmp_path / "CKP-graph.meta").write_bytes(b"kept")
    train(callback, network, epochs=1, batch_num=2)  # the second run has its own prefix
    assert (tmp_path / "CKP-graph.meta").read_bytes() == b"kept"
    assert anf_ir_pb2.GraphProto.FromString((tmp_path / "CKP_1-graph.meta").read_bytes()) == graph
    assert sorted(name for name in os.listdir(tmp_path) if name.endswith(".meta")) == [
        "CKP-graph.meta",
        "CKP_1-graph.meta",
    ]


def test_a_network_without_a_graph_writes_no_graph_file(tmp_path: Path, model: Any) -> None:
    train(
        ModelCheckpoint(directory=tmp_path),
        model(batches=2, graph=False).network,
        epochs=1,
        batch_num=2,
    )
    assert sorted(os.listdir(tmp_path)) == ["CKP-1_1.ckpt", "CKP-1_2.ckpt"]


# --- CheckpointManager as the original's -------------------------------------------------


def touch_at(path: Path, modified: float) -> str:
    path.write_bytes(b"x")
    os.utime(path, (modified, modified))
    return str(path)


def test_checkpoint_manager_without_arguments_starts_empty() -> None:
    manager = CheckpointManager()
    assert manager.ckpoint_filelist == []
    assert manager.ckpoint_num == 0
    manager.remove_oldest_ckpoint_file()  # nothing to remove
    assert manager.ckpoint_num == 0


def test_update_ckpoint_filelist_lists_the_prefixs_checkpoints(tmp_path: Path) -> None:
    second = touch_at(tmp_path / "CKP-1_2.ckpt", 2000.0)
    first = touch_at(tmp_path / "CKP-1_1.ckpt", 1000.0)
    # The original's rule: the prefix, then no letter, then .ckpt.
    renamed_run = touch_at(tmp_path / "CKP_1-1_1.ckpt", 500.0)
    no_dash = touch_at(tmp_path / "CKP1_1.ckpt", 400.0)
    for name in (
        "CKP-graph.meta",
        "CKP-a_1.ckpt",
        "CKPa-1_1.ckpt",
        "OTHER-1_1.ckpt",
        "CKP-1_3.ckpt.tmp",
    ):
        touch_at(tmp_path / name, 500.0)
    (tmp_path / "CKP-1_4.ckpt").symlink_to(tmp_path / "OTHER-1_1.ckpt")
    manager = CheckpointManager()
    manager.update_ckpoint_filelist(tmp_path, "CKP")
    assert manager.ckpoint_filelist == [no_dash, renamed_run, first, second]
    assert manager.ckpoint_num == 4


def test_the_originals_checkpoint_manager_example(tmp_path: Path) -> None:
    """MindSpore's own test of its CheckpointManager (test_checkpoint_manager), as written
    there with its working directory ``_cur_dir`` a fresh one."""
    _cur_dir = str(tmp_path)
    ckp_mgr = CheckpointManager()

    ckpoint_file_name = os.path.join(_cur_dir, "./test1.ckpt")
    with open(ckpoint_file_name, "w"):
        os.chmod(ckpoint_file_name, stat.S_IWUSR | stat.S_IRUSR)

    ckp_mgr.update_ckpoint_filelist(_cur_dir, "test")
    assert ckp_mgr.ckpoint_num == 1

    ckp_mgr.remove_ckpoint_file(ckpoint_file_name)
    ckp_mgr.update_ckpoint_filelist(_cur_dir, "test")
    assert ckp_mgr.ckpoint_num == 0
    assert not os.path.exists(ckpoint_file_name)

    another_file_name = os.path.join(_cur_dir, "./test2.ckpt")
    another_file_name = os.path.realpath(another_file_name)
    with open(another_file_name, "w"):
        os.chmod(another_file_name, stat.S_IWUSR | stat.S_IRUSR)

    ckp_mgr.update_ckpoint_filelist(_cur_dir, "test")
    assert ckp_mgr.ckpoint_num == 1
    ckp_mgr.remove_oldest_ckpoint_file()
    ckp_mgr.update_ckpoint_filelist(_cur_dir, "test")
    assert ckp_mgr.ckpoint_num == 0
    assert not os.path.exists(another_file_name)

    # test keep_one_ckpoint_per_minutes
    file1 = os.path.realpath(os.path.join(_cur_dir, "./time_file1.ckpt"))
    file2 = os.path.realpath(os.path.join(_cur_dir, "./time_file2.ckpt"))
    file3 = os.path.realpath(os.path.join(_cur_dir, "./time_file3.ckpt"))
    with open(file1, "w"):
        os.chmod(file1, stat.S_IWUSR | stat.S_IRUSR)
    with open(file2, "w"):
        os.chmod(file2, stat.S_IWUSR | stat.S_IRUSR)
    with open(file3, "w"):
        os.chmod(file3, stat.S_IWUSR | stat.S_IRUSR)
    time1 = time.time()
    ckp_mgr.update_ckpoint_filelist(_cur_dir, "time_file")
    assert ckp_mgr.ckpoint_num == 3
    ckp_mgr.keep_one_ckpoint_per_minutes(1, time1)
    ckp_mgr.update_ckpoint_filelist(_cur_dir, "time_file")
    assert ckp_mgr.ckpoint_num == 1


def test_remove_oldest_and_named_files(tmp_path: Path) -> None:
    names = [touch_at(tmp_path / f"CKP-1_{step}.ckpt", 1000.0 + step) for step in (1, 2, 3)]
    manager = CheckpointManager()
    manager.update_ckpoint_filelist(str(tmp_path), "CKP")
    manager.remove_oldest_ckpoint_file()
    assert manager.ckpoint_filelist == names[1:]
    manager.remove_ckpoint_file(names[2])
    assert manager.ckpoint_filelist == [names[1]]
    assert sorted(os.listdir(tmp_path)) == ["CKP-1_2.ckpt"]


def test_remove_ckpoint_file_logs_what_it_cannot_delete(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    CheckpointManager().remove_ckpoint_file(tmp_path)  # a directory
    assert "cannot delete old checkpoint" in caplog.text
    assert tmp_path.is_dir()


def test_keep_one_ckpoint_per_minutes_keeps_the_oldest_recent_file(tmp_path: Path) -> None:
    now = 10_000.0
    old = touch_at(tmp_path / "CKP-1_1.ckpt", now - 600)  # outside a 5-minute window: kept
    oldest_recent = touch_at(tmp_path / "CKP-1_2.ckpt", now - 200)
    touch_at(tmp_path / "CKP-1_3.ckpt", now - 100)
    touch_at(tmp_path / "CKP-1_4.ckpt", now - 10)
    manager = CheckpointManager()
    manager.update_ckpoint_filelist(tmp_path, "CKP")
    manager.keep_one_ckpoint_per_minutes(5, now)
    assert manager.ckpoint_filelist == [old, oldest_recent]
    assert sorted(os.listdir(tmp_path)) == ["CKP-1_1.ckpt", "CKP-1_2.ckpt"]


@pytest.mark.parametrize(
    "arguments, message",
    [
        (("5", 1.0), "minutes must be a number, got '5' (str)"),
        ((5, None), "cur_time must be a number, got None (NoneType)"),
    ],
)
def test_keep_one_ckpoint_per_minutes_checks_its_arguments(
    arguments: tuple[Any, Any], message: str
) -> None:
    with pytest.raises(CollectorTypeError, match=f"^{re.escape(message)}$"):
        CheckpointManager().keep_one_ckpoint_per_minutes(*arguments)


def test_the_callbacks_manager_lists_what_it_kept(tmp_path: Path) -> None:
    callback = ModelCheckpoint(directory=tmp_path, config=CheckpointConfig(keep_checkpoint_max=2))
    train(callback, DictNetwork(), epochs=1, batch_num=4)
    assert isinstance(callback.manager, CheckpointManager)
    assert callback.manager.ckpoint_filelist == [
        str(tmp_path / "CKP-1_3.ckpt"),
        str(tmp_path / "CKP-1_4.ckpt"),
    ]
    assert callback.manager.ckpoint_num == 2
