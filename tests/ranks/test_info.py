"""detect(): every launcher's variables, their precedence, and clear errors for bad values."""

from __future__ import annotations

import socket
import sys
import types

import pytest

from rankscribe.ranks import RankInfo, RanksError, detect

# private: the launcher detection rule's internals (patched environment probes)
from rankscribe.ranks.errors import (
    RankEnvironmentError,
    RanksTypeError,
    RanksValueError,
)

HOST = socket.gethostname()

OPENMPI = {
    "OMPI_COMM_WORLD_RANK": "5",
    "OMPI_COMM_WORLD_SIZE": "8",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
}
HYDRA = {
    "PMI_RANK": "3",
    "PMI_SIZE": "4",
    "MPI_LOCALRANKID": "1",
    "MPI_LOCALNRANKS": "2",
    "PMI_FD": "9",
    "PMI_HOSTNAME": "vm",
}
TORCHRUN = {
    "RANK": "6",
    "WORLD_SIZE": "8",
    "LOCAL_RANK": "2",
    "LOCAL_WORLD_SIZE": "4",
    "TORCHELASTIC_RUN_ID": "none",
    "MASTER_ADDR": "127.0.0.1",
}
SLURM = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "7",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "2",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2),3",
    "SLURM_JOB_ID": "77",
}


@pytest.fixture(autouse=True)
def _no_mpi4py(monkeypatch: pytest.MonkeyPatch) -> None:
    """Detection must not see an mpi4py that the test process may have loaded."""
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        pytest.param(OPENMPI, RankInfo(5, 8, 1, 4, HOST, "openmpi"), id="openmpi"),
        pytest.param(HYDRA, RankInfo(3, 4, 1, 2, HOST, "pmi"), id="mpich-hydra"),
        pytest.param(
            {
                "PMI_RANK": "0",
                "PMI_SIZE": "2",
                "MPI_LOCALRANKID": "0",
                "MPI_LOCALNRANKS": "1",
                "I_MPI_ROOT": "/opt/intel/mpi",
            },
            RankInfo(0, 2, 0, 1, HOST, "pmi"),
            id="intel-mpi",
        ),
        pytest.param(
            {
                "PMIX_RANK": "4",
                "SLURM_NTASKS": "6",
                "SLURM_LOCALID": "1",
                "SLURM_NODEID": "1",
                "SLURM_TASKS_PER_NODE": "3(x2)",
                "PMIX_NAMESPACE": "x",
            },
            RankInfo(4, 6, 1, 3, HOST, "pmix"),
            id="pmix-under-srun",
        ),
        pytest.param(TORCHRUN, RankInfo(6, 8, 2, 4, HOST, "torchrun"), id="torchrun"),
        pytest.param(SLURM, RankInfo(5, 7, 0, 3, HOST, "slurm"), id="slurm"),
        pytest.param({}, RankInfo(0, 1, 0, 1, HOST, "single"), id="single"),
        pytest.param(
            {"RANK": "3"},
            RankInfo(0, 1, 0, 1, HOST, "single"),
            id="stray-RANK-alone-is-not-torchrun",
        ),
    ],
)
def test_each_launcher(environ: dict[str, str], expected: RankInfo) -> None:
    assert detect(environ) == expected


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*OPENMPI, *HYDRA, *TORCHRUN, *SLURM, "PMIX_RANK"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "2")
    assert detect() == RankInfo(1, 2, 1, 2, HOST, "pmi")


@pytest.mark.parametrize(
    ("environ", "launcher"),
    [
        pytest.param({**SLURM, **HYDRA}, "pmi", id="mpiexec-inside-slurm"),
        pytest.param({**SLURM, **TORCHRUN}, "torchrun", id="torchrun-inside-slurm"),
        pytest.param({**OPENMPI, "PMIX_RANK": "5"}, "openmpi", id="openmpi-5-also-sets-pmix"),
        pytest.param({**HYDRA, **TORCHRUN}, "pmi", id="mpi-before-torchrun"),
    ],
)
def test_inner_launcher_wins(environ: dict[str, str], launcher: str) -> None:
    assert detect(environ).launcher == launcher


def test_missing_local_variables_mean_one_node() -> None:
    info = detect({"PMI_RANK": "2", "PMI_SIZE": "3"})
    assert (info.local_rank, info.local_size) == (2, 3)
    slurm = detect({"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1"})
    assert (slurm.local_rank, slurm.local_size) == (1, 4)


@pytest.mark.parametrize(
    ("environ", "variable", "value", "expected"),
    [
        pytest.param(
            {"PMI_RANK": "two", "PMI_SIZE": "4"},
            "PMI_RANK",
            "two",
            "non-negative integer",
            id="non-numeric",
        ),
        pytest.param(
            {"OMPI_COMM_WORLD_RANK": "-1", "OMPI_COMM_WORLD_SIZE": "4"},
            "OMPI_COMM_WORLD_RANK",
            "-1",
            "non-negative integer",
            id="negative",
        ),
        pytest.param(
            {"PMI_RANK": "4", "PMI_SIZE": "4"},
            "PMI_RANK",
            "4",
            "below PMI_SIZE=4",
            id="rank-equals-size",
        ),
        pytest.param(
            {"RANK": "9", "WORLD_SIZE": "8"},
            "RANK",
            "9",
            "below WORLD_SIZE=8",
            id="rank-above-size",
        ),
        pytest.param(
            {"PMI_RANK": "0", "PMI_SIZE": "0"}, "PMI_SIZE", "0", "positive integer", id="zero-size"
        ),
        pytest.param({"PMI_RANK": "0"}, "PMI_SIZE", None, "positive integer", id="size-missing"),
        pytest.param(
            {"SLURM_PROCID": "1", "SLURM_NTASKS": "2.0"},
            "SLURM_NTASKS",
            "2.0",
            "positive integer",
            id="float-size",
        ),
        pytest.param(
            {"PMI_RANK": "٣", "PMI_SIZE": "4"},
            "PMI_RANK",
            "٣",
            "non-negative integer",
            id="non-ascii-digit",
        ),
        pytest.param(
            {**HYDRA, "MPI_LOCALRANKID": "2"},
            "MPI_LOCALRANKID",
            "2",
            "below MPI_LOCALNRANKS=2",
            id="local-rank-equals-local-size",
        ),
        pytest.param(
            {**OPENMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "9"},
            "OMPI_COMM_WORLD_LOCAL_SIZE",
            "9",
            "at most OMPI_COMM_WORLD_SIZE=8",
            id="local-size-above-size",
        ),
        pytest.param(
            {**TORCHRUN, "LOCAL_RANK": "x"},
            "LOCAL_RANK",
            "x",
            "non-negative integer",
            id="bad-local-rank",
        ),
        pytest.param(
            {**SLURM, "SLURM_STEP_TASKS_PER_NODE": "2(x"},
            "SLURM_STEP_TASKS_PER_NODE",
            "2(x",
            "a list like '2(x3),1'",
            id="bad-slurm-task-list",
        ),
        pytest.param(
            {**SLURM, "SLURM_NODEID": "3"},
            "SLURM_NODEID",
            "3",
            "below the number of nodes",
            id="slurm-node-beyond-list",
        ),
    ],
)
def test_malformed_or_contradictory_variables(
    environ: dict[str, str], variable: str, value: str | None, expected: str
) -> None:
    with pytest.raises(RankEnvironmentError) as caught:
        detect(environ)
    error = caught.value
    assert isinstance(error, ValueError) and isinstance(error, RanksError)
    assert (error.variable, error.value) == (variable, value)
    assert variable in str(error) and expected in str(error)
    if value is not None:
        assert repr(value) in str(error)


def test_pmix_without_size_asks_mpi(monkeypatch: pytest.MonkeyPatch) -> None:
    # mpi4py as the program would find it: a world of 6 in COMM_WORLD.
    world = types.SimpleNamespace(COMM_WORLD=types.SimpleNamespace(Get_size=lambda: 6))
    monkeypatch.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=world))
    assert detect({"PMIX_RANK": "2"}) == RankInfo(2, 6, 2, 6, HOST, "pmix")


def test_pmix_without_size_or_mpi_library_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A machine without mpi4py: importing it fails.
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    with pytest.raises(RankEnvironmentError, match=r"SLURM_NTASKS.*MPI library"):
        detect({"PMIX_RANK": "2"})


class _FakeComm:
    def Get_rank(self) -> int:
        return 2

    def Get_size(self) -> int:
        return 3


def _fake_mpi(initialized: bool, finalized: bool = False) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        Is_initialized=lambda: initialized, Is_finalized=lambda: finalized, COMM_WORLD=_FakeComm()
    )


def test_initialised_mpi4py_is_used_when_no_launcher_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", _fake_mpi(initialized=True))
    assert detect({}) == RankInfo(2, 3, 2, 3, HOST, "mpi")


@pytest.mark.parametrize(("initialized", "finalized"), [(False, False), (True, True)])
def test_mpi4py_not_in_use_is_ignored(
    monkeypatch: pytest.MonkeyPatch, initialized: bool, finalized: bool
) -> None:
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", _fake_mpi(initialized, finalized))
    assert detect({}).launcher == "single"


def test_rank_info_is_frozen_and_knows_single() -> None:
    info = detect({})
    assert info.is_single
    assert not detect(HYDRA).is_single
    with pytest.raises(AttributeError):
        info.rank = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ((4, 4, 0, 1), RanksValueError, "rank must be in range(world_size) = range(4), got 4"),
        ((0, 4, 2, 2), RanksValueError, "0 <= local_rank < local_size <= world_size"),
        ((0, 2, 0, 3), RanksValueError, "local_size=3, world_size=2"),
        ((0, True, 0, 1), RanksTypeError, "world_size must be an int >= 1, got True (bool)"),
        (("0", 1, 0, 1), RanksTypeError, "rank must be an int >= 0, got '0' (str)"),
    ],
)
def test_rank_info_checks_its_numbers(
    fields: tuple[object, ...], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        RankInfo(*fields, "h", "single")  # type: ignore[arg-type]
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("environ", "name"),
    [
        ({}, "job"),
        ({"SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "0"}, "slurm.1234.0"),
        ({"TORCHELASTIC_RUN_ID": "none", "TORCHELASTIC_RESTART_COUNT": "0"}, "torchrun.none.0"),
        # torchrun's default run id is "none" for every job: the port its ranks meet at is not.
        (
            {
                "TORCHELASTIC_RUN_ID": "none",
                "TORCHELASTIC_RESTART_COUNT": "0",
                "MASTER_ADDR": "10.0.0.1",
                "MASTER_PORT": "29500",
            },
            "torchrun.none.0.10.0.0.1.29500",
        ),
        ({"MASTER_ADDR": "localhost", "MASTER_PORT": "1234"}, "job.localhost.1234"),
        # The user's own id wins, and cannot climb out of the folder it names.
        ({"RANKSCRIBE_JOB_ID": "../../etc", "MASTER_PORT": "1"}, "id..._.._etc"),
    ],
)
def test_the_launch_name_tells_concurrent_launches_apart(
    environ: dict[str, str],
    name: str,
) -> None:
    from rankscribe.ranks.launchers import launch_name

    assert launch_name(environ) == name
