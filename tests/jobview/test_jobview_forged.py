"""A job-view partial carries only the ranks of its sender's subtree: ``from_bytes(ranks=)``
refuses a message that names any other rank, wherever it names it (docs/job-view.md, "Tree").
"""

from __future__ import annotations

import pytest

from rankscribe.jobview.protocol import JobPartial, PartialFormatError
from rankscribe.ranks.testing import MemoryTreeChannel, MemoryTreeHub


def points(rank: int) -> dict[str, list[tuple[int, float]]]:
    return {
        "loss/auto": [(1, 0.5 + rank), (2, 0.25 + rank)],
        "rankscribe/step_time": [(1, 0.1), (2, 0.1)],
    }


def partial_of(*ranks: int) -> JobPartial:
    merged = JobPartial()
    for rank in ranks:
        merged.merge(JobPartial.of_rank(rank, points(rank), last_step=0))
    return merged


def forged_last_step() -> JobPartial:
    partial = partial_of(1)
    partial.last_steps[7] = 99
    return partial


def forged_finished() -> JobPartial:
    partial = partial_of(1)
    partial.finished.add(7)
    return partial


def forged_nonfinite() -> JobPartial:
    partial = partial_of(1)
    partial.nonfinite_loss[7] = 3
    return partial


@pytest.mark.parametrize(
    ("make", "where"),
    [
        (lambda: JobPartial.of_rank(7, points(7)), "it names rank 7, which"),  # one rank's own
        (lambda: partial_of(1, 7), "it names rank 7"),  # merged: columns and per-rank points
        (forged_last_step, "it names rank 7, which"),
        (forged_finished, "it names rank 7, which"),
        (forged_nonfinite, "it names rank 7, which"),
    ],
)
def test_a_rank_outside_the_senders_subtree_is_refused(make: object, where: str) -> None:
    data = make().to_bytes()  # type: ignore[operator]
    assert JobPartial.from_bytes(data).ranks  # without the subtree: decoded as before
    with pytest.raises(PartialFormatError, match=where) as caught:
        JobPartial.from_bytes(data, ranks=[(1, 1)])
    assert "not in the sender's subtree (ranks 1)" in str(caught.value)


def test_a_minimum_held_by_a_rank_outside_is_refused() -> None:
    # Only the columns name rank 7: the ranks that hold each step's minimum and maximum.
    partial = partial_of(1, 7)
    assert partial.tags  # combined into whole statistics (none one rank's own)
    partial.per_rank.clear()
    partial.last_steps.pop(7)
    with pytest.raises(PartialFormatError, match="a minimum's or maximum's"):
        JobPartial.from_bytes(partial.to_bytes(), ranks=[(1, 1)])


def test_the_ranks_of_a_subtree_pass_through_the_tree() -> None:
    # Rank 1 of 7 with fan-in 2: its subtree is 1 and 3-4 (2, 5 and 6 are rank 2's).
    hub = MemoryTreeHub()
    root, child = MemoryTreeChannel(hub, 0, 7, 2), MemoryTreeChannel(hub, 1, 7, 2)
    subtree = list(root.subtree(1))
    assert subtree == [(1, 1), (3, 4)]
    child.send(1, partial_of(1, 3, 4).to_bytes(), timeout=1)
    child.send(2, partial_of(1, 5).to_bytes(), timeout=1)
    [(_, good), (_, forged)] = root.receive(2, timeout=1)[1]
    assert JobPartial.from_bytes(good, ranks=subtree).ranks == [1, 3, 4]
    with pytest.raises(PartialFormatError, match="it names rank 5"):
        JobPartial.from_bytes(forged, ranks=subtree)
