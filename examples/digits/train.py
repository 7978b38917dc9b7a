#!/usr/bin/env python3
"""Data-parallel training of a small NumPy MLP on scikit-learn's digits, recorded by RankScribe.

    python examples/digits/train.py --summary-dir runs/digits                 # one process
    mpiexec -n 2 python examples/digits/train.py --summary-dir runs/digits    # two ranks

Each rank trains on its shard of the training set; gradients are averaged over
the ranks every step (MPI allreduce). SummaryCollector records loss, weight
histograms, input images, step times, parameter fingerprints and the lineage on
every rank (``rank_<r>/``), and rank 0 merges the ranks' lineage into one
record for the job and writes the job view (cross-rank curves of every scalar
in the job dir, and the straggler / divergence verdicts in the merged
lineage). Each step's work is marked with ``collector.section("compute")``:
the allreduce makes every rank's wall step time the slowest rank's, so the
section is what tells a slow rank apart; the allreduce is marked with
``collector.section("sync")``, so each rank's arrival (its step time less
the sync) says what a slow rank costs the job. ModelCheckpoint saves each rank's
weights next to its summaries. At the end rank 0 prints the merged lineage and
the job's verdicts.

A summary dir that already holds a run is never written into again: rank 0
claims the directory for this job before any rank writes
(``rankscribe.ranks.claim_job_dir``), or the next free ``<dir>-2``, ``<dir>-3``,
..., and says so; two jobs started at once never share one.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from rankscribe.ranks import detect

# One BLAS thread per rank where ranks share a host, as torchrun sets OMP_NUM_THREADS=1 for
# its workers. Each rank is a process with a core of its own: a BLAS worker thread left
# spinning after a large product (rank 0's test-set accuracy after each epoch) takes the
# core another rank trains on. Under `mpiexec -n 2` on 2 cores it made rank 0 a straggler
# (1.07-1.12x the other's arrival, named by the job view) and the job 1.4x as long. Set
# before NumPy loads its BLAS; a value set in the environment is kept.
if detect().local_size > 1:
    for _threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_threads, "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mlp import MLP, Digits, Optimizer

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ArrayOptimizer,
    CheckpointConfig,
    ModelCheckpoint,
    Progress,
    RunContext,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.jobview import verdict_lines
from rankscribe.lineage import get_run_lineage, get_summary_lineage
from rankscribe.ranks import RankInfo, claim_job_dir, create_coordinator, detect, rank_dir
from rankscribe.ranks.errors import BackendUnavailableError
from rankscribe.writer import tensor_summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary-dir", required=True, help="where the job's summaries go")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size per rank")
    parser.add_argument("--hidden", type=int, default=64, help="hidden units")
    parser.add_argument("--optimizer", choices=("sgd", "momentum"), default="momentum")
    parser.add_argument("--collect-freq", type=int, default=5, help="collect every N steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--tensorboard",
        action="store_true",
        help="also write TensorBoard event files (tensorboard --logdir ...)",
    )
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_size", "hidden", "collect_freq"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.lr <= 0:
        parser.error("--lr must be greater than 0")
    return args


#: Seconds a rank waits in the allreduce for the others before it gives up (and raises).
COLLECTIVE_TIMEOUT = 600.0


class Ranks:
    """This process's rank and, on several ranks, the MPI communicator for the gradients."""

    def __init__(self, info: RankInfo) -> None:
        self.info = info
        self.comm: Any = None
        if self.info.world_size > 1:
            # The job's coordinator loaded MPI already (or said what to install).
            from mpi4py import MPI  # noqa: PLC0415 - only multi-rank runs need MPI

            self.comm = MPI.COMM_WORLD

    def average(self, values: np.ndarray) -> np.ndarray:
        if self.comm is None:
            return values
        total = np.empty_like(values)
        # Waited for in Python rather than inside MPI: a rank blocked in MPI_Allreduce
        # cannot raise KeyboardInterrupt, so on Ctrl-C (which mpiexec hands to every
        # rank) another rank's exit would abort it silently. Polling, every rank stops
        # at once and rank 0 gets to say how to merge the job. A rank that raises aborts
        # the job (docs/layout.md, "A rank that raises"); one that hangs is waited for
        # COLLECTIVE_TIMEOUT seconds, then this rank raises too.
        request = self.comm.Iallreduce(values, total)
        deadline = time.monotonic() + COLLECTIVE_TIMEOUT
        while not request.Test():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"rank {self.info.rank}: the allreduce waited {COLLECTIVE_TIMEOUT:.0f} s "
                    "for the other ranks"
                )
            time.sleep(0)  # lets this rank's recorder threads take the GIL meanwhile
        return total / self.info.world_size


class ShuffledShard(ArrayDataset):
    """One rank's rows, reshuffled every epoch, in the number of steps every rank takes.

    The last batch takes the rows left over, so every row is trained on.
    """

    def __init__(self, shard: ArrayDataset, steps: int, seed: int) -> None:
        super().__init__(
            *shard.columns,
            batch_size=shard.batch_size,
            drop_remainder=True,
            path=shard.dataset_path,
            description=shard.dataset_graph,
        )
        self._steps = steps
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._steps

    @property
    def num_samples(self) -> int:
        return self.rows  # every row, the leftovers in the last batch

    def __iter__(self) -> Any:
        order = self._rng.permutation(self.rows)
        for step in range(self._steps):
            last = step == self._steps - 1
            rows = order[step * self.batch_size : None if last else (step + 1) * self.batch_size]
            yield tuple(column[rows] for column in self.columns)


class EpochAccuracy(Progress):
    """RankScribe's progress (rank 0), plus the test accuracy after each epoch."""

    def __init__(self, model: MLP, data: Digits) -> None:
        super().__init__(every_seconds=5.0)
        self.model, self.data = model, data

    def epoch_end(self, run_context: RunContext) -> None:
        if not self.enabled:
            return
        params = run_context.original_args()
        accuracy = self.model.correct(self.data.test_images, self.data.test_labels) / len(
            self.data.test_labels
        )
        self.write(f"epoch {params.cur_epoch_num}/{params.epoch_num}  test accuracy {accuracy:.3f}")


MLP_GRAPH = {
    "name": "DigitsMLP",
    "nodes": [
        {"name": "flatten", "op_type": "Flatten", "scope": "Default", "inputs": ["images"]},
        {
            "name": "fc1",
            "op_type": "MatMul",
            "scope": "Default/fc1",
            "inputs": ["flatten", "fc1.weight"],
        },
        {
            "name": "fc1_bias",
            "op_type": "BiasAdd",
            "scope": "Default/fc1",
            "inputs": ["fc1", "fc1.bias"],
        },
        {"name": "relu", "op_type": "ReLU", "scope": "Default", "inputs": ["fc1_bias"]},
        {
            "name": "fc2",
            "op_type": "MatMul",
            "scope": "Default/fc2",
            "inputs": ["relu", "fc2.weight"],
        },
        {
            "name": "fc2_bias",
            "op_type": "BiasAdd",
            "scope": "Default/fc2",
            "inputs": ["fc2", "fc2.bias"],
        },
    ],
    "parameters": ["images", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"],
    "outputs": ["fc2_bias"],
}


def train(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]] | None:
    info = detect()
    # How the ranks reach rank 0 (every rank makes it); the collector merges through it too.
    # Under mpiexec it loads MPI, and says in one line what to install when it cannot.
    coordinator = create_coordinator(info, timeout=60.0)
    ranks = Ranks(info)
    summary_dir = claim_job_dir(args.summary_dir, coordinator=coordinator).directory
    if info.rank == 0 and summary_dir.name != Path(args.summary_dir).name:
        moved = Path(args.summary_dir).parent / summary_dir.name
        print(f"{args.summary_dir} already holds a run; this one goes to {moved}", flush=True)
    leader = info.rank == 0

    data = Digits.load(args.seed)
    full = ArrayDataset(
        data.train_images,
        data.train_labels,
        batch_size=args.batch_size,
        path="sklearn.datasets.load_digits",
        description={"op_type": "DigitsShard", "shuffle": True, "batch_size": args.batch_size},
    )
    shard = full.shard(info.world_size, info.rank)
    # Every rank must take the same number of steps (each ends in an allreduce).
    steps = (len(data.train_labels) // info.world_size) // args.batch_size
    train_set = ShuffledShard(shard, steps, seed=args.seed * 1000 + info.rank)
    # Each rank evaluates its shard in one batch; the counts are summed over the ranks.
    test_shard = ArrayDataset(
        data.test_images, data.test_labels, batch_size=1, path="sklearn.datasets.load_digits"
    ).shard(info.world_size, info.rank)
    test_set = ArrayDataset(
        *test_shard.columns, batch_size=test_shard.rows, path="sklearn.datasets.load_digits"
    )

    model = MLP.create(args.hidden, args.seed)  # the same start on every rank
    optimizer = Optimizer(model, args.optimizer, args.lr)
    network = ArrayNetwork(model.weights, graph=MLP_GRAPH, name="DigitsMLP")
    optimizer_view = ArrayOptimizer(
        network, learning_rate=args.lr, name="Momentum" if args.optimizer == "momentum" else "SGD"
    )

    def step(batch: tuple[np.ndarray, np.ndarray]) -> float:
        images, labels = batch
        # The work, timed apart from the allreduce: every rank's wall step time waits
        # for the slowest rank there, so only the section tells the ranks apart.
        with collector.section("compute"):
            loss, gradients = model.loss_and_gradients(images, labels)
            names = sorted(gradients)
            flat = np.concatenate([gradients[name].ravel() for name in names])
        # The collective, marked: the step time less it is each rank's arrival, when the
        # job could go on but for the later ranks (what a straggler's cost is measured by).
        with collector.section("sync"):
            flat = ranks.average(flat)
        with collector.section("compute"):  # a second entry in the step adds up
            offset = 0
            for name in names:
                size = gradients[name].size
                gradients[name] = flat[offset : offset + size].reshape(gradients[name].shape)
                offset += size
            optimizer.apply(gradients)
        # A summary operator: kept only at this rank's share of the tensor steps.
        tensor_summary("fc2.weight", model.weights["fc2.weight"])
        return loss

    def evaluate(batch: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
        images, labels = batch
        counts = ranks.average(np.array([model.correct(images, labels), len(labels)], float))
        # (averaged counts: their ratio is the job's accuracy)
        return {"accuracy": counts[0] / counts[1]}

    loop = TrainLoop(
        step,
        network=network,
        optimizer=optimizer_view,
        loss_fn=SoftmaxCrossEntropy(),
        eval_fn=evaluate,
    )
    collector = SummaryCollector(
        str(summary_dir),
        collect_freq=args.collect_freq,
        # The loss landscape needs many saved parameter sets; this example skips it.
        collect_specified_data={"collect_landscape": None},
        custom_lineage_data={"hidden": args.hidden, "seed": args.seed},
        formats=("mindinsight", "tensorboard") if args.tensorboard else ("mindinsight",),
        coordinator=coordinator,
    )
    checkpoint = ModelCheckpoint(
        prefix="digits",
        directory=str(rank_dir(summary_dir, info)),
        config=CheckpointConfig(save_checkpoint_steps=steps, keep_checkpoint_max=2),
    )
    started = time.perf_counter()
    loop.train(
        args.epochs, train_set, callbacks=[checkpoint, collector, EpochAccuracy(model, data)]
    )
    metrics = loop.eval(test_set, callbacks=[collector])
    coordinator.close()
    if not leader:
        return None
    print(
        f"trained {args.epochs} epochs on {info.world_size} rank(s) in "
        f"{time.perf_counter() - started:.1f} s; test accuracy {metrics['accuracy']:.3f}"
    )
    directory = str(summary_dir.resolve())
    return get_summary_lineage(directory), job_verdicts(directory)


def job_verdicts(summary_dir: str) -> list[str]:
    """The job view's verdicts in the merged lineage, as sentences (none for one process)."""
    lineage = get_run_lineage(summary_dir)
    return verdict_lines(lineage.section("user_defined")) if lineage is not None else []


class SoftmaxCrossEntropy:
    """The loss the model computes; named here so the lineage records it."""


def print_lineage(lineage: dict[str, Any]) -> None:
    rows = [("summary_dir", lineage["summary_dir"])]
    for section in (
        "hyper_parameters",
        "algorithm",
        "train_dataset",
        "valid_dataset",
        "metric",
        "model",
    ):
        for key, value in (lineage.get(section) or {}).items():
            shown = f"{value:.6g}" if isinstance(value, float) else str(value)
            rows.append((f"{section}.{key}", shown))
    width = max(len(name) for name, _ in rows)
    print("merged lineage of the job:")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        result = train(args)
    except BackendUnavailableError as error:
        # mpiexec without an MPI library mpi4py can load: one line (from rank 0), no traceback.
        if detect().rank == 0:
            print(f"train.py: {error}", file=sys.stderr)
        return 1
    if result is not None:
        lineage, verdicts = result
        print_lineage(lineage)
        if verdicts:
            print("job view (cross-rank curves in the job dir):")
            for line in verdicts:
                print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
