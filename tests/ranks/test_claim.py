"""claim_job_dir: a job owns its directory before any rank writes; a second job goes elsewhere."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rankscribe.ranks import FileCoordinator, JobClaim, JobDirClaimedError, RankInfo, claim_job_dir
from rankscribe.ranks.errors import JobDirError, RanksTypeError, RanksValueError
from rankscribe.ranks.files import CLAIM_FILE_NAME, JOB_RENDEZVOUS_DIRNAME
from tests._support.launchers import (
    Launches,
    drop_launcher_variables,
    rank_environment,
)
from tests._support.second_user import as_second_user, why_not

WORKER = Path(__file__).resolve().parent / "file_worker.py"
PROCESS_TIMEOUT = 60


@pytest.fixture(autouse=True)
def alone(monkeypatch: pytest.MonkeyPatch) -> None:
    drop_launcher_variables(monkeypatch)


def claim_of(directory: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((directory / CLAIM_FILE_NAME).read_text())
    return result


def test_a_process_claims_a_new_directory_privately(tmp_path: Path) -> None:
    claim = claim_job_dir(tmp_path / "runs" / "exp1")
    assert claim == JobClaim(tmp_path / "runs" / "exp1", claim.job_id, appended=False)
    claim_file = claim.directory / CLAIM_FILE_NAME
    assert stat.S_IMODE(claim_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(claim.directory.stat().st_mode) == 0o700
    assert claim_of(claim.directory)["job_id"] == claim.job_id
    assert claim_of(claim.directory)["pid"] == os.getpid()


def test_a_second_job_gets_the_next_free_directory(tmp_path: Path) -> None:
    first = claim_job_dir(tmp_path / "exp1")
    second = claim_job_dir(tmp_path / "exp1")
    third = claim_job_dir(tmp_path / "exp1", on_exists="new")
    assert [first.directory.name, second.directory.name, third.directory.name] == [
        "exp1",
        "exp1-2",
        "exp1-3",
    ]
    assert len({first.job_id, second.job_id, third.job_id}) == 3


def test_a_directory_with_a_run_recorded_without_a_claim_is_taken(tmp_path: Path) -> None:
    rank = tmp_path / "exp1" / "rank_1"
    rank.mkdir(parents=True)
    (rank / "events.out.events.summary.1700000000.1.host_MS").write_bytes(b"")
    assert claim_job_dir(tmp_path / "exp1").directory == tmp_path / "exp1-2"
    # A directory with other files only (or the rendezvous folder) is free.
    (tmp_path / "exp2" / JOB_RENDEZVOUS_DIRNAME).mkdir(parents=True)
    (tmp_path / "exp2" / "notes.txt").write_text("mine")
    assert claim_job_dir(tmp_path / "exp2").directory == tmp_path / "exp2"


def test_on_exists_error_names_the_directory_and_the_job_holding_it(tmp_path: Path) -> None:
    first = claim_job_dir(tmp_path / "exp1")
    with pytest.raises(JobDirClaimedError) as caught:
        claim_job_dir(tmp_path / "exp1", on_exists="error")
    message = str(caught.value)
    assert f"{tmp_path / 'exp1'} belongs to job {first.job_id} (pid {os.getpid()} on " in message
    assert "on_exists='new'" in message
    assert isinstance(caught.value, FileExistsError)
    assert caught.value.claim["job_id"] == first.job_id
    assert not (tmp_path / "exp1-2").exists()


def test_on_exists_append_joins_with_the_claims_job_id(tmp_path: Path) -> None:
    first = claim_job_dir(tmp_path / "exp1")
    again = claim_job_dir(tmp_path / "exp1", on_exists="append")
    assert again == JobClaim(first.directory, first.job_id, appended=True)


def test_a_planted_link_at_the_claim_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    (tmp_path / "exp1").mkdir()
    (tmp_path / "exp1" / CLAIM_FILE_NAME).symlink_to(target)
    claim = claim_job_dir(tmp_path / "exp1")
    assert claim.directory == tmp_path / "exp1-2"
    assert target.read_text() == "untouched"


@pytest.mark.parametrize("on_exists", ["new", "append", "error"])
@pytest.mark.parametrize("how", ["fifo", "link to a fifo"])
def test_a_planted_fifo_at_the_claim_is_never_waited_on(
    tmp_path: Path, on_exists: Any, how: str
) -> None:
    (tmp_path / "exp1").mkdir()
    claim_file = tmp_path / "exp1" / CLAIM_FILE_NAME
    if how == "fifo":
        os.mkfifo(claim_file)
    else:
        os.mkfifo(tmp_path / "pipe")
        claim_file.symlink_to(tmp_path / "pipe")
    # Run aside: a claim that opened the FIFO would wait for a writer forever.
    outcome: list[object] = []

    def claim() -> None:
        try:
            outcome.append(claim_job_dir(tmp_path / "exp1", on_exists=on_exists))
        except JobDirError as error:
            outcome.append(error)

    worker = threading.Thread(target=claim, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "claim_job_dir waited on the planted FIFO"
    [result] = outcome
    if on_exists == "error":
        assert isinstance(result, JobDirClaimedError)
        assert result.claim == {}  # what a FIFO says: nothing
    elif on_exists == "append":
        # Joining means rewriting a claim nobody can read: never into a FIFO or a link.
        assert isinstance(result, JobDirError)
        assert (
            f"its claim file {claim_file} is not a claim this package writes"
            " (damaged, or not a regular file)" in str(result)
        )
    else:
        # Not a claim this package can read: the directory is another's, a new one is made.
        assert isinstance(result, JobClaim)
        assert result.directory == tmp_path / "exp1-2"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"summary_dir": 5},
            RanksTypeError,
            "summary_dir must be a path (a str or os.PathLike), got 5 (int)",
        ),
        (
            {"summary_dir": "a\0b"},
            RanksValueError,
            "summary_dir must be a non-empty path without NUL",
        ),
        (
            {"summary_dir": "x", "on_exists": "overwrite"},
            RanksValueError,
            "on_exists must be one of 'new', 'error', 'append', got 'overwrite' (str)",
        ),
        (
            {"summary_dir": "x", "coordinator": "mpi"},
            RanksTypeError,
            "coordinator must be a rankscribe.ranks Coordinator",
        ),
        (
            {"summary_dir": "x", "timeout": float("nan")},
            RanksValueError,
            "timeout must be a finite number of seconds >= 0, got nan",
        ),
    ],
)
def test_bad_arguments_are_named(
    tmp_path: Path,
    kwargs: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    os.chdir(tmp_path)
    with pytest.raises(error) as caught:
        claim_job_dir(**kwargs)
    assert message in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_job_of_several_ranks_needs_its_coordinator(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RanksValueError, match="coordinator must be given on a job of 2 ranks"):
        claim_job_dir(tmp_path / "exp1")


def info(rank: int, world_size: int) -> RankInfo:
    return RankInfo(rank, world_size, rank, world_size, socket.gethostname(), "torchrun")


def test_every_rank_gets_rank_0s_claim(tmp_path: Path) -> None:
    claim_job_dir(tmp_path / "exp1")  # an earlier job holds exp1
    coordinators = [FileCoordinator(info(rank, 3), tmp_path / "rendezvous") for rank in range(3)]
    results: dict[int, Any] = {}

    def run(coordinator: FileCoordinator) -> None:
        results[coordinator.rank] = claim_job_dir(
            tmp_path / "exp1", coordinator=coordinator, timeout=20
        )

    threads = [threading.Thread(target=run, args=(c,)) for c in coordinators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len({results[rank] for rank in range(3)}) == 1
    assert results[0].directory == tmp_path / "exp1-2"
    assert claim_of(tmp_path / "exp1-2")["world_size"] == 3


def test_on_exists_error_is_raised_on_every_rank(tmp_path: Path) -> None:
    claim_job_dir(tmp_path / "exp1")
    coordinators = [FileCoordinator(info(rank, 2), tmp_path / "rendezvous") for rank in range(2)]
    errors: dict[int, BaseException] = {}

    def run(coordinator: FileCoordinator) -> None:
        try:
            claim_job_dir(tmp_path / "exp1", coordinator=coordinator, on_exists="error")
        except JobDirClaimedError as error:
            errors[coordinator.rank] = error

    threads = [threading.Thread(target=run, args=(c,)) for c in coordinators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(errors) == [0, 1]
    assert str(errors[0]) == str(errors[1])


# -- two jobs started into one directory at once --------------------------------------------


def registered(job_dir: Path) -> int:
    total = 0
    for members in job_dir.glob(f"{JOB_RENDEZVOUS_DIRNAME}/*/*/members.json"):
        with contextlib.suppress(ValueError):  # being replaced
            total += len(json.loads(members.read_text()))
    return total


def test_two_jobs_started_into_one_directory_never_pair(tmp_path: Path) -> None:
    # Two torchrun launches with the default run id ("none"): what tells them apart is the
    # MASTER_PORT torchrun gives each job's ranks. They start interleaved, A0 B1 B0 A1,
    # which paired rank 0 of one job with rank 1 of the other when only the run id counted.
    job_dir, out = tmp_path / "runs" / "exp1", tmp_path / "out"
    out.mkdir()
    jobs = {"A": "29500", "B": "29501"}
    with Launches(PROCESS_TIMEOUT) as launches:
        for started, (job, rank) in enumerate([("A", 0), ("B", 1), ("B", 0), ("A", 1)]):
            env = rank_environment(
                rank,
                2,
                TORCHELASTIC_RUN_ID="none",
                TORCHELASTIC_RESTART_COUNT="0",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=jobs[job],
                JOB_TAG=job,
            )
            job_out = out / job
            job_out.mkdir(exist_ok=True)
            launches.start(
                [sys.executable, WORKER, "claim", job_dir, job_out, "30", "job"], env=env
            )
            deadline = time.monotonic() + PROCESS_TIMEOUT
            while registered(job_dir) <= started and time.monotonic() < deadline:
                time.sleep(0.02)
        for process in launches.wait(check=False):
            assert process.returncode == 0, process.output
    records = {
        (job, rank): json.loads((out / job / f"rank_{rank}.json").read_text())
        for job in jobs
        for rank in (0, 1)
    }
    for job in jobs:
        root, other = records[(job, 0)], records[(job, 1)]
        assert root["missing"] == []
        assert {value["job"] for value in root["values"].values()} == {job}
        assert (root["directory"], root["job_id"]) == (other["directory"], other["job_id"])
    directories = {records[(job, 0)]["directory"] for job in jobs}
    assert directories == {str(job_dir), str(job_dir.with_name("exp1-2"))}
    assert records[("A", 0)]["job_id"] != records[("B", 0)]["job_id"]


# -- two jobs claiming at the same moment, as real processes ----------------------------------

RACER = Path(__file__).resolve().parent / "claim_racer.py"
RACES = 80


def race(base: Path, on_exists: str) -> dict[str, dict[int, str]]:
    """Two processes claim the same ``RACES`` directories at once; each one's lines by race."""
    processes = {
        name: subprocess.Popen(
            [sys.executable, RACER, name, other, base, str(RACES), on_exists],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, other in (("a", "b"), ("b", "a"))
    }
    lines: dict[str, dict[int, str]] = {}
    for name, process in processes.items():
        output, _ = process.communicate(timeout=PROCESS_TIMEOUT * 2)
        assert process.returncode == 0, output
        lines[name] = {
            int(line.split(" ", 1)[0]): line.split(" ", 1)[1] for line in output.splitlines()
        }
        assert sorted(lines[name]) == list(range(RACES)), output
    return lines


@pytest.mark.parametrize("recorded_without_claim", [False, True])
def test_two_jobs_appending_at_once_agree_on_one_whole_claim(
    tmp_path: Path, recorded_without_claim: bool
) -> None:
    # With the claim created empty and written after, the second job read it empty and
    # wrote its own id (7 of 150 races), once leaving two ids' bytes in one file.
    for number in range(RACES):
        folder = tmp_path / f"race_{number}"
        folder.mkdir(mode=0o700)
        if recorded_without_claim:  # a run without a claim: both jobs claim it to append
            (folder / "events.out.events.summary.1700000000.0.host_MS").write_bytes(b"")
    lines = race(tmp_path, "append")
    for number in range(RACES):
        folder = tmp_path / f"race_{number}"
        claim = claim_of(folder)
        assert lines["a"][number] == lines["b"][number] == f"{folder} {claim['job_id']}"
        assert sorted(claim) == ["claimed_at", "host", "job_id", "pid", "world_size"]
        assert [entry.name for entry in folder.iterdir() if entry.name.startswith(".")] == [
            CLAIM_FILE_NAME
        ]


def test_two_jobs_starting_at_once_take_two_directories(tmp_path: Path) -> None:
    lines = race(tmp_path, "new")
    for number in range(RACES):
        folder = tmp_path / f"race_{number}"
        second = folder.with_name(f"{folder.name}-2")
        got = {lines["a"][number].split()[0], lines["b"][number].split()[0]}
        assert got == {str(folder), str(second)}
        assert {lines[name][number].split()[1] for name in "ab"} == {
            claim_of(folder)["job_id"],
            claim_of(second)["job_id"],
        }


@pytest.mark.parametrize("on_exists", ["new", "error", "append"])
def test_a_deeply_nested_claim_is_not_a_claim(tmp_path: Path, on_exists: str) -> None:
    # json.loads raised RecursionError from the claim (under mpiexec rank 0 died and the
    # other ranks waited for their collective timeout).
    folder = tmp_path / "exp1"
    folder.mkdir()
    (folder / CLAIM_FILE_NAME).write_text("[" * 50_000 + "]" * 50_000)
    if on_exists == "new":
        assert claim_job_dir(folder).directory == tmp_path / "exp1-2"
    elif on_exists == "error":
        with pytest.raises(JobDirClaimedError, match="belongs to a run recorded without a claim"):
            claim_job_dir(folder, on_exists="error")
    else:
        with pytest.raises(JobDirError, match=f"its claim file {folder / CLAIM_FILE_NAME} is not"):
            claim_job_dir(folder, on_exists="append")


def test_a_claim_being_written_is_waited_for_and_a_torn_old_one_is_not(tmp_path: Path) -> None:
    # A filesystem without hard links: the claim is created empty, then written.
    folder = tmp_path / "exp1"
    folder.mkdir()
    claim_file = folder / CLAIM_FILE_NAME
    claim_file.write_bytes(b"")
    content = json.dumps({"job_id": "0123abcd", "host": "h", "pid": 1, "world_size": 2})
    writer = threading.Timer(0.2, claim_file.write_text, args=(content,))
    writer.start()
    try:
        joined = claim_job_dir(folder, on_exists="append")
    finally:
        writer.join()
    assert joined == JobClaim(folder, "0123abcd", appended=True)
    # Torn long ago: refused at once, naming the file.
    other = tmp_path / "exp2"
    other.mkdir()
    (other / CLAIM_FILE_NAME).write_text(content[:20])
    os.utime(other / CLAIM_FILE_NAME, (time.time() - 3600, time.time() - 3600))
    with pytest.raises(JobDirError, match="is not a claim this package writes"):
        claim_job_dir(other, on_exists="append")


def test_without_hard_links_the_claim_is_made_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Some network and FUSE filesystems refuse link(): EPERM, or "not supported".
    def no_links(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    first = claim_job_dir(tmp_path / "exp1")
    assert claim_of(tmp_path / "exp1")["job_id"] == first.job_id
    assert claim_job_dir(tmp_path / "exp1").directory == tmp_path / "exp1-2"
    assert claim_job_dir(tmp_path / "exp1", on_exists="append").job_id == first.job_id
    assert sorted(path.name for path in (tmp_path / "exp1").iterdir()) == [CLAIM_FILE_NAME]


# A claim another user planted (docs/layout.md, "Files of another user"): as root (CI),
# another user's is one given to uid 65534 (nobody).
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to uid 65534 needs root")
THEIRS = "it belongs to uid 65534 (nobody), not to this user, uid 0 (root)"


def plant_claim(directory: Path, uid: int, **claim: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CLAIM_FILE_NAME
    path.write_text(json.dumps({"job_id": "forged", "host": "forged", "pid": 1, **claim}))
    path.chmod(0o644)
    os.chown(path, uid, uid)
    return path


@needs_root
def test_another_users_claim_is_passed_by_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    planted = plant_claim(tmp_path / "exp1", 65534)
    claim = claim_job_dir(tmp_path / "exp1")
    assert claim.directory == tmp_path / "exp1-2" and claim.job_id != "forged"
    assert [record.getMessage() for record in caplog.records] == [
        f"{planted}: {THEIRS}; the job goes to the next free directory"
    ]


@needs_root
def test_another_users_claim_is_neither_believed_nor_joined(tmp_path: Path) -> None:
    planted = plant_claim(tmp_path / "exp1", 65534)
    with pytest.raises(JobDirClaimedError) as caught:
        claim_job_dir(tmp_path / "exp1", on_exists="error")
    assert str(caught.value).startswith(
        f"{tmp_path / 'exp1'} belongs to another user's job (its claim file: {THEIRS}): "
    )
    assert caught.value.claim == {}  # nothing of what it says
    with pytest.raises(JobDirError) as refused:
        claim_job_dir(tmp_path / "exp1", on_exists="append")  # joined the job "forged"
    assert str(refused.value) == (
        f"the job directory {tmp_path / 'exp1'} cannot be claimed: its claim file {planted} "
        f"is not this user's ({THEIRS}): a job of another user, which this one does not join"
    )


APPEND = """
import sys
from rankscribe.ranks import claim_job_dir
from rankscribe.ranks.errors import JobDirError
try:
    claim_job_dir(sys.argv[1], on_exists="append")
except JobDirError as error:
    print(error)
"""


@needs_root
def test_as_a_second_user_roots_claim_is_not_joined() -> None:
    reason = why_not("-c", "import rankscribe.ranks", env="ranks")
    if reason is not None:
        pytest.skip(reason)
    shared = Path(tempfile.mkdtemp(prefix="rankscribe-shared-"))
    try:
        shared.chmod(0o755)
        job = shared / "exp1"
        job.mkdir()
        os.chown(job, 65534, 65534)  # the second user's directory, where root planted a claim
        planted = plant_claim(job, 0)
        result = as_second_user("-c", APPEND, job, timeout=PROCESS_TIMEOUT)
        assert result.returncode == 0, result.stderr
        roots = "it belongs to uid 0 (root), not to this user, uid 65534 (nobody)"
        assert result.stdout.strip() == (
            f"the job directory {job} cannot be claimed: its claim file {planted} is not this "
            f"user's ({roots}): a job of another user, which this one does not join"
        )
        # Root's own claim, when root runs it: joined.
        assert claim_job_dir(job, on_exists="append").job_id == "forged"
    finally:
        shutil.rmtree(shared)
