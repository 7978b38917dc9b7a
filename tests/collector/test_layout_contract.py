"""The job layout contract: lineage reads the ``rank_<n>`` directories that ranks makes.

rankscribe-ranks and rankscribe-lineage may not import each other, so each
writes the layout rule down once on its own side; this test, run where both
are installed, checks that the two sides agree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rankscribe.lineage import filter_summary_lineage, merge_run_dir
from rankscribe.lineage.recording import Algorithm, HyperParameters, TrainLineageInfo
from rankscribe.ranks import RankInfo, rank_dir
from rankscribe.ranks.files import atomic_write
from rankscribe.writer.files import LINEAGE_SUFFIX, frame, summary_file_name
from rankscribe.writer.pb import lineage_pb2


def write_rank_lineage(directory: Path, rank: int, world_size: int) -> None:
    info = TrainLineageInfo(
        hyper_parameters=HyperParameters(device_num=world_size),
        algorithm=Algorithm(network="Net", loss=float(rank)),
    )
    event = lineage_pb2.LineageEvent(wall_time=1.0, train_lineage=info.to_proto())
    name = summary_file_name("events", 1700000000, rank, "host", LINEAGE_SUFFIX)
    atomic_write(directory / name, [frame(event.SerializeToString())])


@pytest.mark.parametrize("world_size", [2, 12])
def test_lineage_merges_every_directory_rank_dir_makes(tmp_path: Path, world_size: int) -> None:
    job = tmp_path / "job"
    for rank in range(world_size):
        info = RankInfo(
            rank=rank,
            world_size=world_size,
            local_rank=0,
            local_size=1,
            host="host",
            launcher="mpi",
        )
        write_rank_lineage(rank_dir(job, info), rank, world_size)
    outcome = merge_run_dir(job)
    assert outcome.ranks_reported == list(range(world_size))
    assert outcome.ranks_missing == []
    merged = outcome.lineage.section("user_defined")
    assert (merged["loss_min"], merged["loss_max"]) == (0.0, float(world_size - 1))
    # the job directory reads as one run, the merged one
    result = filter_summary_lineage(str(tmp_path), use_index=False)
    assert [item["summary_dir"] for item in result["object"]] == [str(job.resolve())]


def test_a_single_process_writes_into_the_run_dir_itself(tmp_path: Path) -> None:
    info = RankInfo(
        rank=0, world_size=1, local_rank=0, local_size=1, host="host", launcher="single"
    )
    directory = rank_dir(tmp_path / "run", info)
    write_rank_lineage(directory, 0, 1)
    # no rank_<n> directory: nothing for an offline merge, one run for a query
    with pytest.raises(ValueError, match="no rank_<n> directory"):
        merge_run_dir(tmp_path / "run")
    result = filter_summary_lineage(str(tmp_path), use_index=False)
    assert [item["summary_dir"] for item in result["object"]] == [str(directory.resolve())]
