"""The warm query's path: the whole index still true, checked column by column.

The usual warm query finds that nothing changed. That is decided here in a
few passes over the index's columns (``docs/lineage-queries.md``, "The
index"), without a Python object per run beyond one ``lstat`` of its
directory and one of each lineage file — the same checks, by the same rules,
as the run-by-run path of :mod:`rankscribe.lineage.index._cache`:

- the base dir lists exactly the indexed runs' directories and the
  directories entered that are no run (the containers), and no summary or
  lineage file of its own (the base dir as a run is listed every time);
- every container has its indexed mtime, settled before the index's own
  (the same entries: a run added below it, or removed, would move it);
- every indexed run is final, with no warning and no dropped entry;
- every directory has its indexed mtime, and every lineage file its indexed
  size, mtime, inode and ctime, each mtime settled before the index's own;
- the runs are stored in base order.

Anything else (one run changed, added or removed) answers None, and the
caller takes the run-by-run path, which lists and parses what changed and
writes the index again.
"""

from __future__ import annotations

import array
import contextlib
import functools
import itertools
import operator
import os
import stat
from collections.abc import Callable, Iterator
from typing import Any

from rankscribe.lineage.index._index_encoding import FileColumns
from rankscribe.lineage.index._index_file import LoadedIndex
from rankscribe.lineage.index._run_table import CUSTOM_SECTIONS, RunTable, Sparse
from rankscribe.lineage.record._discovery import NOT_RUN_DIRS

__all__ = ["unchanged_table"]

_FILE_WIDTH = 5


def unchanged_table(
    base_dir: str, index: LoadedIndex, settled_before: int
) -> tuple[RunTable, int] | None:
    """The runs' table and lineage file count if nothing changed since ``index``; else None."""
    document = index.document
    paths: list[str] = document["path"]
    files: FileColumns | list[list[Any]] = document["files"]
    if (
        index.dropped
        or document["warnings"]
        or not all(document["final"])
        or not _in_base_order(document["update_time"], paths)
    ):
        return None
    try:
        with _opened(base_dir) as base:
            names = [path[2:] for path in paths]
            dir_mtimes = document["dir_mtime"]
            unchanged = _base_unchanged(
                base, base_dir, names, dir_mtimes, index.containers, settled_before
            )
            if unchanged:
                unchanged = _files_unchanged(base, base_dir, names, files, settled_before)
    except OSError:  # removed while we looked
        return None
    if not unchanged:
        return None
    if isinstance(files, FileColumns):
        file_count = len(files.names)
    else:
        file_count = sum(map(len, files)) // _FILE_WIDTH
    return _table(base_dir, document, index.graphs), file_count


@contextlib.contextmanager
def _opened(base_dir: str) -> Iterator[int | None]:
    """The base dir open, for ``stat`` relative to it (fewer path lookups); else None."""
    if os.stat not in os.supports_dir_fd or not hasattr(os, "O_DIRECTORY"):
        yield None
        return
    descriptor = os.open(base_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def _lstat(base: int | None, base_dir: str) -> Callable[[str], os.stat_result]:
    """``lstat`` of a path relative to the base dir."""
    if base is None:
        return lambda relative: os.lstat(base_dir + "/" + relative)
    return functools.partial(os.stat, dir_fd=base, follow_symlinks=False)


def _base_unchanged(
    base: int | None,
    base_dir: str,
    names: list[str],
    indexed: list[int],
    containers: dict[str, int],
    settled_before: int,
) -> bool:
    """The base dir lists exactly the indexed runs and containers, each of its indexed mtime.

    One listing of names (no entry objects) and one ``lstat`` per run and
    per container: an entry that is not indexed is looked at alone (a
    directory, or a run file in the base dir itself, sends the query down
    the run-by-run path).
    """
    listed = set(os.listdir(base_dir))
    listed.difference_update(NOT_RUN_DIRS)  # never runs (docs/lineage-queries.md)
    lstat = _lstat(base, base_dir)
    # Deeper runs sit in containers, which the mtimes of the containers vouch for.
    # Without containers every run is in the base dir itself (no pass over the names).
    top = names
    if containers:
        inner = [path[2:] for path in containers]
        top = [name for name in names if "/" not in name]
        top += [name for name in inner if "/" not in name]
        for name, mtime_ns in zip(inner, containers.values(), strict=True):
            state = lstat(name)
            if (
                state.st_mtime_ns != mtime_ns
                or mtime_ns >= settled_before
                or not stat.S_ISDIR(state.st_mode)
            ):
                return False
    extras = listed.difference(top)
    if len(listed) - len(extras) != len(top):  # a run not listed, or indexed twice
        return False
    for extra in extras:
        if stat.S_ISDIR(lstat(extra).st_mode) or "summary." in extra:
            return False  # maybe a run (the run-by-run path decides)
    # Two numbers per run, not a stat result each (fewer objects alive at once).
    found = list(map(_MTIME_AND_MODE, map(lstat, names)))
    mtimes = list(map(operator.itemgetter(0), found))
    return (
        mtimes == indexed
        and max(mtimes, default=0) < settled_before
        and all(map(stat.S_ISDIR, set(map(operator.itemgetter(1), found))))
    )


_MTIME_AND_MODE = operator.attrgetter("st_mtime_ns", "st_mode")
_SIGNATURE = ("st_size", "st_mtime_ns", "st_ino", "st_ctime_ns")
_SIGNATURE_OF = operator.attrgetter(*_SIGNATURE)


def _files_unchanged(
    base: int | None,
    base_dir: str,
    names: list[str],
    files: FileColumns | list[list[Any]],
    settled_before: int,
) -> bool:
    """Each run's lineage files have their indexed signatures, settled before the index."""
    lstat = _lstat(base, base_dir)
    if isinstance(files, FileColumns):
        # One lineage file per run: the four numbers of every file in one array, compared
        # with the indexed one (no Python int kept per value, no stat result kept per file).
        now = array.array(
            "q",
            itertools.chain.from_iterable(
                map(_SIGNATURE_OF, map(lstat, map("{}/{}".format, names, files.names)))
            ),
        )
        return now == files.numbers and max(files.mtimes, default=0) < settled_before

    def current(directory: str, indexed: list[Any]) -> list[Any] | None:
        now: list[Any] = []
        for name in indexed[0::_FILE_WIDTH]:
            state = lstat(directory + "/" + name)
            if state.st_mtime_ns >= settled_before:
                return None
            now += (name, *_SIGNATURE_OF(state))
        return now

    return list(map(current, names, files)) == files


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
