"""ModelCheckpoint with a real PyTorch model (the collector-torch env installs torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rankscribe.collector import (
    CallbackParams,
    CheckpointConfig,
    ModelCheckpoint,
    RunContext,
    load_checkpoint,
)
from rankscribe.collector.adapters import network_parameters
from rankscribe.collector.errors import CheckpointTypeError


def model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


@pytest.mark.parametrize("async_save", [False, True])
def test_parameters_round_trip(tmp_path: Path, async_save: bool) -> None:
    network = model()
    callback = ModelCheckpoint(directory=tmp_path,
                               config=CheckpointConfig(async_save=async_save))
    params = CallbackParams(train_network=network, cur_epoch_num=1, cur_step_num=1,
                            batch_num=1)
    callback.step_end(RunContext(params))
    expected = {name: value.detach().clone() for name, value in network.named_parameters()}
    with torch.no_grad():
        for value in network.parameters():
            value.add_(1.0)  # the next optimizer step must not reach the saved snapshot
    callback.end(RunContext(params))
    parameters, _ = load_checkpoint(tmp_path / "CKP-1_1.ckpt")
    assert set(parameters) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    for name, value in expected.items():
        np.testing.assert_array_equal(parameters[name], value.numpy())
    # Loads back into the model.
    network.load_state_dict({name: torch.from_numpy(array) for name, array in parameters.items()})
    np.testing.assert_array_equal(network[0].bias.detach().numpy(), expected["0.bias"].numpy())


def test_buffers_are_not_parameters() -> None:
    network = torch.nn.BatchNorm1d(3)
    names = [name for name, _ in network_parameters(network)]
    # Parameters only: running statistics are buffers, not parameters.
    assert names == ["weight", "bias"]


def test_bfloat16_is_a_clear_error() -> None:
    network = torch.nn.Linear(2, 2).to(torch.bfloat16)
    with pytest.raises(CheckpointTypeError, match=r"parameter 'weight' .* cannot be converted"):
        network_parameters(network)
