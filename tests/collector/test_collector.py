"""SummaryCollector end to end through TrainLoop: what lands in the files and the lineage."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from rankscribe.collector import (
    Callback,
    CallbackParams,
    ModelCheckpoint,
    RunContext,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.lineage import get_summary_lineage
from rankscribe.lineage.recording import TRAIN_STOP_FILE_NAME, read_train_stop
from rankscribe.ranks import Coordinator, RankInfo
from rankscribe.writer.events import load_dir, load_lineage_dir

NO_LANDSCAPE: dict[str, Any] = {"collect_landscape": None}


def loss_step(batch: Any) -> np.floating[Any]:
    return np.float32(0.5)


def run(
    model: Any,
    directory: Path,
    callbacks: list[Callback] | None = None,
    epochs: int = 1,
    batches: int = 4,
    step: Any = loss_step,
    **arguments: Any,
) -> Any:
    data = model(batches)
    arguments.setdefault("collect_specified_data", NO_LANDSCAPE)
    instance = SummaryCollector(directory, collect_freq=1, **arguments)
    loop = TrainLoop(
        step, network=data.network, optimizer=data.optimizer, loss_fn=SoftmaxCrossEntropy()
    )
    loop.train(epochs, data.dataset, callbacks=[*(callbacks or []), instance])
    return data


class SoftmaxCrossEntropy:
    """Stands for a loss function: the lineage records its class name."""


# ------------------------------------------------------------------ the record


def summary_steps(directory: Path) -> dict[int, list[str]]:
    """``{step: [tag, ...]}`` of the summary events in ``directory``."""
    return {
        event.step: [value.tag for value in event.values]
        for event in load_dir(directory)
        if event.what == "summary" and event.step is not None
    }


def test_summary_record_is_made_on_enter_with_the_collectors_settings(tmp_path: Path) -> None:
    instance = SummaryCollector(
        tmp_path,
        max_file_size=4096,
        export_options={"tensor_format": "npy"},
        collect_specified_data=NO_LANDSCAPE,
    )
    assert instance.record is None
    with instance:
        record = instance.record
        assert record is not None
        record.add_value("tensor", "t", np.arange(3.0))
        record.record(1)
        # Larger than max_file_size: dropped and logged, never raised (raise_exception=False).
        record.add_value("tensor", "big", np.zeros(10_000))
        record.record(2)
        record.add_value("scalar", "s", np.float32(1.0))
        record.record(3)
    assert instance.record is None
    # A single process writes into summary_dir itself, within max_file_size.
    (summary,) = [path for path in tmp_path.iterdir() if ".summary." in path.name]
    assert summary.stat().st_size <= 4096
    assert summary_steps(tmp_path) == {1: ["t"], 3: ["s"]}
    # export_options reaches the writer: tensors are exported as .npy files.
    (exported,) = tmp_path.glob("export_*/tensor/t_1.npy")
    np.testing.assert_array_equal(np.load(exported), np.arange(3.0))


@pytest.mark.parametrize("num_process", [1, 3, 32])
def test_every_num_process_records_the_same_values_in_order(
    tmp_path: Path, num_process: int
) -> None:
    expected = {step: np.linspace(0.0, step, 50) for step in range(1, 21)}
    with SummaryCollector(
        tmp_path, num_process=num_process, collect_specified_data=NO_LANDSCAPE
    ) as instance:
        record = instance.record
        assert record is not None
        for step, weights in expected.items():
            record.add_value("histogram", "w", weights)
            record.add_value("scalar", "s", np.float32(step))
            record.record(step)
    found = {
        event.step: {value.tag: value.value for value in event.values}
        for event in load_dir(tmp_path)
        if event.what == "summary"
    }
    assert list(found) == list(expected)
    for step, weights in expected.items():
        assert found[step]["s"] == pytest.approx(step)
        histogram = found[step]["w"]
        assert (histogram.count, histogram.min, histogram.max) == (50, 0.0, weights.max())


def test_used_without_with_the_record_lives_from_begin_to_end(tmp_path: Path) -> None:
    # No machine samples (taken as training starts and ends): the loss alone is recorded.
    instance = SummaryCollector(tmp_path, collect_specified_data=NO_LANDSCAPE, system_interval=0)
    params = CallbackParams(
        mode="train",
        list_callback=[instance],
        epoch_num=1,
        batch_num=1,
        cur_step_num=1,
        cur_epoch_num=1,
        net_outputs=np.float32(2.0),
    )
    context = RunContext(params)
    instance.begin(context)
    assert instance.record is not None
    instance.step_end(context)
    instance.epoch_end(context)
    instance.end(context)
    assert instance.record is None
    assert [v.value for e in load_dir(tmp_path) if e.what == "summary" for v in e.values] == [2.0]


def test_each_run_gets_its_own_files(model: Any, tmp_path: Path) -> None:
    data = model(2)
    instance = SummaryCollector(tmp_path, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
    loop = TrainLoop(loss_step, network=data.network, optimizer=data.optimizer)
    loop.train(1, data.dataset, callbacks=[instance])
    loop.train(1, data.dataset, callbacks=[instance])
    summary_files = [name for name in os.listdir(tmp_path) if name.endswith("_MS")]
    assert len(summary_files) == 2
    # each run starts its schedule again: both have their first step collected
    steps = [e.step for e in load_dir(tmp_path) if e.what == "summary"]
    assert steps.count(1) == 2


# --------------------------------------------------------------- what is kept


def test_graph_is_written_once(model: Any, tmp_path: Path) -> None:
    run(model, tmp_path, epochs=2)
    graphs = [e.graph for e in load_dir(tmp_path) if e.what == "graph_def"]
    assert len(graphs) == 1
    assert graphs[0] is not None
    assert [node.name for node in graphs[0].nodes] == ["x", "fc", "add"]
    assert graphs[0].parameters == ("fc.weight", "fc.bias")


def test_a_network_without_a_graph_warns_once(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The warning is said once per network class and process: a network class of this
    # test's own keeps it from depending on which earlier test ran a graphless network.
    graphless: list[type] = []

    def plain(batches: int) -> Any:
        built = model(batches, graph=False)
        if not graphless:
            graphless.append(type("GraphlessModel", (type(built.network),), {}))
        built.network.__class__ = graphless[0]
        return built

    run(plain, tmp_path / "first", epochs=2)
    assert not [e for e in load_dir(tmp_path / "first") if e.what == "graph_def"]
    assert caplog.text.count("SummaryCollector will not collect graph") == 1
    assert "GraphlessModel" in caplog.text
    caplog.clear()
    run(plain, tmp_path / "second", epochs=1)
    assert "SummaryCollector will not collect graph" not in caplog.text


def test_histogram_regular_uses_re_match(model: Any, tmp_path: Path, read_steps: Any) -> None:
    specified = {**NO_LANDSCAPE, "histogram_regular": "head|norm.g"}
    run(model, tmp_path, collect_specified_data=specified)
    tags = {tag for plugin, tag in read_steps(tmp_path) if plugin == "histogram"}
    # re.match anchors at the start only: "fc.weight" does not match, "norm.gamma" does
    assert tags == {"head.weight/auto", "head.bias/auto", "norm.gamma/auto"}


def test_histogram_values_are_the_parameters_at_that_step(
    model: Any, tmp_path: Path, read_values: Any
) -> None:
    holder: dict[str, Any] = {}

    def step(batch: Any) -> float:
        holder["data"].network["fc.bias"][:] += 1.0
        return 0.1

    data = model(3)
    holder["data"] = data
    instance = SummaryCollector(tmp_path, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
    TrainLoop(step, network=data.network, optimizer=data.optimizer).train(
        1, data.dataset, callbacks=[instance]
    )
    values = read_values(tmp_path, "histogram", "fc.bias/auto")
    assert {step: (h.min, h.max) for step, h in values.items()} == {
        1: (1.0, 1.0),
        2: (2.0, 2.0),
        3: (3.0, 3.0),
    }


def test_collect_metric_false_keeps_loss_out(model: Any, tmp_path: Path, read_steps: Any) -> None:
    run(model, tmp_path, collect_specified_data={**NO_LANDSCAPE, "collect_metric": False})
    assert ("scalar", "loss/auto") not in read_steps(tmp_path)


def test_keep_default_action_false_collects_only_what_is_named(
    model: Any, tmp_path: Path, read_steps: Any
) -> None:
    run(
        model,
        tmp_path,
        collect_specified_data={"collect_metric": True},
        keep_default_action=False,
        system_interval=0,  # the machine's samples are the sampler's, not collect_specified_data's
    )
    # The job view's own tags come whatever collect_specified_data says.
    assert set(read_steps(tmp_path)) == {
        ("scalar", "loss/auto"),
        ("scalar", "rankscribe/step_time"),
        ("scalar", "rankscribe/data_wait"),
        ("scalar", "rankscribe/param_fingerprint"),
    }
    assert not [e for e in load_dir(tmp_path) if e.what == "graph_def"]
    assert load_lineage_dir(tmp_path) == []


def test_loss_is_the_mean_of_the_first_output(model: Any, tmp_path: Path, read_values: Any) -> None:
    def step(batch: Any) -> tuple[np.ndarray, str]:
        return np.array([1.0, 2.0, 6.0]), "logits"

    run(model, tmp_path, step=step)
    assert set(read_values(tmp_path, "scalar", "loss/auto").values()) == {3.0}


def test_unreadable_loss_warns_once(
    model: Any, tmp_path: Path, read_steps: Any, caplog: pytest.LogCaptureFixture
) -> None:
    run(model, tmp_path, step=lambda batch: {"loss": 1.0})
    assert ("scalar", "loss/auto") not in read_steps(tmp_path)
    assert caplog.text.count("no loss was recorded in SummaryCollector") == 1


def test_input_data_that_is_not_an_image_is_disabled_with_one_info_line(
    model: Any, tmp_path: Path, read_steps: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A tabular job: once per run, at INFO (MindSpore warns: docs/mindinsight-differences.md,
    # "input-not-image"), also over two epochs and a second training run.
    from rankscribe.collector import ArrayDataset

    data = model(4)
    flat = ArrayDataset(np.zeros((8, 16), np.float32), batch_size=2)
    instance = SummaryCollector(tmp_path, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
    with caplog.at_level(logging.INFO):
        for _ in range(2):
            TrainLoop(loss_step, network=data.network, optimizer=data.optimizer).train(
                2, flat, callbacks=[instance]
            )
    assert ("image", "input_data/auto") not in read_steps(tmp_path)
    said = [r for r in caplog.records if "will not collect input data" in r.getMessage()]
    assert [(r.levelno, "not image" in r.getMessage()) for r in said] == [(logging.INFO, True)]


def test_input_data_with_four_channels_is_disabled_with_one_warning(
    tmp_path: Path, read_steps: Any, caplog: pytest.LogCaptureFixture, model: Any
) -> None:
    from rankscribe.collector import ArrayDataset

    data = model(4)
    rgba = ArrayDataset(np.zeros((8, 4, 2, 2), np.float32), batch_size=2)
    instance = SummaryCollector(tmp_path, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
    TrainLoop(loss_step, network=data.network).train(1, rgba, callbacks=[instance])
    assert ("image", "input_data/auto") not in read_steps(tmp_path)
    assert caplog.text.count("SummaryCollector will not collect input data") == 1


def test_no_optimizer_means_no_histograms_and_one_warning(
    model: Any, tmp_path: Path, read_steps: Any, caplog: pytest.LogCaptureFixture
) -> None:
    data = model(3)
    instance = SummaryCollector(tmp_path, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
    TrainLoop(loss_step, network=data.network).train(1, data.dataset, callbacks=[instance])
    assert not [tag for plugin, tag in read_steps(tmp_path) if plugin == "histogram"]
    assert caplog.text.count("Can not find optimizer") == 1


def test_eval_steps_collect_nothing(model: Any, tmp_path: Path) -> None:
    data = model(3)
    instance = SummaryCollector(tmp_path, collect_specified_data=NO_LANDSCAPE)
    loop = TrainLoop(loss_step, network=data.network, eval_fn=lambda batch: {"acc": 0.5})
    loop.eval(data.dataset, callbacks=[instance])
    # as the original: an evaluation alone writes a _lineage file and no _MS file
    assert not [name for name in os.listdir(tmp_path) if name.endswith("_MS")]
    records = load_lineage_dir(tmp_path)
    assert [r.what for r in records] == ["evaluation_lineage"]


# --------------------------------------------------------------------- lineage


def test_train_then_eval_lineage(model: Any, tmp_path: Path) -> None:
    data = model(5)
    instance = SummaryCollector(
        tmp_path,
        collect_specified_data=NO_LANDSCAPE,
        custom_lineage_data={"owner": "team-a", "trial": 3},
    )
    loop = TrainLoop(
        lambda batch: (np.array([1.5, 0.5]),),
        network=data.network,
        optimizer=data.optimizer,
        loss_fn=SoftmaxCrossEntropy(),
        eval_fn=lambda batch: {"acc": 0.5, "top5": 1},
    )
    loop.train(2, data.dataset, callbacks=[instance])
    metrics = loop.eval(data.dataset, callbacks=[instance])
    assert metrics == {"acc": 0.5, "top5": 1.0}
    lineage = get_summary_lineage(str(tmp_path))
    assert lineage["hyper_parameters"] == {
        "optimizer": "Momentum",
        "learning_rate": 0.01,
        "loss_function": "SoftmaxCrossEntropy",
        "epoch": 2,
        "parallel_mode": "stand_alone",
        "device_num": 1,
        "batch_size": 2,
    }
    assert lineage["algorithm"] == {"network": "TinyNet", "loss": 1.0}
    assert lineage["train_dataset"] == {
        "train_dataset_path": "/data/tiny",
        "train_dataset_size": 10,
    }
    assert lineage["valid_dataset"] == {
        "valid_dataset_path": "/data/tiny",
        "valid_dataset_size": 10,
    }
    assert lineage["metric"] == {"acc": 0.5, "top5": 1.0}
    assert lineage["model"] == {"path": json.dumps({"ckpt": None}), "size": 0}
    assert lineage["dataset_graph"] == {
        "op_type": "ArrayDataset",
        "batch_size": 2,
        "shuffle": False,
        "children": [],
    }


def test_custom_lineage_is_in_every_training_runs_lineage(model: Any, tmp_path: Path) -> None:
    """Each run's lineage file holds it: MindInsight restarts a run's lineage at each train
    lineage file, so a second run with the same collector would otherwise lose it."""
    data = model(2)
    instance = SummaryCollector(
        tmp_path, collect_specified_data=NO_LANDSCAPE, custom_lineage_data={"trial": 7}
    )
    loop = TrainLoop(loss_step, network=data.network, optimizer=data.optimizer)
    loop.train(1, data.dataset, callbacks=[instance])
    loop.train(1, data.dataset, callbacks=[instance])
    from rankscribe.lineage.recording import parse_run

    lineage = parse_run(str(tmp_path)).lineage
    assert lineage is not None and lineage.section("user_defined") == {"trial": 7}
    assert lineage.section("dataset_graph")["op_type"] == "ArrayDataset"


def test_custom_lineage_and_hyper_config_are_written_once(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "MINDINSIGHT_HYPER_CONFIG",
        json.dumps({"custom_lineage_data": {"lr_schedule": "cosine", "trial": 1}}),
    )
    run(model, tmp_path, epochs=2, custom_lineage_data={"trial": 7})
    records = [r for r in load_lineage_dir(tmp_path) if r.what == "user_defined_info"]
    assert len(records) == 1
    # one user_info entry per key, each holding that key alone
    assert records[0].data == {
        "user_info": [{"map_str": {"lr_schedule": "cosine"}}, {"map_int32": {"trial": 7}}]
    }


class FakeCheckpoint(Callback):
    """Exposes what the lineage reads from a ModelCheckpoint."""

    def __init__(self, path: Path) -> None:
        self.latest_ckpt_file_name: str | None = None
        self.path = path

    def step_end(self, run_context: RunContext) -> None:
        self.path.write_bytes(b"w" * (100 + run_context.original_args().cur_step_num))
        self.latest_ckpt_file_name = str(self.path)


def test_lineage_names_the_checkpoint_path_and_size(model: Any, tmp_path: Path) -> None:
    summary = tmp_path / "summary"
    link = tmp_path / "latest.ckpt"
    target = tmp_path / "ckpt" / "net-1_4.ckpt"
    target.parent.mkdir()
    target.write_bytes(b"")
    link.symlink_to(target)
    run(model, summary, callbacks=[FakeCheckpoint(link)], batches=4)
    lineage = get_summary_lineage(str(summary))
    # the real path of the latest file, and its size in bytes
    assert lineage["model"] == {"path": json.dumps({"ckpt": str(target)}), "size": 104}


def test_lineage_names_the_model_checkpoints_file(model: Any, tmp_path: Path) -> None:
    summary = tmp_path / "summary"
    saver = ModelCheckpoint(prefix="tiny", directory=tmp_path / "ckpt")
    run(model, summary, callbacks=[saver], batches=3)
    latest = saver.latest_ckpt_file_name
    assert latest is not None and Path(latest).name == "tiny-1_3.ckpt"
    lineage = get_summary_lineage(str(summary))
    assert lineage["model"] == {
        "path": json.dumps({"ckpt": os.path.realpath(latest)}),
        "size": os.path.getsize(latest),
    }
    assert lineage["model"]["size"] > 0


# ------------------------------------------------------------ ranks, one process


class FakeCoordinator:
    """A job of 2 ranks whose rank 1 never reaches rank 0 (as a timed-out gather reports it)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.payloads: list[Any] = []

    world_size = 2

    def bcast(self, obj: Any, root: int = 0, timeout: float | None = None) -> Any:
        """The claim of the job's directory (docs/layout.md): rank 0's never reaches rank 1."""
        from rankscribe.ranks.errors import CollectiveTimeoutError

        if self.rank != root:
            raise CollectiveTimeoutError("bcast", 1.0, [root], "rank 0 never sent its claim")
        return obj

    def gather(self, obj: Any, root: int = 0, timeout: float | None = None) -> Any:
        from rankscribe.ranks import GatherResult

        self.payloads.append(obj)
        if self.rank != root:
            return GatherResult(root=root, rank=self.rank, world_size=2)
        return GatherResult(root=0, rank=0, world_size=2, values={0: obj}, missing=(1,))

    def merge_payloads(self) -> list[Any]:
        """What this rank handed to the merge (the start's gather carries its directory)."""
        return [payload for payload in self.payloads if isinstance(payload, dict)]


# The collector accepts coordinators only; this double has the two collectives it calls.
Coordinator.register(FakeCoordinator)


def test_rank_writes_into_its_directory_and_keeps_its_tensor_share(
    model: Any, tmp_path: Path, read_steps: Any
) -> None:
    from rankscribe.writer import tensor_summary

    def step(batch: Any) -> float:
        tensor_summary("t", np.zeros(2))
        return 1.0

    info = RankInfo(rank=1, world_size=2, local_rank=1, local_size=2, host="h", launcher="pmi")
    coordinator = FakeCoordinator(rank=1)
    run(
        model,
        tmp_path,
        batches=30,
        step=step,
        rank_info=info,
        coordinator=coordinator,
        collect_tensor_freq=None,
    )
    assert sorted(os.listdir(tmp_path)) == ["rank_1"]
    names = os.listdir(tmp_path / "rank_1")
    assert all(".1." in name for name in names if "events" in name)  # rank 1 in the names
    steps = read_steps(tmp_path / "rank_1")
    # collect_freq 1, total 30: range(0, 31)[:21], so the job's tensor steps are 1..20;
    # rank 1 of 2 takes the second half
    assert steps[("tensor", "t")] == list(range(11, 21))
    assert steps[("scalar", "loss/auto")] == list(range(1, 31))
    assert len(coordinator.merge_payloads()) == 1  # rank 1 handed its lineage over


class UnreadableRate:
    """An optimizer whose learning rate cannot be read: recording the lineage fails."""

    def __init__(self, optimizer: Any) -> None:
        self._optimizer = optimizer

    def __getattr__(self, name: str) -> Any:
        if name == "learning_rate":
            raise RuntimeError("lineage bug")
        return getattr(self._optimizer, name)


def test_a_rank_whose_lineage_fails_still_takes_part_in_the_merge(
    model: Any, tmp_path: Path
) -> None:
    def unreadable_rate(batches: int) -> Any:
        data = model(batches)
        data.optimizer = UnreadableRate(data.optimizer)
        return data

    info = RankInfo(rank=1, world_size=2, local_rank=1, local_size=2, host="h", launcher="pmi")
    coordinator = FakeCoordinator(rank=1)
    with pytest.raises(RuntimeError, match="lineage bug"):
        run(unreadable_rate, tmp_path, batches=2, rank_info=info, coordinator=coordinator)
    assert len(coordinator.merge_payloads()) == 1  # rank 0 is not left waiting for this rank


def raising_at(number: int, error: BaseException) -> Any:
    """A step that raises ``error`` at its ``number``-th call."""
    steps = [0]

    def step(batch: Any) -> float:
        steps[0] += 1
        if steps[0] == number:
            raise error
        return 0.5

    return step


@pytest.mark.parametrize(
    ("world_size", "error", "kept", "signal"),
    [
        (2, RuntimeError("data error"), "RuntimeError", None),
        # Ctrl-C reaches every rank (mpiexec hands it on): the record says it was SIGINT's
        (2, KeyboardInterrupt(), "KeyboardInterrupt", "SIGINT"),
        (1, RuntimeError("data error"), None, None),  # one process: no job to tell
        (1, KeyboardInterrupt(), None, None),
    ],
)
def test_a_rank_whose_training_raises_keeps_it_in_its_stop_record(
    model: Any,
    tmp_path: Path,
    world_size: int,
    error: BaseException,
    kept: str | None,
    signal: str | None,
) -> None:
    step = raising_at(3, error)
    rank = world_size - 1
    info = RankInfo(
        rank=rank,
        world_size=world_size,
        local_rank=rank,
        local_size=world_size,
        host="h",
        launcher="pmi",
    )
    with pytest.raises(type(error)):
        run(
            model,
            tmp_path,
            batches=4,
            step=step,
            rank_info=info,
            coordinator=FakeCoordinator(rank=rank),
        )
    directory = tmp_path / f"rank_{rank}" if world_size > 1 else tmp_path
    stop = read_train_stop(directory)
    assert (stop.exception if stop is not None else None) == kept
    assert (stop.signal if stop is not None else None) == signal
    assert (directory / TRAIN_STOP_FILE_NAME).exists() == (kept is not None)


#: Called with (source, destination) at each rename of this process (an audit hook, which
#: cannot be removed: it calls these only while a test has put one here).
RENAMES: list[Callable[[str, str], None]] = []


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "os.rename" and RENAMES:
        for listener in list(RENAMES):
            listener(os.fsdecode(args[0]), os.fsdecode(args[1]))


def test_a_ctrl_c_stop_record_is_written_once_the_ranks_files_are_closed(
    model: Any, tmp_path: Path
) -> None:
    """The record says the rank wrote every step it ran: it comes into place (renamed,
    written whole) after its files are final (read-only), never before (a rank killed
    meanwhile leaves none)."""
    modes_then: list[list[int]] = []

    def look(source: str, destination: str) -> None:
        if destination.endswith(TRAIN_STOP_FILE_NAME):
            files = sorted((tmp_path / "rank_1").glob("*_MS"))
            modes_then.append([path.stat().st_mode & 0o777 for path in files])

    if _on_audit not in AUDIT_HOOKS:
        sys.addaudithook(_on_audit)
        AUDIT_HOOKS.append(_on_audit)
    RENAMES.append(look)
    info = RankInfo(rank=1, world_size=2, local_rank=1, local_size=2, host="h", launcher="pmi")
    try:
        with pytest.raises(KeyboardInterrupt):
            run(
                model,
                tmp_path,
                batches=4,
                step=raising_at(3, KeyboardInterrupt()),
                rank_info=info,
                coordinator=FakeCoordinator(rank=1),
            )
    finally:
        RENAMES.remove(look)
    assert modes_then == [[0o400]]
    stop = read_train_stop(tmp_path / "rank_1")
    assert stop is not None and (stop.exception, stop.signal) == ("KeyboardInterrupt", "SIGINT")


#: The audit hooks this module added (at most one, for the whole session).
AUDIT_HOOKS: list[Callable[[str, tuple[Any, ...]], None]] = []


class DistNetworkError(RuntimeError):
    """torch.distributed's, by name (the collector does not import torch)."""


class UnprintableError(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("no text")


def _raised_from(error: BaseException, cause: BaseException) -> BaseException:
    error.__cause__ = cause
    return error


GLOO_RESET = (
    "[../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:11983: "
    "Connection reset by peer"
)


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        (RuntimeError(GLOO_RESET), True),
        (RuntimeError("[gloo/transport/tcp/pair.cc:598] Connection closed by peer [::1]"), True),
        (RuntimeError("NCCL error: remote process exited or there was a network error"), True),
        (RuntimeError("Remote peer closed the connection."), True),  # torch's store socket
        (DistNetworkError("the store went away"), True),
        (_raised_from(ValueError("the step failed"), RuntimeError(GLOO_RESET)), True),
        # The rank's own failures: a download whose server reset the connection, and
        # errors that say nothing of another rank.
        (ConnectionResetError(104, "Connection reset by peer"), False),
        (RuntimeError("CUDA out of memory"), False),
        (UnprintableError(), False),
    ],
)
def test_a_rank_that_raised_on_losing_another_says_so_in_its_stop_record(
    model: Any, tmp_path: Path, error: BaseException, lost: bool
) -> None:
    """Under torchrun a rank killed (by the out-of-memory killer) leaves no record, and the
    rank waiting for it in a collective raises the library's error: a consequence, which
    the job view does not take for the rank's own fault."""
    step = raising_at(3, error)
    info = RankInfo(rank=1, world_size=2, local_rank=1, local_size=2, host="h", launcher="pmi")
    with pytest.raises(type(error)):
        run(model, tmp_path, step=step, rank_info=info, coordinator=FakeCoordinator(rank=1))
    stop = read_train_stop(tmp_path / "rank_1")
    assert stop is not None
    assert (stop.exception, stop.lost_peer) == (type(error).__name__, lost)


def test_rank_zero_names_a_missing_rank_in_the_merged_lineage(model: Any, tmp_path: Path) -> None:
    info = RankInfo(rank=0, world_size=2, local_rank=0, local_size=2, host="h", launcher="pmi")
    run(model, tmp_path, batches=4, rank_info=info, coordinator=FakeCoordinator(rank=0))
    merged = [name for name in os.listdir(tmp_path) if ".merged." in name]
    assert len(merged) == 1
    lineage = get_summary_lineage(str(tmp_path))
    assert lineage["hyper_parameters"]["device_num"] == 2
    assert lineage["train_dataset"]["train_dataset_size"] == 8  # rank 0's only
    records = [r for r in load_lineage_dir(tmp_path) if r.what == "user_defined_info"]
    values = {
        key: value
        for entry in records[-1].data["user_info"]
        for kind in entry.values()
        for key, value in kind.items()
    }
    assert values["ranks_missing"] == "1"
    assert values["ranks_reported"] == 1 and values["ranks_expected"] == 2


def test_the_tensorboard_target_on_request(model: Any, tmp_path: Path) -> None:
    from rankscribe.writer.events import read_tensorboard_events

    summary = tmp_path / "summary"
    run(model, summary, batches=3, formats=["mindinsight", "tensorboard"], system_interval=0)
    [board] = summary.glob("events.out.tfevents.*")
    steps = [
        event.step
        for event in read_tensorboard_events(board)
        if event.WhichOneof("what") == "summary"
    ]
    assert steps == [0, 1, 2, 3]  # 0: the parameter fingerprint when training begins


@pytest.mark.parametrize("formats", [(), ["png"], "mindinsight,tensorboard", None])
def test_formats_must_name_known_targets(tmp_path: Path, formats: Any) -> None:
    from rankscribe.collector.errors import CollectorValueError

    with pytest.raises(CollectorValueError, match="'formats'"):
        SummaryCollector(str(tmp_path), formats=formats)


def test_a_source_that_cannot_be_read_is_warned_about_by_rank_0_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ "not image" and "no graph" are the same on every rank: the job says them once."""
    from rankscribe.collector import ArrayDataset, ArrayNetwork

    flat = ArrayDataset(np.zeros((8, 16), np.float32), batch_size=2)
    said: dict[int, list[str]] = {}
    levels: dict[int, list[int]] = {}
    for rank in (1, 0):

        class Graphless(ArrayNetwork):
            """A network without a graph (a class per rank: the warning is once per class)."""

        network = Graphless({"w": np.zeros(3)})
        info = RankInfo(
            rank=rank, world_size=2, local_rank=rank, local_size=2, host="h", launcher="pmi"
        )
        instance = SummaryCollector(
            tmp_path,
            collect_freq=1,
            collect_specified_data=NO_LANDSCAPE,
            rank_info=info,
            # registered as a Coordinator (above): mypy cannot see it
            coordinator=cast(Coordinator, FakeCoordinator(rank=rank)),
        )
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="rankscribe"):
            TrainLoop(loss_step, network=network).train(1, flat, callbacks=[instance])
        said[rank] = [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.WARNING
            and ("not image" in r.getMessage() or "graph proto" in r.getMessage())
        ]
        # rank 1 still keeps the reason, at DEBUG
        assert any("not image" in r.getMessage() for r in caplog.records), rank
        levels[rank] = [r.levelno for r in caplog.records if "not image" in r.getMessage()]
    assert said[1] == []
    assert len(said[0]) == 1 and "graph proto" in said[0][0], said[0]
    # "not image" is said at INFO (tabular jobs are not warned), by rank 0 only
    assert levels == {0: [logging.INFO], 1: [logging.DEBUG]}
