"""Finding runs and their lineage files (``docs/lineage-queries.md``, "Which directories are runs").

The rule takes MindInsight's SummaryWatcher for what a run is and how runs
are ordered, and TensorBoard's recursive walk of ``--logdir`` for how deep
runs may sit, bounded:

- The base dir itself (``./``) is a run when it holds a run file, and each
  of its immediate subdirectories is looked at (MindInsight's rule: a query
  over a job directory lists the job and its ranks side by side).
- Below that, a directory that is a run is not entered: what is inside a run
  (``rank_<n>`` dirs, checkpoint and export dirs) belongs to it. That is what
  makes a query over ``runs/`` see one row per distributed job: the job's
  merged lineage sits in ``runs/exp1``, the ranks' own files one level down.
- A directory that is not a run is entered, as TensorBoard walks every
  directory below its logdir, down to :data:`MAX_DEPTH` levels below the
  base: Lightning's ``save_dir/name/version_<n>`` is two levels down, one
  more with a ``sub_dir``, and a query over the folder above ``save_dir``
  one more again. MindInsight stops at one level (too shallow for Lightning);
  TensorBoard never stops (a dataset kept beside the runs would be walked
  to its last file).
- Symbolic links are skipped, both directories and files.
- ``_groups`` (:data:`GROUPS_DIR`: the curves of groups of runs, written by
  ``rankscribe-lineage group``) and ``tensorboard-hparams`` (what
  ``rankscribe-lineage hparams`` writes by default) are no runs, and their
  folders are not either (:data:`NOT_RUN_DIRS`).
- A directory is a run when it holds a regular summary or lineage file, as
  :func:`rankscribe.writer.files.file_kind` tells them (MindInsight's rule: a
  name containing ``summary.<digits>``; the digits are the file's creation
  timestamp).
- A run's lineage files are those of kind ``LINEAGE`` (ending in
  ``_lineage``), read in timestamp order, ties broken by file name descending
  (MindInsight >= 0.3).
- Runs are listed newest first by ``update_time`` (the mtime of the file with
  the largest timestamp), then by relative path (``./a/b`` for a run two
  levels down).

Unlike MindInsight there is no cap of 999 directories.

A run whose lineage files and newest files are all read-only (no write
permission bit: the writers make a file read-only when they close it) is
*final*: files added, removed or renamed in its directory move the
directory's mtime, and a file copied over in place (``cp`` keeps the inode)
moves that file's ctime. :func:`find_runs` can thus take a
known final run for a ``stat`` of its directory and of its lineage files
(the index's ``reuse``) instead of listing it. The directories it entered
that are no run (the *containers*) are returned with their mtimes, taken
before listing them: one that keeps its mtime holds the same entries.
"""

from __future__ import annotations

import logging
import operator
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from rankscribe.writer.files import FileKind, file_kind

logger = logging.getLogger(__name__)

# Only reads the timestamp of a name file_kind recognised. parse_file_name
# would refuse the names MindInsight still lists without MindSpore's full form
# (``events.summary.12_lineage.bak``).
_TIMESTAMP = re.compile(r"summary\.(\d+)")
_RUN_FILE_KINDS = (FileKind.SUMMARY, FileKind.LINEAGE)
_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
#: The folder of a base dir that holds the groups' curves (docs/groups.md): never a run.
GROUPS_DIR = "_groups"
#: The folders ``rankscribe-lineage`` itself writes into a base dir, never runs nor
#: entered: the groups' curves and ``hparams``' default output (one folder per run,
#: which a walk would otherwise enter and keep, run by run, each query).
NOT_RUN_DIRS = frozenset((GROUPS_DIR, "tensorboard-hparams"))
#: How many levels below a base dir a run may be (``./a/b/c/d``; docs/lineage-queries.md).
MAX_DEPTH = 4

__all__ = [
    "GROUPS_DIR",
    "MAX_DEPTH",
    "NOT_RUN_DIRS",
    "UNSTATED",
    "FoundRuns",
    "LineageFile",
    "Listed",
    "Pending",
    "SummaryDir",
    "find_runs",
    "list_entries",
    "list_lineage_files",
    "list_summary_dirs",
    "runs_below",
    "summarize_dir",
]


@dataclass(frozen=True)
class LineageFile:
    """One ``_lineage`` file and what identifies its content in the index."""

    name: str
    timestamp: int
    size: int
    mtime_ns: int
    # ``cp`` onto an existing name keeps it; a file replaced by rename gets a new one.
    inode: int = 0
    # Any change of content or mode sets it to the server's time, and no one can set
    # it back (``cp -p`` restores the mtime, never the ctime).
    ctime_ns: int = 0

    @property
    def signature(self) -> tuple[str, int, int, int, int]:
        return (self.name, self.size, self.mtime_ns, self.inode, self.ctime_ns)


@dataclass
class SummaryDir:
    """A run directory found under a base dir."""

    relative_path: str
    path: str
    create_time: int
    update_time_ns: int
    lineage_files: list[LineageFile] = field(default_factory=list)
    # The directory's mtime, taken before listing it (a later change moves it).
    dir_mtime_ns: int = 0
    # Every lineage file and every newest file was read-only when listed.
    final: bool = False

    @property
    def update_time(self) -> float:
        return self.update_time_ns / 1e9


def _order_lineage_files(files: list[LineageFile]) -> list[LineageFile]:
    by_name_descending = sorted(files, key=lambda item: item.name, reverse=True)
    return sorted(by_name_descending, key=lambda item: item.timestamp)


def _summarize_entries(
    path: str, relative_path: str, entries: list[os.DirEntry[str]]
) -> SummaryDir | None:
    """Return the run made of ``entries`` (the listing of ``path``), or None."""
    newest_timestamp = -1
    newest_mtime_ns = 0
    lineage_files: list[LineageFile] = []
    newest_entries: list[os.DirEntry[str]] = []
    mtimes: dict[str, int] = {}
    final = True
    for entry in entries:
        if "summary." not in entry.name:  # cheap: a base dir lists thousands of run dirs
            continue
        kind = file_kind(entry.name)
        match = _TIMESTAMP.search(entry.name)
        if kind not in _RUN_FILE_KINDS or match is None:
            continue
        if not entry.is_file(follow_symlinks=False):
            continue
        timestamp = int(match.group(1))
        if kind is FileKind.LINEAGE:
            try:
                found = entry.stat(follow_symlinks=False)
            except OSError:  # removed while we looked
                continue
            mtimes[entry.name] = found.st_mtime_ns
            final = final and not found.st_mode & _WRITE_BITS
            lineage_files.append(
                LineageFile(
                    entry.name,
                    timestamp,
                    found.st_size,
                    found.st_mtime_ns,
                    found.st_ino,
                    found.st_ctime_ns,
                )
            )
        if timestamp > newest_timestamp:
            newest_timestamp = timestamp
            newest_entries = [entry]
        elif timestamp == newest_timestamp:
            newest_entries.append(entry)
    if newest_timestamp < 0:
        return None
    for entry in newest_entries:
        mtime_ns = mtimes.get(entry.name)
        if mtime_ns is None:
            try:
                found = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            mtime_ns = found.st_mtime_ns
            final = final and not found.st_mode & _WRITE_BITS
        newest_mtime_ns = max(newest_mtime_ns, mtime_ns)
    return SummaryDir(
        relative_path=relative_path,
        path=path,
        create_time=newest_timestamp,
        update_time_ns=newest_mtime_ns,
        lineage_files=_order_lineage_files(lineage_files),
        final=final,
    )


def _list(path: str) -> list[os.DirEntry[str]]:
    with os.scandir(path) as entries:
        return list(entries)


def list_entries(path: str) -> list[os.DirEntry[str]]:
    """The entries of directory ``path`` (one ``scandir``), as a scan lists them."""
    return _list(path)


# A directory to summarize: path, relative path, its mtime (UNSTATED: not taken yet).
Pending = tuple[str, str, int]
UNSTATED = -1


def summarize_dir(path: str, relative_path: str, dir_mtime_ns: int) -> SummaryDir | None:
    """The run in directory ``path`` (None if it holds no summary file).

    ``dir_mtime_ns`` is the directory's mtime taken before listing it, or
    ``UNSTATED``: it is taken now, still before listing (a cold scan thus
    leaves the ``stat`` of each run to the processes that list it).
    Raises ``OSError`` when the directory cannot be read.
    """
    if dir_mtime_ns < 0:
        dir_mtime_ns = os.stat(path, follow_symlinks=False).st_mtime_ns
    run = _summarize_entries(path, relative_path, _list(path))
    if run is not None:
        run.dir_mtime_ns = dir_mtime_ns
    return run


def _summarize_each(pending: list[Pending]) -> list[SummaryDir | None]:
    runs: list[SummaryDir | None] = []
    for path, relative_path, dir_mtime_ns in pending:
        try:
            runs.append(summarize_dir(path, relative_path, dir_mtime_ns))
        except OSError as error:
            logger.warning("skipping directory %s: %s", path, error)
            runs.append(None)
    return runs


class Listed(Protocol):
    """What :func:`list_summary_dirs` orders runs by (a ``reuse`` answer has it too)."""

    @property
    def relative_path(self) -> str: ...

    @property
    def update_time_ns(self) -> int: ...


_Known = TypeVar("_Known", bound=Listed)


@dataclass
class FoundRuns(Generic[_Known]):
    """What :func:`find_runs` found under a base dir."""

    runs: list[SummaryDir | _Known]
    #: Each directory entered that is no run: its relative path and its mtime (ns).
    containers: dict[str, int] = field(default_factory=dict)


def _subdirectories(entries: list[os.DirEntry[str]], prefix: str) -> list[tuple[str, str]]:
    """The directories among ``entries`` that may hold runs: path and relative path."""
    return [
        # entry.path: the parent joined with the name, made once by scandir
        (entry.path, prefix + entry.name)
        for entry in entries
        if entry.name not in NOT_RUN_DIRS and entry.is_dir(follow_symlinks=False)
    ]


def _container(path: str, relative_path: str) -> tuple[int, list[os.DirEntry[str]]] | SummaryDir:
    """A directory found to be no run: its mtime and entries, or the run it has just become.

    Listed again after it was summarized: the mtime is taken before this
    listing, so a file added since moves it past the recorded one.
    """
    mtime_ns = os.stat(path, follow_symlinks=False).st_mtime_ns
    entries = _list(path)
    run = _summarize_entries(path, relative_path, entries)
    if run is not None:
        run.dir_mtime_ns = mtime_ns
        return run
    return mtime_ns, entries


def find_runs(
    base_dir: str,
    reuse: Callable[[str, int], _Known | None] | None = None,
    summarize_many: Callable[[list[Pending]], list[SummaryDir | None]] | None = None,
) -> FoundRuns[_Known]:
    """Return the runs under ``base_dir`` (see above), and the directories entered that are none.

    ``base_dir`` should be a real absolute path: each run's ``path`` is
    ``base_dir`` joined with its relative path, which is its real path since
    symbolic links are skipped. Raises ``OSError`` when ``base_dir`` itself
    cannot be listed; a subdirectory that cannot be listed is skipped with a
    warning.

    ``reuse(relative_path, dir_mtime_ns)`` may return what is already known
    of a directory whose mtime is that (a final run, see above; anything
    with a ``relative_path`` and an ``update_time_ns``); it is then not
    listed, and its answer takes its place in the result. The others are
    summarized by ``summarize_many`` (default: one after the other,
    :func:`summarize_dir`), which may share the work out; it is called once
    per level below the base.
    """
    entries = _list(base_dir)
    found: FoundRuns[_Known] = FoundRuns([])
    own = _summarize_entries(base_dir, "./", entries)
    if own is not None:
        found.runs.append(own)
    level = _subdirectories(entries, "./")
    depth = 1
    while level:
        pending = _pending(level, reuse, found.runs)
        summarized = (summarize_many or _summarize_each)(pending)
        below: list[tuple[str, str]] = []
        for (path, relative_path, _), run in zip(pending, summarized, strict=True):
            if run is not None:
                found.runs.append(run)
                continue
            try:
                container = _container(path, relative_path)
            except OSError as error:  # already warned when it was summarized
                logger.debug("not entering %s: %s", path, error)
                continue
            if isinstance(container, SummaryDir):
                found.runs.append(container)
                continue
            found.containers[relative_path] = container[0]
            if depth < MAX_DEPTH:
                below += _subdirectories(container[1], relative_path + "/")
        level = below
        depth += 1
    found.runs.sort(key=operator.attrgetter("relative_path"))
    found.runs.sort(key=operator.attrgetter("update_time_ns"), reverse=True)
    return found


def _pending(
    level: list[tuple[str, str]],
    reuse: Callable[[str, int], _Known | None] | None,
    runs: list[SummaryDir | _Known],
) -> list[Pending]:
    """The directories of ``level`` to summarize; ``reuse``'s answers go into ``runs``."""
    if reuse is None:  # nothing known: whoever lists a directory stats it first
        return [(path, relative_path, UNSTATED) for path, relative_path in level]
    pending: list[Pending] = []
    for path, relative_path in level:
        try:
            # Before listing: a file added while we list moves the mtime past this.
            dir_mtime_ns = os.stat(path, follow_symlinks=False).st_mtime_ns
        except OSError as error:
            logger.warning("skipping directory %s: %s", path, error)
            continue
        known = reuse(relative_path, dir_mtime_ns)
        if known is not None:
            runs.append(known)
        else:
            pending.append((path, relative_path, dir_mtime_ns))
    return pending


def list_summary_dirs(
    base_dir: str,
    reuse: Callable[[str, int], _Known | None] | None = None,
    summarize_many: Callable[[list[Pending]], list[SummaryDir | None]] | None = None,
) -> list[SummaryDir | _Known]:
    """The runs of :func:`find_runs`, newest first."""
    return find_runs(base_dir, reuse, summarize_many).runs


def runs_below(directory: str, *, with_lineage: bool = False) -> list[str]:
    """The runs found below ``directory`` (not itself), as paths relative to it, sorted.

    What a command that reads one run directory names when that directory
    holds none (``show runs/digits``: ``digits/version_0`` is one). With
    ``with_lineage``, only the runs that have a lineage file.
    """
    try:
        runs = find_runs(directory).runs
    except OSError:
        return []
    return sorted(
        run.relative_path[2:]
        for run in runs
        if run.relative_path != "./" and (run.lineage_files or not with_lineage)
    )


def list_lineage_files(directory: str) -> list[LineageFile]:
    """Return the lineage files directly in ``directory``, in parsing order.

    Raises ``OSError`` when ``directory`` cannot be listed.
    """
    run = _summarize_entries(directory, "./", _list(directory))
    return run.lineage_files if run is not None else []
