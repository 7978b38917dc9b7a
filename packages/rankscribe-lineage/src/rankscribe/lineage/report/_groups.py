"""The report's groups section: runs side by side across seeds (``--group-by``).

The groups are ``rankscribe-lineage group``'s (``docs/groups.md``): runs that
agree on the keys, best first, a job counted once by its cross-rank mean.
Each group's curves are its per-step statistics over its runs (the job
view's mergeable statistics), drawn per tag as the mean within the min..max
band of the runs, one colour per group; the table gives the loss and each
final metric as mean ± std (min–max) over the runs. The report reads the
runs' files for this itself and writes nothing under ``BASE/_groups``.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rankscribe.lineage._words import counted
from rankscribe.lineage.group._curves import group_statistics
from rankscribe.lineage.group._grouping import GroupedRuns, RunGroup, form_groups
from rankscribe.lineage.report._data import (
    MAX_TAGS,
    DrawnCurve,
    default_workers,
    lead_tag,
    tag_order,
)
from rankscribe.lineage.report._downsample import downsample
from rankscribe.lineage.report._figures import PALETTE, Figure, typed_array

__all__ = ["GroupBands", "GroupsData", "groups_figure", "groups_html", "read_groups"]

#: A group's band colour: its line colour, mostly transparent.
_BAND_ALPHA = 0.18


@dataclass
class GroupBands:
    """One group and its curves to draw: ``tag -> {"mean" | "min" | "max": curve}``."""

    group: RunGroup
    bands: dict[str, dict[str, DrawnCurve]]


@dataclass
class GroupsData:
    grouped: GroupedRuns
    groups: list[GroupBands]


def _thin(steps: Any, values: Any, max_points: int) -> DrawnCurve:
    drawn_steps, drawn_values = downsample(steps, values, max_points)
    return DrawnCurve(drawn_steps, drawn_values, len(steps))


def read_groups(
    base: str | os.PathLike[str], by: Sequence[str], *, max_points: int, workers: int | None
) -> GroupsData:
    """The groups of ``base`` by ``by``, with their bands thinned for drawing."""
    grouped, directories = form_groups(base, list(by))
    statistics = group_statistics(directories, default_workers() if workers is None else workers)
    groups = []
    for index, group in enumerate(grouped.groups):
        tags = statistics.get(index, {})
        group.tags = sorted(tags)
        bands = {
            tag: {
                "mean": _thin(tagged.steps, tagged.mean, max_points),
                "min": _thin(tagged.steps, tagged.minimum, max_points),
                "max": _thin(tagged.steps, tagged.maximum, max_points),
            }
            for tag, tagged in tags.items()
        }
        groups.append(GroupBands(group, bands))
    return GroupsData(grouped, groups)


def _label(group: RunGroup) -> str:
    parts = [
        f"{key}={'(missing)' if value is None else value}" for key, value in group.values.items()
    ]
    return ", ".join(parts) + f" ({len(group.runs)} run{'s' if len(group.runs) != 1 else ''})"


def _rgba(colour: str, alpha: float) -> str:
    red, green, blue = (int(colour[at : at + 2], 16) for at in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, {alpha})"


def groups_figure(tag: str, groups: Sequence[tuple[str, dict[str, DrawnCurve]]]) -> Figure:
    """One tag of several groups: each group's mean within its min..max band, one colour each."""
    traces: list[dict[str, Any]] = []
    for index, (label, band) in enumerate(groups):
        colour = PALETTE[index % len(PALETTE)]
        common = {"type": "scatter", "mode": "lines", "legendgroup": f"group-{index}"}
        traces += [
            {
                **common,
                "name": f"{label}: min..max",
                "x": typed_array(band["min"].steps),
                "y": typed_array(band["min"].values),
                "line": {"width": 0, "color": colour},
                "showlegend": False,
                "hoverinfo": "skip",
            },
            {
                **common,
                "name": f"{label}: min..max",
                "x": typed_array(band["max"].steps),
                "y": typed_array(band["max"].values),
                "line": {"width": 0, "color": colour},
                "fill": "tonexty",
                "fillcolor": _rgba(colour, _BAND_ALPHA),
                "showlegend": False,
                "hoverinfo": "skip",
            },
            {
                **common,
                "name": label,
                "x": typed_array(band["mean"].steps),
                "y": typed_array(band["mean"].values),
                "line": {"width": 2, "color": colour},
            },
        ]
    layout = {
        "title": {"text": tag, "x": 0, "xanchor": "left", "font": {"size": 14}},
        "height": 380,
        "margin": {"l": 64, "r": 16, "t": 40, "b": 44},
        "hovermode": "x",
        "xaxis": {"title": {"text": "step"}, "zeroline": False},
        "yaxis": {"title": {"text": tag}, "zeroline": False},
    }
    return {"data": traces, "layout": layout}


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _table(data: GroupsData) -> Iterator[str]:
    finals: dict[str, None] = {}
    for bands in data.groups:
        finals.update(dict.fromkeys(bands.group.finals))
    names = sorted(finals, key=lambda name: (name != "loss", name))
    header = [*data.grouped.by, "runs", *names]
    yield '<div class="table-wrap"><table class="runs" id="groups-table"><thead><tr>'
    yield "".join(f"<th>{_escape(name)}</th>" for name in header)
    yield "</tr></thead><tbody>"
    for bands in data.groups:
        group = bands.group
        cells = ["(missing)" if value is None else str(value) for value in group.values.values()]
        cells.append(str(len(group.runs)))
        cells += [group.finals[name].text() if name in group.finals else "" for name in names]
        yield "<tr>" + "".join(f"<td>{_escape(cell)}</td>" for cell in cells) + "</tr>"
    yield "</tbody></table></div>"


def groups_html(data: GroupsData, chart: Any) -> Iterator[str]:
    """The section's body: the table, then a chart per tag (the loss open, the others collapsed).

    ``chart`` turns a figure into HTML (the page's own, with its plotly settings).
    """
    by = ", ".join(data.grouped.by)
    yield (
        f'<p class="note">{counted(len(data.groups), "group")} of '
        f"{counted(data.grouped.run_count, 'run')} by "
        f"<code>{_escape(by)}</code>; a job counts as one run (its mean over its ranks). "
        "Values are mean ± std (min–max) over a group's runs; each curve is the group's "
        "mean per step within the min..max band of its runs.</p>"
    )
    yield from _table(data)
    lacking = [bands.group for bands in data.groups if bands.group.missing]
    for group in lacking:
        keys = ", ".join(group.missing)
        yield (
            f'<p class="note">{counted(len(group.runs), "run")} without {_escape(keys)}: '
            "grouped apart, shown as (missing).</p>"
        )
    seen: dict[str, None] = {}
    for bands in data.groups:
        seen.update(dict.fromkeys(bands.bands))
    tags = tag_order(list(seen))[:MAX_TAGS]
    lead = lead_tag(tags)
    for tag in tags:
        drawn = [
            (_label(bands.group), bands.bands[tag]) for bands in data.groups if tag in bands.bands
        ]
        figure = chart(groups_figure(tag, drawn))
        if tag == lead:
            yield figure
        else:
            yield f"<details><summary>{_escape(tag)} ({counted(len(drawn), 'group')})</summary>"
            yield figure + "</details>"
    if len(seen) > len(tags):
        more = len(seen) - len(tags)
        verb = "is" if more == 1 else "are"
        yield f'<p class="note">{counted(more, "more tag")} {verb} not drawn.</p>'
