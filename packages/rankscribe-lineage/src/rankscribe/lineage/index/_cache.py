"""The index cache that makes repeated queries over a base dir cheap.

A query must know every run's lineage, but it need not read again what it
has read. The index, ``.rankscribe-lineage-index.json`` in the base dir, keeps
for each run the searchable summary of its lineage together with what it was
computed from: the name, size and mtime (ns) of each of the run's ``_lineage``
files, in reading order, the directory's mtime and whether the run is final.

A run is *final* when its lineage files and newest files are read-only (the
writers make a file read-only when they close it, and a closed file never
changes again: see :mod:`rankscribe.lineage.record._discovery`) and its directory's
mtime is older than the scan by more than the file system's timestamp tick
could hide. Then only a file added, removed or renamed in the directory can
change the run, and that moves the directory's mtime: a warm query takes a
final run on one ``stat`` of its directory. Any other run is listed and its
lineage files ``stat``-ed each time, and parsed again when one changed. So a
run written or extended after the index was made is seen by the next query.

Measured (tools/bench/lineage.py): a warm top-10 over 10,000 final runs costs
about 4-4.5x one ``os.stat`` per run directory, 1.3 s over 100,000; listing
each run and ``stat``-ing its lineage files instead cost 14x. An index in
SQLite was not needed: what costs is looking at the runs, not reading the
index, and this process keeps its last scan of a base dir in memory (checked
against the file system like the file, and dropped when another process
writes a newer index).

How the index file is written safely (atomically, private, under a lock) is
in :mod:`rankscribe.lineage.index._index_file`; a base dir where it cannot be
written still answers queries.

Set ``RANKSCRIBE_LINEAGE_INDEX=0`` to neither read nor write the index.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rankscribe.lineage.index import _parallel
from rankscribe.lineage.index._index_file import (
    INDEX_NAME,
    LOCK_NAME,
    Signature,
    cached_entry,
    index_signature,
    load_index,
    stored_summary,
    used_graphs,
    write_index,
)
from rankscribe.lineage.index._parallel import Outcome, parse_all, summarize_and_parse_all
from rankscribe.lineage.index._run_summary import (
    LineageRow,
    parse_directory_for_index,
    parse_for_index,
    row_of,
    summarized,
    value_getter,
)
from rankscribe.lineage.record._discovery import (
    LineageFile,
    Pending,
    SummaryDir,
    list_summary_dirs,
)

logger = logging.getLogger(__name__)

# How much older than a scan a directory's mtime must be for its entry to be
# trusted on that mtime alone (file systems stamp times at a coarse tick).
_SETTLED_NS = 2_000_000_000
ENVIRONMENT_SWITCH = "RANKSCRIBE_LINEAGE_INDEX"

__all__ = [
    "INDEX_NAME",
    "LOCK_NAME",
    "LineageRow",
    "ScanResult",
    "cyclic_gc_paused",
    "forget_scans",
    "index_enabled",
    "scan_base_dir",
    "value_getter",
]


@dataclass
class ScanResult:
    """What a scan of a base dir found."""

    rows: list[LineageRow] = field(default_factory=list)
    lineage_file_count: int = 0
    parsed_runs: int = 0
    reused_runs: int = 0


def index_enabled(use_index: bool | None) -> bool:
    if use_index is not None:
        return use_index
    return os.environ.get(ENVIRONMENT_SWITCH, "1").strip().lower() not in ("0", "false", "no")


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cycle collector around a bulk load.

    A scan creates hundreds of thousands of small dicts and lists and no
    reference cycles (refcounting frees everything), yet each allocation burst
    makes the collector traverse every live object again: measured on 10,000
    runs, pausing it takes ~20% off a cold query and ~15% off a warm one. With
    100,000 runs remembered from the last scan, one full collection during a
    query costs more than the query: the query pauses it throughout.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def scan_base_dir(base_dir: str, *, use_index: bool | None = None) -> ScanResult:
    """Return a row for every run under ``base_dir`` that has a usable lineage.

    ``base_dir`` must be a real absolute directory path. Rows come in
    MindInsight's base order: newest ``update_time`` first, then relative path.
    Files that cannot be used are skipped with a warning naming them.
    """
    with cyclic_gc_paused():
        return _scan(base_dir, index_enabled(use_index))


@dataclass
class _Known:
    """What the last scan of a base dir found, kept in memory for the next one."""

    runs: dict[str, Any]
    graphs: dict[str, Any]
    # The index file these match (None: not on disk); another one means another writer.
    on_disk: Signature | None
    # Writing it failed (a read-only base dir): try again only when something changed.
    unwritable: bool = False
    # Final runs ready for reuse: relative path -> (its SummaryDir, its row or None).
    ready: dict[str, tuple[SummaryDir, LineageRow | None]] = field(default_factory=dict)


# The last scans of a few base dirs (this process's memory of them). Each entry
# is checked against the file system before use, like the index on disk, so it
# is never stale; it only saves reading and decoding the index again. It holds
# about 3 KB per run (measured: 30 MB for 10,000 runs); forget_scans() frees it.
_RECENT: dict[str, _Known] = {}
_RECENT_LIMIT = 2


def forget_scans() -> None:
    """Forget what this process remembers of earlier scans: the next reads the index."""
    _RECENT.clear()


def _known(base_dir: str) -> _Known:
    """What the last scan found, or the index on disk if another process wrote a newer one."""
    known = _RECENT.get(base_dir)
    if known is not None and (
        known.on_disk is None or known.on_disk == index_signature(base_dir)
    ):
        return known
    index, signature = load_index(base_dir)
    return _Known(index.get("runs", {}), index.get("graphs", {}), signature)


def _remember(base_dir: str, known: _Known) -> None:
    _RECENT.pop(base_dir, None)
    while len(_RECENT) >= _RECENT_LIMIT:
        _RECENT.pop(next(iter(_RECENT)))
    _RECENT[base_dir] = known


def _ready_run(
    known: _Known, base_dir: str, relative_path: str, dir_mtime_ns: int
) -> tuple[SummaryDir, LineageRow | None] | None:
    """A final run whose directory has not changed since it was indexed, ready to use."""
    ready = known.ready.get(relative_path)
    if ready is not None:
        return ready if ready[0].dir_mtime_ns == dir_mtime_ns else None
    entry = known.runs.get(relative_path)
    if (
        not isinstance(entry, dict)
        or entry.get("final") is not True
        or entry.get("dir_mtime") != dir_mtime_ns
        or "warnings" in entry  # runs with warnings are looked at each time
    ):
        return None
    valid, summary = stored_summary(entry.get("lineage"), known.graphs)
    if not valid:
        return None
    try:
        files = [LineageFile(name, 0, size, mtime) for name, size, mtime in entry["files"]]
        run = SummaryDir(relative_path, base_dir + relative_path[1:], entry["create_time"],
                         entry["update_time"], files, dir_mtime_ns, final=True)
    except (KeyError, TypeError, ValueError):
        return None
    ready = (run, None if summary is None else row_of(run, summary))
    known.ready[relative_path] = ready
    return ready


def _scan(base_dir: str, enabled: bool) -> ScanResult:
    started_ns = time.time_ns()
    known = _known(base_dir) if enabled else _Known({}, {}, on_disk=None)
    new_runs: dict[str, Any] = {}
    new_graphs: dict[str, Any] = {}
    new_ready: dict[str, tuple[SummaryDir, LineageRow | None]] = {}
    changed = False
    result = ScanResult()
    # Runs mostly share a few dataset graphs: convert and hash each once per scan.
    graph_memo: dict[bytes, dict[str, Any]] = {}
    graph_ids: dict[int, tuple[dict[str, Any], str]] = {}

    known_ready = known.ready

    def reuse(relative_path: str, dir_mtime_ns: int) -> SummaryDir | None:
        ready = known_ready.get(relative_path)  # the common case, inline
        if ready is None or ready[0].dir_mtime_ns != dir_mtime_ns:
            ready = _ready_run(known, base_dir, relative_path, dir_mtime_ns)
            if ready is None:
                return None
        new_ready[relative_path] = ready
        return ready[0]

    prepared: dict[str, Outcome] = {}

    def summarize_many(pending: list[Pending]) -> list[SummaryDir | None]:
        return _summarize_many(pending, known, prepared, graph_memo, graph_ids)

    runs = list_summary_dirs(base_dir, reuse if enabled else None, summarize_many)
    # A run reuse() answered for is the one it returned (list_summary_dirs uses it).
    looked_at = [run for run in runs if run.relative_path not in new_ready]
    fresh = [
        run for run in looked_at
        if run.relative_path not in prepared
        and cached_entry(known.runs.get(run.relative_path), run, known.graphs) is None
    ]
    outcomes = dict(zip(
        (run.relative_path for run in fresh),
        parse_all([(run.path, run.lineage_files) for run in fresh],
                  lambda job: parse_for_index(job, graph_memo, graph_ids)),
        strict=True,
    ))
    outcomes.update(prepared)
    for run in runs:
        ready = new_ready.get(run.relative_path)
        if ready is not None:
            result.lineage_file_count += len(run.lineage_files)
            if ready[1] is not None:
                result.rows.append(ready[1])
            continue
        result.lineage_file_count += len(run.lineage_files)
        looked = _look_at(run, known, started_ns, outcomes.get(run.relative_path))
        changed = changed or looked.changed
        if looked.parsed:
            result.parsed_runs += 1
        else:
            result.reused_runs += 1
        if looked.entry is not None:
            new_runs[run.relative_path] = looked.entry
        if looked.summary is not None:
            new_graphs[looked.summary["graph"]] = looked.summary["graph_dict"]
            result.rows.append(row_of(run, looked.summary))
    result.reused_runs += len(new_ready)
    if enabled:
        if looked_at or len(new_ready) != len(known.runs):
            new_runs.update((path, known.runs[path]) for path in new_ready)
            changed = changed or set(known.runs) != set(new_runs)
        else:  # every run known and unchanged (the usual repeat query)
            new_runs = known.runs
        _keep(base_dir, known, _Known(new_runs, {}, None, ready=new_ready), new_graphs, changed)
    return result


def _keep(
    base_dir: str, known: _Known, now: _Known, new_graphs: dict[str, Any], changed: bool
) -> None:
    """Write the index if it changed (or is not on disk) and remember this scan."""
    now.graphs, now.on_disk, now.unwritable = known.graphs, known.on_disk, known.unwritable
    if changed or (now.on_disk is None and not now.unwritable):
        now.graphs = used_graphs(now.runs, {**known.graphs, **new_graphs})
        now.on_disk = write_index(base_dir, now.runs, now.graphs)
        now.unwritable = now.on_disk is None
    _remember(base_dir, now)


def _summarize_many(
    pending: list[Pending],
    known: _Known,
    prepared: dict[str, Outcome],
    graph_memo: dict[bytes, dict[str, Any]],
    graph_ids: dict[int, tuple[dict[str, Any], str]],
) -> list[SummaryDir | None]:
    """Summarize the listed directories; many unknown ones are also parsed, with helpers.

    The outcomes of those parsed go into ``prepared``.
    """
    unknown = [item for item in pending if item[1] not in known.runs]
    if len(unknown) < _parallel.PARALLEL_FROM_RUNS:
        return [summarized(item) for item in pending]
    done = summarize_and_parse_all(
        unknown, lambda job: parse_directory_for_index(job, graph_memo, graph_ids)
    )
    runs_of: dict[str, SummaryDir | None] = {}
    for (path, relative_path, _), (run, outcome, problem) in zip(unknown, done, strict=True):
        if problem is not None:
            logger.warning("skipping directory %s: %s", path, problem)
        runs_of[relative_path] = run
        if run is not None and outcome is not None:
            prepared[relative_path] = outcome
    return [runs_of[item[1]] if item[1] in runs_of else summarized(item) for item in pending]


@dataclass
class _Looked:
    """What looking at one run (not known to be unchanged) gave."""

    summary: dict[str, Any] | None
    entry: dict[str, Any] | None  # None: not to be cached
    parsed: bool
    changed: bool  # the index on disk should be written again

def _look_at(
    run: SummaryDir, known: _Known, started_ns: int, outcome: Outcome | None
) -> _Looked:
    """The run's parsed ``outcome``, or else its cached summary (its files are the same)."""
    earlier = known.runs.get(run.relative_path)
    cached = cached_entry(earlier, run, known.graphs) if outcome is None else None
    if cached is not None:
        summary, warnings = cached
        parsed, cacheable = False, True
    elif outcome is not None:
        summary, warnings, cacheable = outcome
        parsed = True
    else:  # changed since the first look: parse it now
        summary, warnings, cacheable = parse_for_index((run.path, run.lineage_files), {}, {})
        parsed = True
    for warning in warnings:
        logger.warning("%s", warning)
    if not cacheable:
        return _Looked(summary, None, parsed, parsed)
    entry = _index_entry(run, summary, warnings, started_ns)
    # A run still being written changes its times at every look: that alone is
    # not worth writing the index again; becoming final (or a final run's
    # entry changing) is.
    was_final = isinstance(earlier, dict) and earlier.get("final") is True
    changed = parsed or entry["final"] != was_final or (entry["final"] and entry != earlier)
    return _Looked(summary, entry, parsed, changed)

def _index_entry(
    run: SummaryDir, summary: dict[str, Any] | None, warnings: list[str], started_ns: int
) -> dict[str, Any]:
    """The index entry of a run just looked at.

    ``final`` only when the directory's mtime is older than the scan by a
    margin: a file added within the file system's timestamp granularity of
    the listing could leave the mtime as it was.
    """
    stored = None
    if summary is not None:
        stored = {key: value for key, value in summary.items() if key != "graph_dict"}
    # The base dir's own run is never final: its mtime moves with every new run.
    final = (
        run.final
        and run.relative_path != "./"
        and not warnings
        and run.dir_mtime_ns < started_ns - _SETTLED_NS
    )
    entry: dict[str, Any] = {
        "files": [list(item.signature) for item in run.lineage_files],
        "lineage": stored,
        "dir_mtime": run.dir_mtime_ns,
        "final": final,
        "create_time": run.create_time,
        "update_time": run.update_time_ns,
    }
    if warnings:
        entry["warnings"] = warnings
    return entry
