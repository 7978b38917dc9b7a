"""Merging the ranks of a distributed job: the pure function, then the offline merge."""

from __future__ import annotations

import json
import math
import os
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rankscribe.jobview.protocol import JobPartial
from rankscribe.lineage import (
    RunLineage,
    filter_runs,
    filter_summary_lineage,
    get_run_lineage,
    get_summary_lineage,
    merge_rank_lineages,
    merge_run_dir,
)
from rankscribe.lineage.errors import LineageMergeError
from rankscribe.lineage.recording import Algorithm, EvalLineageInfo, TrainLineageInfo
from rankscribe.ranks.files import write_rank_dirs
from rankscribe.ranks.testing import wait_clock
from tests._support.launchers import run_bounded


def rank_lineage(rank: int, **changes: Any) -> RunLineage:
    lineage = RunLineage(f"/job/rank_{rank}")
    lineage.sections.update(
        {
            "hyper_parameters": {
                "optimizer": "Adam",
                "learning_rate": 0.1,
                "epoch": 2,
                "batch_size": 8,
                "device_num": 4,
                "parallel_mode": "data_parallel",
                "loss_function": "CE",
            },
            "train_dataset": {"train_dataset_path": "/data", "train_dataset_size": 100 + rank},
            "algorithm": {"network": "Net", "loss": 1.0 + rank},
            "model": {"path": json.dumps({"ckpt": f"/ckpt/rank{rank}.ckpt"}), "size": 10 + rank},
            "metric": {"acc": 0.5 + rank / 10, "top5": 0.9},
            "valid_dataset": {"valid_dataset_path": "/val", "valid_dataset_size": 10},
            "dataset_graph": {"op_type": "Batch", "children": []},
            "user_defined": {"seed": 7, "host": f"node{rank // 2}"},
        }
    )
    for section, values in changes.items():
        lineage.sections[section] = {**lineage.sections[section], **values}
    return lineage


def test_agreeing_ranks() -> None:
    merged = merge_rank_lineages(
        {rank: rank_lineage(rank) for rank in range(4)}, summary_dir="/job"
    )
    assert merged.summary_dir == "/job"
    assert merged.section("hyper_parameters") == {
        "optimizer": "Adam",
        "learning_rate": 0.1,
        "loss_function": "CE",
        "epoch": 2,
        "parallel_mode": "data_parallel",
        "batch_size": 8,
        "device_num": 4,
    }
    assert merged.section("train_dataset") == {
        "train_dataset_path": "/data",
        "train_dataset_size": 406,
    }
    assert merged.section("algorithm") == {"network": "Net", "loss": 2.5}
    assert merged.section("model") == {"path": '{"ckpt": "/ckpt/rank0.ckpt"}', "size": 10}
    assert merged.section("metric") == {"acc": pytest.approx(0.65), "top5": 0.9}
    assert merged.section("valid_dataset") == {
        "valid_dataset_path": "/val",
        "valid_dataset_size": 40,
    }
    assert merged.section("dataset_graph") == {"op_type": "Batch", "children": []}
    user = merged.section("user_defined")
    assert user["seed"] == 7
    assert (user["loss_min"], user["loss_max"]) == (1.0, 4.0)
    assert (user["metric_acc_min"], user["metric_acc_max"]) == (0.5, pytest.approx(0.8))
    assert (user["ranks_reported"], user["ranks_expected"], user["ranks_missing"]) == (4, 4, "")
    # only host differed (node0, node0, node1, node1)
    assert user["disagreements"] == "user_defined.host"
    assert json.loads(user["user_defined.host_by_rank"]) == {
        "0": "node0",
        "1": "node0",
        "2": "node1",
        "3": "node1",
    }
    assert user["host"] == "node0"


def test_disagreements_are_kept_and_flagged() -> None:
    records = {
        0: rank_lineage(0),
        1: rank_lineage(1, hyper_parameters={"learning_rate": 0.2, "batch_size": 16}),
        2: rank_lineage(2, algorithm={"network": "Other"}),
    }
    merged = merge_rank_lineages(records)
    assert merged.section("hyper_parameters")["learning_rate"] == 0.1  # rank 0's
    assert merged.section("hyper_parameters")["device_num"] == 3  # world size, not 4
    assert merged.section("algorithm")["network"] == "Net"
    user = merged.section("user_defined")
    assert user["disagreements"].split(",") == [
        "learning_rate",
        "batch_size",
        "network",
        "user_defined.host",
    ]
    assert json.loads(user["learning_rate_by_rank"]) == {"0": 0.1, "1": 0.2, "2": 0.1}
    assert json.loads(user["network_by_rank"]) == {"0": "Net", "1": "Net", "2": "Other"}


def test_missing_ranks_and_a_missing_rank_0() -> None:
    merged = merge_rank_lineages({1: rank_lineage(1), 3: rank_lineage(3)}, world_size=4)
    user = merged.section("user_defined")
    assert (user["ranks_reported"], user["ranks_expected"], user["ranks_missing"]) == (2, 4, "0,2")
    # without rank 0, the lowest rank that reported stands in
    assert merged.section("model")["path"] == '{"ckpt": "/ckpt/rank1.ckpt"}'
    assert merged.section("train_dataset")["train_dataset_size"] == 101 + 103


def test_partial_sections() -> None:
    eval_only = RunLineage("/r0")
    eval_only.sections["metric"] = {"acc": 1.0, "name": "x"}
    other = RunLineage("/r1")
    other.sections["metric"] = {"acc": 0.0, "name": "y"}
    merged = merge_rank_lineages({0: eval_only, 1: other})
    assert merged.section("hyper_parameters") == {}  # no rank trained: no device_num either
    assert merged.section("algorithm") == {} and merged.section("model") == {}
    assert merged.section("metric") == {"acc": 0.5, "name": "x"}
    assert "metric_name" in merged.section("user_defined")["disagreements"]


def test_a_dataset_every_rank_read_whole_is_counted_once() -> None:
    """Every rank evaluated all 360 samples: the job evaluated 360, not 4 x 360."""
    records = {
        rank: rank_lineage(
            rank,
            valid_dataset={"valid_dataset_size": 360},
            user_defined={
                "valid_dataset_sharding": "whole:5eed",
                "train_dataset_sharding": "shards",
            },
        )
        for rank in range(4)
    }
    merged = merge_rank_lineages(records)
    assert merged.section("valid_dataset")["valid_dataset_size"] == 360
    assert merged.section("train_dataset")["train_dataset_size"] == 100 + 101 + 102 + 103
    user = merged.section("user_defined")
    assert (user["valid_dataset_sharding"], user["train_dataset_sharding"]) == ("whole", "shards")
    assert user["disagreements"] == "user_defined.host"  # the fixture's own disagreement


def test_whole_datasets_of_different_content_are_shards_and_summed() -> None:
    """Each rank read every item of its own hand-cut share: different digests."""
    records = {
        rank: rank_lineage(
            rank,
            train_dataset={"train_dataset_size": 8},
            user_defined={"train_dataset_sharding": f"whole:{rank}"},
        )
        for rank in range(2)
    }
    merged = merge_rank_lineages(records)
    assert merged.section("train_dataset")["train_dataset_size"] == 16
    user = merged.section("user_defined")
    assert user["train_dataset_sharding"] == "shards"
    assert "sharding" not in user["disagreements"]


def test_ranks_that_read_shards_or_do_not_say_are_summed() -> None:
    mixed = {
        0: rank_lineage(0, user_defined={"valid_dataset_sharding": "whole:5eed"}),
        1: rank_lineage(1, user_defined={"valid_dataset_sharding": "shards"}),
    }
    merged = merge_rank_lineages(mixed)
    assert merged.section("valid_dataset")["valid_dataset_size"] == 20
    assert merged.section("user_defined")["valid_dataset_sharding"] == "shards"
    partial = {
        0: rank_lineage(0, user_defined={"valid_dataset_sharding": "whole:5eed"}),
        1: rank_lineage(1),
    }
    merged = merge_rank_lineages(partial)
    assert merged.section("valid_dataset")["valid_dataset_size"] == 20
    assert merged.section("user_defined")["valid_dataset_sharding"] == "unknown"
    silent = {rank: rank_lineage(rank) for rank in range(3)}  # older ranks: no note
    merged = merge_rank_lineages(silent)
    assert merged.section("valid_dataset")["valid_dataset_size"] == 30
    assert "valid_dataset_sharding" not in merged.section("user_defined")


def test_dataset_size_beyond_int32_is_kept_as_text() -> None:
    records = {
        rank: rank_lineage(rank, train_dataset={"train_dataset_size": 2**30}) for rank in range(4)
    }
    merged = merge_rank_lineages(records)
    assert "train_dataset_size" not in merged.section("train_dataset")
    assert merged.section("user_defined")["train_dataset_size_total"] == str(2**32)


def test_dataset_sizes_adding_up_below_int32_are_kept_as_text(lw: Any, tmp_path: Path) -> None:
    # Found by the hostile job-view generator (seed 39, input 43237): two ranks' sizes of
    # -2**31 (as planted files may hold) summed to -2**32, and writing the merged lineage
    # raised ValueError from protobuf's int32 field.
    job = tmp_path / "job"
    for rank in range(2):
        lw.write(job / f"rank_{rank}", [lw.train(loss=0.5, train_dataset_size=-(2**31))])
    outcome = merge_run_dir(job)
    merged = get_run_lineage(str(Path(outcome.path).parent))
    assert merged is not None
    assert "train_dataset_size" not in merged.section("train_dataset")
    assert merged.section("user_defined")["train_dataset_size_total"] == str(-(2**32))


@pytest.mark.parametrize(
    ("records", "kwargs", "words"),
    [
        ({}, {}, "no rank lineage"),
        ({-1: RunLineage("x")}, {}, "ranks must be ints"),
        ({"0": RunLineage("x")}, {}, "ranks must be ints"),
        ({0: {"hyper_parameters": {}}}, {}, "must be a RunLineage"),
        ({3: RunLineage("x")}, {"world_size": 2}, "outside a world of 2"),
        ({0: RunLineage("x")}, {"world_size": 0}, "world_size must be"),
    ],
)
def test_merge_errors(records: Any, kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(LineageMergeError, match=words) as caught:
        merge_rank_lineages(records, **kwargs)
    assert caught.value.error_code == "50542220"


# --- offline merge of a job directory -----------------------------------------------------


@pytest.fixture
def job(tmp_path: Path, lw: Any) -> Path:
    runs = tmp_path / "runs"
    for rank in range(3):
        lw.write(
            runs / "exp1" / f"rank_{rank}",
            [
                lw.graph({"op_type": "Batch"}),
                lw.custom({"seed": 7}),
                lw.train(
                    optimizer="Adam",
                    learning_rate=0.1,
                    device_num=4,
                    network="Net",
                    loss=1.0 + rank,
                    train_dataset_size=100,
                    path="{}",
                    size=5,
                ),
                lw.eval({"acc": 0.5 + rank / 10}),
            ],
        )
    lw.write(runs / "exp2", [lw.train(network="Single", loss=0.2)], mtime=1)
    return runs / "exp1"


def test_offline_merge_and_queries(job: Path) -> None:
    outcome = merge_run_dir(job)
    assert outcome.ranks_reported == [0, 1, 2]
    assert outcome.ranks_missing == [3]  # device_num said 4
    assert Path(outcome.path).parent == job
    assert Path(outcome.path).name.startswith("events.out.events.summary.")
    assert ".merged." in Path(outcome.path).name and outcome.path.endswith("_lineage")
    assert os.stat(outcome.path).st_mode & 0o777 == 0o400
    result = get_summary_lineage(str(job))
    assert result["hyper_parameters"]["device_num"] == 4
    assert result["algorithm"] == {"network": "Net", "loss": 2.0}
    assert result["train_dataset"] == {"train_dataset_size": 300}
    assert result["metric"] == {"acc": pytest.approx(0.6)}
    lineage = get_run_lineage(str(job))
    assert lineage is not None
    assert lineage.section("user_defined")["ranks_missing"] == "3"
    # a query over runs/ sees one row per job: the merged lineage, not the ranks
    rows = filter_summary_lineage(str(job.parent))["object"]
    assert sorted(os.path.basename(row["summary_dir"]) for row in rows) == ["exp1", "exp2"]
    assert filter_runs(job.parent, "user_defined/ranks_missing != ''")["count"] == 1
    # and the job dir shows the ranks side by side with the merged row
    inside = filter_summary_lineage(str(job))["object"]
    assert sorted(os.path.relpath(row["summary_dir"], job) for row in inside) == [
        ".",
        "rank_0",
        "rank_1",
        "rank_2",
    ]


def test_offline_merge_finds_the_ranks_that_wrote_elsewhere(job: Path, lw: Any) -> None:
    # Rank 3 named a directory of its own; the job recorded it (docs/layout.md).
    elsewhere = job.parent / "exp1-rank3" / "rank_3"
    lw.write(elsewhere, [lw.train(network="Net", loss=5.0, device_num=4)])
    write_rank_dirs(job, {3: str(elsewhere)})
    outcome = merge_run_dir(job)
    assert outcome.ranks_reported == [0, 1, 2, 3] and outcome.ranks_missing == []
    lineage = get_run_lineage(str(job))
    assert lineage is not None
    assert json.loads(lineage.section("user_defined")["rank_dirs"]) == {"3": str(elsewhere)}
    # A recorded directory that is gone, or a link, is a missing rank.
    link = job.parent / "link"
    link.symlink_to(elsewhere, target_is_directory=True)
    write_rank_dirs(job, {3: str(link)})
    assert merge_run_dir(job).ranks_missing == [3]


def test_offline_merge_is_idempotent(job: Path, lw: Any) -> None:
    first = merge_run_dir(job)
    before = get_summary_lineage(str(job))
    lw.write(job / "rank_3", [lw.train(network="Net", loss=5.0, device_num=4)])
    second = merge_run_dir(job)
    merged_files = [name for name in os.listdir(job) if name.endswith("_lineage")]
    assert merged_files == [os.path.basename(first.path)]
    assert second.path == first.path and second.ranks_missing == []
    assert get_summary_lineage(str(job))["algorithm"]["loss"] != before["algorithm"]["loss"]
    assert not [name for name in os.listdir(job) if name.endswith(".tmp")]


class FakeClock:
    """The waits' clock (``wait_clock``): time moves only when the merge sleeps."""

    def __init__(self, on_sleep: Callable[[], None] | None = None) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep()


def test_offline_merge_waits_for_late_ranks(job: Path, lw: Any) -> None:
    def late_rank() -> None:
        if not (job / "rank_3").exists():
            lw.write(job / "rank_3", [lw.train(network="Net", loss=1.0, device_num=4)])

    clock = FakeClock(on_sleep=late_rank)
    with wait_clock(clock.monotonic, clock.sleep):
        outcome = merge_run_dir(job, timeout=10)
    assert outcome.ranks_reported == [0, 1, 2, 3]
    assert outcome.ranks_missing == []
    # rank 3 was not there at first: the merge waited once, then found it
    assert len(clock.sleeps) == 1


def test_offline_merge_gives_up_after_the_timeout(job: Path) -> None:
    clock = FakeClock()
    with wait_clock(clock.monotonic, clock.sleep):
        outcome = merge_run_dir(job, timeout=1.2)
    assert outcome.ranks_missing == [3]
    # polled every half second, never past the deadline
    assert clock.sleeps == [0.5, 0.5, pytest.approx(0.2)]
    assert clock.now == pytest.approx(1001.2)


def test_offline_merge_with_no_timeout_does_not_wait(job: Path) -> None:
    clock = FakeClock()
    with wait_clock(clock.monotonic, clock.sleep):
        assert merge_run_dir(job).ranks_missing == [3]
    assert clock.sleeps == []


def test_offline_merge_waits_on_the_real_clock(job: Path) -> None:
    started = time.monotonic()
    outcome = merge_run_dir(job, timeout=0.2)
    assert time.monotonic() - started >= 0.2
    assert outcome.ranks_missing == [3]


def test_offline_merge_errors(tmp_path: Path) -> None:
    with pytest.raises(LineageMergeError, match="not a directory"):
        merge_run_dir(tmp_path / "missing")
    (tmp_path / "rank_0").mkdir()
    with pytest.raises(LineageMergeError, match="no rank_<n> directory"):
        merge_run_dir(tmp_path)
    with pytest.raises(LineageMergeError, match="timeout"):
        merge_run_dir(tmp_path, timeout=-1)


def test_merged_file_reads_in_a_fresh_process(job: Path) -> None:
    """The file is complete on disk (fsync'd, renamed into place), not just in this process."""
    merge_run_dir(job, world_size=3)
    code = (
        "import sys, json; from rankscribe.lineage import get_summary_lineage;"
        "print(json.dumps(get_summary_lineage(sys.argv[1], ['hyper_parameters'])))"
    )
    output = run_bounded(
        [sys.executable, "-c", code, str(job)], timeout=120, stderr_apart=True
    ).stdout
    assert json.loads(output)["hyper_parameters"]["device_num"] == 3


def test_rank_0_online_merge_from_gathered_messages(tmp_path: Path) -> None:
    """What the collector does at rank 0: messages gathered from ranks -> merged file."""
    from rankscribe.lineage.recording import (
        Algorithm,
        DatasetGraphInfo,
        EvalLineageInfo,
        HyperParameters,
        TrainLineageInfo,
        UserDefinedInfo,
        write_merged_lineage,
    )

    gathered = {}
    for rank in range(2):
        train = TrainLineageInfo(
            hyper_parameters=HyperParameters(optimizer="Adam", epoch=1),
            algorithm=Algorithm(network="Net", loss=0.5 * (rank + 1)),
        )
        gathered[rank] = RunLineage.from_records(
            f"rank_{rank}",
            train=train.to_proto(),  # protobuf messages or dataclasses
            evaluation=EvalLineageInfo.from_metrics({"acc": 0.5 + rank / 4}),
            dataset_graph=DatasetGraphInfo.from_graph_dict({"op_type": "Batch"}),
            user_defined=[UserDefinedInfo.from_values({"seed": 7}).to_proto()],
        )
    assert gathered[1].section("algorithm") == {"network": "Net", "loss": 1.0}
    merged = merge_rank_lineages(gathered, world_size=2)
    path = write_merged_lineage(tmp_path, merged, host="node0", timestamp=1234)
    assert os.path.basename(path) == "events.out.events.summary.1234.merged.node0_lineage"
    result = get_summary_lineage(str(tmp_path))
    assert result["algorithm"] == {"network": "Net", "loss": 0.75}
    assert result["metric"] == {"acc": 0.625}
    assert result["hyper_parameters"] == {"optimizer": "Adam", "epoch": 1, "device_num": 2}
    assert result["dataset_graph"] == {"op_type": "Batch", "children": []}
    lineage = get_run_lineage(str(tmp_path))
    assert lineage is not None
    assert lineage.section("user_defined")["seed"] == 7
    assert lineage.section("user_defined")["ranks_missing"] == ""


def _rank_with(loss: float, accuracy: float) -> RunLineage:
    # What rank 0 gets from each rank: its lineage as the files read back
    # (a NaN float32 loss reads back as MessageToDict's "NaN").
    return RunLineage.from_records(
        train=TrainLineageInfo(algorithm=Algorithm(network="Net", loss=loss)),
        evaluation=EvalLineageInfo.from_metrics({"acc": accuracy}),
    )


def test_a_diverged_rank_makes_the_job_loss_nan() -> None:
    merged = merge_rank_lineages({0: _rank_with(0.5, 0.9), 1: _rank_with(math.nan, 0.8)})
    loss = merged.section("algorithm")["loss"]
    assert isinstance(loss, float) and math.isnan(loss)


@pytest.mark.parametrize("order", [(0.9, math.nan), (math.nan, 0.9)])
def test_extremes_do_not_depend_on_which_rank_is_nan(order: tuple[float, float]) -> None:
    merged = merge_rank_lineages({0: _rank_with(0.5, order[0]), 1: _rank_with(0.4, order[1])})
    notes = merged.section("user_defined")
    assert math.isnan(merged.section("metric")["acc"])
    assert (notes["metric_acc_min"], notes["metric_acc_max"]) == (0.9, 0.9)


def test_a_metric_of_more_digits_than_a_float_holds_is_infinite_not_a_crash() -> None:
    # A metric is JSON text in the rank's lineage file: an int of 400 digits parses.
    huge = 10**400
    merged = merge_rank_lineages(
        {
            0: rank_lineage(0, metric={"acc": huge, "top5": -huge}),
            1: rank_lineage(1, metric={"acc": 0.5, "top5": 0.5}),
        }
    )
    assert merged.section("metric") == {"acc": math.inf, "top5": -math.inf}
    notes = merged.section("user_defined")
    assert (notes["metric_acc_min"], notes["metric_acc_max"]) == (0.5, math.inf)
    assert (notes["metric_top5_min"], notes["metric_top5_max"]) == (-math.inf, 0.5)


@pytest.mark.parametrize(
    ("first", "second", "mean"),
    [
        (math.inf, -math.inf, math.nan),  # fsum raised ValueError: -inf + inf
        (10**400, -(10**400), math.nan),
        (1.5e308, 1.5e308, 1.5e308),  # fsum raised OverflowError: intermediate overflow
        (-1.5e308, -1.7e308, -1.6e308),
        (math.inf, 0.5, math.inf),
    ],
)
def test_a_metric_averaged_over_the_ranks_is_a_float_whatever_their_values(
    first: float, second: float, mean: float
) -> None:
    # Found by the hostile job-view generator (seed 39, input 28864): merge_run_dir raised
    # ValueError for a metric of +inf on one rank and -inf on another.
    merged = merge_rank_lineages(
        {0: rank_lineage(0, metric={"acc": first}), 1: rank_lineage(1, metric={"acc": second})}
    )
    assert merged.section("metric")["acc"] == pytest.approx(mean, nan_ok=True)


def _job_missing_rank_1(lw: Any, tmp_path: Path) -> Path:
    job = tmp_path / "job"
    lw.write(job / "rank_0", [lw.train(optimizer="Adam", loss=0.5, device_num=2)])
    return job


def test_nan_timeout_is_refused_instead_of_waiting_forever(lw: Any, tmp_path: Path) -> None:
    job = _job_missing_rank_1(lw, tmp_path)
    done, errors = lw.finishes_within(5.0, lambda: merge_run_dir(job, timeout=float("nan")))
    assert done, "merge_run_dir(timeout=nan) never returned while rank 1 was missing"
    assert len(errors) == 1 and isinstance(errors[0], LineageMergeError)
    assert "timeout" in str(errors[0])


def _damaged_in_transit(batch: list[tuple[int, str]]) -> bytes:
    """A merge worker's answer with one value changed on its way (0.2 turned 9.0)."""
    data = JobPartial.of_rank(batch[0][0], {"loss": [(1, 0.2)]}).to_bytes()
    return data.replace(struct.pack("<d", 0.2), struct.pack("<d", 9.0))


def test_a_damaged_partial_from_a_merge_worker_is_refused_naming_its_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # private: the offline merge's worker pool, whose messages have no public door.
    from rankscribe.lineage.merge import _stream

    monkeypatch.setattr(_stream, "ranks_partial", _damaged_in_transit)
    rank_dirs = {rank: str(tmp_path / f"rank_{rank}") for rank in range(4)}
    damaged = r"the merge worker of ranks [0-3] sent a damaged"
    with pytest.raises(LineageMergeError, match=damaged) as caught:
        _stream.job_statistics_of_dirs(rank_dirs, workers=2)
    assert "CRC-32" in str(caught.value)
