"""SummaryCollector: MindSpore's callback that collects common training data, rank-aware.

This module holds the callback hooks and the quiet-step hot path
(``step_end``'s short path, docs/collector-schedule.md); the rest lives in:

=========================  =====================================================
collection/_options.py     the arguments, checked into one ``CollectorArguments``
_run.py                    what a run opens and closes: the record, the schedule,
                           the landscape saver; the job's claim of its directory,
                           the lineage merger and the live view (docs/layout.md)
collection/_schedule.py    which steps (epochs) are collected, the plugin filter
collection/_extractor.py   loss, histograms, input images, graph from the run state
_lineage.py                this rank's lineage values; the job lineage on rank 0
_settings.py               the live job view's interval and verdict callback
landscape/_saver.py        parameter files and ``train_metadata.json``
_series.py, _timings.py    timings, fingerprints, the series of the job view
_reduced.py                ``allreduce_gradients``: a loop's own gradient reduce
system/                    the rank's machine, sampled off the training thread
cost/                      what the collector costs a step, and its budget
=========================  =====================================================

Writing is :class:`rankscribe.writer.SummaryRecord`'s. On several ranks the
job first claims ``summary_dir`` (or the next free ``<dir>-2``, per
``on_exists``), then each rank writes into ``rankscribe.ranks.rank_dir``
(``<dir>/rank_<r>``), collects tensors for its share of the job's
tensor-collection steps, and rank 0 writes the merged job lineage into the
job's directory, with the job view from every rank's series (``docs/job-view.md``).
"""

from __future__ import annotations

import atexit
import logging
import math
import operator
import os
import weakref
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from rankscribe.collector import _clock
from rankscribe.collector._callback import (
    MODES,
    Callback,
    CallbackParams,
    QuietSteps,
    RunContext,
    own_step_hooks,
)
from rankscribe.collector._fingerprint import DEFAULT_FINGERPRINT_BUDGET
from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.collection._extractor import GRAPH_TAG, LOSS_TAG, Extractor
from rankscribe.collector.collection._light_steps import LIGHT_AHEAD, LightSteps
from rankscribe.collector.collection._options import check_one_of_a_kind, collector_arguments
from rankscribe.collector.collection._schedule import Collect, CollectionSchedule, total_units
from rankscribe.collector.cost._budget import CostBudget, check_cost_budget
from rankscribe.collector.cost._slowdown import HEAVY, RECORDED, StepTimes
from rankscribe.collector.errors import CollectorValueError
from rankscribe.collector.jobview._reduced import ReducedGradients, allreduce_gradients
from rankscribe.collector.jobview._series import (
    STEP_TIME_WRITE_AT_ONCE,
    STEP_TIME_WRITE_INTERVAL,
    SeriesRecorder,
)
from rankscribe.collector.jobview._settings import (
    check_gradient_probe,
    check_job_view_interval,
    check_on_verdict,
)
from rankscribe.collector.jobview._timings import StepTimings
from rankscribe.collector.run._lineage import DEFAULT_MERGE_TIMEOUT, LineageRecorder, lost_a_peer
from rankscribe.collector.run._run import CollectorRun
from rankscribe.collector.system._sampler import SystemSampler, check_system_interval
from rankscribe.jobview.feed import LiveRankView, VerdictCallback
from rankscribe.ranks import Coordinator, OnExists, RankInfo
from rankscribe.ranks.exits import (
    Terminated,
    before_abort,
    end_cleanly_on_sigterm,
    forget_terminated_mark,
    mark_terminated_and_wait,
    sigterm_received,
)
from rankscribe.writer import SummaryRecord
from rankscribe.writer.operators import (
    discard_dropped,
    discard_pending,
    has_deferred,
    keep_next,
    skip_flag,
)

if TYPE_CHECKING:
    from rankscribe.collector.landscape._saver import LandscapeSaver

logger = logging.getLogger(__name__)

#: How many wrappers deep the landscape's backbone is looked for.
_WRAPPER_DEPTH = 8
#: Seconds at least between two epoch ends' flushes (docs/collector-schedule.md, "Epoch
#: ends"): epochs of milliseconds do not each wake the writer to encode and fsync.
EPOCH_FLUSH_INTERVAL = 1.0

__all__ = ["SummaryCollector"]


def _keep_every_plugin(_plugin: str) -> bool:
    return True


def _keep_no_plugin(_plugin: str) -> bool:
    return False


def _still_pending(record: SummaryRecord, decision: Collect) -> bool:
    """Whether ``record`` has values waiting for the step (it has some) once the summary
    operators' values that ``decision``'s plugin filter drops (the tensors of a collected
    step off this rank's tensor steps) are forgotten, as the step's ``record`` would drop
    them: values added to the record, or operators' values the step keeps."""
    keep = decision.plugin_filter
    return not discard_dropped(keep if keep is not None else _keep_every_plugin) or (
        record.has_pending
    )


class SummaryCollector(Callback):
    """Collect loss, weights, input images, graphs and lineage of a training run.

    Same arguments and meaning as MindSpore's ``SummaryCollector``
    (docs/collector-schedule.md):

    Args:
        summary_dir: where the summary files go (created if missing). On
            several ranks, rank ``r`` writes into ``summary_dir/rank_<r>`` and
            rank 0 writes the merged job lineage into ``summary_dir``. Ranks
            given different directories (``"summary_dir" + str(rank)``) each
            write into their own ``<dir>/rank_<r>``, and the job's files go to
            rank 0's (docs/layout.md, "Ranks that name directories of their own").
        collect_freq: collect every ``collect_freq`` steps (epochs in dataset
            sink mode); the first step is always collected.
        num_process: threads encoding heavy values (histograms, images) in the
            writer (at most the number of CPUs).
        collect_specified_data: what to collect (``collect_metric``,
            ``collect_graph``, ``collect_train_lineage``, ``collect_eval_lineage``,
            ``collect_input_data``, ``collect_dataset_graph``,
            ``histogram_regular``, ``collect_landscape``).
        keep_default_action: True to lay ``collect_specified_data`` over the
            defaults, False to collect only what it names.
        custom_lineage_data: a dict of str to int, float or str shown with the
            lineage (over ``MINDINSIGHT_HYPER_CONFIG``'s ``custom_lineage_data``).
        collect_tensor_freq: like ``collect_freq``, for TensorSummary data only;
            by default at most 20 steps of the run.
        max_file_size: bytes per summary file (None: no limit).
        export_options: ``{'tensor_format': 'npy'}`` also saves tensors as npy files.

    RankScribe additions (keyword-only):
        merge_timeout: seconds rank 0 waits for the other ranks' lineage.
        coordinator: the collectives used for the lineage merge (default: one
            made for the job by :func:`rankscribe.ranks.create_coordinator` when
            the collector is first entered, kept for its later runs).
        rank_info: this process's rank (default :func:`rankscribe.ranks.detect`).
        formats: the writer's output formats: ``"mindinsight"`` and/or
            ``"tensorboard"`` (a TensorBoard event file next to the summary files).
        fingerprints: record ``rankscribe/param_fingerprint`` at step 0 (every
            byte) and at collected steps (a slice of at most ``fingerprint_budget``
            bytes, an int >= 1024, default 4 MiB); docs/job-view.md.
        step_times: record ``rankscribe/step_time`` and ``rankscribe/data_wait`` at
            every step (True, the default); False: neither is measured nor written,
            and the job view names this rank in ``job/untimed_ranks`` (it judges no
            straggler from its step times; docs/job-view.md, "Timings").
        job_view_interval: seconds between live updates of the job view (docs/job-view.md,
            "Live"); None: ``RANKSCRIBE_JOB_VIEW_INTERVAL``, else 60; 0: at the end only.
        on_verdict: a callable rank 0 calls, from the job view's own thread, with each
            verdict record (a plain dict: docs/job-view.md, "Verdict records") when it
            appears or changes; an exception in it is logged, never raised. None: none.
        on_exists: on a job of several ranks, what the job does when ``summary_dir``
            belongs to another job (docs/layout.md, "Two jobs, one directory"):
            ``"new"`` (default) writes into the next free ``<dir>-2``, ``<dir>-3``,
            ... and says where; ``"error"`` raises
            :class:`rankscribe.ranks.JobDirClaimedError`; ``"append"`` writes into
            it anyway. A directory this job claimed already is used as it is; a
            single process writes into ``summary_dir`` as MindSpore does.
        system_interval: seconds between samples of this rank's process, host and
            accelerator (``rankscribe/system/*``, docs/system-metrics.md); None:
            ``RANKSCRIBE_SYSTEM_INTERVAL``, else 10; 0: none; else from 0.01 to 86400.
        landscape_budget: bytes of loss-landscape parameter files each rank writes at
            most (``collect_landscape``, docs/collector-schedule.md, "Loss landscape"): an
            int >= 1, or ``"all"`` to save every set of the intervals; None:
            ``RANKSCRIBE_LANDSCAPE_BUDGET``, else 64,000,000. When the sets do not all fit,
            an evenly spread part of the later intervals is saved, and rank 0 says which.
        cost_budget: the share of the training step the collector may cost (its work on
            the training thread and its threads' CPU), a number >= 0 and < 1; None:
            ``RANKSCRIBE_COST_BUDGET``, else 0.02 (2 %); 0 or ``"off"``: measured and
            recorded, never shed. Over it, optional work is shed: histograms at fewer
            collected steps, then collected steps' fingerprints, then unsaved landscape
            sets; never the loss, timings or lineage. The cost is recorded as
            ``rankscribe/collector_cost/*`` (docs/collector-cost.md, "The cost budget").
        gradient_probe: on a ``DistributedDataParallel`` network, record each rank's
            local gradient norm per bucket before the reduce and when its last bucket
            was ready (``rankscribe/gradient/*``, through a DDP communication hook that
            chains a hook of the user's registered after it; docs/job-view.md,
            "Gradients"). True by default; False: no hook is registered.

    Timings for the job view (docs/job-view.md, "Timings"): step time, data
    wait, forward time (torch module hooks) and :meth:`section`.
    """

    def __init__(
        self,
        summary_dir: str | os.PathLike[str],
        collect_freq: int = 10,
        num_process: int = 32,
        collect_specified_data: dict[str, Any] | None = None,
        keep_default_action: bool = True,
        custom_lineage_data: dict[str, int | float | str] | None = None,
        collect_tensor_freq: int | None = None,
        max_file_size: int | None = None,
        export_options: dict[str, Any] | None = None,
        *,
        merge_timeout: float = DEFAULT_MERGE_TIMEOUT,
        coordinator: Coordinator | None = None,
        rank_info: RankInfo | None = None,
        formats: Sequence[str] = ("mindinsight",),
        fingerprints: bool = True,
        fingerprint_budget: int = DEFAULT_FINGERPRINT_BUDGET,
        step_times: bool = True,
        job_view_interval: float | None = None,
        on_exists: OnExists = "new",
        on_verdict: VerdictCallback | None = None,
        system_interval: float | None = None,
        landscape_budget: int | Literal["all"] | None = None,
        cost_budget: float | Literal["off"] | None = None,
        gradient_probe: bool = True,
    ) -> None:
        arguments = collector_arguments(
            summary_dir,
            collect_freq,
            num_process,
            collect_specified_data,
            keep_default_action,
            custom_lineage_data,
            collect_tensor_freq,
            max_file_size,
            export_options,
            merge_timeout=merge_timeout,
            coordinator=coordinator,
            rank_info=rank_info,
            formats=formats,
            fingerprints=fingerprints,
            fingerprint_budget=fingerprint_budget,
            step_times=step_times,
            on_exists=on_exists,
            landscape_budget=landscape_budget,
        )
        options = arguments.collect
        # What the adapters learn while reading this collector's objects stays with it.
        self._adapters = AdapterRegistry()
        self._series = SeriesRecorder(
            fingerprints=arguments.fingerprints,
            fingerprint_parts=self._adapters.fingerprint_parts,
            budget=arguments.fingerprint_budget,
            collect_freq=arguments.collect_freq,
            step_times=arguments.step_times,
        )
        # Bound once: the short path of step_end appends with no call of its own.
        self._keep_step, self._keep_step_time = self._series.step_time_appenders()
        self._keep_steps, self._keep_step_times = self._series.step_time_extenders()
        self._keep_wait_step, self._keep_wait = self._series.data_wait_appenders()
        self._keep_wait_steps, self._keep_waits = self._series.data_wait_extenders()
        self._keep_light_step, self._keep_light_loss = self._series.light_appenders(LOSS_TAG)
        self._timings = StepTimings(
            self._series, self._adapters, gradients=check_gradient_probe(gradient_probe)
        )
        self._step_started: float | None = None
        self._step_time: float | None = None
        # step_end's short path applies to the steps before this one (0: none),
        # and before this time (perf_counter) when step times are due.
        self._quiet_until = 0
        self._step_times_due = 0.0
        # The next collected step before _quiet_until that the short path takes (a light
        # step: its values are the loss alone, read on the host; -1: none), and the step
        # the plan's short path ends at the latest (_plan_quiet).
        self._light_step = -1
        self._quiet_limit = 0
        # The light steps planned ahead that the loop may finish itself (_log_light).
        self._lights = LightSteps()
        # The plugin filter of the record at the short path's end (the light step, else
        # _quiet_until), which the summary operators are told while they skip the steps
        # before it (_keep_next).
        self._quiet_filter: Callable[[str], bool] | None = None
        # Whether values came for the record at this rank's last tensor step (a summary
        # operator's tensor): its tensor steps are then not planned as light steps, which
        # such a value would take off the short path (_light_steps_after).
        self._operator_tensors = False
        # The steps of the short path that a TrainSession or TrainLoop finishes itself
        # (where its other callbacks say they have nothing to do there either): they call
        # nothing here, and are taken at the next call (_take_quiet_steps).
        # docs/collector-cost.md, "Quiet steps".
        self._quiet_steps = QuietSteps(skip_flag(), STEP_TIME_WRITE_AT_ONCE)
        self._quiet_steps.keep_light = self._log_light
        self._own_step_hooks = False  # this class's step_begin and step_end (begin())
        self._last_epoch_flush = -math.inf  # perf_counter of the last epoch end's flush
        #: The short path's time since the last longer step (the cost budget's).
        self._quiet_cost = 0.0
        self._lineage = LineageRecorder(
            collect_dataset_graph=options.collect_dataset_graph,
            collect_train_lineage=options.collect_train_lineage,
            collect_eval_lineage=options.collect_eval_lineage,
            custom_lineage_data=arguments.custom_lineage_data,
            adapters=self._adapters,
        )
        self._extractor = Extractor(options, adapters=self._adapters)
        self._live = LiveRankView(
            check_job_view_interval(job_view_interval), on_verdict=check_on_verdict(on_verdict)
        )
        self._system = SystemSampler(check_system_interval(system_interval))
        self._series.samples = self._system
        self._cost = CostBudget(check_cost_budget(cost_budget), arguments.collect_freq)
        self._run = CollectorRun(
            arguments, adapters=self._adapters, lineage=self._lineage, live=self._live
        )
        self._entered = False
        self._first_step_done = False
        self._sink_mode = False
        #: Between a training run's begin and its end (an exception then: interrupted).
        self._training = False
        #: Puts SIGTERM's default handler back (ranks.exits.end_cleanly_on_sigterm): a
        #: SIGTERM during training stops it, and what was recorded is written first.
        self._sigterm_release: Callable[[], None] | None = None

    # ------------------------------------------------------------------- lifecycle

    @property
    def summary_dir(self) -> str:
        """This rank's ``summary_dir``, or the ``<dir>-N`` the job claimed instead.

        The job's directory when this rank named the same one as rank 0; the one it
        named when the ranks named directories of their own (``"summary_dir" +
        str(rank)``), where its ``rank_<r>`` is; rank 0's is the job's
        (``docs/layout.md``, "Ranks that name directories of their own").
        """
        return self._run.own_dir

    @property
    def directory(self) -> Path | None:
        """Where this rank writes (set once the collector is entered)."""
        return self._run.directory

    @property
    def record(self) -> SummaryRecord | None:
        """The open SummaryRecord (None outside a run)."""
        return self._run.record

    @property
    def schedule(self) -> CollectionSchedule | None:
        return self._run.schedule

    def __enter__(self) -> SummaryCollector:
        self._open()
        self._entered = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._entered = False
        interrupted = exc_type is not None and self._training
        if interrupted:
            self._say_interrupted(exc_type, exc)
        self._close()
        if interrupted and exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self._say_ctrl_c()

    def _say_interrupted(
        self, exc_type: type[BaseException] | None, error: BaseException | None = None
    ) -> None:
        """Training stopped by an exception (``exc_type``, ``error`` when known; None: the
        process exits and training never ended): on every rank of several, an
        ``Exception`` is kept in the rank's stop record (the job view names the rank that
        raised: docs/job-view.md, "Where each rank stopped"), marked when it says the rank
        lost another rank (``run._lineage.lost_a_peer``), and so is a SIGTERM's
        ``Terminated``, marked as the signal's (the rank did not raise on its own); a
        Ctrl-C's ``KeyboardInterrupt`` is recorded once the files are closed
        (:meth:`_say_ctrl_c`); on rank 0, say how to merge.

        The job's lineage is merged at the end of training, which never came; the
        ranks' files and their training start records are on disk, and
        ``rankscribe-lineage merge`` makes the job's lineage from them.
        """
        self._training = False
        info = self._run.info
        if info is None or info.world_size <= 1:
            return
        if exc_type is None and sigterm_received():
            exc_type = Terminated  # (at exit: Python keeps no SystemExit as the last error)
        directory = self._run.directory
        if exc_type is not None and directory is not None:
            if issubclass(exc_type, Terminated):
                self._lineage.stop_training(directory, exc_type.__name__, signal="SIGTERM")
            elif issubclass(exc_type, Exception):
                self._lineage.stop_training(
                    directory, exc_type.__name__, lost_peer=lost_a_peer(error)
                )
        if info.rank != 0:
            return
        why = "the process exited" if exc_type is None else exc_type.__name__
        logger.warning(
            "Training stopped (%s) before the job's lineage was merged: run "
            "`rankscribe-lineage merge %s` once every rank has stopped.",
            why,
            self._run.summary_dir,
        )

    def _say_ctrl_c(self) -> None:
        """Training a Ctrl-C (SIGINT, ``KeyboardInterrupt``) stopped, on a rank of several,
        after its files were closed: its stop record says so, and that it wrote every step
        it ran (a rank killed before it closed them, as ``mpiexec`` kills the ranks left
        when one has ended, leaves no record, and the job view reads it as killed)."""
        info, directory = self._run.info, self._run.directory
        if info is not None and info.world_size > 1 and directory is not None:
            self._lineage.stop_training(directory, KeyboardInterrupt.__name__, signal="SIGINT")

    def _open(self) -> None:
        """A new SummaryRecord in this rank's directory, and a fresh schedule (_run.py)."""
        run = self._run
        if not run.open():
            return
        assert run.info is not None
        self._extractor.rank = run.info.rank
        self._step_started = self._step_time = None
        self._quiet_until, self._light_step = 0, -1
        self._lights.clear()
        self._quiet_steps.stop()
        self._last_epoch_flush = -math.inf
        self._first_step_done = False
        self._sink_mode = False
        self._operator_tensors = False

    def _close(self) -> None:
        self._quiet_until, self._light_step = 0, -1
        self._lights.clear()
        self._quiet_steps.stop()
        self._take_quiet_steps()  # training stopped on an exception: its last steps
        self._system.stop()
        self._timings.close()
        self._write_kept()
        self._run.close()
        self._release_sigterm()
        if self in _unended:
            _unended.discard(self)
            info = self._run.info
            if sigterm_received() and info is not None and info.world_size > 1:
                # (A run a SIGTERM stopped: its ranks end together, _wait_for_peers.)
                _stopped_by_sigterm.append((self._run.summary_dir, info.rank, info.world_size))

    def _release_sigterm(self) -> None:
        release, self._sigterm_release = self._sigterm_release, None
        if release is not None:
            release()

    def _write_kept(self) -> None:
        """Write what the series keeps (step times, timings, collected steps' losses)
        before the record closes: training that stopped on an exception never reached
        the end of training, which writes them (a failure is logged: the exception that
        stopped training is the one the caller sees)."""
        record = self._run.record
        if record is None or not self._series.has_unwritten_step_times:
            return
        try:
            self._series.write_kept_step_times(record)
        except Exception as error:
            logger.error("Writing the kept timings and losses failed: %s", error)

    def close(self) -> None:
        """Close the summary record, and the lineage coordinator this collector made.

        Not needed for a single process, nor usually at all: the coordinator is
        released when the collector is garbage collected or the program exits.
        """
        self._close()
        self._run.shutdown()

    # ----------------------------------------------------------------- callbacks

    def begin(self, run_context: RunContext) -> None:
        params = run_context.original_args()
        check_one_of_a_kind(params.list_callback, SummaryCollector)
        if params.mode not in MODES:
            raise CollectorValueError(
                f"Only support `train` (model.train) and `eval` (model.eval) mode, but got "
                f"`{params.mode}` mode."
            )
        if not self._entered:
            self._open()  # used without `with`: the record lives until end()
        run = self._run
        record = run.record
        assert record is not None
        record.set_mode(params.mode)
        self._sink_mode = bool(params.dataset_sink_mode)
        self._quiet_steps.waits = False  # until a loop that times its data waits says so
        self._timings.start_run(params)
        if params.mode == "train":
            # Every rank, together: the run lengths that share the tensor units alike.
            total = total_units(params.epoch_num or 0, params.batch_num or 0, self._sink_mode)
            lengths = run.agree_run_lengths(total)
            assert run.schedule is not None
            run.schedule.agree_run_lengths(lengths)
            # The job view is of the last training run; an evaluation after it keeps it.
            self._series.start_run()
            self._live.start(run.directory)
            assert run.info is not None
            # The run's last step closes its last cost window, before its timings' write.
            self._cost.start_run(
                run.info.rank,
                last_step=0 if self._sink_mode else total,
                first_look=not self._timings.on_device,
            )
            self._quiet_cost = 0.0
            # The sampler's thread reads the step running from the loop's own state.
            self._system.start(lambda: params.cur_step_num, run.info.local_rank)
            self._series.add_start_fingerprint(record, self._landscape_network(params))
            # The start sample, at step 0 now: written later, its record would take the
            # first step's values the user added (every record takes what is pending).
            self._series.write_kept_step_times(record)
            assert run.directory is not None
            self._lineage.start_training(run.directory, params)
            self._training = True
            self._release_sigterm()
            self._sigterm_release = end_cleanly_on_sigterm()
            _unended.add(self)
            if run.info.world_size > 1:
                try:
                    forget_terminated_mark(run.summary_dir, run.info.rank)
                except OSError as error:  # (a directory planted at the name)
                    logger.warning("An earlier run's SIGTERM mark stays: %s", error)
            keep_next(None)  # an earlier run's last word on its next step
            # A subclass's own step_begin or step_end (or one set on this collector) is
            # called at every step: no step is left to the loop to log.
            self._own_step_hooks = own_step_hooks(self, SummaryCollector)
            if run.landscape is not None:
                self._start_landscape(params)

    def epoch_begin(self, run_context: RunContext) -> None:
        self._timings.epoch_begin()

    def section(self, name: str) -> AbstractContextManager[object]:
        """``with collector.section("compute"):`` times a part of a step.

        Recorded as ``rankscribe/section/<name>`` (entries of a step add up) and
        judged across ranks; ``name``: letters, digits, ``_.-``
        (:func:`rankscribe.collector.jobview._timings.section_tag`). docs/job-view.md.
        """
        return self._timings.section(name)

    def allreduce_gradients(self, comm: Any, gradients: Any, *, average: bool = True) -> None:
        """Average (``average=False``: sum) local gradients across ``comm``'s ranks, in place.

        For a loop of your own that reduces its gradients itself (NumPy arrays under
        MPI): ``gradients`` is one float array or a list of them (each writeable and
        C-contiguous); ``comm`` an mpi4py communicator (``Allreduce``, ``Get_size``).
        Before the reduce, each array's local L2 norm (accumulated in float64) is recorded
        as ``rankscribe/gradient/norm/<index>`` and the seconds since the step's start as
        ``rankscribe/gradient/ready_time``, the tags the DDP probe records, so the job view
        names a rank whose gradient stands apart (docs/gradients.md, "Your own loop").
        Every rank calls it with arrays of the same shapes, at the same steps. With
        ``gradient_probe=False`` it reduces and records nothing; on a DDP network, whose
        probe records already, it only reduces.
        """
        timings = self._timings
        recorder = timings.gradient
        if recorder is None and timings.gradients_on and self._training:
            recorder = timings.gradient = ReducedGradients()
            self._quiet_steps.stop()  # the norms are taken at each step's end
        allreduce_gradients(
            comm,
            gradients,
            average=average,
            recorder=recorder if isinstance(recorder, ReducedGradients) else None,
        )

    def step_begin(self, run_context: RunContext) -> None:
        now = _clock.now()
        params = run_context.original_args()
        started = params.step_started_at
        timings = self._timings
        quiet = self._quiet_steps
        if started is None or quiet.waits:
            # From the end of the step before: the last the loop logged, if any.
            ends = quiet.ends
            last = ends[-1] if ends else timings.last_end
            if started is None:
                started = now
            # (After a light step the loop logged: less the collector's read of its loss.)
            timings.data_wait = (
                started - last - self._lights.after.get(params.cur_step_num, 0.0)
                if last is not None
                else None
            )
        else:
            # Set by a loop that calls step_begin after the step (TrainSession): no data
            # wait. TrainLoop's late call of a step it could not log keeps its wait.
            timings.data_wait = None
        self._step_started = started
        # One clock read more: step_begin's own time, for the cost budget (where the
        # loop's dispatch is counted, step_end counts this call with it).
        if params._dispatched_at is None:
            self._quiet_cost += _clock.now() - now

    def step_end(self, run_context: RunContext) -> None:
        ended = _clock.now()
        params = run_context.original_args()
        started, self._step_started = self._step_started, None
        step = params.cur_step_num
        light = step == self._light_step
        if (
            step < self._quiet_until
            and started is not None
            and params.mode == "train"
            and ended < self._step_times_due
            and ended - started < STEP_TIME_WRITE_AT_ONCE
            and (not light or self._light_step_kept(params, step))
        ):
            # Most steps: nothing to collect, nothing to write. Every function called
            # here costs microseconds on a CPU whose caches the step itself evicted,
            # so this path is a few reads and two appends (tools/bench/collector.py).
            # The next step quiet too: the summary operators need not copy its values
            # (as _quiet_next, inline: one call fewer).
            following = step + 1
            skip = (
                following < self._quiet_until
                and following != self._light_step
                and params.consecutive_steps
            )
            discard_pending(
                skip_next_step=skip,
                # (_keep_next, inline where the next step skips: the usual case)
                keep_next=self._quiet_filter if skip else self._keep_next(params, step, False),
            )
            timings = self._timings
            quiet = self._quiet_steps
            logged = quiet.ends
            joined = bool(logged) and timings.gradient is None
            if joined:
                # After steps the loop finished itself (a light step among them): this
                # one joins their log, its forward calls and sections stay for it, and all
                # are taken together (_take_quiet_steps), by the session's clock as theirs.
                # (timings.last_end stays at the end of the step before the log, the
                # first logged step's data wait starts there.)
                dispatched = params._dispatched_at
                quiet.log(step, started, ended if dispatched is None else dispatched)
            else:
                if logged:
                    self._take_quiet_steps()
                self._keep_step(step)
                self._keep_step_time(ended - started)
                wait = timings.data_wait
                if wait is not None:
                    self._keep_wait_step(step)
                    self._keep_wait(wait)
                if (
                    timings.forward is not None
                    or timings.gradient is not None
                    or timings.section_log
                ):
                    timings.keep_extras(step, ended - started, started)
                    self._quiet_cost += timings.take_probe_seconds()
            # One clock read: this path's own time, for the cost budget (cost/_budget.py),
            # from the loop's dispatch where the loop counts it (a TrainSession whose
            # only callback is this collector: params._dispatched_at).
            dispatched = params._dispatched_at
            finished = _clock.now()
            self._quiet_cost += finished - (ended if dispatched is None else dispatched)
            if not joined:
                timings.last_end = finished  # the next step's wait begins after this path
            if light and params.step_started_at is not None:
                # The loss read, in the session's next step's time (as the longer path's
                # work: below).
                self._cost.carry(step + 1, finished - ended)
            return
        self._step_end(params, started, ended)
        finished = self._timings.last_end = _clock.now()
        dispatched = params._dispatched_at
        counted = finished - (ended if dispatched is None else dispatched)
        if params.step_started_at is not None:
            # TrainSession's next step is timed from before this step's callbacks. What a
            # quiet step's call costs too (the dispatch, step_begin) stays in: every step
            # holds it, so the slowdown's near and far steps alike.
            self._cost.carry(step + 1, finished - ended)
        # Measured in training only (start_run .. finish), the quiet steps' since the last,
        # and the gradient probe's inside the step's backward.
        self._cost.add(counted + self._quiet_cost + self._timings.take_probe_seconds())
        self._quiet_cost = 0.0

    def _step_end(self, params: CallbackParams, started: float | None, ended: float) -> None:
        """A step that collects, writes, saves landscape parameters, or is not in training."""
        self._quiet_until = 0
        self._quiet_steps.stop()
        self._take_quiet_steps()  # the steps before, which the loop finished itself
        run = self._run
        if params.mode != "train" or run.record is None:
            discard_pending()
            return
        step_seconds = ended - started if started is not None else None
        if step_seconds is not None:
            self._step_time = step_seconds
        extras = self._timings.extras(
            params.cur_step_num, with_wait=True, step_seconds=step_seconds, started=started
        )
        cost = self._cost
        if cost.waiting:  # a window's decision waits for the device's clock
            cost.settle(self._stop_landscape)
        if cost.window_due(params.cur_step_num):
            cost.add(self._quiet_cost)  # the window's last quiet steps (or warm-up's: none)
            self._quiet_cost = 0.0
            # Before this step's work: its cost point is one of its timings, in its event.
            costs = cost.close_window(
                params.cur_step_num,
                ended,
                self._stop_landscape,
                self._step_times(),
                self._timings.device_mark(),
            )
            extras = [*extras, *costs]
        self._cost.busy(params.cur_step_num)
        if not self._first_step_done:
            self._add_first_step_values(params)
        if not self._sink_mode:
            self._collect(params, params.cur_step_num, extras)
        else:
            self._series.keep_timings(params.cur_step_num, extras)
        landscape = run.step_landscape
        if landscape is not None and landscape.wants(params.cur_step_num):
            saving = _clock.now()
            landscape.save(params.cur_step_num, self._landscape_backbone(params))
            self._cost.add(0.0, landscape=_clock.now() - saving)
        if not self._sink_mode and run.schedule is not None:
            self._plan_quiet(params.cur_step_num, run.schedule, landscape)
            step = params.cur_step_num
            if self._quiet_next(params, step):
                # As the quiet path does (the loop may end the skip itself, at the step
                # before the next the collector records: that step's filter is said now).
                discard_pending(skip_next_step=True, keep_next=self._keep_next(params, step, True))
            else:
                keep_next(self._keep_next(params, step, False))
        self._step_times_due = self._quiet_steps.due = (
            self._series.last_write + STEP_TIME_WRITE_INTERVAL
        )

    def epoch_end(self, run_context: RunContext) -> None:
        params = run_context.original_args()
        record = self._run.record
        if params.mode != "train" or record is None:
            return
        started = _clock.now()
        self._take_quiet_steps()
        if params.cur_epoch_num == params.epoch_num:
            self._close_last_cost_window(params.cur_step_num)  # before this step is written
        unit = params.cur_epoch_num if self._sink_mode else params.cur_step_num
        self._collect(params, unit)
        landscape = self._run.landscape
        if (
            landscape is not None
            and landscape.unit == "epoch"
            and landscape.wants(params.cur_epoch_num)
        ):
            landscape.save(params.cur_epoch_num, self._landscape_backbone(params))
        if started - self._last_epoch_flush >= EPOCH_FLUSH_INTERVAL:
            # Why not wait, and why not at every epoch: docs/collector-schedule.md, "Epoch ends".
            self._series.write_kept_step_times(record)
            self._flush(wait=False)
            self._last_epoch_flush = started
        self._cost.add(_clock.now() - started)

    def end(self, run_context: RunContext) -> None:
        params = run_context.original_args()
        run = self._run
        record = run.record
        if record is None:
            return
        self._training = False  # the end came: the merge below runs, whatever fails
        self._quiet_steps.stop()
        self._take_quiet_steps()
        try:
            if params.mode == "train":
                self._say_missed_tensor_units(params)
                self._system.stop()
                self._timings.finish()
                self._series.keep_arrived(wait=True)  # the device values still on their way
                self._close_last_cost_window(params.cur_step_num)
                self._series.write_kept_step_times(record)
                self._lineage.add_train_lineage(
                    record, params, loss_unreadable=self._extractor.loss_unreadable
                )
            else:
                self._lineage.add_eval_lineage(record, params)
            # As the original: eval mode keeps summary operators' leftovers out of this record.
            record.set_mode("eval")
            record.record(0)
            if params.mode == "train" and run.landscape is not None:
                run.landscape.write_metadata(params.batch_num or 0)
            if self._flush() and params.mode == "train" and run.directory is not None:
                self._lineage.finish_training(run.directory)  # the train lineage is on disk
        finally:
            # Every rank takes part in the merge, whatever went wrong here before.
            self._merge_job_lineage()
            if not self._entered:
                self._close()
            if params.mode == "train":
                self._release_sigterm()
                _unended.discard(self)

    # ------------------------------------------------------------------- helpers

    def _say_missed_tensor_units(self, params: CallbackParams) -> None:
        """Training ended before this rank's last tensor units: no rank records them.

        Only on a job of several ranks: a single process that stops early just
        has a shorter run, as in the original.
        """
        schedule, info = self._run.schedule, self._run.info
        if schedule is None or not schedule.started or info is None or info.world_size <= 1:
            return
        reached = params.cur_epoch_num if self._sink_mode else params.cur_step_num
        missed = schedule.missed_tensor_units(reached)
        if missed:
            logger.warning(
                "Rank %d stopped at %s %d, before the tensor %ss %s of its share: no rank "
                'records tensor data there (docs/collector-schedule.md, "Tensor steps on '
                'several ranks").',
                info.rank,
                "epoch" if self._sink_mode else "step",
                reached,
                "epoch" if self._sink_mode else "step",
                ", ".join(map(str, missed)),
            )

    def _add_first_step_values(self, params: CallbackParams) -> None:
        """The graph, dataset graph and custom lineage, written with the first collection."""
        self._first_step_done = True
        record = self._run.record
        assert record is not None
        # Read the network once even when its graph is not collected: an adapter
        # learns its parameter names there, which the optimizer's histograms use.
        self._adapters.network_view(
            params.train_network if params.train_network is not None else params.network
        )
        graph = self._extractor.graph(params)
        if graph is not None:
            record.add_value("graph", GRAPH_TAG, graph)
        self._lineage.add_first_step_values(record, params)

    def _collect(
        self, params: CallbackParams, unit: int, extras: Sequence[tuple[str, float]] = ()
    ) -> None:
        record, schedule = self._run.record, self._run.schedule
        assert record is not None and schedule is not None
        first = not schedule.started
        if first:
            total = total_units(params.epoch_num or 0, params.batch_num or 0, self._sink_mode)
            decision = schedule.first(unit, total)
        else:
            decision = schedule.next(unit)
        step = params.cur_step_num
        step_time, self._step_time = self._step_time, None
        if decision is Collect.TENSOR_ONLY or decision is Collect.EVERYTHING:
            self._operator_tensors = record.has_pending
        if decision is Collect.NOTHING:
            # At an epoch's end the next step's may be skipped still (in a step that
            # leaves the quiet path, _quiet_until is 0 until the step has been seen to).
            quiet = self._quiet_next(params, step)
            discard_pending(skip_next_step=quiet, keep_next=self._keep_next(params, step, quiet))
            self._series.keep_timings(step, extras)
            # The next collected step writes them before its own values (the file stays
            # in step order), in the same step: one step leaves its quiet path, not two.
            self._series.after_quiet_step(record, step, step_time, write_now=self._sink_mode)
            return
        self._cost.busy(step, RECORDED)
        if not first and not self._sink_mode:
            alone = self._scalars_alone(params, step, decision, record)
            if alone is not None:  # kept, and written with the timings when they are
                self._series.keep_collected_step(record, step, step_time, alone, extras)
                return
        self._series.write_kept_step_times(record)
        if self._series.has_late:
            self._series.keep_arrived()  # earlier steps' device values that arrived (no wait)
        if decision.extracts:
            sink = self._series.collected_step_sink(record, step)
            cost = self._cost
            spent = self._extractor.add_step_values(
                sink, params, histograms=cost.histograms_at(step), images=cost.images_at(step)
            )
            cost.add(0.0, histograms=spent.histograms, images=spent.images)
            if spent.histograms > 0 or spent.images > 0:
                cost.busy(step, HEAVY)
            if cost.keeps_fingerprints and self._series.fingerprints:
                fingerprinting = _clock.now()
                self._series.add_fingerprint(sink, self._landscape_network(params), step)
                cost.add(0.0, fingerprints=_clock.now() - fingerprinting)
        # (a summary operator's value on its way from a device, which the record takes now)
        operators_late = first and has_deferred()
        self._series.record_collected_step(record, step, step_time, decision.plugin_filter, extras)
        if first:
            # The first collection reaches the disk at once; with values read from a
            # device, without waiting for them here (the writer's thread does).
            self._flush(wait=not (self._series.has_late or operators_late))

    def _quiet_next(self, params: CallbackParams, step: int) -> bool:
        """Whether the step after ``step`` records nothing (the summary operators need not
        copy its values): on the short path, and not a light step (which records the
        operators' values, when there are any, through the record)."""
        following = step + 1
        return (
            params.consecutive_steps
            and following < self._quiet_until
            and following != self._light_step
        )

    def _keep_next(
        self, params: CallbackParams, step: int, skip: bool
    ) -> Callable[[str], bool] | None:
        """The plugin filter of the record of the next step that the summary operators
        give values to (``rankscribe.writer.operators.keep_next``: the kinds it drops are
        not read there): the step after ``step``, or with ``skip`` (the steps up to the
        short path's end skip them) the step at that end, whose filter the plan keeps
        (a loop that finishes those steps itself ends the skip without calling the
        collector). None where every kind may be kept or the step is not known."""
        if skip:
            return self._quiet_filter
        return self._filter_at(step + 1) if params.consecutive_steps else None

    def _filter_at(self, unit: int) -> Callable[[str], bool] | None:
        """The plugin filter of ``unit``'s record, a later unit than any collected yet;
        None where every kind may be kept: not in training, in sink mode, or before the
        first collection (which keeps everything)."""
        schedule = self._run.schedule
        if not self._training or self._sink_mode or schedule is None or not schedule.started:
            return None
        decision = schedule.decision_at(unit)
        if decision is Collect.NOTHING:
            return _keep_no_plugin  # its values are forgotten at its end
        return decision.plugin_filter

    def _plan_quiet(
        self, step: int, schedule: CollectionSchedule, landscape: LandscapeSaver | None
    ) -> None:
        """The steps after ``step`` that take the short path: up to the next that collects
        more than the loss, writes the timings or saves landscape files (no later than
        :meth:`SeriesRecorder.quiet_limit`), and the light steps among them (collected steps
        on the frequency whose values are the loss alone: no histograms, images or
        fingerprint due, and no cost window to close there; and this rank's tensor steps
        off the frequency, whose only values are the summary operators' tensors; those, if
        any come, are seen at the step). While the last of this rank's tensor steps got a
        value for the record, its tensor steps end the plan (:meth:`_light_steps_after`).

        Where the loop logs the light steps, up to :data:`LIGHT_AHEAD` are planned at once,
        else one at a time, the next when one is kept (:meth:`_next_quiet`): a light step
        that records more after all ends the plan, and the next call plans from it."""
        if not schedule.started:
            self._quiet_until, self._light_step = 0, -1
            self._lights.clear()
            self._quiet_filter = None
            self._quiet_steps.stop()
            return
        self._quiet_limit = self._series.quiet_limit(step, landscape)
        self._next_quiet(step, schedule)

    def _next_quiet(self, step: int, schedule: CollectionSchedule) -> None:
        """After ``step`` (planned, or a light step kept): the light steps ahead, the
        collected steps after it, one after the other, whose values are the loss alone (at
        most :data:`LIGHT_AHEAD` where the loop finishes them itself, else one), and the
        short path up to the collected step after them (at most to the plan's limit)."""
        offered = self._offers_quiet_steps()
        # Not while a device value is on its way: the light steps' losses would be kept
        # before it (the collector's own light path takes the longer path then).
        logs_lights = offered and not self._series.has_late
        lights, extracts, collected = self._light_steps_after(
            step, schedule, LIGHT_AHEAD if logs_lights else 1
        )
        self._quiet_until = until = min(collected, self._quiet_limit)
        self._light_step = lights[0] if lights else -1
        quiet = self._quiet_steps
        if not logs_lights:
            self._lights.clear()
            self._quiet_filter = self._filter_at(lights[0] if lights else until)
            if offered:  # up to the light step, which the collector sees
                quiet.until, quiet.light = self._light_step if lights else until, -1
            else:
                quiet.stop()
            return
        # Each filter is found when the loop reaches its step (LightSteps.logged_one): a
        # step that records more after all ends the plan before its later light steps.
        self._lights.plan(lights, extracts, until, self._filter_at)
        self._quiet_filter = self._filter_at(self._light_step if lights else until)
        quiet.until, quiet.light = until, self._light_step

    def _light_steps_after(
        self, step: int, schedule: CollectionSchedule, ahead: int
    ) -> tuple[list[int], list[bool], int]:
        """The light steps after ``step`` (:meth:`_plan_quiet`), at most ``ahead`` and before
        the plan's limit, whether each records the loss (else it is a tensor step off the
        frequency), and the collected step after them. One pass, with what holds for the
        whole plan read once: it runs at every step the collector plans at."""
        limit = self._quiet_limit
        collected = schedule.next_collected(step)
        lights: list[int] = []
        extracts: list[bool] = []
        cost = self._cost
        if cost.keeps_fingerprints and self._series.fingerprints:
            return lights, extracts, collected  # every collected step takes a fingerprint
        next_collected, extracts_at, window_due = (
            schedule.next_collected,
            schedule.extracts_at,
            cost.window_due,
        )
        loss_alone, histograms_at, images_at = (
            self._extractor.loss_alone,
            cost.histograms_at,
            cost.images_at,
        )
        operator_tensors, decision_at = self._operator_tensors, schedule.decision_at
        while collected < limit and len(lights) < ahead and not window_due(collected):
            recorded = extracts_at(collected)
            if operator_tensors and (not recorded or decision_at(collected) is Collect.EVERYTHING):
                break  # one of this rank's tensor steps, which the operators' tensor will take
            if recorded and not loss_alone(
                histograms=histograms_at(collected), images=images_at(collected)
            ):
                break
            lights.append(collected)
            extracts.append(recorded)
            collected = next_collected(collected)
        return lights, extracts, collected

    def _offers_quiet_steps(self) -> bool:
        """Whether the loop may finish the short path's steps itself (its light steps
        among them: :meth:`_log_light`). Only where the steps' timings can be read
        afterwards (``StepTimings.loggable``)."""
        return (
            self._training
            and not self._sink_mode
            and self._timings.loggable
            and self._own_step_hooks
        )

    def _log_light(self, step: int, outputs: Any) -> bool:
        """``QuietSteps.keep_light``: at the next light step planned, logged by the loop,
        its loss kept from ``outputs`` (the step's ``net_outputs``), the operators told
        the next step's skip and filter, and the next light step offered. False, with
        nothing kept, where the step has more to record (a summary operator's value, a
        value added to the record) or its loss is not one number on the host: the loop
        then calls ``step_end``, whose light path decides (:meth:`_light_step_kept`)."""
        started = _clock.now()
        record = self._run.record
        if record is None or record.has_pending:
            return False
        lights = self._lights
        recorded = lights.extracts[lights.at]
        if recorded:
            number = self._extractor.host_loss_of(outputs)
            if number is None:
                return False
            self._keep_light_step(step)
            self._keep_light_loss(number)
        # else a tensor step off the frequency that no tensor came to: nothing to record
        # Its seconds are in the next step's time where a step runs from one call to the
        # next (a session's: the slowdown leaves them out there, as the training thread's
        # cost counts them already), else in the next step's wait for its batch (a
        # TrainLoop's: kept without them, as after a step the collector is called at).
        self._light_step, keep = lights.logged_one(step, recorded, _clock.now() - started)
        self._quiet_steps.light = self._light_step
        self._quiet_filter = keep
        # The operators skip the steps after it; the loop ends their skip at the step
        # before the next light step or the plan's end (QuietSteps).
        discard_pending(skip_next_step=True, keep_next=keep)
        return True

    def _settle_lights(self) -> None:
        """What the collector's light path does at a light step besides keeping its loss,
        for the light steps the loop logged (:meth:`_log_light`): the schedule moved past
        each, and the cost budget told which recorded (as any collected step: it reads the
        slowdown of the steps after the collector's against the others) and, in a
        session, the collector's seconds that the next step's time holds."""
        logged = self._lights.take_logged()
        schedule = self._run.schedule
        if not logged or schedule is None:
            return
        busy, carry = self._cost.busy, self._cost.carry
        # A session's next step's time holds the read of the loss; a TrainLoop's next
        # step's wait held it, and is kept without it (_take_quiet_steps, step_begin).
        after = self._lights.after if not self._quiet_steps.waits else None
        for step, recorded in logged:
            if recorded:
                busy(step, RECORDED)
            if after is not None:
                carry(step + 1, after.get(step + 1, 0.0))
            schedule.next(step)

    def _take_quiet_steps(self) -> None:
        """Keep what the short path would have of the steps the loop finished itself
        (:meth:`_next_quiet`): each step time, data wait (a TrainLoop's), forward
        time and sections, and the loop's time."""
        self._settle_lights()
        after_light = self._lights.take_after()
        quiet = self._quiet_steps
        first, starts, ends, seconds = quiet.take()
        if not ends:
            return
        self._keep_steps(range(first, first + len(ends)))
        self._keep_step_times(map(operator.sub, ends, starts))
        if quiet.waits:
            # Each step's data wait: from the end of the step before (the first logged
            # step's: the step the collector saw last; none at an epoch's first step).
            last = self._timings.last_end
            skip = last is None
            waiting = range(first + skip, first + len(ends))
            waits: Iterable[float] = map(operator.sub, starts[skip:], [last, *ends[:-1]][skip:])
            if after_light:
                # A light step's wait for the next batch began after the collector's read
                # of its loss (:meth:`_log_light`): as after a step the collector is called
                # at, whose wait begins at its end, that read is left out of it.
                waits = [
                    wait - after_light.get(step, 0.0)
                    for step, wait in zip(waiting, waits, strict=True)
                ]
            self._keep_wait_steps(waiting)
            self._keep_waits(waits)
        self._timings.keep_logged(first, starts, ends)
        self._timings.last_end = ends[-1]
        self._quiet_cost += seconds

    def _light_step_kept(self, params: CallbackParams, step: int) -> bool:
        """At a light step (:meth:`_plan_quiet`): its loss kept as a step time is (written
        with the timings, as :meth:`_scalars_alone`'s steps are), or at a tensor step off
        the frequency nothing, the schedule moved past it, and the next light step due.
        False, with nothing kept, when the step records more after all (a value added to
        the record, a summary operator's value that the step keeps, a device value on its
        way, a loss not one number on the host): the step then takes the longer path."""
        self._settle_lights()  # the light steps the loop logged before this one
        record, schedule = self._run.record, self._run.schedule
        if record is None or schedule is None or self._series.has_late:
            return False
        # The summary operators' values that the step's record would drop (tensors off
        # this rank's tensor steps) keep no step off this path.
        if record.has_pending and _still_pending(record, schedule.decision_at(step)):
            return False
        if schedule.extracts_at(step):
            number = self._extractor.host_loss(params)
            if number is None:
                return False
            # Marked as any collected step: the cost budget reads the slowdown of the
            # steps after the collector's against the others (cost/_slowdown.py).
            self._cost.busy(step, RECORDED)
            self._keep_light_step(step)
            self._keep_light_loss(number)
        # else a tensor step off the frequency that no tensor came to: nothing to record
        schedule.next(step)  # collected here (the decision planned)
        self._next_quiet(step, schedule)
        return True

    def _scalars_alone(
        self, params: CallbackParams, step: int, decision: Collect, record: SummaryRecord
    ) -> list[tuple[str, float]] | None:
        """The collected ``step``'s values when they are scalars alone (the loss, read on
        the host), which the series keeps and writes with the timings; None when the step
        records more: histograms, input images, the fingerprint, summary operators' values
        that the step keeps or values added to the record (``record.record`` then), or
        while a device value is on its way (the file stays in step order)."""
        plugin_filter = decision.plugin_filter
        if not decision.extracts or (plugin_filter is not None and not plugin_filter("scalar")):
            return None
        cost, series = self._cost, self._series
        if (
            (cost.keeps_fingerprints and series.fingerprints)
            or series.has_late
            or (record.has_pending and _still_pending(record, decision))
        ):
            return None
        return self._extractor.host_loss_alone(
            params, histograms=cost.histograms_at(step), images=cost.images_at(step)
        )

    def _start_landscape(self, params: CallbackParams) -> None:
        """Clear an earlier run's landscape files; say on rank 0 what this run saves."""
        landscape, info = self._run.landscape, self._run.info
        assert landscape is not None and info is not None
        landscape.start_training()
        landscape.announce(
            epoch_num=params.epoch_num or 0,
            batch_num=params.batch_num or 0,
            rank=info.rank,
            world_size=info.world_size,
        )

    def _close_last_cost_window(self, step: int) -> None:
        """The training's last cost window, recorded at ``step`` unless that step is written
        already (a loop that does not say its length, whose last step wrote its timings)."""
        self._cost.add(self._quiet_cost)
        self._quiet_cost = 0.0
        costs = self._cost.finish(step, _clock.now(), self._step_times())
        self._series.keep_timings_unwritten(step, costs)

    def _step_times(self) -> StepTimes:
        """The run's kept step times and data waits, for the cost's slowdown."""
        return StepTimes(*self._series.step_time_columns())

    def _stop_landscape(self) -> list[int]:
        """The cost budget sheds the landscape: no more sets saved; the numbers left out."""
        landscape = self._run.landscape
        return landscape.stop_saving() if landscape is not None else []

    def _landscape_network(self, params: CallbackParams) -> Any:
        return params.network if params.network is not None else params.train_network

    def _landscape_backbone(self, params: CallbackParams) -> Any:
        """The network whose parameters a landscape file holds (and which names it).

        ``network`` when the run gives one; else, as MindSpore's SummaryCollector, the
        ``_backbone`` that ``train_network`` (or a network it wraps as ``network``)
        holds, followed down its own ``network`` attributes: ``TrainOneStepCell(
        WithLossCell(net))`` saves ``net``'s parameters in ``Net_<n>_step.ckpt``.
        """
        if params.network is not None:
            return params.network
        wrapper = params.train_network
        backbone = None
        for _ in range(_WRAPPER_DEPTH):
            if wrapper is None:
                break
            backbone = getattr(wrapper, "_backbone", None)
            if backbone is not None:
                break
            wrapper = getattr(wrapper, "network", None)
        if backbone is None:
            return params.train_network
        for _ in range(_WRAPPER_DEPTH):
            inner = getattr(backbone, "network", None)
            if inner is None:
                break
            backbone = inner
        return backbone

    def _flush(self, *, wait: bool = True) -> bool:
        """Flush the record; False when it failed (logged: the run goes on)."""
        record = self._run.record
        if record is None:
            return False
        try:
            record.flush(timeout=None if wait else 0)  # 0: queue the sync, return
        except Exception as error:  # raise_exception=False: the run goes on
            logger.error("Flushing the summary record failed: %s", error)
            return False
        return True

    def _merge_job_lineage(self) -> None:
        merger, directory = self._run.merger, self._run.directory
        if merger is not None and directory is not None:
            merger.verdict_notes = self._timings.gradient_parameters
            self._live.merge(merger, directory, self._series.series)


#: Collectors whose training began and neither ended nor was closed.
_unended: weakref.WeakSet[SummaryCollector] = weakref.WeakSet()
#: (job directory, rank, world size) of each run of several ranks a SIGTERM stopped.
_stopped_by_sigterm: list[tuple[str, int, int]] = []


@atexit.register
def _close_unended_runs() -> None:
    """Close each training run left open (a framework's loop that raised, or that a SIGTERM
    stopped, never tells the collector): what it kept (step times, timings, collected
    steps' losses) is written before the writer closes the records, at exit (registered
    after the writer's own exit handler, so it runs first) and before an abort or the end
    by SIGTERM (``rankscribe.ranks.exits``, first of the callbacks)."""
    for collector in list(_unended):
        try:
            collector._close()
        except Exception:
            logger.exception("Closing a training run left open failed")


def _wait_for_peers() -> None:
    """Before the process ends by SIGTERM (after the writer closed every record): in each
    job of several ranks a SIGTERM stopped, this rank's files are closed; wait for the
    other ranks' (``rankscribe.ranks.exits.mark_terminated_and_wait``), so that none is
    killed before it wrote what it held."""
    if not sigterm_received():
        return
    for job_dir, rank, world_size in _stopped_by_sigterm:
        try:
            missing = mark_terminated_and_wait(job_dir, rank, world_size)
        except OSError as error:
            logger.warning("Rank %d cannot say in %s that it stopped: %s", rank, job_dir, error)
            continue
        if missing:
            logger.warning(
                "Rank %d stopped on SIGTERM and wrote what it held; rank(s) %s did not say "
                "the same in %s in time (not sent SIGTERM, or on a node that does not share "
                "the directory): ending now.",
                rank,
                ", ".join(map(str, missing)),
                job_dir,
            )


before_abort(_close_unended_runs, first=True)
before_abort(_wait_for_peers)
