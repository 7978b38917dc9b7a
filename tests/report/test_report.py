"""The report file: self-contained, its charts valid plotly, its numbers the recorded ones."""

from __future__ import annotations

import base64
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pytest

from rankscribe.lineage import merge_run_dir
from rankscribe.lineage.recording import (
    Algorithm,
    HyperParameters,
    TrainLineageInfo,
)
from rankscribe.writer import SummaryRecord, reader
from tests._support.report_page import job_page, page_figures, write_page

from .conftest import JOB_STEPS, SINGLE_RUNS, Base


def decoded(array: Any) -> np.ndarray:
    """A plotly typed array (or a plain list) as NumPy."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
    return np.asarray(array)


def title(figure: dict[str, Any]) -> str:
    return str(figure["layout"].get("title", {}).get("text", ""))


@pytest.fixture(scope="module")
def figures(base: Base, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every figure the page draws for the base, as the page holds it."""
    written = write_page(base.path, tmp_path_factory.mktemp("out") / "report.html")
    return page_figures(written.path.read_text(encoding="utf-8"))


def test_the_page_is_one_private_file_with_plotly_inlined_once(base: Base, tmp_path: Path) -> None:
    written = write_page(base.path, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert written.path == tmp_path / "report.html"
    assert (written.runs, written.jobs, written.single_runs) == (4, 1, 3)
    assert stat.S_IMODE(os.stat(written.path).st_mode) == 0o600
    assert len(re.findall(r"plotly\.js v\d", page)) == 1
    # Nothing is fetched: no script, style or image from anywhere else.
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|<img[^>]+src=", page)
    # (plotly.js names a map server for geo charts; the browser test sees that nothing loads.)
    assert page.count("Plotly.newPlot(") >= 5


def test_the_default_output_is_report_html_in_the_base(base: Base) -> None:
    written = write_page(base.path)
    try:
        assert written.path == base.path / "report.html"
        assert os.path.isfile(written.path)
    finally:
        os.unlink(written.path)


def test_every_chart_is_valid_for_plotly(figures: list[dict[str, Any]]) -> None:
    for figure in figures:
        go.Figure(figure)  # raises ValueError naming any property plotly does not know
    kinds = [figure["data"][0]["type"] for figure in figures]
    assert kinds.count("parcoords") == 1


def test_the_job_loss_is_a_band_with_hidden_rank_curves(figures: list[dict[str, Any]]) -> None:
    loss = next(
        f
        for f in figures
        if title(f) == "loss" and any(trace["name"] == "mean over ranks" for trace in f["data"])
    )
    names = [trace["name"] for trace in loss["data"]]
    assert names == ["min..max", "min..max", "mean over ranks", "rank 0", "rank 1"]
    assert loss["data"][1]["fill"] == "tonexty"
    assert [trace.get("visible") for trace in loss["data"][3:]] == ["legendonly", "legendonly"]
    mean = decoded(loss["data"][2]["y"])
    assert 4 <= len(mean) <= 1000  # 1,500 steps, thinned for drawing
    # The highest point of the job's band is the highest loss any rank recorded.
    assert decoded(loss["data"][1]["y"]).max() == pytest.approx(
        max(decoded(trace["y"]).max() for trace in loss["data"][3:]), rel=1e-6
    )


def test_step_time_marks_the_straggler(figures: list[dict[str, Any]]) -> None:
    chart = next(f for f in figures if title(f).startswith("step time per rank"))
    lead = r"step time per rank: [0-9.]+ [mu]?s a step \([0-9]+%\) lost to straggler rank 1"
    assert re.match(lead, title(chart))
    assert [trace["name"] for trace in chart["data"]] == ["rank 0", "rank 1 (straggler)"]
    assert chart["data"][1]["line"]["color"] == "#d62728"


def test_single_runs_share_one_chart_per_tag(figures: list[dict[str, Any]]) -> None:
    runs_loss = [
        f
        for f in figures
        if title(f) == "loss" and {trace["name"] for trace in f["data"]} == set(SINGLE_RUNS)
    ]
    assert len(runs_loss) == 1
    trace = next(t for t in runs_loss[0]["data"] if t["name"] == "run-sgd")
    assert len(decoded(trace["x"])) == 60  # short: drawn as recorded
    assert runs_loss[0]["layout"]["showlegend"] is True  # few runs: a legend names them


def test_the_curves_are_the_recorded_values(base: Base, figures: list[dict[str, Any]]) -> None:
    recorded = {
        rank: dict(reader.scalars(base.path / base.job / f"rank_{rank}")["loss"]) for rank in (0, 1)
    }
    job_loss = next(
        f
        for f in figures
        if title(f) == "loss" and any(trace["name"] == "mean over ranks" for trace in f["data"])
    )
    curves = {
        (index, trace["name"]): (decoded(trace["x"]).tolist(), decoded(trace["y"]).tolist())
        for index, trace in enumerate(job_loss["data"])
    }
    steps, means = curves[2, "mean over ranks"]
    assert len(recorded[0]) == JOB_STEPS and len(steps) <= 1000
    for step, value in zip(steps, means, strict=True):
        assert value == pytest.approx((recorded[0][step] + recorded[1][step]) / 2)
    for step, value in zip(*curves[1, "min..max"], strict=True):  # the band's upper edge
        assert value == max(recorded[0][step], recorded[1][step])
    assert all(recorded[1][s] == v for s, v in zip(*curves[4, "rank 1"], strict=True))
    runs_loss = next(
        f
        for f in figures
        if title(f) == "loss" and {trace["name"] for trace in f["data"]} == set(SINGLE_RUNS)
    )
    sgd = next(trace for trace in runs_loss["data"] if trace["name"] == "run-sgd")
    drawn = list(zip(decoded(sgd["x"]).tolist(), decoded(sgd["y"]).tolist(), strict=True))
    assert drawn == reader.scalars(base.path / "run-sgd")["loss"]


def test_worker_processes_read_the_same_as_one_process(base: Base, tmp_path: Path) -> None:
    alone = write_page(base.path, tmp_path / "alone.html", "--max-points", "200", "--workers", "1")
    pooled = write_page(base.path, tmp_path / "pool.html", "--max-points", "200", "--workers", "2")
    drawn_alone = page_figures(alone.path.read_text(encoding="utf-8"))
    assert drawn_alone and drawn_alone == page_figures(pooled.path.read_text(encoding="utf-8"))


def test_the_page_shows_verdicts_table_rows_and_the_thinning(base: Base, tmp_path: Path) -> None:
    page = write_page(base.path, tmp_path / "r.html").path.read_text(encoding="utf-8")
    assert re.search(
        r'<li class="flag">[0-9.]+ [mu]?s a step \([0-9]+% of the step\): straggler rank 1, '
        r"its step time \+[0-9]+% over the others&#x27; median",
        page,
    )
    assert "divergence: none (the ranks&#x27; parameters agree)" in page
    body = page.split('<table class="runs" id="runs-table">')[1].split("</table>")[0]
    assert body.count("<tr>") == 1 + 4  # the header and one row per run
    for name in base.runs:
        assert f">{name}<" in body
    assert "Drawn downsampled" in page and "lowest and highest point" in page


def test_a_job_dir_as_base_is_one_job_not_its_ranks(base: Base, tmp_path: Path) -> None:
    written = write_page(base.path / base.job, tmp_path / "job.html")
    assert (written.runs, written.jobs) == (1, 1)


def test_a_planted_link_at_the_output_is_replaced_not_followed(base: Base, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "report.html"
    link.symlink_to(victim)
    write_page(base.path, link)
    assert victim.read_text() == "keep me"
    assert not link.is_symlink() and "<html" in link.read_text(encoding="utf-8")


def write_rank(directory: Path, rank: int, steps: int, *, nan_at: int | None = None) -> None:
    with SummaryRecord(directory / f"rank_{rank}", rank=rank) as record:
        for step in range(1, steps + 1):
            loss = float("nan") if step == nan_at else 1.0 / step
            record.add_value("scalar", "loss", loss)
            # Steps of 0.3 s, each written at once: a rank's last step is where it stopped.
            record.add_value("scalar", "rankscribe/step_time", 0.3)
            record.record(step)


def test_a_stopped_rank_and_a_nan_loss_are_marked_on_the_loss_chart(tmp_path: Path) -> None:
    job = tmp_path / "base" / "job"
    write_rank(job, 0, 300, nan_at=250)
    write_rank(job, 1, 200)
    merge_run_dir(job, world_size=2)
    page = write_page(tmp_path / "base", tmp_path / "r.html").path.read_text("utf-8")
    loss = next(figure for figure in page_figures(page) if title(figure) == "loss")
    go.Figure(loss)
    marks = {
        note["text"]: shape["x0"]
        for note, shape in zip(loss["layout"]["annotations"], loss["layout"]["shapes"], strict=True)
    }
    assert marks == {"non-finite loss: rank 0": 250, "rank 1 stopped": 200}
    # Facts without a cost: marked, but not as alarms in bold red.
    assert '<li class="notice">non-finite loss: rank 0 at step 250</li>' in page
    assert '<li class="notice">stopped first: rank 1 at step 200' in page
    assert 'class="flag"' not in page
    # A NaN makes that step's mean NaN: plotly leaves a gap there.
    mean = next(trace for trace in loss["data"] if trace["name"] == "mean over ranks")
    steps, values = decoded(mean["x"]), decoded(mean["y"])
    assert np.isnan(values[steps.tolist().index(250)])


def test_a_job_not_merged_yet_is_shown_and_says_how_to_merge(tmp_path: Path) -> None:
    job = tmp_path / "base" / "fresh"
    write_rank(job, 0, 50)
    write_rank(job, 1, 50)
    written = write_page(tmp_path / "base", tmp_path / "r.html")
    page = written.path.read_text("utf-8")
    assert (written.runs, written.jobs) == (1, 1)
    assert "this job has no merged lineage yet" in page
    assert f"<code>rankscribe-lineage merge {tmp_path / 'base' / 'fresh'}</code>" in page
    assert ">not merged<" in page


def test_a_caller_with_threads_gets_workers_that_do_not_fork(
    base: Base, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import multiprocessing
    import threading

    # The reading workers' pool is made from multiprocessing.get_context(method): which
    # start methods the report asked for.
    asked: list[str | None] = []
    real_get_context = multiprocessing.get_context

    def get_context(method: str | None = None) -> Any:
        asked.append(method)
        return real_get_context(method)

    monkeypatch.setattr(multiprocessing, "get_context", get_context)
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()
    try:
        written = write_page(
            base.path, tmp_path / "r.html", "--max-points", "200", "--workers", "2"
        )
        assert asked and set(asked) == {"forkserver"}  # never a fork beside another thread
        assert (written.runs, written.jobs) == (4, 1)
        page = written.path.read_text(encoding="utf-8")
        assert all(f">{name}<" in page for name in base.runs)
        assert "rank 1 (straggler)" in page  # both ranks of the job were read
    finally:
        release.set()
        other.join(timeout=10)


def test_verdict_values_of_unexpected_types_do_not_take_the_page_down(tmp_path: Path) -> None:
    from rankscribe.lineage.recording import UserDefinedInfo

    from .conftest import add_lineage

    base = tmp_path / "base"
    with SummaryRecord(base / "odd") as record:
        record.add_value("scalar", "loss", 0.5)
        record.record(1)
        add_lineage(record, "SGD", 0.1, device_num=2, loss=0.5, accuracy=0.9, seed=1)
        record.add_value(
            "custom_lineage_data",
            "job",
            UserDefinedInfo.from_values(
                {
                    "job/straggler_rank": 1,
                    "job/straggler_slowest_share": "n/a",
                    "job/step_time_skew": "x",
                    "job/stopped_first_rank": "zero",
                }
            ).to_proto(),
        )
        record.record(1)
    written = write_page(base, tmp_path / "report.html")
    page = written.path.read_text(encoding="utf-8")
    assert written.runs == 1 and "odd" in page
    # The odd values are shown as recorded in the run's table row.
    assert "n/a" in page


def _loss_markers(page: str) -> list[tuple[str, str]]:
    """The loss chart's marked steps: (label, colour) of each annotation."""
    (figure,) = [f for f in page_figures(page) if f["layout"]["title"]["text"].startswith("loss")]
    return [(note["text"], note["font"]["color"]) for note in figure["layout"]["annotations"]]


def test_only_a_verdict_with_its_cost_is_an_alarm_and_it_leads_with_the_cost(
    tmp_path: Path,
) -> None:
    costed = {
        "job/straggler_cost_seconds": 0.0041,
        "job/straggler_cost_share": 0.33,
        "job/straggler_rank": 1,
        "job/straggler_ranks": "1",
        "job/straggler_timing": "rankscribe/forward_time",
        "job/straggler_excess": 0.5,
        "job/straggler_since_step": 120,
        "job/straggler_persistent": 1,
        "job/straggler_message": "rank 1 costs 4.1 ms a step (33% of the step): forward 1.50x",
        "job/straggler_evidence/1": "SM clock 1.2 GHz (others 1.9 GHz)",
        "job/divergence_check": "checked",
    }
    page = job_page(tmp_path, costed, ranks=2, steps=60, loss=True)
    assert (
        '<li class="flag">4.1 ms a step (33% of the step): straggler rank 1, its forward time '
        "+50% over the others&#x27; median since step 120, chronic</li>"
    ) in page
    assert page.count('class="flag"') == 1  # the evidence is no alarm of its own
    assert "<li>evidence: rank 1: SM clock 1.2 GHz" in page


def test_a_straggler_without_a_cost_is_no_alarm(tmp_path: Path) -> None:
    """A lineage merged before costs were recorded: its verdict is listed plainly."""
    older = {
        "job/straggler_rank": 3,
        "job/straggler_ranks": "3",
        "job/straggler_slowest_share": 0.8,
        "job/straggler_excess": 0.25,
        "job/step_time_skew": 1.2,
        "job/diverged_ranks": "2",
        "job/diverged_step/2": 40,
        "job/missing_ranks": "5",
    }
    page = job_page(
        tmp_path / "older", {**older, "job/diverged_first_step": 40}, ranks=2, steps=60, loss=True
    )
    assert 'class="flag"' not in page
    assert "<li>straggler: rank 3 (slowest in 80% of the steps" in page
    assert "(no cost recorded: not judged as an alarm)</li>" in page
    assert '<li class="notice">divergence: rank 2 at step 40</li>' in page
    assert '<li class="notice">missing: rank 5</li>' in page
    # On the loss chart too, the divergence is marked, not in the alarm's red.
    [(label, color)] = _loss_markers(page)
    assert label == "diverged: rank 2" and color != "#d62728"
    # A cost of nothing, or a damaged one, is no cost either.
    for index, cost in enumerate((0.0, "n/a", float("nan"))):
        zero = {**older, "job/straggler_cost_seconds": cost, "job/straggler_cost_share": 0.0}
        assert 'class="flag"' not in job_page(
            tmp_path / f"cost{index}", zero, ranks=2, steps=60, loss=True
        )


def test_a_job_without_a_loss_tag_leads_with_the_users_loss_like_tag(tmp_path: Path) -> None:
    job = tmp_path / "base" / "job"
    for rank in range(2):
        with SummaryRecord(job / f"rank_{rank}", rank=rank) as record:
            for step in range(1, 21):
                record.add_value("scalar", "val_loss", 2.0 / step)
                record.add_value("scalar", "train_loss", 1.0 / step)
                record.add_value("scalar", "accuracy", 1.0 - 1.0 / step)
                record.add_value("scalar", "rankscribe/data_wait", 0.001)
                record.add_value("scalar", "rankscribe/step_time", 0.01)
                record.record(step)
    merge_run_dir(job, world_size=2)
    with SummaryRecord(tmp_path / "base" / "timings-only") as record:
        for step in range(1, 11):
            record.add_value("scalar", "rankscribe/data_wait", 0.001)
            record.record(step)
    page = write_page(tmp_path / "base", tmp_path / "r.html").path.read_text("utf-8")
    job_section = page.split('<section id="jobs">')[1].split('<section id="single-runs">')[0]
    # The lead chart is open, the others collapsed, in the documented order.
    assert "<summary>train_loss</summary>" not in job_section
    collapsed = re.findall(r"<summary>([^<]+)</summary>", job_section)
    assert collapsed == ["val_loss", "accuracy", "rankscribe/data_wait", "rankscribe/step_time"]
    assert job_section.index("The line is the mean over the ranks") < job_section.index(
        "step time per rank"
    )
    # RankScribe's own tags never lead: a run of timings alone has every chart collapsed.
    singles = page.split('<section id="single-runs">')[1]
    assert "<summary>rankscribe/data_wait (1 run)</summary>" in singles
    assert singles.count("Plotly.newPlot(") == 1


def test_a_very_long_category_is_shortened_in_its_middle_and_the_margin_holds_it(
    tmp_path: Path,
) -> None:
    names = ["Net" + "Block" * 12 + "Alpha", "Net" + "Block" * 12 + "Omega"]  # 68 characters
    for index, network in enumerate(names):
        with SummaryRecord(tmp_path / "base" / f"run{index}") as record:
            record.add_value("scalar", "loss", 1.0)
            record.record(1)
            train = TrainLineageInfo(
                hyper_parameters=HyperParameters(learning_rate=0.1 * (index + 1)),
                algorithm=Algorithm(network=network, loss=0.5 + index),
            )
            record.add_value("train_lineage", "train", train.to_proto())
            record.record(1)
    page = write_page(tmp_path / "base", tmp_path / "r.html").path.read_text("utf-8")
    drawn = page_figures(page)
    parcoords = next(figure for figure in drawn if figure["data"][0]["type"] == "parcoords")
    go.Figure(parcoords)
    network = parcoords["data"][0]["dimensions"][0]
    assert network["label"] == "network"
    assert network["ticktext"] == [
        "NetBlockBlockBlockB…BlockBlockBlockAlpha",
        "NetBlockBlockBlockB…BlockBlockBlockOmega",
    ]
    assert all(len(text) == 40 for text in network["ticktext"])
    assert parcoords["layout"]["margin"]["l"] >= 40 * 5.1  # the widest label, as Chromium draws it
