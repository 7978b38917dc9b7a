"""Hugging Face: :class:`RankScribeCallback`, a ``TrainerCallback`` that records every rank.

    from rankscribe.collector.transformers import RankScribeCallback

    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=valid,
                      callbacks=[RankScribeCallback("runs/bert")])
    trainer.train()

Under ``torchrun`` every process records into ``runs/bert/rank_<r>/`` and, when
training ends, rank 0 writes the job's merged lineage and job view into
``runs/bert/`` (a directory that already holds a run is left alone: the run
goes to ``runs/bert-2``, ``runs/bert-3``, ...). Logged values (``on_log``)
become scalars; ``TrainingArguments`` and the model give the train lineage
(learning rate, epochs, per-device batch size x world size, dataset sizes, the
model's class and parameter count); the last evaluation's metrics the eval
lineage; the last checkpoint the Trainer saved is the lineage's model file.
Details: ``docs/integrations.md``. Needs the ``rankscribe-collector[transformers]``
extra; ``import rankscribe.collector`` alone never imports transformers.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from types import FrameType
from typing import Any

import transformers
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from rankscribe.collector._collector import SummaryCollector
from rankscribe.collector.frameworks._driver import (
    ConfiguredOptimizer,
    FrameworkRun,
    check_run_dir,
    claim_summary_dir,
    job_coordinator,
    lineage_values,
    numeric_scalars,
    parameter_count,
)
from rankscribe.collector.run._lineage import DEFAULT_MERGE_TIMEOUT
from rankscribe.ranks import detect

__all__ = ["RankScribeCallback"]

_OWNER = "RankScribeCallback"

#: Evaluation values that describe the evaluation's speed, not the model.
_SPEED_KEYS = frozenset({"runtime", "samples_per_second", "steps_per_second", "epoch"})

#: TrainingArguments kept in the lineage's user_defined values.
_ARGUMENTS = (
    "learning_rate",
    "num_train_epochs",
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "weight_decay",
    "warmup_steps",
    "warmup_ratio",
    "lr_scheduler_type",
    "seed",
    "optim",
    "max_grad_norm",
)


#: Frames above a callback searched for the Trainer calling it (3 in transformers 5).
_CALLER_FRAMES = 8


def _wrapped_model(model: Any) -> Any:
    """The wrapper the Trainer trains ``model`` in (``Trainer.model_wrapped``: the
    ``DistributedDataParallel`` module under ``torchrun``), or None.

    The Trainer hands its callbacks the model it wraps, never the wrapper nor itself;
    its training loop calls the callback handler from one of its own methods, so the
    Trainer is the ``self`` of a frame a few calls above this callback's event.
    """
    frame: FrameType | None = sys._getframe(1)
    for _ in range(_CALLER_FRAMES):
        if frame is None:
            break
        owner = frame.f_locals.get("self")
        if isinstance(owner, transformers.Trainer):
            wrapped = getattr(owner, "model_wrapped", None)
            return wrapped if getattr(wrapped, "module", None) is model else None
        frame = frame.f_back
    return None


class RankScribeCallback(TrainerCallback):
    """Record a Hugging Face ``Trainer`` run from every process, as a RankScribe job.

    Args:
        summary_dir: the job's directory (taken whole; a second run goes to
            ``<summary_dir>-2``, ...).
        merge_timeout: seconds rank 0 waits for the other ranks at the end.
        **collector_options: passed to :class:`SummaryCollector` (``collect_freq``,
            ``on_verdict`` — called on rank 0 with each verdict record —, ...).
    """

    def __init__(
        self,
        summary_dir: str | os.PathLike[str],
        *,
        merge_timeout: float = DEFAULT_MERGE_TIMEOUT,
        **collector_options: Any,
    ) -> None:
        self._requested = os.path.normpath(check_run_dir(_OWNER, "summary_dir", summary_dir))
        self._merge_timeout = merge_timeout
        self._options = dict(collector_options)
        SummaryCollector(self._requested, **self._options)  # checks the options now
        self._run: FrameworkRun | None = None
        self._eval_metrics: dict[str, float] = {}
        self._eval_dataset: Any = None
        self._last_loss: Any = None
        self._last_batch: Any = None
        self._loss_hook: Any = None
        self.summary_dir: str | None = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        info = detect()
        parent = os.path.dirname(self._requested)
        coordinator = job_coordinator(info, parent or ".", self._merge_timeout, _OWNER)
        self.summary_dir = claim_summary_dir(coordinator, self._requested)
        model = kwargs.get("model")
        train_loader = kwargs.get("train_dataloader")
        self._eval_dataset = kwargs.get("eval_dataloader")
        world = max(info.world_size, 1)
        values = lineage_values({key: getattr(args, key, None) for key in _ARGUMENTS})
        values["global_batch_size"] = args.per_device_train_batch_size * world
        count = parameter_count(model)
        if count is not None:
            values["parameter_count"] = count
        options = dict(self._options)
        values.update(options.pop("custom_lineage_data", None) or {})
        collector = SummaryCollector(
            self.summary_dir,
            custom_lineage_data=values,
            merge_timeout=self._merge_timeout,
            coordinator=coordinator,
            **options,
        )
        run = FrameworkRun(collector, owner=_OWNER)
        optimizer = kwargs.get("optimizer")
        epochs = (
            math.ceil(args.num_train_epochs)
            if args.max_steps is None or args.max_steps <= 0
            else max(state.num_train_epochs, 1)
        )
        register = getattr(model, "register_forward_hook", None)
        if callable(register):
            # The Trainer's callbacks never see a step's batch or loss; the model's inputs
            # and output hold them.
            self._loss_hook = register(self._keep_step, with_kwargs=True)
        run.begin(
            network=model,
            optimizer=ConfiguredOptimizer(optimizer, args.learning_rate)
            if optimizer is not None
            else None,
            train_dataset=train_loader,
            epochs=int(epochs),
            gradient_network=_wrapped_model(model),
        )
        self._run = run

    def _keep_step(self, module: Any, args: Any, kwargs: Any, outputs: Any) -> None:
        if not getattr(module, "training", True):
            return  # an evaluation's forward is not a training step
        # The Trainer calls model(**inputs): the batch is the keyword arguments.
        self._last_batch = dict(kwargs) if kwargs else (args if args else None)
        loss = (
            outputs.get("loss") if isinstance(outputs, Mapping) else getattr(outputs, "loss", None)
        )
        if loss is not None:
            detach = getattr(loss, "detach", None)
            self._last_loss = detach() if callable(detach) else loss

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._run is not None and self._run.training:
            self._run.epoch_begin(int(state.epoch or 0) + 1)

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._run is not None and self._run.training:
            self._run.step_begin(None)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._run is not None and self._run.training:
            batch, self._last_batch = self._last_batch, None
            self._run.step_end(self._last_loss, batch=batch)

    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._run is not None and self._run.training:
            self._run.epoch_end()

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        scalars = numeric_scalars(logs or {})
        if self._run is not None:
            self._run.scalars(scalars, state.global_step)

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        evaluated = {
            key.removeprefix("eval_"): value
            for key, value in numeric_scalars(metrics or {}).items()
        }
        self._eval_metrics = {
            key: value for key, value in evaluated.items() if key not in _SPEED_KEYS
        }

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._run is None:
            return
        checkpoint = state.best_model_checkpoint or os.path.join(
            args.output_dir or ".", f"checkpoint-{state.global_step}"
        )
        self._run.checkpoint.latest_ckpt_file_name = checkpoint

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        run, self._run = self._run, None
        hook, self._loss_hook = self._loss_hook, None
        if hook is not None:
            hook.remove()
        if run is None:
            return
        try:
            run.end_training()
            if self._eval_metrics:
                run.evaluation(self._eval_metrics, self._eval_dataset)
        finally:
            run.close()
