"""Who may write a rendezvous folder: another user's folder, a shared 0777 one, planted files.

The tests run as root; a second user is uid 65534 (nobody), set with os.chown.
"""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from rankscribe.ranks import FileCoordinator, RankInfo, create_coordinator
from rankscribe.ranks.errors import RendezvousError
from rankscribe.ranks.files import JOB_RENDEZVOUS_DIRNAME
from tests._support.launchers import drop_launcher_variables

OTHER_UID = 65534

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


def info(rank: int, world_size: int = 2) -> RankInfo:
    return RankInfo(rank, world_size, rank, world_size, socket.gethostname(), "torchrun")


@pytest.fixture(autouse=True)
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    drop_launcher_variables(monkeypatch)


class Planted:
    """What another user would plant: unpickling it creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


@needs_root
def test_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    os.chown(shared, OTHER_UID, OTHER_UID)
    with pytest.raises(RendezvousError) as caught:
        FileCoordinator(info(0), shared)
    message = str(caught.value)
    assert (
        f"rendezvous_dir {shared} belongs to uid {OTHER_UID}, not to this user (uid 0)" in message
    )
    assert "pass rendezvous_dir=<a new folder of your own>" in message
    assert isinstance(caught.value, OSError)
    assert list(shared.iterdir()) == []  # nothing written there


def test_a_folder_others_may_write_is_refused_and_its_planted_pickle_never_runs(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "scratch"
    shared.mkdir()
    shared.chmod(0o777)  # the usual shared scratch folder
    marker = tmp_path / "code-ran"
    planted = shared / "000001.gather"
    planted.mkdir()
    (planted / "rank_1.pickle").write_bytes(pickle.dumps(Planted(marker)))
    with pytest.raises(RendezvousError) as caught:
        create_coordinator(info(0), rendezvous_dir=shared, timeout=5)
    assert f"rendezvous_dir {shared} is writable by its group or by others (mode 0777)" in str(
        caught.value
    )
    assert f"run `chmod go-w {shared}` if it is yours" in str(caught.value)
    assert not marker.exists()


def test_a_hidden_job_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    hidden = tmp_path / JOB_RENDEZVOUS_DIRNAME
    hidden.mkdir()
    hidden.chmod(0o777)
    with pytest.raises(
        RendezvousError,
        match=r"the rendezvous folder .* is writable by its "
        r"group or by others \(mode 0777\)",
    ):
        create_coordinator(info(0), job_dir=tmp_path, timeout=5)


@pytest.mark.parametrize("name", ["rank_1.pickle", "rank_1.msg"])
def test_a_planted_message_in_an_own_folder_never_runs(
    tmp_path: Path,
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Whatever the file holds, it is decoded as data: the rank counts as missing.
    marker = tmp_path / "code-ran"
    coordinator = FileCoordinator(info(0), tmp_path / "rendezvous")
    folder = tmp_path / "rendezvous" / "000001.gather"
    folder.mkdir(mode=0o700)
    (folder / name).write_bytes(pickle.dumps(Planted(marker)))
    result = coordinator.gather("mine", timeout=0.5)
    assert result.values == {0: "mine"} and result.missing == (1,)
    assert not marker.exists()
    if name.endswith(".msg"):
        assert (
            "gather #1: rank 1 counts as missing: gather: the message from rank 1 is not "
            "one this package writes: not a rankscribe.ranks message" in caplog.text
        )


@needs_root
def test_a_message_file_of_another_user_is_not_read(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    coordinator = FileCoordinator(info(0), tmp_path / "rendezvous")
    folder = tmp_path / "rendezvous" / "000001.gather"
    folder.mkdir(mode=0o700)
    message = folder / "rank_1.msg"
    message.write_bytes(b"RSM1N")  # a valid message (None)
    os.chown(message, OTHER_UID, OTHER_UID)
    result = coordinator.gather("mine", timeout=0.5)
    assert result.missing == (1,)
    assert f"belongs to uid {OTHER_UID}, not to this user" in caplog.text


def test_lock_files_are_private_and_gone_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, int] = {}
    real_flock = fcntl.flock

    def flock(descriptor: int, operation: int) -> None:  # the mode of each file as it is locked
        real_flock(descriptor, operation)
        name = os.readlink(f"/proc/self/fd/{descriptor}")
        seen[os.path.basename(name)] = stat.S_IMODE(os.fstat(descriptor).st_mode)

    monkeypatch.setattr(fcntl, "flock", flock)
    old = os.umask(0o022)
    try:
        create_coordinator(info(0), job_dir=tmp_path, timeout=5)
    finally:
        os.umask(old)
    assert seen == {"generations.lock": 0o600, "members.json.lock": 0o600}
    launch = tmp_path / JOB_RENDEZVOUS_DIRNAME / "job"
    assert not list(launch.rglob("*.lock"))
    members = json.loads((launch / "000000" / "members.json").read_text())
    assert members["0"]["launch"] == "job"
