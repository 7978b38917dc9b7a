"""The index cache that makes repeated queries over a base dir cheap.

A query must know every run's lineage, but it need not read again what it
has read. The index, ``.rankscribe-lineage-index.npz`` in the base dir
(its format: :mod:`rankscribe.lineage.index._index_file`), keeps for each run
the searchable summary of its lineage together with what it was computed
from: the name, size, mtime (ns) and inode of each of the run's ``_lineage``
files, the directory's mtime and whether the run is *final* (its lineage and
newest files are read-only, as the writers leave them when they close them).

Freshness (``docs/lineage-queries.md``, "The index"): every time is compared
with the index file's own mtime, which the same file server stamps, never
with this machine's clock (NFS clients' clocks drift).

- A final run whose directory mtime is the indexed one is taken from the
  index after one ``stat`` of its directory and one of each lineage file:
  a file added, removed or renamed moves the directory's mtime, and a file
  copied over in place (``cp`` keeps the inode and the directory's mtime)
  moves the file's ctime (which no one can set back, unlike the mtime).
- A time within ``_SETTLED_NS`` of the index's mtime proves nothing (a
  second change in the same timestamp tick would leave it as it was, as
  git's "racy clean" entries): such a directory is listed again, such a
  lineage file parsed again.
- Any other run is listed, and parsed again when a lineage file's name,
  size, mtime or inode differs from the index's.
- The directories entered that are no run (``runs/digits`` above
  ``runs/digits/version_0``) are kept with their mtimes: the warm path
  checks them with one ``stat`` each.

``tools/bench/cli.py`` measures a warm query against one ``stat`` per run
and a bare import; ``docs/lineage-queries.md`` has the numbers.

Set ``RANKSCRIBE_LINEAGE_INDEX=0`` to neither read nor write the index.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import operator
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rankscribe.lineage.index import _parallel
from rankscribe.lineage.index._fresh_index import unchanged_table
from rankscribe.lineage.index._index_file import (
    INDEX_NAME,
    IndexEntry,
    LoadedIndex,
    index_signature,
    load_index,
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
from rankscribe.lineage.index._run_table import RunTable
from rankscribe.lineage.record._discovery import Pending, SummaryDir, find_runs

logger = logging.getLogger(__name__)

# How much older than the index a time must be to prove that nothing changed
# after it: file systems stamp times at a coarse tick (2 s on FAT and SMB).
_SETTLED_NS = 2_000_000_000
ENVIRONMENT_SWITCH = "RANKSCRIBE_LINEAGE_INDEX"

__all__ = [
    "INDEX_NAME",
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
    """What a scan of a base dir found: the runs with a usable lineage, in base order."""

    table: RunTable
    lineage_file_count: int = 0
    parsed_runs: int = 0
    reused_runs: int = 0

    @property
    def rows(self) -> list[LineageRow]:
        """A row per run (made now: a query that prints columns uses :attr:`table`)."""
        return self.table.rows(range(len(self.table)))


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


# The index last read or written per base dir, by this process. It is used
# only while the file on disk is that very file (same inode, size and mtime:
# the index is replaced whole, never changed in place), so it is never
# stale; it saves decoding the index again in a long-lived process.
_LOADED: dict[str, LoadedIndex] = {}
_LOADED_LIMIT = 2
# Base dirs where writing the index failed: tried again only when something changed.
_UNWRITABLE: set[str] = set()


def forget_scans() -> None:
    """Forget the indexes this process read or wrote: the next query reads the file."""
    _LOADED.clear()
    _UNWRITABLE.clear()


def _current_index(base_dir: str) -> LoadedIndex | None:
    remembered = _LOADED.get(base_dir)
    if remembered is not None and remembered.signature == index_signature(base_dir):
        return remembered
    loaded = load_index(base_dir)
    _remember(base_dir, loaded)
    return loaded


def _remember(base_dir: str, index: LoadedIndex | None) -> None:
    _LOADED.pop(base_dir, None)
    if index is None:
        return
    while len(_LOADED) >= _LOADED_LIMIT:
        _LOADED.pop(next(iter(_LOADED)))
    _LOADED[base_dir] = index


def _files_unchanged(directory: str, entry: IndexEntry, settled_before: int) -> bool:
    """Each indexed lineage file still has its size, times and inode, and had settled."""
    files = entry.files
    for start in range(0, len(files), 5):
        name, size, mtime_ns, inode, ctime_ns = files[start : start + 5]
        if mtime_ns >= settled_before:
            return False
        try:
            found = os.stat(directory + "/" + name, follow_symlinks=False)
        except OSError:
            return False
        if (
            found.st_ctime_ns != ctime_ns
            or found.st_mtime_ns != mtime_ns
            or found.st_size != size
            or found.st_ino != inode
        ):
            return False
    return True


def _flat_signatures(run: SummaryDir) -> list[Any]:
    return [part for item in run.lineage_files for part in item.signature]


@dataclass
class _Scan:
    """One scan's view of the index and what it decided run by run."""

    base_dir: str
    index: LoadedIndex | None
    settled_before: int
    positions: dict[str, int] = field(default_factory=dict)
    entries: list[IndexEntry] = field(default_factory=list)
    prepared: dict[str, Outcome] = field(default_factory=dict)
    graph_memo: dict[bytes, dict[str, Any]] = field(default_factory=dict)
    graph_ids: dict[int, tuple[dict[str, Any], str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.index is not None:
            self.positions, self.entries = self.index.positions, self.index.entries

    def earlier(self, relative_path: str) -> IndexEntry | None:
        position = self.positions.get(relative_path)
        return None if position is None else self.entries[position]

    def reuse(self, relative_path: str, dir_mtime_ns: int) -> IndexEntry | None:
        """A final run's entry if the run is unchanged since it was indexed (two ``stat``)."""
        position = self.positions.get(relative_path)
        if position is None:
            return None
        entry = self.entries[position]
        if (
            not entry.final
            or entry.dir_mtime != dir_mtime_ns
            or dir_mtime_ns >= self.settled_before
            or not _files_unchanged(self.base_dir + relative_path[1:], entry, self.settled_before)
        ):
            return None
        return entry

    def unchanged_summary(self, run: SummaryDir) -> IndexEntry | None:
        """The indexed entry of a listed run whose lineage files are the indexed ones."""
        entry = self.earlier(run.relative_path)
        if entry is None or entry.files != _flat_signatures(run):
            return None
        if any(mtime_ns >= self.settled_before for mtime_ns in entry.files[2::5]):
            return None
        return entry

    def summarize_many(self, pending: list[Pending]) -> list[SummaryDir | None]:
        """Summarize the listed directories; many unknown ones are also parsed, with helpers."""
        unknown = [item for item in pending if self.earlier(item[1]) is None]
        if len(unknown) < _parallel.PARALLEL_FROM_RUNS:
            return [summarized(item) for item in pending]
        done = summarize_and_parse_all(
            unknown,
            lambda job: parse_directory_for_index(job, self.graph_memo, self.graph_ids),
        )
        runs_of: dict[str, SummaryDir | None] = {}
        for (path, relative_path, _), (run, outcome, problem) in zip(unknown, done, strict=True):
            if problem is not None:
                logger.warning("skipping directory %s: %s", path, problem)
            runs_of[relative_path] = run
            if run is not None and outcome is not None:
                self.prepared[relative_path] = outcome
        return [runs_of[item[1]] if item[1] in runs_of else summarized(item) for item in pending]


def _row(base_dir: str, entry: IndexEntry, graphs: dict[str, Any]) -> LineageRow | None:
    summary = entry.summary
    if summary is None:
        return None
    path = entry.path
    graph = summary["graph"]
    # Positional: a row per run of 100,000 is built in every warm query.
    return LineageRow(
        path,
        base_dir + path[1:] if path != "./" else base_dir,
        entry.update_time,
        summary["fields"],
        summary["metric"],
        summary["user_defined"],
        graph,
        graphs[graph],
    )


def _entry(run: SummaryDir, summary: dict[str, Any] | None, warnings: list[str]) -> IndexEntry:
    stored = None
    if summary is not None:
        stored = {key: value for key, value in summary.items() if key != "graph_dict"}
    return IndexEntry(
        path=run.relative_path,
        dir_mtime=run.dir_mtime_ns,
        # Runs with warnings are looked at every time, so that the warning is too.
        final=run.final and run.relative_path != "./" and not warnings,
        create_time=run.create_time,
        update_time=run.update_time_ns,
        files=_flat_signatures(run),
        summary=stored,
        warnings=tuple(warnings),
    )


def _listed_outcomes(
    scan: _Scan, looked_at: list[SummaryDir]
) -> tuple[dict[str, IndexEntry], dict[str, Outcome]]:
    """For the runs that were listed: index entries still good, and parse outcomes of the rest."""
    kept: dict[str, IndexEntry] = {}
    to_parse: list[SummaryDir] = []
    for run in looked_at:
        if run.relative_path in scan.prepared:
            continue
        entry = scan.unchanged_summary(run)
        if entry is not None:
            kept[run.relative_path] = entry
        else:
            to_parse.append(run)
    outcomes = dict(scan.prepared)
    outcomes.update(
        zip(
            (run.relative_path for run in to_parse),
            parse_all(
                [(run.path, run.lineage_files) for run in to_parse],
                lambda job: parse_for_index(job, scan.graph_memo, scan.graph_ids),
            ),
            strict=True,
        )
    )
    return kept, outcomes


@dataclass
class _Found:
    """The rows of a scan, and how they were found."""

    rows: list[LineageRow] = field(default_factory=list)
    lineage_file_count: int = 0
    parsed_runs: int = 0
    reused_runs: int = 0


@dataclass
class _Collected:
    """The rows and the new index entries of a scan, run by run."""

    base_dir: str
    graphs: dict[str, Any]
    result: _Found = field(default_factory=_Found)
    entries: list[IndexEntry] = field(default_factory=list)
    changed: bool = False  # the index on disk must be written again

    def reused(self, entry: IndexEntry) -> None:
        self.result.reused_runs += 1
        self.result.lineage_file_count += len(entry.files) // 5
        self.entries.append(entry)
        row = _row(self.base_dir, entry, self.graphs)
        if row is not None:
            self.result.rows.append(row)

    def listed(self, run: SummaryDir, earlier: IndexEntry | None, outcome: Outcome | None) -> None:
        """A run that was listed: its ``earlier`` entry still good, or its parse ``outcome``."""
        self.result.lineage_file_count += len(run.lineage_files)
        cacheable = True
        if earlier is not None:
            self.result.reused_runs += 1
            summary, warnings = earlier.summary, list(earlier.warnings)
            if summary is not None:
                summary = {**summary, "graph_dict": self.graphs[summary["graph"]]}
        else:
            assert outcome is not None
            self.result.parsed_runs += 1
            summary, warnings, cacheable = outcome
            self.changed = True
        for warning in warnings:
            logger.warning("%s", warning)
        if summary is not None:
            self.graphs[summary["graph"]] = summary["graph_dict"]
            self.result.rows.append(row_of(run, summary))
        if not cacheable:
            return
        entry = _entry(run, summary, warnings)
        if earlier is not None and (entry.final or earlier.final) and entry != earlier:
            self.changed = True  # a run became final, or a final run's entry moved
        self.entries.append(entry)


def _scan(base_dir: str, enabled: bool) -> ScanResult:
    index = _current_index(base_dir) if enabled else None
    if index is not None:
        unchanged = unchanged_table(base_dir, index, index.mtime_ns - _SETTLED_NS)
        if unchanged is not None:
            table, lineage_file_count = unchanged
            return ScanResult(table, lineage_file_count, reused_runs=len(index.document["path"]))
    scan = _Scan(
        base_dir, index, settled_before=index.mtime_ns - _SETTLED_NS if index is not None else 0
    )
    walked = find_runs(base_dir, scan.reuse if index is not None else None, scan.summarize_many)
    runs = walked.runs
    listed = [run for run in runs if not isinstance(run, IndexEntry)]
    kept, outcomes = _listed_outcomes(scan, listed)
    collected = _Collected(base_dir, dict(index.graphs) if index is not None else {})
    for run in runs:
        if isinstance(run, IndexEntry):
            collected.reused(run)
        else:
            collected.listed(run, kept.get(run.relative_path), outcomes.get(run.relative_path))
    found = collected.result
    # Base order: newest update time first, then relative path.
    found.rows.sort(key=operator.attrgetter("relative_path"))
    found.rows.sort(key=operator.attrgetter("update_time_ns"), reverse=True)
    result = ScanResult(
        RunTable.of_rows(base_dir, found.rows),
        found.lineage_file_count,
        found.parsed_runs,
        found.reused_runs,
    )
    if enabled:
        changed = collected.changed or (
            index is not None
            and (
                index.dropped > 0
                or len(collected.entries) != len(index.entries)
                or walked.containers != index.containers
            )
        )
        if changed or (index is None and base_dir not in _UNWRITABLE):
            _keep(base_dir, collected.entries, collected.graphs, walked.containers)
    return result


def _keep(
    base_dir: str, entries: list[IndexEntry], graphs: dict[str, Any], containers: dict[str, int]
) -> None:
    """Write the index; remember a base dir where that fails (not tried again unchanged)."""
    written = write_index(base_dir, entries, graphs, containers)
    if written is None:
        _UNWRITABLE.add(base_dir)
    else:
        _UNWRITABLE.discard(base_dir)
    _remember(base_dir, written)
