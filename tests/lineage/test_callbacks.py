"""TrainLineage / EvalLineage, duck-typed on run_context.original_args()."""

from __future__ import annotations

import collections
import functools
import json
import logging
import operator
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.lineage import (
    EvalLineage,
    TrainLineage,
    filter_summary_lineage,
    get_run_lineage,
    get_summary_lineage,
)
from rankscribe.lineage.errors import LineageParamTypeError
from rankscribe.lineage.recording import train_lineage_from_args
from rankscribe.writer.files import frame
from rankscribe.writer.pb import lineage_pb2

PLUGIN_FIELDS = {
    "train_lineage": "train_lineage",
    "eval_lineage": "evaluation_lineage",
    "dataset_graph": "dataset_graph",
    "custom_lineage_data": "user_defined_info",
}


class FakeSummaryRecord:
    """The SummaryRecord API the callbacks use; writes a real _lineage file on record()."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / f"events.out.events.summary.{int(time.time())}.0.vm_lineage"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.pending: list[lineage_pb2.LineageEvent] = []
        self.steps: list[int] = []

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        event = lineage_pb2.LineageEvent(wall_time=time.time())
        getattr(event, PLUGIN_FIELDS[plugin]).CopyFrom(value)
        self.pending.append(event)

    def record(self, step: int) -> bool:
        self.steps.append(step)
        with open(self.path, "ab") as stream:
            for event in self.pending:
                stream.write(frame(event.SerializeToString()))
        self.pending.clear()
        return True


class Momentum:
    def __init__(self, learning_rate: Any) -> None:
        self.learning_rate = learning_rate


class SoftmaxCrossEntropyWithLogits:
    pass


class LeNet:
    pass


class WithLossCell:
    def __init__(self, network: Any) -> None:
        self._backbone = network


class TrainOneStepCell:
    def __init__(self, network: Any) -> None:
        self.network = network


class MnistDataset:
    dataset_dir = "/data/mnist"
    children: tuple[Any, ...] = ()


class BatchDataset:
    def __init__(self, child: Any, batch_size: int, batches: int) -> None:
        self.children = [child]
        self._batch_size = batch_size
        self._batches = batches

    def get_batch_size(self) -> int:
        return self._batch_size

    def get_dataset_size(self) -> int:
        return self._batches

    def to_json(self) -> dict[str, Any]:
        return {
            "op_type": "Batch",
            "batch_size": self._batch_size,
            "drop_remainder": True,
            "children": [
                {
                    "op_type": "MnistDataset",
                    "dataset_dir": "/data/mnist",
                    "sampler": {"sampler_name": "SequentialSampler"},
                    "children": [],
                }
            ],
        }


class ModelCheckpoint:
    def __init__(self, path: Path) -> None:
        self.latest_ckpt_file_name = str(path)


class RunContext:
    def __init__(self, **args: Any) -> None:
        self._args = args

    def original_args(self) -> dict[str, Any]:
        return self._args


def train_context(tmp_path: Path, **overrides: Any) -> RunContext:
    checkpoint = tmp_path / "ckpt" / "net-2_10.ckpt"
    checkpoint.parent.mkdir(exist_ok=True)
    checkpoint.write_bytes(b"x" * 5251)
    args = {
        "optimizer": Momentum(np.array([0.01], dtype=np.float32)),
        "loss_fn": SoftmaxCrossEntropyWithLogits(),
        "train_network": TrainOneStepCell(WithLossCell(LeNet())),
        "train_dataset": BatchDataset(MnistDataset(), batch_size=4, batches=10),
        "epoch_num": 2,
        "parallel_mode": "stand_alone",
        "device_number": 1,
        "net_outputs": (np.array([2.0, 3.0], dtype=np.float32), None),
        "list_callback": [object(), ModelCheckpoint(checkpoint)],
        "cur_step_num": 20,
    }
    args.update(overrides)
    return RunContext(**args)


def run_training_and_eval(record: Any, tmp_path: Path) -> None:
    train = TrainLineage(record, user_defined_info={"note": "cb", "seed": 7, "dropout": 0.25})
    context = train_context(tmp_path)
    train.begin(context)
    train.end(context)
    evaluation = EvalLineage(record)
    evaluation.end(
        RunContext(
            metrics={"acc": np.float32(0.5), "loss": 2.25},
            valid_dataset=BatchDataset(MnistDataset(), batch_size=4, batches=4),
            cur_step_num=4,
        )
    )


def expected_lineage(tmp_path: Path) -> dict[str, Any]:
    checkpoint = os.path.realpath(tmp_path / "ckpt" / "net-2_10.ckpt")
    return {
        "metric": {"acc": 0.5, "loss": 2.25},
        "hyper_parameters": {
            "optimizer": "Momentum",
            "learning_rate": 0.01,
            "loss_function": "SoftmaxCrossEntropyWithLogits",
            "epoch": 2,
            "parallel_mode": "stand_alone",
            "device_num": 1,
            "batch_size": 4,
        },
        "algorithm": {"network": "LeNet", "loss": 2.5},
        "train_dataset": {"train_dataset_path": "/data/mnist", "train_dataset_size": 40},
        "valid_dataset": {"valid_dataset_path": "/data/mnist", "valid_dataset_size": 16},
        "model": {"path": json.dumps({"ckpt": checkpoint}), "size": 5251},
        "dataset_graph": {
            "op_type": "Batch",
            "drop_remainder": True,
            "batch_size": 4,
            "children": [
                {
                    "op_type": "MnistDataset",
                    "dataset_dir": "/data/mnist",
                    "sampler": {"sampler_name": "SequentialSampler"},
                    "children": [],
                }
            ],
        },
    }


def test_callbacks_with_a_fake_record(tmp_path: Path) -> None:
    record = FakeSummaryRecord(tmp_path / "run")
    run_training_and_eval(record, tmp_path)
    assert record.steps == [20, 4]
    result = get_summary_lineage(str(tmp_path / "run"))
    assert result == {"summary_dir": str(tmp_path / "run"), **expected_lineage(tmp_path)}
    lineage = get_run_lineage(str(tmp_path / "run"))
    assert lineage is not None
    assert lineage.section("user_defined") == {"note": "cb", "seed": 7, "dropout": 0.25}


def test_callbacks_with_the_writers_summary_record(tmp_path: Path) -> None:
    from rankscribe.writer import SummaryRecord

    log_dir = tmp_path / "run"
    with SummaryRecord(str(log_dir)) as record:
        run_training_and_eval(record, tmp_path)
    names = os.listdir(log_dir)
    assert any(name.endswith("_lineage") for name in names), names
    result = get_summary_lineage(str(log_dir))
    assert result == {"summary_dir": str(log_dir), **expected_lineage(tmp_path)}
    query = filter_summary_lineage(str(tmp_path), {"user_defined/note": {"eq": "cb"}})
    assert query["count"] == 1


class TorchLikeTensor:
    """What the callbacks need from a torch tensor: detach().cpu().numpy()."""

    def __init__(self, value: Any) -> None:
        self.value = np.asarray(value, dtype=np.float32)

    def detach(self) -> TorchLikeTensor:
        return self

    def cpu(self) -> TorchLikeTensor:
        return self

    def numpy(self) -> Any:
        return self.value


class TorchOptimizer:
    def __init__(self) -> None:
        self.param_groups = [{"lr": 0.125}]


def test_framework_agnostic_values(tmp_path: Path) -> None:
    record = FakeSummaryRecord(tmp_path / "run")
    callback = TrainLineage(record)
    callback.end(
        RunContext(
            optimizer=TorchOptimizer(),
            net_outputs=TorchLikeTensor([1.0, 3.0]),
            network=LeNet(),
            batch_size=32,
            epoch_num=1,
        )
    )
    result = get_summary_lineage(str(tmp_path / "run"))
    assert result["hyper_parameters"] == {
        "optimizer": "TorchOptimizer",
        "learning_rate": 0.125,
        "epoch": 1,
        "batch_size": 32,
    }
    assert result["algorithm"] == {"network": "LeNet", "loss": 2.0}
    assert result["model"] == {"path": '{"ckpt": null}', "size": 0}


def test_an_empty_output_array_is_no_loss(tmp_path: Path) -> None:
    """No loss recorded, and no numpy warning about the mean of an empty slice."""
    record = FakeSummaryRecord(tmp_path / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrainLineage(record).end(
            RunContext(net_outputs=np.array([], dtype=np.float32), network=LeNet(), epoch_num=1)
        )
    result = get_summary_lineage(str(tmp_path / "run"))
    assert "loss" not in result["algorithm"]
    assert result["algorithm"]["network"] == "LeNet"


def test_failures_are_logged_unless_raise_exception(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = FakeSummaryRecord(tmp_path / "run")
    with caplog.at_level(logging.ERROR):
        EvalLineage(record).end(RunContext(metrics=["not", "a", "dict"]))
    assert "EvalLineage.end failed" in caplog.text
    assert not record.path.exists()
    with pytest.raises(ValueError, match="metrics must be a dict"):
        EvalLineage(record, raise_exception=True).end(RunContext(metrics=[1]))
    with pytest.raises(LineageParamTypeError, match="original_args"):
        TrainLineage(record, raise_exception=True).end(object())


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"summary_record": object()}, "add_value"),
        ({"summary_record": None}, "add_value"),
        ({"raise_exception": "yes"}, "raise_exception must be True or False"),
        ({"user_defined_info": {"flag": True}}, "must be int, float or str"),
        ({"user_defined_info": {"big": 2**40}}, "outside int32"),
        ({"user_defined_info": {1: 1}}, "keys must be str"),
    ],
)
def test_constructor_checks(tmp_path: Path, arguments: dict[str, Any], words: str) -> None:
    values = {"summary_record": FakeSummaryRecord(tmp_path), **arguments}
    with pytest.raises((TypeError, ValueError), match=words):
        TrainLineage(**values)


def test_the_package_never_imports_the_collector_above_it() -> None:
    # The floors below (the writer, ranks) it may use; tools/check_boundaries.py checks
    # every import statement against the package graph.
    import rankscribe.lineage

    package = Path(rankscribe.lineage.__file__).parent
    for module in package.rglob("*.py"):
        source = module.read_text()
        assert "rankscribe.collector" not in source, module


# -- names in the train lineage (docs/collector-schedule.md, "Names in the train lineage") --


class Named:
    def __init__(self, name: Any) -> None:
        self.name = name


class NameFails:
    @property
    def name(self) -> str:
        raise RuntimeError("not now")


def mean_squared_error(outputs: Any, labels: Any) -> float:
    return 0.0


class Losses:
    def smooth_l1(self, outputs: Any, labels: Any) -> float:
        return 0.0


@pytest.mark.parametrize(
    "loss_fn, expected",
    [
        (SoftmaxCrossEntropyWithLogits(), "SoftmaxCrossEntropyWithLogits"),
        (SoftmaxCrossEntropyWithLogits, "SoftmaxCrossEntropyWithLogits"),
        (mean_squared_error, "mean_squared_error"),
        (Losses().smooth_l1, "smooth_l1"),
        (
            functools.partial(functools.partial(mean_squared_error), labels=None),
            "mean_squared_error",
        ),
        (np.mean, "mean"),
        (abs, "abs"),
        ("  huber ", "huber"),
        (Named("Focal"), "Focal"),
        (Named(""), "Named"),  # an empty name is no name: the class name then
        (Named(3), "Named"),
        (NameFails(), "NameFails"),
        (lambda outputs, labels: 0.0, None),
        ({"kind": "mse"}, None),
        ([mean_squared_error], None),
        (collections.OrderedDict(), None),
        (operator.itemgetter(0), None),
        (None, None),
    ],
)
def test_the_loss_function_name(tmp_path: Path, loss_fn: Any, expected: str | None) -> None:
    record = FakeSummaryRecord(tmp_path / "run")
    TrainLineage(record, raise_exception=True).end(train_context(tmp_path, loss_fn=loss_fn))
    hyper = get_summary_lineage(str(tmp_path / "run"))["hyper_parameters"]
    assert hyper.get("loss_function") == expected
    assert hyper["optimizer"] == "Momentum"


def test_an_object_that_names_itself_is_shown_by_that_name(tmp_path: Path) -> None:
    optimizer = Momentum(0.1)
    optimizer.name = "Momentum-nesterov"  # type: ignore[attr-defined]
    network = LeNet()
    network.name = "lenet5"  # type: ignore[attr-defined]
    record = FakeSummaryRecord(tmp_path / "run")
    TrainLineage(record, raise_exception=True).end(
        train_context(
            tmp_path, optimizer=optimizer, train_network=TrainOneStepCell(WithLossCell(network))
        )
    )
    lineage = get_summary_lineage(str(tmp_path / "run"))
    assert lineage["hyper_parameters"]["optimizer"] == "Momentum-nesterov"
    assert lineage["hyper_parameters"]["learning_rate"] == pytest.approx(0.1)
    assert lineage["algorithm"]["network"] == "lenet5"


def test_a_dict_network_leaves_the_network_out(tmp_path: Path) -> None:
    record = FakeSummaryRecord(tmp_path / "run")
    TrainLineage(record, raise_exception=True).end(
        train_context(tmp_path, train_network=None, network={"w": np.ones(2)})
    )
    lineage = get_summary_lineage(str(tmp_path / "run"))
    assert "network" not in lineage["algorithm"]
    assert lineage["algorithm"]["loss"] == pytest.approx(2.5)  # the rest is still there


def test_a_data_parallel_wrapper_is_named_by_the_model_it_runs() -> None:
    class Classifier:
        pass

    class DistributedDataParallel:  # torch's wrapper, as the builder sees it: by name
        def __init__(self, module: object) -> None:
            self.module = module

    class OptimizedModule:  # torch.compile's
        def __init__(self, module: object) -> None:
            self._orig_mod = module

    wrapped = OptimizedModule(DistributedDataParallel(Classifier()))
    for key in ("network", "train_network"):
        lineage = train_lineage_from_args({key: wrapped})
        assert lineage.algorithm is not None
        assert lineage.algorithm.network == "Classifier"


def test_a_checkpoint_folder_counts_the_model_weights_it_holds(tmp_path: Path) -> None:
    # The Hugging Face Trainer's checkpoint-<step>/: the model's weights beside the
    # optimizer's, scheduler's and generators' state; the size is the weights'.
    folder = tmp_path / "checkpoint-12"
    folder.mkdir()
    sizes = {
        "model-00001-of-00002.safetensors": 1000,
        "model-00002-of-00002.safetensors": 24,
        "optimizer.pt": 2000,
        "scheduler.pt": 100,
        "rng_state.pth": 300,
        "training_args.bin": 50,
        "config.json": 70,
    }
    for name, size in sizes.items():
        (folder / name).write_bytes(b"x" * size)
    (tmp_path / "big").write_bytes(b"x" * 4096)
    (folder / "linked.safetensors").symlink_to(tmp_path / "big")  # not followed
    model = train_lineage_from_args({"list_callback": [ModelCheckpoint(folder)]}).model
    assert model is not None and model.size == 1024 and model.path is not None
    assert json.loads(model.path) == {"ckpt": os.path.realpath(folder)}

    # No weights file known by its name: every regular file at the top level counts.
    other = tmp_path / "exported"
    (other / "inner").mkdir(parents=True)
    (other / "weights.npz").write_bytes(b"x" * 600)
    (other / "notes.txt").write_bytes(b"x" * 11)
    (other / "inner" / "deeper.safetensors").write_bytes(b"x" * 5000)  # not the top level
    model = train_lineage_from_args({"list_callback": [ModelCheckpoint(other)]}).model
    assert model is not None and model.size == 611


def test_a_metric_that_is_not_json_is_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # MindSpore's SummaryCollector leaves every metric out when one is not JSON; only
    # that one is left out here (docs/mindinsight-differences.md, "metric-not-json").
    record = FakeSummaryRecord(tmp_path / "run")
    with caplog.at_level(logging.WARNING):
        EvalLineage(record).end(
            RunContext(metrics={"acc": 0.5, "confusion": object(), "labels": ["a", "b"]})
        )
    assert get_summary_lineage(str(tmp_path / "run"))["metric"] == {
        "acc": 0.5,
        "labels": ["a", "b"],
    }
    assert "are left out of the lineage: 'confusion'." in caplog.text
