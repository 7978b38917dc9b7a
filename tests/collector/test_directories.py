"""Which directory is made when (docs/mindinsight-differences.md, "Directories").

MindSpore makes ``summary_dir`` (SummaryRecord, SummaryCollector) and a
ModelCheckpoint's ``directory`` in the constructors; so does RankScribe. A rank's
own ``rank_<r>`` waits for the start of training, and the landscape's ``ckpt_dir``
for its first file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    ModelCheckpoint,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.ranks import RankInfo
from rankscribe.writer import SummaryRecord
from tests.collector.coordinators import RankZeroAlone


def ranks(rank: int, world_size: int) -> RankInfo:
    return RankInfo(
        rank=rank,
        world_size=world_size,
        local_rank=rank,
        local_size=world_size,
        host="h",
        launcher="pmi" if world_size > 1 else "single",
    )


def tree(directory: Path) -> list[str]:
    """Every path under ``directory``, relative, sorted (directories end with ``/``)."""
    found = []
    for root, directories, files in os.walk(directory):
        base = Path(root).relative_to(directory)
        found += [f"{base / name}/" for name in directories]
        found += [str(base / name) for name in files]
    return sorted(found)


def test_the_collector_makes_summary_dir_when_it_is_made(tmp_path: Path) -> None:
    summary = tmp_path / "runs" / "exp1"
    SummaryCollector(summary)
    assert summary.is_dir()
    assert stat.S_IMODE(summary.stat().st_mode) == 0o700
    # Nothing in it yet: the files, and the landscape's ckpt_dir, come with training.
    assert tree(summary) == []


def test_an_empty_summary_dir_made_early_is_still_the_jobs(tmp_path: Path) -> None:
    summary = tmp_path / "exp"
    collector = SummaryCollector(
        summary,
        collect_freq=1,
        collect_specified_data={"collect_landscape": None},
        rank_info=ranks(0, 2),
        coordinator=RankZeroAlone(ranks(0, 2)),
        merge_timeout=30,
    )
    # On several ranks the rank's directory waits for the job's claim.
    assert tree(summary) == []
    network = ArrayNetwork({"w": np.ones(3, np.float32)}, name="TinyNet")
    data = ArrayDataset(np.zeros((4, 2), np.float32), batch_size=2)
    TrainLoop(lambda batch: 1.0, network=network).train(1, data, callbacks=[collector])
    assert collector.summary_dir == str(summary)  # not moved to exp-2
    assert collector.directory == summary / "rank_0"


def test_the_landscape_directory_waits_for_its_first_file(tmp_path: Path) -> None:
    summary = tmp_path / "exp"
    SummaryCollector(summary, rank_info=ranks(0, 1))
    assert not (summary / "ckpt_dir").exists()


def test_summary_record_and_checkpoint_make_their_directories_when_made(tmp_path: Path) -> None:
    with SummaryRecord(tmp_path / "record" / "run"):
        assert (tmp_path / "record" / "run").is_dir()
    ModelCheckpoint(directory=tmp_path / "checkpoints" / "run")
    assert (tmp_path / "checkpoints" / "run").is_dir()
