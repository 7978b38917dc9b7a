"""The single-process backend, backend selection and the checks every collective shares."""

from __future__ import annotations

import os
import sys
import threading
import types
from pathlib import Path

import pytest

from rankscribe.ranks import (
    DEFAULT_TIMEOUT,
    Coordinator,
    FileCoordinator,
    GatherResult,
    RankInfo,
    SingleCoordinator,
    StoreCoordinator,
    choose_backend,
    create_coordinator,
    detect,
)
from rankscribe.ranks.errors import (
    BackendUnavailableError,
    CoordinatorClosedError,
    RanksTypeError,
    RanksValueError,
)
from rankscribe.ranks.files import JOB_RENDEZVOUS_DIRNAME

ALONE = RankInfo(0, 1, 0, 1, "h", "single")


def test_single_process_collectives_return_at_once_without_copies() -> None:
    coordinator = create_coordinator(ALONE)
    assert isinstance(coordinator, SingleCoordinator) and coordinator.backend == "single"
    payload = {"loss": [0.5]}
    result = coordinator.gather(payload, timeout=0)
    assert result == GatherResult(root=0, rank=0, world_size=1, values={0: payload}, missing=())
    assert result.values[0] is payload
    assert result.is_root and result.complete and result.in_rank_order() == [payload]
    assert coordinator.bcast(payload) is payload
    assert coordinator.barrier(timeout=0) is None


def test_single_coordinator_defaults_to_this_process() -> None:
    coordinator = SingleCoordinator()
    assert (coordinator.rank, coordinator.world_size) == (0, 1)
    assert coordinator.timeout == DEFAULT_TIMEOUT
    assert repr(coordinator) == "SingleCoordinator(rank=0, world_size=1, timeout=600)"


def test_gather_result_on_a_rank_other_than_the_root_is_empty() -> None:
    result: GatherResult[int] = GatherResult(root=0, rank=2, world_size=4)
    assert not result.is_root and not result.complete
    assert result.values == {} and result.missing == () and result.in_rank_order() == []


def test_gather_result_orders_by_rank_and_skips_missing() -> None:
    result = GatherResult(
        root=0, rank=0, world_size=4, values={2: "c", 0: "a", 1: "b"}, missing=(3,)
    )
    assert result.in_rank_order() == ["a", "b", "c"]
    assert not result.complete


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda c: c.gather(1, root=1),
            RanksValueError,
            "root must be in range(world_size) = range(1), got 1",
        ),
        (lambda c: c.bcast(1, root=-1), RanksValueError, "got -1"),
        (lambda c: c.gather(1, root=True), RanksTypeError, "root must be an int, got True (bool)"),
        (
            lambda c: c.gather(1, timeout=-1),
            RanksValueError,
            "timeout must be a finite number of seconds >= 0, got -1",
        ),
        (lambda c: c.barrier(timeout=float("inf")), RanksValueError, "got inf"),
        (lambda c: c.barrier(timeout=float("nan")), RanksValueError, "got nan"),
        (
            lambda c: c.bcast(1, timeout="5"),
            RanksTypeError,
            "timeout must be a finite number of seconds >= 0, got '5' (str)",
        ),
    ],
)
def test_collective_arguments_are_checked(call, error: type[Exception], message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error) as caught:
        call(SingleCoordinator(ALONE))
    assert message in str(caught.value)


def test_bad_default_timeout_and_info() -> None:
    with pytest.raises(RanksValueError, match="timeout must be a finite number"):
        SingleCoordinator(ALONE, timeout=-0.5)
    with pytest.raises(RanksTypeError, match="info must be a RankInfo"):
        SingleCoordinator("rank 0")  # type: ignore[arg-type]


def test_closed_coordinator_refuses_collectives() -> None:
    with SingleCoordinator(ALONE) as coordinator:
        coordinator.barrier()
    with pytest.raises(CoordinatorClosedError, match="gather called on a closed SingleCoordinator"):
        coordinator.gather(1)
    assert isinstance(CoordinatorClosedError("x"), RuntimeError)
    coordinator.close()  # idempotent


@pytest.mark.parametrize(
    ("info", "backend", "with_dir", "chosen"),
    [
        (ALONE, "auto", False, SingleCoordinator),
        (ALONE, "auto", True, SingleCoordinator),
        (RankInfo(0, 2, 0, 2, "h", "torchrun"), "auto", True, FileCoordinator),
        (RankInfo(1, 2, 1, 2, "h", "slurm"), "auto", True, FileCoordinator),
        (ALONE, "file", True, FileCoordinator),
    ],
)
def test_create_picks_a_backend(
    tmp_path: Path, info: RankInfo, backend: str, with_dir: bool, chosen: type[Coordinator]
) -> None:
    directory = tmp_path / "rendezvous" if with_dir else None
    coordinator = create_coordinator(
        info,
        backend=backend,
        rendezvous_dir=directory,  # type: ignore[arg-type]
        timeout=5,
    )
    assert type(coordinator) is chosen
    assert coordinator.timeout == 5.0


@pytest.mark.parametrize(
    ("info", "backend", "message"),
    [
        (
            RankInfo(0, 2, 0, 2, "h", "torchrun"),
            "auto",
            "was not started by an MPI launcher: pass rendezvous_dir=",
        ),
        (RankInfo(0, 2, 0, 2, "h", "pmi"), "single", "backend='single' needs a world of one"),
        (RankInfo(0, 2, 0, 2, "h", "torchrun"), "file", "backend='file' needs rendezvous_dir"),
        (
            ALONE,
            "nccl",
            "backend must be one of 'auto', 'mpi', 'store', 'file', 'single', got 'nccl' (str)",
        ),
    ],
)
def test_create_refuses_what_cannot_work(info: RankInfo, backend: str, message: str) -> None:
    with pytest.raises(RanksValueError) as caught:
        create_coordinator(info, backend=backend)  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_create_under_an_mpi_launcher_without_mpi(monkeypatch: pytest.MonkeyPatch) -> None:
    # A machine without mpi4py: importing it fails.
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    with pytest.raises(BackendUnavailableError, match="needs mpi4py"):
        create_coordinator(RankInfo(0, 4, 0, 4, "h", "openmpi"))


def test_an_object_that_is_not_data_names_the_rank_and_where_it_sits(tmp_path: Path) -> None:
    # Objects travel as data, never pickled: a lock (or any class instance) is refused.
    info = RankInfo(1, 2, 1, 2, "h", "torchrun")
    coordinator = FileCoordinator(info, tmp_path)
    with pytest.raises(RanksTypeError) as caught:
        coordinator.gather({"steps": [1, threading.Lock()]})
    assert (
        "gather: on rank 1, the object['steps'][1] cannot be sent to another rank: lock is not data"
    ) in str(caught.value)
    assert isinstance(caught.value, TypeError)


# -- choosing a backend: launcher variables, an initialised torch, the job's folder -------

TORCHRUN_RANK_1 = {
    "RANK": "1",
    "WORLD_SIZE": "2",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "TORCHELASTIC_RUN_ID": "none",
    "TORCHELASTIC_RESTART_COUNT": "0",
}
SLURM_RANK_0 = {
    "SLURM_PROCID": "0",
    "SLURM_NTASKS": "2",
    "SLURM_LOCALID": "0",
    "SLURM_JOB_ID": "4711",
    "SLURM_STEP_ID": "0",
}
HYDRA_RANK_0 = {"PMI_RANK": "0", "PMI_SIZE": "2"}


class UnusedStore:
    """The requests a store offers; these tests never make one (test_store.py does)."""

    def set(self, key: str, value: bytes) -> None:
        raise AssertionError("not used")

    get = check = add = delete_key = set


def torch_initialised(monkeypatch: pytest.MonkeyPatch, rank: int, world_size: int) -> None:
    """Make ``torch.distributed`` look imported and initialised (torch is not installed here)."""
    module = types.ModuleType("torch.distributed")
    module.is_available = lambda: True  # type: ignore[attr-defined]
    module.is_initialized = lambda: True  # type: ignore[attr-defined]
    module.get_rank = lambda: rank  # type: ignore[attr-defined]
    module.get_world_size = lambda: world_size  # type: ignore[attr-defined]
    module.distributed_c10d = types.SimpleNamespace(  # type: ignore[attr-defined]
        _get_default_store=UnusedStore
    )
    monkeypatch.setitem(sys.modules, "torch.distributed", module)


@pytest.mark.parametrize(
    ("environ", "torch", "with_rendezvous", "chosen"),
    [
        ({}, False, False, "single"),
        (HYDRA_RANK_0, True, False, "mpi"),  # an MPI launcher wins over torch
        (TORCHRUN_RANK_1, True, False, "store"),
        (TORCHRUN_RANK_1, True, True, "file"),  # an explicit rendezvous_dir wins over torch
        (TORCHRUN_RANK_1, False, False, "file"),  # the job's hidden folder
        (SLURM_RANK_0, False, False, "file"),
    ],
)
def test_auto_choice_from_the_launcher_and_torch(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    environ: dict[str, str],
    torch: bool,
    with_rendezvous: bool,
    chosen: str,
) -> None:
    info = detect(environ)
    if torch:
        torch_initialised(monkeypatch, info.rank, info.world_size)
    else:
        monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    rendezvous = tmp_path / "rendezvous" if with_rendezvous else None
    assert choose_backend(info, "auto", rendezvous, job_dir=tmp_path / "job") == chosen


def test_torch_process_group_without_launcher_variables_is_detected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch_initialised(monkeypatch, 1, 3)
    info = detect({})
    assert (info.rank, info.world_size, info.launcher) == (1, 3, "torch")
    coordinator = create_coordinator(info, timeout=5)
    assert isinstance(coordinator, StoreCoordinator) and coordinator.backend == "store"


def test_torch_imported_but_not_initialised_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("torch.distributed")
    module.is_available = lambda: True  # type: ignore[attr-defined]
    module.is_initialized = lambda: False  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.distributed", module)
    assert detect({}).launcher == "single"
    assert choose_backend(detect(TORCHRUN_RANK_1), job_dir="job") == "file"


def test_torchrun_without_torch_meets_in_the_job_folder(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    monkeypatch.setattr(os, "environ", {**os.environ, **TORCHRUN_RANK_1})
    coordinator = create_coordinator(detect(), job_dir=tmp_path, timeout=5)
    assert isinstance(coordinator, FileCoordinator)
    assert coordinator.directory == tmp_path / JOB_RENDEZVOUS_DIRNAME / "torchrun.none.0" / "000000"


def test_without_any_way_to_meet_the_error_names_every_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    with pytest.raises(RanksValueError) as caught:
        create_coordinator(detect(SLURM_RANK_0))
    message = str(caught.value)
    assert (
        "this job (2 ranks, launcher slurm) was not started by an MPI launcher: pass "
        "rendezvous_dir=<a folder every rank sees, used by this job only> (or "
        "job_dir=<the job's directory>) for the file backend, initialise "
        "torch.distributed's process group first for the store backend" in message
    )
