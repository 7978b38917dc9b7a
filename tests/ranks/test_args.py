"""Every public function of rankscribe.ranks checks its arguments up front, naming the argument."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rankscribe.ranks import (
    FileCoordinator,
    RankInfo,
    SingleCoordinator,
    StoreCoordinator,
    choose_backend,
    create_coordinator,
    detect,
    rank_dir,
    split_evenly,
)
from rankscribe.ranks.errors import RanksTypeError, RanksValueError

ALONE = RankInfo(0, 1, 0, 1, socket.gethostname(), "single")
TWO = RankInfo(0, 2, 0, 2, socket.gethostname(), "torchrun")
HUGE = 10**400  # no float holds it


class Store:
    def set(self, key: str, value: bytes) -> None: ...
    def get(self, key: str) -> bytes:
        return b""

    def check(self, keys: list[str]) -> bool:
        return False

    def add(self, key: str, amount: int) -> int:
        return 0

    def delete_key(self, key: str) -> bool:
        return False


CASES: list[tuple[str, Callable[[Path], Any], type[Exception], str]] = [
    (
        "world_size=0",
        lambda d: RankInfo(0, 0, 0, 1, "h", "single"),
        RanksValueError,
        "world_size must be an int >= 1, got 0",
    ),
    (
        "rank='x'",
        lambda d: RankInfo("x", 2, 0, 2, "h", "single"),  # type: ignore[arg-type]
        RanksTypeError,
        "rank must be an int >= 0, got 'x' (str)",
    ),
    (
        "rank=-1",
        lambda d: RankInfo(-1, 2, 0, 2, "h", "single"),
        RanksValueError,
        "rank must be an int >= 0, got -1",
    ),
    (
        "local_size=0",
        lambda d: RankInfo(0, 2, 0, 0, "h", "single"),
        RanksValueError,
        "local_size must be an int >= 1, got 0",
    ),
    (
        "launcher",
        lambda d: RankInfo(0, 1, 0, 1, "h", "nccl"),  # type: ignore[arg-type]
        RanksValueError,
        "launcher must be one of openmpi, pmi",
    ),
    (
        "environ=list",
        lambda d: detect(["RANK=1"]),  # type: ignore[arg-type]
        RanksTypeError,
        "environ must be a mapping of variable names to values, got list",
    ),
    (
        "split world_size=0",
        lambda d: split_evenly([1, 2], 0, 0),
        RanksValueError,
        "world_size must be an int >= 1, got 0",
    ),
    (
        "split rank='x'",
        lambda d: split_evenly([1, 2], 2, "x"),  # type: ignore[arg-type]
        RanksTypeError,
        "rank must be an int >= 0, got 'x' (str)",
    ),
    (
        "split items=5",
        lambda d: split_evenly(5, 2, 0),  # type: ignore[arg-type]
        RanksTypeError,
        "items must be an iterable",
    ),
    (
        "rank_dir NUL",
        lambda d: rank_dir(f"{d}/a\0b", ALONE),
        RanksValueError,
        "summary_dir must be a non-empty path without NUL characters",
    ),
    (
        "rank_dir ''",
        lambda d: rank_dir("", ALONE),
        RanksValueError,
        "summary_dir must be a non-empty path",
    ),
    (
        "timeout=inf",
        lambda d: create_coordinator(ALONE, timeout=float("inf")),
        RanksValueError,
        "timeout must be a finite number of seconds >= 0, got inf",
    ),
    (
        "timeout=nan",
        lambda d: create_coordinator(ALONE, timeout=float("nan")),
        RanksValueError,
        "timeout must be a finite number of seconds >= 0, got nan",
    ),
    (
        "timeout=-1",
        lambda d: SingleCoordinator(ALONE, timeout=-1),
        RanksValueError,
        "timeout must be a finite number of seconds >= 0, got -1",
    ),
    (
        "timeout=10**400",
        lambda d: SingleCoordinator(ALONE, timeout=HUGE),
        RanksValueError,
        "timeout must be a finite number of seconds >= 0",
    ),
    (
        "timeout='5'",
        lambda d: create_coordinator(ALONE, timeout="5"),  # type: ignore[arg-type]
        RanksTypeError,
        "timeout must be a finite number of seconds >= 0, got '5' (str)",
    ),
    (
        "gather timeout=inf",
        lambda d: SingleCoordinator(ALONE).gather(1, timeout=float("inf")),
        RanksValueError,
        "timeout must be a finite number of seconds >= 0, got inf",
    ),
    (
        "bcast root='0'",
        lambda d: SingleCoordinator(ALONE).bcast(1, root="0"),  # type: ignore[arg-type]
        RanksTypeError,
        "root must be an int, got '0' (str)",
    ),
    (
        "info=tuple",
        lambda d: create_coordinator((0, 1)),  # type: ignore[arg-type]
        RanksTypeError,
        "info must be a RankInfo (from detect()), got tuple",
    ),
    (
        "backend",
        lambda d: choose_backend(TWO, "gloo"),
        RanksValueError,
        "backend must be one of 'auto', 'mpi', 'store', 'file', 'single', got 'gloo' (str)",
    ),
    (
        "rendezvous_dir=5",
        lambda d: create_coordinator(TWO, rendezvous_dir=5),  # type: ignore[arg-type]
        RanksTypeError,
        "rendezvous_dir must be a path (a str or os.PathLike), got 5 (int)",
    ),
    (
        "job_dir NUL",
        lambda d: create_coordinator(TWO, job_dir="a\0"),
        RanksValueError,
        "job_dir must be a non-empty path without NUL characters",
    ),
    (
        "FileCoordinator dir=None",
        lambda d: FileCoordinator(TWO, None),  # type: ignore[arg-type]
        RanksTypeError,
        "rendezvous_dir must be a path (a str or os.PathLike), got None (NoneType)",
    ),
    (
        "store=object",
        lambda d: StoreCoordinator(TWO, store=object()),  # type: ignore[arg-type]
        RanksTypeError,
        "store must offer set, get, check, add and delete_key",
    ),
    (
        "namespace=''",
        lambda d: StoreCoordinator(TWO, store=Store(), namespace=""),
        RanksValueError,
        "namespace must be a non-empty str, got ''",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_a_bad_argument_is_named(
    tmp_path: Path,
    call: Callable[[Path], Any],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error) as caught:
        call(tmp_path)
    assert message in str(caught.value)
    # Each error is also the built-in it refines.
    assert isinstance(caught.value, ValueError if error is RanksValueError else TypeError)
    assert list(tmp_path.iterdir()) == []  # nothing was created
