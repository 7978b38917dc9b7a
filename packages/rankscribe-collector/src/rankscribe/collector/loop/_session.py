"""TrainSession: the callbacks' automatic collection from a training loop of your own.

:class:`~rankscribe.collector.TrainLoop` owns the loop; a script that keeps its
own (a plain PyTorch loop, say) opens a session instead and tells it where
epochs and steps end::

    with TrainSession([checkpoint, collector], network=model, optimizer=optimizer,
                      loss_fn=loss_fn, train_dataset=loader, epochs=3) as session:
        for epoch in session.epochs():
            for images, labels in loader:
                loss = train_step(images, labels)
                session.step((images, labels), loss)

The callbacks see what :class:`TrainLoop` gives them (the same
:class:`~rankscribe.collector.CallbackParams`, built by the same code):
entering the ``with`` enters the callbacks and calls ``begin``;
``epochs()`` calls ``epoch_begin`` before each epoch's body and
``epoch_end`` after it; ``step(batch, outputs)`` counts the step and calls
``step_begin`` then ``step_end`` with the batch and the outputs (so a
callback's ``step_begin`` runs after your step, not before it); leaving the
``with`` calls ``end`` (the train lineage, the job's lineage merge) and exits
the callbacks. When the body raises, ``end`` is not called (the run did not
finish) but the callbacks are still exited: the collector flushes and closes
its files, so what was recorded is on disk.

Step time: the session cannot see where your step starts, so a step is the
time between consecutive ``session.step`` calls (the first step of an epoch:
from the start of the epoch's body). It reaches the callbacks as
``params.step_started_at``; the collector records it as
``rankscribe/step_time``. There is no data wait in a session (waiting for data
is inside that interval): mark the parts of your step with
``collector.section(name)`` to have them judged across ranks
(``docs/job-view.md``, "Timings").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
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
from rankscribe.collector._checks import check_iterable, check_optional_text
from rankscribe.collector.errors import CollectorStateError, CollectorTypeError, CollectorValueError
from rankscribe.collector.loop._loop import train_params

__all__ = ["TrainSession"]

_OWNER = "TrainSession"


def _positive_int(name: str, value: object, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CollectorValueError(
            f"For '{_OWNER}', the argument '{name}' must be an int >= 1"
            f"{' or None' if optional else ''}, but got {value!r}."
        )
    return value


class TrainSession:
    """Run callbacks (``SummaryCollector``, ``ModelCheckpoint``, ...) from your own loop.

    Args:
        callbacks: a callback or a list of them, called in order.
        network, optimizer, loss_fn: as for :class:`TrainLoop`: the model
            (parameters, graph), the optimizer (parameters, learning rate),
            the loss function (its class name goes into the lineage).
        train_dataset: what the loop iterates over (a ``DataLoader``, an
            ``ArrayDataset``); its size and batch size go into the lineage.
        epochs: how many epochs the loop runs (the collector's schedule and
            the lineage use it).
        steps_per_epoch: steps in an epoch, when ``train_dataset`` cannot tell
            (it has no ``len()``).
        device_number, parallel_mode: default from the job's ranks.
    """

    def __init__(
        self,
        callbacks: Sequence[Callback] | Callback,
        *,
        network: Any = None,
        optimizer: Any = None,
        loss_fn: Any = None,
        train_dataset: Iterable[Any] | None = None,
        epochs: int = 1,
        steps_per_epoch: int | None = None,
        device_number: int | None = None,
        parallel_mode: str | None = None,
    ) -> None:
        self._epochs: int = _positive_int("epochs", epochs) or 1
        steps = _positive_int("steps_per_epoch", steps_per_epoch, optional=True)
        _positive_int("device_number", device_number, optional=True)
        check_optional_text("parallel_mode", parallel_mode, owner=_OWNER)
        check_iterable("train_dataset", train_dataset, owner=_OWNER, optional=True)
        if callbacks is None:  # CallbackList takes None for "none"; a session wants them named
            raise CollectorTypeError(
                f"For '{_OWNER}', the argument 'callbacks' must be a Callback or a list of "
                f"them ([] for none), but got None."
            )
        try:
            self._callbacks = CallbackList(callbacks)
        except TypeError as error:
            raise CollectorTypeError(
                f"For '{_OWNER}', the argument 'callbacks' must be a Callback or a list of "
                f"them: {error}"
            ) from error
        # The same state TrainLoop gives callbacks, made by TrainLoop's own code.
        self._params: CallbackParams = train_params(
            self._callbacks,
            network=network,
            optimizer=optimizer,
            loss_fn=loss_fn,
            device_number=device_number,
            parallel_mode=parallel_mode,
            epochs=self._epochs,
            steps=steps,
            train_dataset=train_dataset,
        )
        self._params.consecutive_steps = True  # step() numbers every step, one by one
        # With one callback, what step() costs beyond the user's loop is all that
        # callback's: it may count the whole call (its dispatch, its checks) from
        # params._dispatched_at (the collector's cost does). Beside another callback the
        # dispatch is shared, and each counts its own methods.
        self._dispatch_counted = len(self._callbacks.callbacks) == 1
        self._context = RunContext(self._params)
        self._state = "new"  # -> "open" -> "closed"
        self._previous_step: float | None = None  # perf_counter of the last step() call
        #: The log of the steps step() finishes without calling the callbacks (the
        #: collector's), and the bound the other callbacks acting at steps set (None:
        #: every step calls the callbacks).
        self._quiet: QuietSteps | None = None
        self._bound = QuietBound(())

    @property
    def params(self) -> CallbackParams:
        """The state the callbacks read (``cur_step_num``, ``cur_epoch_num``, ...)."""
        return self._params

    @property
    def stop_requested(self) -> bool:
        """True once a callback asked training to stop (``run_context.request_stop()``)."""
        return self._context.get_stop_requested()

    def __enter__(self) -> TrainSession:
        if self._state != "new":
            raise CollectorStateError(f"A {_OWNER} runs once; make a new one for another run.")
        self._callbacks.__enter__()
        self._state = "open"
        try:
            self._callbacks.begin(self._context)
        except BaseException as error:
            self._close(type(error), error, error.__traceback__)
            raise
        # Beside a callback that acts at steps and does not say at which, every step
        # calls every callback.
        quiet = quiet_steps_for(self._callbacks)
        if quiet is not None:
            self._quiet, self._bound = quiet
            self._bound.refresh()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._state != "open":
            return
        if exc_type is not None:
            self._close(exc_type, exc, traceback)
            return
        try:
            self._callbacks.end(self._context)
        except BaseException as error:
            self._close(type(error), error, error.__traceback__)
            raise
        self._close(None, None, None)

    def _close(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._state = "closed"
        self._quiet = None
        self._callbacks.__exit__(exc_type, exc, traceback)

    def _check_open(self, call: str) -> None:
        if self._state != "open":
            raise CollectorStateError(
                f"{_OWNER}.{call} is called inside `with TrainSession(...) as session:`, "
                f"but the session is {self._state}."
            )

    def epochs(self) -> Iterator[int]:
        """The epoch numbers, 1 to ``epochs``, with ``epoch_begin``/``epoch_end`` around each.

        Ends early, after the epoch's ``epoch_end``, when a callback asked to stop.
        """
        self._check_open("epochs()")
        for number in range(self._params.cur_epoch_num + 1, self._epochs + 1):
            self._params.cur_epoch_num = number
            self._callbacks.epoch_begin(self._context)
            self._bound.refresh()
            self._previous_step = _clock.now()
            yield number
            self._callbacks.epoch_end(self._context)
            if self.stop_requested:
                return

    def step(self, batch: Any, outputs: Any) -> None:
        """One step done: ``batch`` is what it trained on, ``outputs`` its loss (or a tuple).

        The collector records ``outputs`` as the loss and the batch's first
        column, when it is a 4-D NCHW batch, as the input images.
        """
        now = _clock.now()
        params = self._params
        # The step before's batch and outputs, which the session kept for the callbacks:
        # freed when this call returns, after its clock reads. Where the loop frees them
        # without a session (its next batch), they are the user's step's work: in the step
        # times, not in what the collector costs (cost/_budget.py).
        kept = params.train_dataset_element, params.net_outputs  # noqa: F841
        quiet = self._quiet
        if quiet is not None:
            # A step the collector records nothing at, and no other callback acts at:
            # logged for it, none called (QuietSteps; docs/collector-cost.md, "Quiet
            # steps").
            step = params.cur_step_num + 1
            previous = self._previous_step
            bound = self._bound
            if (
                step < quiet.until
                and now < quiet.due
                and step < bound.until
                and now < bound.due
                and previous is not None
                and now - previous < quiet.longest
                # A light step is quiet once the collector has kept its loss (last: it
                # keeps it); any other while the operators skip it.
                and (quiet.skipping[0] if step != quiet.light else quiet.keep_light(step, outputs))
            ):
                ends = quiet.ends
                if not ends:
                    quiet.first = step
                quiet.starts.append(previous)
                ends.append(now)
                params.cur_step_num = step
                params.step_started_at = previous
                params.train_dataset_element = batch
                params.net_outputs = outputs
                self._previous_step = now
                following = step + 1
                if following in (quiet.until, quiet.light):
                    quiet.skipping[0] = False  # the summary operators record the next step
                quiet.seconds += _clock.now() - now
                return
        if self._state != "open" or params.cur_epoch_num < 1:
            self._check_open("step()")
            raise CollectorStateError(
                f"{_OWNER}.step() is called inside `for epoch in session.epochs():`."
            )
        previous = self._previous_step
        params.step_started_at = previous if previous is not None else now
        if self._dispatch_counted:
            params._dispatched_at = now
        self._previous_step = now
        params.cur_step_num += 1
        params.train_dataset_element = batch
        self._callbacks.step_begin(self._context)
        params.net_outputs = outputs
        self._callbacks.step_end(self._context)
        if quiet is not None:
            self._bound.refresh()
