"""Helpers for the lineage tests: write real lineage files with the writer's framing."""

from __future__ import annotations

import importlib.util
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage.recording import (
    Algorithm,
    DatasetGraphInfo,
    EvalLineageInfo,
    HyperParameters,
    ModelFile,
    TrainDataset,
    TrainLineageInfo,
    UserDefinedInfo,
    ValidDataset,
)
from rankscribe.writer.files import frame
from rankscribe.writer.pb import lineage_pb2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``tensorboard`` tests where tensorboard is not installed.

    The lineage env deselects them with ``-m "not tensorboard"``; a plain
    ``pytest tests/lineage`` without tensorboard skips them with the reason
    rather than failing on the import. A run that asks for them alone
    (``-m tensorboard``, the tensorboard env) still fails without it.
    """
    if importlib.util.find_spec("tensorboard") is not None:
        return
    if config.getoption("markexpr", "") == "tensorboard":
        return
    skip = pytest.mark.skip(reason="tensorboard is not installed; the tensorboard env runs this")
    for item in items:
        if item.get_closest_marker("tensorboard") is not None:
            item.add_marker(skip)


GOLDEN = Path(__file__).resolve().parents[1] / "compat" / "data" / "mindspore-2.10"
MINDINSIGHT_VIEW = GOLDEN.parent / "mindinsight-2.3.1-view.json"


def train_event(**values: Any) -> lineage_pb2.LineageEvent:
    """A train_lineage event; keyword names are hyper-parameter/algorithm/dataset fields."""
    hyper = {k: values.pop(k) for k in list(values) if k in HyperParameters.__dataclass_fields__}
    dataset = {k: values.pop(k) for k in list(values) if k in TrainDataset.__dataclass_fields__}
    algorithm = {k: values.pop(k) for k in list(values) if k in Algorithm.__dataclass_fields__}
    model = {k: values.pop(k) for k in list(values) if k in ("path", "size")}
    assert not values, values
    info = TrainLineageInfo(
        hyper_parameters=HyperParameters(**hyper) if hyper else None,
        train_dataset=TrainDataset(**dataset) if dataset else None,
        algorithm=Algorithm(**algorithm) if algorithm else None,
        model=ModelFile(**model) if model else None,
    )
    return lineage_pb2.LineageEvent(wall_time=1.0, train_lineage=info.to_proto())


def eval_event(
    metrics: Mapping[str, Any] | None = None, path: str | None = None, size: int | None = None
) -> lineage_pb2.LineageEvent:
    valid = ValidDataset(path, size) if path is not None or size is not None else None
    info = EvalLineageInfo.from_metrics(metrics or {}, valid)
    return lineage_pb2.LineageEvent(wall_time=2.0, evaluation_lineage=info.to_proto())


def custom_event(values: Mapping[str, Any]) -> lineage_pb2.LineageEvent:
    return lineage_pb2.LineageEvent(
        wall_time=1.5, user_defined_info=UserDefinedInfo.from_values(values).to_proto()
    )


def graph_event(graph: Mapping[str, Any]) -> lineage_pb2.LineageEvent:
    return lineage_pb2.LineageEvent(
        wall_time=0.5, dataset_graph=DatasetGraphInfo.from_graph_dict(graph).to_proto()
    )


def write_lineage(
    directory: Path,
    events: list[lineage_pb2.LineageEvent],
    *,
    timestamp: int = 1700000000,
    name: str | None = None,
    mtime: float | None = None,
) -> Path:
    """Write a `_lineage` file (MindSpore's name) holding ``events``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or f"events.out.events.summary.{timestamp}.0.vm_lineage")
    with open(path, "wb") as stream:
        for event in events:
            stream.write(frame(event.SerializeToString()))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def finishes_within(seconds: float, call: Callable[[], object]) -> tuple[bool, list[BaseException]]:
    """Run ``call`` in a thread; whether it returned within ``seconds``, and what it raised."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as error:  # reported to the test
            errors.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive(), errors


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    """make_run(name, events, mtime=...) writes one run dir under tmp_path/'base'."""

    def make(name: str, events: list[lineage_pb2.LineageEvent], **kwargs: Any) -> Path:
        return write_lineage(tmp_path / "base" / name, events, **kwargs).parent

    return make


@pytest.fixture
def three_runs(tmp_path: Path, lw: Any) -> Path:
    """A base of three runs, newest first: adam, sgd, and MindSpore's own golden run."""
    root = tmp_path / "runs"
    shutil.copytree(lw.golden / "lineage_train_eval", root / "golden")
    for file in (root / "golden").iterdir():
        os.utime(file, (1000, 1000))
    lw.write(
        root / "adam",
        [
            lw.custom({"seed": 1}),
            lw.train(optimizer="Adam", network="Net", loss=0.25, epoch=3),
            lw.eval({"acc": 0.9}),
        ],
        mtime=3000,
    )
    lw.write(
        root / "sgd",
        [lw.train(optimizer="SGD", network="Net", loss=0.5, epoch=3), lw.eval({"acc": 0.7})],
        mtime=2000,
    )
    return root


@pytest.fixture(scope="session")
def lw() -> Any:
    """The helpers above, for test modules (which cannot import this conftest)."""
    import types

    return types.SimpleNamespace(
        train=train_event,
        eval=eval_event,
        custom=custom_event,
        graph=graph_event,
        write=write_lineage,
        golden=GOLDEN,
        view=MINDINSIGHT_VIEW,
        finishes_within=finishes_within,
    )
