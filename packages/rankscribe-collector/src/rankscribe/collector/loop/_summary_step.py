"""``SummaryStep``: record a summary record's step every ``flush_step`` steps.

MindSpore's first callback for summaries, which MindInsight's lineage examples
put beside ``TrainLineage``/``EvalLineage`` in the callback list
(``callbacks=[model_ckpt, summary_callback, lineagemgr]``): at the end of every
step whose number is a multiple of ``flush_step`` it records that step through the
summary record it was given (``record(step, train_network=...)``) and flushes it,
so the step's values are on disk. Entering the callback enters the summary
record; leaving it closes the record, as the original does.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rankscribe.collector._callback import Callback, RunContext
from rankscribe.collector._checks import is_int, shown
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError

__all__ = ["SummaryStep"]


class SummaryStep(Callback):
    """Record (and flush) the summary record every ``flush_step`` steps.

    Args:
        summary: the summary record to write through: anything with
            ``record(step, train_network=...)`` (``rankscribe.writer.SummaryRecord``,
            MindSpore's); its ``flush()`` is called after each record when it has one.
        flush_step: record at the steps that are multiples of it (an int > 0;
            default 10). Anything else is a ``ValueError``, as in the original.
    """

    def __init__(self, summary: Any, flush_step: int = 10) -> None:
        if not is_int(flush_step) or flush_step <= 0:
            raise CollectorValueError(
                f"For 'SummaryStep', the argument 'flush_step' must be an int > 0, but got "
                f"{shown(flush_step)}."
            )
        if not callable(getattr(summary, "record", None)):
            raise CollectorTypeError(
                f"For 'SummaryStep', the argument 'summary' must be a summary record (an "
                f"object with a record() method), but got {type(summary).__name__}."
            )
        self._summary = summary
        self._flush_step = flush_step

    @property
    def flush_step(self) -> int:
        """Steps between two records."""
        return self._flush_step

    def step_end(self, run_context: RunContext) -> None:
        """Record and flush the step when its number is a multiple of ``flush_step``."""
        params = run_context.original_args()
        step = params.cur_step_num
        if not is_int(step) or step % self._flush_step:
            return
        self._summary.record(step, train_network=params.train_network)
        flush = getattr(self._summary, "flush", None)
        if callable(flush):
            flush()

    def __enter__(self) -> SummaryStep:
        enter = getattr(self._summary, "__enter__", None)
        if callable(enter):
            enter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        leave = getattr(self._summary, "__exit__", None)
        if callable(leave):
            leave(exc_type, exc, traceback)
