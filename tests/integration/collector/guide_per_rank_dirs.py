"""The summary guide's distributed pattern, as written: a summary directory per rank.

    mpiexec -n 2 python -m mpi4py guide_per_rank_dirs.py

MindSpore's summary guide gives each card its own directory in distributed
training::

    summary_collector = SummaryCollector(summary_dir="summary_dir" + str(get_rank()))

Here ``get_rank()`` is the rank RankScribe detects; the model is a tiny NumPy
one. Run in the directory where ``summary_dir0``, ``summary_dir1``, ... appear.
"""

from __future__ import annotations

import numpy as np

from rankscribe.collector import ArrayDataset, ArrayNetwork, ArrayOptimizer, SummaryCollector
from rankscribe.collector import TrainLoop as Model
from rankscribe.ranks import detect


def get_rank() -> int:
    return detect().rank


def main() -> None:
    rng = np.random.default_rng(0)
    network = ArrayNetwork({"fc.weight": rng.normal(size=(4, 3)).astype(np.float32)}, name="Net")
    optimizer = ArrayOptimizer(network, learning_rate=0.03, name="Momentum")
    dataset = ArrayDataset(
        rng.random((24, 1, 4, 4)).astype(np.float32), rng.integers(0, 2, 24), batch_size=4
    )
    model = Model(lambda batch: np.float32(0.25), network=network, optimizer=optimizer)

    # As the guide writes it:
    summary_collector = SummaryCollector(summary_dir="summary_dir" + str(get_rank()))
    model.train(1, dataset, callbacks=[summary_collector])


if __name__ == "__main__":
    main()
