"""The runs table: differing fields first, sort keys, the verdicts column; the comparison axes.

Each test writes runs as training leaves them (their lineage through ``SummaryRecord``),
runs ``rankscribe-lineage report`` and reads the page: the runs table's headers and
cells, the parallel-coordinates chart and the notes under it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from rankscribe.lineage.recording import (
    Algorithm,
    EvalLineageInfo,
    HyperParameters,
    TrainLineageInfo,
    UserDefinedInfo,
)
from rankscribe.writer import SummaryRecord
from tests._support.report_page import page_figures, write_page

from .conftest import Base

_HYPER_PARAMETERS = {"optimizer", "learning_rate", "loss_function", "epoch", "batch_size"}
_ALGORITHM = {"network", "loss"}


def write_run(
    base: Path,
    name: str,
    fields: dict[str, Any],
    *,
    metric: dict[str, Any] | None = None,
    user_defined: dict[str, Any] | None = None,
    ranks: int = 0,
) -> None:
    """A run of ``fields`` (a field set to None is not recorded) in ``base / name``; a job
    when it has ``ranks`` (its ``rank_<n>`` folders beside its merged lineage)."""
    given = {key: value for key, value in fields.items() if value is not None}
    assert set(given) <= _HYPER_PARAMETERS | _ALGORITHM, given
    train = TrainLineageInfo(
        hyper_parameters=HyperParameters(
            **{key: value for key, value in given.items() if key in _HYPER_PARAMETERS}
        ),
        algorithm=Algorithm(**{key: value for key, value in given.items() if key in _ALGORITHM}),
    )
    with SummaryRecord(base / name) as record:
        record.add_value("train_lineage", "train", train.to_proto())
        if metric:
            record.add_value(
                "eval_lineage", "eval", EvalLineageInfo.from_metrics(metric).to_proto()
            )
        if user_defined:
            info = UserDefinedInfo.from_values(user_defined)
            record.add_value("custom_lineage_data", "custom", info.to_proto())
        record.record(1)
    for rank in range(ranks):
        (base / name / f"rank_{rank}").mkdir()


@dataclass(frozen=True)
class Cell:
    text: str
    number: float | None  # data-num: sorted as a number
    sort_text: str | None  # data-text: sorted as text


@dataclass(frozen=True)
class RunsTable:
    names: list[str]  # the columns, in order
    differs: list[bool]  # whether each column differs between the runs
    rows: list[list[Cell]]

    def column(self, name: str) -> list[Cell]:
        return [row[self.names.index(name)] for row in self.rows]


class _TableReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.names: list[str] = []
        self.differs: list[bool] = []
        self.rows: list[list[Cell]] = []
        self._cell: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table" and attributes.get("id") == "runs-table":
            self.inside = True
        elif self.inside and tag in ("th", "td"):
            self._cell, self._text = attributes, []
            if tag == "td" and (not self.rows or len(self.rows[-1]) == len(self.names)):
                self.rows.append([])

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if not self.inside or self._cell is None or tag not in ("th", "td"):
            if tag == "table":
                self.inside = False
            return
        text, attributes, self._cell = "".join(self._text), self._cell, None
        if tag == "th":
            self.names.append(text)
            self.differs.append("same" not in (attributes.get("class") or "").split())
        else:
            number = attributes.get("data-num")
            self.rows[-1].append(
                Cell(text, None if number is None else float(number), attributes.get("data-text"))
            )


@dataclass(frozen=True)
class Page:
    table: RunsTable
    text: str

    @property
    def parcoords(self) -> dict[str, Any]:
        [trace] = [
            trace
            for figure in page_figures(self.text)
            for trace in figure["data"]
            if trace.get("type") == "parcoords"
        ]
        return trace

    @property
    def axes(self) -> list[str]:
        return [dimension["label"] for dimension in self.parcoords["dimensions"]]

    @property
    def lines_drawn(self) -> int:
        return len(self.parcoords["dimensions"][0]["values"])


def report(base: Path, tmp_path: Path) -> Page:
    written = write_page(base, tmp_path / "report.html")
    text = written.path.read_text(encoding="utf-8")
    reader = _TableReader()
    reader.feed(text)
    assert all(len(row) == len(reader.names) for row in reader.rows)
    return Page(RunsTable(reader.names, reader.differs, reader.rows), text)


def test_columns_that_differ_come_first_then_the_shared_ones(tmp_path: Path) -> None:
    base = tmp_path / "base"
    write_run(
        base,
        "a",
        {"network": "MLP", "optimizer": "Adam", "learning_rate": 0.1, "epoch": 3},
        metric={"accuracy": 0.9},
    )
    write_run(
        base,
        "b",
        {"network": "MLP", "optimizer": "SGD", "learning_rate": 0.1, "epoch": 5},
        metric={"accuracy": 0.8},
    )
    table = report(base, tmp_path).table
    assert table.names == [
        "run",
        "kind",
        "optimizer",
        "epoch",
        "metric/accuracy",
        "network",
        "learning_rate",
        "dataset_mark",  # what every run records alike is a shared column too
    ]
    assert table.differs[2:] == [True, True, True, False, False, False]
    assert [cell.text for cell in table.rows[1]][:-1] == [
        "b",
        "run",
        "SGD",
        "5",
        "0.8",
        "MLP",
        "0.1",
    ]
    assert table.rows[0][-1].text == table.rows[1][-1].text


def test_a_missing_value_counts_as_a_difference_and_empty_columns_are_dropped(
    tmp_path: Path,
) -> None:
    base = tmp_path / "base"
    write_run(base, "a", {"optimizer": "Adam", "batch_size": 32, "loss_function": None})
    write_run(base, "b", {"optimizer": "Adam", "batch_size": None, "loss_function": None})
    table = report(base, tmp_path).table
    assert table.names == ["run", "kind", "batch_size", "optimizer", "dataset_mark"]
    assert table.differs[2:] == [True, False, False]
    missing = table.column("batch_size")[1]
    assert missing == Cell("", None, None)  # no text, and no sort key


def test_numbers_sort_as_numbers_and_text_as_text(tmp_path: Path) -> None:
    base = tmp_path / "base"
    write_run(base, "a", {"learning_rate": 1e-05, "optimizer": "Adam"})
    write_run(base, "b", {"learning_rate": 0.5, "optimizer": "SGD"})
    table = report(base, tmp_path).table
    rate = table.column("learning_rate")[0]
    assert rate.number == 1e-05 and rate.text == "1e-05" and rate.sort_text is None
    optimizer = table.column("optimizer")[1]
    assert optimizer.sort_text == "SGD" and optimizer.number is None


def test_jobs_get_a_verdicts_column_and_job_keys_no_columns_of_their_own(tmp_path: Path) -> None:
    verdicts = {
        "job/straggler_rank": 1,
        "job/diverged_ranks": "2,3",
        "job/last_step/0": 100,
        "job/stopped_first_rank": -1,
        "job/missing_ranks": "",
        "note": "x",
    }
    base = tmp_path / "base"
    write_run(base, "job", {"optimizer": "Adam"}, user_defined=verdicts, ranks=4)
    write_run(base, "single", {"optimizer": "SGD"}, user_defined={"note": "y"})
    table = report(base, tmp_path).table
    assert table.names[:3] == ["run", "kind", "verdicts"]
    assert not any(name.startswith("user_defined/job/") for name in table.names)
    assert "user_defined/note" in table.names
    runs = [cell.text for cell in table.column("run")]
    job, single = runs.index("job"), runs.index("single")
    assert table.column("kind")[job].text == "job, 4 ranks"
    assert table.column("verdicts")[job].text == (
        "straggler: rank 1 (no cost recorded); diverged: ranks 2,3"
    )
    assert table.column("verdicts")[single].text == ""


def test_a_job_without_merged_verdicts_says_so(tmp_path: Path) -> None:
    job = tmp_path / "base" / "job"
    with SummaryRecord(job / "rank_0", rank=0) as record:  # a rank, no merged lineage
        record.add_value("scalar", "loss", 0.5)
        record.record(1)
    table = report(tmp_path / "base", tmp_path).table
    assert table.column("verdicts")[0].text == "not merged"


def test_comparison_axes_are_varying_hyper_parameters_then_results(tmp_path: Path) -> None:
    base = tmp_path / "base"
    write_run(
        base,
        "a",
        {"optimizer": "Adam", "learning_rate": 0.1, "network": "MLP", "loss": 0.5},
        metric={"accuracy": 0.9},
    )
    write_run(
        base,
        "b",
        {"optimizer": "SGD", "learning_rate": 0.01, "network": "MLP", "loss": 0.3},
        metric={"accuracy": 0.95},
    )
    write_run(
        base,
        "c",
        {"optimizer": "Adam", "learning_rate": 0.05, "network": "MLP", "loss": None},
        metric={"accuracy": 0.7},
    )
    page = report(base, tmp_path)
    assert page.axes == ["optimizer", "learning_rate", "loss", "metric/accuracy"]
    # What every run records alike (the dataset mark of a run without a graph) too.
    assert '<p class="note">The same in every run drawn: network, dataset_mark.</p>' in page.text
    optimizer = page.parcoords["dimensions"][0]
    assert optimizer["ticktext"] == ["Adam", "SGD"]
    assert optimizer["values"] == [0.0, 1.0]  # a (Adam) and b (SGD), the runs drawn
    # c has no loss: it is left out (an axis needs a value for every line), and said so.
    assert page.lines_drawn == 2
    assert "1 run is not drawn: it lacks a value of loss (1 run)." in page.text
    assert page.parcoords["line"]["colorbar"]["title"]["text"] == "loss"


def test_the_table_holds_the_single_runs_and_the_job_but_not_its_ranks(
    base: Base, tmp_path: Path
) -> None:
    written = write_page(base.path, tmp_path / "report.html")
    assert (written.runs, written.jobs) == (len(base.runs), 1)
    page = report(base.path, tmp_path)
    table = page.table
    runs = [cell.text for cell in table.column("run")]
    assert sorted(runs) == base.runs  # no rank_<n> of the job among them
    kinds = dict(zip(runs, (cell.text for cell in table.column("kind")), strict=True))
    assert kinds.pop(base.job) == "job, 2 ranks"
    assert set(kinds.values()) == {"run"}
    verdicts = dict(zip(runs, (cell.text for cell in table.column("verdicts")), strict=True))
    assert re.search(r"straggler:? rank 1\b", verdicts[base.job]), verdicts[base.job]
    assert "not merged" not in verdicts.values()  # every run has its lineage


def test_a_merges_notes_are_no_hyper_parameter_axes(tmp_path: Path) -> None:
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
    base = tmp_path / "base"
    write_run(
        base, "a", {"learning_rate": 0.1, "loss": 0.2}, user_defined={**notes, "seed": 1}, ranks=2
    )
    write_run(
        base,
        "b",
        {"learning_rate": 0.2, "loss": 0.4},
        user_defined={**notes, "loss_min": 0.35, "seed": 2},
        ranks=2,
    )
    page = report(base, tmp_path)
    assert page.axes == ["learning_rate", "user_defined/seed", "loss"]
    assert "user_defined/hidden" in page.text.split("The same in every run drawn: ", 1)[1]
    # The table still shows them: they say how the merge went.
    assert "user_defined/loss_min" in page.table.names


def test_a_run_is_left_out_only_for_an_axis_that_is_drawn_and_the_note_names_it(
    tmp_path: Path,
) -> None:
    base = tmp_path / "base"
    write_run(base, "a", {"learning_rate": 0.1, "loss": 0.2}, user_defined={"hidden": 64})
    write_run(base, "b", {"learning_rate": 0.2, "loss": 0.4}, user_defined={"hidden": 64})
    write_run(base, "c", {"learning_rate": 0.3, "loss": 0.5})  # no user_defined/hidden
    write_run(base, "d", {"learning_rate": 0.4, "loss": 0.1})
    page = report(base, tmp_path)
    # hidden is one value wherever it is set: no axis, so it leaves no run out.
    assert page.axes == ["learning_rate", "loss"]
    assert "user_defined/hidden" in page.text.split("The same in every run drawn: ", 1)[1]
    assert page.lines_drawn == 4
    assert "not drawn" not in page.text

    write_run(base, "e", {"learning_rate": None, "loss": 0.3})
    write_run(base, "f", {"learning_rate": None, "loss": 0.6})
    page = report(base, tmp_path)
    assert page.lines_drawn == 4
    assert "2 runs are not drawn: they lack a value of learning_rate (2 runs)." in page.text
    assert "one of these axes" not in page.text
