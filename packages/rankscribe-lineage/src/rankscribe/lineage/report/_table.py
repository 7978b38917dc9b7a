"""The runs table and the parallel coordinates' axes, from the runs' lineage fields.

Columns are the fields ``rankscribe-lineage query`` shows (search fields,
``metric/<k>``, ``user_defined/<k>``), except the job view's ``job/...``
keys, which are summed up in one ``verdicts`` column. A column no run has a
value for is left out; the columns whose values differ between runs come
first (what a reader compares), then those every run shares.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rankscribe.lineage._checks import is_number
from rankscribe.lineage._hparams import HPARAM_FIELDS, METRIC_FIELDS, is_merge_note
from rankscribe.lineage._words import counted
from rankscribe.lineage.report._data import RunInfo
from rankscribe.lineage.report._figures import Axis

__all__ = [
    "Cell",
    "Column",
    "Table",
    "build_table",
    "comparison_axes",
    "cost_text",
    "ranks_text",
    "straggler_cost",
    "verdict_summary",
]

#: Text fields with more distinct values than this make no readable axis.
MAX_CATEGORIES = 30
#: The notes a rank merge adds to user_defined (rankscribe.lineage.merge._merge): the ranks'
#: count, their disagreements and the extremes of averaged results. They stay in the
#: table; as hyper-parameter axes they would only repeat the results.
_SECTIONS = ("metric", "user_defined")


@dataclass
class Cell:
    text: str
    #: What the column sorts by: a number, or the text (None sorts last).
    sort_key: float | str | None


@dataclass
class Column:
    name: str
    #: Whether the runs' values differ (None, a missing value, counts as a value).
    differs: bool


@dataclass
class Table:
    columns: list[Column]
    rows: list[list[Cell]]
    runs: list[RunInfo]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _cell(value: Any) -> Cell:
    if is_number(value):
        number = float(value)
        return Cell(_text(value), number if math.isfinite(number) else None)
    text = _text(value)
    return Cell(text, text if value is not None else None)


def _flat(lineage: dict[str, Any] | None) -> dict[str, Any]:
    """A lineage's values by column name (``metric/<k>``, ``user_defined/<k>`` flattened)."""
    if lineage is None:
        return {}
    flat = {name: value for name, value in lineage.items() if name not in _SECTIONS}
    for section in _SECTIONS:
        for key, value in (lineage.get(section) or {}).items():
            flat[f"{section}/{key}"] = value
    return flat


def _lineage_columns(runs: Sequence[RunInfo]) -> list[str]:
    """Field names in the query's order, then metric/<k>, then user_defined/<k>."""
    fields: list[str] = []
    extra: dict[str, list[str]] = {section: [] for section in _SECTIONS}
    for run in runs:
        if run.lineage is None:
            continue
        for name in run.lineage:
            if name in _SECTIONS:
                for key in run.lineage[name] or {}:
                    label = f"{name}/{key}"
                    if not label.startswith("user_defined/job/") and label not in extra[name]:
                        extra[name].append(label)
            elif name != "summary_dir" and name not in fields:
                fields.append(name)
    return fields + extra["metric"] + extra["user_defined"]


def ranks_text(text: Any) -> str:
    """``"2"`` -> ``rank 2``; ``"2,3"`` -> ``ranks 2,3`` (a verdict's list of ranks)."""
    return f"ranks {text}" if "," in str(text) else f"rank {text}"


def straggler_cost(verdicts: Mapping[str, Any]) -> tuple[float, float] | None:
    """The costliest straggler's cost: (seconds per step, share of the step), or None.

    None when the lineage records no cost (merged before costs were recorded, or a
    damaged value), or a cost of nothing: such a verdict is no alarm.
    """
    seconds = verdicts.get("job/straggler_cost_seconds")
    share = verdicts.get("job/straggler_cost_share")
    if not (is_number(seconds) and is_number(share)):
        return None
    seconds, share = float(seconds), float(share)
    if not (math.isfinite(seconds) and math.isfinite(share)) or seconds <= 0.0:
        return None
    return seconds, share


def costliest_ranks(verdicts: Mapping[str, Any]) -> str:
    """The ranks the costliest straggler verdict names, whose cost and onset the lineage
    keeps: ``"1"``, or ``"2,3"`` for a slow group (``""`` for none).

    A job may name ranks by several timings (``job/straggler_ranks`` holds them all: rank
    0 by its step time and rank 1 by its compute section); the costliest verdict's are the
    ranks named by its timing (``job/straggler_timing/<rank>``). A lineage without the
    per-rank timings gives them all.
    """
    straggler = verdicts.get("job/straggler_rank", -1)
    if not isinstance(straggler, int) or isinstance(straggler, bool) or straggler < 0:
        return ""
    ranks = [item for item in str(verdicts.get("job/straggler_ranks", "")).split(",") if item]
    timing = verdicts.get("job/straggler_timing")
    if any(f"job/straggler_timing/{rank}" in verdicts for rank in ranks):
        ranks = [rank for rank in ranks if verdicts.get(f"job/straggler_timing/{rank}") == timing]
    return ",".join(ranks) if len(ranks) > 1 else str(straggler)


def stragglers_text(ranks: str) -> str:
    """``"1"`` -> ``straggler rank 1``; ``"2,3"`` -> ``stragglers ranks 2,3``."""
    return f"stragglers {ranks_text(ranks)}" if "," in ranks else f"straggler {ranks_text(ranks)}"


def cost_text(verdicts: Mapping[str, Any]) -> str:
    """``4.1 ms a step (33%)``: the costliest straggler's cost ("" when unknown)."""
    cost = straggler_cost(verdicts)
    if cost is None:
        return ""
    seconds, share = cost
    if seconds >= 1.0:
        amount = f"{seconds:.2f} s"
    elif seconds >= 1e-3:
        amount = f"{seconds * 1e3:.1f} ms"
    else:
        amount = f"{seconds * 1e6:.0f} us"
    return f"{amount} a step ({share:.0%})"


def verdict_summary(run: RunInfo) -> str | None:
    """A job's verdicts in a few words; None for a single-process run.

    A straggler is led by its cost (``4.1 ms a step (33%): straggler rank 1``);
    one whose cost the lineage does not record says so.
    """
    if not run.is_job:
        return None
    verdicts = run.verdicts
    if not verdicts:
        return "not merged"
    parts: list[str] = []
    stragglers = str(verdicts.get("job/straggler_ranks", ""))
    cost = cost_text(verdicts)
    worst = costliest_ranks(verdicts)
    named = stragglers_text(worst) if worst else ""
    if named and cost:
        # The cost is the costliest verdict's; a job that names more ranks says which.
        others = f" (stragglers: {ranks_text(stragglers)})" if stragglers not in ("", worst) else ""
        parts.append(f"{cost}: {named}{others}")
    elif named:
        parts.append(f"{named.replace(' ', ': ', 1)} (no cost recorded)")
    if verdicts.get("job/diverged_ranks"):
        parts.append(f"diverged: {ranks_text(verdicts['job/diverged_ranks'])}")
    if verdicts.get("job/nonfinite_loss_ranks"):
        parts.append(f"non-finite loss: {ranks_text(verdicts['job/nonfinite_loss_ranks'])}")
    stopped = verdicts.get("job/stopped_first_rank", -1)
    if isinstance(stopped, int) and stopped >= 0:
        parts.append(f"stopped first: rank {stopped}")
    if verdicts.get("job/missing_ranks"):
        parts.append(f"missing: {ranks_text(verdicts['job/missing_ranks'])}")
    return "; ".join(parts) if parts else "ok"


def build_table(runs: Sequence[RunInfo]) -> Table:
    """The table: ``run``, ``kind``, ``verdicts`` (with jobs), then differing columns first."""
    values: dict[str, list[Any]] = {
        "run": [run.name for run in runs],
        "kind": [
            f"job, {counted(len(run.rank_dirs), 'rank')}" if run.is_job else "run" for run in runs
        ],
    }
    if any(run.is_job for run in runs):
        values["verdicts"] = [verdict_summary(run) for run in runs]
    fixed = list(values)
    lineage_columns = _lineage_columns(runs)
    flats = [_flat(run.lineage) for run in runs]
    for name in lineage_columns:
        values[name] = [flat.get(name) for flat in flats]
    rendered = {name: [_cell(value) for value in column] for name, column in values.items()}
    differs = {
        name: len({cell.text for cell in cells}) > 1 or len(cells) < 2
        for name, cells in rendered.items()
    }
    present = [name for name in lineage_columns if any(c.text for c in rendered[name])]
    ordered = (
        fixed
        + [name for name in present if differs[name]]
        + [name for name in present if not differs[name]]
    )
    columns = [Column(name, differs[name]) for name in ordered]
    rows = [[rendered[name][index] for name in ordered] for index in range(len(runs))]
    return Table(columns, rows, list(runs))


def _drawable(value: Any) -> bool:
    """A value an axis can place: not missing, not NaN or infinite."""
    if value is None or isinstance(value, (dict, list)):
        return False
    return not isinstance(value, float) or math.isfinite(value)


def _axis(label: str, raw: list[Any]) -> Axis | None:
    """An axis of the values of the runs drawn, or None if they make no usable axis."""
    if all(is_number(v) for v in raw):
        return Axis(label, [float(v) for v in raw])
    texts = [_text(value) for value in raw]
    categories = sorted(set(texts))
    if len(categories) > MAX_CATEGORIES:
        return None
    code = {text: index for index, text in enumerate(categories)}
    return Axis(label, [float(code[text]) for text in texts], categories)


@dataclass
class Comparison:
    """The parallel coordinates: axes, the axis lines are coloured by, and what was left out."""

    axes: list[Axis]
    color: Axis | None
    runs_drawn: int
    runs_left_out: int
    #: Hyper-parameters every run drawn shares (not drawn: a flat axis says nothing).
    constant: list[str]
    #: For each drawn axis some runs lack a value of: how many lack it (those runs
    #: are not drawn); axes that are not drawn never leave a run out.
    missing: dict[str, int] = field(default_factory=dict)


def comparison_axes(runs: Sequence[RunInfo]) -> Comparison:
    """Hyper-parameters that vary, then the final loss and metrics, over the runs with lineage.

    An axis needs a value for every run drawn: fields that fewer than half of
    the runs have are left out, and then so are the runs without a value of
    a remaining field that is drawn (the page names the field and how many).
    A hyper-parameter with one value over the runs that have it, or a field of
    too many categories, is no axis, so a run without it is still drawn.
    """
    with_lineage = [run for run in runs if run.lineage is not None]
    hparams = list(HPARAM_FIELDS)
    metrics = list(METRIC_FIELDS)
    for name in _lineage_columns(with_lineage):
        if name.startswith("user_defined/") and is_merge_note(name.split("/", 1)[1]):
            continue
        if name.startswith("user_defined/") and name not in hparams:
            hparams.append(name)
        elif name.startswith("metric/") and name not in metrics:
            metrics.append(name)

    flats = [_flat(run.lineage) for run in with_lineage]

    def present(name: str) -> list[Any]:
        return [flat[name] for flat in flats if _drawable(flat.get(name))]

    def usable(name: str) -> bool:
        have = len(present(name))
        return have > 0 and 2 * have >= len(flats)

    names = [name for name in hparams + metrics if usable(name)]
    # What would be drawn, judged on the runs that have a value: only these axes
    # may leave a run out.
    constant = [
        name
        for name in names
        if name in hparams and len({_text(value) for value in present(name)}) < 2
    ]
    candidates = [
        name for name in names if name not in constant and _axis(name, present(name)) is not None
    ]
    drawn = [flat for flat in flats if all(_drawable(flat.get(name)) for name in candidates)]
    missing = {
        name: count
        for name in candidates
        if (count := sum(not _drawable(flat.get(name)) for flat in flats))
    }
    axes: list[Axis] = []
    for name in candidates:
        raw = [flat.get(name) for flat in drawn]
        if name in hparams and len({_text(value) for value in raw}) < 2:
            constant.append(name)  # one value among the runs drawn
            continue
        axis = _axis(name, raw)
        if axis is not None:
            axes.append(axis)
    color = next((axis for axis in axes if axis.label == "loss"), None)
    if color is None:
        color = next((axis for axis in axes if axis.label.startswith("metric/")), None)
    return Comparison(
        axes,
        color,
        len(drawn),
        len(flats) - len(drawn),
        [name for name in names if name in constant],
        missing,
    )
