"""The landscape budget: at most ``landscape_budget`` bytes of parameter files per rank.

MindSpore's default saves 19 full parameter sets. Where they fit in the budget
(64 MB by default) all are saved, as before; where they do not, an evenly spread
part of the later intervals is, the metadata lists only what is on disk in the
form MindSpore's SummaryLandscape reads (tests/_support/landscape.py), and rank 0
says once what was left out and how to save it all (``"all"``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankscribe.collector import ArrayNetwork, CallbackParams, RunContext, SummaryCollector
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.ranks import Coordinator, GatherResult, RankInfo
from tests._support.landscape import assert_drawable, read_metadata, shape

DEFAULT_BUDGET = 64_000_000
ENV = "RANKSCRIBE_LANDSCAPE_BUDGET"
SAVE_ALL = "SummaryCollector(..., landscape_budget='all') or RANKSCRIBE_LANDSCAPE_BUDGET=all"


def network(values: int) -> ArrayNetwork:
    return ArrayNetwork({"w": np.zeros(values, np.float32)}, name="Net")


def train(
    directory: Path,
    net: ArrayNetwork,
    steps: int = 25,
    *,
    unit: str = "step",
    intervals: list[list[int]] | None = None,
    before: Callable[[int], None] | None = None,
    **collector: Any,
) -> SummaryCollector:
    """Drive a collector through ``steps`` steps of one epoch (``unit="epoch"``: ``steps``
    epochs of one step), the parameters holding the step number, and end the training.

    ``before(step)`` runs ahead of each step's callbacks."""
    landscape: dict[str, Any] = {"unit": unit}
    if intervals is not None:
        landscape["intervals"] = intervals
    item = SummaryCollector(
        directory, collect_specified_data={"collect_landscape": landscape}, **collector
    )
    epochs = unit == "epoch"

    def context(step: int) -> RunContext:
        return RunContext(
            CallbackParams(
                mode="train",
                epoch_num=steps if epochs else 1,
                batch_num=1 if epochs else steps,
                cur_step_num=step,
                cur_epoch_num=step if epochs else 1,
                train_network=net,
                net_outputs=0.5,
            )
        )

    item.begin(context(1))
    for step in range(1, steps + 1):
        net["w"][:] = step
        if before is not None:
            before(step)
        item.step_end(context(step))
        if epochs:
            item.epoch_end(context(step))
    item.end(context(steps))
    return item


def saved(ckpt_dir: Path) -> dict[int, int]:
    """``{number: file bytes}`` of the parameter files in ``ckpt_dir``."""
    if not ckpt_dir.exists():
        return {}
    return {
        int(name.split("_")[1]): (ckpt_dir / name).stat().st_size
        for name in os.listdir(ckpt_dir)
        if name.endswith(".ckpt")
    }


def landscape_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "Loss landscape" in record.getMessage()
    ]


def one_set_bytes(tmp_path: Path, net: ArrayNetwork) -> int:
    """The bytes of one parameter file of ``net`` (a run saving every set)."""
    train(tmp_path / "probe", net, 3, intervals=[[1, 2, 3]], landscape_budget="all")
    sizes = set(saved(tmp_path / "probe" / "ckpt_dir").values())
    assert len(sizes) == 1
    return sizes.pop()


def test_over_the_budget_the_later_interval_is_kept_evenly_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    budget = 5 * set_bytes + set_bytes // 2  # five sets fit, of the default's 19
    caplog.clear()  # the probe's line
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    train(tmp_path / "run", net, landscape_budget=budget)
    ckpt_dir = tmp_path / "run" / "ckpt_dir"
    files = saved(ckpt_dir)
    # Not 3 of each interval (6 > 5): the last interval's first, last and 3 evenly between.
    assert sorted(files) == [10, 12, 15, 17, 19]
    assert sum(files.values()) <= budget
    metadata = read_metadata(ckpt_dir)
    assert metadata["epoch_group"] == {"0": [10, 12, 15, 17, 19]}
    assert_drawable(metadata)
    for number, path in metadata["model_params_file_map"].items():
        assert path == str(ckpt_dir / f"Net_{number}_step.ckpt")
    (line,) = landscape_lines(caplog)
    assert (
        f"the 19 full parameter sets of the network (steps 1-19), {set_bytes / 1000:.1f} kB each, "
        f"would take {19 * set_bytes / 1000:.1f} kB per rank, over the landscape budget of "
        f"{budget / 1000:.1f} kB per rank; saving 5 of them (steps 10, 12, 15, 17, 19: the "
        f"first, the last and evenly spread sets of the last interval), "
        f"{5 * set_bytes / 1000:.1f} kB per rank, into {ckpt_dir}. "
        "Left out: steps 1-9, 11, 13-14, 16, 18. Save them all with " + SAVE_ALL
    ) in line


def test_the_sets_that_fit_are_shared_between_the_intervals(tmp_path: Path) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    train(tmp_path / "run", net, landscape_budget=12 * set_bytes)
    metadata = read_metadata(tmp_path / "run" / "ckpt_dir")
    # 12 sets: 6 of 1..9 and 6 of 10..19, each interval's ends among them.
    assert metadata["epoch_group"] == {
        "0": [1, 3, 4, 6, 7, 9],
        "1": [10, 12, 14, 15, 17, 19],
    }
    assert sorted(saved(tmp_path / "run" / "ckpt_dir")) == [
        1, 3, 4, 6, 7, 9, 10, 12, 14, 15, 17, 19
    ]  # fmt: skip
    assert_drawable(metadata)


def test_the_budgeted_metadata_has_the_form_of_a_full_one(tmp_path: Path) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    train(tmp_path / "full", net, landscape_budget="all")
    train(tmp_path / "budgeted", net, landscape_budget=7 * set_bytes)
    full = read_metadata(tmp_path / "full" / "ckpt_dir")
    budgeted = read_metadata(tmp_path / "budgeted" / "ckpt_dir")
    assert_drawable(full)
    assert_drawable(budgeted)
    assert shape(budgeted) == shape(full)
    differing = {key for key in full if full[key] != budgeted[key]}
    assert differing == {"epoch_group", "model_params_file_map"}
    # the same last set: the result landscape is drawn around the same parameters
    assert list(budgeted["epoch_group"].values())[-1][-1] == 19
    assert len(budgeted["model_params_file_map"]) == 7


def test_when_all_sets_fit_all_are_saved_as_in_mindspore(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    caplog.clear()  # the probe's line
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    train(tmp_path / "run", net, landscape_budget=19 * set_bytes)
    assert sorted(saved(tmp_path / "run" / "ckpt_dir")) == list(range(1, 20))
    metadata = read_metadata(tmp_path / "run" / "ckpt_dir")
    assert metadata["epoch_group"] == {"0": list(range(1, 10)), "1": list(range(10, 20))}
    (line,) = landscape_lines(caplog)
    assert "saving 19 full parameter sets" in line and "budget" not in line


def test_under_three_sets_nothing_is_saved_and_no_metadata(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    caplog.clear()  # the probe's line
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    train(tmp_path / "run", net, landscape_budget=3 * set_bytes - 1)
    assert saved(tmp_path / "run" / "ckpt_dir") == {}
    assert not (tmp_path / "run" / "ckpt_dir" / "train_metadata.json").exists()
    (line,) = landscape_lines(caplog)
    assert (
        "saving none of them and no train_metadata.json: an interval is drawn from 3 sets "
        "at least. Left out: steps 1-19. Save them all with " + SAVE_ALL
    ) in line


def test_the_default_budget_is_64_mb_per_rank(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    # 5.6 MB a set: 19 of them are 106 MB; 11 fit in 64 MB.
    train(tmp_path / "run", network(1_400_000))
    files = saved(tmp_path / "run" / "ckpt_dir")
    assert sorted(files) == [1, 3, 5, 7, 9, 10, 12, 14, 15, 17, 19]
    assert sum(files.values()) <= DEFAULT_BUDGET
    assert_drawable(read_metadata(tmp_path / "run" / "ckpt_dir"))
    (line,) = landscape_lines(caplog)
    assert "over the landscape budget of 64.0 MB per rank; saving 11 of them" in line


def test_a_network_too_large_for_three_sets_saves_nothing_and_makes_no_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    # 22 MB a set: 3 of them are over the default 64 MB. Decided from the parameters'
    # bytes before any file is made: no copy, no ckpt_dir.
    train(tmp_path / "run", network(5_500_000))
    assert not (tmp_path / "run" / "ckpt_dir").exists()
    (line,) = landscape_lines(caplog)
    assert (
        "the 19 full parameter sets of the network (steps 1-19), 22.0 MB each, would take "
        "418.0 MB per rank, over the landscape budget of 64.0 MB per rank; saving none of them"
    ) in line


def test_all_saves_every_set_whatever_the_variable_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "1000")
    net = network(250)
    train(tmp_path / "run", net, landscape_budget="all")
    assert sorted(saved(tmp_path / "run" / "ckpt_dir")) == list(range(1, 20))
    assert_drawable(read_metadata(tmp_path / "run" / "ckpt_dir"))


def test_the_variable_all_saves_every_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, " ALL ")
    # 3 sets of 22 MB: over the default budget of 64 MB
    train(tmp_path / "run", network(5_500_000), 3, intervals=[[1, 2, 3]])
    files = saved(tmp_path / "run" / "ckpt_dir")
    assert sorted(files) == [1, 2, 3] and sum(files.values()) > DEFAULT_BUDGET


def test_the_variable_sets_the_budget_and_the_argument_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    monkeypatch.setenv(ENV, str(4 * set_bytes))
    train(tmp_path / "variable", net)
    assert sorted(saved(tmp_path / "variable" / "ckpt_dir")) == [10, 13, 16, 19]
    train(tmp_path / "argument", net, landscape_budget=3 * set_bytes)
    assert sorted(saved(tmp_path / "argument" / "ckpt_dir")) == [10, 15, 19]


def test_epochs_are_budgeted_like_steps(tmp_path: Path) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    train(
        tmp_path / "run",
        net,
        8,
        unit="epoch",
        intervals=[[1, 2, 3, 4, 5, 6, 7, 8]],
        landscape_budget=4 * set_bytes,
    )
    ckpt_dir = tmp_path / "run" / "ckpt_dir"
    assert sorted(os.listdir(ckpt_dir)) == [
        "Net_1_epoch.ckpt",
        "Net_3_epoch.ckpt",
        "Net_6_epoch.ckpt",
        "Net_8_epoch.ckpt",
        "train_metadata.json",
    ]
    assert read_metadata(ckpt_dir)["epoch_group"] == {"0": [1, 3, 6, 8]}


def test_a_short_run_budgets_the_sets_it_reaches(tmp_path: Path) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    # 12 steps reach 1..9 and 10..12: the second interval has 3 sets, the first 9.
    train(tmp_path / "run", net, 12, landscape_budget=8 * set_bytes)
    metadata = read_metadata(tmp_path / "run" / "ckpt_dir")
    assert metadata["epoch_group"] == {"0": [1, 3, 5, 7, 9], "1": [10, 11, 12]}
    assert_drawable(metadata)


def test_sets_that_grow_past_the_budget_are_not_saved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    budget = 19 * set_bytes  # all 19 fit, at the first set's size

    def grow(step: int) -> None:
        if step == 15:  # from step 15 on a set is about 5 times larger
            net.parameters["extra"] = np.zeros(1000, np.float32)

    train(tmp_path / "run", net, landscape_budget=budget, before=grow)
    files = saved(tmp_path / "run" / "ckpt_dir")
    assert sum(files.values()) <= budget
    assert sorted(files) == list(range(1, 16))  # 14 small sets and one large fit
    assert (
        "The landscape parameters of step 16 (5.1 kB) would take this rank over its "
        f"landscape budget of {budget / 1000:.1f} kB; they are not saved."
    ) in caplog.text


@settings(max_examples=25, deadline=None)
@given(
    intervals=st.lists(
        st.lists(st.integers(1, 12), min_size=3, max_size=8), min_size=1, max_size=3
    ),
    fit=st.integers(0, 14),
)
def test_what_is_kept_fits_and_stays_drawable(
    tmp_path_factory: pytest.TempPathFactory, intervals: list[list[int]], fit: int
) -> None:
    directory = tmp_path_factory.mktemp("run")
    net = network(8)
    set_bytes = one_set_bytes(directory, net)
    train(directory / "run", net, 12, intervals=intervals, landscape_budget=fit * set_bytes + 1)
    ckpt_dir = directory / "run" / "ckpt_dir"
    files = saved(ckpt_dir)
    distinct = {number for interval in intervals for number in interval}
    if len(distinct) <= fit:  # all fit: MindSpore's metadata, unchanged
        assert set(files) == distinct
        assert read_metadata(ckpt_dir)["epoch_group"] == {
            str(index): interval for index, interval in enumerate(intervals)
        }
        return
    assert len(files) <= fit
    if not (ckpt_dir / "train_metadata.json").exists():
        # nothing drawable fits: no interval of 3 distinct numbers, or fewer than 3 sets
        assert files == {}
        assert fit < 3 or all(len(set(interval)) < 3 for interval in intervals)
        return
    metadata = read_metadata(ckpt_dir)
    assert_drawable(metadata)
    groups = list(metadata["epoch_group"].values())
    assert {number for group in groups for number in group} == set(files)
    # the kept groups are the later intervals (of 3 distinct numbers), each with its ends
    viable = [list(dict.fromkeys(i)) for i in intervals if len(set(i)) >= 3]
    assert groups[-1][-1] == viable[-1][-1]
    for group, interval in zip(groups, viable[len(viable) - len(groups) :], strict=True):
        assert (group[0], group[-1]) == (interval[0], interval[-1])
        assert [n for n in interval if n in group] == group  # in the interval's order


# ------------------------------------------------------------------ several ranks


class _Alone:
    """The two collectives the collector calls, for a rank whose peers never report."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    world_size = 2

    def bcast(self, obj: Any, root: int = 0, timeout: float | None = None) -> Any:
        from rankscribe.ranks.errors import CollectiveTimeoutError

        if self.rank != root:
            raise CollectiveTimeoutError("bcast", 1.0, [root], "rank 0 never sent its claim")
        return obj

    def gather(self, obj: Any, root: int = 0, timeout: float | None = None) -> Any:
        if self.rank != root:
            return GatherResult(root=root, rank=self.rank, world_size=2)
        return GatherResult(root=0, rank=0, world_size=2, values={0: obj}, missing=(1,))


Coordinator.register(_Alone)


@pytest.mark.parametrize("rank", [0, 1])
def test_every_rank_keeps_the_same_sets_and_only_rank_zero_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, rank: int
) -> None:
    net = network(250)
    set_bytes = one_set_bytes(tmp_path, net)
    info = RankInfo(
        rank=rank, world_size=2, local_rank=rank, local_size=2, host="h", launcher="pmi"
    )
    caplog.clear()  # the probe's line
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    train(
        tmp_path / "job",
        net,
        landscape_budget=6 * set_bytes,
        rank_info=info,
        coordinator=_Alone(rank),
        merge_timeout=1.0,
    )
    ckpt_dir = tmp_path / "job" / f"rank_{rank}" / "ckpt_dir"
    assert sorted(saved(ckpt_dir)) == [1, 5, 9, 10, 15, 19]
    assert_drawable(read_metadata(ckpt_dir))
    lines = landscape_lines(caplog)
    if rank == 0:
        (line,) = lines
        assert "for the job's 2 ranks, every rank into its own rank_<r>/ckpt_dir" in line
        assert "Left out: steps 2-4, 6-8, 11-14, 16-18. Save them all with" in line
    else:
        assert lines == []


# ------------------------------------------------------------------ bad values


@pytest.mark.parametrize(
    ("value", "error", "says"),
    [
        (0, CollectorValueError, "but got 0."),
        (-5, CollectorValueError, "but got -5."),
        ("64MB", CollectorValueError, "but got '64MB'."),
        ("ALL", CollectorValueError, "but got 'ALL'."),
        (True, CollectorTypeError, "but got bool True."),
        (1.5e6, CollectorTypeError, "but got float 1500000.0."),
        ([64], CollectorTypeError, "but got list [64]."),
    ],
)
def test_a_bad_budget_is_refused_naming_the_argument_and_the_form(
    tmp_path: Path, value: Any, error: type[Exception], says: str
) -> None:
    with pytest.raises(error) as caught:
        SummaryCollector(tmp_path, landscape_budget=value)
    assert str(caught.value) == (
        "For 'landscape_budget', the value should be an int number of bytes >= 1 (e.g. "
        "64000000 for 64 MB, the default) or 'all' (save every parameter set), " + says
    )


@pytest.mark.parametrize(
    ("variable", "says"), [("0", "but got 0."), ("64MB", "but got '64mb'."), ("-1", "'-1'")]
)
def test_a_bad_variable_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, says: str
) -> None:
    monkeypatch.setenv(ENV, variable)
    with pytest.raises(CollectorValueError) as caught:
        SummaryCollector(tmp_path)
    message = str(caught.value)
    assert message.startswith(
        "For the environment variable RANKSCRIBE_LANDSCAPE_BUDGET, the value should be an "
        "int number of bytes >= 1"
    )
    assert says in message
