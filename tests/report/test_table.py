"""The runs table: differing fields first, sort keys, the verdicts column; the comparison axes."""

from __future__ import annotations

from typing import Any

# private: the report's data reduction, no public door
from rankscribe.lineage.report._data import RunInfo, collect_runs

# private: the report's comparison table rule, no public door
from rankscribe.lineage.report._table import build_table, comparison_axes

from .conftest import Base


def run(
    name: str,
    fields: dict[str, Any],
    *,
    metric: dict[str, Any] | None = None,
    user_defined: dict[str, Any] | None = None,
    ranks: int = 0,
) -> RunInfo:
    lineage = {**fields, "metric": metric or {}, "user_defined": user_defined or {}}
    rank_dirs = {rank: f"/base/{name}/rank_{rank}" for rank in range(ranks)}
    return RunInfo(name, f"/base/{name}", lineage, rank_dirs)


def test_columns_that_differ_come_first_then_the_shared_ones() -> None:
    runs = [
        run(
            "a",
            {"network": "MLP", "optimizer": "Adam", "learning_rate": 0.1, "epoch": 3},
            metric={"accuracy": 0.9},
        ),
        run(
            "b",
            {"network": "MLP", "optimizer": "SGD", "learning_rate": 0.1, "epoch": 5},
            metric={"accuracy": 0.8},
        ),
    ]
    table = build_table(runs)
    names = [column.name for column in table.columns]
    assert names == [
        "run",
        "kind",
        "optimizer",
        "epoch",
        "metric/accuracy",
        "network",
        "learning_rate",
    ]
    assert [column.differs for column in table.columns][2:] == [True, True, True, False, False]
    assert [cell.text for cell in table.rows[1]] == ["b", "run", "SGD", "5", "0.8", "MLP", "0.1"]


def test_a_missing_value_counts_as_a_difference_and_empty_columns_are_dropped() -> None:
    runs = [
        run("a", {"optimizer": "Adam", "batch_size": 32, "loss_function": None}),
        run("b", {"optimizer": "Adam", "batch_size": None, "loss_function": None}),
    ]
    table = build_table(runs)
    assert [column.name for column in table.columns] == ["run", "kind", "batch_size", "optimizer"]
    assert table.rows[1][2].text == "" and table.rows[1][2].sort_key is None


def test_numbers_sort_as_numbers_and_text_as_text() -> None:
    runs = [
        run("a", {"learning_rate": 1e-05, "optimizer": "Adam"}),
        run("b", {"learning_rate": 0.5, "optimizer": "SGD"}),
    ]
    table = build_table(runs)
    by_name = {column.name: index for index, column in enumerate(table.columns)}
    assert table.rows[0][by_name["learning_rate"]].sort_key == 1e-05
    assert table.rows[0][by_name["learning_rate"]].text == "1e-05"
    assert table.rows[1][by_name["optimizer"]].sort_key == "SGD"


def test_jobs_get_a_verdicts_column_and_job_keys_no_columns_of_their_own() -> None:
    verdicts = {
        "job/straggler_rank": 1,
        "job/diverged_ranks": "2,3",
        "job/last_step/0": 100,
        "job/stopped_first_rank": -1,
        "job/missing_ranks": "",
        "note": "x",
    }
    runs = [
        run("job", {"optimizer": "Adam"}, user_defined=verdicts, ranks=4),
        run("single", {"optimizer": "SGD"}, user_defined={"note": "y"}),
    ]
    table = build_table(runs)
    names = [column.name for column in table.columns]
    assert names[:3] == ["run", "kind", "verdicts"]
    assert not any(name.startswith("user_defined/job/") for name in names)
    assert "user_defined/note" in names
    assert table.rows[0][1].text == "job, 4 ranks"
    assert table.rows[0][2].text == "straggler: rank 1 (no cost recorded); diverged: ranks 2,3"
    assert table.rows[1][2].text == ""


def test_a_job_without_merged_verdicts_says_so() -> None:
    job = RunInfo("job", "/base/job", None, {0: "/base/job/rank_0"})
    table = build_table([job])
    assert table.rows[0][2].text == "not merged"


def test_comparison_axes_are_varying_hyper_parameters_then_results() -> None:
    runs = [
        run(
            "a",
            {"optimizer": "Adam", "learning_rate": 0.1, "network": "MLP", "loss": 0.5},
            metric={"accuracy": 0.9},
        ),
        run(
            "b",
            {"optimizer": "SGD", "learning_rate": 0.01, "network": "MLP", "loss": 0.3},
            metric={"accuracy": 0.95},
        ),
        run(
            "c",
            {"optimizer": "Adam", "learning_rate": 0.05, "network": "MLP", "loss": None},
            metric={"accuracy": 0.7},
        ),
    ]
    comparison = comparison_axes(runs)
    assert [axis.label for axis in comparison.axes] == [
        "optimizer",
        "learning_rate",
        "loss",
        "metric/accuracy",
    ]
    assert comparison.constant == ["network"]
    optimizer = comparison.axes[0]
    assert optimizer.categories == ["Adam", "SGD"] and optimizer.values == [0.0, 1.0]
    # c has no loss: it is left out (an axis needs a value for every line), and said so.
    assert comparison.runs_drawn == 2 and comparison.runs_left_out == 1
    assert comparison.color is not None and comparison.color.label == "loss"


def test_collect_runs_finds_single_runs_and_the_job_but_not_its_ranks(base: Base) -> None:
    runs = collect_runs(base.path)
    assert sorted(run.name for run in runs) == base.runs
    job = next(run for run in runs if run.name == base.job)
    assert sorted(job.rank_dirs) == [0, 1]
    assert job.verdicts["job/straggler_rank"] == 1
    assert all(not run.is_job for run in runs if run.name != base.job)
    assert all(run.lineage is not None for run in runs)


def test_a_merges_notes_are_no_hyper_parameter_axes() -> None:
    notes = {
        "ranks_reported": 2,
        "ranks_expected": 2,
        "ranks_missing": "",
        "disagreements": "",
        "loss_min": 0.1,
        "loss_max": 0.3,
        "metric_accuracy_min": 0.8,
        "hidden": 64,
    }
    runs = [
        run("a", {"learning_rate": 0.1, "loss": 0.2}, user_defined={**notes, "seed": 1}, ranks=2),
        run(
            "b",
            {"learning_rate": 0.2, "loss": 0.4},
            user_defined={**notes, "loss_min": 0.35, "seed": 2},
            ranks=2,
        ),
    ]
    comparison = comparison_axes(runs)
    assert [axis.label for axis in comparison.axes] == [
        "learning_rate",
        "user_defined/seed",
        "loss",
    ]
    assert "user_defined/hidden" in comparison.constant
    # The table still shows them: they say how the merge went.
    assert "user_defined/loss_min" in [column.name for column in build_table(runs).columns]


def test_a_run_is_left_out_only_for_an_axis_that_is_drawn_and_the_note_names_it() -> None:
    # private: the report page's HTML pieces, no public door
    from rankscribe.lineage.report._page import _comparison_html

    runs = [
        run("a", {"learning_rate": 0.1, "loss": 0.2}, user_defined={"hidden": 64}),
        run("b", {"learning_rate": 0.2, "loss": 0.4}, user_defined={"hidden": 64}),
        run("c", {"learning_rate": 0.3, "loss": 0.5}),  # no user_defined/hidden
        run("d", {"learning_rate": 0.4, "loss": 0.1}),
    ]
    comparison = comparison_axes(runs)
    # hidden is one value wherever it is set: no axis, so it leaves no run out.
    assert [axis.label for axis in comparison.axes] == ["learning_rate", "loss"]
    assert "user_defined/hidden" in comparison.constant
    assert (comparison.runs_drawn, comparison.runs_left_out, comparison.missing) == (4, 0, {})
    assert "not drawn" not in "".join(_comparison_html(runs))

    runs.append(run("e", {"learning_rate": None, "loss": 0.3}))
    runs.append(run("f", {"learning_rate": None, "loss": 0.6}))
    comparison = comparison_axes(runs)
    assert (comparison.runs_drawn, comparison.runs_left_out) == (4, 2)
    assert comparison.missing == {"learning_rate": 2}
    page = "".join(_comparison_html(runs))
    assert "2 runs are not drawn: they lack a value of learning_rate (2 runs)." in page
    assert "one of these axes" not in page
