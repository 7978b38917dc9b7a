"""RankScribeTracker in one process: the loss key, the optimizer's name, argument errors.

docs/integrations.md's ``loss_key`` example runs here as written (one process, no
launcher: the same code as under one). Every Accelerator of this module is made with
``cpu=True``: Accelerate's state is one per process.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from accelerate import Accelerator
from torch import nn

from rankscribe.collector.accelerate import RankScribeTracker
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.lineage import get_summary_lineage
from rankscribe.writer import reader
from tests._support.launchers import drop_launcher_variables
from tests._support.readme import INTEGRATIONS, page_block

MARK = "<!-- tested by tests/frameworks/test_accelerate_tracker.py: loss_key -->"


@pytest.fixture(autouse=True)
def _alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drop_launcher_variables(monkeypatch)
    monkeypatch.chdir(tmp_path)


def _train(tracker: RankScribeTracker, config: dict[str, Any], key: str) -> None:
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    accelerator = Accelerator(cpu=True, log_with=[tracker])
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.init_trackers("acc", config=config)
    inputs = torch.randn(8, 4)
    for step in range(1, 4):
        loss = model(inputs).square().mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        accelerator.log({key: loss.item()}, step=step)
    accelerator.end_training()


def test_the_loss_key_example_records_the_loss_logged_under_its_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    names = {
        "model": model,
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.05),
        "inputs": torch.randn(8, 4),
    }
    caplog.set_level(logging.WARNING)
    exec(compile(page_block(INTEGRATIONS, MARK), str(INTEGRATIONS), "exec"), names)
    run = tmp_path / "runs" / "acc"
    scalars = reader.scalars(run)
    logged = dict(scalars["train_loss"])
    collected = dict(scalars["loss/auto"])
    assert sorted(collected) == [1, 2, 4]  # collect_freq=2: the first step, then every 2nd
    for step, value in collected.items():
        assert value == pytest.approx(logged[step])
    lineage = get_summary_lineage(str(run))
    assert lineage["algorithm"]["loss"] == pytest.approx(logged[4])
    assert "no loss was recorded" not in caplog.text


def test_a_loss_under_another_key_is_named_in_the_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    _train(RankScribeTracker("runs/acc"), {"learning_rate": 0.05}, "train_loss")
    assert "loss/auto" not in reader.scalars(tmp_path / "runs" / "acc")
    said = [record.getMessage() for record in caplog.records if "no loss" in record.getMessage()]
    assert len(said) == 1
    assert "under the loss key 'loss' (its keys: 'train_loss')" in said[0]
    assert "RankScribeTracker(..., loss_key=...)" in said[0]
    assert "Can not find any output" not in said[0]


def test_no_optimizer_is_named_when_nothing_names_one(tmp_path: Path) -> None:
    _train(RankScribeTracker("runs/plain"), {"learning_rate": 0.05}, "loss")
    hyper = get_summary_lineage(str(tmp_path / "runs" / "plain"))["hyper_parameters"]
    assert "optimizer" not in hyper
    assert hyper["learning_rate"] == pytest.approx(0.05)

    _train(RankScribeTracker("runs/named"), {"learning_rate": 0.05, "optimizer": "Adam"}, "loss")
    hyper = get_summary_lineage(str(tmp_path / "runs" / "named"))["hyper_parameters"]
    assert hyper["optimizer"] == "Adam"


def test_integration_arguments_are_named_in_their_errors(tmp_path: Path) -> None:
    from rankscribe.collector.lightning import RankScribeLogger
    from rankscribe.collector.transformers import RankScribeCallback

    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    with pytest.raises(CollectorValueError) as error:
        RankScribeLogger(save_dir=a_file)
    assert str(error.value) == (
        f"For 'RankScribeLogger', the argument 'save_dir' must be a directory, but "
        f"{str(a_file)!r} is a file."
    )
    with pytest.raises(CollectorTypeError) as type_error:
        RankScribeCallback(123)  # type: ignore[arg-type]
    assert str(type_error.value) == (
        "For 'RankScribeCallback', the argument 'summary_dir' must be a str or os.PathLike, "
        "but got int."
    )
    with pytest.raises(CollectorValueError, match="'RankScribeTracker', the argument 'summary"):
        RankScribeTracker(a_file)
    with pytest.raises(CollectorTypeError, match="'loss_key' must be a non-empty str"):
        RankScribeTracker("runs/x", loss_key="")
    # A Path is a path: accepted.
    assert RankScribeLogger(save_dir=tmp_path / "runs").save_dir == str(tmp_path / "runs")


def test_the_integrations_pass_the_cost_budget_on(tmp_path: Path) -> None:
    from rankscribe.collector.lightning import RankScribeLogger
    from rankscribe.collector.transformers import RankScribeCallback

    for make in (
        lambda budget: RankScribeLogger(save_dir=tmp_path / "l", cost_budget=budget),
        lambda budget: RankScribeCallback(tmp_path / "t", cost_budget=budget),
    ):
        with pytest.raises(CollectorValueError, match=r"'cost_budget'.*but got 2\.0\."):
            make(2.0)
        make("off")  # accepted, as 0.05 would be
        make(0.05)
