"""The store backend against an in-memory store with torch's c10d Store requests.

The ranks are threads sharing one store (torch is not installed here; the real
c10d store is exercised in tests/collector_torch/test_store_torch.py).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rankscribe.ranks import RankInfo, StoreCoordinator, create_coordinator
from rankscribe.ranks.errors import (
    BackendUnavailableError,
    BarrierTimeoutError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    RanksTypeError,
    RanksValueError,
    StoreError,
)
from tests._support.clocks import SleepingClock
from tests._support.launchers import clean_environment, run_bounded

REPOSITORY = Path(__file__).resolve().parents[2]


class MemoryStore:
    """torch's c10d Store requests, in memory; ``get`` of an absent key fails (torch blocks)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.lock = threading.Lock()
        self.requests: list[str] = []

    def set(self, key: str, value: bytes | str) -> None:
        with self.lock:
            self.requests.append("set")
            self.data[key] = value.encode() if isinstance(value, str) else bytes(value)

    def get(self, key: str) -> bytes:
        with self.lock:
            self.requests.append("get")
            if key not in self.data:
                raise AssertionError(f"get of {key!r}, which is not set, would block")
            return self.data[key]

    def check(self, keys: list[str]) -> bool:
        with self.lock:
            self.requests.append("check")
            return all(key in self.data for key in keys)

    def add(self, key: str, amount: int) -> int:
        with self.lock:
            self.requests.append("add")
            value = int(self.data.get(key, b"0")) + amount
            self.data[key] = str(value).encode()  # as torch keeps a counter
            return value

    def delete_key(self, key: str) -> bool:
        with self.lock:
            self.requests.append("delete_key")
            return self.data.pop(key, None) is not None


def info(rank: int, world_size: int) -> RankInfo:
    return RankInfo(rank, world_size, rank, world_size, "h", "torchrun")


def coordinators(store: Any, world_size: int, **kwargs: Any) -> list[StoreCoordinator]:
    return [
        StoreCoordinator(info(rank, world_size), store=store, namespace="test", **kwargs)
        for rank in range(world_size)
    ]


def on_ranks(
    ranks: list[StoreCoordinator], call: Callable[[StoreCoordinator], Any]
) -> dict[int, Any]:
    """Run ``call`` on every coordinator at once (a thread each); result or error by position."""
    results: dict[int, Any] = {}

    def run(index: int, coordinator: StoreCoordinator) -> None:
        try:
            results[index] = call(coordinator)
        except Exception as error:
            results[index] = error

    threads = [threading.Thread(target=run, args=pair) for pair in enumerate(ranks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    return results


def test_gather_bcast_and_barrier_over_three_ranks_leave_no_key() -> None:
    store = MemoryStore()
    ranks = coordinators(store, 3, timeout=10)

    def collectives(coordinator: StoreCoordinator) -> dict[str, Any]:
        gathered = coordinator.gather({"rank": coordinator.rank, "steps": [coordinator.rank] * 2})
        word = coordinator.bcast(f"hello from {coordinator.rank}", root=1)
        coordinator.barrier()
        last = coordinator.gather(coordinator.rank * 10, root=2)
        return {"gathered": gathered, "word": word, "last": last}

    results = on_ranks(ranks, collectives)
    root = results[0]["gathered"]
    assert root.is_root and root.complete
    assert root.values == {r: {"rank": r, "steps": [r, r]} for r in range(3)}
    assert results[1]["gathered"].values == {} and not results[1]["gathered"].is_root
    assert {result["word"] for result in results.values()} == {"hello from 1"}
    assert results[2]["last"].values == {0: 0, 1: 10, 2: 20}
    assert store.data == {}
    assert [c.backend for c in ranks] == ["store"] * 3


def test_a_rank_that_skips_the_gather_is_named_within_the_timeout(
    caplog: pytest.LogCaptureFixture, ranks_clock: SleepingClock
) -> None:
    store = MemoryStore()
    root, present, absent = coordinators(store, 3, timeout=10)
    present.gather("from 1", timeout=1)
    started = ranks_clock()
    with caplog.at_level(logging.WARNING, logger="rankscribe.ranks.backends._store"):
        result = root.gather("from 0", timeout=1.0)
    assert result.values == {0: "from 0", 1: "from 1"} and result.missing == (2,)
    # it waited the whole timeout for rank 2, and not a poll longer
    assert ranks_clock() - started == pytest.approx(1.0)
    assert (
        "gather #1: no object from rank(s) 2 within 1 s in the store under "
        "rankscribe/test/1/" in caplog.text
    )
    # The late rank never deletes a key the root might still read; it is the last one
    # out of the gather, so it deletes what is left (its own object and the counter).
    late = absent.gather("from 2", timeout=1)
    assert late.values == {} and late.missing == ()
    assert store.data == {}
    # The next gather is whole again: the late object did not leak into it.
    ranks_clock.release()  # three ranks in threads meet in real time
    results = on_ranks([root, present, absent], lambda c: c.gather(f"second {c.rank}"))
    assert results[0].values == {r: f"second {r}" for r in range(3)} and results[0].complete


def test_a_root_that_never_gathers_leaves_other_ranks_free(ranks_clock: SleepingClock) -> None:
    store = MemoryStore()
    _, other = coordinators(store, 2, timeout=10)
    started = ranks_clock()
    result = other.gather("mine", timeout=5)
    assert ranks_clock() == started  # a non-root rank never waits on a gather
    assert result.values == {} and not result.is_root


def test_barrier_names_the_absent_rank_on_every_present_rank() -> None:
    store = MemoryStore()
    ranks = coordinators(store, 3, timeout=10)
    results = on_ranks(ranks[:2], lambda c: c.barrier(timeout=0.5))
    for rank in (0, 1):
        error = results[rank]
        assert isinstance(error, BarrierTimeoutError) and isinstance(error, TimeoutError)
        assert error.missing == (2,)
        assert (
            "barrier #1 timed out after 0.5 s: no arrival in the store under "
            "rankscribe/test/1/ (missing ranks: 2)" in str(error)
        )


def test_bcast_whose_root_never_comes_times_out_naming_it() -> None:
    store = MemoryStore()
    _, other = coordinators(store, 2, timeout=10)
    with pytest.raises(CollectiveTimeoutError) as caught:
        other.bcast(None, timeout=0.2)
    assert caught.value.missing == (0,)
    assert "bcast #1 timed out after 0.2 s: root 0 set nothing under rankscribe/test/1/root" in str(
        caught.value
    )


def test_bcast_root_names_the_ranks_it_did_not_reach(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    root, _ = coordinators(store, 2, timeout=10)
    with caplog.at_level(logging.WARNING, logger="rankscribe.ranks.backends._store"):
        assert root.bcast("word", timeout=0.3) == "word"
    assert "bcast #1: rank(s) 1 did not take the object within 0.3 s" in caplog.text
    assert "rankscribe/test/1/root" in store.data  # still there for a late rank


def test_ranks_in_different_collectives_are_told() -> None:
    store = MemoryStore()
    ranks = coordinators(store, 2, timeout=10)
    results = on_ranks(
        ranks, lambda c: c.gather(1, timeout=2) if c.rank == 0 else c.barrier(timeout=2)
    )
    assert isinstance(results[0], CollectiveMismatchError)
    assert (
        "rank 0 is in gather #1 but rank 1 set 'barrier' there: every rank must call every "
        "collective in the same order" in str(results[0])
    )


def test_an_unreadable_object_counts_as_missing() -> None:
    store = MemoryStore()
    root, _ = coordinators(store, 2, timeout=10)
    store.set("rankscribe/test/1/rank_1", b"gather\nnot a pickle")
    result = root.gather("mine", timeout=1)
    assert result.values == {0: "mine"} and result.missing == (1,)


def test_a_failing_store_raises_a_store_error_naming_the_request() -> None:
    class GoneStore(MemoryStore):
        def set(self, key: str, value: bytes | str) -> None:
            raise RuntimeError("Connection reset by peer")

    _, other = coordinators(GoneStore(), 2, timeout=10)
    with pytest.raises(StoreError) as caught:
        other.gather("mine")
    assert isinstance(caught.value, RuntimeError)
    assert (
        "rank 1: the store refused set 'rankscribe/test/1/rank_1' (RuntimeError: "
        "Connection reset by peer)" in str(caught.value)
    )


def test_a_store_that_cannot_delete_keeps_the_keys(caplog: pytest.LogCaptureFixture) -> None:
    class KeepingStore(MemoryStore):
        def delete_key(self, key: str) -> bool:
            raise RuntimeError("deleteKey is not implemented")

    store = KeepingStore()
    ranks = coordinators(store, 2, timeout=10)
    with caplog.at_level(logging.INFO, logger="rankscribe.ranks.backends._store"):
        results = on_ranks(ranks, lambda c: (c.gather(c.rank), c.gather(c.rank + 1)))
    assert results[0][1].values == {0: 1, 1: 2}
    assert caplog.text.count("the store keeps this job's keys") == 1
    assert sorted(store.data) == [
        "rankscribe/test/1/out",
        "rankscribe/test/1/rank_1",
        "rankscribe/test/2/out",
        "rankscribe/test/2/rank_1",
    ]


def test_a_store_needs_the_requests_the_backend_makes() -> None:
    with pytest.raises(RanksTypeError) as caught:
        StoreCoordinator(info(0, 2), store=object())  # type: ignore[arg-type]
    assert (
        "store must offer set, get, check, add and delete_key (a torch c10d Store), got "
        "object without set" in str(caught.value)
    )
    with pytest.raises(RanksValueError, match="namespace must be a non-empty str, got ''"):
        StoreCoordinator(info(0, 2), store=MemoryStore(), namespace="")


# Two ranks' processes, played by one fresh interpreter: each rank's first and second
# coordinators, made in the same order (no coordinator made before, as in a job).
_NAMESPACES = """
import json
from rankscribe.ranks import RankInfo, StoreCoordinator
from tests.ranks.test_store import MemoryStore
store = MemoryStore()
made = [[StoreCoordinator(RankInfo(r, 2, r, 2, "h", "torchrun"), store=store) for r in range(2)]
        for _ in range(2)]
print(json.dumps([[c.namespace for c in pair] for pair in made]))
"""


def test_coordinators_made_in_the_same_order_share_keys_and_no_other() -> None:
    environment = clean_environment(TORCHELASTIC_RUN_ID="abc/1", TORCHELASTIC_RESTART_COUNT="2")
    finished = run_bounded(
        [sys.executable, "-c", _NAMESPACES],
        timeout=60,
        env=environment,
        cwd=REPOSITORY,
        stderr_apart=True,
    )
    first, second = json.loads(finished.stdout)
    assert first[0] == first[1] and first[0].startswith("rankscribe/torchrun.abc_1.2/")
    assert second[0] == second[1] != first[0]
    # Two coordinators' collectives in one store stay apart, each in its own key space.
    store = MemoryStore()
    ranks = [
        StoreCoordinator(info(r, 2), store=store, namespace=namespace.split("/", 1)[1])
        for namespace in (first[0], second[0])
        for r in range(2)
    ]
    results = on_ranks(ranks, lambda c: c.gather((c.namespace, c.rank), timeout=5))
    assert results[0].values == {r: (first[0], r) for r in range(2)}
    assert results[2].values == {r: (second[0], r) for r in range(2)}


def fake_distributed(
    rank: int, world_size: int, store: Any, initialized: bool = True
) -> types.ModuleType:
    """What this package reads of ``torch.distributed``, as a module in sys.modules."""
    module = types.ModuleType("torch.distributed")
    module.is_available = lambda: True  # type: ignore[attr-defined]
    module.is_initialized = lambda: initialized  # type: ignore[attr-defined]
    module.get_rank = lambda: rank  # type: ignore[attr-defined]
    module.get_world_size = lambda: world_size  # type: ignore[attr-defined]
    module.distributed_c10d = types.SimpleNamespace(  # type: ignore[attr-defined]
        _get_default_store=lambda: store
    )
    return module


def test_default_store_is_torch_distributed_default_group_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryStore()
    monkeypatch.setitem(
        __import__("sys").modules, "torch.distributed", fake_distributed(0, 1, store)
    )
    coordinator = StoreCoordinator(RankInfo(0, 1, 0, 1, "h", "torch"), namespace="t")
    coordinator.barrier(timeout=1)
    assert "add" in store.requests


def test_default_store_must_agree_with_the_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        __import__("sys").modules, "torch.distributed", fake_distributed(1, 4, MemoryStore())
    )
    with pytest.raises(RanksValueError) as caught:
        StoreCoordinator(info(0, 2))
    assert (
        "torch.distributed says rank 1 of 4 but info says rank 0 of 2 (launcher torchrun)"
        in str(caught.value)
    )


def test_store_backend_without_torch_says_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(__import__("sys").modules, "torch.distributed", raising=False)
    with pytest.raises(BackendUnavailableError) as caught:
        create_coordinator(info(0, 2), backend="store")
    assert (
        "the store backend needs torch.distributed's default process group: import torch "
        "and call torch.distributed.init_process_group first" in str(caught.value)
    )
    assert isinstance(caught.value, ImportError)


class BlockingStore(MemoryStore):
    """A store whose ``get`` of an absent key blocks until the store's own timeout (as c10d's),
    scripted to land a late rank's requests exactly between the root's check and its get."""

    def __init__(self, late_key: str, store_timeout: float) -> None:
        super().__init__()
        self.late_key = late_key
        self.store_timeout = store_timeout
        self.changed = threading.Condition(self.lock)
        self.late_set = threading.Event()
        self.release_late = threading.Event()
        self.late_thread: threading.Thread | None = None
        self.late_call: Callable[[], Any] = lambda: None
        self.absent_gets: list[str] = []  # gets that found no key: each would block (c10d)

    def set(self, key: str, value: bytes | str) -> None:
        super().set(key, value)
        with self.changed:
            self.changed.notify_all()
        if threading.current_thread() is self.late_thread and key == self.late_key:
            self.late_set.set()
            # The late rank's next request waits until the root checked its key.
            assert self.release_late.wait(10)

    def check(self, keys: list[str]) -> bool:
        if keys == [self.late_key] and self.late_thread is None:
            # The root looks at the late rank's key alone (its deadline passed): the late
            # rank arrives now and sets it.
            self.late_thread = threading.Thread(target=self.late_call, name="late")
            self.late_thread.start()
            assert self.late_set.wait(10)
        return super().check(keys)

    def get(self, key: str) -> bytes:
        if key == self.late_key and self.late_thread is not None:
            # Between the root's check and its get, the late rank does all it will do.
            self.release_late.set()
            self.late_thread.join(10)
        with self.changed:
            if key not in self.data:
                self.absent_gets.append(key)
            if not self.changed.wait_for(lambda: key in self.data, self.store_timeout):
                raise RuntimeError(f"Socket Timeout: wait for {key!r}")  # as c10d says
            self.requests.append("get")
            return self.data[key]


def test_a_late_rank_never_makes_the_roots_get_block_past_its_deadline() -> None:
    # Rank 2 never comes; rank 1 comes late, exactly while the root collects what arrived.
    store = BlockingStore("rankscribe/test/1/rank_1", store_timeout=5.0)
    root, late, _ = coordinators(store, 3, timeout=10)
    store.late_call = lambda: late.gather("late but here")
    result = root.gather("from 0", timeout=0.5)
    assert result.values == {0: "from 0", 1: "late but here"} and result.missing == (2,)
    # The root asked the store only for keys it holds: no get waited for the store's own
    # timeout (which would have ended in a StoreError).
    assert store.absent_gets == []
    assert store.late_thread is not None and not store.late_thread.is_alive()
    # The late rank deleted nothing; the root deleted what it read.
    assert "rankscribe/test/1/rank_1" not in store.data
