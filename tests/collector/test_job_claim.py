"""A SummaryCollector on a job of several ranks claims its directory first (docs/layout.md).

"Another job" is a real one: a claim made by another process
(``rankscribe.ranks.claim_job_dir`` in a subprocess). The ranks here run in this
process: rank 0 alone with a coordinator whose rank 1 never reports (what the
claim's broadcast and the merge's gather do for rank 0 then), or both ranks in
threads over a real FileCoordinator.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import ArrayDataset, ArrayNetwork, SummaryCollector, TrainLoop
from rankscribe.collector.errors import CollectorValueError
from rankscribe.lineage import get_summary_lineage
from rankscribe.ranks import FileCoordinator, JobDirClaimedError, RankInfo, claim_job_dir
from rankscribe.ranks.files import CLAIM_FILE_NAME
from rankscribe.writer.reader import scalars
from tests._support.launchers import clean_environment, run_bounded
from tests.collector.coordinators import RankZeroAlone

NO_LANDSCAPE = {"collect_landscape": None}
PROCESS_TIMEOUT = 60


def info(rank: int, world_size: int = 2) -> RankInfo:
    return RankInfo(
        rank=rank,
        world_size=world_size,
        local_rank=rank,
        local_size=world_size,
        host="h",
        launcher="pmi" if world_size > 1 else "single",
    )


def another_job_claims(directory: Path) -> None:
    """``directory`` claimed by another process, as another job's rank 0 does."""
    code = "import sys; from rankscribe.ranks import claim_job_dir; claim_job_dir(sys.argv[1])"
    run_bounded(
        [sys.executable, "-c", code, directory], timeout=PROCESS_TIMEOUT, env=clean_environment()
    )


def train(directory: Path, rank: int = 0, **arguments: Any) -> SummaryCollector:
    network = ArrayNetwork({"w": np.ones(3, np.float32)}, name="TinyNet")
    data = ArrayDataset(np.zeros((6, 2), np.float32), batch_size=2)
    arguments.setdefault("coordinator", RankZeroAlone(info(0)))
    collector = SummaryCollector(
        directory,
        collect_freq=1,
        collect_specified_data=NO_LANDSCAPE,
        rank_info=info(rank, 2 if arguments["coordinator"] is not None else 1),
        merge_timeout=30,
        **arguments,
    )
    loss = float(10 * (rank + 1))
    TrainLoop(lambda batch: loss, network=network).train(1, data, callbacks=[collector])
    return collector


def loss_points(directory: Path) -> list[tuple[int, float]]:
    return [(step, float(value)) for step, value in scalars(directory)["loss/auto"]]


def test_a_directory_of_another_job_sends_this_job_to_the_next_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    summary = tmp_path / "exp"
    another_job_claims(summary)
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        collector = train(summary)
    moved = tmp_path / "exp-2"
    assert collector.summary_dir == str(moved)
    assert collector.directory == moved / "rank_0"
    assert loss_points(moved / "rank_0") == [(1, 10.0), (2, 10.0), (3, 10.0)]
    assert os.listdir(summary) == [CLAIM_FILE_NAME]  # the other job's, untouched
    # the merged job lineage is in the directory the job used
    assert get_summary_lineage(str(moved))["hyper_parameters"]["device_num"] == 2
    claim = json.loads((moved / CLAIM_FILE_NAME).read_text())
    assert (claim["pid"], claim["world_size"]) == (os.getpid(), 2)
    [warning] = [r.getMessage() for r in caplog.records if "belongs to" in r.getMessage()]
    assert caplog.records[0].getMessage() == warning  # said before anything else
    assert f"{summary} belongs to another job" in warning
    assert f"writes into {moved} instead" in warning


def test_on_exists_error_refuses_before_anything_is_written(tmp_path: Path) -> None:
    summary = tmp_path / "exp"
    another_job_claims(summary)
    with pytest.raises(JobDirClaimedError, match="belongs to job") as caught:
        train(summary, on_exists="error")
    assert isinstance(caught.value, FileExistsError)
    assert str(summary) in str(caught.value)
    assert os.listdir(summary) == [CLAIM_FILE_NAME]
    assert not (tmp_path / "exp-2").exists()


def test_on_exists_append_keeps_writing_into_the_directory(tmp_path: Path) -> None:
    summary = tmp_path / "exp"
    another_job_claims(summary)
    held = json.loads((summary / CLAIM_FILE_NAME).read_text())
    collector = train(summary, on_exists="append")
    assert collector.summary_dir == str(summary)
    assert loss_points(summary / "rank_0") == [(1, 10.0), (2, 10.0), (3, 10.0)]
    assert json.loads((summary / CLAIM_FILE_NAME).read_text()) == held
    assert not (tmp_path / "exp-2").exists()


def test_a_directory_this_job_claimed_first_is_used_as_it_is(tmp_path: Path) -> None:
    # What the examples and the framework integrations do: claim, then make the collector.
    claimed = claim_job_dir(tmp_path / "exp", coordinator=RankZeroAlone(info(0))).directory
    held = (claimed / CLAIM_FILE_NAME).read_text()
    collector = train(claimed)
    assert collector.summary_dir == str(claimed)
    assert loss_points(claimed / "rank_0") == [(1, 10.0), (2, 10.0), (3, 10.0)]
    assert (claimed / CLAIM_FILE_NAME).read_text() == held
    assert sorted(path.name for path in tmp_path.iterdir()) == ["exp"]
    # an earlier collector of the job claimed it too: a second one (an evaluation) joins it
    assert train(claimed).summary_dir == str(claimed)


def test_a_claim_older_than_this_process_is_another_jobs_even_with_its_pid(
    tmp_path: Path,
) -> None:
    # pids are reused (in a container, the same command gets the same pid run after run)
    summary = tmp_path / "exp"
    summary.mkdir(mode=0o700)
    old = {"job_id": "0" * 16, "host": os.uname().nodename, "pid": os.getpid(), "world_size": 2}
    old["claimed_at"] = time.time() - 10 * 365 * 24 * 3600
    (summary / CLAIM_FILE_NAME).write_text(json.dumps(old))
    assert train(summary).summary_dir == str(tmp_path / "exp-2")


def test_a_later_collector_of_the_job_writes_where_the_first_did(tmp_path: Path) -> None:
    summary = tmp_path / "exp"
    another_job_claims(summary)
    first = train(summary)
    second = train(summary)
    assert first.summary_dir == second.summary_dir == str(tmp_path / "exp-2")
    assert not (tmp_path / "exp-3").exists()


def test_both_ranks_write_where_rank_0_claimed(tmp_path: Path) -> None:
    summary = tmp_path / "exp"
    another_job_claims(summary)
    rendezvous = tmp_path / "rendezvous"
    used: dict[int, str] = {}
    failed: dict[int, BaseException] = {}

    def rank_run(rank: int) -> None:
        try:
            coordinator = FileCoordinator(info(rank), rendezvous, timeout=30)
            used[rank] = train(summary, rank=rank, coordinator=coordinator).summary_dir
        except BaseException as error:
            failed[rank] = error

    threads = [threading.Thread(target=rank_run, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PROCESS_TIMEOUT)
    assert not failed and used == {0: str(tmp_path / "exp-2"), 1: str(tmp_path / "exp-2")}
    for rank in (0, 1):
        points = loss_points(tmp_path / "exp-2" / f"rank_{rank}")
        assert points == [(1, 10.0 * (rank + 1)), (2, 10.0 * (rank + 1)), (3, 10.0 * (rank + 1))]
    assert os.listdir(summary) == [CLAIM_FILE_NAME]


def test_each_rank_reports_the_directory_it_named_under_per_rank_dirs(tmp_path: Path) -> None:
    # The summary guide's layout, "summary_dir" + str(rank), its first directory another
    # job's: each rank's summary_dir is the one holding its rank_<r> (moved as the job's
    # was), not rank 0's (docs/layout.md, "Ranks that name directories of their own").
    another_job_claims(tmp_path / "summary_dir0")
    rendezvous = tmp_path / "rendezvous"
    used: dict[int, str] = {}
    failed: dict[int, BaseException] = {}

    def rank_run(rank: int) -> None:
        try:
            coordinator = FileCoordinator(info(rank), rendezvous, timeout=30)
            directory = tmp_path / f"summary_dir{rank}"
            used[rank] = train(directory, rank=rank, coordinator=coordinator).summary_dir
        except BaseException as error:
            failed[rank] = error

    threads = [threading.Thread(target=rank_run, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PROCESS_TIMEOUT)
    assert not failed
    assert used == {rank: str(tmp_path / f"summary_dir{rank}-2") for rank in (0, 1)}
    for rank in (0, 1):
        assert loss_points(Path(used[rank]) / f"rank_{rank}")


def test_a_single_process_writes_into_the_directory_as_mindspore_does(tmp_path: Path) -> None:
    summary = tmp_path / "exp"
    another_job_claims(summary)
    collector = train(summary, coordinator=None)
    assert collector.summary_dir == str(summary)
    assert loss_points(summary) == [(1, 10.0), (2, 10.0), (3, 10.0)]
    assert not (tmp_path / "exp-2").exists()
    fresh = tmp_path / "fresh"
    train(fresh, coordinator=None)
    assert not (fresh / CLAIM_FILE_NAME).exists()  # nothing claimed, nothing to clean up


@pytest.mark.parametrize("on_exists", ["New", "", None, 1, "overwrite"])
def test_on_exists_is_one_of_three(tmp_path: Path, on_exists: Any) -> None:
    with pytest.raises(CollectorValueError, match="For 'on_exists', the value should be one of"):
        SummaryCollector(tmp_path, on_exists=on_exists)
