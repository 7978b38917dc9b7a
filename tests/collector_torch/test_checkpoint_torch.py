"""ModelCheckpoint with a real PyTorch model (the collector-torch env installs torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from rankscribe.collector import (
    CallbackParams,
    CheckpointConfig,
    ModelCheckpoint,
    RunContext,
    SummaryCollector,
    TrainLoop,
    load_checkpoint,
    save_checkpoint,
)
from rankscribe.collector.errors import CollectorTypeError


def model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


@pytest.mark.parametrize("async_save", [False, True])
def test_parameters_round_trip(tmp_path: Path, async_save: bool) -> None:
    network = model()
    callback = ModelCheckpoint(directory=tmp_path, config=CheckpointConfig(async_save=async_save))
    params = CallbackParams(train_network=network, cur_epoch_num=1, cur_step_num=1, batch_num=1)
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


def test_buffers_are_not_parameters(tmp_path: Path) -> None:
    # A checkpoint stores a module's whole state_dict; the landscape files its parameters.
    network = torch.nn.BatchNorm1d(3)
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)

    def step(batch: Any) -> torch.Tensor:
        optimizer.zero_grad()
        loss = network(batch).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    specified = {"collect_landscape": {"intervals": [[1, 2, 3]]}}
    collector = SummaryCollector(tmp_path, collect_specified_data=specified)
    batches = [torch.randn(4, 3)]
    TrainLoop(step, network=network, optimizer=optimizer).train(1, batches, callbacks=[collector])
    metadata = json.loads((tmp_path / "ckpt_dir" / "train_metadata.json").read_text())
    saved = load_file(metadata["model_params_file_map"]["1"])
    # Parameters only: running statistics are buffers, not parameters.
    assert sorted(saved) == ["bias", "weight"]
    assert "running_mean" in network.state_dict()  # the buffers the file leaves out


def test_bfloat16_is_a_clear_error(tmp_path: Path) -> None:
    network = torch.nn.Linear(2, 2).to(torch.bfloat16)
    with pytest.raises(CollectorTypeError, match=r"parameter 'weight' .* cannot be converted"):
        save_checkpoint(network, tmp_path / "bf16")


def train_a_few_steps(network: Any, directory: Path) -> str:
    """Train ``network`` (BatchNorm statistics move too) with a ModelCheckpoint; the newest file."""
    torch.manual_seed(1)
    batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)]
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)

    def step(batch: Any) -> float:
        inputs, labels = batch
        optimizer.zero_grad()
        loss = torch.nn.functional.nll_loss(network(inputs).log(), labels)
        loss.backward()
        optimizer.step()
        return loss.item()

    checkpoint = ModelCheckpoint(directory=directory)
    TrainLoop(step, network=network, optimizer=optimizer).train(1, batches, callbacks=[checkpoint])
    assert checkpoint.latest_ckpt_file_name is not None
    return checkpoint.latest_ckpt_file_name


def test_load_state_dict_accepts_a_checkpoint_strictly(tmp_path: Path, net: Any) -> None:
    path = train_a_few_steps(net, tmp_path)
    assert int(net.bn.num_batches_tracked) == 3

    parameters, _ = load_checkpoint(path)
    torch.manual_seed(99)
    restored = type(net)()
    # The documented round trip: every parameter and buffer, strict.
    result = restored.load_state_dict(
        {name: torch.from_numpy(array) for name, array in parameters.items()}
    )
    assert (result.missing_keys, result.unexpected_keys) == ([], [])
    assert set(parameters) == set(net.state_dict())
    torch.testing.assert_close(restored.bn.running_mean, net.bn.running_mean)
    assert int(restored.bn.num_batches_tracked) == 3
    net.eval()
    restored.eval()
    inputs = torch.randn(5, 4)
    torch.testing.assert_close(restored(inputs), net(inputs))


def test_a_data_parallel_model_loads_into_the_bare_model(tmp_path: Path, net: Any) -> None:
    path = train_a_few_steps(torch.nn.DataParallel(net), tmp_path)
    parameters, _ = load_checkpoint(path)
    assert not [name for name in parameters if name.startswith("module.")]
    restored = type(net)()
    restored.load_state_dict({name: torch.from_numpy(array) for name, array in parameters.items()})
    torch.testing.assert_close(restored.head.weight, net.head.weight)


def test_save_checkpoint_of_a_module_loads_back(tmp_path: Path, net: Any) -> None:
    path = save_checkpoint(net, tmp_path / "net")
    restored = type(net)()
    restored.load_state_dict(
        {name: torch.from_numpy(array) for name, array in load_checkpoint(path)[0].items()}
    )
    torch.testing.assert_close(restored.block.scale, net.block.scale)
