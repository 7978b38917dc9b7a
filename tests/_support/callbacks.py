"""A callback of the user's that acts at every step, for the collector's tests.

A loop calls the collector at every step while another callback acts at steps; a
callback whose ``step_begin`` and ``step_end`` are the base class's does nothing there,
and leaves the collector's quiet steps to the loop (docs/collector-cost.md, "Quiet
steps"). Imports rankscribe.collector: for the collector envs.
"""

from __future__ import annotations

from rankscribe.collector import Callback, RunContext


class EveryStep(Callback):
    """Counts the steps it is called at (``steps``: their numbers, in order)."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    def step_end(self, run_context: RunContext) -> None:
        self.steps.append(run_context.original_args().cur_step_num)
