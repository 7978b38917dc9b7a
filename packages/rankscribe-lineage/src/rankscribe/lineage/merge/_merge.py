"""The offline merge of a job directory: :func:`merge_run_dir`.

It reads each ``rank_<n>`` subdirectory's lineage (for jobs that crashed
before rank 0 merged, or to merge again), merges them with
:func:`rankscribe.lineage.merge._lineages.merge_rank_lineages`, writes the
merged lineage file and the job view.

The merge rules are ``_lineages``' (``docs/layout.md``, "Merge at rank 0"); this
module adds what a directory needs: waiting for late ranks, bounding the world size by
the rank dirs that exist, the lock, and the job view from the rank files.
"""

from __future__ import annotations

import json
import logging
import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field

from rankscribe.jobview import JobView, write_job_view
from rankscribe.jobview.parts import holds_tensorboard_files, missing_ranges, ranges_text
from rankscribe.lineage._checks import (
    check_bool,
    check_host,
    check_optional_int,
    check_path,
    is_number,
    ranks_text,
)
from rankscribe.lineage._hparams import session_values
from rankscribe.lineage.errors import LineageMergeError, LineageParamTypeError
from rankscribe.lineage.merge._lineages import checked_user_defined, merge_rank_lineages
from rankscribe.lineage.merge._stream import job_statistics_of_dirs
from rankscribe.lineage.record._lineage_file import write_merged_lineage
from rankscribe.lineage.record._names import rank_of_dir_name
from rankscribe.lineage.record._parser import RunLineage
from rankscribe.lineage.record._train_start import TrainStop, parse_rank_run, read_train_stop
from rankscribe.ranks.files import (
    MAX_RANK_DIR_PROBLEMS,
    RANK_DIRS_FILE_NAME,
    LockTimeoutError,
    RecordedRankDirs,
    exclusive_lock,
    foreign_owner,
    read_rank_dirs,
    recorded_rank_dirs,
)
from rankscribe.ranks.waits import Deadline, pause

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_DEVICE_NUM",
    "MAX_LISTED_MISSING",
    "MAX_NOTED_RANK_DIRS",
    "MAX_NOTED_TEXT",
    "MERGE_LOCK_NAME",
    "MergeOutcome",
    "merge_run_dir",
    "rank_dirs",
    "rank_dirs_note",
]

MERGE_LOCK_NAME = ".rankscribe-merge.lock"
_INT32_MAX = 2**31 - 1
_POLL_SECONDS = 0.5
_LOCK_SECONDS = 120
#: MergeOutcome.ranks_missing lists at most this many ranks (missing_ranges has them all).
MAX_LISTED_MISSING = 1000
#: ``user_defined/rank_dirs`` names at most this many ranks, in at most MAX_NOTED_TEXT
#: characters (``rank_dirs_count`` counts them all).
MAX_NOTED_RANK_DIRS = 64
MAX_NOTED_TEXT = 8192
#: A rank's ``device_num`` above this is not believed as the world size (a warning says
#: so): a job of more ranks than any machine runs is a damaged or forged record.
MAX_DEVICE_NUM = 2**20


def rank_dirs(run_dir: str, recorded: Mapping[int, str] | None = None) -> dict[int, str]:
    """The ``rank_<n>`` directories of the job in ``run_dir`` (symbolic links skipped).

    Its ``rank_<n>`` subdirectories, and the directories of the ranks that named a
    directory of their own, as the job recorded them in ``run_dir`` (``recorded``,
    else read here with :func:`rankscribe.ranks.files.read_rank_dirs`; ``docs/layout.md``,
    "Ranks that name directories of their own") when they are there and may be read:
    a real directory (no link) of this user's, inside the job's parent directory
    once resolved, and no other rank's.
    """
    if recorded is None:
        recorded = read_rank_dirs(run_dir)
    found, _ = _checked_rank_dirs(run_dir, recorded)
    return found


def _checked_rank_dirs(
    run_dir: str, recorded: Mapping[int, str]
) -> tuple[dict[int, str], dict[int, str]]:
    """:func:`rank_dirs`, and why each recorded directory that is there was not taken."""
    found: dict[int, str] = {}
    seen: set[tuple[int, int]] = set()
    with os.scandir(run_dir) as entries:
        for entry in entries:
            rank = rank_of_dir_name(entry.name)
            if rank is not None and entry.is_dir(follow_symlinks=False):
                found[rank] = entry.path
                seen.add(_identity(entry.stat(follow_symlinks=False)))
    parent = os.path.dirname(os.path.realpath(run_dir))
    refused: dict[int, str] = {}
    for rank, directory in sorted(recorded.items()):
        if rank in found:
            continue
        try:
            status = os.lstat(directory)
        except OSError:  # gone (or never on this host): a missing rank
            continue
        problem = _recorded_dir_problem(directory, status, parent, seen)
        if problem is None:
            found[rank] = directory
            seen.add(_identity(status))
        else:
            refused[rank] = problem
    return found, refused


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


def _recorded_dir_problem(
    directory: str, status: os.stat_result, parent: str, seen: set[tuple[int, int]]
) -> str | None:
    """Why a recorded directory that exists is no rank's to read (it counts as missing)."""
    if stat.S_ISLNK(status.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(status.st_mode):
        return "it is not a directory"
    foreign = foreign_owner(status)
    if foreign is not None:
        return foreign
    if not os.path.realpath(directory).startswith(parent.rstrip(os.sep) + os.sep):
        return f"it resolves outside the job's parent directory {parent}"
    if _identity(status) in seen:
        return "it is another rank's directory"
    return None


def rank_dirs_note(run_dir: str | os.PathLike[str]) -> dict[str, str | int]:
    """What the job's record says of the ranks that wrote outside ``run_dir``; ``{}`` if none.

    The merged lineage's ``user_defined`` keys (``docs/layout.md``, "Ranks that name
    directories of their own"): ``rank_dirs``, a JSON object of rank to directory
    naming at most :data:`MAX_NOTED_RANK_DIRS` of the recorded ranks in at most
    :data:`MAX_NOTED_TEXT` characters, ``rank_dirs_count`` (how many ranks the job
    recorded) and, when entries were left out, ``rank_dirs_refused`` (how many). What
    is left out (the file itself when it is another user's, naming its owner) is
    warned about here, once: the first few entries by name, then a count.
    """
    directory = check_path("run_dir", run_dir)
    return _note_of(directory, recorded_rank_dirs(directory))


def _note_of(directory: str, note: RecordedRankDirs) -> dict[str, str | int]:
    """:func:`rank_dirs_note` of the note read already (its warnings logged here)."""
    taken_out = _checked_rank_dirs(directory, note.directories)[1] if note.directories else {}
    problems = [
        *note.problems,
        *(
            f"rank {rank}'s directory {note.directories[rank]}: {why}"
            for rank, why in sorted(taken_out.items())
        ),
    ][: max(MAX_RANK_DIR_PROBLEMS, len(note.problems))]
    note_path = os.path.join(directory, RANK_DIRS_FILE_NAME)
    for problem in problems:
        logger.warning("not read as a rank's directory (%s): %s", note_path, problem)
    refused = note.refused + len(taken_out)
    if refused > len(problems):
        logger.warning("%s: %d entries left out in all", note_path, refused)
    listed = {
        rank: path for rank, path in sorted(note.directories.items()) if rank not in taken_out
    }
    result: dict[str, str | int] = {}
    if listed:
        result["rank_dirs"] = _listed_dirs(listed)
        result["rank_dirs_count"] = len(listed)
    if refused:
        result["rank_dirs_refused"] = refused
    return result


def _listed_dirs(directories: Mapping[int, str]) -> str:
    """At most :data:`MAX_NOTED_RANK_DIRS` entries as JSON, in at most :data:`MAX_NOTED_TEXT`."""
    shown: dict[str, str] = {}
    size = 2
    for rank, path in directories.items():
        entry = len(json.dumps({str(rank): path})) - 1
        if len(shown) >= MAX_NOTED_RANK_DIRS or size + entry > MAX_NOTED_TEXT:
            break
        shown[str(rank)] = path
        size += entry
    return json.dumps(shown)


@dataclass
class MergeOutcome:
    """What an offline merge did."""

    path: str
    lineage: RunLineage
    ranks_reported: list[int]
    #: The missing ranks (at most :data:`MAX_LISTED_MISSING` of them: see ``missing_ranges``).
    ranks_missing: list[int]
    #: The job files written and the verdicts (None when no rank had a scalar).
    job_view: JobView | None = None
    #: Every missing rank, as inclusive (first, last) runs.
    missing_ranges: list[tuple[int, int]] = field(default_factory=list)


def _read_ranks(directories: Mapping[int, str]) -> dict[int, RunLineage]:
    found: dict[int, RunLineage] = {}
    for rank, directory in sorted(directories.items()):
        parsed = parse_rank_run(directory)  # an interrupted rank: its start record
        for warning in parsed.warnings:
            logger.warning("%s", warning)
        if parsed.lineage is not None:
            found[rank] = parsed.lineage
    return found


def _device_num(lineage: RunLineage) -> int | None:
    """The world size ``lineage`` reports, when it is one to believe (1..MAX_DEVICE_NUM)."""
    device_num = lineage.section("hyper_parameters").get("device_num")
    if isinstance(device_num, int) and not isinstance(device_num, bool):
        return device_num if 0 < device_num <= MAX_DEVICE_NUM else None
    return None


def _expected_ranks(
    directories: Mapping[int, str], lineages: Mapping[int, RunLineage], recorded: Mapping[int, str]
) -> int:
    """The world size: rank dirs seen or recorded, highest rank, the ranks' own device_num.

    A recorded directory that is gone still names a rank of the job: it counts as missing.
    """
    candidates = [max(directories, default=-1) + 1]
    candidates.append(max(recorded, default=-1) + 1)
    candidates.extend(rank + 1 for rank in lineages)
    candidates.extend(filter(None, map(_device_num, lineages.values())))
    return max(candidates)


def _warn_of_device_nums(lineages: Mapping[int, RunLineage]) -> None:
    for rank, lineage in sorted(lineages.items()):
        device_num = lineage.section("hyper_parameters").get("device_num")
        if type(device_num) is int and device_num > MAX_DEVICE_NUM:
            logger.warning(
                "rank %d's lineage gives device_num %d, more ranks than %d: not believed "
                "as the world size",
                rank,
                device_num,
                MAX_DEVICE_NUM,
            )


def _wait_for_ranks(
    directory: str, timeout: float, world_size: int | None, recorded: Mapping[int, str]
) -> tuple[dict[int, RunLineage], int]:
    """Poll ``directory``'s ranks until all reported or ``timeout`` passed.

    On the ranks' one clock and sleep (``rankscribe.ranks.waits``), which a test replaces.
    """
    deadline = Deadline(timeout)
    while True:
        directories = rank_dirs(directory, recorded)
        lineages = _read_ranks(directories)
        expected = world_size or _expected_ranks(directories, lineages, recorded)
        if len(lineages) >= expected or deadline.expired():
            return lineages, expected
        pause(min(_POLL_SECONDS, deadline.remaining()))


def _lineage_without_ranks(directory: str, expected: int) -> RunLineage:
    """The job lineage when no rank wrote one (killed early): the world size, the rank counts.

    The world size makes it a train lineage: readers (MindInsight's rule) list
    a run only when it has one, and the verdicts must be found.
    """
    lineage = RunLineage(directory)
    lineage.sections["hyper_parameters"] = {"device_num": min(expected, _INT32_MAX)}
    lineage.sections["user_defined"] = {
        "ranks_reported": 0,
        "ranks_expected": expected if expected <= _INT32_MAX else float(expected),
        "ranks_missing": ranges_text([(0, expected - 1)]),
        "disagreements": "",
    }
    return lineage


def merge_run_dir(
    run_dir: str | os.PathLike[str],
    *,
    timeout: float = 0.0,
    world_size: int | None = None,
    host: str | None = None,
    user_defined: Mapping[str, int | float | str] | None = None,
    job_view: bool = True,
) -> MergeOutcome:
    """Merge the ``rank_<n>`` dirs of ``run_dir``: the merged lineage and the job view.

    Waits up to ``timeout`` seconds for missing ranks to report, then merges
    what there is. With ``job_view`` (the default), the ranks' scalars also
    give the job's own summary file (and a TensorBoard file when a rank dir
    holds TensorBoard files) and the verdicts, which join the merged
    lineage's ``user_defined`` (see :mod:`rankscribe.jobview`) with
    any ``user_defined`` given here. Running it again replaces the merged
    lineage and the job files (idempotent: no point is ever duplicated).

    Raises:
        LineageMergeError: ``run_dir`` is not a directory, holds no ``rank_<n>`` dir or
            one of a rank ``>= world_size``, or none holds a lineage or a scalar;
            a ``timeout`` that is negative, NaN or infinite (a wait must end).
        LineageParamTypeError, LineageParamValueError: a malformed argument.
    """
    given = check_path("run_dir", run_dir)
    form = f"timeout must be a finite number of seconds >= 0, got {timeout!r}"
    if not is_number(timeout):
        raise LineageParamTypeError(form)
    if not (math.isfinite(timeout) and timeout >= 0):  # NaN, inf: a deadline never comes
        raise LineageMergeError(form)
    world_size = check_optional_int("world_size", world_size, minimum=1)
    check_host("host", host)
    check_bool("job_view", job_view)
    directory = os.path.realpath(given)
    if not os.path.isdir(directory):
        raise LineageMergeError(f"run_dir {given!r} is not a directory")
    note = recorded_rank_dirs(directory)  # read once: the waits below poll the directories
    extra = {**_note_of(directory, note), **checked_user_defined(user_defined)}
    recorded = note.directories
    found = sorted(rank_dirs(directory, recorded))
    if not found:
        raise LineageMergeError(
            f"no rank_<n> directory in {directory}: the offline merge reads the rank_0, "
            f"rank_1, ... directories of a distributed job"
        )
    if world_size is not None and found[-1] >= world_size:
        raise LineageMergeError(
            f"world_size {world_size} is too small for {directory}: it holds "
            f"the rank dirs of ranks {ranks_text(found)} (world_size must "
            f"be at least {found[-1] + 1})"
        )
    lineages, expected = _wait_for_ranks(directory, timeout, world_size, recorded)
    _warn_of_device_nums(lineages)
    on_disk = rank_dirs(directory, recorded)
    statistics = job_statistics_of_dirs(on_disk) if job_view else None
    has_scalars = statistics is not None and any(
        step is not None for step in statistics.last_steps.values()
    )
    if not lineages and not has_scalars:
        raise LineageMergeError(
            f"no rank_<n> directory of {directory} holds a usable lineage or any scalar"
        )
    if lineages:
        merged = merge_rank_lineages(lineages, world_size=expected, summary_dir=directory)
    else:
        merged = _lineage_without_ranks(directory, expected)
    view = None
    lock_path = os.path.join(directory, MERGE_LOCK_NAME)
    try:
        # Private like every file RankScribe creates; a bounded wait like every wait.
        with exclusive_lock(lock_path, timeout=_LOCK_SECONDS):
            if has_scalars:
                hparams, metrics = session_values(merged)
                stops = {
                    rank: stop
                    for rank, path in on_disk.items()
                    if (stop := read_train_stop(path)) is not None
                }
                assert statistics is not None
                view = write_job_view(
                    directory,
                    statistics,
                    world_size=max(expected, max(on_disk, default=0) + 1),
                    tensorboard=holds_tensorboard_files(on_disk),
                    hparams=hparams,
                    metrics=metrics,
                    host=host,
                    # The ranks whose training stopped on an exception (their stop records):
                    # raised by the program, by a SIGTERM or a Ctrl-C sent to the rank, or
                    # on losing the connection to another rank.
                    raised={rank: stop.exception for rank, stop in stops.items() if _own(stop)},
                    raised_at={
                        rank: (stop.host, stop.wall_time)
                        for rank, stop in stops.items()
                        if _own(stop) and stop.host is not None and stop.wall_time is not None
                    },
                    terminated=sorted(
                        rank for rank, stop in stops.items() if stop.signal == "SIGTERM"
                    ),
                    interrupted=sorted(
                        rank for rank, stop in stops.items() if stop.signal == "SIGINT"
                    ),
                    lost_peer=sorted(
                        rank
                        for rank, stop in stops.items()
                        if stop.lost_peer and stop.signal is None
                    ),
                )
                merged.sections["user_defined"].update(view.verdicts)
            merged.sections["user_defined"].update(extra)
            path = write_merged_lineage(directory, merged, host=host)
    except LockTimeoutError as error:
        raise LineageMergeError(
            f"another merge of {directory} has held {lock_path} for over {_LOCK_SECONDS} s"
        ) from error
    missing = missing_ranges(lineages, expected)
    if missing:
        logger.warning("merged %s without ranks %s", directory, ranges_text(missing, limit=300))
    return MergeOutcome(path, merged, sorted(lineages), _listed(missing), view, missing)


def _own(stop: TrainStop) -> bool:
    """Whether a stop record's exception was the rank's own: not a signal's, and not one
    that said the rank lost its connection to another rank."""
    return stop.signal is None and not stop.lost_peer


def _listed(runs: list[tuple[int, int]]) -> list[int]:
    listed: list[int] = []
    for first, last in runs:
        listed.extend(range(first, min(last, first + MAX_LISTED_MISSING - len(listed) - 1) + 1))
        if len(listed) >= MAX_LISTED_MISSING:
            break
    return listed
