"""TrainLoop: the callback events of MindSpore's ``Model.train``/``Model.eval`` for your own loop.

A script without a framework (or with one that has no callback system) gives
a step function and, optionally, an eval function; :class:`TrainLoop` calls
them over the dataset and calls every callback around them, filling the
:class:`~rankscribe.collector._callback.CallbackParams` the collector and the
checkpoint read::

    loop = TrainLoop(step, network=net, optimizer=opt, loss_fn=loss, eval_fn=evaluate)
    loop.train(2, train_set, callbacks=[SummaryCollector("runs/exp1"), ModelCheckpoint()])
    metrics = loop.eval(valid_set, callbacks=[SummaryCollector("runs/exp1")])

Training, as ``Model.train``: callbacks are entered (``with``), then
``begin``; per epoch ``epoch_begin``, per step ``step_begin``, the step,
``step_end``; ``epoch_end``; and ``end``. ``cur_step_num`` counts steps from 1
across epochs and ``train_dataset_element`` is the step's batch. A callback's
``run_context.request_stop()`` ends training after the current step (its
epoch still ends with ``epoch_end``, and ``end`` is called).

Quiet steps: where the ``SummaryCollector`` is among the callbacks and every other
callback acting at steps says at which steps it has nothing to do (``ModelCheckpoint``,
``Progress``; a callback whose ``step_begin`` and ``step_end`` are :class:`Callback`'s
does nothing there), the steps none of them acts at run without calling them: the loop
times each (its start before the step function, its end after) and logs it for the
collector, which takes the log at its next step (docs/collector-cost.md, "Quiet steps").

Dataset sink mode, as MindSpore's: one callback step per epoch; the step
function still runs on every batch, ``cur_step_num`` advances by the batches
of the epoch, ``net_outputs`` and ``train_dataset_element`` are the last
batch's.

Evaluation, as ``Model.eval``: ``begin``, per batch ``step_begin``,
``eval_fn(batch)``, ``step_end``, then ``metrics`` (the mean over the batches
of each metric ``eval_fn`` returned) and ``end``.

``device_number`` and ``parallel_mode`` default to this job's ranks
(:func:`rankscribe.ranks.detect`): ``"data_parallel"`` on several ranks,
``"stand_alone"`` alone.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rankscribe.collector import _clock
from rankscribe.collector._callback import (
    Callback,
    CallbackList,
    CallbackParams,
    QuietBound,
    QuietSteps,
    RunContext,
    quiet_steps_for,
)
from rankscribe.collector._checks import check_optional_text
from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.ranks import detect
from rankscribe.writer.operators import discard_pending

logger = logging.getLogger(__name__)

__all__ = ["TrainLoop", "train_params"]


def _check_callable(name: str, value: object, required: bool) -> None:
    if value is None and not required:
        return
    if not callable(value):
        raise CollectorTypeError(
            f"For 'TrainLoop', the argument '{name}' must be a function, but got "
            f"{type(value).__name__}."
        )


def _batches(dataset: object, argument: str, adapters: AdapterRegistry) -> int | None:
    if not isinstance(dataset, Iterable):
        raise CollectorTypeError(
            f"For 'TrainLoop', the argument '{argument}' must be an iterable of batches, but "
            f"got {type(dataset).__name__}."
        )
    view = adapters.dataset_view(dataset)
    return view.batches if view is not None else None


class TrainLoop:
    """Drive callbacks around a step function (and an eval function).

    Args:
        step_fn: called with each training batch (as the dataset yields it);
            returns the step's outputs: the loss, or a tuple whose first
            element is the loss.
        network: the model (``train_network``/``network``); its parameters and
            graph are what the collector and the checkpoint read.
        optimizer: the optimizer (parameters and learning rate).
        loss_fn: the loss function (its class name goes into the lineage).
        eval_fn: called with each evaluation batch; returns a dict of metric
            name to number for that batch.
        device_number, parallel_mode: default from the job's ranks.
    """

    def __init__(
        self,
        step_fn: Callable[[Any], Any],
        *,
        network: Any = None,
        optimizer: Any = None,
        loss_fn: Any = None,
        eval_fn: Callable[[Any], Mapping[str, Any]] | None = None,
        eval_network: Any = None,
        device_number: int | None = None,
        parallel_mode: str | None = None,
    ) -> None:
        _check_callable("step_fn", step_fn, required=True)
        _check_callable("eval_fn", eval_fn, required=False)
        check_optional_text("parallel_mode", parallel_mode, owner="TrainLoop")
        if device_number is not None and (
            isinstance(device_number, bool)
            or not isinstance(device_number, int)
            or device_number < 1
        ):
            raise CollectorValueError(
                f"For 'TrainLoop', the argument 'device_number' must be an int >= 1, but got "
                f"{device_number!r}."
            )
        self.step_fn = step_fn
        self.eval_fn = eval_fn
        self._adapters = AdapterRegistry()
        self.network = network
        self.eval_network = eval_network if eval_network is not None else network
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        world_size = detect().world_size if device_number is None else device_number
        self.device_number = world_size
        self.parallel_mode = parallel_mode or ("data_parallel" if world_size > 1 else "stand_alone")

    def _params(self, mode: str, callbacks: CallbackList, **state: Any) -> CallbackParams:
        return CallbackParams(
            mode=mode,
            network=self.network,
            train_network=self.network,
            eval_network=self.eval_network,
            optimizer=self.optimizer,
            loss_fn=self.loss_fn,
            list_callback=list(callbacks),
            parallel_mode=self.parallel_mode,
            device_number=self.device_number,
            **state,
        )

    def train(
        self,
        epoch: int,
        train_dataset: Iterable[Any],
        callbacks: Sequence[Callback] | Callback | None = None,
        dataset_sink_mode: bool = False,
    ) -> CallbackParams:
        """Train ``epoch`` epochs over ``train_dataset``; returns the final run state."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise CollectorValueError(
                f"For 'TrainLoop.train', the argument 'epoch' must be an int >= 1, but got "
                f"{epoch!r}."
            )
        if not isinstance(dataset_sink_mode, bool):
            raise CollectorTypeError(
                f"For 'TrainLoop.train', the argument 'dataset_sink_mode' must be a bool, but "
                f"got {type(dataset_sink_mode).__name__}."
            )
        callback_list = CallbackList(callbacks, "TrainLoop.train")
        batch_num = _batches(train_dataset, "train_dataset", self._adapters)
        params = self._params(
            "train",
            callback_list,
            epoch_num=epoch,
            batch_num=batch_num or 0,
            train_dataset=train_dataset,
            dataset_sink_mode=dataset_sink_mode,
            consecutive_steps=not dataset_sink_mode,
        )
        context = RunContext(params)
        with callback_list:
            callback_list.begin(context)
            quiet = None if dataset_sink_mode else quiet_steps_for(callback_list)
            for number in range(1, epoch + 1):
                params.cur_epoch_num = number
                callback_list.epoch_begin(context)
                if dataset_sink_mode:
                    self._sink_epoch(train_dataset, callback_list, context)
                elif quiet is not None:
                    self._quiet_epoch(train_dataset, callback_list, context, *quiet)
                else:
                    self._epoch(train_dataset, callback_list, context)
                callback_list.epoch_end(context)
                if context.get_stop_requested():
                    logger.info(
                        "Training stopped at epoch %d, step %d, as a callback asked.",
                        number,
                        params.cur_step_num,
                    )
                    break
            callback_list.end(context)
        return params

    def _epoch(self, dataset: Iterable[Any], callbacks: CallbackList, context: RunContext) -> None:
        params = context.original_args()
        for batch in dataset:
            params.cur_step_num += 1
            params.train_dataset_element = batch
            callbacks.step_begin(context)
            params.net_outputs = self.step_fn(batch)
            callbacks.step_end(context)
            if context.get_stop_requested():
                return

    def _quiet_epoch(
        self,
        dataset: Iterable[Any],
        callbacks: CallbackList,
        context: RunContext,
        quiet: QuietSteps,
        bound: QuietBound,
    ) -> None:
        """An epoch whose steps the callbacks acting at steps may leave to the loop
        (:class:`~rankscribe.collector._callback.QuietSteps`, below every other one's
        ``bound``): such a step is timed and logged, and no callback is called at it."""
        params = context.original_args()
        step_fn = self.step_fn
        now = _clock.now
        skipping = quiet.skipping
        quiet.waits = True  # a step starts when its batch has come
        bound.refresh()
        for batch in dataset:
            step = params.cur_step_num + 1
            params.cur_step_num = step
            params.train_dataset_element = batch
            late: float | None = None  # the start of a step run as a quiet one, not logged
            if step < quiet.until and step < bound.until and (skipping[0] or step == quiet.light):
                started = now()
                if started < quiet.due and started < bound.due:
                    outputs = params.net_outputs = step_fn(batch)
                    ended = now()
                    if (
                        ended < quiet.due
                        and ended < bound.due
                        and ended - started < quiet.longest
                        # A light step is quiet once the collector has kept its loss.
                        and (step != quiet.light or quiet.keep_light(step, outputs))
                    ):
                        ends = quiet.ends
                        if not ends:
                            quiet.first = step
                        quiet.starts.append(started)
                        ends.append(ended)
                        following = step + 1
                        if following in (quiet.until, quiet.light):
                            skipping[0] = False  # the operators record the next step
                        quiet.seconds += now() - ended
                        continue
                    late = started
            if late is None:
                callbacks.step_begin(context)
                params.net_outputs = step_fn(batch)
            else:
                # Longer than a quiet step may be, past the timings' write, or a light
                # step whose loss the collector did not keep: the callbacks see it now,
                # after its work, from its start (as a session's step; the next step
                # starts after them, so step_end sees no session).
                params.step_started_at = late
                callbacks.step_begin(context)
                params.step_started_at = None
            callbacks.step_end(context)
            bound.refresh()
            if context.get_stop_requested():
                return

    def _sink_epoch(
        self, dataset: Iterable[Any], callbacks: CallbackList, context: RunContext
    ) -> None:
        params = context.original_args()
        callbacks.step_begin(context)
        steps = 0
        for batch in dataset:
            if steps:
                # One callback step covers the epoch: summary operators keep the last batch's.
                discard_pending()
            params.train_dataset_element = batch
            params.net_outputs = self.step_fn(batch)
            steps += 1
        params.cur_step_num += steps
        callbacks.step_end(context)

    def eval(
        self, valid_dataset: Iterable[Any], callbacks: Sequence[Callback] | Callback | None = None
    ) -> dict[str, float]:
        """Evaluate over ``valid_dataset``; returns the metrics (mean over batches)."""
        if self.eval_fn is None:
            raise CollectorValueError(
                "For 'TrainLoop.eval', an eval_fn is needed: TrainLoop(step_fn, eval_fn=...)."
            )
        callback_list = CallbackList(callbacks, "TrainLoop.eval")
        batch_num = _batches(valid_dataset, "valid_dataset", self._adapters)
        params = self._params(
            "eval",
            callback_list,
            epoch_num=1,
            cur_epoch_num=1,
            batch_num=batch_num or 0,
            valid_dataset=valid_dataset,
            dataset_sink_mode=False,
        )
        context = RunContext(params)
        totals: dict[str, float] = {}
        counts: dict[str, int] = {}
        with callback_list:
            callback_list.begin(context)
            for batch in valid_dataset:
                params.cur_step_num += 1
                callback_list.step_begin(context)
                outputs = self.eval_fn(batch)
                _accumulate(outputs, totals, counts, self._adapters)
                params.net_outputs = outputs
                callback_list.step_end(context)
            params.metrics = {name: totals[name] / counts[name] for name in totals}
            callback_list.end(context)
        metrics: dict[str, float] = params.metrics
        return metrics


def _accumulate(
    outputs: object,
    totals: dict[str, float],
    counts: dict[str, int],
    adapters: AdapterRegistry,
) -> None:
    if not isinstance(outputs, Mapping):
        raise CollectorTypeError(
            f"For 'TrainLoop.eval', eval_fn must return a dict of metric name to number, but "
            f"returned {type(outputs).__name__}."
        )
    for name, value in outputs.items():
        try:
            number = float(adapters.to_numpy(value).reshape(-1)[0])
        except (TypeError, IndexError) as error:
            raise CollectorTypeError(
                f"For 'TrainLoop.eval', metric {name!r} must be a number, but eval_fn returned "
                f"{type(value).__name__}."
            ) from error
        if math.isnan(number):
            logger.warning("Metric %r is NaN for an evaluation batch.", name)
        totals[name] = totals.get(name, 0.0) + number
        counts[name] = counts.get(name, 0) + 1


def _no_step(batch: Any) -> None:
    """The loop is someone else's: a loop built for its run state never runs a step."""


def train_params(
    callbacks: CallbackList,
    *,
    network: Any = None,
    optimizer: Any = None,
    loss_fn: Any = None,
    device_number: int | None = None,
    parallel_mode: str | None = None,
    epochs: int,
    steps: int | None = None,
    train_dataset: Iterable[Any] | None = None,
) -> CallbackParams:
    """The run state :meth:`TrainLoop.train` gives its callbacks, for a loop it does not run.

    For a script's own loop (``TrainSession``) and a framework's (the integrations'
    ``FrameworkRun``): the same fields, defaults and checks as ``TrainLoop``'s, made by
    its code. ``steps``: batches per epoch; when None, counted from ``train_dataset``
    where its length is known (else 0, as ``TrainLoop`` records an unsized dataset).
    """
    loop = TrainLoop(
        _no_step,
        network=network,
        optimizer=optimizer,
        loss_fn=loss_fn,
        device_number=device_number,
        parallel_mode=parallel_mode,
    )
    if steps is None and train_dataset is not None:
        view = loop._adapters.dataset_view(train_dataset)
        steps = view.batches if view is not None else None
    return loop._params(
        "train",
        callbacks,
        epoch_num=epochs,
        batch_num=steps or 0,
        train_dataset=train_dataset,
        dataset_sink_mode=False,
    )
