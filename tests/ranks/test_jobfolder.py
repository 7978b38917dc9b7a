"""The file backend in the job directory's hidden folder (create_coordinator(job_dir=...))."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rankscribe.ranks import FileCoordinator, RankInfo, create_coordinator
from rankscribe.ranks.errors import RendezvousError
from rankscribe.ranks.files import JOB_RENDEZVOUS_DIRNAME
from tests._support.launchers import Launches, drop_launcher_variables, rank_environment

WORKER = Path(__file__).resolve().parent / "file_worker.py"
PROCESS_TIMEOUT = 60
LAUNCH = {"TORCHELASTIC_RUN_ID": "none", "TORCHELASTIC_RESTART_COUNT": "0"}


def run_ranks(
    job_dirs: list[Path], out: Path, scenario: str, timeout: float = 30.0
) -> dict[int, dict[str, Any]]:
    """Rank r of a ``len(job_dirs)``-rank torchrun-like job, with ``job_dir=job_dirs[r]``."""
    out.mkdir()
    world_size = len(job_dirs)
    with Launches(PROCESS_TIMEOUT) as launches:
        for rank, job_dir in enumerate(job_dirs):
            env = rank_environment(rank, world_size, **LAUNCH)
            launches.start(
                [sys.executable, WORKER, scenario, job_dir, out, str(timeout), "job"], env=env
            )
        for process in launches.wait(check=False):
            assert process.returncode == 0, process.output
    return {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in out.glob("rank_*.json")}


def test_ranks_meet_in_the_job_folder_and_a_later_run_in_a_new_one(tmp_path: Path) -> None:
    job = tmp_path / "job"
    launch = job / JOB_RENDEZVOUS_DIRNAME / "torchrun.none.0"
    for run, folder in enumerate(("000000", "000001")):
        records = run_ranks([job, job], tmp_path / f"out{run}", "collectives")
        root = records[0]
        assert root["missing"] == [] and root["values"] == {
            str(r): {"rank": r, "steps": list(range(r))} for r in range(2)
        }
        assert {record["word"] for record in records.values()} == {"hello from 1"}
        assert {(r["backend"], r["folder"]) for r in records.values()} == {
            ("file", str(launch / folder))
        }
    assert sorted(p.name for p in launch.iterdir()) == ["000000", "000001"]  # no lock left
    hidden = job / JOB_RENDEZVOUS_DIRNAME
    assert stat.S_IMODE(hidden.stat().st_mode) == 0o700
    assert stat.S_IMODE((launch / "000001").stat().st_mode) == 0o700


def test_ranks_that_do_not_share_the_folder_are_told_so(tmp_path: Path) -> None:
    # Two job directories stand for a directory local to each host.
    first, second = tmp_path / "host_a" / "job", tmp_path / "host_b" / "job"
    records = run_ranks([first, second], tmp_path / "out", "missing", timeout=1.0)
    root = records[0]
    assert root["values"] == {"0": "object of 0"} and root["missing"] == [1]
    for rank, job in ((0, first), (1, second)):
        barrier = records[rank]["barrier"]
        folder = job / JOB_RENDEZVOUS_DIRNAME / "torchrun.none.0" / "000000"
        assert barrier["raised"] and barrier["missing"] == [1 - rank]
        assert (
            f"rank(s) {1 - rank} never joined {folder}: the ranks may not share its filesystem "
            "(a directory local to each host?): pass rendezvous_dir=<a folder every rank "
            "sees>, or initialise torch.distributed before training"
        ) in barrier["message"]


def info(rank: int, world_size: int) -> RankInfo:
    return RankInfo(rank, world_size, rank, world_size, socket.gethostname(), "torchrun")


def members(folder: Path, entries: dict[str, dict[str, Any]]) -> None:
    folder.mkdir(parents=True, mode=0o700)
    (folder / "members.json").write_text(json.dumps(entries))


def ended_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(timeout=PROCESS_TIMEOUT)
    return process.pid


def test_folders_of_another_world_size_or_of_ended_processes_are_skipped(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drop_launcher_variables(monkeypatch)
    launch = tmp_path / JOB_RENDEZVOUS_DIRNAME / "job"
    host = socket.gethostname()
    # rank 1 is there already (an earlier coordinator), then a job of another size
    members(launch / "000000", {"1": {"host": host, "pid": os.getpid(), "world_size": 2}})
    members(launch / "000001", {"0": {"host": host, "pid": os.getpid(), "world_size": 4}})
    # rank 0 of a run that ended before its other ranks arrived
    members(launch / "000002", {"0": {"host": host, "pid": ended_pid(), "world_size": 2}})
    # a rank on another host: whether it still runs cannot be known, so it is joined
    members(launch / "000003", {"0": {"host": "elsewhere", "pid": 1, "world_size": 2}})
    coordinator = create_coordinator(info(1, 2), job_dir=tmp_path, timeout=5)
    assert isinstance(coordinator, FileCoordinator)
    assert coordinator.directory == launch / "000003"
    coordinator = create_coordinator(info(1, 2), job_dir=tmp_path, timeout=5)
    assert coordinator.directory == launch / "000004"


def test_a_planted_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    job = tmp_path / "job"
    job.mkdir()
    (job / JOB_RENDEZVOUS_DIRNAME).symlink_to(elsewhere)
    with pytest.raises(RendezvousError) as caught:
        create_coordinator(info(0, 2), job_dir=job, timeout=5)
    assert (
        f"the rendezvous folder {job / JOB_RENDEZVOUS_DIRNAME} is a symbolic link, where "
        "this package makes a folder of its own; remove it"
    ) in str(caught.value)
    assert isinstance(caught.value, OSError)
    assert list(elsewhere.iterdir()) == []
