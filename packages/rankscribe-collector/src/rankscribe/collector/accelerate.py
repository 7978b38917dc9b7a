"""Accelerate: :class:`RankScribeTracker`, a ``GeneralTracker`` that records every process.

    from accelerate import Accelerator
    from rankscribe.collector.accelerate import RankScribeTracker

    accelerator = Accelerator(cpu=True, log_with=[RankScribeTracker("runs/exp1")])
    accelerator.init_trackers("exp1", config={"learning_rate": 1e-3, "batch_size": 32})
    for step, batch in enumerate(loader, start=1):
        ...
        accelerator.log({"loss": loss.item()}, step=step)
    accelerator.end_training()

Accelerate calls trackers on its main process only (``init_trackers`` and
``log`` return at once elsewhere). This tracker records every process: creating
one makes those two calls, on the other processes, reach the RankScribe trackers
the ``Accelerator`` was given (and only those; Accelerate's own trackers keep
their main-process rule). Each process writes ``runs/exp1/rank_<r>/``, and at
``end_training`` rank 0 writes the job's merged lineage and job view into
``runs/exp1/`` (a directory that already holds a run is left alone: the run goes
to ``runs/exp1-2``, ...). ``store_init_configuration`` goes to the lineage:
``learning_rate``/``lr``, ``epochs``/``num_epochs`` and ``batch_size`` as the
hyper-parameters they are, everything as ``user_defined`` values. Each ``log``
with a step ends that step (the step time is the time between two steps); its
value under ``loss_key`` (``"loss"``) is the step's loss. ``cpu=True`` is what
makes Accelerate train the launcher's processes together on a machine without
GPUs; without it each process trains alone, and the tracker warns once and
records each as a run of its own. Details: ``docs/integrations.md``. Needs the
``rankscribe-collector[accelerate]`` extra; ``import rankscribe.collector`` alone
never imports Accelerate.
"""

from __future__ import annotations

import functools
import logging
import os
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import accelerate
import torch
from accelerate import PartialState
from accelerate.tracking import GeneralTracker

from rankscribe.collector._collector import SummaryCollector
from rankscribe.collector.errors import CollectorStateError, CollectorTypeError
from rankscribe.collector.frameworks._driver import (
    FrameworkRun,
    check_run_dir,
    claim_summary_dir,
    job_coordinator,
    lineage_values,
    numeric_scalars,
    optimizer_for_lineage,
    unwrapped_optimizer,
)
from rankscribe.collector.run._lineage import DEFAULT_MERGE_TIMEOUT
from rankscribe.ranks import RankInfo, detect

logger = logging.getLogger(__name__)

__all__ = ["RankScribeTracker"]

_OWNER = "RankScribeTracker"


class RankScribeTracker(GeneralTracker):
    """Record an Accelerate run from every process, as a RankScribe job.

    Args:
        summary_dir: the job's directory (a second run goes to ``<summary_dir>-2``).
        network, optimizer, train_dataset: optional, for the lineage and the
            collector's parameter data (what ``accelerator.prepare`` returned works).
        loss_key: the key of ``accelerator.log`` values that holds the step's loss
            (``"loss"``): the collector's ``loss/auto`` and the lineage's loss come
            from it. A step logged without it records no loss, and one warning names
            the keys it got.
        merge_timeout: seconds rank 0 waits for the other ranks at the end.
        **collector_options: passed to :class:`SummaryCollector` (``collect_freq``,
            ``on_verdict`` — called on rank 0 with each verdict record —, ...).
    """

    name = "rankscribe"
    requires_logging_directory = False
    main_process_only = False

    def __init__(
        self,
        summary_dir: str | os.PathLike[str],
        *,
        network: Any = None,
        optimizer: Any = None,
        train_dataset: Any = None,
        loss_key: str = "loss",
        merge_timeout: float = DEFAULT_MERGE_TIMEOUT,
        **collector_options: Any,
    ) -> None:
        super().__init__()
        if not isinstance(loss_key, str) or not loss_key:
            raise CollectorTypeError(
                f"For '{_OWNER}', the argument 'loss_key' must be a non-empty str (the key of "
                f"the loss in accelerator.log's values), but got {loss_key!r}."
            )
        self._loss_key = loss_key
        self._requested = os.path.normpath(check_run_dir(_OWNER, "summary_dir", summary_dir))
        self._objects = {"network": network, "optimizer": optimizer, "train_dataset": train_dataset}
        self._merge_timeout = merge_timeout
        self._options = dict(collector_options)
        SummaryCollector(self._requested, **self._options)  # checks the options now
        self._config: dict[str, Any] = {}
        self._run: FrameworkRun | None = None
        self._started = False
        self._info: RankInfo | None = None
        #: The Accelerator calling this tracker (weakly: the accelerator holds the tracker).
        self._accelerator: Callable[[], Any] = _nobody
        self.summary_dir: str | None = None
        _reach_every_process()

    @property
    def tracker(self) -> SummaryCollector | None:
        """The collector recording this process (None before ``init_trackers``)."""
        return self._run.collector if self._run is not None else None

    def watch(self, network: Any = None, optimizer: Any = None, train_dataset: Any = None) -> None:
        """The model, optimizer and data loader (as ``accelerator.prepare`` returned them).

        Optional: with them the lineage names the network and the optimizer and
        counts the data, and the collector records the parameters. Call it before
        the first ``accelerator.log``.
        """
        if self._run is not None:
            raise CollectorStateError(
                f"For '{_OWNER}', watch() comes before the first log(): the run has begun."
            )
        for key, value in (
            ("network", network),
            ("optimizer", optimizer),
            ("train_dataset", train_dataset),
        ):
            if value is not None:
                self._objects[key] = value

    def start(self) -> None:
        """Called by ``init_trackers`` on every process: the job's directory is agreed."""
        if self._started:
            return
        self._started = True
        self._info = _process_info(detect(), PartialState().num_processes)
        parent = os.path.dirname(self._requested)
        self._coordinator = job_coordinator(self._info, parent or ".", self._merge_timeout, _OWNER)
        self.summary_dir = claim_summary_dir(self._coordinator, self._requested)

    def store_init_configuration(self, values: Mapping[str, Any]) -> None:
        self._config.update(values)

    def _open(self) -> FrameworkRun:
        if self._run is not None:
            return self._run
        if not self._started:
            self.start()
        assert self.summary_dir is not None
        config = self._config
        options = dict(self._options)
        custom = lineage_values(config)
        custom.update(options.pop("custom_lineage_data", None) or {})
        collector = SummaryCollector(
            self.summary_dir,
            custom_lineage_data=custom or None,
            merge_timeout=self._merge_timeout,
            coordinator=self._coordinator,
            rank_info=self._info,
            **options,
        )
        run = FrameworkRun(collector, owner=_OWNER)
        optimizer = optimizer_for_lineage(
            unwrapped_optimizer(self._objects["optimizer"]),
            config.get("optimizer"),
            _number(config, "learning_rate", "lr"),
        )
        epochs = _number(config, "epochs", "num_epochs", "num_train_epochs")
        batch_size = _number(config, "batch_size", "per_device_train_batch_size")
        run.begin(
            network=self._objects["network"],
            optimizer=optimizer,
            train_dataset=self._objects["train_dataset"],
            epochs=int(epochs) if epochs is not None and epochs >= 1 else 1,
            extra={"batch_size": int(batch_size)} if batch_size is not None else None,
            device_number=self._info.world_size if self._info is not None else None,
            gradient_network=_prepared_ddp(self._accelerator()),
        )
        run.step_begin(None)
        self._run = run
        return run

    def log(self, values: Mapping[str, Any], step: int | None = None, **kwargs: Any) -> None:
        run = self._open()
        scalars = numeric_scalars(values)
        if step is not None:
            loss = scalars.get(self._loss_key)
            run.step_end(
                loss,
                step=int(step),
                no_loss_reason=None if loss is not None else self._no_loss_reason(values),
            )
            run.scalars(scalars, int(step))
            run.step_begin(None)
        else:
            run.scalars(scalars, None)

    def finish(self) -> None:
        """Training ended (``accelerator.end_training()``): the job's lineage, every process."""
        run, self._run = self._run, None
        if run is None:
            return
        try:
            run.end_training()
        finally:
            run.close()

    def _no_loss_reason(self, values: Mapping[str, Any]) -> str:
        seen = ", ".join(repr(key) for key in values) or "none"
        return (
            f"accelerator.log(..., step=...) logged no number under the loss key "
            f"{self._loss_key!r} (its keys: {seen}); name the key of your loss with "
            f"RankScribeTracker(..., loss_key=...)"
        )


def _process_info(info: RankInfo, framework_processes: int) -> RankInfo:
    """This process as Accelerate runs it: alone when Accelerate says one process.

    Without ``Accelerator(cpu=True)`` on a machine with no GPU, Accelerate ignores
    the launcher's processes: each trains alone, on the whole dataset. Recording
    them as one data-parallel job would double its size; each process is then its
    own run (``<dir>``, ``<dir>-2``, ...), and the launcher's rank 0 warns once.
    """
    if info.world_size <= 1 or framework_processes != 1:
        return info
    logger.log(
        logging.WARNING if info.rank == 0 else logging.DEBUG,
        "For '%s', the launcher started %d processes but Accelerate runs each one alone "
        "(num_processes=1): on a machine without GPUs, pass Accelerator(cpu=True, ...) to "
        "train them as one data-parallel job. Each process is recorded as a run of its own.",
        _OWNER,
        info.world_size,
    )
    return RankInfo(0, 1, 0, 1, info.host, "single")


def _nobody() -> None:
    return None


#: Each Accelerator's ``DistributedDataParallel`` modules, as ``prepare`` returned them (weakly).
#: Accelerate keeps no list of them (its ``_models`` holds the unwrapped model on CPUs).
_prepared: weakref.WeakKeyDictionary[Any, list[weakref.ref[Any]]] = weakref.WeakKeyDictionary()


def _prepared_ddp(accelerator: Any) -> Any:
    """The first ``DistributedDataParallel`` module ``accelerator.prepare`` returned, or None.

    The gradient probe reads its buckets; the network given to :meth:`RankScribeTracker.watch`
    (wrapped or not) still names the model.
    """
    for reference in _prepared.get(accelerator, []) if accelerator is not None else []:
        model = reference()
        if model is not None:
            return model
    return None


def _number(config: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _ours(accelerator: Any) -> list[RankScribeTracker]:
    found = [
        tracker
        for tracker in getattr(accelerator, "log_with", None) or []
        if isinstance(tracker, RankScribeTracker)
    ]
    for tracker in found:  # the tracker's run finds the accelerator's prepared network
        tracker._accelerator = weakref.ref(accelerator)
    return found


def _reach_every_process() -> None:
    """Make ``init_trackers`` and ``log`` reach our trackers on every process, and note the
    ``DistributedDataParallel`` modules ``prepare_model`` returns (:func:`_prepared_ddp`), once."""
    accelerator_class: Any = accelerate.Accelerator
    if getattr(accelerator_class.init_trackers, "_rankscribe", False):
        return
    init_trackers = accelerator_class.init_trackers
    log = accelerator_class.log
    prepare_model = accelerator_class.prepare_model

    @functools.wraps(prepare_model)
    def noting_prepare_model(self: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
        prepared = prepare_model(self, model, *args, **kwargs)
        if isinstance(prepared, torch.nn.parallel.DistributedDataParallel):
            _prepared.setdefault(self, []).append(weakref.ref(prepared))
        return prepared

    @functools.wraps(init_trackers)
    def every_process_init_trackers(
        self: Any, project_name: str, config: Any = None, init_kwargs: Any = None
    ) -> Any:
        ours = _ours(self)
        result = init_trackers(self, project_name, config=config, init_kwargs=init_kwargs)
        if not self.is_main_process:
            for tracker in ours:
                if tracker not in self.trackers:
                    self.trackers.append(tracker)  # end_training finishes it here too
                tracker.start()
                if config is not None:
                    tracker.store_init_configuration(config)
        return result

    @functools.wraps(log)
    def every_process_log(
        self: Any, values: dict[str, Any], step: int | None = None, log_kwargs: Any = None
    ) -> Any:
        ours = _ours(self)
        result = log(self, values, step=step, log_kwargs=log_kwargs)
        if not self.is_main_process:
            for tracker in ours:
                tracker.log(values, step=step)
        return result

    every_process_init_trackers._rankscribe = True  # type: ignore[attr-defined]
    accelerator_class.init_trackers = every_process_init_trackers
    accelerator_class.log = every_process_log
    accelerator_class.prepare_model = noting_prepare_model
