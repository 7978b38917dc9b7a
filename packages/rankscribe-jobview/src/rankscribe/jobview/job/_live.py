"""Rank 0's live job view: intervals of merged points appended to the job files.

Each interval, the ranks' new points reach rank 0 up a tree as one merged
:class:`~rankscribe.jobview.job._partials.Partial`. :class:`LiveJobView`
keeps what has arrived but cannot be written yet, writes the steps every
rank of the interval has passed, and folds them into bounded verdict state
(:class:`LiveVerdicts`): per rank a few counters and a fixed histogram, never
a series. Its memory is bounded by what one interval brings (and by the
skew between the fastest and the slowest rank), not by ranks x steps.
Semantics: ``docs/job-view.md``, "Live" and "Tree".

Where a step is cut: the smallest last step over the ranks the view waits
for — every rank that has not finished and was heard from in the last
:data:`PATIENCE` intervals (a rank not heard from yet counts as heard at the
start). A step at or below it is complete and is written once; a rank
silent for longer is left behind (and named missing), and points that
arrive later for a step already written are dropped from the live file
with a warning and counted — the offline merge counts them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from rankscribe.jobview._checks import (
    check_bool,
    check_callable,
    check_host,
    check_int,
    check_path,
    check_seconds,
    wrong_type,
)
from rankscribe.jobview._session import HParamsRun, job_session
from rankscribe.jobview.job._evidence import SKEW_TAG, LiveVerdicts
from rankscribe.jobview.job._files import (
    AppendedJobFiles,
    Curve,
    now,
    tag_curves,
)
from rankscribe.jobview.job._partials import Partial
from rankscribe.jobview.job._ranges import ranges_text
from rankscribe.jobview.job._samples import HeldSamples
from rankscribe.jobview.job._watch import TimingWatch, VerdictCallback, WatchSettings
from rankscribe.jobview.job.verdicts._record_types import StragglerRecord, VerdictRecord
from rankscribe.jobview.job.verdicts._records import records_from_verdicts
from rankscribe.jobview.job.verdicts._sentences import live_verdict_lines
from rankscribe.ranks.files import UnsafeFileError, atomic_write, file_mode, read_regular
from rankscribe.ranks.jsondata import JSONDataError, parse_json

logger = logging.getLogger(__name__)

__all__ = [
    "LIVE_SPANS_KEY",
    "LIVE_STATE_NAME",
    "PATIENCE",
    "WRITE_WAIT",
    "LiveJobView",
    "LiveVerdicts",
    "live_spans",
    "read_live_state",
    "state_ended",
    "state_onsets",
    "state_spans",
]

#: Intervals a silent rank holds the live file back before it is left behind.
PATIENCE = 3
#: The live view's state beside the job files: the verdicts so far, each rank's last step.
LIVE_STATE_NAME = ".rankscribe-live.json"
#: How long a write waits for one under way (seconds) before it gives up.
WRITE_WAIT = 60.0
#: A judgement is repeated no sooner than this many times its CPU time (the judging
#: thread's: what a blocking ``on_verdict`` or a busy machine's descheduling adds to its
#: wall time is not judging, and spaces nothing out).
JUDGE_SPACING = 5.0
#: A state file larger than this is not read (it holds one entry per rank).
_MAX_STATE_BYTES = 32 << 20


class LiveJobView:
    """Rank 0's live job view of ``job_dir`` (see the module docstring).

    :meth:`add` takes each interval's merged partial (from the thread that
    receives them); :meth:`write` appends what is complete (from the thread
    that writes; the two may differ, so a slow filesystem never holds up the
    tree); :meth:`finish` writes everything left and closes the files.

    Its arguments are checked when it is made (a bad one raises the job view's
    ``JobViewParamTypeError`` or ``JobViewParamValueError`` naming it): ``world_size``
    and ``rounds_per_write`` ints >= 1, ``tensorboard`` a bool, ``host`` a name that
    can be part of a file name, ``on_verdict`` a function, ``settings`` a
    ``WatchSettings`` (each of the last three may be None).
    """

    def __init__(
        self,
        job_dir: str | os.PathLike[str],
        *,
        world_size: int,
        tensorboard: bool = False,
        host: str | None = None,
        on_verdict: VerdictCallback | None = None,
        rounds_per_write: int = 1,
        settings: WatchSettings | None = None,
        interval_seconds: float | None = None,
    ) -> None:
        directory = check_path("job_dir", job_dir)
        world_size = check_int("world_size", world_size, minimum=1, integral=True)
        tensorboard = check_bool("tensorboard", tensorboard)
        host = check_host("host", host)
        check_callable("on_verdict", on_verdict, optional=True)
        rounds_per_write = check_int("rounds_per_write", rounds_per_write, minimum=1)
        if settings is not None and not isinstance(settings, WatchSettings):
            raise wrong_type("settings", "a WatchSettings or None", settings)
        if interval_seconds is not None:
            interval_seconds = check_seconds("interval_seconds", interval_seconds)
        self.directory = directory
        #: Seconds between two writes of the job files and the state file (the job view's
        #: interval; None: unknown): ``show`` tells a running job from one that stopped.
        self.interval_seconds = interval_seconds
        self.started_at = now()
        #: Rounds (``add`` calls) between two writes: the timing rounds of one job-view
        #: interval (docs/job-view.md, "Live"); a silent rank is waited for PATIENCE intervals.
        self.rounds_per_write = rounds_per_write
        #: The recent timings of every rank, judged each round (job/_watch.py).
        self.watch = TimingWatch(on_verdict=on_verdict, job_dir=self.directory, settings=settings)
        self._other_records: list[VerdictRecord] = []
        self._judged_at = 0.0  # time.monotonic() at the end of the last judgement
        self._judge_seconds = 0.0  # the CPU seconds it took (the judging thread's)
        self._state: dict[str, Any] = {}
        self._state_lock = threading.Lock()
        self.world_size = world_size
        self.tensorboard = tensorboard
        self.host = host
        self.state = LiveVerdicts(world_size)
        self.written_through = -(2**63)
        self.intervals = 0
        self.dropped_points = 0
        self._pending = Partial()
        self._samples = HeldSamples()
        self._round_ranks: list[int] = []
        self._heard: dict[int, int] = {}  # rank -> the last interval it was heard in
        self._finished: set[int] = set()
        self._round_missing: list[int] = []
        self._received = 0
        self._written_round = 0
        self._final_round = -1  # the interval a final write wrote through (-1: none yet)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._files: AppendedJobFiles | None = None
        self._margin_tags: list[str] = []
        self._line_tags: list[str] = []
        self._laid_out = 0

    @property
    def paths(self) -> list[str]:
        return list(self._files.paths.values()) if self._files is not None else []

    def add(self, partial: Partial, *, missing: Sequence[int] = ()) -> None:
        """One interval's merged partial; ``missing``: ranks whose points did not arrive."""
        self.watch.add(partial.per_rank)
        with self._lock:
            late = partial.drop_through(self.written_through)
            if late:
                self.dropped_points += late
                logger.warning(
                    "live job view of %s: %d points arrived for steps already written "
                    "(ranks that missed intervals); the offline merge counts them",
                    self.directory,
                    late,
                )
            self._pending.merge(partial)
            self._round_ranks = partial.ranks
            self._round_missing = list(missing)
            self._received += 1
            for rank in partial.ranks:
                self._heard[rank] = self._received
            self._finished |= partial.finished

    def write(self, *, final: bool = False, timeout: float = WRITE_WAIT) -> bool:
        """Append the steps every rank of the latest interval passed (all of them if ``final``).

        Returns False when there was nothing new to write. Waits at most
        ``timeout`` seconds for a write under way (another thread's, stuck on a
        hung filesystem) and then raises :class:`TimeoutError` (an ``OSError``)
        naming the directory, so the end of training never hangs on it.
        """
        with self._writing(timeout):
            return self._write(final)

    @contextlib.contextmanager
    def _writing(self, timeout: float) -> Iterator[None]:
        if not self._write_lock.acquire(timeout=check_seconds("timeout", timeout)):
            raise TimeoutError(
                f"the job view's files in {self.directory} are still being written after "
                f"{timeout:g} s (a slow or hung filesystem?); run `rankscribe-lineage merge "
                f"{self.directory}` once it answers"
            )
        try:
            yield
        finally:
            self._write_lock.release()

    def _write(self, final: bool) -> bool:
        with self._lock:
            if self._received == self._written_round and not final:
                return False
            if final and self._final_round == self._received:
                # Nothing arrived since the last final write (finish() after the last
                # round's write): its files and state file are on disk as they stand.
                return False
            if self._received - self._written_round > self.rounds_per_write:
                logger.warning(
                    "live job view of %s fell behind (a slow filesystem?): intervals %d-%d "
                    "are written together",
                    self.directory,
                    self._written_round + 1,
                    self._received,
                )
            self._written_round = self._received
            cut = (2**63 - 1) if final else self._cut()
            written, self._pending = self._pending.split(cut)
            self._pending.last_steps = dict(written.last_steps)
            missing = list(self._round_missing)
        if cut <= self.written_through and not final:
            return False
        self.state.missing_now = missing
        curves = self._curves(written)
        verdict_step = max(
            (int(curve.steps[-1]) for curve in curves if len(curve.steps)), default=None
        )
        # Later points at or below the cut are late (every rank waited for had passed it).
        self.written_through = max(self.written_through, cut)
        settling = final and self.watch.has_open_onsets
        if settling:
            # The whole run's judgement of every step settles the open onsets it can
            # before the verdicts are written (the end's judgement settles the rest); the
            # round thread has stopped.
            self._judge_open_onsets()
            self.watch.settle(self.state.straggler_onsets)
        # Where the verdicts' slowness ends in the whole run's evidence: for one the next
        # judgements end (TimingWatch.judge's run_until), and, at the end of training, for
        # those that ended before this evidence showed where (their spans) and those over.
        self.state.keep_slow_until(self.watch.span_starts())
        if final:
            # A slowness the last judgement no longer named, over in the whole run's
            # evidence, ends with its span before the verdicts are written: the whole
            # run's judgement from its onset to the last step, which may still name its
            # rank, is judged from the step after that span (TimingWatch.end_over,
            # over_onsets). Its span start is unchanged: the evidence kept above holds.
            self.watch.end_over(self.state.straggler_over)
        verdicts = self._job_verdicts(onsets_judged=settling)
        if final:
            self.watch.end_spans(self.state.straggler_until)
            self._cost_ended_spans()
            # the records the last text and state file give: the lineage's cost
            self.watch.take_costs(self.state.straggler_records)
        if verdict_step is not None:
            curves.extend(_verdict_curves(verdicts, verdict_step, len(self._round_ranks)))
        self.intervals += 1
        # TensorBoard's text gets the sentences `show` prints of the live job.
        self._append(curves, text=live_verdict_lines(self.watch.records, verdicts, final=final))
        # Divergence, gradients and non-finite losses come from the written steps;
        # stragglers from the watch's window (judged each round: judge()).
        self._other_records = [
            record
            for record in records_from_verdicts(verdicts)
            if record["kind"] in ("divergence", "gradient", "nonfinite")
        ]
        self._write_state(verdicts, final=final)
        if final:
            self._final_round = self._received
        return bool(curves) or final

    def _cost_ended_spans(self) -> None:
        """At the end of training: each ended verdict whose span the whole run's evidence
        shows takes that span's cost (``TimingWatch.cost_spans``)."""
        self.watch.cost_spans(self.state.span_records(self.watch.spans_to_cost()))

    def judge(self, *, final: bool = False) -> list[StragglerRecord | VerdictRecord]:
        """Judge the recent timings (each round); the records that appeared or changed.

        Calls ``on_verdict`` with each of them and rewrites the state file's
        ``verdict_records``, so ``rankscribe-lineage show`` sees them within a round.
        A judgement that took much CPU (thousands of ranks, or an ``on_verdict`` that
        computes) is not repeated before :data:`JUDGE_SPACING` times that CPU time has
        passed, so judging takes at most a fifth of a core; ``final`` judges
        regardless, and after a final :meth:`write` of every interval received it is
        the end of training's judgement (``TimingWatch.judge``'s ``final``: the verdicts
        neither it nor the whole run names end, every onset is settled; then each
        standing record takes its cost from the final write's judgement of the whole
        run again: ``TimingWatch.take_costs``). The records the
        written steps gave (gradients, divergence, non-finite losses) do not wait for it:
        a round whose window judgement waits still tells their new ones.
        """
        started, cpu = time.monotonic(), time.thread_time()
        if not final and started - self._judged_at < JUDGE_SPACING * self._judge_seconds:
            told = self.watch.take_others(self._other_records)
            if told:
                with self._state_lock:
                    if self._state:
                        self._state["verdict_records"] = self.watch.records
                        self._store_state()
            return list(told)
        # The whole run's onsets as of the last write (its judgement of the written steps);
        # the end of training's judgement once the final write wrote every interval.
        end = final and self._final_round == self._received
        changed = self.watch.judge(
            self._other_records,
            run_onsets=self.state.straggler_onsets,
            run_until=self.state.straggler_until,
            final=end,
        )
        if end:  # the final write's judgement of the whole run, with these onsets
            changed.extend(self.watch.take_costs(self.state.straggler_records))
            self._cost_ended_spans()  # those it ended (the writer is done with the evidence)
        self._judged_at = time.monotonic()
        self._judge_seconds = time.thread_time() - cpu
        with self._state_lock:
            if self._state:
                self._state["verdict_records"] = self.watch.records
                self._state["judged_at"] = now()
                if end:  # the verdicts it ended are in the state file too
                    self._state["ended_records"] = [record.copy() for record in self.watch.ended]
                self._store_state()
            elif changed:  # before the first interval is written
                self._state = self._state_of({}, final=False)
                self._store_state()
        return changed

    def _cut(self) -> int:
        """The last step every rank the view waits for has passed (-1: none yet)."""
        waiting = [
            rank
            for rank in range(self.world_size)
            if rank not in self._finished
            and self._received - self._heard.get(rank, 0) < PATIENCE * self.rounds_per_write
        ]
        steps = [self._pending.last_steps.get(rank, -1) for rank in waiting]
        if not steps:  # every rank finished or fell silent: what arrived is complete
            known = [step for step in self._pending.last_steps.values() if step >= 0]
            return max(known, default=-1)
        return min(steps)

    def _curves(self, written: Partial) -> list[Curve]:
        curves: list[Curve] = []
        # The machine samples' bands hold each rank's latest one, earlier intervals' too.
        bands = {**written.tags, **self._samples.bands(written.samples(), written.last_steps)}
        for tag in sorted(bands):
            curves.extend(tag_curves(tag, bands[tag]))
            if tag not in self._margin_tags:
                self._margin_tags.append(tag)
        curves.extend(self.state.add(written))
        if any(curve.tag == SKEW_TAG for curve in curves) and SKEW_TAG not in self._line_tags:
            self._line_tags.append(SKEW_TAG)
        return curves

    def _append(
        self,
        curves: list[Curve],
        session: HParamsRun | None = None,
        verdicts: Mapping[str, Any] | None = None,
        text: Sequence[str] = (),
    ) -> None:
        if not curves and session is None:
            return
        layout_grew = False
        if self._files is None:
            self._files = AppendedJobFiles(
                self.directory, tensorboard=self.tensorboard, host=self.host
            )
            layout_grew = True
        layout_grew = layout_grew or len(self._margin_tags) != self._laid_out
        self._laid_out = len(self._margin_tags)
        layout = (sorted(self._margin_tags), list(self._line_tags)) if layout_grew else None
        self._files.append(
            curves, now(), layout=layout, session=session, verdicts=verdicts, verdict_text=text
        )

    def write_started(self) -> None:
        """Write the state file of a job whose training just started (interval 0, no step
        written), so that ``show`` says it runs from its first seconds; a failure is logged
        (the job trains on, and the first interval writes the file again)."""
        with self._state_lock:
            if self._state:
                return  # an interval or a verdict wrote it already
            try:
                self._state = self._state_of({}, final=False)
                self._store_state()
            except OSError as error:
                self._state = {}
                logger.warning(
                    "The live state file of %s was not written at the start: %s",
                    self.directory,
                    error,
                )

    def _write_state(self, verdicts: Mapping[str, Any], *, final: bool) -> None:
        with self._state_lock:
            self._state = self._state_of(verdicts, final=final)
            self._store_state()

    def _store_state(self) -> None:
        data = json.dumps(self._state, allow_nan=True).encode("utf-8")
        atomic_write(os.path.join(self.directory, LIVE_STATE_NAME), [data], mode=file_mode(True))

    def _state_of(self, verdicts: Mapping[str, Any], *, final: bool) -> dict[str, Any]:
        state: dict[str, Any] = {
            "interval": self._received,
            "wall_time": now(),
            "started_at": self.started_at,
            "final": final,
            # -1 until a step is written (the reader's "a step before the first"): the
            # internal floor of -2**63 is no step the state file may hold.
            "written_through_step": max(self.written_through, -1),
            "ranks_in_interval": len(self._round_ranks),
            "missing_in_interval": ranges_text(self.state.missing_now),
            "dropped_points": self.dropped_points,
            "world_size": self.world_size,
            "verdicts": dict(verdicts),
            "verdict_records": self.watch.records,
            "ended_records": [record.copy() for record in self.watch.ended],
        }
        if self.interval_seconds is not None:
            state["interval_seconds"] = self.interval_seconds
        return state

    def finish(
        self,
        *,
        hparams: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float] | None = None,
        timeout: float = WRITE_WAIT,
    ) -> dict[str, float | int | str]:
        """Write everything left, and the HParams session to TensorBoard; return the verdicts.

        ``timeout``: as :meth:`write`'s.

        ``hparams``/``metrics``: the job's hyper-parameters and final metrics
        (from the merged lineage), as :func:`~rankscribe.jobview.write_job_view` takes.
        """
        self.write(final=True, timeout=timeout)
        with self._writing(timeout):
            if (
                self._files is not None
                and self._files.tensorboard
                and (hparams is not None or metrics is not None)
            ):
                # with the end-of-training verdicts as sentences, for the text tab
                self._append([], job_session(hparams, metrics, now()), self._job_verdicts())
            if self._files is not None:
                self._files.close()
        return self.verdicts()

    def verdicts(self) -> dict[str, float | int | str]:
        """The job's verdicts so far (its ``job/`` keys), with the straggler verdicts the
        live view named and their spans (:data:`LIVE_SPANS_KEY`) once there is one."""
        verdicts = self._job_verdicts()
        spans = live_spans(self.watch)
        if spans:
            verdicts[LIVE_SPANS_KEY] = spans
        return verdicts

    def _job_verdicts(self, *, onsets_judged: bool = False) -> dict[str, float | int | str]:
        """The job's verdicts, the straggler's onset the one the live view named it with.

        While a standing verdict's onset is open (``TimingWatch.judge``), the whole run is
        judged once more without it (:meth:`_judge_open_onsets`; not again when
        ``onsets_judged``: it was, since the last settling); the verdicts written give the
        record's own."""
        open_onsets = self.watch.has_open_onsets
        # The round thread reads the onsets kept: only the judgement they are for keeps them.
        # A rank whose slowness the end of training ended as over is judged from the step
        # after its span (TimingWatch.over_onsets), the span its ended record gives.
        onsets = {
            **self.watch.over_onsets(self.state.stragglers.tags),
            **live_onsets(self.watch.records),
        }
        verdicts = self.state.verdicts(
            onsets, explained=self.watch.own_work_explains, keep_onsets=not open_onsets
        )
        if open_onsets and not onsets_judged:
            self._judge_open_onsets()
        return verdicts

    def _judge_open_onsets(self) -> None:
        """Judge the whole run with the settled onsets alone, keeping the onsets it names
        (``LiveVerdicts.straggler_onsets``): what an open onset settles with."""
        self.state.verdicts(live_onsets(self.watch.settled), explained=self.watch.own_work_explains)


def live_onsets(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], int]:
    """(timing tag, rank) -> the onset of the standing live straggler record naming the
    rank under that timing.

    The judgement of the whole run places the onset anew, a block earlier or later
    than the live view did when it named the rank; given these, the job's verdicts keep
    the onset a rank was named with, so the record, the message, ``show``, the merged
    lineage and the TensorBoard text all give one step (docs/job-view.md, "The onset").
    """
    onsets: dict[tuple[str, int], int] = {}
    for record in records:
        if record["kind"] == "straggler" and isinstance(record["since_step"], int):
            for rank in record["ranks"]:
                onsets.setdefault((record["tag"], rank), record["since_step"])
    return onsets


def state_onsets(job_dir: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """:func:`live_onsets` of the standing records in ``job_dir``'s live state file (none
    without one): a later merge of the job's files keeps the onsets the live view named
    its ranks with. The file is read as :func:`read_live_state` reads it, and a record
    that is not a straggler record of a tag, int ranks and an int step is left out."""
    return live_onsets(_state_stragglers(job_dir, "verdict_records"))


def state_ended(job_dir: str | os.PathLike[str]) -> list[tuple[str, int, int]]:
    """(timing tag, rank, onset) of each straggler record in ``job_dir``'s live state
    file's ``ended_records`` (the verdicts the live view ended), read and left out as
    :func:`state_onsets` reads and leaves out its records: a later merge judges a rank
    whose slowness since that onset is over from the step after it, as the live view's
    own verdicts did at the end of training."""
    return [
        (record["tag"], rank, record["since_step"])
        for record in _state_stragglers(job_dir, "ended_records")
        for rank in record["ranks"]
    ]


def _state_stragglers(job_dir: str | os.PathLike[str], key: str) -> list[dict[str, Any]]:
    """The straggler records of a tag, int ranks and an int step under ``key`` of
    ``job_dir``'s live state file (none without one)."""
    state = read_live_state(check_path("job_dir", job_dir))
    records = state.get(key) if state is not None else None
    if not isinstance(records, list):
        return []

    def is_step(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63

    return [
        record
        for record in records
        if isinstance(record, dict)
        and record.get("kind") == "straggler"
        and isinstance(record.get("tag"), str)
        and is_step(record.get("since_step"))
        and isinstance(record.get("ranks"), list)
        and all(is_step(rank) for rank in record["ranks"])
    ]


#: The merged lineage's key for the straggler verdicts the live view named, with their spans.
LIVE_SPANS_KEY = "job/straggler_live_spans"
#: Spans it lists at most (the latest; a long job's earlier ones are counted).
_MOST_SPANS = 20


def live_spans(watch: TimingWatch) -> str:
    """The straggler verdicts ``watch`` named while the job ran, each with its span:
    ``rank 1 forward steps 101-300`` (ended), ``... steps 400-end`` (standing at the end)."""
    return _spans_text(
        [*watch.ended, *(record for record in watch.records if record["kind"] == "straggler")]
    )


def state_spans(job_dir: str | os.PathLike[str]) -> str:
    """:func:`live_spans` of ``job_dir``'s live state file: its ended records, then its
    standing straggler records (as :func:`state_onsets` reads them, each with a str
    ``timing`` and, where it has one, an int ``until_step``); "" without one. A later
    merge of the job's files gives them as the live view did."""
    records = [
        record
        for key in ("ended_records", "verdict_records")
        for record in _state_stragglers(job_dir, key)
        if isinstance(record.get("timing"), str) and _is_step_or_none(record.get("until_step"))
    ]
    return _spans_text(records)


def _is_step_or_none(value: Any) -> bool:
    """Whether ``value`` is None or an int (not a bool)."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _spans_text(records: Sequence[Mapping[str, Any]]) -> str:
    """The spans of straggler ``records``, in their order (:func:`live_spans`)."""
    spans = []
    for record in records:
        until = record.get("until_step")
        ranks = ",".join(str(rank) for rank in record["ranks"])
        spans.append(
            f"rank {ranks} {record['timing']} steps {record['since_step']}-"
            f"{until if until is not None else 'end'}"
        )
    if len(spans) > _MOST_SPANS:
        earlier = len(spans) - _MOST_SPANS
        spans = [f"{earlier} earlier", *spans[-_MOST_SPANS:]]
    return "; ".join(spans)


def _verdict_curves(verdicts: Mapping[str, Any], step: int, ranks: int) -> list[Curve]:
    """The numeric verdicts so far as job scalars at ``step`` (per-rank keys left out)."""
    steps = np.asarray([step], dtype=np.int64)
    curves = [Curve("job/ranks_in_interval", steps, np.asarray([float(ranks)]))]
    for key, value in sorted(verdicts.items()):
        if key.count("/") != 1 or isinstance(value, (str, bool)):
            continue
        if not math.isfinite(float(value)):
            continue
        curves.append(Curve(key, steps, np.asarray([float(value)])))
    return curves


def read_live_state(job_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The live view's state file of ``job_dir`` (None when there is none or it is unreadable).

    The file may be planted or damaged: one of another user's (or one others may
    write) is refused with a warning naming its owner, JSON nested too deep or too large is
    refused, and a number that is no count, step or time (NaN, 1e400, 10**20 seconds)
    is left out, with a warning, so that whoever shows it shows it as unknown.
    """
    path = os.path.join(os.fspath(job_dir), LIVE_STATE_NAME)
    try:
        # A link, a FIFO (which would block show for good), an oversized file and a file
        # of another user (which could say anything of this job) are refused.
        data = read_regular(path, limit=_MAX_STATE_BYTES, owned=True)
    except UnsafeFileError as error:
        logger.warning("%s: shown as no live view", error)
        return None
    except OSError:
        return None
    try:
        state = parse_json(data, what=f"the live state file {path}", max_bytes=_MAX_STATE_BYTES)
    except JSONDataError as error:
        logger.warning("%s: shown as no live view", error)
        return None
    if not isinstance(state, dict):
        return None
    for key, fits in _STATE_NUMBERS.items():
        if key in state and not fits(state[key]):
            logger.warning(
                "the live state file %s holds %s %.40r, which is no %s: shown as unknown",
                path,
                key,
                state[key],
                {"wall_time": "time", "started_at": "time", "interval_seconds": "duration"}.get(
                    key, "count or step"
                ),
            )
            del state[key]
    return state


def _is_time(value: Any) -> bool:
    """A wall-clock time the platform can show (finite, within time_t)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        time.localtime(value)
    except (ValueError, OverflowError, OSError):
        return False
    return True


def _is_count(value: Any) -> bool:
    """An int in int64's range, from -1 (a step before the first)."""
    return not isinstance(value, bool) and isinstance(value, int) and -1 <= value < 2**63


def _is_seconds(value: Any) -> bool:
    """A duration: a finite number of seconds >= 0, at most a year."""
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and 0 <= value <= 366 * 86400
    )


_STATE_NUMBERS = {
    "wall_time": _is_time,
    "started_at": _is_time,
    "interval_seconds": _is_seconds,
    "interval": _is_count,
    "written_through_step": _is_count,
    "ranks_in_interval": _is_count,
    "dropped_points": _is_count,
    "world_size": _is_count,
}
