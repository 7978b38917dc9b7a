"""The lineage index file of a base dir: reading, checking and writing it.

- The index is written with :func:`rankscribe.writer.files.atomic_write`, so a
  reader sees either the old or the new index, never a half-written one, and
  with :func:`rankscribe.writer.files.file_mode` (owner only unless
  ``RANKSCRIBE_GROUP_READABLE`` asks for the group). Readers take no lock.
- Writers take ``.rankscribe-lineage-index.lock`` (a :mod:`filelock` lock,
  of the same mode) so two writers never interleave; a writer that cannot get
  the lock within a short timeout leaves the index alone (its own answer is
  still correct).
- An index that is not valid JSON, has another format version or has a
  malformed entry is ignored with a warning and rebuilt.
- A base dir where the index cannot be written (read-only, full disk) still
  answers queries: the index is an optimisation, never a requirement.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import filelock

from rankscribe.lineage.record._discovery import SummaryDir
from rankscribe.writer.files import atomic_write, file_mode

logger = logging.getLogger(__name__)

__all__ = [
    "INDEX_NAME",
    "LOCK_NAME",
    "Signature",
    "cached_entry",
    "index_signature",
    "load_index",
    "stored_summary",
    "used_graphs",
    "write_index",
]

INDEX_NAME = ".rankscribe-lineage-index.json"
LOCK_NAME = ".rankscribe-lineage-index.lock"
INDEX_FORMAT = "rankscribe-lineage-index"
INDEX_VERSION = 2
LOCK_TIMEOUT_SECONDS = 2.0

Signature = tuple[int, int, int]


def _file_signature(found: os.stat_result) -> Signature:
    return (found.st_ino, found.st_size, found.st_mtime_ns)


def index_signature(base_dir: str) -> Signature | None:
    try:
        return _file_signature(os.stat(os.path.join(base_dir, INDEX_NAME)))
    except OSError:
        return None


def load_index(base_dir: str) -> tuple[dict[str, Any], Signature | None]:
    """The index on disk (``{}`` if there is none or it is unusable) and its signature."""
    path = os.path.join(base_dir, INDEX_NAME)
    try:
        with open(path, "rb") as stream:
            signature = _file_signature(os.fstat(stream.fileno()))
            index = json.loads(stream.read())
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as error:
        logger.warning("ignoring unreadable lineage index %s (%s); rebuilding it", path, error)
        return {}, None
    if (
        not isinstance(index, dict)
        or index.get("format") != INDEX_FORMAT
        or index.get("version") != INDEX_VERSION
        or not isinstance(index.get("runs"), dict)
        or not isinstance(index.get("graphs"), dict)
    ):
        logger.warning("ignoring lineage index %s of another format; rebuilding it", path)
        return {}, None
    return index, signature


def write_index(
    base_dir: str, runs: dict[str, Any], graphs: dict[str, Any]
) -> Signature | None:
    """Write the index; return the signature of the file written, None if not written."""
    index = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "runs": runs, "graphs": graphs}
    path = os.path.join(base_dir, INDEX_NAME)
    try:
        with filelock.FileLock(os.path.join(base_dir, LOCK_NAME), timeout=LOCK_TIMEOUT_SECONDS,
                               mode=file_mode(False)):
            # dumps, not dump: only the one-shot path uses the C encoder.
            text = json.dumps(index, separators=(",", ":"), check_circular=False)
            # Owner read and write (group too when asked): every warm query may rewrite it.
            atomic_write(path, [text.encode("utf-8")], mode=file_mode(False))
            # Under the lock no other writer can replace it before this stat.
            written = _file_signature(os.stat(path, follow_symlinks=False))
    except filelock.Timeout:
        logger.debug("lineage index of %s is being written by another process", base_dir)
    except OSError as error:
        logger.debug("cannot write the lineage index of %s: %s", base_dir, error)
    else:
        return written
    return None


def cached_entry(
    entry: Any, run: SummaryDir, graphs: dict[str, Any]
) -> tuple[dict[str, Any] | None, list[str]] | None:
    """The cached outcome for ``run`` if its key still matches, else None."""
    if not isinstance(entry, dict):
        return None
    key = [list(item.signature) for item in run.lineage_files]
    if entry.get("files") != key:
        return None
    warnings = entry.get("warnings", [])
    if not isinstance(warnings, list):
        return None
    valid, summary = stored_summary(entry.get("lineage"), graphs)
    return (summary, list(warnings)) if valid else None


def stored_summary(
    summary: Any, graphs: dict[str, Any]
) -> tuple[bool, dict[str, Any] | None]:
    """(whether an entry's ``lineage`` is well formed, the summary with its graph dict)."""
    if summary is None:
        return True, None
    if (
        not isinstance(summary, dict)
        or summary.get("graph") not in graphs
        or not isinstance(summary.get("fields"), dict)
        or not isinstance(summary.get("metric"), dict)
        or not isinstance(summary.get("user_defined"), dict)
    ):
        return False, None
    return True, {**summary, "graph_dict": graphs[summary["graph"]]}


def used_graphs(runs: dict[str, Any], graphs: dict[str, Any]) -> dict[str, Any]:
    """The dataset graphs the runs' entries refer to (few: runs share them)."""
    used: dict[str, Any] = {}
    for entry in runs.values():
        lineage = entry["lineage"]
        if lineage is not None and lineage["graph"] not in used:
            used[lineage["graph"]] = graphs[lineage["graph"]]
    return used
