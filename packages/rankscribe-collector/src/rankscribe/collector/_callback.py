"""The callback protocol, framework-agnostic (MindSpore's ``Callback``/``RunContext``).

A training loop calls, on every callback in order::

    begin, (epoch_begin, (step_begin, step_end)*, epoch_end)*, end

each with a :class:`RunContext` whose ``original_args()`` is the
:class:`CallbackParams` describing the training state at that moment. Callbacks
are context managers: the loop enters them before ``begin`` and exits them
after ``end`` (or on an error), so a callback holding files can close them.

Two exceptions, for the cost of a fast step: :class:`~rankscribe.collector.TrainLoop`
and :class:`~rankscribe.collector.TrainSession` call no ``step_begin``/``step_end`` of
a callback whose two are :class:`Callback`'s own (they do nothing), and, beside the
``SummaryCollector``, call no callback at a step that none of them acts at, where every
callback acting at steps says at which it does not (:class:`QuietUntil`;
docs/collector-cost.md, "Quiet steps"). A callback that says nothing is called at every
step, and so is every other callback then.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from rankscribe.collector.errors import CollectorTypeError

MODES = ("train", "eval")


class CallbackParams:
    """The training state callbacks read, by attribute (MindSpore's ``cb_params``).

    Attributes a loop should set (``None`` when it has nothing to say):

    - ``mode``: ``"train"`` or ``"eval"``.
    - ``cur_step_num``: steps done so far in this run, counting from 1, across epochs.
    - ``cur_epoch_num``: the current epoch, counting from 1.
    - ``epoch_num``: epochs in the run; ``batch_num``: steps per epoch.
    - ``net_outputs``: what the last step returned (the loss, or a tuple whose
      first element is the loss).
    - ``train_network`` / ``eval_network`` / ``network``: the model; the
      collector reads its parameters and, if it can describe one, its graph.
    - ``gradient_network``: the data-parallel wrapper (a ``DistributedDataParallel``
      module) whose gradients the collector's gradient probe reads, when the
      model given above is the module it wraps (a framework's, such as Lightning's
      ``LightningModule``); without it the probe reads ``train_network``, else ``network``.
    - ``optimizer``: parameters and a learning rate; ``loss_fn``: the loss function.
    - ``train_dataset`` / ``valid_dataset``: size, batch size, optional path.
    - ``train_dataset_element``: the last batch (its first column, if 4-D, is
      the image input the collector records).
    - ``list_callback``: every callback of the run.
    - ``dataset_sink_mode``: whether a step is an epoch (sink mode).
    - ``parallel_mode`` (e.g. ``"stand_alone"``, ``"data_parallel"``) and
      ``device_number`` (the world size).
    - ``metrics``: evaluation results, a dict of name to number.
    - ``step_started_at``: ``time.perf_counter()`` when the current step
      began, set by a loop that calls ``step_begin`` after the step's work
      (:class:`~rankscribe.collector.TrainSession`: the time of the previous
      ``session.step`` call; :class:`~rankscribe.collector.TrainLoop`: at a step it
      ran as a quiet one and found too long for that, the clock before its step
      function); None when ``step_begin`` marks the start.
    - ``consecutive_steps``: True when the loop itself numbers the steps 1, 2, 3, ...
      and ends each with ``step_end`` (``TrainLoop`` outside sink mode,
      ``TrainSession``), so that a step's number is known before it runs: the
      collector then lets the summary operators skip the steps it will not record.
      False (the default) for a loop that may renumber a step when it ends.

    Any other attribute may be set too; reading an unset one gives ``None``.
    """

    mode: str | None
    cur_step_num: int
    cur_epoch_num: int
    epoch_num: int
    batch_num: int
    net_outputs: Any
    train_network: Any
    eval_network: Any
    network: Any
    gradient_network: Any
    optimizer: Any
    loss_fn: Any
    train_dataset: Any
    valid_dataset: Any
    train_dataset_element: Any
    list_callback: list[Callback]
    dataset_sink_mode: bool
    parallel_mode: str | None
    device_number: int
    metrics: dict[str, Any] | None
    step_started_at: float | None
    consecutive_steps: bool

    def __init__(self, **attributes: Any) -> None:
        self.mode = "train"
        self.cur_step_num = 0
        self.cur_epoch_num = 0
        self.epoch_num = 1
        self.batch_num = 0
        self.list_callback = []
        self.dataset_sink_mode = False
        self.parallel_mode = "stand_alone"
        self.device_number = 1
        # Set here, not left to __getattr__: the collector reads it at every step.
        self.step_started_at = None
        # The clock when a TrainSession with one callback began a step's callbacks (its
        # step() call): a collector counts its cost from there, the session's dispatch
        # included (None: from its own methods' first clock read).
        self._dispatched_at: float | None = None
        self.consecutive_steps = False
        for name, value in attributes.items():
            setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes never set: callbacks written for the
        # original read many optional ones.
        if name.startswith("__"):
            raise AttributeError(name)
        return None

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{key}={value!r}"
            for key, value in sorted(vars(self).items())
            if key in ("mode", "cur_epoch_num", "cur_step_num", "epoch_num", "batch_num")
        )
        return f"CallbackParams({shown})"


class RunContext:
    """What a callback receives: the training state and a way to ask for a stop."""

    def __init__(self, original_args: CallbackParams) -> None:
        self._original_args = original_args
        self._stop_requested = False

    def original_args(self) -> CallbackParams:
        return self._original_args

    def request_stop(self) -> None:
        """Ask the loop to stop after the current step."""
        self._stop_requested = True

    def get_stop_requested(self) -> bool:
        return self._stop_requested


class Callback:
    """Base class of callbacks; every hook does nothing by default."""

    def begin(self, run_context: RunContext) -> None:
        """Before the first epoch."""

    def epoch_begin(self, run_context: RunContext) -> None:
        """Before each epoch."""

    def step_begin(self, run_context: RunContext) -> None:
        """Before each step."""

    def step_end(self, run_context: RunContext) -> None:
        """After each step."""

    def epoch_end(self, run_context: RunContext) -> None:
        """After each epoch."""

    def end(self, run_context: RunContext) -> None:
        """After the last epoch (and after an evaluation run)."""

    def __enter__(self) -> Callback:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None


# What a callback list calls. Anything that has them is a callback, as in
# MindSpore, whose callback lists take MindInsight's TrainLineage/EvalLineage
# (not subclasses of this Callback: the lineage package does not import the
# collector); entering it with ``with`` is optional.
CALLBACK_HOOKS = ("begin", "epoch_begin", "step_begin", "step_end", "epoch_end", "end")


def _missing_hooks(item: object) -> list[str]:
    if isinstance(item, Callback):
        return []
    return [hook for hook in CALLBACK_HOOKS if not callable(getattr(item, hook, None))]


class CallbackList(Callback):
    """Several callbacks called in order, entered and exited together."""

    def __init__(
        self, callbacks: Iterable[Callback] | Callback | None, owner: str = "CallbackList"
    ) -> None:
        if callbacks is None:
            items: list[Callback] = []
        elif isinstance(callbacks, Callback):
            items = [callbacks]
        elif isinstance(callbacks, Iterable) and not isinstance(callbacks, (str, bytes)):
            items = list(callbacks)
        else:
            raise CollectorTypeError(
                f"For '{owner}', the argument 'callbacks' must be a Callback, a list of "
                f"Callbacks or None, but got {type(callbacks).__name__} {callbacks!r:.80}."
            )
        for index, item in enumerate(items):
            missing = _missing_hooks(item)
            if missing:
                raise CollectorTypeError(
                    f"For '{owner}', callbacks[{index}] must be a Callback (or have its hooks: "
                    f"{', '.join(CALLBACK_HOOKS)}), but got {type(item).__name__}, which has "
                    f"no {', '.join(missing)}."
                )
        self.callbacks = items
        self._stack: ExitStack | None = None

    def __iter__(self) -> Iterator[Callback]:
        return iter(self.callbacks)

    def __enter__(self) -> CallbackList:
        with ExitStack() as stack:
            for callback in self.callbacks:
                if hasattr(callback, "__enter__") and hasattr(callback, "__exit__"):
                    stack.enter_context(callback)
            self._stack = stack.pop_all()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.__exit__(exc_type, exc, traceback)

    def _each(self, hook: str, run_context: RunContext) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(run_context)

    def begin(self, run_context: RunContext) -> None:
        self._each("begin", run_context)

    def epoch_begin(self, run_context: RunContext) -> None:
        self._each("epoch_begin", run_context)

    def step_begin(self, run_context: RunContext) -> None:
        self._each("step_begin", run_context)

    def step_end(self, run_context: RunContext) -> None:
        self._each("step_end", run_context)

    def epoch_end(self, run_context: RunContext) -> None:
        self._each("epoch_end", run_context)

    def end(self, run_context: RunContext) -> None:
        self._each("end", run_context)


class QuietUntil:
    """What a callback that acts at some steps only tells its loop: it has nothing to do at
    a step numbered below ``until`` that ended (on the loop's clock,
    ``rankscribe.collector._clock.now``) before ``due``. At such a step the loop may leave
    it uncalled (docs/collector-cost.md, "Quiet steps"); at the next step it is called at,
    the callback parameters hold that step's state (``cur_step_num`` may have moved by
    several steps), and it says again. ``until`` 0: every step is called.
    """

    __slots__ = ("due", "until")

    def __init__(self) -> None:
        self.until = 0
        self.due = 0.0

    def stop(self) -> None:
        """No step is quiet until the callback says again."""
        self.until = 0

    def forever(self) -> None:
        """No step needs the callback (it does nothing at steps in this run)."""
        self.until, self.due = sys.maxsize, math.inf


def _keeps_no_light(_step: int, _outputs: Any) -> bool:
    """:attr:`QuietSteps.keep_light` of a callback that offers no light step."""
    return False


class QuietSteps(QuietUntil):
    """Steps a loop may finish without calling the callback that keeps this log (the
    ``SummaryCollector``), which has said it would record nothing at them: what
    :class:`~rankscribe.collector.TrainSession` or :class:`~rankscribe.collector.TrainLoop`
    and the collector agree on, so that most steps of a fast loop cost a few attribute
    writes and two appends (docs/collector-cost.md, "Quiet steps").

    The callback sets ``until`` and ``due`` (and :meth:`stop`s them): a step numbered
    below ``until``, ended (``perf_counter``) before ``due`` and less than ``longest``
    seconds after the step before it, while ``skipping[0]`` is True (the summary
    operators return at once: ``rankscribe.writer.operators.skip_flag``), is quiet (and
    below every other callback's :class:`QuietUntil`, where others act at steps). The
    loop then numbers it, keeps its batch and outputs in the callback parameters as at any
    step, and logs it here instead of calling ``step_begin`` and ``step_end``: ``first``,
    the number of the first step logged, ``starts`` and ``ends``, when each logged step
    started and ended, in order, and ``seconds``, the loop's own time in them.
    At the last quiet step (``until - 1``) the loop also ends the operators' skip
    (``skipping[0] = False``), as the callback's ``step_end`` would have: the next step
    records what they give. The callback takes the log (:meth:`take`) at its next call,
    before anything else.

    ``light``: a step below ``until`` that the callback records the loss alone at (a
    light step), which the loop may finish itself too; -1: none. The operators record at
    it: the loop ends their skip at the step before it too (``skipping[0] = False`` at
    ``light - 1``), and after the step's work calls ``keep_light(step, outputs)``. True:
    the callback kept the step's loss from ``outputs`` and said its next ``light`` and
    the operators' skip after it; the loop logs the step as a quiet one. False (a summary
    operator's value waits to be recorded, or the loss is not one number on the host):
    nothing was kept, and the loop calls the callbacks at the step, as at any other.

    ``waits``: set by a loop whose logged steps start when their batch has arrived
    (:class:`~rankscribe.collector.TrainLoop`): the time from a step's end to the next
    step's start is then the next step's data wait. False (the callback sets it at each
    run's ``begin``) for a loop that cannot see where its steps start
    (:class:`~rankscribe.collector.TrainSession`, whose step runs from one call to the
    next).
    """

    __slots__ = (
        "ends",
        "first",
        "keep_light",
        "light",
        "longest",
        "seconds",
        "skipping",
        "starts",
        "waits",
    )

    def __init__(self, skipping: list[bool], longest: float) -> None:
        super().__init__()
        self.longest = longest
        self.skipping = skipping
        self.light = -1
        self.keep_light: Callable[[int, Any], bool] = _keeps_no_light
        self.first = 0
        self.starts: array[float] = array("d")
        self.ends: array[float] = array("d")
        self.seconds = 0.0
        self.waits = False

    def log(self, step: int, started: float, ended: float) -> None:
        """Log ``step`` (the next after the steps logged), started and ended then."""
        if not self.ends:
            self.first = step
        self.starts.append(started)
        self.ends.append(ended)

    def take(self) -> tuple[int, array[float], array[float], float]:
        """``(first, starts, ends, seconds)`` of the steps logged since the last call (the
        log is empty after it)."""
        taken = (self.first, self.starts, self.ends, self.seconds)
        self.starts, self.ends = array("d"), array("d")
        self.seconds = 0.0
        return taken


class QuietBound(QuietUntil):
    """The lowest ``until`` and the earliest ``due`` of several callbacks' offers
    (:meth:`refresh`, after each call of them: they change their offers only when called);
    none: no bound."""

    __slots__ = ("_offers",)

    def __init__(self, offers: Sequence[QuietUntil]) -> None:
        super().__init__()
        self._offers = tuple(offers)
        self.refresh()

    def refresh(self) -> None:
        offers = self._offers
        if not offers:
            self.forever()
            return
        self.until = min(offer.until for offer in offers)
        self.due = min(offer.due for offer in offers)


def quiet_steps_of(callback: object) -> QuietUntil | None:
    """The :class:`QuietUntil` (or the collector's :class:`QuietSteps`) a callback offers
    its loop, or None."""
    offered = getattr(callback, "_quiet_steps", None)
    return offered if isinstance(offered, QuietUntil) else None


def has_step_hooks(callback: object) -> bool:
    """Whether a loop must call ``callback`` at steps: False only for a :class:`Callback`
    whose ``step_begin`` and ``step_end`` are the base class's, which do nothing (a
    callback of ``epoch_end`` alone, say), neither set on the instance."""
    return not own_step_hooks(callback, Callback)


def own_step_hooks(callback: object, kind: type) -> bool:
    """Whether ``callback``'s ``step_begin`` and ``step_end`` are ``kind``'s own (not a
    subclass's, not set on the instance): a class that offers its loop quiet steps
    knows only what its own hooks do."""
    if not isinstance(callback, kind):
        return False
    cls = type(callback)
    return (
        cls.step_begin is kind.step_begin  # type: ignore[attr-defined]
        and cls.step_end is kind.step_end  # type: ignore[attr-defined]
        and not {"step_begin", "step_end"} & getattr(callback, "__dict__", {}).keys()
    )


def quiet_steps_for(callbacks: CallbackList) -> tuple[QuietSteps, QuietBound] | None:
    """The log of quiet steps of a loop's callbacks, and the bound the others set: where
    one callback acting at steps (:func:`has_step_hooks`) keeps the log (the collector's
    :class:`QuietSteps`) and every other one acting at steps offers a :class:`QuietUntil`.
    None otherwise: every step calls every callback."""
    log: QuietSteps | None = None
    others: list[QuietUntil] = []
    for callback in callbacks:
        if not has_step_hooks(callback):
            continue
        offered = quiet_steps_of(callback)
        if offered is None:
            return None
        if isinstance(offered, QuietSteps):
            if log is not None:
                return None
            log = offered
        else:
            others.append(offered)
    return None if log is None else (log, QuietBound(others))
