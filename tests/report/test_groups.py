"""The report's groups section (``--group-by``): a band per group, the mean ± std table."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pytest

from rankscribe.lineage import group_runs
from rankscribe.lineage.cli import main
from rankscribe.writer import reader
from tests._support.report_page import page_figures, write_page

from .conftest import JOB, Base


def decoded(array: Any) -> np.ndarray:
    return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))


@pytest.fixture(scope="module")
def drawn(base: Base, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    """The page grouped by optimizer, and every figure it draws (as the page holds them)."""
    output = tmp_path_factory.mktemp("out") / "report.html"
    write_page(base.path, output, "--group-by", "optimizer", "--workers", "1")
    page = output.read_text(encoding="utf-8")
    return page, page_figures(page)


def _groups_figure(figures: list[dict[str, Any]], tag: str) -> dict[str, Any]:
    (figure,) = [
        figure
        for figure in figures
        if figure["layout"].get("title", {}).get("text") == tag
        and any(str(trace.get("name", "")).startswith("optimizer=") for trace in figure["data"])
    ]
    return figure


def test_the_page_has_a_groups_section_with_a_row_per_group(
    drawn: tuple[str, list[dict[str, Any]]],
) -> None:
    page, _ = drawn
    assert '<section id="groups">' in page and '<a href="#groups">' in page
    section = page[
        page.index('id="groups-table"') : page.index("</table>", page.index("groups-table"))
    ]
    rows = section.split("<tr>")[2:]
    cells = [[cell.split("</td>")[0] for cell in row.split("<td>")[1:]] for row in rows]
    assert sorted((row[0], row[1]) for row in cells) == [
        ("Adam", "1"),
        ("Momentum", "2"),
        ("SGD", "1"),
    ]
    momentum = next(row for row in cells if row[0] == "Momentum")
    assert "±" in momentum[2] and "–" in momentum[2]  # the loss: mean ± std (min–max)


def test_each_group_is_a_mean_within_its_band(
    base: Base, drawn: tuple[str, list[dict[str, Any]]]
) -> None:
    _, figures = drawn
    figure = _groups_figure(figures, "loss")
    go.Figure(figure)  # valid for plotly's own validators
    names = [trace["name"] for trace in figure["data"] if trace.get("showlegend", True)]
    assert sorted(names) == [
        "optimizer=Adam (1 run)",
        "optimizer=Momentum (2 runs)",
        "optimizer=SGD (1 run)",
    ]
    bands = [trace for trace in figure["data"] if trace.get("fill") == "tonexty"]
    assert len(bands) == 3
    momentum = [trace for trace in figure["data"] if trace["name"].startswith("optimizer=Momentum")]
    low, high, mean = momentum
    single = dict(reader.scalars(base.path / "run-momentum")["loss"])
    job = dict(reader.scalars(base.path / JOB)["loss/mean"])
    steps, means = decoded(mean["x"]), decoded(mean["y"])
    assert steps[0] == 1
    assert means[0] == pytest.approx((single[1] + job[1]) / 2, rel=1e-6)
    assert decoded(low["y"])[0] == pytest.approx(min(single[1], job[1]), rel=1e-6)
    assert decoded(high["y"])[0] == pytest.approx(max(single[1], job[1]), rel=1e-6)
    # beyond the single run's 60 steps only the job has points: mean = min = max
    late = np.flatnonzero(steps > 100)[0]
    assert means[late] == pytest.approx(job[int(steps[late])], rel=1e-6)


def test_the_report_writes_no_group_files(
    base: Base, drawn: tuple[str, list[dict[str, Any]]]
) -> None:
    assert not (base.path / "_groups").exists()


def test_a_bad_group_key_is_one_line_and_status_1(
    base: Base, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["report", str(base.path), "-o", str(tmp_path / "r.html"), "--group-by", "optimiser"]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "optimiser" in err and "not a key to group by" in err
    assert not (tmp_path / "r.html").exists()


def test_the_report_lists_the_same_runs_beside_the_groups_folder(
    base: Base, tmp_path: Path
) -> None:
    copy = tmp_path / "base"
    shutil.copytree(base.path, copy, symlinks=True)
    before = write_page(copy, tmp_path / "before.html")
    group_runs(copy, by="optimizer")
    assert (copy / "_groups").is_dir()
    after = write_page(copy, tmp_path / "after.html")
    assert (after.runs, after.jobs, after.single_runs) == (before.runs, before.jobs, 3)


def test_one_group_is_counted_in_the_singular(
    base: Base, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Every run has network MLP: one group, "1 group of 5 runs", never "1 groups".
    output = tmp_path_factory.mktemp("one") / "report.html"
    write_page(base.path, output, "--group-by", "network", "--workers", "1")
    page = output.read_text(encoding="utf-8")
    assert f'<p class="note">1 group of {len(base.runs)} runs by <code>network</code>;' in page
    assert "1 groups" not in page and "(1 groups)" not in page
