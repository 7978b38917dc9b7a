"""The job view's tree (rankscribe.ranks tree channels) and the collector's live-view option.

docs/job-view.md, "Tree": rank r's parent is (r - 1) // fan_in, so rank 0
hears from at most fan_in ranks; each backend moves bytes (never pickles) up
one level per hop; a child that does not deliver is absent at the deadline,
and its messages still come in order later. "Live": job_view_interval (and
RANKSCRIBE_JOB_VIEW_INTERVAL) is checked with an error naming it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import SummaryCollector
from rankscribe.collector.errors import CollectorValueError
from rankscribe.jobview import JobStatistics, RankSeries
from rankscribe.jobview.protocol import JobPartial
from rankscribe.ranks import FileCoordinator, RankInfo, StoreCoordinator
from rankscribe.ranks.errors import RanksValueError
from rankscribe.ranks.testing import MemoryTreeChannel, MemoryTreeHub, wait_clock
from rankscribe.ranks.tree import REORDER_WINDOW, tree_channel

WORLD = 20


class MemoryStore:
    """torch's c10d Store requests in memory; ``get`` of an absent key would block in torch."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.deleted: list[str] = []
        self.lock = threading.Lock()

    def set(self, key: str, value: bytes) -> None:
        with self.lock:
            self.data[key] = bytes(value)

    def get(self, key: str) -> bytes:
        with self.lock:
            if key not in self.data:
                raise AssertionError(f"get of {key!r}, which is not set, would block")
            return self.data[key]

    def check(self, keys: list[str]) -> bool:
        with self.lock:
            return all(key in self.data for key in keys)

    def add(self, key: str, amount: int) -> int:
        raise AssertionError("the tree never counts")

    def delete_key(self, key: str) -> bool:
        with self.lock:
            self.deleted.append(key)
            return self.data.pop(key, None) is not None


def info(rank: int, world_size: int = WORLD) -> RankInfo:
    return RankInfo(rank, world_size, rank, world_size, "h", "torchrun")


def points(rank: int) -> dict[str, list[tuple[int, float]]]:
    return {"loss": [(step, float(rank * 100 + step)) for step in range(1, 31)]}


def reduce_up(
    channels: list[Any],
    round_number: int,
    *,
    dead: frozenset[int] = frozenset(),
    timeout: float = 2.0,
) -> tuple[JobPartial, dict[int, int]]:
    """Every rank, deepest first: its points plus its children's, to its parent."""
    received: dict[int, int] = {}
    root = JobPartial()
    for channel in reversed(channels):
        if channel.rank in dead:
            continue
        partial = JobPartial.of_rank(channel.rank, points(channel.rank))
        messages = channel.receive(round_number, timeout) if channel.children else {}
        received[channel.rank] = sum(len(items) for items in messages.values())
        for items in messages.values():
            for _, payload in items:
                partial.merge(JobPartial.from_bytes(payload))
        if channel.parent is None:
            root = partial
        else:
            assert channel.send(round_number, partial.to_bytes(), timeout)
    return root, received


def test_rank0_hears_from_fan_in_ranks_and_gets_every_rank_merged() -> None:
    hub = MemoryTreeHub()
    channels = [MemoryTreeChannel(hub, rank, WORLD, fan_in=3) for rank in range(WORLD)]
    assert channels[0].children == [1, 2, 3]
    assert channels[5].parent == 1 and channels[19].parent == 6
    assert list(channels[1].subtree(1)) == [(1, 1), (4, 6), (13, 19)]
    root, received = reduce_up(channels, 1)
    assert received[0] == 3  # a bounded number of messages, whatever the world size
    whole = JobStatistics()
    for rank in range(WORLD):
        whole.add(RankSeries(rank, points(rank)))
    assert root.ranks == list(range(WORLD))
    np.testing.assert_allclose(root.tags["loss"].mean, whole.tags["loss"].mean)
    np.testing.assert_array_equal(root.tags["loss"].max_rank, whole.tags["loss"].max_rank)


def test_a_dead_subtree_is_absent_at_the_deadline_and_the_rest_arrives() -> None:
    hub = MemoryTreeHub()
    channels = [MemoryTreeChannel(hub, rank, WORLD, fan_in=3) for rank in range(WORLD)]
    started = time.monotonic()
    root, _ = reduce_up(channels, 1, dead=frozenset({2}), timeout=0.3)
    assert time.monotonic() - started < 5.0
    subtree = {rank for first, last in channels[0].subtree(2) for rank in range(first, last + 1)}
    assert subtree == {2, 7, 8, 9}
    # Rank 2 is dead; its children's messages wait for it, never reaching rank 0.
    assert set(root.ranks) == set(range(WORLD)) - subtree


def test_the_store_tree_uses_keys_per_level_and_only_the_parent_deletes() -> None:
    store = MemoryStore()
    coordinators = [
        StoreCoordinator(info(rank, 5), store=store, namespace="job-7") for rank in range(5)
    ]
    channels = [tree_channel(coordinator, fan_in=2) for coordinator in coordinators]
    assert channels[1] is not None and channels[2] is not None
    assert channels[1].send(1, b"from one", 1.0)
    assert channels[3] is not None and channels[3].send(1, b"from three", 1.0)
    assert "rankscribe/job-7/tree/1/1/1" in store.data  # namespace, level, rank, message
    assert "rankscribe/job-7/tree/2/3/1" in store.data
    assert channels[0] is not None
    got = channels[0].receive(1, 0.2)  # rank 2 is late
    assert got == {1: [(1, b"from one")]}
    assert store.deleted == ["rankscribe/job-7/tree/1/1/1"]
    assert channels[2].send(1, b"late", 1.0) and channels[2].send(2, b"next", 1.0)
    assert channels[0].receive(2, 1.0) == {2: [(1, b"late"), (2, b"next")]}
    assert not any(key.startswith("rankscribe/job-7/tree/1/") for key in store.data)


def test_the_file_tree_writes_private_files_that_the_parent_removes(tmp_path: Path) -> None:
    folder = tmp_path / "rendezvous"
    coordinators = [FileCoordinator(info(rank, 3), folder, timeout=5) for rank in range(3)]
    channels = [tree_channel(coordinator) for coordinator in coordinators]
    assert channels[2] is not None and channels[2].send(1, b"\x00payload", 1.0)
    message = folder / "tree" / "1" / "2.1"
    assert message.stat().st_mode & 0o777 == 0o600
    assert channels[0] is not None
    assert channels[0].receive(1, 0.2) == {2: [(1, b"\x00payload")]}
    assert not message.exists()


@pytest.mark.parametrize(("prompt", "latest"), [(True, 0.002), (False, 0.02)])
def test_a_prompt_round_takes_a_late_message_within_2_ms(prompt: bool, latest: float) -> None:
    """The last round (the training thread waits) polls at most 2 ms apart; the background
    rounds up to 20 ms apart. The child's message arrives 37 ms into the wait (an injected
    clock: no real time passes)."""
    hub = MemoryTreeHub()
    parent, child = (MemoryTreeChannel(hub, rank, 2) for rank in range(2))
    now = [0.0]
    arrival = 0.037

    def sleep(seconds: float) -> None:
        before = now[0]
        now[0] += seconds
        if before < arrival <= now[0]:
            assert child.send(1, b"last", 1.0)

    with wait_clock(lambda: now[0], sleep):
        assert parent.receive(1, 5.0, prompt=prompt) == {1: [(1, b"last")]}
    assert arrival <= now[0] <= arrival + latest
    if not prompt:
        assert now[0] > arrival + 0.002  # the background poll had backed off past 2 ms


def test_a_foreign_message_is_ignored() -> None:
    hub = MemoryTreeHub()
    parent, child = (MemoryTreeChannel(hub, rank, 2) for rank in range(2))
    hub.boxes[1].append(b"not a tree message at all")
    assert child.send(1, b"real", 1.0)
    assert parent.receive(1, 1.0) == {1: [(1, b"real")]}


def test_a_duplicated_replayed_or_reordered_message_is_taken_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The transport delivers rank 1's messages 1, 1 again, 3, 2, 1 again, 4: the parent takes
    1, 3, 2, 4 (each once, in the order they came) and warns of each repeat; a replay in a
    later round is ignored too. Before, every copy was taken (and merged: counts doubled)."""
    hub = MemoryTreeHub()
    parent, child = (MemoryTreeChannel(hub, rank, 2) for rank in range(2))
    for number in range(1, 5):
        assert child.send(number, f"round {number}".encode(), 1.0)
    sent = list(hub.boxes[1])
    hub.boxes[1].clear()
    hub.boxes[1].extend([sent[0], sent[0], sent[2], sent[1], sent[0], sent[3]])
    with caplog.at_level(logging.WARNING):
        got = parent.receive(4, 1.0)
        assert got == {1: [(1, b"round 1"), (3, b"round 3"), (2, b"round 2"), (4, b"round 4")]}
        hub.boxes[1].extend([sent[2], sent[3]])
        assert child.send(5, b"round 5", 1.0)
        assert parent.receive(5, 1.0) == {1: [(5, b"round 5")]}
    repeats = [
        r.getMessage() for r in caplog.records if "is ignored: it arrived before" in r.getMessage()
    ]
    said = "tree: message {} of rank 1 (round {}) is ignored: it arrived before (or after 1024 "
    assert repeats == [f"{said.format(n, n)}later ones)" for n in (1, 1, 3, 4)]


def test_a_lost_message_holds_no_memory_and_a_forged_number_blocks_nothing() -> None:
    """A message that never comes counts as lost once REORDER_WINDOW later ones came (the
    parent's memory per child stays bounded); a far-off number does not make the next real
    messages look old."""
    hub = MemoryTreeHub()
    parent, child = (MemoryTreeChannel(hub, rank, 2) for rank in range(2))
    assert child.send(1, b"lost", 1.0)
    lost = hub.boxes[1].popleft()
    for number in range(2, REORDER_WINDOW + 3):
        assert child.send(number, b"x", 1.0)
    got = parent.receive(REORDER_WINDOW + 2, 1.0)
    assert [number for number, _ in got[1]] == list(range(2, REORDER_WINDOW + 3))
    hub.boxes[1].append(lost)  # too late: counted lost, not taken now
    assert parent.receive(0, 0.05) == {}
    forged = bytearray(lost)
    forged[4:12] = (2**64 - 1).to_bytes(8, "little")  # the sequence number: the largest
    hub.boxes[1].append(bytes(forged))
    assert child.send(REORDER_WINDOW + 3, b"next", 1.0)
    got = parent.receive(REORDER_WINDOW + 3, 1.0)
    assert got == {1: [(1, b"lost"), (REORDER_WINDOW + 3, b"next")]}


def test_bad_tree_arguments_are_named() -> None:
    hub = MemoryTreeHub()
    with pytest.raises(RanksValueError, match="fan_in must be an int >= 2"):
        MemoryTreeChannel(hub, 0, 4, fan_in=1)
    with pytest.raises(RanksValueError, match="rank 4 is not in range"):
        MemoryTreeChannel(hub, 4, 4)
    with pytest.raises(RanksValueError, match="no parent"):
        MemoryTreeChannel(hub, 0, 4).send(1, b"", 1.0)


@pytest.mark.parametrize("value", [-1, math.nan, math.inf, "60", True])
def test_a_bad_job_view_interval_is_refused_naming_it(tmp_path: Path, value: Any) -> None:
    with pytest.raises(CollectorValueError, match="job_view_interval"):
        SummaryCollector(tmp_path, job_view_interval=value)


def test_the_interval_comes_from_the_environment_when_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKSCRIBE_JOB_VIEW_INTERVAL", "soon")
    with pytest.raises(CollectorValueError, match=r"RANKSCRIBE_JOB_VIEW_INTERVAL.*'soon'"):
        SummaryCollector(tmp_path)
    monkeypatch.setenv("RANKSCRIBE_JOB_VIEW_INTERVAL", "2.5")
    assert SummaryCollector(tmp_path)._live.interval == 2.5
    assert SummaryCollector(tmp_path, job_view_interval=0)._live.interval == 0.0
    monkeypatch.delenv("RANKSCRIBE_JOB_VIEW_INTERVAL")
    assert SummaryCollector(tmp_path)._live.interval == 60.0
