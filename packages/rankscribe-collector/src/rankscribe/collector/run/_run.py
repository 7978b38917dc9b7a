"""What a run of the SummaryCollector opens and closes, and the job it belongs to.

A :class:`CollectorRun` is the collector's side of training and evaluation
runs; the callback hooks (:mod:`rankscribe.collector._collector`) only read it.

- Once per collector, on a job of several ranks, where the ranks are still
  together: the job's coordinator, the claim of the job directory
  (``docs/layout.md``, "Two jobs, one directory"), the lineage merger and the
  live job view (``docs/job-view.md``, "Live").
- At every run: this rank's :class:`~rankscribe.writer.SummaryRecord` in its
  ``rank_<r>`` directory (``docs/layout.md``; of the directory it was given when
  the ranks were given different ones, "Ranks that name directories of their
  own"), a fresh collection schedule (``docs/collector-schedule.md``) and the
  landscape saver.

The claim: every rank calls :func:`rankscribe.ranks.claim_job_dir` with the job's
coordinator; rank 0 decides and every rank gets rank 0's outcome, so only rank
0's arguments matter. Rank 0 passes ``on_exists="append"`` for a directory its
own process claimed already (a framework integration or an example claimed it
before making the collector, or an earlier collector of this job did), and the
collector's ``on_exists`` otherwise.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
import weakref
from pathlib import Path

from rankscribe.collector._checks import is_int
from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.collection._options import CollectorArguments
from rankscribe.collector.collection._schedule import CollectionSchedule
from rankscribe.collector.landscape._saver import LandscapeSaver
from rankscribe.collector.run._lineage import JobLineageMerger, LineageRecorder
from rankscribe.jobview.feed import LiveRankView
from rankscribe.ranks import (
    Coordinator,
    JobDirClaimedError,
    OnExists,
    RankInfo,
    RanksError,
    claim_job_dir,
    detect,
    rank_dir,
)
from rankscribe.ranks.files import (
    CLAIM_FILE_NAME,
    make_private_dir,
    rank_dir_name,
    read_regular,
    write_rank_dirs,
)
from rankscribe.ranks.jsondata import JSONDataError, parse_json
from rankscribe.writer import SummaryRecord

logger = logging.getLogger(__name__)

__all__ = ["CollectorRun", "moved_by_claim"]

# Directories this process's job claimed through a collector (on every rank): the requested
# one -> the one used, so a later collector of the job given the same directory writes where
# the first did (rank 0 decides that), and a ModelCheckpoint inside it follows.
_CLAIMED: dict[str, str] = {}
_CLAIM_LIMIT = 64 * 1024
# What the claim appends to a directory that belonged to another job.
_MOVED = re.compile(r"-[0-9]+", re.ASCII)


class CollectorRun:
    """The record, schedule and landscape saver of the current run; the job's merger and view.

    Args:
        arguments: the collector's checked arguments.
        adapters: what the collector's adapters learnt (shared with the landscape saver).
        lineage: the collector's lineage recorder (told when a run starts).
        live: the collector's live job view (opened here with the merger).
    """

    def __init__(
        self,
        arguments: CollectorArguments,
        *,
        adapters: AdapterRegistry,
        lineage: LineageRecorder,
        live: LiveRankView,
    ) -> None:
        self.arguments = arguments
        self.live = live
        self._adapters = adapters
        self._lineage = lineage
        #: The job's directory: the one given, or the one the job claimed instead.
        self.summary_dir = arguments.summary_dir
        self.info: RankInfo | None = None
        #: Where this rank writes (``summary_dir`` or its ``rank_<r>``).
        self.directory: Path | None = None
        self.record: SummaryRecord | None = None
        self.schedule: CollectionSchedule | None = None
        self.landscape: LandscapeSaver | None = None
        #: The landscape saver when it saves per step (step_end asks it at every step).
        self.step_landscape: LandscapeSaver | None = None
        self.merger: JobLineageMerger | None = None
        #: Where this rank's ``rank_<r>`` goes when it named a directory other than rank 0's.
        self._rank_base: str | None = None
        self._make_known_directories()

    def _make_known_directories(self) -> None:
        """``summary_dir``, made when the collector is made, as the original does.

        An empty directory is no other job's (the claim still takes it), so making it
        early never moves a job. ``rank_<r>`` waits for the start of training and the
        landscape's ``ckpt_dir`` for its first file (docs/mindinsight-differences.md,
        "Directories").
        """
        try:
            make_private_dir(self.summary_dir)
        except OSError as error:
            raise type(error)(
                error.errno,
                f"For 'SummaryCollector', the argument 'summary_dir' must name a directory "
                f"it can create or use, but {error.strerror}",
                error.filename,
            ) from error

    @property
    def own_dir(self) -> str:
        """The directory holding this rank's ``rank_<r>``: the job's, or the one it named."""
        return self._rank_base if self._rank_base is not None else self.summary_dir

    def open(self) -> bool:
        """Open a run: True when a new record was opened, False when one is open already."""
        if self.record is not None:
            return False
        arguments = self.arguments
        info = arguments.rank_info if arguments.rank_info is not None else detect()
        self.info = info
        if info.world_size > 1 and self.merger is None:
            self._join_job(info)
        # Every directory made on the way is private (group-readable on request),
        # not only the last one, which is all rank_dir sets the mode of.
        base = self.own_dir
        make_private_dir(base if info.is_single else os.path.join(base, rank_dir_name(info.rank)))
        self.directory = rank_dir(base, info)
        self.record = SummaryRecord(
            self.directory,
            num_process=arguments.num_process,
            max_file_size=arguments.max_file_size,
            raise_exception=False,
            export_options=arguments.export_options,
            rank=info.rank,
            formats=arguments.formats,
        )
        self.schedule = CollectionSchedule(
            arguments.collect_freq,
            arguments.collect_tensor_freq,
            world_size=info.world_size,
            rank=info.rank,
        )
        options = arguments.collect.landscape
        self.landscape = (
            LandscapeSaver(
                self.directory,
                options,
                budget=arguments.landscape_budget,
                adapters=self._adapters,
            )
            if options
            else None
        )
        self.step_landscape = (
            self.landscape if self.landscape is not None and self.landscape.unit == "step" else None
        )
        self._lineage.start_run()
        return True

    def _join_job(self, info: RankInfo) -> None:
        """The coordinator, the claim, the merger and the live view (every rank, together).

        Made once, at the first run, where the ranks are together; later runs
        (an evaluation after training) reuse them, so a rank that was late at
        the end of one run cannot spoil the next one's start.
        """
        arguments = self.arguments
        merger = JobLineageMerger(
            self.summary_dir,
            info,
            timeout=arguments.merge_timeout,
            coordinator=arguments.coordinator,
            tensorboard="tensorboard" in arguments.formats,
        )
        merger.open()  # the job's coordinator: given, or made here (it says if it cannot)
        weakref.finalize(self, merger.close)
        coordinator = merger.active_coordinator
        if coordinator is not None:
            try:
                claimed = _claim(self.summary_dir, arguments.on_exists, coordinator)
            except BaseException:
                merger.close()
                raise
            if claimed is not None:
                self.summary_dir = claimed
                merger.summary_dir = Path(claimed)  # where rank 0 writes the merged lineage
        self.merger = merger
        if coordinator is not None:
            self._rank_base = _own_directory(arguments.summary_dir, self.summary_dir, coordinator)
        self.live.open(self.summary_dir, info, merger)

    def agree_run_lengths(self, total: int) -> list[int] | None:
        """Every rank's run length in units (this rank's: ``total``), in rank order.

        Every rank of a job of several calls this when training begins (a gather
        at rank 0, then a broadcast of what it gathered, each bounded by the
        coordinator's timeout), so that every rank shares the job's tensor units
        alike (docs/collector-schedule.md, "Tensor steps on several ranks").
        None for a single process, and when the ranks could not agree: then this
        rank says once that the job's tensor steps may be recorded twice or not
        at all, should the ranks run different numbers of units.
        """
        info = self.info
        if info is None or info.world_size <= 1:
            return None
        coordinator = self.merger.active_coordinator if self.merger is not None else None
        if coordinator is None:
            _say_not_agreed(info, total, "the job has no coordinator")
            return None
        try:
            gathered = coordinator.gather(total, root=0)
            lengths: list[int] | str | None = None
            if gathered.is_root and gathered.complete:
                lengths = gathered.in_rank_order()
            elif gathered.is_root:
                missing = ", ".join(map(str, gathered.missing))
                lengths = f"ranks {missing} did not say theirs in time"
            decided = coordinator.bcast(lengths, root=0)
        except RanksError as error:
            _say_not_agreed(info, total, str(error))
            return None
        if isinstance(decided, str):
            _say_not_agreed(info, total, decided)
            return None
        if not (
            isinstance(decided, list)
            and len(decided) == info.world_size
            and all(is_int(length) and length >= 0 for length in decided)
            and decided[info.rank] == total
        ):
            _say_not_agreed(info, total, f"rank 0 sent {decided!r}")
            return None
        if info.rank == 0 and len(set(decided)) > 1:
            logger.info(
                "The ranks run different numbers of units (from %d to %d): the tensor units "
                "past a rank's last one go to the ranks that run them.",
                min(decided),
                max(decided),
            )
        return decided

    def close(self) -> None:
        """Close this run's record (flushed: what was recorded is on disk)."""
        record, self.record = self.record, None
        if record is not None:
            record.close()

    def shutdown(self) -> None:
        """Close the record, the live view and the coordinator made for the job."""
        self.close()
        merger, self.merger = self.merger, None
        self.live.shutdown()
        if merger is not None:
            merger.close()


def _say_not_agreed(info: RankInfo, total: int, why: str) -> None:
    """This rank could not learn the others' run lengths: say once what that may cost."""
    logger.warning(
        "Rank %d could not learn the other ranks' run lengths (%s): it shares the job's "
        "tensor steps as if every rank ran its %d units; where the ranks run different "
        "numbers, some tensor steps are recorded twice or not at all "
        '(docs/collector-schedule.md, "Tensor steps on several ranks").',
        info.rank,
        why,
        total,
    )


def _claim(summary_dir: str, on_exists: OnExists, coordinator: Coordinator) -> str | None:
    """The directory the job claimed (every rank calls this), or None when it could not agree.

    ``on_exists="error"`` raises :class:`~rankscribe.ranks.JobDirClaimedError` on
    every rank. Any other failure of the claim (a collective that timed out: a
    rank missing at the start) is logged and the rank writes into ``summary_dir``
    unclaimed, as before claims: the run goes on and loses nothing.
    """
    target, mode = summary_dir, on_exists
    if coordinator.rank == 0:
        target = _CLAIMED.get(summary_dir, summary_dir)
        if _claimed_by_this_process(target):
            mode = "append"
    try:
        claim = claim_job_dir(target, on_exists=mode, coordinator=coordinator)
    except JobDirClaimedError:
        raise
    except RanksError as error:
        logger.error(
            "The ranks of this job could not agree on its directory (%s): rank %d writes into "
            "%s without a claim, where another job's ranks may write too.",
            error,
            coordinator.rank,
            summary_dir,
        )
        return None
    used = os.fspath(claim.directory)
    _CLAIMED[summary_dir] = used
    if coordinator.rank == 0 and used != summary_dir:
        logger.warning(
            "%s belongs to another job: this job (%d ranks) writes into %s instead "
            "(SummaryCollector(on_exists=...), docs/layout.md).",
            summary_dir,
            coordinator.world_size,
            used,
        )
    return used


def moved_by_claim(path: str | os.PathLike[str]) -> Path | None:
    """Where ``path`` goes because its job claimed another directory; None if it stays.

    ``path`` (absolute) inside, or equal to, a ``summary_dir`` whose job in this process
    claimed ``<summary_dir>-N`` instead moves to the same place in ``<summary_dir>-N``
    (``docs/layout.md``, "Checkpoints inside the job directory").
    """
    target = os.path.normpath(os.fspath(path))
    for asked, used in _CLAIMED.items():
        requested = os.path.normpath(asked)
        if used == requested:
            continue
        if target == requested or target.startswith(requested + os.sep):
            return Path(used) / os.path.relpath(target, requested)
    return None


def _own_directory(requested: str, job_dir: str, coordinator: Coordinator) -> str:
    """The directory this rank's ``rank_<r>`` goes into (every rank calls this, together).

    The job's directory when this rank named the same ``summary_dir`` as rank 0
    (the usual case); the directory it named when it named another one (each rank
    its own, ``summary_dir + str(rank)``), moved to ``<dir>-N`` as rank 0's was
    when the job's claim moved it. Rank 0 records the others' directories in the
    job's directory (:func:`rankscribe.ranks.files.write_rank_dirs`), so that
    ``rankscribe-lineage merge`` finds them (``docs/layout.md``, "Ranks that name
    directories of their own").
    """
    mine = os.path.abspath(requested)
    suffix = ""
    if coordinator.rank == 0:
        # "<dir>-2" when rank 0's directory belonged to another job: each rank moves alike.
        claimed = os.path.basename(os.path.abspath(job_dir))
        named = os.path.basename(mine)
        moved = claimed[len(named) :]
        suffix = moved if claimed.startswith(named) and _MOVED.fullmatch(moved) else ""
    try:
        gathered = coordinator.gather(mine, root=0)
        decided = coordinator.bcast([mine, suffix] if coordinator.rank == 0 else None, root=0)
    except RanksError as error:
        logger.error(
            "The ranks of this job could not compare their summary directories (%s): rank %d "
            "writes into %s.",
            error,
            coordinator.rank,
            job_dir,
        )
        return job_dir
    if not (
        isinstance(decided, list)
        and len(decided) == 2
        and all(isinstance(part, str) for part in decided)
    ):
        return job_dir
    first, suffix = decided
    if gathered.is_root:
        others = {
            rank: os.path.join(directory + suffix, rank_dir_name(rank))
            for rank, directory in gathered.values.items()
            if isinstance(directory, str) and directory != first
        }
        if others:
            try:
                write_rank_dirs(job_dir, others)
            except OSError as error:
                logger.error(
                    "The directories of ranks %s are not recorded in %s (%s): "
                    "`rankscribe-lineage merge` will not find them.",
                    ", ".join(map(str, sorted(others))),
                    job_dir,
                    error,
                )
            logger.info(
                "The ranks named different summary directories: each writes where it "
                "asked (%s); the job's merged lineage and job view go to %s.",
                ", ".join(f"rank {rank}: {path}" for rank, path in sorted(others.items())),
                job_dir,
            )
    return job_dir if mine == first else mine + suffix


def _claimed_by_this_process(directory: str) -> bool:
    """True when ``directory``'s claim file was written by this very process.

    The claim names the host and pid of the rank 0 that wrote it; a pid is
    reused, so the claim must also be younger than this process.
    """
    path = os.path.join(directory, CLAIM_FILE_NAME)
    try:
        data = read_regular(path, limit=_CLAIM_LIMIT, owned=True)
    except OSError:  # none, or a link, a FIFO, another user's (UnsafeFileError): not ours
        return False
    try:
        claim = parse_json(data, what=f"the claim file {path}", max_bytes=_CLAIM_LIMIT)
    except JSONDataError:
        return False
    if not isinstance(claim, dict):
        return False
    claimed_at = claim.get("claimed_at")
    return (
        claim.get("pid") == os.getpid()
        and claim.get("host") == socket.gethostname()
        and isinstance(claimed_at, (int, float))
        and _PROCESS_STARTED <= claimed_at <= time.time() + 60  # a claim from the future: forged
    )


def _process_started() -> float:
    """When this process started (Linux's /proc), else when this module was imported."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            # Field 22, start time in clock ticks after boot; the name (field 2) may hold spaces.
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as handle:
            booted = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
        # btime is whole seconds: a second's slack.
        return booted + ticks / os.sysconf("SC_CLK_TCK") - 1.0
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


_PROCESS_STARTED = _process_started()
