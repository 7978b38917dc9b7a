"""The warm query's path: the whole index still true, checked column by column.

The usual warm query finds that nothing changed. That is decided here in a
few passes over the index's columns (``docs/lineage-queries.md``, "The
index"), without a Python object per run beyond one ``lstat`` of its
directory and one of each lineage file — the same checks, by the same rules,
as the run-by-run path of :mod:`rankscribe.lineage.index._cache`:

- the base dir lists exactly the indexed runs' directories, and no summary
  or lineage file of its own (the base dir as a run is listed every time);
- every indexed run is final, with no warning and no dropped entry;
- every directory has its indexed mtime, and every lineage file its indexed
  size, mtime, inode and ctime, each mtime settled before the index's own;
- the runs are stored in base order.

Anything else (one run changed, added or removed) answers None, and the
caller takes the run-by-run path, which lists and parses what changed and
writes the index again.
"""

from __future__ import annotations

import itertools
import operator
import os
from typing import Any

from rankscribe.lineage.index._index_file import LoadedIndex
from rankscribe.lineage.index._run_table import CUSTOM_SECTIONS, RunTable, Sparse
from rankscribe.lineage.record import _discovery

__all__ = ["unchanged_table"]

_FILE_WIDTH = 5


def unchanged_table(
    base_dir: str, index: LoadedIndex, settled_before: int
) -> tuple[RunTable, int] | None:
    """The runs' table and lineage file count if nothing changed since ``index``; else None."""
    document = index.document
    paths: list[str] = document["path"]
    files: list[list[Any]] = document["files"]
    if (
        index.dropped
        or document["warnings"]
        or not all(document["final"])
        or not _in_base_order(document["update_time"], paths)
        or not _lists_the_indexed_runs(base_dir, paths)
    ):
        return None
    directories = [base_dir + path[1:] for path in paths]
    try:
        unchanged = _directories_unchanged(
            directories, document["dir_mtime"], settled_before
        ) and _files_unchanged(directories, files, settled_before)
    except OSError:  # removed while we looked
        return None
    if not unchanged:
        return None
    file_count = sum(map(len, files)) // _FILE_WIDTH
    return _table(base_dir, document, index.graphs), file_count


def _directories_unchanged(directories: list[str], indexed: list[int], settled_before: int) -> bool:
    lstat = os.lstat
    mtimes = [lstat(directory).st_mtime_ns for directory in directories]
    return mtimes == indexed and max(mtimes, default=0) < settled_before


def _files_unchanged(directories: list[str], files: list[list[Any]], settled_before: int) -> bool:
    """Each run's lineage files have their indexed signatures, settled before the index."""
    lstat = os.lstat
    if all(len(indexed) == _FILE_WIDTH for indexed in files):
        # One lineage file per run (the usual case): one comprehension per property.
        names = [indexed[0] for indexed in files]
        found = list(map(lstat, map("{}/{}".format, directories, names)))
        now = [
            [name, state.st_size, state.st_mtime_ns, state.st_ino, state.st_ctime_ns]
            for name, state in zip(names, found, strict=True)
        ]
        return now == files and max((state.st_mtime_ns for state in found), default=0) < (
            settled_before
        )

    def current(directory: str, indexed: list[Any]) -> list[Any] | None:
        found: list[Any] = []
        for name in indexed[0::_FILE_WIDTH]:
            now = lstat(directory + "/" + name)
            if now.st_mtime_ns >= settled_before:
                return None
            found += (name, now.st_size, now.st_mtime_ns, now.st_ino, now.st_ctime_ns)
        return found

    return list(map(current, directories, files)) == files


def _lists_the_indexed_runs(base_dir: str, paths: list[str]) -> bool:
    """The base dir's subdirectories are the indexed runs, and it holds no run file itself."""
    entries = _discovery.list_entries(base_dir)
    names = {entry.name for entry in entries if entry.is_dir(follow_symlinks=False)}
    if len(names) != len(entries) and any(
        "summary." in entry.name  # maybe a run file: the run-by-run path decides
        for entry in entries
        if not entry.is_dir(follow_symlinks=False)
    ):
        return False
    return len(names) == len(paths) and names == {path[2:] for path in paths}


def _in_base_order(update_times: list[int], paths: list[str]) -> bool:
    """Newest update time first, then relative path (as an index is written)."""
    keys = list(zip(map(operator.neg, update_times), paths, strict=True))
    return all(map(operator.lt, keys, itertools.islice(keys, 1, None)))


def _table(base_dir: str, document: dict[str, Any], graphs: dict[str, Any]) -> RunTable:
    """The table of the indexed runs that have a usable lineage (graph not None)."""
    graph_ids: list[Any] = document["graph"]
    fields: dict[str, list[Any]] = document["fields"]
    custom: dict[str, dict[str, Sparse]] = {
        section: dict(document[section].items()) for section in CUSTOM_SECTIONS
    }
    paths, update_times = document["path"], document["update_time"]
    if None in graph_ids:
        kept = [at for at, graph in enumerate(graph_ids) if graph is not None]
        renumbered = {at: new for new, at in enumerate(kept)}

        def pick(column: list[Any]) -> list[Any]:
            return list(map(column.__getitem__, kept))

        paths, update_times, graph_ids = pick(paths), pick(update_times), pick(graph_ids)
        fields = {name: pick(column) for name, column in fields.items()}
        custom = {
            section: {
                key: (
                    [renumbered[at] for at in positions if at in renumbered],
                    [
                        value
                        for at, value in zip(positions, values, strict=True)
                        if at in renumbered
                    ],
                )
                for key, (positions, values) in keyed.items()
            }
            for section, keyed in custom.items()
        }
    return RunTable(base_dir, paths, update_times, graph_ids, graphs, fields, custom)
