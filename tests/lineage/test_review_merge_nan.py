"""Review: a rank whose loss or metric is NaN must not vanish from the merged job record."""

from __future__ import annotations

import math

import pytest

from rankscribe.lineage import (
    Algorithm,
    EvalLineageInfo,
    RunLineage,
    TrainLineageInfo,
    merge_rank_lineages,
)


def _rank(loss: float, accuracy: float) -> RunLineage:
    # What rank 0 gets from each rank: its lineage as the files read back
    # (a NaN float32 loss reads back as MessageToDict's "NaN").
    return RunLineage.from_records(
        train=TrainLineageInfo(algorithm=Algorithm(network="Net", loss=loss)),
        evaluation=EvalLineageInfo.from_metrics({"acc": accuracy}),
    )


def test_a_diverged_rank_makes_the_job_loss_nan() -> None:
    merged = merge_rank_lineages({0: _rank(0.5, 0.9), 1: _rank(math.nan, 0.8)})
    loss = merged.section("algorithm")["loss"]
    assert isinstance(loss, float) and math.isnan(loss)


@pytest.mark.parametrize("order", [(0.9, math.nan), (math.nan, 0.9)])
def test_extremes_do_not_depend_on_which_rank_is_nan(order: tuple[float, float]) -> None:
    merged = merge_rank_lineages({0: _rank(0.5, order[0]), 1: _rank(0.4, order[1])})
    notes = merged.section("user_defined")
    assert math.isnan(merged.section("metric")["acc"])
    assert (notes["metric_acc_min"], notes["metric_acc_max"]) == (0.9, 0.9)
