"""Lightning: :class:`RankScribeLogger`, a ``lightning.pytorch`` logger that records every rank.

    from rankscribe.collector.lightning import RankScribeLogger

    trainer = Trainer(accelerator="cpu", devices=2, strategy="ddp",
                      logger=RankScribeLogger("runs", name="mnist"))
    trainer.fit(model, datamodule)

Unlike Lightning's own loggers it is not rank-zero-only: every rank writes
``<save_dir>/<name>/<version>/rank_<r>/`` and, when training ends, rank 0 writes
the job's merged lineage and job view into ``<save_dir>/<name>/<version>/``,
as :class:`~rankscribe.collector.SummaryCollector` does (it is the collector
underneath). Versions are Lightning's: ``version_0``, ``version_1``, ... (the
first free one, agreed by every rank) or the name given; a run never writes
into an earlier one. What is recorded, and from which hooks, is in
``docs/integrations.md``. Needs the ``rankscribe-collector[lightning]`` extra;
``import rankscribe.collector`` alone never imports Lightning.
"""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.loggers.logger import Logger

from rankscribe.collector._collector import SummaryCollector
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.collector.frameworks._driver import (
    FrameworkRun,
    check_name,
    check_run_dir,
    claim_version_dir,
    job_coordinator,
    lineage_values,
    numeric_scalars,
)
from rankscribe.collector.run._lineage import DEFAULT_MERGE_TIMEOUT
from rankscribe.ranks import Coordinator, detect

__all__ = ["RankScribeLogger"]

_OWNER = "RankScribeLogger"


class RankScribeLogger(Logger):
    """Record a Lightning run from every rank, as a RankScribe job.

    Args:
        save_dir: the folder runs go under (``<save_dir>/<name>/<version>``).
        name: the experiment's folder (default ``"rankscribe"``).
        version: a run name, or an int ``n`` for ``version_<n>``; by default
            the next free ``version_<n>``.
        merge_timeout: seconds rank 0 waits for the other ranks at the end.
        **collector_options: passed to :class:`SummaryCollector`
            (``collect_freq``, ``formats``, ``collect_specified_data``, ``on_verdict``,
            called on rank 0 with each verdict record, ...).
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str = "rankscribe",
        version: int | str | None = None,
        *,
        merge_timeout: float = DEFAULT_MERGE_TIMEOUT,
        **collector_options: Any,
    ) -> None:
        super().__init__()
        self._save_dir = check_run_dir(_OWNER, "save_dir", save_dir)
        self._name = check_name(_OWNER, "name", name)
        if (version is not None and not isinstance(version, (int, str))) or isinstance(
            version, bool
        ):
            raise CollectorTypeError(
                f"For '{_OWNER}', the argument 'version' must be an int, a str or None, but "
                f"got {type(version).__name__}."
            )
        if isinstance(version, int) and version < 0:
            raise CollectorValueError(
                f"For '{_OWNER}', the argument 'version' must be >= 0, but got {version}."
            )
        self._given = (
            f"version_{version}"
            if isinstance(version, int)
            else check_name(_OWNER, "version", version)
            if version is not None
            else None
        )
        self._merge_timeout = merge_timeout
        self._options = dict(collector_options)
        # The collector checks its own options now, not at the first step.
        SummaryCollector(self._save_dir, **self._options)
        self._version: str | None = None
        self._coordinator: Coordinator | None = None
        self._hyperparameters: dict[str, int | float | str] = {}
        self._run: FrameworkRun | None = None
        self._hooks: _Hooks | None = None
        self._eval_metrics: dict[str, float] = {}
        #: What stopped the fit (Lightning's ``on_exception``, before ``finalize("failed")``).
        self._stopped_by: BaseException | None = None

    # ------------------------------------------------------------- Logger's surface

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> str:
        """This run's folder name, agreed by every rank on first use."""
        if self._version is None:
            info = detect()
            self._coordinator = job_coordinator(info, self.root_dir, self._merge_timeout, _OWNER)
            self._version = claim_version_dir(
                self._coordinator, self.root_dir, given=self._given, owner=_OWNER
            )
        return self._version

    @property
    def save_dir(self) -> str:
        return self._save_dir

    @property
    def root_dir(self) -> str:
        return os.path.join(self._save_dir, self._name)

    @property
    def log_dir(self) -> str:
        """The job's directory: ``<save_dir>/<name>/<version>`` (ranks in ``rank_<r>/``)."""
        return os.path.join(self.root_dir, self.version)

    @property
    def experiment(self) -> SummaryCollector | None:
        """The collector recording this rank (None before training starts)."""
        return self._run.collector if self._run is not None else None

    def log_hyperparams(
        self, params: Mapping[str, Any] | Namespace, *args: Any, **kwargs: Any
    ) -> None:
        values = vars(params) if isinstance(params, Namespace) else dict(params or {})
        self._hyperparameters.update(lineage_values(values))

    def log_graph(self, model: Any, input_array: Any = None) -> None:
        """Called by Lightning on every rank when fitting starts: hooks into the trainer."""
        trainer = getattr(model, "_trainer", None) or getattr(model, "trainer", None)
        if trainer is None or self._hooks is not None:
            return
        self._hooks = _Hooks(self)
        trainer.callbacks.append(self._hooks)

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        scalars = numeric_scalars(metrics)
        if self._run is not None and self._run.collector.record is not None:
            self._run.scalars(scalars, step)

    def save(self) -> None:
        """Everything recorded is handed to the writer as it comes; nothing to do."""

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        best = getattr(checkpoint_callback, "best_model_path", "") or getattr(
            checkpoint_callback, "last_model_path", ""
        )
        if self._run is not None and best:
            self._run.checkpoint.latest_ckpt_file_name = best

    def finalize(self, status: str) -> None:
        """The job's lineage and view (every rank), then this rank's files are closed.

        A fit stopped by an exception (``status`` "failed") closes the files with it,
        as a training loop would: rank 0 of several says how to merge the job's
        lineage, which the end of training did not.
        """
        run, self._run = self._run, None
        stopped_by, self._stopped_by = self._stopped_by, None
        if run is None:
            return
        try:
            if status == "success":
                if run.training:
                    run.end_training()
                if self._eval_metrics:
                    run.evaluation(
                        self._eval_metrics,
                        self._hooks.valid_dataset if self._hooks is not None else None,
                    )
        finally:
            run.close(stopped_by if status != "success" else None)

    # ------------------------------------------------------------------ internals

    def _begin(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        options = dict(self._options)
        custom = dict(self._hyperparameters)
        custom.update(options.pop("custom_lineage_data", None) or {})
        collector = SummaryCollector(
            self.log_dir,
            custom_lineage_data=custom or None,
            merge_timeout=self._merge_timeout,
            coordinator=self._coordinator,
            **options,
        )
        run = FrameworkRun(collector, owner=_OWNER)
        optimizers = list(getattr(trainer, "optimizers", None) or [])
        max_epochs = trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else 1
        batches = trainer.num_training_batches
        run.begin(
            network=module,
            optimizer=optimizers[0] if optimizers else None,
            train_dataset=trainer.train_dataloader,
            epochs=max_epochs,
            steps_per_epoch=int(batches) if isinstance(batches, int) else None,
            # Lightning's hooks get the LightningModule; under the ddp strategy its
            # DistributedDataParallel wrapper is the strategy's model.
            gradient_network=getattr(trainer.strategy, "model", None),
        )
        self._run = run

    def _validation_metrics(self, metrics: Mapping[str, Any]) -> None:
        self._eval_metrics = {
            key.removeprefix("val_").removeprefix("val/"): value
            for key, value in numeric_scalars(metrics).items()
            if key.startswith(("val_", "val/"))
        }


def _loss_of(outputs: Any) -> Any:
    if isinstance(outputs, Mapping):
        return outputs.get("loss")
    return outputs


class _Hooks(pl.Callback):
    """Lightning's training hooks, told to the run as a training loop's callback events."""

    def __init__(self, logger: RankScribeLogger) -> None:
        self._logger = logger
        self.valid_dataset: Any = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._logger._begin(trainer, pl_module)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        run = self._logger._run
        if run is not None and run.training:
            run.epoch_begin(trainer.current_epoch + 1)

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        run = self._logger._run
        if run is not None and run.training:
            run.step_begin(batch)

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        run = self._logger._run
        if run is not None and run.training:
            run.step_end(_loss_of(outputs))

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        run = self._logger._run
        if run is not None and run.training:
            run.epoch_end()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self.valid_dataset = trainer.val_dataloaders
        self._logger._validation_metrics(trainer.callback_metrics)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        run = self._logger._run
        if run is not None and run.training:
            run.end_training()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self._logger._stopped_by = exception
