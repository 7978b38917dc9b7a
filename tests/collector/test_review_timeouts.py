"""Review: timeouts the collector cannot honour are refused when the callback is made.

Before, ``SummaryCollector(merge_timeout=inf)`` was accepted and then, on a
job of several ranks, the lineage merge was skipped with only a logged error
(the ranks' collectives refuse an unbounded wait); and
``ModelCheckpoint(save_timeout=inf)`` with ``async_save`` crashed the second
save with ``OverflowError: timestamp out of range`` from ``Thread.join``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rankscribe.collector import CheckpointConfig, ModelCheckpoint, SummaryCollector


@pytest.mark.parametrize("timeout", [math.inf, -math.inf, math.nan])
def test_summary_collector_refuses_a_non_finite_merge_timeout(
    tmp_path: Path, timeout: float
) -> None:
    with pytest.raises(ValueError, match="merge_timeout"):
        SummaryCollector(tmp_path, merge_timeout=timeout)


@pytest.mark.parametrize("timeout", [math.inf, math.nan])
def test_model_checkpoint_refuses_a_non_finite_save_timeout(
    tmp_path: Path, timeout: float
) -> None:
    with pytest.raises(ValueError, match="save_timeout must be"):
        ModelCheckpoint(
            directory=tmp_path, config=CheckpointConfig(async_save=True), save_timeout=timeout
        )
