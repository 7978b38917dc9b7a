"""The file backend with several local processes, and its files on disk."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from rankscribe.ranks import FileCoordinator, RankInfo
from rankscribe.ranks.errors import CollectiveTimeoutError, RendezvousError
from tests._support.clocks import SleepingClock
from tests._support.launchers import Launches, rank_environment

WORKER = Path(__file__).resolve().parent / "file_worker.py"
PROCESS_TIMEOUT = 60


def run_ranks(
    tmp_path: Path,
    scenario: str,
    world_size: int,
    started: list[int] | None = None,
    timeout: float = 30.0,
) -> dict[int, dict[str, Any]]:
    """Start ranks ``started`` (all by default) of a ``world_size`` job; return their records."""
    rendezvous, out = tmp_path / "rendezvous", tmp_path / "out"
    out.mkdir()
    with Launches(PROCESS_TIMEOUT) as launches:
        for rank in started if started is not None else range(world_size):
            env = rank_environment(rank, world_size)
            launches.start(
                [sys.executable, WORKER, scenario, rendezvous, out, str(timeout)], env=env
            )
        for process in launches.wait(check=False):
            assert process.returncode == 0, process.output
    return {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in out.glob("rank_*.json")}


def test_three_processes_gather_bcast_and_barrier(tmp_path: Path) -> None:
    records = run_ranks(tmp_path, "collectives", 3)
    assert sorted(records) == [0, 1, 2]
    root = records[0]
    assert root["is_root"] and root["missing"] == []
    assert root["values"] == {str(r): {"rank": r, "steps": list(range(r))} for r in range(3)}
    for rank in (1, 2):
        assert records[rank]["values"] == {} and not records[rank]["is_root"]
    assert {record["word"] for record in records.values()} == {"hello from 1"}
    assert records[2]["last_values"] == {"0": 0, "1": 10, "2": 20}
    assert {(r["launcher"], r["backend"]) for r in records.values()} == {("torchrun", "file")}


def test_rank_that_never_starts_is_named_missing_by_gather_and_barrier(tmp_path: Path) -> None:
    records = run_ranks(tmp_path, "missing", 4, started=[0, 1, 2], timeout=1.0)
    root = records[0]
    assert root["values"] == {str(r): f"object of {r}" for r in range(3)}
    assert root["missing"] == [3]
    for rank in range(3):
        barrier = records[rank]["barrier"]
        assert barrier["raised"] and barrier["missing"] == [3]
        assert "barrier #1 timed out after 1 s: no marker in" in barrier["message"]


def test_a_gather_waits_its_whole_timeout_for_an_absent_rank_and_no_longer(
    tmp_path: Path, ranks_clock: SleepingClock
) -> None:
    root = FileCoordinator(RankInfo(0, 3, 0, 3, "host", "torchrun"), tmp_path / "rendezvous")
    present = FileCoordinator(RankInfo(1, 3, 1, 3, "host", "torchrun"), tmp_path / "rendezvous")
    present.gather("from 1", timeout=1.0)
    started = ranks_clock()
    result = root.gather("from 0", timeout=1.0)
    assert result.values == {0: "from 0", 1: "from 1"} and result.missing == (2,)
    assert ranks_clock() - started == pytest.approx(1.0)  # the whole timeout, not a poll more
    with pytest.raises(CollectiveTimeoutError) as caught:
        root.barrier(timeout=2.0)
    assert caught.value.missing == (1, 2)
    assert ranks_clock() - started == pytest.approx(3.0)


def test_late_rank_file_is_kept_and_next_gather_is_complete(tmp_path: Path) -> None:
    records = run_ranks(tmp_path, "late", 3, timeout=1.0)
    root = records[0]
    assert root["first"] == {"0": "first from 0", "1": "first from 1"}
    assert root["first_missing"] == [2]
    assert root["second"] == {str(r): f"second from {r}" for r in range(3)}
    # the late object reached the folder after the root gave up: kept for a later merge
    late_file = tmp_path / "rendezvous" / "000001.gather" / "rank_2.msg"
    assert late_file.exists()


def test_ranks_in_different_collectives_are_told(tmp_path: Path) -> None:
    records = run_ranks(tmp_path, "mismatch", 3, timeout=2.0)
    messages = [r["mismatch"] for r in records.values() if r.get("mismatch")]
    assert messages, records
    assert any("every rank must call every collective in the same order" in m for m in messages)


def test_files_on_disk(tmp_path: Path) -> None:
    run_ranks(tmp_path, "collectives", 2)
    rendezvous = tmp_path / "rendezvous"
    names = sorted(p.relative_to(rendezvous).as_posix() for p in rendezvous.rglob("*"))
    assert names == [
        "000001.gather",
        "000001.gather/rank_1.msg",
        "000002.bcast",
        "000002.bcast/root.msg",
        "000003.barrier",
        "000003.barrier/rank_0",
        "000003.barrier/rank_1",
        "000004.gather",
        "000004.gather/rank_0.msg",
        "members.json",
    ]
    assert stat.S_IMODE(rendezvous.stat().st_mode) == 0o700
    assert stat.S_IMODE((rendezvous / "000001.gather" / "rank_1.msg").stat().st_mode) == 0o600
    assert stat.S_IMODE((rendezvous / "members.json").stat().st_mode) == 0o600
    members = json.loads((rendezvous / "members.json").read_text())
    assert sorted(members) == ["0", "1"]
    assert {m["world_size"] for m in members.values()} == {2}


def info(rank: int, world_size: int) -> RankInfo:
    return RankInfo(rank, world_size, rank, world_size, "h", "torchrun")


def test_a_folder_used_by_another_job_is_refused(tmp_path: Path) -> None:
    FileCoordinator(info(0, 2), tmp_path)
    with pytest.raises(RendezvousError, match=r"already used: rank 0 is registered there by pid"):
        FileCoordinator(info(0, 2), tmp_path)


def test_ranks_must_agree_on_the_world_size(tmp_path: Path) -> None:
    FileCoordinator(info(0, 2), tmp_path)
    with pytest.raises(RendezvousError, match="rank 0 joined with world_size 2 but rank 1 has"):
        FileCoordinator(info(1, 3), tmp_path)


def test_bcast_that_never_comes_times_out(tmp_path: Path) -> None:
    coordinator = FileCoordinator(info(1, 2), tmp_path)
    with pytest.raises(CollectiveTimeoutError) as caught:
        coordinator.bcast(None, timeout=0.2)
    assert caught.value.missing == (0,)
    assert isinstance(caught.value, TimeoutError)
    assert "bcast #1 timed out after 0.2 s: root 0 wrote nothing" in str(caught.value)


def test_unreadable_object_counts_as_missing(tmp_path: Path) -> None:
    coordinator = FileCoordinator(info(0, 2), tmp_path)
    folder = tmp_path / "000001.gather"
    folder.mkdir()
    (folder / "rank_1.msg").write_bytes(b"not a message")
    result = coordinator.gather("mine", timeout=1)
    assert result.values == {0: "mine"} and result.missing == (1,)


def test_no_temporary_files_are_left(tmp_path: Path) -> None:
    coordinator = FileCoordinator(info(1, 2), tmp_path)
    for index in range(5):
        coordinator.gather(b"x" * 100_000 * index)
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
