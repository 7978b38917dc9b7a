"""The collector's lineage: what one rank writes, and the job lineage rank 0 merges.

One rank (:class:`LineageRecorder`), as MindSpore's SummaryCollector:

- at the first training step: the training dataset's graph (``dataset_graph``)
  and the custom lineage data (``custom_lineage_data``);
- when training starts: the train lineage known then, into a start record of
  its own (:meth:`LineageRecorder.start_training`, fsynced: a killed job keeps
  it), removed once the end of training wrote the whole train lineage;
- at the end of training: the train lineage; at the end of an evaluation: the
  evaluation lineage.

The lineage values are built by :mod:`rankscribe.lineage`'s
``train_lineage_from_args`` / ``eval_lineage_from_args`` (the builders of its
``TrainLineage``/``EvalLineage`` callbacks), fed with the adapters' dataset
views, so a ``TrainLineage`` in a training loop and the collector record the
same values for the same objects: the network, optimizer and loss function
names follow the builder's one rule (``docs/collector-schedule.md``, "Names in
the train lineage"). Only a learning rate the builder cannot read is taken
from the optimizer's adapter view (a framework registered with
``register_adapter``).

The job (:class:`JobLineageMerger`): at the end of training and of evaluation,
every rank reads back its own directory's lineage (as MindInsight folds it:
a later evaluation joins the training run it follows) and hands it to rank 0
with :meth:`rankscribe.ranks.Coordinator.gather`; rank 0 merges the ranks'
lineages (:func:`rankscribe.lineage.merge_rank_lineages`) and writes the merged
job lineage into ``summary_dir``. The gather has a timeout: a rank that does
not arrive in time is named in the merged record (``user_defined/ranks_missing``)
and nobody waits past it. Every rank calls the gather, whatever happened before.

The same gather carries each rank's series of the collector's scalars
(:class:`rankscribe.collector.jobview._series.ScalarSeries`: step times, fingerprints,
loss; no shared filesystem needed). Rank 0 writes the job view from them
(:func:`rankscribe.jobview.write_job_view`: the job's cross-rank curves
in ``summary_dir``, a rank that never arrived named as missing) and puts its
verdicts into the merged lineage's ``user_defined`` keys.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rankscribe.collector._callback import CallbackParams
from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.collection._extractor import ValueSink
from rankscribe.collector.jobview._series import ScalarSeries
from rankscribe.jobview import RankSeries, write_job_view
from rankscribe.jobview.feed import system_evidence
from rankscribe.lineage import (
    LineageError,
    RunLineage,
    get_run_lineage,
    merge_rank_lineages,
    merge_run_dir,
)
from rankscribe.lineage.recording import (
    MERGE_LOCK_NAME,
    DatasetGraphInfo,
    EvalLineageInfo,
    TrainLineageInfo,
    UserDefinedInfo,
    eval_lineage_from_args,
    optimizer_of,
    parse_rank_run,
    rank_dirs_note,
    remove_train_start,
    session_values,
    train_lineage_from_args,
    write_merged_lineage,
    write_train_start,
    write_train_stop,
)
from rankscribe.ranks import Coordinator, RankInfo, RanksError, create_coordinator
from rankscribe.ranks.files import LockTimeoutError, exclusive_lock

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MERGE_TIMEOUT",
    "LOST_PEER_MESSAGES",
    "JobLineageMerger",
    "LineageRecorder",
    "lineage_arguments",
    "lost_a_peer",
]

#: Seconds rank 0 waits for the other ranks' lineage at the end of a run.
DEFAULT_MERGE_TIMEOUT = 60.0

#: What the collective libraries say when a rank lost its connection to another rank,
#: each (library, what it says), lowercase: gloo's reads and writes on a connection the
#: other rank's end closed ("Connection closed by peer", "Read error ...: Connection reset
#: by peer", "Broken pipe"), torch's own sockets' (the store's, c10d: "Remote peer closed
#: the connection"), and NCCL's ("remote process exited or there was a network error").
#: A message must name its library too (torch's store's words are its own: no library
#: named): a dataset's download whose server reset the connection is the rank's own
#: failure, not a lost rank.
LOST_PEER_MESSAGES = (
    ("gloo", "connection closed by peer"),
    ("gloo", "connection reset by peer"),
    ("gloo", "broken pipe"),
    ("", "remote peer closed the connection"),
    ("nccl", "remote process exited"),
)
#: How many exceptions of a chain (``__cause__``, else ``__context__``) are read.
_CHAIN_DEPTH = 8
#: How much of an exception's message is read.
_MESSAGE_CHARACTERS = 4096


def lost_a_peer(error: BaseException | None) -> bool:
    """Whether ``error``, or one it was raised from or while handling, says its rank lost
    its connection to another rank (:data:`LOST_PEER_MESSAGES`, or torch's
    ``DistNetworkError``): the exception is then a consequence of that rank's end, which
    the job view's stop verdict weighs (``docs/job-view.md``, "Where each rank stopped")."""
    for _ in range(_CHAIN_DEPTH):
        if error is None:
            return False
        if type(error).__name__ == "DistNetworkError":
            return True
        try:
            text = str(error)[:_MESSAGE_CHARACTERS].lower()
        except Exception:  # an exception whose str() raises says nothing
            text = ""
        if any(library in text and said in text for library, said in LOST_PEER_MESSAGES):
            return True
        error = error.__cause__ or error.__context__
    return False


def lineage_arguments(
    params: CallbackParams, *, adapters: AdapterRegistry | None = None
) -> dict[str, Any]:
    """The run state as the lineage builders read it, datasets replaced by their views."""
    adapters = adapters if adapters is not None else AdapterRegistry()
    arguments = dict(vars(params))
    for key in ("train_dataset", "valid_dataset"):
        arguments[key] = adapters.dataset_view(arguments.get(key))
    return arguments


class LineageRecorder:
    """Adds this rank's lineage values to its summary record."""

    def __init__(
        self,
        *,
        collect_dataset_graph: bool,
        collect_train_lineage: bool,
        collect_eval_lineage: bool,
        custom_lineage_data: Mapping[str, int | float | str],
        adapters: AdapterRegistry | None = None,
    ) -> None:
        self._adapters = adapters if adapters is not None else AdapterRegistry()
        self.collect_dataset_graph = collect_dataset_graph
        self.collect_train_lineage = collect_train_lineage
        self.collect_eval_lineage = collect_eval_lineage
        self.custom_lineage_data = dict(custom_lineage_data)
        self.custom_written = False

    def start_run(self) -> None:
        """A new run (a new summary record): its lineage file gets the custom data again.

        The original wrote the custom data once per collector, so a second
        training run with the same collector lost it: MindInsight starts a
        run's lineage afresh at each file holding a train lineage.
        """
        self.custom_written = False

    def add_first_step_values(self, record: ValueSink, params: CallbackParams) -> None:
        """The training dataset's graph, and the custom lineage data (once per run)."""
        if self.collect_dataset_graph:
            view = self._adapters.dataset_view(params.train_dataset)
            if view is not None and view.graph is not None:
                try:
                    graph = DatasetGraphInfo.from_graph_dict(view.graph).to_proto()
                except (LineageError, TypeError, ValueError) as error:
                    logger.warning(
                        "The dataset graph of the training dataset is not recorded: %s", error
                    )
                else:
                    record.add_value("dataset_graph", "train_dataset", graph)
        if self.custom_lineage_data and not self.custom_written:
            info = UserDefinedInfo.from_values(self.custom_lineage_data)
            record.add_value("custom_lineage_data", "custom_lineage_data", info.to_proto())
            self.custom_written = True

    def _train_lineage(self, params: CallbackParams) -> TrainLineageInfo:
        lineage = train_lineage_from_args(lineage_arguments(params, adapters=self._adapters))
        hyper = lineage.hyper_parameters
        if hyper is not None and hyper.learning_rate is None:
            # Only what the builder cannot read: a registered adapter may know where
            # another framework keeps its learning rate. Names are the builder's alone.
            optimizer = self._adapters.optimizer_view(optimizer_of(vars(params)))
            rate = optimizer.learning_rate() if optimizer is not None else None
            if rate is not None:
                hyper.learning_rate = rate
        return lineage

    def start_training(self, directory: str | os.PathLike[str], params: CallbackParams) -> None:
        """Keep on disk what is known as training starts (its train lineage so far).

        Network, optimizer, learning rate, loss function, batch size, epochs
        and dataset, written whole and fsynced into ``directory``'s start
        record, so a job killed before :meth:`add_train_lineage` can still be
        merged with them (``docs/layout.md``, "An interrupted job"). A failure
        to write it is logged; training goes on.
        """
        if not self.collect_train_lineage:
            return
        try:
            write_train_start(directory, self._train_lineage(params))
        except Exception as error:  # a best effort: nothing here may stop the training
            logger.warning(
                "The train lineage known at the start of training is not kept in %s: %s "
                "(an interrupted run's merged lineage will lack its hyper-parameters).",
                directory,
                error,
            )

    def stop_training(
        self,
        directory: str | os.PathLike[str],
        exception: str,
        *,
        signal: str | None = None,
        lost_peer: bool = False,
    ) -> None:
        """Training stopped on ``exception`` (its class name; raised by ``signal``, or by
        the program when None; ``lost_peer``: it said the rank lost another rank,
        :func:`lost_a_peer`): kept in ``directory``'s stop record for the job view's
        stop verdict. A failure to write it is logged."""
        try:
            write_train_stop(directory, exception, signal=signal, lost_peer=lost_peer)
        except Exception as error:  # a best effort: the exception raised is the caller's
            logger.warning("The training stop record in %s is not written: %s", directory, error)

    def finish_training(self, directory: str | os.PathLike[str]) -> None:
        """The run's train lineage is on disk: its start record goes."""
        try:
            remove_train_start(directory)
        except OSError as error:
            logger.warning("The training start record in %s stays: %s", directory, error)

    def add_train_lineage(
        self, record: ValueSink, params: CallbackParams, *, loss_unreadable: bool = False
    ) -> None:
        """The train lineage at the end of training.

        ``loss_unreadable``: a collected step's loss could not be read; the lineage's
        loss is then left empty, as MindSpore's SummaryCollector leaves it once its
        loss parse failed, even when the last step's output holds a number.
        """
        if not self.collect_train_lineage:
            return
        lineage = self._train_lineage(params)
        if loss_unreadable and lineage.algorithm is not None:
            lineage.algorithm.loss = None
        record.add_value("train_lineage", "train_lineage", lineage.to_proto())
        self._add_sharding(record, params, "train_dataset", params.train_dataset)

    def add_eval_lineage(self, record: ValueSink, params: CallbackParams) -> None:
        if not self.collect_eval_lineage:
            return
        arguments = lineage_arguments(params, adapters=self._adapters)
        try:
            lineage = eval_lineage_from_args(arguments)
        except (LineageError, TypeError, ValueError) as error:
            logger.warning(
                "Summary cannot collect the type of metrics (%s), currently support "
                "a dict of name to number or str.",
                error,
            )
            # The dataset part still counts: the same builder, and no metric at all.
            lineage = EvalLineageInfo(
                valid_dataset=eval_lineage_from_args({**arguments, "metrics": None}).valid_dataset
            )
        record.add_value("eval_lineage", "eval_lineage", lineage.to_proto())
        self._add_sharding(record, params, "valid_dataset", params.valid_dataset)

    def _add_sharding(
        self, record: ValueSink, params: CallbackParams, section: str, dataset: Any
    ) -> None:
        """On several ranks: whether this rank read a shard of the dataset or all of it.

        ``user_defined/<section>_sharding`` is ``shards``, or ``whole:<digest>`` for
        every item of a dataset whose content digest is given: the job's merge counts
        the size once when every rank read the same whole dataset, and sums it
        otherwise (docs/layout.md, "Merge at rank 0"). Nothing when the view cannot
        tell, or on one process.
        """
        if params.device_number <= 1:
            return
        view = self._adapters.dataset_view(dataset)
        if view is None or view.sharding is None:
            return
        if view.sharding == "whole" and view.digest is None:
            return
        note = "shards" if view.sharding == "shards" else f"whole:{view.digest}"
        info = UserDefinedInfo.from_values({f"{section}_sharding": note})
        record.add_value("custom_lineage_data", "custom_lineage_data", info.to_proto())


class JobLineageMerger:
    """Hands this rank's lineage to rank 0, which writes the merged job lineage.

    Args:
        summary_dir: the job's directory (the merged file goes there).
        info: this rank.
        timeout: seconds rank 0 waits for the others.
        coordinator: the collectives to use (see :meth:`open`).
        tensorboard: rank 0 also writes the job view's TensorBoard file.
    """

    def __init__(
        self,
        summary_dir: str | os.PathLike[str],
        info: RankInfo,
        *,
        timeout: float = DEFAULT_MERGE_TIMEOUT,
        coordinator: Coordinator | None = None,
        tensorboard: bool = False,
    ) -> None:
        self.summary_dir = Path(summary_dir)
        self.tensorboard = tensorboard
        self.info = info
        self.timeout = timeout
        self.coordinator = coordinator
        self._owned: Coordinator | None = None
        self.last_merged: RunLineage | None = None
        #: Keys rank 0 adds to the job's verdicts from what only the collector knows (the
        #: parameters of a gradient verdict's bucket): verdicts -> more keys; None: none.
        self.verdict_notes: Callable[[Mapping[str, Any]], Mapping[str, str]] | None = None

    def open(self) -> None:
        """Make a coordinator for the job unless one was given (every rank calls this).

        Called when a run starts, where the ranks are together: creating an MPI
        coordinator is itself collective, so doing it at the end would let one
        late rank make the creation time out and lose the whole merge.
        """
        if self.coordinator is not None or self._owned is not None:
            return
        try:
            # job_dir: launchers with neither MPI nor a torch process group meet there.
            self._owned = create_coordinator(
                self.info, timeout=self.timeout, job_dir=self.summary_dir
            )
        except RanksError as error:
            self._report(error)

    @property
    def active_coordinator(self) -> Coordinator | None:
        """The coordinator the merge uses (given, or made by :meth:`open`)."""
        return self.coordinator if self.coordinator is not None else self._owned

    def close(self) -> None:
        owned, self._owned = self._owned, None
        if owned is not None:
            owned.close()

    def merge_offline(self, job_dir: str, world_size: int) -> bool:
        """Rank 0: the offline merge of ``job_dir``, its job files rewritten from the rank
        dirs (the live view's late points among them); False, logged, when it failed."""
        try:
            outcome = merge_run_dir(job_dir, world_size=world_size)
        except (LineageError, OSError) as error:
            logger.error(
                "Completing the job view of %s from the rank files failed: %s. Run "
                "`rankscribe-lineage merge %s` after the job.",
                job_dir,
                error,
                job_dir,
            )
            return False
        self.last_merged = outcome.lineage
        return True

    def session(self) -> tuple[dict[str, Any] | None, dict[str, float] | None]:
        """The HParams session of the merged lineage (none before a merge)."""
        if self.last_merged is None:
            return None, None
        return session_values(self.last_merged)

    def _report(self, error: Exception) -> None:
        logger.error(
            "The lineage of rank %d cannot be merged into %s: %s. Run "
            "`rankscribe-lineage merge %s` after the job.",
            self.info.rank,
            self.summary_dir,
            error,
            self.summary_dir,
        )

    def merge(
        self,
        rank_directory: str | os.PathLike[str],
        series: ScalarSeries | None = None,
        *,
        verdicts: Mapping[str, float | int | str] | None = None,
        timeout: float | None = None,
    ) -> str | None:
        """Every rank calls this; rank 0 returns the merged file's path (others None).

        ``series``: this rank's scalars for the job view (none: no job view
        from this rank). ``verdicts``: on rank 0, the job view's verdicts when
        the live view (the tree) wrote the job files already. ``timeout``:
        what is left of the wait for the other ranks (default ``self.timeout``).
        """
        payload = {
            "lineage": self._own_lineage(rank_directory),
            "series": series.payload() if series is not None else None,
        }
        coordinator = self.coordinator if self.coordinator is not None else self._owned
        if coordinator is None:
            return None  # open() failed and said so
        try:
            result = coordinator.gather(
                payload, root=0, timeout=self.timeout if timeout is None else timeout
            )
        except RanksError as error:
            self._report(error)
            return None
        if not result.is_root:
            return None
        records: dict[int, RunLineage] = {}
        job_series: dict[int, RankSeries] = {}
        for rank, value in result.values.items():
            if not isinstance(value, dict):
                continue
            lineage = value.get("lineage")
            if isinstance(lineage, dict):
                records[rank] = RunLineage.from_json_dict(lineage)
            rank_series = ScalarSeries.rank_series(rank, value.get("series"))
            if rank_series is not None and rank_series.scalars:
                job_series[rank] = rank_series
        return self._write(records, job_series, tuple(result.missing), verdicts)

    def _own_lineage(self, rank_directory: str | os.PathLike[str]) -> dict[str, Any] | None:
        try:
            # An interrupted training run: the train lineage known at its start.
            parsed = parse_rank_run(os.fspath(rank_directory))
        except (OSError, LineageError) as error:
            logger.error("Reading back this rank's lineage in %s failed: %s", rank_directory, error)
            return None
        for warning in parsed.warnings:
            logger.warning("%s", warning)
        return parsed.lineage.to_json_dict() if parsed.lineage is not None else None

    def _write(
        self,
        records: dict[int, RunLineage],
        job_series: dict[int, RankSeries],
        not_arrived: tuple[int, ...],
        verdicts: Mapping[str, float | int | str] | None = None,
    ) -> str | None:
        missing = tuple(rank for rank in range(self.info.world_size) if rank not in records)
        merged = (
            merge_rank_lineages(
                records, world_size=self.info.world_size, summary_dir=str(self.summary_dir)
            )
            if records
            else None
        )
        try:
            with exclusive_lock(str(self.summary_dir / MERGE_LOCK_NAME), timeout=self.timeout):
                if verdicts is not None:  # the live view's: evidence from the rank dirs
                    verdicts = dict(verdicts)
                    verdicts.update(system_evidence(verdicts, self.summary_dir))
                else:
                    verdicts = self._write_job_view(job_series, not_arrived, merged)
                # Ranks that wrote into directories of their own: named in the job's record.
                verdicts = {**verdicts, **rank_dirs_note(self.summary_dir)}
                if self.verdict_notes is not None:  # what the collector adds (bucket names)
                    verdicts.update(self.verdict_notes(verdicts))
                if merged is None:
                    logger.error(
                        "No rank reported a lineage; no merged lineage is written in %s.",
                        self.summary_dir,
                    )
                    return None
                if verdicts:
                    merged = merge_rank_lineages(
                        records,
                        world_size=self.info.world_size,
                        summary_dir=str(self.summary_dir),
                        user_defined=verdicts,
                    )
                path = write_merged_lineage(self.summary_dir, merged)
        except (OSError, LockTimeoutError) as error:
            logger.error("Writing the merged lineage into %s failed: %s", self.summary_dir, error)
            return None
        self.last_merged = merged
        if missing:
            logger.warning(
                "The merged lineage %s lacks rank(s) %s, which did not report within %g s.",
                path,
                ", ".join(map(str, missing)),
                self.timeout,
            )
        return path

    def _write_job_view(
        self,
        job_series: dict[int, RankSeries],
        not_arrived: tuple[int, ...],
        merged: RunLineage | None,
    ) -> dict[str, float | int | str]:
        """The job's cross-rank curves into ``summary_dir``; their verdicts (empty on failure)."""
        if not job_series:
            # Nothing trained (an evaluation alone): the job files stay, and so do the
            # verdicts an earlier merge wrote, or this merge would drop them.
            return self._earlier_verdicts()
        # The TensorBoard HParams session of the job: its merged setup and final metrics.
        hparams, metrics = session_values(merged) if merged is not None else ({}, {})
        try:
            view = write_job_view(
                self.summary_dir,
                job_series,
                world_size=self.info.world_size,
                missing=not_arrived,
                tensorboard=self.tensorboard,
                hparams=hparams,
                metrics=metrics,
            )
        except (OSError, LineageError, ValueError, TypeError) as error:
            logger.error(
                "Writing the job view into %s failed: %s. Run `rankscribe-lineage "
                "merge %s` after the job.",
                self.summary_dir,
                error,
                self.summary_dir,
            )
            return {}
        return dict(view.verdicts)

    def _earlier_verdicts(self) -> dict[str, float | int | str]:
        try:
            earlier = get_run_lineage(str(self.summary_dir.resolve()))
        except (OSError, LineageError):
            return {}  # no merged lineage yet
        if earlier is None:
            return {}
        return {
            key: value
            for key, value in earlier.section("user_defined").items()
            if key.startswith("job/") and isinstance(value, (int, float, str))
        }
