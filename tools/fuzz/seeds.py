"""Seed inputs for the fuzzer: small files made by RankScribe's writer and by MindSpore.

A coverage-guided fuzzer mutates what it starts from, so the seeds hold every
kind of record the readers decode: scalars, a histogram, a small image, a
tensor, a graph, and the golden MindSpore files (lineage among them).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "compat" / "data" / "mindspore-2.10"


def _writer_run(directory: Path) -> None:
    from rankscribe.writer import SummaryRecord

    rng = np.random.default_rng(0)
    with SummaryRecord(str(directory), formats=("mindinsight", "tensorboard")) as record:
        for step in (1, 2):
            record.add_value("scalar", "loss", 1.0 / step)
            record.add_value("histogram", "fc/weight", rng.standard_normal((4, 4)))
            record.add_value("image", "input", rng.random((1, 3, 4, 4)))
            record.add_value("tensor", "fc/bias", np.arange(3, dtype=np.int64))
            record.record(step)


def _job_rank(directory: Path, rank: int, steps: int) -> bytes:
    """One rank's summary file: a loss, step times and a parameter fingerprint."""
    from rankscribe.jobview.feed import FINGERPRINT_TAG, STEP_TIME_TAG
    from rankscribe.writer import SummaryRecord

    with SummaryRecord(str(directory), rank=rank) as record:
        for step in range(1, steps + 1):
            record.add_value("scalar", "loss/auto", 1.0 / step + 0.01 * rank)
            record.add_value("scalar", STEP_TIME_TAG, 0.01 * (1 + rank))
            record.add_value("scalar", FINGERPRINT_TAG, float(step if rank else step + 0.5))
            record.record(step)
    (made,) = [path for path in directory.iterdir() if path.name.endswith("_MS")]
    return made.read_bytes()


def job_seeds() -> dict[str, bytes]:
    """Inputs of the ``jobview`` target: jobs of 2 and 3 ranks with the golden lineage."""
    import targets

    lineage = sorted(GOLDEN.glob("lineage_train_eval/*_lineage"))[0].read_bytes()
    with tempfile.TemporaryDirectory() as scratch:
        summaries = [_job_rank(Path(scratch) / f"rank_{rank}", rank, 4 + rank) for rank in range(3)]
    return {
        "seed-job-3-ranks": targets.pack_job_files(0, [(s, lineage) for s in summaries]),
        "seed-job-2-ranks-one-missing": targets.pack_job_files(
            2, [(summaries[0], lineage), (summaries[1], None)]
        ),
        "seed-job-2-ranks-world-size": targets.pack_job_files(
            1, [(summaries[1], lineage), (summaries[2], lineage)]
        ),
    }


def container_seeds() -> dict[str, bytes]:
    """Inputs of the ``container`` target: a lineage index and job-view partials."""
    from rankscribe.jobview.feed import FINGERPRINT_TAG, STEP_TIME_TAG
    from rankscribe.jobview.protocol import JobPartial
    from rankscribe.lineage import filter_runs
    from rankscribe.lineage.index._cache import INDEX_NAME

    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        shutil.copytree(GOLDEN / "lineage_train_eval", base / "good")
        filter_runs(str(base))
        index = (base / INDEX_NAME).read_bytes()
    points = {
        "loss/auto": [(1, 0.5), (2, float("nan")), (3, 0.25)],
        STEP_TIME_TAG: [(1, 0.1), (2, 0.2), (3, 0.3)],
        FINGERPRINT_TAG: [(2, 7.0)],
    }
    own = JobPartial.of_rank(0, points, finished=True)
    merged = JobPartial.of_rank(0, points)
    merged.merge(JobPartial.of_rank(1, {"loss/auto": [(1, 0.75), (4, float("inf"))]}))
    return {
        "seed-index-golden-run": index,
        "seed-partial-one-rank": own.to_bytes(),
        "seed-partial-two-ranks": merged.to_bytes(),
    }


def live_state_seeds() -> dict[str, bytes]:
    """Inputs of ``livestate``: state files as the live view writes them (a 3-rank job)."""
    state = {
        "interval": 12,
        "wall_time": 1_700_000_000.25,
        "final": False,
        "written_through_step": 480,
        "ranks_in_interval": 2,
        "missing_in_interval": "2",
        "dropped_points": 4,
        "world_size": 3,
        "verdicts": {
            "job/missing_ranks": "2",
            "job/straggler_ranks": "1",
            "job/straggler_cost/1": 0.012,
            "job/last_step/0": 480,
            "job/last_step/1": 479,
            "job/stopped_first_rank": -1,
            "job/divergence_check": "checked",
        },
    }
    return {"seed-live-state": json.dumps(state).encode()}


def claim_seeds() -> dict[str, bytes]:
    """Inputs of ``claim``: a claim as claim_job_dir writes it."""
    claim = {
        "job_id": "0123456789abcdef",
        "host": "fuzzhost",
        "pid": 4242,
        "world_size": 4,
        "claimed_at": 1_700_000_000.5,
    }
    return {"seed-claim": json.dumps(claim).encode()}


def tree_seeds() -> dict[str, bytes]:
    """Inputs of ``treemessage``: rank 1's envelopes of a 7-rank tree (ranks 1, 3 and 4)."""
    import targets

    from rankscribe.jobview.feed import FINGERPRINT_TAG, STEP_TIME_TAG
    from rankscribe.jobview.protocol import JobPartial
    from rankscribe.ranks.testing import MemoryTreeChannel, MemoryTreeHub

    def points(rank: int) -> dict[str, list[tuple[int, float]]]:
        return {
            "loss/auto": [(step, 1.0 / (step + rank)) for step in range(1, 6)],
            STEP_TIME_TAG: [(step, 0.1 + rank / 100) for step in range(1, 6)],
            FINGERPRINT_TAG: [(1, 12345.0)],
        }

    own = JobPartial.of_rank(1, points(1), last_step=0)
    subtree = JobPartial()
    for rank in (1, 3, 4):
        subtree.merge(JobPartial.of_rank(rank, points(rank), finished=rank == 4))
    hub = MemoryTreeHub()
    sender = MemoryTreeChannel(hub, targets.TREE_SENDER, targets.TREE_WORLD, targets.TREE_FAN_IN)
    sender.send(1, own.to_bytes(), timeout=1)
    sender.send(2, subtree.to_bytes(), timeout=1)
    one, both = list(hub.boxes[targets.TREE_SENDER])
    return {
        "seed-tree-own": b"\x00" + one,
        "seed-tree-subtree": b"\x00" + both,
        "seed-tree-subtree-partial": b"\x01" + subtree.to_bytes(),
    }


def control_seeds() -> dict[str, bytes]:
    """Inputs of ``control``: a control file setting every key."""
    control = {"job_view_interval": 30, "cost_floor": 0.01, "confidence": 7, "window_steps": 400}
    return {"seed-control": json.dumps(control).encode()}


def rank_dirs_seeds() -> dict[str, bytes]:
    """Inputs of ``rankdirs``: the note of a job whose ranks 1 and 2 wrote elsewhere."""
    entries = {"1": "/tmp/rankscribe-fuzz-elsewhere/rank_1", "2": "/tmp/rankscribe-fuzz-rank_2"}
    return {"seed-rank-dirs": json.dumps({"rank_dirs": entries}, sort_keys=True).encode()}


def train_start_seeds() -> dict[str, bytes]:
    """Inputs of ``trainstart``: a start record as the collector writes it."""
    from rankscribe.lineage.recording import TrainLineageInfo, write_train_start
    from rankscribe.writer.pb import lineage_pb2

    message = lineage_pb2.TrainLineage()
    message.hyper_parameters.optimizer = "Momentum"
    message.hyper_parameters.learning_rate = 0.01
    message.hyper_parameters.epoch = 2
    message.hyper_parameters.device_num = 2
    message.hyper_parameters.batch_size = 32
    message.train_dataset.train_dataset_path = "/data/mnist"
    message.train_dataset.train_dataset_size = 60000
    message.algorithm.network = "LeNet5"
    lineage = TrainLineageInfo.from_proto(message)
    with tempfile.TemporaryDirectory() as scratch:
        return {"seed-train-start": Path(write_train_start(scratch, lineage)).read_bytes()}


def members_seeds() -> dict[str, bytes]:
    """Inputs of ``members``: the rendezvous members of two ranks."""
    member = {"host": "fuzzhost", "pid": 4242, "world_size": 2, "launch": "mpiexec:1"}
    members = {"0": member, "1": {**member, "pid": 4243}}
    return {"seed-members": json.dumps(members, indent=1, sort_keys=True).encode()}


def checkpoint_seeds() -> dict[str, bytes]:
    """Inputs of ``checkpoint``: a checkpoint with scalar and array append info."""
    from rankscribe.collector import save_checkpoint

    with tempfile.TemporaryDirectory() as scratch:
        path = save_checkpoint(
            [("fc.weight", np.arange(6, dtype=np.float32).reshape(2, 3))],
            str(Path(scratch) / "net"),
            append_dict={"epoch_num": 3, "lr": 0.5, "mask": np.array([1, 0], dtype=np.int8)},
        )
        return {"seed-checkpoint": Path(path).read_bytes()}


_MADE_SEEDS = {
    "jobview": job_seeds,
    "livestate": live_state_seeds,
    "claim": claim_seeds,
    "treemessage": tree_seeds,
    "container": container_seeds,
    "control": control_seeds,
    "rankdirs": rank_dirs_seeds,
    "trainstart": train_start_seeds,
    "members": members_seeds,
    "checkpoint": checkpoint_seeds,
}


def write_seeds(target: str, folder: Path) -> Path:
    """Fill ``folder`` with the seed files of ``target`` (a name of ``targets.TARGETS``)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if target in _MADE_SEEDS:
        for name, data in _MADE_SEEDS[target]().items():
            (folder / name).write_bytes(data)
        return folder
    with tempfile.TemporaryDirectory() as scratch:
        run = Path(scratch) / "run"
        _writer_run(run)
        made = sorted(path for path in run.iterdir() if path.is_file())
        if target == "summary":
            sources = [p for p in made if p.name.endswith("_MS")]
            sources += sorted(GOLDEN.glob("*/*_MS"))
        elif target == "tensorboard":
            sources = [p for p in made if "tfevents" in p.name]
        else:
            sources = sorted(GOLDEN.glob("*/*_lineage"))
        for number, source in enumerate(sources):
            shutil.copyfile(source, folder / f"seed-{number:02d}")
    return folder
