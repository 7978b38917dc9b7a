"""The lineage glue: one rank's lineage values, and the job lineage merged at rank 0."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from rankscribe.collector import CallbackParams, RunContext, SummaryCollector, TrainLoop
from rankscribe.lineage import get_run_lineage, get_summary_lineage, merge_run_dir
from rankscribe.lineage.recording import TRAIN_START_FILE_NAME, parse_rank_run, parse_run
from rankscribe.ranks import Coordinator, RankInfo
from rankscribe.ranks.errors import RanksValueError
from rankscribe.ranks.files import RANK_DIRS_FILE_NAME
from rankscribe.writer.events import load_dir, load_lineage_dir
from tests._support.clocks import SleepingClock
from tests.collector.coordinators import Handing, RankZeroAlone

NO_LANDSCAPE = {"collect_landscape": None}


def info(rank: int, world_size: int = 2) -> RankInfo:
    return RankInfo(rank, world_size, rank, world_size, "host", "pmi")


def train_rank(
    model: Any, directory: Path, batches: int, loss: float, **arguments: Any
) -> SummaryCollector:
    """A run with ``arguments`` (a rank's, for one): its files in ``directory``."""
    data = model(batches)
    collector = SummaryCollector(directory, collect_specified_data=NO_LANDSCAPE, **arguments)
    TrainLoop(
        lambda batch: np.float32(loss),
        network=data.network,
        optimizer=data.optimizer,
        eval_fn=lambda batch: {"acc": loss},
    ).train(2, data.dataset, callbacks=[collector])
    return collector


def as_rank(rank: int, coordinator: Any, world_size: int = 2) -> dict[str, Any]:
    """The arguments of rank ``rank``'s collector; the root's goes on in the directory its
    other ranks (run before it, in this process) wrote into already."""
    return {
        "rank_info": info(rank, world_size),
        "coordinator": cast(Coordinator, coordinator),  # registered as a Coordinator
        "on_exists": "append",
    }


def merged_files(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if ".merged." in name]


def test_rank_zero_merges_the_ranks(model: Any, tmp_path: Path) -> None:
    rank_1 = Handing(1)
    train_rank(model, tmp_path, batches=6, loss=3.0, **as_rank(1, rank_1))
    assert (tmp_path / "rank_1").is_dir() and merged_files(tmp_path) == []
    rank_0 = Handing(0, others=rank_1.replayed(1))
    train_rank(model, tmp_path, batches=4, loss=1.0, **as_rank(0, rank_0))
    [name] = merged_files(tmp_path)  # rank 0 writes it, into the job's directory
    assert name.endswith("_lineage")
    lineage = get_summary_lineage(str(tmp_path))
    assert lineage["hyper_parameters"]["device_num"] == 2
    assert lineage["train_dataset"]["train_dataset_size"] == 8 + 12  # summed over shards
    assert lineage["algorithm"]["loss"] == pytest.approx(2.0)  # averaged
    merged = parse_run(str(tmp_path)).lineage
    assert merged is not None
    user = merged.section("user_defined")
    assert (user["ranks_missing"], user["ranks_reported"], user["ranks_expected"]) == ("", 2, 2)


def test_a_rank_that_does_not_report_is_named(model: Any, tmp_path: Path) -> None:
    # Of a job of 3: rank 2 hands over nothing (None), rank 1 never arrives.
    rank_0 = Handing(0, 3, others=[{}, {2: None}])  # the start's gather, the merge's
    train_rank(model, tmp_path, batches=4, loss=1.0, **as_rank(0, rank_0, 3))
    assert len(merged_files(tmp_path)) == 1
    merged = parse_run(str(tmp_path)).lineage
    assert merged is not None
    user = merged.section("user_defined")
    assert (user["ranks_missing"], user["ranks_reported"], user["ranks_expected"]) == ("1,2", 1, 3)


def test_other_ranks_only_hand_over(model: Any, tmp_path: Path) -> None:
    rank_1 = Handing(1)
    train_rank(model, tmp_path, batches=4, loss=1.0, **as_rank(1, rank_1))
    [handed] = rank_1.merge_payloads()
    assert handed["lineage"]["algorithm"] == {"network": "TinyNet", "loss": 1.0}
    assert merged_files(tmp_path) == []


def test_a_rank_without_lineage_still_calls_the_gather(model: Any, tmp_path: Path) -> None:
    rank_0 = Handing(0)
    no_lineage = {"collect_train_lineage": False, "collect_eval_lineage": False}
    data = model(2)
    collector = SummaryCollector(
        tmp_path,
        collect_specified_data={**NO_LANDSCAPE, **no_lineage, "collect_dataset_graph": False},
        **as_rank(0, rank_0),
    )
    TrainLoop(lambda batch: 0.5, network=data.network).train(1, data.dataset, callbacks=[collector])
    [handed] = rank_0.merge_payloads()  # the merge's gather: called, with no lineage
    assert handed["lineage"] is None
    assert merged_files(tmp_path) == []  # neither rank reported a lineage


def test_a_job_without_mpi_launcher_meets_in_the_summary_dir_and_never_hangs(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, ranks_clock: SleepingClock
) -> None:
    """torchrun-like ranks, no process group: they meet in a hidden folder of summary_dir.

    Rank 1 never comes: rank 0 gives up at the merge timeout, naming the folder.
    """
    job = RankInfo(0, 2, 0, 2, "host", "torchrun")
    data = model(2)
    params = CallbackParams(
        mode="train", train_network=data.network, train_dataset=data.dataset, net_outputs=0.5
    )
    collector = SummaryCollector(
        tmp_path, collect_specified_data=NO_LANDSCAPE, rank_info=job, merge_timeout=1.0
    )
    collector.begin(RunContext(params))
    caplog.clear()
    started = ranks_clock()
    collector.end(RunContext(params))  # the end of training: the job view's last round, the merge
    # rank 0 waited for rank 1 up to its merge timeout, then gave up (in no real time):
    # the job view's last round and the merge, each within the merge timeout
    assert 1.0 <= ranks_clock() - started <= 2.0 + 1e-6
    collector.close()
    assert "no object from rank(s) 1 within" in caplog.text
    assert "lacks rank(s) 1, which did not report within 1 s" in caplog.text
    assert str(tmp_path / ".rankscribe-rendezvous") in caplog.text
    merged = parse_run(str(tmp_path)).lineage  # rank 0's alone, naming rank 1
    assert merged is not None and merged.section("user_defined")["ranks_missing"] == "1"


def test_coordinator_errors_are_logged(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(Handing):
        def gather(self, obj: Any, root: int = 0, timeout: float | None = None) -> Any:
            raise RanksValueError("no rendezvous")

    train_rank(model, tmp_path, batches=2, loss=1.0, **as_rank(0, Broken(0)))
    assert "no rendezvous" in caplog.text
    assert merged_files(tmp_path) == []
    assert parse_run(str(tmp_path / "rank_0")).lineage is not None  # the rank's own is kept


# -------------------------------------------------------------- one rank's values


def through_callbacks(directory: Path, params: CallbackParams, **arguments: Any) -> None:
    """One collector's begin and end (a training loop's first and last callbacks)."""
    arguments.setdefault("collect_specified_data", NO_LANDSCAPE)
    collector = SummaryCollector(directory, **arguments)
    collector.begin(RunContext(params))
    collector.end(RunContext(params))
    collector.close()


def test_eval_lineage_with_metrics_that_are_not_a_dict(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = model(3)
    through_callbacks(
        tmp_path, CallbackParams(mode="eval", metrics=[0.5], valid_dataset=data.dataset)
    )
    records = load_lineage_dir(tmp_path)
    assert [r.data for r in records] == [
        {"valid_dataset": {"valid_dataset_path": "/data/tiny", "valid_dataset_size": 6}}
    ]
    assert "Summary cannot collect the type of metrics" in caplog.text


def test_a_dataset_graph_that_cannot_be_packed_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from rankscribe.collector import ArrayDataset

    dataset = ArrayDataset(np.zeros(4), description={"op_type": "X", "weird": object()})
    TrainLoop(lambda batch: 0.5).train(
        1,
        dataset,
        callbacks=[
            SummaryCollector(
                tmp_path,
                collect_specified_data={**NO_LANDSCAPE, "collect_train_lineage": False},
            )
        ],
    )
    assert load_lineage_dir(tmp_path) == []
    assert "The dataset graph of the training dataset is not recorded" in caplog.text


def test_lineage_switches(model: Any, tmp_path: Path) -> None:
    data = model(2)
    quiet = {
        **NO_LANDSCAPE,
        "collect_dataset_graph": False,
        "collect_train_lineage": False,
        "collect_eval_lineage": False,
    }
    collector = SummaryCollector(tmp_path, collect_specified_data=quiet)
    loop = TrainLoop(
        lambda batch: 1.0,
        network=data.network,
        optimizer=data.optimizer,
        eval_fn=lambda batch: {"acc": 1.0},
    )
    loop.train(1, data.dataset, callbacks=[collector])
    loop.eval(data.dataset, callbacks=[collector])
    assert load_lineage_dir(tmp_path) == []
    assert any(load_dir(tmp_path))  # the run itself was recorded


def test_the_dataset_size_of_a_numpy_run_counts_samples_not_batches(tmp_path: Path) -> None:
    """A list of numpy batches (5 of 4 rows), an ArrayDataset (18 rows in batches of 4)
    and batches of unknown rows: sizes in samples, or none at all (docs/layout.md)."""
    from rankscribe.collector import ArrayDataset, ArrayNetwork, ArrayOptimizer

    network = ArrayNetwork({"w": np.zeros(3)}, name="Net")
    loop = TrainLoop(
        lambda batch: 1.0,
        network=network,
        optimizer=ArrayOptimizer(network, learning_rate=0.1),
        eval_fn=lambda batch: {"acc": 1.0},
    )
    datasets: dict[str, Iterable[Any]] = {
        "list": [(np.ones((4, 3)), np.zeros(4)) for _ in range(5)],
        "arrays": ArrayDataset(np.ones((18, 3)), np.zeros(18), batch_size=4),
        "unknown": [{"x": 1.0}, {"x": 2.0}],  # batches whose rows nobody can count
    }
    for name, dataset in datasets.items():
        collector = SummaryCollector(tmp_path / name, collect_specified_data=NO_LANDSCAPE)
        loop.train(1, dataset, callbacks=[collector])
        loop.eval(dataset, callbacks=[collector])
    for name, samples in (("list", 20), ("arrays", 18)):
        lineage = get_summary_lineage(str(tmp_path / name))
        assert lineage["train_dataset"]["train_dataset_size"] == samples
        assert lineage["valid_dataset"]["valid_dataset_size"] == samples
    unknown = get_summary_lineage(str(tmp_path / "unknown"))
    assert "train_dataset_size" not in unknown["train_dataset"]  # not 2 (the batches)
    assert "valid_dataset_size" not in unknown["valid_dataset"]


def test_each_rank_notes_whether_it_read_a_shard(tmp_path: Path) -> None:
    """On two ranks, an ArrayDataset.shard is noted as shards; one process notes nothing."""
    from rankscribe.collector import ArrayDataset

    eval_only = {"collect_dataset_graph": False, "collect_train_lineage": False}
    rows = ArrayDataset(np.arange(10.0), np.zeros(10), batch_size=2)
    for world_size in (1, 2):
        params = CallbackParams(
            mode="eval", device_number=world_size, valid_dataset=rows.shard(2, 0)
        )
        record_dir = tmp_path / f"world{world_size}"
        through_callbacks(record_dir, params, collect_specified_data={**NO_LANDSCAPE, **eval_only})
        lineage = parse_run(str(record_dir)).lineage  # what the job's merge reads
        assert lineage is not None
        user = lineage.section("user_defined")
        expected = {"valid_dataset_sharding": "shards"} if world_size == 2 else {}
        assert user == expected
    # Columns given directly are read whole: noted with their content's digest.
    whole = ArrayDataset(np.arange(10.0), np.zeros(10), batch_size=2)
    params = CallbackParams(mode="eval", device_number=2, valid_dataset=whole)
    through_callbacks(
        tmp_path / "whole", params, collect_specified_data={**NO_LANDSCAPE, **eval_only}
    )
    lineage = parse_run(str(tmp_path / "whole")).lineage
    assert lineage is not None
    note = lineage.section("user_defined")["valid_dataset_sharding"]
    assert note == f"whole:{whole.content_digest}"
    # the same rows give the same digest; another share of the same size does not
    assert whole.content_digest == ArrayDataset(np.arange(10.0), np.zeros(10)).content_digest
    assert rows.shard(2, 0).content_digest != rows.shard(2, 1).content_digest


class SquaredError:
    """A loss function: its class name goes into the lineage."""


class InterruptError(Exception):
    """Stands in for a Ctrl-C (KeyboardInterrupt) in the middle of training."""


def interrupted_rank(model: Any, directory: Path, *, at_step: int) -> None:
    """One rank's training stopped by an exception at ``at_step``: no end, no train lineage."""
    data = model(6)
    steps = iter(range(1, 100))

    def step(batch: Any) -> np.float32:
        if next(steps) == at_step:
            raise InterruptError
        return np.float32(0.5)

    collector = SummaryCollector(directory, collect_freq=1, collect_specified_data=NO_LANDSCAPE)
    with pytest.raises(InterruptError):
        loop = TrainLoop(
            step, network=data.network, optimizer=data.optimizer, loss_fn=SquaredError()
        )
        loop.train(3, data.dataset, callbacks=[collector])


def test_an_interrupted_job_merges_with_what_was_known_at_the_start(
    model: Any, tmp_path: Path
) -> None:
    # Both ranks stop in their first epoch: their lineage files hold the dataset graph only.
    interrupted_rank(model, tmp_path / "rank_0", at_step=3)
    interrupted_rank(model, tmp_path / "rank_1", at_step=4)
    assert parse_run(str(tmp_path / "rank_0")).lineage.section("hyper_parameters") == {}  # type: ignore[union-attr]
    merge_run_dir(tmp_path)
    merged = get_summary_lineage(str(tmp_path))
    hyper = merged["hyper_parameters"]
    assert hyper["optimizer"] == "Momentum"
    assert hyper["learning_rate"] == pytest.approx(0.01)
    assert hyper["epoch"] == 3
    assert hyper["batch_size"] == 2
    assert hyper["loss_function"] == "SquaredError"
    assert merged["algorithm"]["network"] == "TinyNet"
    assert merged["train_dataset"]["train_dataset_path"] == "/data/tiny"
    assert "loss" not in merged["algorithm"]  # never reached: no final loss
    assert merged["dataset_graph"]["op_type"] == "ArrayDataset"  # the files' own part is kept


def test_a_finished_run_keeps_one_train_lineage_and_no_start_record(
    model: Any, tmp_path: Path
) -> None:
    train_rank(model, tmp_path, batches=4, loss=1.0)
    assert not (tmp_path / TRAIN_START_FILE_NAME).exists()
    kinds = [event.what for event in load_lineage_dir(tmp_path)]
    assert kinds.count("train_lineage") == 1
    # A start record left beside a finished run (the run's removal failed) changes nothing:
    # one of another run's training (interrupted, so its start record stays).
    lineage = parse_run(str(tmp_path)).lineage
    assert lineage is not None
    interrupted_rank(model, tmp_path / "other", at_step=2)
    shutil.copyfile(tmp_path / "other" / TRAIN_START_FILE_NAME, tmp_path / TRAIN_START_FILE_NAME)
    assert parse_rank_run(str(tmp_path / "other")).lineage.section("hyper_parameters")  # type: ignore[union-attr]
    assert parse_rank_run(str(tmp_path)).lineage == lineage


def test_a_start_record_that_cannot_be_read_is_a_warning(model: Any, tmp_path: Path) -> None:
    interrupted_rank(model, tmp_path, at_step=2)
    start = tmp_path / TRAIN_START_FILE_NAME
    os.chmod(start, 0o600)
    start.write_bytes(b"not a record")
    parsed = parse_rank_run(str(tmp_path))
    assert parsed.lineage is not None and parsed.lineage.section("hyper_parameters") == {}
    assert any(TRAIN_START_FILE_NAME in warning for warning in parsed.warnings)


def test_rank_zero_of_an_interrupted_job_says_how_to_merge(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = model(4)

    def step(batch: Any) -> np.float32:
        raise KeyboardInterrupt

    messages = {}
    for world_size in (2, 1):  # rank 0 of a job of two; a single process has nothing to merge
        collector = SummaryCollector(
            tmp_path / f"job{world_size}",
            collect_specified_data=NO_LANDSCAPE,
            rank_info=info(0, world_size),
            coordinator=RankZeroAlone(info(0, world_size)),
        )
        caplog.clear()
        with pytest.raises(KeyboardInterrupt):
            TrainLoop(step, network=data.network, optimizer=data.optimizer).train(
                1, data.dataset, callbacks=[collector]
            )
        collector.close()
        messages[world_size] = [r.getMessage() for r in caplog.records if "merge" in r.getMessage()]
    assert messages[2] == [
        "Training stopped (KeyboardInterrupt) before the job's lineage was merged: run "
        f"`rankscribe-lineage merge {tmp_path / 'job2'}` once every rank has stopped."
    ]
    assert messages[1] == []


def test_rank_zero_ends_training_whatever_the_rank_dirs_note_says(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A rank of over 4,300 digits in the note raised ValueError out of rank 0's end.
    job = tmp_path / "job"
    job.mkdir()
    note = job / RANK_DIRS_FILE_NAME
    note.write_text(json.dumps({"rank_dirs": {"9" * 4301: str(tmp_path / "x" / "rank_1")}}))
    note.chmod(0o400)
    train_rank(model, job, batches=4, loss=1.0, **as_rank(0, RankZeroAlone(info(0))))
    merged = get_run_lineage(str(job))
    assert merged is not None
    notes = merged.section("user_defined")
    assert notes["rank_dirs_refused"] == 1 and "rank_dirs" not in notes
    assert notes["ranks_missing"] == "1"
    assert any("is not a rank number" in record.getMessage() for record in caplog.records)


def test_a_loss_that_could_not_be_read_leaves_the_lineage_loss_empty(
    model: Any, tmp_path: Path
) -> None:
    # As MindSpore's SummaryCollector: once a collected step's loss cannot be read, no
    # loss is read again, and the train lineage has none, though the last step's
    # output is a number.
    data = model(4)
    outputs = iter([None, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    TrainLoop(lambda batch: next(outputs), network=data.network, optimizer=data.optimizer).train(
        2, data.dataset, callbacks=[SummaryCollector(tmp_path, collect_specified_data=NO_LANDSCAPE)]
    )
    lineage = get_summary_lineage(str(tmp_path))
    assert lineage["algorithm"] == {"network": "TinyNet"}


@pytest.mark.parametrize(("same", "size"), [(True, 20), (False, 40)])
def test_a_list_of_batches_is_counted_once_when_every_rank_evaluates_it(
    same: bool, size: int, tmp_path: Path
) -> None:
    """Ranks given the same list of batches evaluated the same 20 samples, not 40.

    A list says nothing of its sharding: the merge tells the same list on every
    rank (kept once) from each rank's own share (summed) by the content's digest.
    """
    eval_only = {"collect_dataset_graph": False, "collect_train_lineage": False}
    job = tmp_path / "job"
    for rank in range(2):
        first = 0.0 if same else 100.0 * rank
        batches = [(np.full((4, 3), first + index), np.zeros(4)) for index in range(5)]
        params = CallbackParams(mode="eval", device_number=2, valid_dataset=batches)
        through_callbacks(
            job / f"rank_{rank}", params, collect_specified_data={**NO_LANDSCAPE, **eval_only}
        )
    lineage = merge_run_dir(job).lineage
    assert lineage.section("valid_dataset")["valid_dataset_size"] == size
    assert lineage.section("user_defined")["valid_dataset_sharding"] == (
        "whole" if same else "shards"
    )
