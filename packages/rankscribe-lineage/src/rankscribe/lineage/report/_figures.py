"""The report's charts, as plotly figure specifications (plain dicts).

Building ``plotly.graph_objects`` figures validates every property of every
trace in Python, which costs about a millisecond per trace: a base of a
thousand runs draws thousands of traces. The figures are therefore written as
the dicts plotly's own figures serialize to (the schema plotly.js reads), and
handed to ``plotly.io.to_html(..., validate=False)``; the tests check each
kind against plotly's validators. Arrays travel as plotly's base64 typed
arrays (``{"dtype": "f4", "bdata": ...}``, what plotly >= 6 writes for NumPy
arrays itself): a point costs about 11 bytes instead of 30 as JSON text.

Nothing here imports plotly.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.lineage.report._data import DrawnCurve

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "Axis",
    "Marker",
    "band_figure",
    "parcoords_figure",
    "parcoords_margins",
    "runs_figure",
    "short_label",
    "step_time_figure",
    "typed_array",
]

Figure = dict[str, Any]

# D3's category10, plotly's default colour cycle.
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
MEAN_COLOR = "#1f77b4"
BAND_FILL = "rgba(31, 119, 180, 0.18)"
STRAGGLER_COLOR = "#d62728"
UNCOSTED_COLOR = "#ff7f0e"
OTHER_RANK_COLOR = "rgba(120, 120, 120, 0.55)"
_INT32 = np.iinfo(np.int32)


def typed_array(values: npt.NDArray[Any]) -> dict[str, str]:
    """An array as a plotly typed-array spec: int32 steps when they fit, else float64.

    Values become float32: summary scalars are float32 on disk, so nothing
    recorded is lost, and statistics lose nothing a chart could show.
    """
    array = np.asarray(values)
    if array.dtype.kind in "iu":
        fits = len(array) == 0 or (array.min() >= _INT32.min and array.max() <= _INT32.max)
        array = array.astype("<i4") if fits else array.astype("<f8")
    else:
        array = array.astype("<f4")
    dtype = {"i": "i4", "f": "f4" if array.itemsize == 4 else "f8"}[array.dtype.kind]
    return {"dtype": dtype, "bdata": base64.b64encode(array.tobytes()).decode("ascii")}


def _line(curve: DrawnCurve, name: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": typed_array(curve.steps),
        "y": typed_array(curve.values),
        **properties,
    }


def _layout(title: str, y_title: str, *, height: int = 340, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 14}},
        "height": height,
        "margin": {"l": 64, "r": 16, "t": 40, "b": 44},
        "hovermode": "x",
        "xaxis": {"title": {"text": "step"}, "zeroline": False},
        "yaxis": {"title": {"text": y_title}, "zeroline": False},
        "legend": {"orientation": "v"},
        **extra,
    }


@dataclass
class Marker:
    """A vertical line at a step with a label (a verdict: divergence, a stop, a NaN)."""

    step: float
    label: str
    color: str = STRAGGLER_COLOR


def _markers(markers: Sequence[Marker]) -> dict[str, Any]:
    shapes = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": marker.step,
            "x1": marker.step,
            "y0": 0,
            "y1": 1,
            "line": {"color": marker.color, "dash": "dash", "width": 1.5},
        }
        for marker in markers
    ]
    annotations = [
        {
            "x": marker.step,
            "xref": "x",
            "y": 1 - 0.08 * index,
            "yref": "paper",
            "text": marker.label,
            "showarrow": False,
            "xanchor": "left",
            "yanchor": "top",
            "font": {"color": marker.color, "size": 11},
            "bgcolor": "rgba(255, 255, 255, 0.8)",
        }
        for index, marker in enumerate(markers)
    ]
    return {"shapes": shapes, "annotations": annotations}


def band_figure(
    tag: str,
    band: Mapping[str, DrawnCurve],
    ranks: Mapping[int, DrawnCurve],
    markers: Sequence[Marker] = (),
) -> Figure:
    """A job's tag: the cross-rank mean within min..max, and each rank's curve on demand.

    The ranks' curves start hidden (``visible: "legendonly"``): a click on a
    rank in the legend shows it.
    """
    traces: list[dict[str, Any]] = [
        _line(
            band["min"],
            "min..max",
            line={"width": 0, "color": MEAN_COLOR},
            legendgroup="band",
            showlegend=False,
            hoverinfo="skip",
        ),
        _line(
            band["max"],
            "min..max",
            line={"width": 0, "color": MEAN_COLOR},
            fill="tonexty",
            fillcolor=BAND_FILL,
            legendgroup="band",
            hoverinfo="skip",
        ),
        _line(band["mean"], "mean over ranks", line={"width": 2, "color": MEAN_COLOR}),
    ]
    for index, (rank, curve) in enumerate(sorted(ranks.items())):
        traces.append(
            _line(
                curve,
                f"rank {rank}",
                visible="legendonly",
                line={"width": 1, "color": PALETTE[(index + 1) % len(PALETTE)]},
            )
        )
    return {"data": traces, "layout": _layout(tag, tag, **_markers(markers))}


def step_time_figure(
    ranks: Mapping[int, DrawnCurve], straggler: int | None, title: str, *, alarm: bool = True
) -> Figure:
    """Each rank's step time; the straggler drawn on top, the others grey.

    The straggler is red when its verdict is an alarm (it has a cost), orange when
    the lineage records no cost for it.
    """
    traces: list[dict[str, Any]] = []
    for rank, curve in sorted(ranks.items(), key=lambda item: item[0] == straggler):
        if rank == straggler:
            color = STRAGGLER_COLOR if alarm else UNCOSTED_COLOR
            traces.append(
                _line(curve, f"rank {rank} (straggler)", line={"width": 1.5, "color": color})
            )
        else:
            color = OTHER_RANK_COLOR if straggler is not None else PALETTE[rank % len(PALETTE)]
            traces.append(_line(curve, f"rank {rank}", line={"width": 1, "color": color}))
    return {"data": traces, "layout": _layout(title, "step time (s)")}


def runs_figure(tag: str, runs: Mapping[str, DrawnCurve], *, legend: bool) -> Figure:
    """One tag of several single-process runs, one line per run."""
    traces = [
        _line(
            curve,
            name,
            line={"width": 1.2, "color": PALETTE[index % len(PALETTE)]},
            hovertemplate="%{y:.5g} at step %{x}<extra>%{fullData.name}</extra>",
        )
        for index, (name, curve) in enumerate(runs.items())
    ]
    return {
        "data": traces,
        "layout": _layout(tag, tag, height=380, showlegend=legend, hovermode="closest"),
    }


@dataclass
class Axis:
    """One axis of the parallel coordinates: a number per run drawn."""

    label: str
    values: list[float]
    #: For a text field: the text of each integer code.
    categories: list[str] | None = None


#: Parallel coordinates' text, measured in Chromium: tick labels ~5.1 px a character
#: (plotly's 10 px font), axis titles ~5.2 px; a little more, so nothing is cut.
_TICK_CHARACTER_PX = 5.6
_TITLE_CHARACTER_PX = 5.8
#: A category longer than this is shortened in its middle ("DistilBertFor…Classification").
MAX_TICK_CHARACTERS = 40
_PARCOORDS_MARGIN = 80


def short_label(text: str, limit: int = MAX_TICK_CHARACTERS) -> str:
    """``text`` cut to ``limit`` characters in its middle, where names differ least."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head) :]}"


def _tick_texts(axis: Axis) -> list[str]:
    if axis.categories is not None:
        return [short_label(text) for text in axis.categories]
    # Numbers: plotly's ticks are at most a handful of characters; the extremes say how many.
    return [f"{value:.6g}" for value in (min(axis.values, default=0), max(axis.values, default=0))]


def parcoords_margins(axes: Sequence[Axis], color_axis: Axis | None) -> dict[str, int]:
    """Margins that hold the first axis's tick labels and the outer axes' titles.

    Each axis draws its tick labels to its left and its title centred above it: the
    first axis's labels and half of each outer title reach into the margins, which
    plotly does not grow by itself (a long category was cut at the page's edge).
    """
    left = _PARCOORDS_MARGIN
    right = _PARCOORDS_MARGIN
    if axes:
        widest = max((len(text) for text in _tick_texts(axes[0])), default=0)
        left = max(left, round(widest * _TICK_CHARACTER_PX) + 16)
        left = max(left, round(len(axes[0].label) * _TITLE_CHARACTER_PX / 2) + 8)
        half_title = round(len(axes[-1].label) * _TITLE_CHARACTER_PX / 2) + 8
        # The colour bar sits in the right margin, beside the last axis's title.
        right = max(right, half_title + (70 if color_axis is not None else 0))
    return {"l": left, "r": right, "t": 60, "b": 30}


def parcoords_figure(axes: Sequence[Axis], color_axis: Axis | None) -> Figure:
    """Parallel coordinates, one line per run; drag along an axis to select a range."""
    dimensions = []
    for axis in axes:
        dimension: dict[str, Any] = {"label": axis.label, "values": axis.values}
        if axis.categories is not None:
            dimension["tickvals"] = list(range(len(axis.categories)))
            dimension["ticktext"] = [short_label(text) for text in axis.categories]
        dimensions.append(dimension)
    line: dict[str, Any] = {"color": "#1f77b4"}
    if color_axis is not None:
        line = {
            "color": color_axis.values,
            "colorscale": "Viridis",
            "reversescale": True,  # the lowest loss brightest
            "showscale": True,
            "colorbar": {"title": {"text": color_axis.label}},
        }
    trace = {"type": "parcoords", "dimensions": dimensions, "line": line}
    layout = {"height": 420, "margin": parcoords_margins(axes, color_axis)}
    return {"data": [trace], "layout": layout}
