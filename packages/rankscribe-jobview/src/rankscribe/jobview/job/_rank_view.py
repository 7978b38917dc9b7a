"""The live job view of one rank: its new points, every interval, up the tree to rank 0.

Every ``job_view_interval`` seconds a background thread of each rank reads
the scalars its own summary files gained since the last interval (every
scalar the rank records — the collector's, ``SummaryRecord.add_value``'s and
the summary operators' — exactly as written, so the live view equals the
offline merge of the same files), merges its children's partial statistics
into them and sends the result to its parent
(:func:`rankscribe.ranks.tree.tree_channel`: MPI on a communicator of its own,
the c10d store's keys per tree level, or files). Rank 0 hands each
interval to :class:`rankscribe.jobview.LiveJobView` (``_live.py``), whose own
writer thread appends to the job's files, so a slow filesystem delays the
live files, never the tree nor training. ``docs/job-view.md``, "Live" and
"Tree".

The training thread never waits on another rank for this, except at the end
of training (:meth:`LiveRankView.finish`), where the last round runs on it
with the merge's timeout, as the lineage merge always did. Every wait has a
deadline; a rank or subtree that does not deliver in time is missing from
that interval. A rank whose training thread stalls (its files gain no point
for :meth:`LiveRankView.stall_after` seconds) leaves itself out of the
intervals while its thread still forwards its children's points, so the view
carries on with the rest; when the stalled rank's late points had to be
dropped from the live files, rank 0 completes the job files from the rank
directories at the end (:meth:`LiveRankView.complete`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from rankscribe.jobview.job._control import ControlFile
from rankscribe.jobview.job._live import LiveJobView
from rankscribe.jobview.job._partials import Partial as JobPartial
from rankscribe.jobview.job._protocol import (
    FINAL_ROUND,
    round_name,
    round_number,
    round_period,
    rounds_per_interval,
)
from rankscribe.jobview.job._protocol import decode as decode_message
from rankscribe.jobview.job._protocol import encode as encode_message
from rankscribe.jobview.job._ranges import ranges_text
from rankscribe.jobview.job._rank_tail import RankFileTail
from rankscribe.jobview.job._watch import VerdictCallback
from rankscribe.ranks import Coordinator, RankInfo, RanksError
from rankscribe.ranks.files import rank_dir_name
from rankscribe.ranks.tree import TreeChannel, tree_channel

logger = logging.getLogger(__name__)

__all__ = ["JobMerge", "LiveRankView", "RankFileTail"]

#: Share of an interval the ranks of a round may wait for their children, over all levels.
_ROUND_SHARE = 0.5


class JobMerge(Protocol):
    """What the rank side of the live view uses of the job's lineage merge.

    The collector's ``JobLineageMerger`` (``collector/_lineage.py``) is the one
    implementation; the job view names only this shape of it, so it merges the job's
    lineage without importing the lineage manager (a floor above it).
    """

    tensorboard: bool
    timeout: float

    @property
    def active_coordinator(self) -> Coordinator | None: ...

    def merge(
        self,
        rank_directory: str | os.PathLike[str],
        series: Any = None,
        *,
        verdicts: Mapping[str, float | int | str] | None = None,
        timeout: float | None = None,
    ) -> str | None: ...

    def merge_offline(self, job_dir: str, world_size: int) -> bool:
        """Rank 0: the offline merge of ``job_dir`` (its job files rewritten); False
        when it failed (the merger says why and how to run it after the job)."""
        ...

    def session(self) -> tuple[dict[str, Any] | None, dict[str, float] | None]:
        """The HParams session of the merged lineage: (hyper-parameters, metrics)."""
        ...


#: ... but never more than this (seconds): a live round is not the end of training.
_ROUND_WAIT_LIMIT = 30.0
#: A rank whose files gained no point for this many intervals stalls (see STALL_FLOOR)...
STALL_INTERVALS = 3
#: ... and never for less than this (seconds): the collector writes each rank's step
#: times at least once a second while steps end (``_series.STEP_TIME_WRITE_INTERVAL``).
STALL_FLOOR = 5.0


class LiveRankView:
    """One rank's end of the job view's tree (see the module docstring).

    Every rank calls :meth:`open` (where the ranks are together: it may be
    collective), :meth:`start` when training starts and :meth:`finish` when
    it ends; rank 0 then :meth:`close`\\ s with the merged lineage.
    """

    def __init__(self, interval: float, on_verdict: VerdictCallback | None = None) -> None:
        self.interval = interval
        #: Seconds between rounds (the timing channel; docs/job-view.md, "Live"); rank 0
        #: appends to the job files every ``interval`` (which the control file may change).
        self.period = round_period(interval)
        self.on_verdict = on_verdict
        self._control: ControlFile | None = None
        self._appended_at = 0.0  # time.monotonic() of rank 0's last append round
        self.channel: TreeChannel | None = None
        self.view: LiveJobView | None = None
        self.info: RankInfo | None = None
        self._tail: RankFileTail | None = None
        self._thread: threading.Thread | None = None
        self._writer: threading.Thread | None = None
        self._stop = threading.Event()
        self._written = threading.Event()
        self._lock = threading.Lock()
        self._round = 0
        self._finished: set[int] = set()
        self._job_dir = ""
        self._tensorboard = False
        self._timeout = 60.0
        self._failed = False
        self._progress_at = 0.0  # time.monotonic() when this rank's files last grew
        self._stalled = False
        self._missing: list[int] = []  # missing from the last round (rank 0)
        #: CPU seconds each background thread of this training run used so far (thread
        #: name -> seconds; a thread updates its own after each round and write): rank 0's
        #: are told to its watch (``TimingWatch.own_work``).
        self.thread_cpu: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle

    def open(self, job_dir: str | os.PathLike[str], info: RankInfo, merger: JobMerge) -> None:
        """Make the tree channel over the merger's coordinator (every rank, together; once)."""
        self.info, self._job_dir = info, os.fspath(job_dir)
        self._tensorboard, self._timeout = merger.tensorboard, merger.timeout
        coordinator = merger.active_coordinator
        if self.channel is not None or coordinator is None or info.world_size < 2:
            return
        try:
            self.channel = tree_channel(coordinator, timeout=self._timeout)
        except (RanksError, OSError) as error:
            logger.error(
                "The job view of rank %d cannot travel up the tree (%s); run "
                "`rankscribe-lineage merge %s` after the job.",
                info.rank,
                error,
                self._job_dir,
            )

    @property
    def active(self) -> bool:
        return self.channel is not None

    def start(self, rank_directory: str | os.PathLike[str] | None) -> None:
        """A training run starts: new points from now on, a background thread when live."""
        if self.channel is None or self.info is None or rank_directory is None:
            return
        self.stop_thread()
        self._tail = RankFileTail(rank_directory)
        self._round = 0
        self._failed = False
        self._progress_at = time.monotonic()
        self._stalled = False
        self._finished = set()
        self._missing = []
        self.thread_cpu = {}  # the threads of this run start from 0
        self._stop.clear()
        self._appended_at = time.monotonic()
        self.view = None
        if self.channel.parent is None:
            self.view = LiveJobView(
                self._job_dir,
                world_size=self.info.world_size,
                tensorboard=self._tensorboard,
                on_verdict=self.on_verdict,
                rounds_per_write=rounds_per_interval(self.interval, self.period),
                interval_seconds=self.interval if self.interval > 0 else None,
            )
            if self.interval > 0 and self.channel.concurrent:
                # Live: `show` says the job runs before the first interval is written.
                self.view.write_started()
            self._control = ControlFile(self._job_dir)
        if self.interval > 0 and self.channel.concurrent:
            self._thread = threading.Thread(
                target=self._run, name="rankscribe-job-view", daemon=True
            )
            self._thread.start()
            if self.view is not None:
                self._writer = threading.Thread(
                    target=self._write_loop, name="rankscribe-job-view-writer", daemon=True
                )
                self._writer.start()
        elif self.interval > 0:
            logger.warning(
                "The live job view needs MPI_THREAD_MULTIPLE; this MPI gives less, "
                "so the job view is written at the end of training only."
            )

    def finish(self) -> dict[str, float | int | str] | None:
        """The last round, on the calling thread; rank 0 returns the job's verdicts.

        Every rank calls this when training ends, whatever happened before.
        """
        if self.channel is None or self._tail is None:
            return None  # no training run since the last finish (an evaluation ends)
        self.stop_thread()
        try:
            self._round_trip(FINAL_ROUND)
        except Exception as error:  # the lineage merge must still run after this
            logger.error(
                "The last round of the job view failed on rank %d: %s", self.channel.rank, error
            )
            return None
        finally:
            self._tail = None
        view = self.view
        if view is None:
            return None
        try:
            view.write(final=True)
            # The verdicts of the steps this write judged (divergence, gradient, non-finite
            # loss) reach on_verdict and the state file's records too.
            view.judge(final=True)
        except OSError as error:
            logger.error(
                "Writing the job view into %s failed: %s. Run `rankscribe-lineage "
                "merge %s` after the job.",
                self._job_dir,
                error,
                self._job_dir,
            )
            return None
        return view.verdicts()

    def merge(self, merger: JobMerge, rank_directory: str | os.PathLike[str], series: Any) -> None:
        """The end of a run: the tree's last round, then the lineage merge (every rank).

        With the tree, rank 0 gets statistics, not every rank's ``series`` (sent only
        when there is no tree); the last round and the gather share one merge timeout.
        """
        started = time.monotonic()
        view = self.view
        verdicts = self.finish()
        left = max(0.0, merger.timeout - (time.monotonic() - started))
        merger.merge(
            rank_directory, None if self.active else series, verdicts=verdicts, timeout=left
        )
        self.close(*merger.session())
        if view is not None and view.dropped_points:
            self.complete(merger, view.dropped_points)

    def complete(self, merger: JobMerge, dropped: int) -> None:
        """Rank 0, at the end: rewrite the job files from the rank dirs (``dropped`` came late).

        A rank that stalled and came back sent points for steps the live view had
        already written; they were left out of the live files. When every rank's
        directory is on this host (a shared filesystem), the offline merge of the
        job directory rewrites the job files and the merged lineage with them;
        otherwise the log says to run it after the job.
        """
        assert self.info is not None
        absent = [
            rank
            for rank in range(self.info.world_size)
            if not os.path.isdir(os.path.join(self._job_dir, rank_dir_name(rank)))
        ]
        if absent:
            logger.warning(
                "The job view of %s lacks %d points that arrived after their steps were "
                "written (a rank stalled), and the rank dirs of %s are not on this host: "
                "run `rankscribe-lineage merge %s` after the job.",
                self._job_dir,
                dropped,
                _short(absent),
                self._job_dir,
            )
            return
        if not merger.merge_offline(self._job_dir, self.info.world_size):
            return
        logger.info("The job view of %s is complete: %d late points merged", self._job_dir, dropped)

    def close(
        self, hparams: dict[str, Any] | None = None, metrics: dict[str, float] | None = None
    ) -> None:
        """Rank 0: add the HParams session of the merged lineage and close the job files."""
        view, self.view = self.view, None
        if view is None:
            return
        try:
            view.finish(hparams=hparams, metrics=metrics)
        except OSError as error:
            logger.error("Closing the job view's files in %s failed: %s", self._job_dir, error)

    def stop_thread(self) -> None:
        """Stop the background threads (their round under way ends at its deadline)."""
        self._stop.set()
        self._written.set()
        for thread in (self._thread, self._writer):
            if thread is not None:
                thread.join(timeout=self._timeout + 2 * self._round_wait())
                if thread.is_alive():
                    logger.warning("The job view's thread %s did not stop in time", thread.name)
        self._thread = self._writer = None

    def shutdown(self) -> None:
        """Release the channel (the collector is closed)."""
        self.stop_thread()
        channel, self.channel = self.channel, None
        if channel is not None:
            channel.close()

    # ------------------------------------------------------------------ rounds

    def _round_wait(self) -> float:
        return min(self.period * _ROUND_SHARE, _ROUND_WAIT_LIMIT)

    def stall_after(self) -> float:
        """Seconds without a new point after which this rank's training counts as stalled."""
        return max(STALL_INTERVALS * self.interval, STALL_FLOOR)

    def _own_partial(self, tail: RankFileTail, rank: int, final: bool) -> JobPartial:
        """This rank's new points; empty (the rank is left out) while its training stalls.

        A stalled rank's thread still answers every round, so without this it would
        be heard from with its last step unchanged and hold every later step of the
        live files back until it trains on (docs/job-view.md, "Live").
        """
        before = tail.last_step
        points = tail.read_new()
        now = time.monotonic()
        if points or final:
            if self._stalled:
                logger.info("job view: rank %d trains on; it counts again", rank)
            self._progress_at, self._stalled = now, False
        elif not self._stalled and now - self._progress_at > self.stall_after():
            self._stalled = True
            logger.warning(
                "job view: rank %d wrote no point for %.0f s (its training stalls?); it is "
                "left out of the live intervals until it trains on",
                rank,
                now - self._progress_at,
            )
        if self._stalled:
            return JobPartial()
        return JobPartial.of_rank(rank, points, last_step=before, finished=final)

    def _run(self) -> None:
        # Rounds start at multiples of the period of the wall clock, numbered by that
        # multiple: every rank (on synchronised clocks) agrees on a round's number and start.
        name = threading.current_thread().name
        period = self.period
        while not self._stop.wait(period - time.time() % period):
            try:
                self._round_trip(round_number(period, time.time()))
                self.thread_cpu[name] = time.thread_time()
            except Exception:
                logger.exception(
                    "A round of the live job view failed; the live view stops "
                    "(the end of training still writes it)"
                )
                return

    def _write_loop(self) -> None:
        view = self.view
        while view is not None and not self._stop.is_set():
            self._written.wait()
            self._written.clear()
            if self._stop.is_set():
                return
            try:
                view.write()
                self.thread_cpu[threading.current_thread().name] = time.thread_time()
            except OSError as error:
                logger.warning(
                    "The live job view of %s could not be written (%s); it is kept "
                    "for the next interval",
                    self._job_dir,
                    error,
                )

    def _round_trip(self, number: int) -> None:
        """One round: own new points + the children's, merged; to the parent or rank 0's view.

        ``number``: the round (:data:`FINAL_ROUND` at the end of training). A child's
        message of an earlier round that arrives now is merged too.
        """
        channel, tail = self.channel, self._tail
        assert channel is not None and tail is not None
        final = number == FINAL_ROUND
        with self._lock:
            self._round += 1
            own = self._own_partial(tail, channel.rank, final)
            tree_height = max(1, channel.tree_height)
            base = self._timeout if final else self._round_wait()
            wait = base * channel.height / tree_height
            # The last round is on the training thread: prompt polls (docs/job-view.md, "Tree").
            messages = channel.receive(number, wait, prompt=final) if channel.children else {}
            merged = own
            arrived: set[int] = set()
            for child, items in messages.items():
                for round_number, payload in items:
                    try:
                        subtree = list(channel.subtree(child))
                        merged.merge(decode_message(payload, ranks=subtree))
                    # A message from a store or folder others can write, or a damaged
                    # one: whatever it makes the decoding raise, it is this message's
                    # fault, and one bad message never ends the live view.
                    except Exception as error:
                        logger.warning(
                            "job view: a message of rank %d (round %d) is ignored: %s",
                            child,
                            round_number,
                            error,
                        )
                        continue
                    if round_number >= number:
                        arrived.add(child)
            late = [child for child in channel.children if child not in arrived]
            if late:
                logger.info(
                    "job view, %s: rank(s) %s did not deliver in time", round_name(number), late
                )
            if channel.parent is not None:
                if not channel.send(number, encode_message(merged), base, prompt=final):
                    logger.warning(
                        "job view, %s: rank %d's message did not reach rank %d in time",
                        round_name(number),
                        channel.rank,
                        channel.parent,
                    )
                return
            view = self.view
            assert view is not None and self.info is not None
            # A rank that sent its last message (in this round or an earlier one) is done,
            # not missing.
            self._finished |= merged.finished
            present = set(merged.ranks) | self._finished
            missing = [rank for rank in range(self.info.world_size) if rank not in present]
            view.add(merged, missing=missing)
            appending = final or self._append_due()
            if missing and appending and (missing != self._missing or final):
                # Said when it changes (and at the end), not every round of a dead rank.
                logger.warning(
                    "job view, %s: no points from rank(s) %s", round_name(number), _short(missing)
                )
            if appending:
                self._missing = missing
        view.watch.own_work(channel.rank, self._view_cpu())
        try:
            view.judge(final=final)
        except OSError as error:
            logger.warning(
                "job view: the state file of %s cannot be written (%s)", self._job_dir, error
            )
        if appending:
            self._written.set()

    def _view_cpu(self) -> float:
        """CPU seconds this rank's live-view threads used so far (the calling one's now)."""
        spent = dict(self.thread_cpu)
        current = threading.current_thread()
        if current is self._thread or current is self._writer:
            spent[current.name] = time.thread_time()
        return sum(spent.values())

    def _append_due(self) -> bool:
        """Rank 0: whether this round appends to the job files (every ``interval``).

        Reads the control file first: a new ``job_view_interval`` or new
        thresholds take effect from this round (docs/job-view.md).
        """
        view, control = self.view, self._control
        if control is not None and view is not None:
            settings = control.read()
            if settings:
                interval = settings.pop("job_view_interval", None)
                if interval is not None:
                    self.interval = max(float(interval), self.period)
                    view.rounds_per_write = rounds_per_interval(self.interval, self.period)
                    view.interval_seconds = self.interval
                if settings:
                    view.watch.change(**settings)
        now = time.monotonic()
        if now - self._appended_at >= self.interval - self.period / 2:
            self._appended_at = now
            return True
        return False


def _short(ranks: list[int]) -> str:
    return ranges_text(ranks, limit=200)
