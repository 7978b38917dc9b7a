"""The groups' files: ``BASE/_groups/<group>/``, replaced whole (docs/groups.md, "Files").

Each group's curves become the job view's two files (a MindSpore summary file
and a TensorBoard file with a Custom Scalars layout: per tag, the mean drawn
within min..max), built and written by the job view's own file functions
(``job/_files.py``: ``step_table``, ``summary_file_records``,
``tensorboard_file_records``, ``write_job_files``).

Everything is written into a new private folder in BASE (``.rankscribe-groups-*``,
hidden from the query and the report), then renamed into place: the old
``_groups`` is first renamed aside and removed after, so a reader finds the
old folder, for an instant none, or the new one — never a half-written one.
A ``_groups`` of another user (planted in a shared base) is not this user's to
replace: :func:`foreign_groups` says why, and nothing is written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview.parts import (
    Curve,
    now,
    step_table,
    summary_file_records,
    tensorboard_file_records,
    write_job_files,
)
from rankscribe.lineage.group._curves import start_method
from rankscribe.lineage.group._keys import GROUPING_FILE
from rankscribe.lineage.record._discovery import GROUPS_DIR
from rankscribe.ranks.files import (
    UnsafeFileError,
    dir_mode,
    file_mode,
    foreign_owner,
    fsync_directory,
)

if TYPE_CHECKING:
    from rankscribe.jobview.parts import TagStatistics

logger = logging.getLogger(__name__)

__all__ = [
    "GROUP_SUFFIXES",
    "foreign_groups",
    "group_curves",
    "replace_groups",
]

#: What each group tag adds to the runs' tag, in file order.
GROUP_SUFFIXES = ("mean", "min", "max", "std", "runs")
_TEMPORARY_PREFIX = ".rankscribe-groups-"


def group_curves(tags: Mapping[str, TagStatistics]) -> list[Curve]:
    """``<tag>/mean``, ``/min``, ``/max``, ``/std`` and ``/runs`` of every tag, by tag name."""
    curves: list[Curve] = []
    for tag in sorted(tags):
        statistics = tags[tag]
        columns: dict[str, Any] = {
            "mean": statistics.mean,
            "min": statistics.minimum,
            "max": statistics.maximum,
            "std": statistics.std,
            "runs": statistics.count,
        }
        curves.extend(
            Curve(f"{tag}/{suffix}", statistics.steps, np.asarray(columns[suffix], np.float64))
            for suffix in GROUP_SUFFIXES
        )
    return curves


def _write_group(directory: str, tags: Mapping[str, TagStatistics], host: str | None) -> None:
    os.mkdir(directory, dir_mode())
    curves = group_curves(tags)
    if not curves:
        return
    wall_time = now()
    table = step_table(curves)
    contents = {
        "summary": summary_file_records(curves, wall_time, table),
        "tensorboard": tensorboard_file_records(
            curves,
            wall_time,
            margin_tags=sorted(tags),
            line_tags=[],
            session=None,
            table=table,
        ),
    }
    write_job_files(directory, contents, host=host, board_folder=False)


def _remove(path: str) -> None:
    """Remove what is at ``path``: a folder tree, or a link or file planted there (not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def foreign_groups(base: str) -> UnsafeFileError | None:
    """Why ``base/_groups`` is not this user's to replace (another user's), or None.

    In a shared base with the sticky bit (``/tmp``-like) it could not be moved aside
    anyway; elsewhere it is still another user's folder, whose curves are not ours.
    """
    target = os.path.join(base, GROUPS_DIR)
    try:
        found = os.lstat(target)
    except FileNotFoundError:
        return None
    foreign = foreign_owner(found)
    return None if foreign is None else UnsafeFileError(target, foreign, action="replace")


def _write_grouping(folder: str, by: Sequence[str]) -> None:
    path = os.path.join(folder, GROUPING_FILE)
    with open(path, "x", encoding="utf-8") as stream:
        json.dump({"by": list(by)}, stream)
        stream.flush()
        os.fsync(stream.fileno())
    os.chmod(path, file_mode(True))


def replace_groups(
    base: str,
    groups: Sequence[tuple[str, Mapping[str, TagStatistics]]],
    *,
    host: str | None = None,
    workers: int = 1,
    by: Sequence[str] = (),
) -> str:
    """Write ``(folder name, tag statistics)`` of each group as ``base/_groups``; return its path.

    ``by``: the keys the groups were formed by, written beside them
    (:data:`GROUPING_FILE`) for the query (:func:`grouped_by`).

    The groups' files are encoded and written in up to ``workers`` processes.
    On an error nothing of the new folder stays and the old one is kept.

    Raises:
        UnsafeFileError: ``base/_groups`` is another user's (:func:`foreign_groups`).
        OSError: the files could not be written.
    """
    refused = foreign_groups(base)
    if refused is not None:
        raise refused
    target = os.path.join(base, GROUPS_DIR)
    staging = tempfile.mkdtemp(prefix=_TEMPORARY_PREFIX, dir=base)  # 0700, a new name
    aside: str | None = None
    try:
        os.chmod(staging, dir_mode())
        folders = [os.path.join(staging, name) for name, _ in groups]
        statistics = [tags for _, tags in groups]
        hosts = [host] * len(groups)
        if workers > 1 and len(groups) > 1:
            context = multiprocessing.get_context(start_method())
            count = min(workers, len(groups))
            with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
                list(pool.map(_write_group, folders, statistics, hosts))
        else:
            list(map(_write_group, folders, statistics, hosts))
        _write_grouping(staging, by)
        fsync_directory(staging)
        if os.path.lexists(target):
            aside = tempfile.mkdtemp(prefix=_TEMPORARY_PREFIX, dir=base)
            os.rename(target, os.path.join(aside, GROUPS_DIR))  # a planted link itself, moved
        os.rename(staging, target)
    except BaseException:
        if aside is not None and not os.path.lexists(target):
            with contextlib.suppress(OSError):  # the old folder back where it was
                os.rename(os.path.join(aside, GROUPS_DIR), target)
        _remove(staging)
        if aside is not None:
            _remove(aside)
        raise
    fsync_directory(base)
    if aside is not None:
        _remove(aside)
    return target
