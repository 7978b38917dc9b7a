"""A ModelCheckpoint inside a SummaryCollector's summary_dir follows the job's claim.

docs/layout.md, "Checkpoints inside the job directory". Rank 0 of a job of two runs in
this process with a coordinator whose rank 1 never reports (as in test_job_claim.py);
"another job" is a claim another process made.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    CheckpointConfig,
    ModelCheckpoint,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.lineage import get_summary_lineage
from rankscribe.ranks import RankInfo
from rankscribe.ranks.files import CLAIM_FILE_NAME
from tests._support.launchers import clean_environment, run_bounded
from tests.collector.coordinators import RankZeroAlone

RANK_0 = RankInfo(rank=0, world_size=2, local_rank=0, local_size=2, host="h", launcher="pmi")


def another_job_claims(directory: Path) -> None:
    code = "import sys; from rankscribe.ranks import claim_job_dir; claim_job_dir(sys.argv[1])"
    run_bounded([sys.executable, "-c", code, directory], timeout=60, env=clean_environment())


def train(checkpoint: ModelCheckpoint, summary_dir: Path) -> SummaryCollector:
    collector = SummaryCollector(
        summary_dir,
        collect_specified_data={"collect_landscape": None},
        rank_info=RANK_0,
        coordinator=RankZeroAlone(RANK_0),
        merge_timeout=30,
    )
    network = ArrayNetwork({"w": np.ones(3, np.float32)}, name="TinyNet")
    data = ArrayDataset(np.zeros((4, 2), np.float32), batch_size=2)
    # The README's order: the checkpoint callback is made, and runs, before the collector.
    TrainLoop(lambda batch: 1.0, network=network).train(1, data, callbacks=[checkpoint, collector])
    return collector


def test_a_checkpoint_directory_inside_the_job_follows_the_claim(tmp_path: Path) -> None:
    summary = tmp_path / "session"
    another_job_claims(summary)
    checkpoint = ModelCheckpoint(
        directory=summary / "ckpt", config=CheckpointConfig(save_checkpoint_steps=1)
    )
    assert checkpoint.directory == str(summary / "ckpt")  # before the claim

    collector = train(checkpoint, summary)
    moved = tmp_path / "session-2"
    assert collector.summary_dir == str(moved)
    assert checkpoint.directory == str(moved / "ckpt")
    assert sorted(os.listdir(moved / "ckpt")) == ["CKP-1_1.ckpt", "CKP-1_2.ckpt"]
    assert checkpoint.latest_ckpt_file_name == str(moved / "ckpt" / "CKP-1_2.ckpt")
    # the directory it had made in the other job, empty, is gone
    assert os.listdir(summary) == [CLAIM_FILE_NAME]
    model = get_summary_lineage(str(moved))["model"]
    assert json.loads(model["path"])["ckpt"] == str((moved / "ckpt" / "CKP-1_2.ckpt").resolve())


def test_a_checkpoint_directory_outside_the_job_stays(tmp_path: Path) -> None:
    summary = tmp_path / "session"
    another_job_claims(summary)
    checkpoint = ModelCheckpoint(directory=tmp_path / "ckpt")
    train(checkpoint, summary)
    assert checkpoint.directory == str(tmp_path / "ckpt")
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["CKP-1_1.ckpt", "CKP-1_2.ckpt"]


def test_the_other_jobs_own_checkpoints_stay_where_they_are(tmp_path: Path) -> None:
    summary = tmp_path / "session"
    another_job_claims(summary)
    (summary / "ckpt").mkdir()
    (summary / "ckpt" / "CKP-1_2.ckpt").write_bytes(b"the other job's")
    checkpoint = ModelCheckpoint(directory=summary / "ckpt")
    assert checkpoint.prefix == "CKP_1"  # as it would be beside the other job's file
    train(checkpoint, summary)
    assert checkpoint.prefix == "CKP"  # taken afresh where it writes
    assert (summary / "ckpt" / "CKP-1_2.ckpt").read_bytes() == b"the other job's"
    assert os.listdir(summary / "ckpt") == ["CKP-1_2.ckpt"]
    assert sorted(os.listdir(tmp_path / "session-2" / "ckpt")) == ["CKP-1_1.ckpt", "CKP-1_2.ckpt"]
