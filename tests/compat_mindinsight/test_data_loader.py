"""MindInsight 2.3.1's data loader reads what rankscribe.writer wrote: no error, the same values."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.lineage import filter_summary_lineage
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
from rankscribe.writer import SummaryRecord
from rankscribe.writer.events import load_dir
from rankscribe.writer.pb import anf_ir_pb2

STEPS = (1, 2, 3)
LOSSES = {1: 2.302585, 2: 0.5, 3: -0.0}
ACCURACIES = {1: 0.125, 2: 1e30, 3: float("nan")}
IMAGES = np.arange(2 * 3 * 4 * 5, dtype=np.uint8).reshape(2, 3, 4, 5)  # NCHW, 2 images
WEIGHTS = np.concatenate([np.linspace(-1.0, 1.0, 200), [np.nan, np.inf]])
TENSOR = np.arange(12, dtype=np.float32).reshape(3, 4) / 8


def network_graph() -> anf_ir_pb2.GraphProto:
    graph = anf_ir_pb2.GraphProto(name="LeNet5")
    graph.parameters.add(name="conv1.weight")
    graph.node.add(name="1", op_type="Conv2D", scope="Default/network/conv1")
    relu = graph.node.add(name="2", op_type="ReLU", scope="Default/network")
    relu.input.add(name="1")
    dense = graph.node.add(name="3", op_type="MatMul", scope="Default/network/fc")
    dense.input.add(name="2")
    return graph


DATASET_GRAPH = {
    "op_type": "Batch",
    "batch_size": 32,
    "drop_remainder": True,
    "children": [{"op_type": "MnistDataset", "dataset_dir": "/data/mnist", "children": []}],
}


def write_run(run: Path) -> None:
    train = TrainLineageInfo(
        hyper_parameters=HyperParameters(
            optimizer="Momentum",
            learning_rate=0.01,
            loss_function="SoftmaxCrossEntropyWithLogits",
            epoch=3,
            parallel_mode="stand_alone",
            device_num=1,
            batch_size=32,
        ),
        train_dataset=TrainDataset(train_dataset_path="/data/mnist", train_dataset_size=60000),
        algorithm=Algorithm(network="LeNet5", loss=0.5),
        model=ModelFile(path='{"ckpt": "/ckpt/lenet-3_1875.ckpt"}', size=494600),
    )
    evaluation = EvalLineageInfo.from_metrics(
        {"acc": 0.9825, "loss": 0.06}, ValidDataset("/data/mnist/test", 10000)
    )
    with SummaryRecord(str(run)) as record:
        record.add_value(
            "dataset_graph",
            "dataset_graph",
            DatasetGraphInfo.from_graph_dict(DATASET_GRAPH).to_proto(),
        )
        record.add_value(
            "custom_lineage_data",
            "custom_lineage_data",
            UserDefinedInfo.from_values({"seed": 7, "note": "golden"}).to_proto(),
        )
        for step in STEPS:
            record.add_value("scalar", "loss", LOSSES[step])
            record.add_value("scalar", "acc/train", ACCURACIES[step])
            record.add_value("image", "input_data", IMAGES + step)
            record.add_value("histogram", "conv1.weight", WEIGHTS * step)
            record.add_value("tensor", "fc.bias", TENSOR * step)
            if step == 1:
                record.add_value("graph", "train_network", network_graph())
            if step == STEPS[-1]:
                record.add_value("train_lineage", "train_lineage", train.to_proto())
                record.add_value("eval_lineage", "eval_lineage", evaluation.to_proto())
            record.record(step)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, mindinsight: Any) -> tuple[Path, Any]:
    base = tmp_path_factory.mktemp("written")
    run = base / "lenet"
    write_run(run)
    return run, mindinsight.load(run)[str(run)]


def by_step(events: list[dict[str, Any]]) -> dict[int, Any]:
    return {event["step"]: event["value"] for event in events}


def same_float(seen: float | str, expected: float) -> bool:
    if math.isnan(expected):
        return isinstance(seen, float) and math.isnan(seen)
    return seen == float(np.float32(expected))


def test_loaded_without_error(written: tuple[Path, Any]) -> None:
    _, seen = written
    assert seen["integrity"] is True
    assert set(seen["plugins"]) == {"scalar", "image", "histogram", "tensor", "graph"}


def test_scalars(written: tuple[Path, Any]) -> None:
    _, seen = written
    scalars = seen["plugins"]["scalar"]
    assert set(scalars) == {"loss/scalar", "acc/train/scalar"}
    for tag, expected in (("loss/scalar", LOSSES), ("acc/train/scalar", ACCURACIES)):
        values = by_step(scalars[tag])
        assert sorted(values) == list(STEPS)
        for step in STEPS:
            assert same_float(values[step], expected[step]), (tag, step, values[step])


def test_images(written: tuple[Path, Any]) -> None:
    _, seen = written
    images = by_step(seen["plugins"]["image"]["input_data/image"])
    assert sorted(images) == list(STEPS)
    for step in STEPS:
        image = images[step]
        # Two 3x4x5 images side by side, channels last.
        expected = np.concatenate([picture.transpose(1, 2, 0) for picture in IMAGES + step], axis=1)
        assert (image["height"], image["width"], image["colorspace"]) == (4, 10, 3)
        assert image["mode"] == "RGB"
        assert np.array_equal(np.asarray(image["pixels"], dtype=np.uint8), expected)


def test_histograms(written: tuple[Path, Any]) -> None:
    run, seen = written
    histograms = by_step(seen["plugins"]["histogram"]["conv1.weight/histogram"])
    ours = {
        event.step: value.value
        for event in load_dir(run)
        for value in event.values
        if value.plugin == "histogram"
    }
    assert sorted(histograms) == list(STEPS)
    for step in STEPS:
        histogram = histograms[step]
        assert histogram["count"] == 200  # the finite values; NaN and inf are counted apart
        assert (histogram["min"], histogram["max"]) == (-1.0 * step, 1.0 * step)
        assert histogram["buckets"] == [
            [bucket.left, bucket.width, bucket.count] for bucket in ours[step].buckets
        ]
        assert sum(bucket[2] for bucket in histogram["buckets"]) == 200


def test_tensors(written: tuple[Path, Any]) -> None:
    _, seen = written
    tensors = by_step(seen["plugins"]["tensor"]["fc.bias/tensor"])
    assert sorted(tensors) == list(STEPS)
    for step in STEPS:
        assert tensors[step]["dims"] == [3, 4]
        assert tensors[step]["values"] == (TENSOR * step).reshape(-1).tolist()


def test_graph(written: tuple[Path, Any]) -> None:
    _, seen = written
    graphs = seen["plugins"]["graph"]
    (tag,) = graphs
    assert tag.endswith("_MS")
    (event,) = graphs[tag]
    assert event["value"]["nodes"] == [
        ["Default/network/ReLU-op2", "ReLU", ["Default/network/conv1/Conv2D-op1"]],
        ["Default/network/conv1/Conv2D-op1", "Conv2D", []],
        ["Default/network/fc/MatMul-op3", "MatMul", ["Default/network/ReLU-op2"]],
    ]


def test_lineage(written: tuple[Path, Any], mindinsight: Any) -> None:
    run, _ = written
    (answer,) = mindinsight.filter(run.parent, [{}])
    theirs = answer["result"]
    ours = filter_summary_lineage(str(run.parent))
    assert theirs["count"] == ours["count"] == 1
    (their_run,) = theirs["object"]
    (our_run,) = ours["object"]
    assert their_run["summary_dir"] == "./lenet"
    assert our_run["summary_dir"] == os.path.realpath(run)
    assert their_run["model_lineage"] == our_run["model_lineage"]
    assert their_run["dataset_graph"] == our_run["dataset_graph"]
    assert theirs["customized"] == ours["customized"]
    lineage = their_run["model_lineage"]
    assert lineage["learning_rate"] == 0.01 and lineage["loss"] == 0.5
    assert lineage["metric"] == {"acc": 0.9825, "loss": 0.06}
    assert lineage["user_defined"] == {"seed": 7, "note": "golden"}
    assert lineage["train_dataset_count"] == 60000 and lineage["test_dataset_count"] == 10000
