"""One run as the index and a query see it: its searchable summary and its row.

The summary of a run (:func:`summarize_run`) is what the index stores; a
:class:`LineageRow` is what a query filters and sorts. Parsing a run for the
index (:func:`parse_for_index`, :func:`parse_directory_for_index`) is here
too: the helper processes of a cold scan (:mod:`rankscribe.lineage.index._parallel`)
import only this module.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rankscribe.lineage.index._parallel import DirectoryJob, DirectoryOutcome, Job, Outcome
from rankscribe.lineage.record._discovery import Pending, SummaryDir, summarize_dir
from rankscribe.lineage.record._fields import FIELD_MAPPING

if TYPE_CHECKING:
    from rankscribe.lineage.record._parser import ParsedRun, RunLineage

logger = logging.getLogger(__name__)

__all__ = [
    "LineageRow",
    "graph_id_of",
    "parse_directory_for_index",
    "parse_for_index",
    "row_of",
    "summarize_run",
    "summarized",
    "value_getter",
]

# The searchable fields a row keeps (summary_dir and dataset_mark are per query).
_ROW_FIELDS = tuple(name for name in FIELD_MAPPING if name not in ("summary_dir", "dataset_mark"))


@dataclass(slots=True)
class LineageRow:
    """One run as a query sees it: searchable values and what a result shows."""

    relative_path: str
    summary_dir: str
    update_time_ns: int
    fields: dict[str, Any]
    metric: dict[str, Any]
    user_defined: dict[str, Any]
    graph_id: str
    dataset_graph: dict[str, Any]
    dataset_mark: str = ""

    def value(self, name: str) -> Any:
        """The value of a FIELD_MAPPING name, ``metric/<k>`` or ``user_defined/<k>``."""
        if name == "summary_dir":
            return self.summary_dir
        if name == "dataset_mark":
            return self.dataset_mark
        if name.startswith("metric/"):
            return self.metric.get(name[len("metric/") :])
        if name.startswith("user_defined/"):
            return self.user_defined.get(name[len("user_defined/") :])
        return self.fields.get(name)


def value_getter(name: str) -> Callable[[LineageRow], Any]:
    """``LineageRow.value`` for one name, decided once (a query asks it of every row)."""
    if name == "summary_dir":
        return operator.attrgetter("summary_dir")
    if name == "dataset_mark":
        return operator.attrgetter("dataset_mark")
    if name.startswith("metric/"):
        metric_key = name[len("metric/") :]
        return lambda row: row.metric.get(metric_key)
    if name.startswith("user_defined/"):
        user_key = name[len("user_defined/") :]
        return lambda row: row.user_defined.get(user_key)
    return lambda row: row.fields.get(name)


def graph_id_of(graph: dict[str, Any]) -> str:
    """A stable id of a dataset graph dict: equal graphs share it."""
    canonical = json.dumps(graph, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.blake2b(canonical.encode(), digest_size=12).hexdigest()


def summarize_run(
    lineage: RunLineage, graph_ids: dict[int, tuple[dict[str, Any], str]] | None = None
) -> dict[str, Any]:
    """The JSON-ready searchable summary of a run that the index stores.

    ``graph_ids`` remembers the ids of the graph dicts seen in one scan; it
    holds each dict too, so that no other object can take its ``id``.
    """
    fields: dict[str, Any] = {}
    for name in _ROW_FIELDS:
        section, key = FIELD_MAPPING[name]
        value = lineage.section(section).get(key) if key else None
        if value is not None:  # absent means None: keeps the index small
            fields[name] = value
    graph = lineage.section("dataset_graph")
    known = graph_ids.get(id(graph)) if graph_ids is not None else None
    if known is not None:
        graph_id = known[1]
    else:
        graph_id = graph_id_of(graph)
        if graph_ids is not None and graph:
            graph_ids[id(graph)] = (graph, graph_id)
    return {
        "fields": fields,
        "metric": lineage.section("metric"),
        "user_defined": lineage.section("user_defined"),
        "graph": graph_id,
        "graph_dict": graph,
    }


def parse_for_index(
    job: Job,
    graph_memo: dict[bytes, dict[str, Any]],
    graph_ids: dict[int, tuple[dict[str, Any], str]],
) -> Outcome:
    """Parse one run for the index: (its summary or None, warnings, whether to cache it)."""
    path, files = job
    parsed = _fold_files()(path, files, graph_memo)
    summary = summarize_run(parsed.lineage, graph_ids) if parsed.lineage is not None else None
    return summary, parsed.warnings, parsed.cacheable


@functools.cache
def _fold_files() -> Callable[..., ParsedRun]:
    # Imported on first use: a warm query, which parses nothing, starts without protobuf.
    from rankscribe.lineage.record._parser import fold_files  # noqa: PLC0415

    return fold_files


def summarized(item: Pending) -> SummaryDir | None:
    """:func:`summarize_dir`, a listing error logged (the run is left out)."""
    path, relative_path, dir_mtime_ns = item
    try:
        return summarize_dir(path, relative_path, dir_mtime_ns)
    except OSError as error:
        logger.warning("skipping directory %s: %s", path, error)
        return None


def parse_directory_for_index(
    job: DirectoryJob,
    graph_memo: dict[bytes, dict[str, Any]],
    graph_ids: dict[int, tuple[dict[str, Any], str]],
) -> DirectoryOutcome:
    """List one run directory and parse its lineage: (run, outcome, listing error)."""
    try:
        run = summarize_dir(*job)
    except OSError as error:
        return None, None, str(error)
    if run is None:
        return None, None, None
    return run, parse_for_index((run.path, run.lineage_files), graph_memo, graph_ids), None


def row_of(run: SummaryDir, summary: dict[str, Any]) -> LineageRow:
    return LineageRow(
        relative_path=run.relative_path,
        summary_dir=run.path,
        update_time_ns=run.update_time_ns,
        fields=summary["fields"],
        metric=summary["metric"],
        user_defined=summary["user_defined"],
        graph_id=summary["graph"],
        dataset_graph=summary["graph_dict"],
    )
