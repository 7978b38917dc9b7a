"""The report in a real browser: Debian's Chromium, headless, driven by playwright.

The page must open from disk with nothing fetched, run without a JavaScript
error, show the runs table (sortable) and plotly charts drawn as SVG, and
look like something: the screenshot is checked not to be blank. Chromium is
Debian's /usr/bin/chromium (``tools/install_chromium.sh`` installs it in the
``report`` tox env); where it cannot be installed the tests skip, saying why.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests._support.report_page import write_page

from .conftest import SINGLE_RUNS, Base

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# plotly.js is 4.8 MB of script to parse; a shared 2-core machine can take a while.
LOAD_TIMEOUT_MS = 180_000
VIEWPORT = {"width": 1400, "height": 1000}


def _why_no_browser() -> str | None:
    if os.access(CHROMIUM, os.X_OK):
        return None
    note = os.environ.get("RANKSCRIBE_CHROMIUM_NOTE", "")
    if note and os.path.isfile(note):
        return Path(note).read_text(encoding="utf-8").strip()
    return (
        f"{CHROMIUM} is missing: tools/install_chromium.sh installs Debian's chromium "
        "package (as root, with apt-get)"
    )


@dataclass
class Loaded:
    page: Any
    errors: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def loaded(base: Base, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    reason = _why_no_browser()
    if reason is not None:
        pytest.skip(reason)
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (the report env installs it)"
    )
    sync_playwright = sync_api.sync_playwright

    # Grouped by optimizer: the groups section is drawn too (test_groups_are_drawn_as_bands).
    output = tmp_path_factory.mktemp("page") / "report.html"
    report = write_page(base.path, output, "--group-by", "optimizer").path
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        # A persistent context is how playwright passes --user-data-dir to the browser.
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=VIEWPORT,
        )
        try:
            page = context.new_page()
            seen = Loaded(page)
            page.on("pageerror", lambda error: seen.errors.append(f"page error: {error}"))
            page.on(
                "console",
                lambda message: (
                    seen.errors.append(f"console {message.type}: {message.text}")
                    if message.type == "error"
                    else None
                ),
            )
            page.on(
                "request",
                lambda request: (
                    None
                    if request.url.startswith(("file:", "data:", "blob:"))
                    else seen.fetched.append(request.url)
                ),
            )
            page.goto(report.as_uri(), wait_until="load", timeout=LOAD_TIMEOUT_MS)
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=LOAD_TIMEOUT_MS)
            yield seen
        finally:
            context.close()


def test_no_javascript_error_and_nothing_fetched(loaded: Loaded) -> None:
    assert loaded.errors == []
    assert loaded.fetched == []


def _column(page: Any, index: int) -> list[str]:
    return list(
        page.eval_on_selector_all(
            "#runs-table tbody tr", f"rows => rows.map(row => row.cells[{index}].textContent)"
        )
    )


def test_the_table_has_a_row_per_run_and_sorts(loaded: Loaded, base: Base) -> None:
    page = loaded.page
    assert sorted(_column(page, 0)) == base.runs
    headers = page.eval_on_selector_all("#runs-table th", "ths => ths.map(th => th.textContent)")
    assert headers[:3] == ["run", "kind", "verdicts"]
    page.click("#runs-table th:text-is('run')")
    assert _column(page, 0) == sorted(base.runs)
    page.click("#runs-table th:text-is('run')")
    assert _column(page, 0) == sorted(base.runs, reverse=True)
    rate = headers.index("learning_rate")
    page.click("#runs-table th:text-is('learning_rate')")
    rates = [float(text) for text in _column(page, rate)]
    assert rates == sorted(rates) and len(set(rates)) == 4  # numbers, not text, order
    assert loaded.errors == []


def test_plotly_drew_the_charts_as_svg(loaded: Loaded) -> None:
    page = loaded.page
    plots = page.locator(".js-plotly-plot").count()
    assert plots >= 6  # compare, the job's loss, step time and its tags, the runs' tags
    drawn = page.eval_on_selector_all(
        ".js-plotly-plot .scatterlayer path.js-line",
        "paths => paths.filter(path => (path.getAttribute('d') || '').length > 100).length",
    )
    assert drawn >= 5
    assert page.locator(".js-plotly-plot .parcoords").count() == 1
    legend = page.eval_on_selector_all(
        "#single-runs .js-plotly-plot .legendtext", "texts => texts.map(t => t.textContent)"
    )
    assert set(SINGLE_RUNS) <= set(legend)


def test_a_rank_curve_appears_when_its_legend_entry_is_clicked(loaded: Loaded) -> None:
    page = loaded.page
    chart = page.locator("#job-0 .js-plotly-plot").first
    visible = (
        "plot => plot.data.map(trace => [trace.name, trace.visible === undefined ? "
        "true : trace.visible])"
    )
    before = dict(chart.evaluate(visible))
    assert before["rank 0"] == "legendonly" and before["mean over ranks"] is True
    entry = chart.locator("g.traces", has=page.locator(".legendtext", has_text="rank 0"))
    entry.locator("rect.legendtoggle").click()  # what a user clicks: the legend entry
    page.wait_for_function(
        "() => document.querySelector('#job-0 .js-plotly-plot').data"
        ".find(trace => trace.name === 'rank 0').visible === true"
    )
    assert dict(chart.evaluate(visible))["rank 1"] == "legendonly"


def test_a_collapsed_chart_fits_its_width_when_opened(loaded: Loaded) -> None:
    page = loaded.page
    details = page.locator("#job-0 details").first
    details.locator("summary").click()
    plot = details.locator(".js-plotly-plot")
    page.wait_for_function(
        "el => el.getBoundingClientRect().width > 900", arg=plot.element_handle()
    )
    assert plot.locator(".main-svg").first.bounding_box()["width"] > 900


def test_groups_are_drawn_as_bands(loaded: Loaded, tmp_path: Path) -> None:
    """Each group's mean line within a filled min..max band, one colour per group."""
    page = loaded.page
    rows = page.eval_on_selector_all(
        "#groups-table tbody tr", "rows => rows.map(row => row.cells[0].textContent)"
    )
    assert sorted(rows) == ["Adam", "Momentum", "SGD"]
    chart = page.locator("#groups .js-plotly-plot").first
    traces = chart.evaluate(
        "plot => plot.data.map(trace => [trace.name, trace.fill || '', trace.fillcolor || ''])"
    )
    bands = [trace for trace in traces if trace[1] == "tonexty"]
    assert len(bands) == 3 and len({trace[2] for trace in bands}) == 3
    # The Momentum group (two runs that differ) has a band with an area: a filled SVG path.
    fills = chart.evaluate(
        "plot => Array.from(plot.querySelectorAll('.scatterlayer path.js-fill'))"
        ".map(path => [(path.getAttribute('d') || '').length, getComputedStyle(path).fill])"
    )
    assert any(length > 100 and fill != "none" for length, fill in fills), fills
    legend = chart.evaluate(
        "plot => Array.from(plot.querySelectorAll('.legendtext')).map(t => t.textContent)"
    )
    assert "optimizer=Momentum (2 runs)" in legend
    shot = tmp_path / "groups.png"
    chart.screenshot(path=str(shot))
    image = Image.open(shot).convert("RGB")
    coloured = sum(
        count for count, rgb in image.getcolors(maxcolors=1 << 24) or [] if max(rgb) - min(rgb) > 60
    )
    assert coloured > 2000, coloured
    assert loaded.errors == []


def _colours(path: Path) -> tuple[int, float]:
    image = Image.open(path).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 24) or []
    white = sum(count for count, rgb in colours if min(rgb) >= 250)
    return len(colours), 1 - white / (image.width * image.height)


def test_the_screenshot_shows_the_table_and_a_chart(loaded: Loaded, tmp_path: Path) -> None:
    page = loaded.page
    page.evaluate("window.scrollTo(0, 0)")
    whole = tmp_path / "top.png"
    page.screenshot(path=str(whole))
    colours, inked = _colours(whole)
    assert colours > 200 and inked > 0.05, (colours, inked)
    chart = tmp_path / "loss.png"
    page.locator("#job-0 .js-plotly-plot").first.screenshot(path=str(chart))
    image = Image.open(chart).convert("RGB")
    # The curves and the band are in colour; text, axes and grid are grey or black.
    coloured = sum(
        count for count, rgb in image.getcolors(maxcolors=1 << 24) or [] if max(rgb) - min(rgb) > 60
    )
    assert coloured > 2000, coloured
    assert loaded.errors == []


def _long_names_base(base: Path) -> Path:
    """Three runs whose networks are long names, the first axis of the comparison."""
    from rankscribe.lineage.recording import Algorithm, HyperParameters, TrainLineageInfo
    from rankscribe.writer import SummaryRecord

    networks = [
        "BertForSequenceClassification",
        "DistilBertForSequenceClassification",
        "RobertaForSequenceClassification",
    ]
    for index, network in enumerate(networks):
        with SummaryRecord(base / f"run{index}") as record:
            record.add_value("scalar", "loss", 0.5 + index)
            record.record(1)
            train = TrainLineageInfo(
                hyper_parameters=HyperParameters(learning_rate=0.1 / (index + 1)),
                algorithm=Algorithm(network=network, loss=0.5 + index),
            )
            record.add_value("train_lineage", "train", train.to_proto())
            record.record(1)
    return base


def test_the_parallel_coordinates_labels_are_not_cut(loaded: Loaded, tmp_path: Path) -> None:
    """Each axis's tick labels lie to its left: the first axis's must fit in the page."""
    report = write_page(_long_names_base(tmp_path / "base"), tmp_path / "r.html").path
    page = loaded.page.context.new_page()
    try:
        page.goto(report.as_uri(), wait_until="load", timeout=LOAD_TIMEOUT_MS)
        page.wait_for_selector("#compare .js-plotly-plot .main-svg", timeout=LOAD_TIMEOUT_MS)
        svg, texts = page.evaluate(
            """() => {
              const plot = document.querySelector('#compare .js-plotly-plot');
              const box = plot.querySelector('.main-svg').getBoundingClientRect();
              const texts = Array.from(plot.querySelectorAll('.parcoords text')).map(text => {
                const r = text.getBoundingClientRect();
                return [text.textContent, r.left, r.right];
              });
              return [[box.left, box.right], texts];
            }"""
        )
    finally:
        page.close()
    labels = {text for text, _, _ in texts}
    assert {"network", "DistilBertForSequenceClassification", "learning_rate"} <= labels
    cut = [(text, left, right) for text, left, right in texts if left < svg[0] or right > svg[1]]
    assert cut == [], (svg, cut)
