"""rankscribe.ranks under real ``mpiexec -n 2`` and ``-n 4`` (the ``mpi`` tox env).

Each test starts one MPI job running a scenario of mpi_scenarios.py, bounded
by JOB_TIMEOUT, and asserts on the exit code and on what every rank wrote.
The test ids carry the rank count (``[n=4]``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "mpi_scenarios.py"
#: No job may outlive this, whatever happens inside it.
JOB_TIMEOUT = 90.0
#: Seconds a collective that misses a rank may take past its timeout (polling, a busy machine).
SLACK = 2.0
MISSED_TIMEOUT = 3.0  # mpi_scenarios.MISSED_TIMEOUT
AMPLE_TIMEOUT = 30.0  # mpi_scenarios.AMPLE_TIMEOUT


RANK_COUNTS = [pytest.param(2, id="n=2"), pytest.param(4, id="n=4")]
#: The cases that wait out a timeout (seconds each on CI's 2 cores) run once, at 4 ranks:
#: rank 0 waits for one missing rank among several, which holds the 2-rank case too.
TIMEOUT_RANK_COUNTS = [pytest.param(4, id="n=4")]


@dataclass
class Job:
    returncode: int
    seconds: float
    output: str
    ranks: dict[int, dict[str, Any]]


def run_job(mpi: Any, scenario: str, ranks: int, tmp_path: Path) -> Job:
    """Run ``scenario`` on ``ranks`` ranks, bounded by JOB_TIMEOUT."""
    out = tmp_path / "out"
    out.mkdir()
    run = mpi.run(ranks, *mpi.python(SCENARIOS, scenario, out), cwd=tmp_path, timeout=JOB_TIMEOUT)
    records = {
        int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in out.glob("rank_*.json")
    }
    return Job(run.returncode, run.seconds, run.output, records)


def assert_clean(job: Job, ranks: int) -> None:
    assert job.returncode == 0, job.output
    assert sorted(job.ranks) == list(range(ranks)), job.output


@pytest.mark.parametrize("ranks", RANK_COUNTS)
def test_detect_rank_dir_and_split(mpi: Any, ranks: int, tmp_path: Path) -> None:
    job = run_job(mpi, "detect", ranks, tmp_path)
    assert_clean(job, ranks)
    for rank, record in job.ranks.items():
        info = record["info"]
        assert (info["rank"], info["world_size"]) == (rank, ranks)
        assert info["launcher"] == "pmi"  # MPICH's Hydra exports PMI_RANK / PMI_SIZE
        assert (info["local_rank"], info["local_size"]) == (rank, ranks)  # one host
        assert record["rank_dir"] == str(tmp_path / "out" / "summary" / f"rank_{rank}")
        assert record["rank_dir_mode"] == "0o700"
    shares = [job.ranks[rank]["steps"] for rank in range(ranks)]
    assert [step for share in shares for step in share] == list(range(0, 100, 3))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert f"rank 0 of {ranks}: detect done" in job.output
    # The MPI backend needs no folder: none was made in the job's directory.
    assert sorted(p.name for p in (tmp_path / "out" / "summary").iterdir()) == [
        f"rank_{rank}" for rank in range(ranks)
    ]


@pytest.mark.parametrize("ranks", RANK_COUNTS)
def test_gather_bcast_barrier_of_python_objects(mpi: Any, ranks: int, tmp_path: Path) -> None:
    job = run_job(mpi, "gather", ranks, tmp_path)
    assert_clean(job, ranks)
    root = job.ranks[0]
    assert root["is_root"] and root["missing"] == []
    assert sorted(root["values"], key=int) == [str(r) for r in range(ranks)]
    for rank in range(ranks):
        value = root["values"][str(rank)]
        assert value == {
            "rank": rank,
            "loss": 1.0 / (rank + 1),
            "tags": [f"t{rank}"],
            "shape": [rank, 2],
            "text": "é" * rank,
        }
    for rank in range(1, ranks):
        assert job.ranks[rank]["is_root"] is False
        assert job.ranks[rank]["values"] == {} and job.ranks[rank]["missing"] == []
    for rank in range(ranks):
        assert job.ranks[rank]["config"] == {"lr": 0.1, "seen": list(range(ranks))}
    last = job.ranks[ranks - 1]["last_root_values"]
    assert last == {str(r): r * 10 for r in range(ranks)}


@pytest.mark.parametrize("ranks", TIMEOUT_RANK_COUNTS)
def test_gather_names_the_rank_that_never_arrives(mpi: Any, ranks: int, tmp_path: Path) -> None:
    """With n=4: rank 3 never reaches the gather; rank 0 returns 0-2's objects at its timeout."""
    job = run_job(mpi, "gather_missing", ranks, tmp_path)
    assert_clean(job, ranks)
    root = job.ranks[0]
    present = list(range(ranks - 1))
    assert root["missing"] == [ranks - 1]
    assert root["values"] == {str(r): {"rank": r} for r in present}
    assert MISSED_TIMEOUT <= root["elapsed"] < MISSED_TIMEOUT + SLACK
    print(
        f"n={ranks}: rank 0's gather returned after {root['elapsed']:.3f} s "
        f"(timeout {MISSED_TIMEOUT} s), missing {root['missing']}"
    )
    assert job.ranks[ranks - 1] == {"rank": ranks - 1, "world_size": ranks, "skipped": True}


@pytest.mark.parametrize("ranks", TIMEOUT_RANK_COUNTS)
def test_barrier_times_out_on_every_rank_when_one_skips(
    mpi: Any, ranks: int, tmp_path: Path
) -> None:
    job = run_job(mpi, "barrier_skip", ranks, tmp_path)
    assert_clean(job, ranks)
    for rank in range(ranks - 1):
        record = job.ranks[rank]
        assert record["raised"] == "BarrierTimeoutError", record
        assert record["is_timeout_error"] is True
        assert record["missing"] == [ranks - 1], record
        assert f"missing ranks: {ranks - 1}" in record["message"]
        # rank 0 decides at its timeout; the others hear its verdict within the grace
        assert record["elapsed"] < MISSED_TIMEOUT + 1.0 + SLACK
    assert job.ranks[0]["elapsed"] >= MISSED_TIMEOUT


@pytest.mark.parametrize("ranks", TIMEOUT_RANK_COUNTS)
def test_late_rank_does_not_disturb_the_next_collectives(
    mpi: Any, ranks: int, tmp_path: Path
) -> None:
    job = run_job(mpi, "late_rank", ranks, tmp_path)
    assert_clean(job, ranks)
    root = job.ranks[0]
    assert root["first"]["missing"] == [ranks - 1]
    assert root["first"]["values"] == {str(r): f"first from {r}" for r in range(ranks - 1)}
    assert root["second"]["missing"] == []
    assert root["second"]["values"] == {str(r): f"second from {r}" for r in range(ranks)}
    assert {job.ranks[r]["word"] for r in range(ranks)} == {"second"}


@pytest.mark.parametrize("ranks", RANK_COUNTS)
def test_rank_that_exits_early_is_named_missing(mpi: Any, ranks: int, tmp_path: Path) -> None:
    job = run_job(mpi, "early_exit", ranks, tmp_path)
    assert_clean(job, ranks)
    root = job.ranks[0]
    assert root["missing"] == [ranks - 1]
    assert root["values"] == {str(r): r for r in range(ranks - 1)}
    assert root["elapsed"] < MISSED_TIMEOUT + SLACK
    assert job.ranks[ranks - 1]["exited_early"] is True


@pytest.mark.parametrize("ranks", RANK_COUNTS)
def test_rank_that_dies_ends_the_job_instead_of_hanging(
    mpi: Any, ranks: int, tmp_path: Path
) -> None:
    """os._exit without MPI_Finalize: Hydra kills the job; nobody waits for the gather timeout."""
    job = run_job(mpi, "crash", ranks, tmp_path)
    assert job.returncode != 0
    assert job.ranks[ranks - 1]["crashed"] is True
    assert job.seconds < AMPLE_TIMEOUT, job.output
    assert 0 not in job.ranks  # the root, waiting for the dead rank, was ended with the job


@pytest.mark.parametrize("ranks", RANK_COUNTS)
def test_failed_assertion_on_one_rank_aborts_every_rank(
    mpi: Any, ranks: int, tmp_path: Path
) -> None:
    """The harness's assertions are collective: rank 0 waiting in a gather is not left hanging.

    Rank 1 says in its file that it fails: MPICH's launcher, ending every rank at the
    abort, may drop the end of the traceback it was still forwarding (1 job in 30 here).
    """
    job = run_job(mpi, "fail", ranks, tmp_path)
    assert job.returncode != 0
    assert job.ranks[1]["failing"] == "rank 1 fails on purpose", job.output
    assert "survived" not in job.ranks[1]
    assert job.seconds < AMPLE_TIMEOUT, job.output
    assert 0 not in job.ranks  # the root, waiting in its gather, was ended with the job


@pytest.mark.parametrize("ranks", RANK_COUNTS)
def test_large_object_travels_in_chunks_under_the_count_limit(
    mpi: Any, ranks: int, tmp_path: Path
) -> None:
    job = run_job(mpi, "large", ranks, tmp_path)
    assert_clean(job, ranks)
    chunk = 1 << 20
    root = job.ranks[0]
    assert root["sizes"] == {str(r): 3 * chunk + 2 for r in range(ranks)}
    for record in job.ranks.values():
        assert record["max_count"] <= chunk < record["count_limit"]
    # 3 chunk-sizes + a few pickle bytes = 3 full chunks and a short one, as a 3 GiB object
    # would be 3 chunks of 1 GiB and a short one. The root receives 3 full chunks from
    # each other rank (gather) and sends 3 to each (bcast); the others send 3 and receive 3.
    assert root["full_chunks"] == 2 * 3 * (ranks - 1)
    for rank in range(1, ranks):
        assert job.ranks[rank]["full_chunks"] == 2 * 3
