"""A real torch training loop under TrainLoop, SummaryCollector and ModelCheckpoint, read back."""

from __future__ import annotations

import functools
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional
from torch.utils.data import DataLoader, TensorDataset

from rankscribe.collector import (
    CheckpointConfig,
    ModelCheckpoint,
    SummaryCollector,
    TrainLoop,
    load_checkpoint,
)
from rankscribe.lineage import get_summary_lineage
from rankscribe.writer.events import Histogram, Image, load_dir

EPOCHS, ROWS, BATCH = 2, 24, 4  # 6 batches a epoch, 12 steps
COLLECTED = [1, 3, 6, 9, 12]  # the first step, then every collect_freq=3
LEARNING_RATE = 0.125


class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 8)
        self.fc2 = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.head(torch.relu(self.fc2(x)))


class Digits(TensorDataset):
    """4x4 one-channel images in three classes, from a directory (as torchvision's ``root``)."""

    def __init__(self, root: Path) -> None:
        generator = torch.Generator().manual_seed(0)
        super().__init__(torch.rand(ROWS, 1, 4, 4, generator=generator), torch.arange(ROWS) % 3)
        self.root = str(root)


@dataclass
class Run:
    summary_dir: Path
    network: nn.Module
    checkpoint: ModelCheckpoint
    losses: list[float] = field(default_factory=list)
    weights: list[dict[str, np.ndarray[Any, Any]]] = field(default_factory=list)


def train(tmp_path: Path, network: nn.Module, optimizer: Any = None, **collector: Any) -> Run:
    torch.manual_seed(0)
    data = tmp_path / "digits"
    data.mkdir(parents=True, exist_ok=True)
    loader = DataLoader(Digits(data), batch_size=BATCH, shuffle=False)
    optimizer = optimizer or torch.optim.SGD(network.parameters(), lr=LEARNING_RATE)
    checkpoint = ModelCheckpoint(
        prefix="tiny", directory=tmp_path / "ckpt", config=CheckpointConfig(save_checkpoint_steps=6)
    )
    run = Run(tmp_path / "summary", network, checkpoint)

    def step(batch: list[torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        optimizer.zero_grad()
        loss = functional.cross_entropy(network(images), labels)
        loss.backward()
        optimizer.step()
        run.losses.append(loss.item())
        run.weights.append(
            {name: value.detach().numpy().copy() for name, value in network.named_parameters()}
        )
        return loss

    loop = TrainLoop(step, network=network, optimizer=optimizer, loss_fn=nn.CrossEntropyLoss())
    summary = SummaryCollector(run.summary_dir, collect_freq=3, **collector)
    loop.train(EPOCHS, loader, callbacks=[checkpoint, summary])
    return run


def summary_values(directory: Path) -> dict[str, dict[int, Any]]:
    """``{tag: {step: decoded value}}`` of every summary value in the run's files."""
    found: dict[str, dict[int, Any]] = {}
    for event in load_dir(directory):
        if event.what == "summary":
            assert event.step is not None
            for value in event.values:
                found.setdefault(value.tag, {})[event.step] = value.value
    return found


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return train(tmp_path_factory.mktemp("run"), TinyNet())


def test_loss_at_the_collected_steps(trained: Run) -> None:
    losses = summary_values(trained.summary_dir)["loss/auto"]
    assert sorted(losses) == COLLECTED
    for step, value in losses.items():
        assert value == pytest.approx(trained.losses[step - 1], rel=1e-6)


def test_histograms_of_the_first_five_parameters_by_their_torch_names(trained: Run) -> None:
    values = summary_values(trained.summary_dir)
    histograms = {
        tag: steps
        for tag, steps in values.items()
        if tag != "loss/auto" and all(isinstance(value, Histogram) for value in steps.values())
    }
    assert sorted(histograms) == sorted(
        f"{name}/auto"
        for name in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "head.weight")
    )
    for tag, steps in histograms.items():
        assert sorted(steps) == COLLECTED
        name = tag.removesuffix("/auto")
        for step, histogram in steps.items():
            weights = trained.weights[step - 1][name]  # after that step's update
            assert histogram.count == weights.size
            assert histogram.min == pytest.approx(float(weights.min()))
            assert histogram.max == pytest.approx(float(weights.max()))


def test_graph_event_holds_the_fx_graph(trained: Run) -> None:
    graphs = [event.graph for event in load_dir(trained.summary_dir) if event.what == "graph_def"]
    assert len(graphs) == 1
    graph = graphs[0]
    assert graph is not None and graph.name == "TinyNet"
    assert [(node.name, node.op_type, node.scope) for node in graph.nodes] == [
        ("x", "Input", "Default"),
        ("flatten", "flatten", "Default"),
        ("fc1", "Linear", "Default/fc1"),
        ("relu", "relu", "Default"),
        ("fc2", "Linear", "Default/fc2"),
        ("relu_1", "relu", "Default"),
        ("head", "Linear", "Default/head"),
    ]
    assert list(graph.parameters) == [name for name, _ in trained.network.named_parameters()]
    fc2 = next(node for node in graph.proto.node if node.name == "fc2")
    assert [edge.name for edge in fc2.input] == ["relu", "fc2.weight", "fc2.bias"]
    assert [output.name for output in graph.proto.outputs] == ["head"]


def test_input_images_from_the_first_column(trained: Run) -> None:
    images = summary_values(trained.summary_dir)["input_data/auto"]
    assert sorted(images) == COLLECTED
    assert all(isinstance(image, Image) for image in images.values())
    pixels = images[1].pixels()
    assert pixels.ndim == 3 and pixels.shape[0] >= 4 and pixels.shape[1] >= 4


def test_lineage_names_optimizer_network_dataset_and_checkpoint(trained: Run) -> None:
    lineage = get_summary_lineage(str(trained.summary_dir))
    hyper = lineage["hyper_parameters"]
    assert (hyper["optimizer"], hyper["loss_function"]) == ("SGD", "CrossEntropyLoss")
    assert hyper["learning_rate"] == pytest.approx(LEARNING_RATE)
    assert (hyper["epoch"], hyper["batch_size"]) == (EPOCHS, BATCH)
    assert lineage["algorithm"]["network"] == "TinyNet"
    assert lineage["algorithm"]["loss"] == pytest.approx(trained.losses[-1], rel=1e-6)
    data = trained.summary_dir.parent / "digits"
    assert lineage["train_dataset"] == {"train_dataset_path": str(data), "train_dataset_size": ROWS}
    latest = trained.checkpoint.latest_ckpt_file_name
    assert latest is not None and Path(latest).name == "tiny-2_6.ckpt"
    assert lineage["model"] == {
        "path": json.dumps({"ckpt": os.path.realpath(latest)}),
        "size": os.path.getsize(latest),
    }
    graph = lineage["dataset_graph"]
    assert (graph["op_type"], graph["batch_size"], graph["shuffle"]) == ("DataLoader", BATCH, False)
    assert graph["children"][0]["op_type"] == "Digits"
    assert graph["children"][0]["dataset_dir"] == str(data)


def test_checkpoint_holds_the_torch_parameters(trained: Run) -> None:
    latest = trained.checkpoint.latest_ckpt_file_name
    assert latest is not None
    parameters, _ = load_checkpoint(latest)
    final = trained.weights[-1]
    assert sorted(parameters) == sorted(final)
    for name, value in final.items():
        np.testing.assert_array_equal(parameters[name], value)


class BranchyNet(nn.Module):
    """fx cannot trace it: the branch depends on the data."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        if x.mean() > 2:
            x = x / 2
        return self.fc(x)


def test_an_untraceable_network_warns_once_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    no_landscape = {"collect_landscape": None}
    run = train(tmp_path / "first", BranchyNet(), collect_specified_data=no_landscape)
    train(tmp_path / "second", BranchyNet(), collect_specified_data=no_landscape)
    said = [
        record.getMessage()
        for record in caplog.records
        if record.name == "rankscribe.collector.adapters.torch"
    ]
    assert len(said) == 1
    assert said[0].startswith("The graph of BranchyNet cannot be recorded")
    assert "control flow" in said[0]
    assert not [event for event in load_dir(run.summary_dir) if event.what == "graph_def"]
    values = summary_values(run.summary_dir)
    assert sorted(values["loss/auto"]) == COLLECTED
    assert sorted(values["fc.weight/auto"]) == COLLECTED
    assert get_summary_lineage(str(run.summary_dir))["algorithm"]["network"] == "BranchyNet"


def _returns_tuple_on_request(forward: Any) -> Any:
    """A decorator as Hugging Face models wrap their forward: ``(self, *args, **kwargs)``."""

    @functools.wraps(forward)
    def wrapper(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        return forward(self, *args, **kwargs)

    return wrapper


class DecoratedNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 3)

    @_returns_tuple_on_request
    def forward(
        self, x: torch.Tensor, mask: Any = None, scale: Any = None, **kwargs: Any
    ) -> torch.Tensor:
        return self.fc(x.flatten(1))


class SizedNet(DecoratedNet):
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.fc(x.flatten(1)) / len(x)  # fx refuses len() on a traced tensor


@pytest.mark.parametrize(
    ("network", "cause"),
    [
        (DecoratedNet, "the forward of DecoratedNet is wrapped by a decorator, which "),
        (SizedNet, "torch.fx.symbolic_trace cannot trace its forward (RuntimeError: 'len'"),
    ],
)
def test_a_network_without_a_graph_is_reported_in_one_warning_with_its_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, network: type[nn.Module], cause: str
) -> None:
    caplog.set_level(logging.WARNING)
    train(tmp_path, network(), collect_specified_data={"collect_landscape": None})
    said = [record.getMessage() for record in caplog.records if "graph" in record.getMessage()]
    assert len(said) == 1, said  # the tracer's line only: no second one about the same graph
    assert said[0].startswith(f"The graph of {network.__name__} cannot be recorded: {cause}")
    assert "control flow" not in said[0]


def test_optimizer_from_named_parameters_without_a_graph(tmp_path: Path) -> None:
    network = TinyNet()
    optimizer = torch.optim.Adam(network.named_parameters(), lr=1e-3)
    run = train(
        tmp_path,
        network,
        optimizer,
        collect_specified_data={
            "collect_graph": False,
            "collect_landscape": None,
            "histogram_regular": "head",
        },
    )
    values = summary_values(run.summary_dir)
    assert sorted(tag for tag in values if tag.startswith("head.")) == [
        "head.bias/auto",
        "head.weight/auto",
    ]
    assert "fc1.weight/auto" not in values
    assert get_summary_lineage(str(run.summary_dir))["hyper_parameters"]["optimizer"] == "Adam"


def histogram_tags_of_a_run_without_a_network(directory: Path, optimizer: Any) -> list[str]:
    """Train with the optimizer only (no network given): its parameters have no names to learn."""
    data = directory / "digits"
    data.mkdir(parents=True)
    loader = DataLoader(Digits(data), batch_size=BATCH, shuffle=False)
    loop = TrainLoop(lambda batch: torch.tensor(1.0), optimizer=optimizer)
    summary = SummaryCollector(
        directory / "summary", collect_freq=3, collect_specified_data={"collect_landscape": None}
    )
    loop.train(1, loader, callbacks=[summary])
    return sorted(
        tag
        for tag, steps in summary_values(directory / "summary").items()
        if all(isinstance(value, Histogram) for value in steps.values())
    )


def test_optimizer_tags_do_not_depend_on_what_another_collector_read_before(
    tmp_path: Path,
) -> None:
    network = TinyNet()
    optimizer = torch.optim.SGD(network.parameters(), lr=LEARNING_RATE)
    alone = histogram_tags_of_a_run_without_a_network(tmp_path / "alone", optimizer)
    # Another collector reads the same network (and so its parameter names) first ...
    train(tmp_path / "other", network, optimizer)
    # ... and the optimizer-only run's tags stay what they were without it.
    after = histogram_tags_of_a_run_without_a_network(tmp_path / "after", optimizer)
    positions = [f"param_groups.0.params.{index}/auto" for index in range(5)]
    assert alone == after == sorted(positions)
