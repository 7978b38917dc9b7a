"""MindInsight's TrainLineage/EvalLineage in a TrainLoop callback list, as documented."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rankscribe.collector import ArrayDataset, ArrayNetwork, ArrayOptimizer, TrainLoop
from rankscribe.lineage import EvalLineage, TrainLineage, get_summary_lineage
from rankscribe.writer import SummaryRecord


def dataset(batches: int = 3) -> ArrayDataset:
    return ArrayDataset(np.arange(2 * batches, dtype=np.float32), batch_size=2)


def test_train_and_eval_lineage_in_the_callback_list(tmp_path: Path) -> None:
    network = ArrayNetwork({"w": np.ones(2)})
    loop = TrainLoop(
        lambda batch: 0.5,
        network=network,
        optimizer=ArrayOptimizer(network),
        eval_fn=lambda batch: {"acc": 0.75},
    )
    run = tmp_path / "run"
    with SummaryRecord(str(run)) as record:
        loop.train(2, dataset(), callbacks=[TrainLineage(record, raise_exception=True)])
        metrics = loop.eval(dataset(), callbacks=[EvalLineage(record, raise_exception=True)])
    assert metrics == {"acc": 0.75}
    lineage = get_summary_lineage(str(run))
    assert lineage["hyper_parameters"]["epoch"] == 2
    assert lineage["hyper_parameters"]["optimizer"] == "ArrayOptimizer"
    assert lineage["algorithm"] == {"network": "ArrayNetwork", "loss": 0.5}
    assert lineage["metric"] == {"acc": 0.75}


def test_something_without_the_hooks_is_still_refused() -> None:
    class Half:
        def begin(self, run_context: object) -> None:
            pass

    with pytest.raises(TypeError) as raised:
        TrainLoop(lambda batch: 0.0).train(1, dataset(), callbacks=[Half()])
    assert str(raised.value) == (
        "For 'TrainLoop.train', callbacks[0] must be a Callback (or have its hooks: begin, "
        "epoch_begin, step_begin, step_end, epoch_end, end), but got Half, which has no "
        "epoch_begin, step_begin, step_end, epoch_end, end."
    )
