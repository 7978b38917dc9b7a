"""Progress: how training is going, shown by rank 0 only.

On a terminal, a ``tqdm`` bar over the run's steps with the epoch and the
loss beside it (tqdm shows steps/s itself). When the output is not a terminal
(a log file, a CI job, ``mpiexec`` collecting the ranks' output), plain lines
instead, one every ``every_seconds`` seconds or ``every_steps`` steps,
whichever comes first, and one at the end of training::

    epoch 1/3  step 20/66  loss 0.4312  41.7 steps/s

Other ranks show nothing: on a job of several ranks, their output would
repeat rank 0's. A loss on an accelerator is never waited for during training:
the one shown is the latest the device has passed (a step or two old, "-" until
the first arrives; docs/collector-schedule.md, "Values read from a device"); the
line at the end of training shows the last step's own. Evaluation runs are not
shown. The loss shown is the one this process computed at that step: on a job
of several ranks it is rank 0's alone, labelled ``rank 0 loss`` (the lineage's
``loss`` is the mean of the ranks' final losses; docs/integrations.md).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

from tqdm import tqdm

from rankscribe.collector import _clock
from rankscribe.collector._callback import (
    Callback,
    CallbackParams,
    QuietUntil,
    RunContext,
    own_step_hooks,
)
from rankscribe.collector._checks import check_callable
from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.collection._extractor import UnreadableLossError, mean_loss
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.ranks import RankInfo, detect

__all__ = ["Progress"]

_OWNER = "Progress"


def _check_interval(name: str, value: object, kind: type) -> None:
    if value is None:
        return
    valid = isinstance(value, kind) or (kind is float and isinstance(value, int))
    if isinstance(value, bool) or not valid:
        raise CollectorTypeError(
            f"For '{_OWNER}', the argument '{name}' must be a {kind.__name__} or None, but got "
            f"{type(value).__name__}."
        )
    assert isinstance(value, (int, float))
    if not (value > 0 and math.isfinite(value)):
        raise CollectorValueError(
            f"For '{_OWNER}', the argument '{name}' must be greater than 0, but got {value!r}."
        )


class Progress(Callback):
    """Show training progress on rank 0: a tqdm bar on a terminal, plain lines otherwise.

    Args (keyword-only):
        every_seconds: with plain lines, at most this many seconds between two
            lines (None: no time rule).
        every_steps: with plain lines, a line every this many steps (None: no
            step rule). With both None, only the end of training is shown.
        stream: where to write (default ``sys.stderr``, as tqdm does); a bar is
            drawn when ``stream.isatty()``.
        rank_info: this process's rank (default :func:`rankscribe.ranks.detect`).
        clock: seconds as a float (default ``time.monotonic``).

    A subclass can add lines of its own with :meth:`write` (after an epoch's
    evaluation, say); :attr:`enabled` says whether this process shows anything.

    It tells its loop at which steps it has nothing to do (a
    :class:`~rankscribe.collector._callback.QuietUntil`), so a ``TrainLoop`` or
    ``TrainSession`` may leave it uncalled there (docs/collector-cost.md, "Quiet
    steps"): every step on the other ranks; with a bar, the steps within its
    ``mininterval`` (0.1 s) of the last update (tqdm redraws no more often); with plain
    lines, the steps before the next line's step or time (the time on the default clock
    only: a clock of the caller's is not the loop's).
    """

    def __init__(
        self,
        *,
        every_seconds: float | None = 10.0,
        every_steps: int | None = None,
        stream: TextIO | None = None,
        rank_info: RankInfo | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_interval("every_seconds", every_seconds, float)
        _check_interval("every_steps", every_steps, int)
        # Checked here, not at the first step, where the error would stop training.
        check_callable("clock", clock, owner=_OWNER)
        if stream is not None and not callable(getattr(stream, "write", None)):
            raise CollectorTypeError(
                f"For '{_OWNER}', the argument 'stream' must be a text stream (with write()), "
                f"but got {type(stream).__name__}."
            )
        if rank_info is not None and not isinstance(rank_info, RankInfo):
            raise CollectorTypeError(
                f"For '{_OWNER}', the argument 'rank_info' must be a RankInfo or None, but got "
                f"{type(rank_info).__name__}."
            )
        self.every_seconds = every_seconds
        self.every_steps = every_steps
        self._stream = stream
        self._rank_info = rank_info
        self._clock = clock
        self._adapters = AdapterRegistry()
        self._enabled: bool | None = None
        # "rank 0 loss" on a job of several ranks: the loss shown is rank 0's alone.
        self._loss_label = "loss"
        self._bar: Any = None
        self._last = (0, 0.0)  # (step, time) of the last line
        self._started = 0.0
        # A loss on an accelerator: the copy under way, and the last one that arrived.
        self._pending: Any = None
        self._arrived: float | None = None
        self._lagging = False  # a line showed an earlier step's loss
        #: The steps this callback has nothing to do at, for the loop (docs/collector-cost.md,
        #: "Quiet steps").
        self._quiet_steps = QuietUntil()
        self._offers = False  # whether it says so in this run (its own step hooks: begin)

    @property
    def enabled(self) -> bool:
        """True on rank 0 (the only rank that shows progress)."""
        if self._enabled is None:
            info = self._rank_info if self._rank_info is not None else detect()
            self._enabled = info.rank == 0
            self._loss_label = "loss" if info.world_size == 1 else "rank 0 loss"
        return self._enabled

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def write(self, message: str) -> None:
        """Write one line on rank 0 (above the bar, when there is one); nothing elsewhere."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            self.stream.write(message + "\n")
            self.stream.flush()

    # ----------------------------------------------------------------- callbacks

    def begin(self, run_context: RunContext) -> None:
        params = run_context.original_args()
        self._quiet_steps.stop()
        # A subclass's own step hooks (or hooks set on this callback): every step called.
        self._offers = own_step_hooks(self, Progress)
        if params.mode != "train":
            return
        if not self.enabled:
            if self._offers:
                self._quiet_steps.forever()  # this rank shows nothing
            return
        self._started = self._clock()
        self._last = (params.cur_step_num, self._started)
        self._pending, self._arrived, self._lagging = None, None, False
        if _is_terminal(self.stream):
            total = (params.epoch_num or 0) * (params.batch_num or 0)
            self._bar = tqdm(
                total=total or None, file=self.stream, unit="step", dynamic_ncols=True, leave=True
            )

    def step_end(self, run_context: RunContext) -> None:
        params = run_context.original_args()
        if params.mode != "train" or not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(params.cur_step_num - self._bar.n)
            self._show_loss(self._read_loss(params), params)
        else:
            step, now = params.cur_step_num, self._clock()
            last_step, last_time = self._last
            due_by_steps = self.every_steps is not None and step - last_step >= self.every_steps
            due_by_time = self.every_seconds is not None and now - last_time >= self.every_seconds
            if due_by_steps or due_by_time:
                self._line(params, now)
        self._offer_quiet_steps()

    def _offer_quiet_steps(self) -> None:
        """Tell the loop the steps this callback has nothing to do at (the class's
        docstring)."""
        quiet = self._quiet_steps
        if not self._offers:
            quiet.stop()
        elif self._bar is not None:
            quiet.until, quiet.due = sys.maxsize, _clock.now() + self._bar.mininterval
        elif self.every_seconds is not None and self._clock is not time.monotonic:
            quiet.stop()
        else:
            last_step, last_time = self._last
            quiet.until = (
                last_step + self.every_steps if self.every_steps is not None else sys.maxsize
            )
            quiet.due = (
                _clock.now() + (last_time + self.every_seconds - self._clock())
                if self.every_seconds is not None
                else math.inf
            )

    def end(self, run_context: RunContext) -> None:
        params = run_context.original_args()
        if params.mode != "train" or not self.enabled:
            return
        if self._bar is not None:
            # The steps after the last it was called at (quiet steps), and their loss.
            moved = params.cur_step_num - self._bar.n
            if moved:
                self._bar.update(moved)
            if moved or self._lagging:  # the last step's own loss (a wait is fine: no step)
                self._show_loss(self._read_loss(params, wait=True), params)
            self._close_bar()
            return
        now = self._clock()
        if params.cur_step_num != self._last[0] or self._lagging:
            self._line(params, now, final=True)
        elapsed = now - self._started
        rate = params.cur_step_num / elapsed if elapsed > 0 else math.nan
        self.write(
            f"trained {params.cur_step_num} steps in {elapsed:.1f} s ({_rate(rate)} steps/s)"
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._close_bar()  # a run that raised leaves the terminal clean

    # ------------------------------------------------------------------- helpers

    def _show_loss(self, loss: float | None, params: CallbackParams) -> None:
        postfix = {"epoch": f"{params.cur_epoch_num}/{params.epoch_num}"}
        if loss is not None:
            postfix[self._loss_label] = f"{loss:.4f}"
        self._bar.set_postfix(postfix, refresh=False)

    def _close_bar(self) -> None:
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()

    def _read_loss(self, params: CallbackParams, *, wait: bool = False) -> float | None:
        """The step's loss; on an accelerator (unless ``wait``), the latest one the device
        has passed, without a wait: a copy of this step's starts when none is under way."""
        outputs = params.net_outputs
        if isinstance(outputs, (list, tuple)) and outputs:
            outputs = outputs[0]
        if not wait and outputs is not None:
            pending = self._pending
            if pending is not None and pending.ready():
                self._arrived, self._pending = float(pending.resolve()), None
            if self._pending is None:
                self._pending = self._adapters.late_loss(outputs)
            if self._pending is not None:
                self._lagging = True
                return self._arrived
        try:
            return mean_loss(params.net_outputs, adapters=self._adapters)
        except UnreadableLossError:
            return None

    def _line(self, params: CallbackParams, now: float, *, final: bool = False) -> None:
        last_step, last_time = self._last
        steps, seconds = params.cur_step_num - last_step, now - last_time
        rate = steps / seconds if seconds > 0 else math.nan
        self._last = (params.cur_step_num, now)
        total = (params.epoch_num or 0) * (params.batch_num or 0)
        step = f"{params.cur_step_num}/{total}" if total else str(params.cur_step_num)
        # Read only when shown; on a device, the latest loss it has passed (no wait),
        # and the exact one at the end of training (which may wait: no step).
        value = self._read_loss(params, wait=final)
        loss = f"{value:.4f}" if value is not None else "-"
        self.write(
            f"epoch {params.cur_epoch_num}/{params.epoch_num}  step {step}  "
            f"{self._loss_label} {loss}  {_rate(rate)} steps/s"
        )


def _rate(rate: float) -> str:
    return "-" if math.isnan(rate) else f"{rate:.1f}"


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed stream is no terminal
        return False
