"""Runs side by side: ``group_runs`` and ``rankscribe-lineage group`` (docs/groups.md).

The runs are written as training leaves them: the writer's SummaryRecord for
the scalars (``loss/auto``, as the collector names the loss) and the lineage,
``merge_run_dir`` for a job's merged lineage and job view.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.lineage import LineageError, RunGroup, filter_runs, group_runs, merge_run_dir
from rankscribe.lineage.cli import main
from rankscribe.lineage.recording import (
    Algorithm,
    EvalLineageInfo,
    HyperParameters,
    TrainLineageInfo,
    UserDefinedInfo,
)
from rankscribe.writer import SummaryRecord, reader
from tests.lineage._index_bases import OLD, finish
from tests.lineage._index_reads import as_a_new_process, lineage_reads, listings

STEPS = 20
RATES = (0.1, 0.2)
SEEDS = (1, 2, 3)
LOSS = "loss/auto"


def loss_at(rate: float, seed: int, step: int) -> float:
    return 2.0 * math.exp(-rate * step) + 0.01 * seed * math.sin(step + seed)


def add_lineage(record: SummaryRecord, rate: float, seed: int, loss: float, acc: float) -> None:
    train = TrainLineageInfo(
        hyper_parameters=HyperParameters(optimizer="SGD", learning_rate=rate, epoch=1),
        algorithm=Algorithm(network="MLP", loss=loss),
    )
    record.add_value("train_lineage", "train", train.to_proto())
    record.add_value("eval_lineage", "eval", EvalLineageInfo.from_metrics({"acc": acc}).to_proto())
    record.add_value(
        "custom_lineage_data", "custom", UserDefinedInfo.from_values({"seed": seed}).to_proto()
    )


def write_run(
    directory: Path,
    rate: float | None,
    seed: int,
    *,
    steps: range = range(1, STEPS + 1),
    accuracy: bool = True,
) -> None:
    with SummaryRecord(directory) as record:
        for step in steps:
            record.add_value("scalar", LOSS, loss_at(rate or 0.5, seed, step))
            if accuracy:
                record.add_value("scalar", "accuracy", 0.5 + 0.01 * seed * step)
            record.record(step)
        final = loss_at(rate or 0.5, seed, steps[-1])
        if rate is None:  # a run whose lineage has no learning rate
            train = TrainLineageInfo(algorithm=Algorithm(network="MLP", loss=final))
            record.add_value("train_lineage", "train", train.to_proto())
        else:
            add_lineage(record, rate, seed, final, 0.8 + 0.01 * seed)
        record.record(steps[-1])


def write_job(directory: Path, rate: float, seed: int) -> None:
    """Two ranks whose losses differ by 0.5: the job's curve is their mean."""
    for rank in range(2):
        with SummaryRecord(directory / f"rank_{rank}", rank=rank) as record:
            for step in range(1, STEPS + 1):
                record.add_value("scalar", LOSS, loss_at(rate, seed, step) + 0.5 * rank)
                record.record(step)
            final = loss_at(rate, seed, STEPS) + 0.5 * rank
            add_lineage(record, rate, seed, final, 0.8)
            record.record(STEPS)
    merge_run_dir(directory, world_size=2)


def six_runs(base: Path) -> dict[str, tuple[float, int]]:
    runs = {}
    for rate in RATES:
        for seed in SEEDS:
            name = f"lr{rate}-seed{seed}"
            write_run(base / name, rate, seed)
            runs[name] = (rate, seed)
    return runs


@pytest.fixture
def base(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    six_runs(root)
    return root


def curves_of(group: RunGroup) -> dict[str, list[tuple[int, float]]]:
    """A group's curves, read back from its files."""
    assert group.directory is not None
    return reader.scalars(group.directory)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_two_learning_rates_by_three_seeds_make_two_groups_of_three(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "group", str(base), "--by", "learning_rate")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["learning_rate", "runs", "loss", "metric/acc"]
    rows = [line.split() for line in lines[1:3]]
    assert {(row[0], row[1]) for row in rows} == {("0.1", "3"), ("0.2", "3")}
    # the lower mean loss first (lr 0.2 decays faster)
    assert rows[0][0] == "0.2"
    assert "2 groups of 6 runs" in out
    assert "± " in lines[1]


def test_the_group_mean_at_every_step_is_the_mean_of_its_runs(base: Path) -> None:
    grouped = group_runs(base, by=["learning_rate"], workers=1)
    assert grouped.directory == os.path.join(os.path.realpath(base), "_groups")
    for group in grouped.groups:
        rate = group.values["learning_rate"]
        assert len(group.runs) == 3 and group.missing == []
        curves = curves_of(group)
        steps = [step for step, _ in curves[f"{LOSS}/mean"]]
        assert steps == list(range(1, STEPS + 1))
        for step, mean in curves[f"{LOSS}/mean"]:
            runs = np.array([loss_at(rate, seed, step) for seed in SEEDS], dtype=np.float32)
            expected = np.float32(np.mean(runs.astype(np.float64)))
            assert np.float32(mean) == pytest.approx(expected, rel=2e-7, abs=0)
        for suffix, reduce in (("min", np.min), ("max", np.max), ("std", np.std)):
            for step, value in curves[f"{LOSS}/{suffix}"]:
                runs = np.array([loss_at(rate, seed, step) for seed in SEEDS], dtype=np.float32)
                assert value == pytest.approx(
                    float(reduce(runs.astype(np.float64))), rel=1e-5, abs=1e-7
                )
        assert {value for _, value in curves[f"{LOSS}/runs"]} == {3.0}
        assert set(group.tags) == {LOSS, "accuracy"}


def test_final_values_are_mean_std_min_max_over_the_runs(base: Path) -> None:
    grouped = group_runs(base, by="learning_rate", write=False)
    assert grouped.directory is None
    for group in grouped.groups:
        rate = group.values["learning_rate"]
        losses = [float(np.float32(loss_at(rate, seed, STEPS))) for seed in SEEDS]
        loss = group.finals["loss"]
        assert loss.count == 3
        assert loss.mean == pytest.approx(np.mean(losses), rel=1e-6)
        assert loss.std == pytest.approx(np.std(losses), rel=1e-5)
        assert (loss.min, loss.max) == pytest.approx((min(losses), max(losses)), rel=1e-6)
        assert group.finals["metric/acc"].mean == pytest.approx(0.82, rel=1e-6)
    assert not (base / "_groups").exists()


def test_query_lists_the_same_runs_before_and_after_group(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = run_cli(capsys, "query", str(base), "--format", "csv")[1]
    before_api = sorted(item["summary_dir"] for item in filter_runs(base)["object"])
    group_runs(base, by="learning_rate")
    assert (base / "_groups").is_dir()
    after = run_cli(capsys, "query", str(base), "--format", "csv")[1]
    assert sorted(after.splitlines()) == sorted(before.splitlines())
    assert sorted(item["summary_dir"] for item in filter_runs(base)["object"]) == before_api
    assert len(before_api) == 6


def test_a_job_counts_once_by_its_cross_rank_mean(tmp_path: Path) -> None:
    base = tmp_path / "runs"
    write_run(base / "single-1", 0.1, 1)
    write_run(base / "single-2", 0.1, 2)
    write_job(base / "job", 0.1, 3)
    grouped = group_runs(base, by="learning_rate", workers=1)
    (group,) = grouped.groups
    assert sorted(group.runs) == ["./job", "./single-1", "./single-2"]
    curves = curves_of(group)
    assert {value for _, value in curves[f"{LOSS}/runs"]} == {3.0}
    for step, mean in curves[f"{LOSS}/mean"]:
        job = np.mean(
            [np.float32(loss_at(0.1, 3, step) + 0.5 * rank) for rank in range(2)], dtype=np.float64
        )
        singles = [np.float32(loss_at(0.1, seed, step)) for seed in (1, 2)]
        # the job's mean as its job file stores it (float32), then the mean of the three runs
        expected = np.mean([*map(float, singles), float(np.float32(job))])
        assert mean == pytest.approx(expected, rel=1e-6)


def test_a_job_without_its_job_view_is_read_from_its_ranks(tmp_path: Path) -> None:
    base = tmp_path / "runs"
    write_job(base / "job", 0.1, 3)
    for name in os.listdir(base / "job"):
        if ".job." in name or name.endswith(".job"):
            os.unlink(base / "job" / name)
    grouped = group_runs(base, by="learning_rate", workers=1)
    (group,) = grouped.groups
    curves = curves_of(group)
    expected = np.mean([np.float32(loss_at(0.1, 3, 1) + 0.5 * rank) for rank in range(2)])
    step, mean = curves[f"{LOSS}/mean"][0]
    assert step == 1 and mean == pytest.approx(float(expected), rel=1e-6)


def test_runs_missing_steps_or_tags_and_non_finite_values(tmp_path: Path) -> None:
    base = tmp_path / "runs"
    write_run(base / "full", 0.1, 1)
    write_run(base / "short", 0.1, 2, steps=range(1, 11), accuracy=False)
    write_run(base / "odd", 0.1, 3, steps=range(1, STEPS + 1, 2))
    with SummaryRecord(base / "nan") as record:
        for step in range(1, STEPS + 1):
            record.add_value("scalar", LOSS, math.nan if step == 5 else loss_at(0.1, 4, step))
            record.record(step)
        add_lineage(record, 0.1, 4, 0.5, 0.8)
        record.record(STEPS)
    grouped = group_runs(base, by="learning_rate", workers=1)
    (group,) = grouped.groups
    curves = curves_of(group)
    runs = dict(curves[f"{LOSS}/runs"])
    assert runs[1] == 4  # every run
    assert runs[2] == 3  # "odd" lacks the even steps
    assert runs[12] == 2  # "short" stopped at 10, "odd" lacks 12
    assert runs[13] == 3
    means = dict(curves[f"{LOSS}/mean"])
    assert math.isnan(means[5])  # a NaN point makes the mean NaN, as numpy's
    mins = dict(curves[f"{LOSS}/min"])
    assert mins[5] == pytest.approx(
        min(float(np.float32(loss_at(0.1, seed, 5))) for seed in (1, 2, 3)), rel=1e-6
    )
    expected_12 = np.mean([np.float32(loss_at(0.1, seed, 12)) for seed in (1, 4)])
    assert means[12] == pytest.approx(float(expected_12), rel=1e-6)
    accuracy_runs = dict(curves["accuracy/runs"])
    assert accuracy_runs[1] == 2 and accuracy_runs[2] == 1  # "short" and "nan" have none


def test_runs_lacking_a_key_form_their_own_group(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(base / "no-rate-1", None, 7)
    write_run(base / "no-rate-2", None, 8)
    grouped = group_runs(base, by="learning_rate", write=False)
    lacking = [group for group in grouped.groups if group.missing]
    assert len(lacking) == 1 and lacking[0].missing == ["learning_rate"]
    assert sorted(lacking[0].runs) == ["./no-rate-1", "./no-rate-2"]
    assert lacking[0].values == {"learning_rate": None}
    code, out, _ = run_cli(capsys, "group", str(base), "--by", "learning_rate", "--no-write")
    assert code == 0
    assert "(missing)" in out
    assert "2 runs without learning_rate: grouped apart" in out


def test_where_and_sort_and_two_keys(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grouped = group_runs(
        base,
        by=["learning_rate", "user_defined/seed"],
        where="user_defined/seed <= 2",
        sort="user_defined/seed desc",
        write=False,
    )
    assert [len(group.runs) for group in grouped.groups] == [1, 1, 1, 1]
    assert [group.values["user_defined/seed"] for group in grouped.groups] == [2, 2, 1, 1]
    grouped = group_runs(base, by="learning_rate", sort="metric/acc desc", write=False)
    assert len(grouped.groups) == 2
    code, out, _ = run_cli(
        capsys,
        "group",
        str(base),
        "--by",
        "learning_rate",
        "--sort",
        "loss desc",
        "--format",
        "json",
        "--no-write",
    )
    assert code == 0
    document = json.loads(out)
    assert [group["values"]["learning_rate"] for group in document["groups"]] == [0.1, 0.2]
    assert document["groups"][0]["count"] == 3
    assert set(document["groups"][0]["finals"]["loss"]) == {"mean", "std", "min", "max", "count"}
    code, out, _ = run_cli(
        capsys, "group", str(base), "--by", "learning_rate", "--format", "csv", "--no-write"
    )
    header = out.splitlines()[0].split(",")
    assert header[:3] == ["group", "learning_rate", "runs"]
    assert "loss/mean" in header and "metric/acc/std" in header


def test_rerunning_replaces_the_folder_whole(base: Path) -> None:
    group_runs(base, by="learning_rate")
    first = sorted(os.listdir(base / "_groups"))
    assert first == ["grouping.json", "learning_rate=0.1", "learning_rate=0.2"]
    group_runs(base, by="user_defined/seed")
    assert sorted(os.listdir(base / "_groups")) == [
        "grouping.json",
        "user_defined.seed=1",
        "user_defined.seed=2",
        "user_defined.seed=3",
    ]
    leftovers = [name for name in os.listdir(base) if name.startswith(".rankscribe-groups")]
    assert leftovers == []
    grouping = base / "_groups" / "grouping.json"  # the keys, for the query
    assert json.loads(grouping.read_text()) == {"by": ["user_defined/seed"]}
    assert stat.S_IMODE(grouping.stat().st_mode) == 0o400
    for name in os.listdir(base / "_groups"):
        folder = base / "_groups" / name
        if folder == grouping:
            continue
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        for file in folder.iterdir():
            assert stat.S_IMODE(file.stat().st_mode) == 0o400


def test_a_link_planted_at_groups_is_replaced_not_followed(base: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("x")
    os.symlink(elsewhere, base / "_groups")
    group_runs(base, by="learning_rate")
    assert not (base / "_groups").is_symlink()
    assert (elsewhere / "keep").read_text() == "x"


@pytest.mark.parametrize(
    ("by", "message"),
    [
        ([], "by must be"),
        (3, "by must be"),
        ("nonsense", "not a key to group by"),
        ("user_defined/sed", "no run has 'user_defined/sed'"),
        (["learning_rate", "learning_rate"], "names a key twice"),
    ],
)
def test_bad_keys_are_refused_naming_them(base: Path, by: object, message: str) -> None:
    with pytest.raises(LineageError, match=message):
        group_runs(base, by=by, write=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sort", "message"),
    [(3, "sort must be None"), ("bogus", "unknown sort key 'bogus'"), ("metric/acx", "metric/acc")],
)
def test_bad_sort_keys_are_refused_naming_them(base: Path, sort: object, message: str) -> None:
    with pytest.raises(LineageError, match=message):
        group_runs(base, by="learning_rate", sort=sort, write=False)  # type: ignore[arg-type]


def test_the_command_names_a_bad_key(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "group", str(base), "--by", "lerning_rate")
    assert code == 1
    assert "lerning_rate" in err and "not a key to group by" in err


def test_a_failed_write_keeps_the_earlier_groups(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group_runs(base, by="learning_rate")
    before = sorted(os.listdir(base / "_groups"))

    def disk_full(*_: object, **__: object) -> str:
        raise OSError(28, "No space left on device")

    # The atomic file write is where a full disk shows; the writer's event files call it.
    # One worker: the groups are written in this process, where the patch is (a worker
    # started by forkserver, as when another thread runs, would not have it).
    monkeypatch.setattr("rankscribe.writer.eventfiles.atomic_write", disk_full)
    with pytest.raises(OSError, match="No space left"):
        group_runs(base, by="user_defined/seed", workers=1)
    assert sorted(os.listdir(base / "_groups")) == before
    assert [name for name in os.listdir(base) if name.startswith(".rankscribe-groups")] == []


def test_a_warm_query_stays_warm_beside_the_groups(tmp_path: Path, lw: Any) -> None:
    """The index's one-pass warm path is taken with ``_groups`` in the base dir."""
    base = tmp_path / "base"
    for index in range(4):
        lw.write(
            base / f"run{index}",
            [lw.train(learning_rate=0.1 * (index % 2), loss=index)],
            mtime=OLD,
        )
        finish(base / f"run{index}")
    expected = filter_runs(base, use_index=False)
    group_runs(base, by="learning_rate", write=False)  # the first query: writes the index
    os.mkdir(base / "_groups", 0o700)  # as group leaves it (its folders hold no run)
    os.utime(base, (OLD, OLD))
    as_a_new_process(base)
    with lineage_reads() as read, listings() as listed:
        assert filter_runs(base) == expected
    # The one-pass path: the base dir's names only; no run and not `_groups` walked, no
    # lineage file read.
    assert (listed, read) == ([("names", str(base))], set())


@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan-and-inf"])
def test_a_block_of_runs_reduces_as_merging_each_run(special: bool) -> None:
    """Runs with the same steps are reduced as one block; the result is the pairwise merge's."""
    from rankscribe.jobview.protocol import TagStatistics

    # private: how a group's runs are folded has no public door (the files show the mean only).
    from rankscribe.lineage.group._curves import _Folder

    rng = np.random.default_rng(5)
    steps = np.arange(1, 41, dtype=np.int64)
    rows = np.round(rng.normal(size=(70, len(steps))), 1)  # rounded: ties for the extremes
    if special:
        rows[3, 2], rows[9, 2], rows[4, 7], rows[5, 7] = np.nan, np.inf, -np.inf, np.inf
        rows[:, 11] = np.nan
    folder = _Folder()
    merged: TagStatistics | None = None
    for number in np.random.default_rng(1).permutation(len(rows)):
        folder.add_run((0, "t"), int(number), steps, rows[number])
        single = TagStatistics.of_rank(int(number), steps, rows[number])
        merged = single if merged is None else merged.merge(single)
    assert merged is not None
    result = folder.result()[0]["t"]
    for name in ("steps", "count", "min_rank", "max_rank", "nan", "posinf", "neginf"):
        np.testing.assert_array_equal(getattr(result, name), getattr(merged, name), err_msg=name)
    for name in ("minimum", "maximum", "mean", "std"):
        np.testing.assert_allclose(
            getattr(result, name), getattr(merged, name), rtol=1e-12, atol=1e-12
        )


def test_worker_processes_give_what_one_process_gives(tmp_path: Path) -> None:
    base = tmp_path / "runs"
    for seed in range(10):
        write_run(base / f"run{seed}", RATES[seed % 2], seed, steps=range(1, STEPS + 1 - seed % 3))
    alone = group_runs(base, by="learning_rate", workers=1)
    curves = {group.name: curves_of(group) for group in alone.groups}
    shared = group_runs(base, by="learning_rate", workers=2)
    for group in shared.groups:
        again = curves_of(group)
        assert again.keys() == curves[group.name].keys()
        for tag, points in again.items():
            np.testing.assert_allclose(points, curves[group.name][tag], rtol=1e-6, err_msg=tag)


def test_one_group_of_one_run_is_counted_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path / "only", 0.1, 0)
    code, out, err = run_cli(capsys, "group", str(tmp_path), "--by", "learning_rate")
    assert code == 0, err
    assert "1 group of 1 run; values are mean" in out


def test_a_query_over_a_grouped_base_shows_the_keys_it_was_grouped_by(
    base: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")  # room for the run and one column or two
    code, before, _ = run_cli(capsys, "query", str(base), "--sort", "loss")
    assert code == 0 and "user_defined/seed" not in before.splitlines()[0]
    group_runs(base, by="user_defined/seed")
    code, after, _ = run_cli(capsys, "query", str(base), "--sort", "loss")
    assert code == 0
    header = after.splitlines()[0].split()
    assert {"loss", "user_defined/seed"} <= set(header)  # claims its room as --sort's does
    assert (
        "grouped by user_defined/seed (`rankscribe-lineage group`; the groups' curves in "
        f"{base / '_groups'})"
    ) in after


def test_a_planted_grouping_file_is_no_error(
    base: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    (base / "_groups").mkdir()
    (base / "_groups" / "grouping.json").write_text('{"by": 3}')
    code, out, _ = run_cli(capsys, "query", str(base))
    assert code == 0 and "grouped by" not in out
    assert "holds no list of keys" in caplog.text
