"""The report's HTML: one self-contained page.

plotly's JavaScript is inlined once in the page head (``get_plotlyjs``), and
each chart is ``plotly.io.to_html(..., include_plotlyjs=False)``, so the file
opens from disk with no network. Besides plotly, the page has a few lines of
script of its own: sorting the table on a header click, and resizing a chart
when the ``<details>`` holding it opens (a chart drawn while hidden has no
width to fit).
"""

from __future__ import annotations

import datetime
import html
import importlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rankscribe.jobview import verdict_lines
from rankscribe.jobview.parts import STEP_TIME_TAG, timing_name
from rankscribe.lineage._words import counted
from rankscribe.lineage.report._data import (
    MAX_TAGS,
    DrawnCurve,
    JobData,
    ReportData,
    lead_tag,
    tag_order,
)
from rankscribe.lineage.report._figures import (
    Figure,
    Marker,
    band_figure,
    parcoords_figure,
    runs_figure,
    step_time_figure,
)
from rankscribe.lineage.report._table import (
    Table,
    build_table,
    comparison_axes,
    cost_text,
    costliest_ranks,
    ranks_text,
    stragglers_text,
)

if TYPE_CHECKING:
    from rankscribe.lineage.report._groups import GroupsData

__all__ = ["render_page"]

#: Runs up to this many get a legend on the single-run charts (beyond, hover names them).
LEGEND_RUNS = 20
#: Names of the tags not drawn that a note lists (the count is always given).
LISTED_TAGS = 1000
#: Cells longer than this are cut by the style; their title holds the whole text.
_LONG_CELL = 30
#: Verdicts that are facts without a cost: marked, never as an alarm (docs/report.md).
_NOTICED = ("divergence: rank", "non-finite loss", "stopped first", "missing")

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       margin: 0 auto; padding: 0 24px 48px; max-width: 1400px; color: #222; }
h1 { font-size: 22px; margin: 20px 0 4px; } h2 { font-size: 18px; margin-top: 32px; }
h3 { font-size: 16px; margin: 24px 0 6px; } .note { color: #555; margin: 4px 0; }
nav a { margin-right: 14px; }
.table-wrap { overflow: auto; max-height: 70vh; border: 1px solid #ddd; }
table.runs { border-collapse: collapse; font-size: 13px; white-space: nowrap; }
table.runs th, table.runs td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: left;
       max-width: 22em; overflow: hidden; text-overflow: ellipsis; }
table.runs th { position: sticky; top: 0; background: #f4f6f8; cursor: pointer;
       user-select: none; }
table.runs th[aria-sort=ascending]::after { content: " \\25B2"; }
table.runs th[aria-sort=descending]::after { content: " \\25BC"; }
table.runs .same { color: #888; }
table.runs th.same { font-weight: normal; }
table.runs td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.runs tr:hover td { background: #fafbe6; }
ul.verdicts { margin: 4px 0 8px; padding-left: 20px; }
ul.verdicts li.flag { color: #b00020; font-weight: 600; }
ul.verdicts li.notice { color: #8a4b00; }
details { margin: 6px 0; } summary { cursor: pointer; color: #1f4e8c; }
.job { border-top: 1px solid #ddd; padding-top: 4px; }
"""

SCRIPT = """
(function () {
  function key(cell) {
    if (cell.hasAttribute("data-num")) { return [0, parseFloat(cell.getAttribute("data-num"))]; }
    if (cell.hasAttribute("data-text")) { return [1, cell.getAttribute("data-text")]; }
    return null;
  }
  document.querySelectorAll("table.runs th").forEach(function (header, column) {
    header.addEventListener("click", function () {
      var table = header.closest("table"), body = table.tBodies[0];
      var ascending = header.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th").forEach(function (th) { th.removeAttribute("aria-sort"); });
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a.cells[column]), y = key(b.cells[column]);
        if (x === null || y === null) { return (x === null) - (y === null); }  // empty last
        var order = x[0] !== y[0] ? x[0] - y[0]
          : x[0] === 0 ? x[1] - y[1] : x[1].localeCompare(y[1], undefined, {numeric: true});
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
  document.querySelectorAll("details").forEach(function (details) {
    details.addEventListener("toggle", function () {
      if (!details.open) { return; }
      details.querySelectorAll(".js-plotly-plot").forEach(function (plot) {
        Plotly.Plots.resize(plot);
      });
    });
  });
})();
"""

_CONFIG = {"responsive": True, "displaylogo": False}


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _chart(figure: Figure) -> str:
    # plotly is the optional extra: imported here, when a page is drawn, never with the package.
    plotly_io = importlib.import_module("plotly.io")
    # The figures are plotly's JSON schema already (see _report_figures); validating
    # every trace in Python would cost more than the rest of the report.
    return str(
        plotly_io.to_html(
            figure, full_html=False, include_plotlyjs=False, validate=False, config=_CONFIG
        )
    )


def _plotly_script() -> str:
    return str(importlib.import_module("plotly.offline").get_plotlyjs())


def _table_html(table: Table, anchors: Mapping[str, str]) -> Iterator[str]:
    yield '<div class="table-wrap"><table class="runs" id="runs-table"><thead><tr>'
    for column in table.columns:
        title = "the same in every run" if not column.differs else "click to sort"
        css = "" if column.differs else ' class="same"'
        yield f'<th{css} title="{title}">{_escape(column.name)}</th>'
    yield "</tr></thead><tbody>"
    for run, row in zip(table.runs, table.rows, strict=True):
        cells = []
        for column, cell in zip(table.columns, row, strict=True):
            classes = [] if column.differs else ["same"]
            if isinstance(cell.sort_key, float):
                attribute = f' data-num="{cell.sort_key!r}"'
                classes.append("num")
                text = cell.text  # a number: nothing to escape
            else:
                text = _escape(cell.text)
                attribute = f' data-text="{text}"' if cell.sort_key is not None else ""
                if len(cell.text) > _LONG_CELL:  # cut by the style: the whole text on hover
                    attribute += f' title="{text}"'
            if column.name == "run" and run.name in anchors:
                text = f'<a href="#{anchors[run.name]}">{text}</a>'
            css = f' class="{" ".join(classes)}"' if classes else ""
            cells.append(f"<td{css}{attribute}>{text}</td>")
        yield "<tr>" + "".join(cells) + "</tr>"
    yield "</tbody></table></div>"


def _thinning_note(curves: Sequence[DrawnCurve], max_points: int) -> str:
    thinned = [curve for curve in curves if curve.recorded > len(curve.steps)]
    if not thinned:
        return ""
    most = max(curve.recorded for curve in thinned)
    return (
        f'<p class="note">Drawn downsampled: {len(thinned)} of these curves '
        f"{'has' if len(thinned) == 1 else 'have'} more "
        f"than {max_points:,} points (up to {most:,}); each bucket of steps keeps its "
        "lowest and highest point.</p>"
    )


def _markers(verdicts: Mapping[str, Any]) -> list[Marker]:
    markers: list[Marker] = []
    diverged = verdicts.get("job/diverged_ranks")
    first = verdicts.get("job/diverged_first_step", -1)
    if diverged and isinstance(first, (int, float)) and first >= 0:
        # A fact without a cost: brown as in the verdicts list; red is kept for a cost.
        markers.append(Marker(first, f"diverged: {ranks_text(diverged)}", "#8a4b00"))
    nonfinite = verdicts.get("job/nonfinite_loss_ranks")
    first = verdicts.get("job/nonfinite_loss_first_step", -1)
    if nonfinite and isinstance(first, (int, float)) and first >= 0:
        markers.append(Marker(first, f"non-finite loss: {ranks_text(nonfinite)}", "#9467bd"))
    stopped = verdicts.get("job/stopped_first_rank", -1)
    step = verdicts.get("job/stopped_first_step", -1)
    if isinstance(stopped, int) and stopped >= 0 and isinstance(step, (int, float)) and step >= 0:
        markers.append(Marker(step, f"rank {stopped} stopped", "#ff7f0e"))
    return markers


def _straggler_line(verdicts: Mapping[str, Any]) -> str | None:
    """The straggler verdict led by its cost, or None when the lineage records no cost."""
    cost = cost_text(verdicts)
    straggler = verdicts.get("job/straggler_rank", -1)
    if not cost or not isinstance(straggler, int) or straggler < 0:
        return None
    # The ranks the cost, timing and onset are of (the line below the verdicts lists
    # every rank named, by any timing).
    named = stragglers_text(costliest_ranks(verdicts))
    timing = verdicts.get("job/straggler_timing")
    what = timing_name(timing) if isinstance(timing, str) and timing else "step time"
    excess = verdicts.get("job/straggler_excess")
    detail = f"its {what}"
    if isinstance(excess, float) and math.isfinite(excess):
        detail += f" {excess:+.0%} over the others' median"
    since = verdicts.get("job/straggler_since_step")
    if isinstance(since, (int, float)) and not isinstance(since, bool) and since >= 0:
        detail += f" since step {since:g}"
    persistent = verdicts.get("job/straggler_persistent")
    if persistent in (0, 1):
        detail += ", chronic" if persistent else ", in bursts"
    return f"{cost.replace(')', ' of the step)')}: {named}, {detail}"


def _verdict_items(verdicts: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The verdicts as ``(css class, sentence)``: bold red only for one that costs time.

    A straggler is led by its cost; one whose cost the lineage does not record
    (merged before costs were, or a damaged value) is listed plainly and says so.
    The verdicts without a cost (divergence, a non-finite loss, a rank that stopped
    first or is missing) are marked as facts, not as alarms.
    """
    items: list[tuple[str, str]] = []
    costed = _straggler_line(verdicts)
    for line in verdict_lines(verdicts):
        if line.startswith("straggler: ") and not line.startswith("straggler: none"):
            if costed is not None:
                items.append(("flag", costed))
            else:
                items.append(("", f"{line} (no cost recorded: not judged as an alarm)"))
        elif line.startswith(_NOTICED):
            items.append(("notice", line))
        else:
            items.append(("", line))
    return items


def _verdicts_html(job: JobData) -> Iterator[str]:
    items = _verdict_items(job.run.verdicts)
    if not items:
        command = f"rankscribe-lineage merge {job.run.shown_path}"
        yield (
            '<p class="note">No job verdicts: this job has no merged lineage yet '
            f"(<code>{_escape(command)}</code> writes it).</p>"
        )
        return
    yield '<ul class="verdicts">'
    for css, line in items:
        attribute = f' class="{css}"' if css else ""
        yield f"<li{attribute}>{_escape(line)}</li>"
    yield "</ul>"


def _tag_chart(job: JobData, tag: str, markers: Sequence[Marker], max_points: int) -> str:
    ranks = {rank: curves[tag] for rank, curves in job.ranks.items() if tag in curves}
    band = job.bands[tag]
    note = _thinning_note([*band.values(), *ranks.values()], max_points)
    caption = (
        '<p class="note">The line is the mean over the ranks, the band their min..max; '
        "click a rank in the legend to draw its own curve.</p>"
    )
    return caption + _chart(band_figure(tag, band, ranks, markers)) + note


def _step_time_html(job: JobData, max_points: int) -> Iterator[str]:
    ranks = {
        rank: curves[STEP_TIME_TAG] for rank, curves in job.ranks.items() if STEP_TIME_TAG in curves
    }
    if not ranks:
        return
    verdicts = job.run.verdicts
    straggler = verdicts.get("job/straggler_rank", -1)
    marked = straggler if isinstance(straggler, int) and straggler >= 0 else None
    cost = cost_text(verdicts)
    if marked is not None:
        excess = verdicts.get("job/straggler_excess")
        timing = verdicts.get("job/straggler_timing", STEP_TIME_TAG)
        if timing not in ("", STEP_TIME_TAG) and isinstance(timing, str):
            # Named by another timing (a collective evens the step times out): say which.
            by = f" (named by its {timing_name(timing)})"
        else:
            by = f", median {excess:+.0%} over the others" if isinstance(excess, float) else ""
        if cost:
            title = f"step time per rank: {cost} lost to straggler rank {marked}{by}"
        else:
            title = f"step time per rank: straggler rank {marked}{by}, no cost recorded"
    else:
        title = "step time per rank: no straggler" if verdicts else "step time per rank"
    yield _chart(step_time_figure(ranks, marked, title, alarm=bool(cost)))
    yield _thinning_note(list(ranks.values()), max_points)


def _job_html(job: JobData, anchor: str, max_points: int) -> Iterator[str]:
    run = job.run
    last_steps = sorted(
        {
            curve.steps[-1].item()
            for curves in job.ranks.values()
            for curve in curves.values()
            if len(curve.steps)
        }
    )
    reach = f", last step {last_steps[-1]}" if last_steps else ""
    yield f'<article class="job" id="{anchor}"><h3>{_escape(run.name)}</h3>'
    where = _escape(run.shown_path)
    yield f'<p class="note">{counted(len(run.rank_dirs), "rank")}{reach}; <code>{where}</code></p>'
    yield from _verdicts_html(job)
    tags = [tag for tag in tag_order(list(job.bands)) if tag != STEP_TIME_TAG]
    markers = _markers(run.verdicts)
    main = lead_tag(tags)
    if main is not None:
        yield _tag_chart(job, main, markers, max_points)
    yield from _step_time_html(job, max_points)
    others = [tag for tag in tags if tag != main]
    if STEP_TIME_TAG in job.bands:
        others.append(STEP_TIME_TAG)  # its band too, after the per-rank chart above
    for tag in others:
        yield f"<details><summary>{_escape(tag)}</summary>"
        yield _tag_chart(job, tag, (), max_points)
        yield "</details>"
    yield from _left_out_html(job.tags_left_out, "of this job")
    if not job.bands:
        yield '<p class="note">No scalar was recorded by any rank.</p>'
    yield "</article>"


def _left_out_html(names: Sequence[str], where: str) -> Iterator[str]:
    """The note naming how many tags are not drawn, and (up to LISTED_TAGS of) their names."""
    if not names:
        return
    yield (
        f'<p class="note">{counted(len(names), "more scalar tag")} {where} '
        f"{'is' if len(names) == 1 else 'are'} not drawn: the page draws {MAX_TAGS} tags "
        "at most. <code>rankscribe-dump</code> or TensorBoard shows every tag.</p>"
    )
    listed = names[:LISTED_TAGS]
    more = f", and {len(names) - len(listed)} more" if len(names) > len(listed) else ""
    yield (
        f"<details><summary>{counted(len(names), 'tag')} not drawn</summary>"
        f'<p class="note">{", ".join(_escape(name) for name in listed)}{more}</p></details>'
    )


def _single_runs_html(data: ReportData) -> Iterator[str]:
    runs = data.single_runs
    seen: dict[str, None] = {}
    for curves in runs.values():
        seen.update(dict.fromkeys(curves))
    tags = tag_order(list(seen))
    lead = lead_tag(tags)
    yield f'<p class="note">{counted(len(runs), "run")}, one line per run'
    yield "; hover a line for its run.</p>" if len(runs) > LEGEND_RUNS else ".</p>"
    for tag in tags:
        curves = {name: run[tag] for name, run in runs.items() if tag in run}
        chart = _chart(runs_figure(tag, curves, legend=len(curves) <= LEGEND_RUNS))
        note = _thinning_note(list(curves.values()), data.max_points)
        if tag == lead:
            yield chart + note
        else:
            yield f"<details><summary>{_escape(tag)} ({counted(len(curves), 'run')})</summary>"
            yield chart + note + "</details>"
    yield from _left_out_html(data.single_tags_left_out, "of these runs")


def _comparison_html(table_runs: Sequence[Any]) -> Iterator[str]:
    comparison = comparison_axes(table_runs)
    if len(comparison.axes) < 2 or comparison.runs_drawn < 2:
        yield (
            '<p class="note">Not enough to compare: parallel coordinates need at least two '
            "runs with lineage and two fields that vary or are results.</p>"
        )
        return
    yield (
        '<p class="note">One line per run: hyper-parameters that vary, then the final loss '
        "and metrics. Drag along an axis to keep only the runs in that range.</p>"
    )
    yield _chart(parcoords_figure(comparison.axes, comparison.color))
    if comparison.runs_left_out:
        lacking = ", ".join(
            f"{_escape(name)} ({counted(count, 'run')})"
            for name, count in comparison.missing.items()
        )
        runs = (
            "run is not drawn: it lacks"
            if comparison.runs_left_out == 1
            else "runs are not drawn: they lack"
        )
        yield (f'<p class="note">{comparison.runs_left_out} {runs} a value of {lacking}.</p>')
    if comparison.constant:
        same = ", ".join(_escape(name) for name in comparison.constant)
        yield f'<p class="note">The same in every run drawn: {same}.</p>'


def render_page(
    data: ReportData, *, title: str | None = None, groups: GroupsData | None = None
) -> Iterator[str]:
    """The page, in pieces (to write as they come); with ``groups``, a groups section."""
    table = build_table(data.runs)
    anchors = {job.run.name: f"job-{index}" for index, job in enumerate(data.jobs)}
    heading = title or f"RankScribe report: {data.base}"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    yield '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    yield '<meta name="viewport" content="width=device-width, initial-scale=1">'
    yield f"<title>{_escape(heading)}</title><style>{STYLE}</style>"
    yield f'<script type="text/javascript">{_plotly_script()}</script></head><body>'
    yield f"<h1>{_escape(heading)}</h1>"
    singles = len(data.runs) - len(data.jobs)
    yield (
        f'<p class="note">{counted(len(data.runs), "run")}: '
        f"{counted(len(data.jobs), 'distributed job')}, {counted(singles, 'single-process run')}. "
        f"Written {stamp}. "
        f"Curves longer than {data.max_points:,} points are drawn downsampled, keeping "
        "the lowest and the highest point of each bucket of steps.</p>"
    )
    yield (
        '<nav><a href="#runs">Runs</a><a href="#compare">Compare</a>'
        + ('<a href="#groups">Groups</a>' if groups is not None else "")
        + '<a href="#jobs">Jobs</a><a href="#single-runs">Single-process runs</a></nav>'
    )
    yield '<section id="runs"><h2>Runs</h2>'
    yield (
        '<p class="note">Columns whose values differ between runs come first; grey ones are '
        "the same in every run. Click a header to sort.</p>"
    )
    yield from _table_html(table, anchors)
    yield '</section><section id="compare"><h2>Hyper-parameters against results</h2>'
    yield from _comparison_html(data.runs)
    if groups is not None:
        from rankscribe.lineage.report._groups import groups_html  # noqa: PLC0415

        yield '</section><section id="groups"><h2>Groups: runs side by side</h2>'
        yield from groups_html(groups, _chart)
    yield '</section><section id="jobs"><h2>Jobs</h2>'
    if not data.jobs:
        yield '<p class="note">No distributed job (a directory with rank_&lt;n&gt; dirs).</p>'
    for job in data.jobs:
        yield from _job_html(job, anchors[job.run.name], data.max_points)
    yield '</section><section id="single-runs"><h2>Single-process runs</h2>'
    if data.single_runs:
        yield from _single_runs_html(data)
    else:
        yield '<p class="note">No single-process run with scalars.</p>'
    yield f"</section><script>{SCRIPT}</script></body></html>\n"
