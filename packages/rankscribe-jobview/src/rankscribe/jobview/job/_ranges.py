"""Sets of ranks as text that stays short: ``"0,2-99999"``, never one entry per rank.

World sizes and rank numbers read from files are data (``docs/job-view.md``,
"Missing ranks"): a ``device_num`` of ``2**31-1`` or a ``rank_99999999999``
directory must not make anything loop over or list every rank it implies.
The missing ranks of a world are computed from the ranks that exist, as
ranges, and a text longer than :data:`MAX_TEXT` is cut with a count of what
was left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MAX_TEXT", "last_steps_text", "missing_ranges", "ranges_text", "ranks_of_text"]

#: Characters a list of ranks may take in a verdict, a lineage key or a message.
MAX_TEXT = 2000


def _runs(ranks: Iterable[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for rank in sorted(set(ranks)):
        if runs and rank == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], rank)
        else:
            runs.append((rank, rank))
    return runs


def missing_ranges(present: Iterable[int], world_size: int) -> list[tuple[int, int]]:
    """The ranks of ``range(world_size)`` not in ``present``, as inclusive ``(first, last)`` runs.

    Costs the number of ``present`` ranks, whatever ``world_size`` is.
    """
    gaps: list[tuple[int, int]] = []
    expected = 0
    for first, last in _runs(rank for rank in present if 0 <= rank < world_size):
        if first > expected:
            gaps.append((expected, first - 1))
        expected = last + 1
    if expected < world_size:
        gaps.append((expected, world_size - 1))
    return gaps


def ranges_text(runs: Iterable[tuple[int, int]] | Iterable[int], *, limit: int = MAX_TEXT) -> str:
    """``"0,2,5-9"``: single ranks and runs of three or more as ``first-last``.

    Accepts ranks or ``(first, last)`` runs. A run of two stays ``"4,5"``, as
    the lists of ranks have always been written. Past ``limit`` characters the
    text ends in ``",... (N more ranks)"``.
    """
    items = list(runs)
    pairs = (
        [item for item in items if isinstance(item, tuple)]
        if items and isinstance(items[0], tuple)
        else _runs(item for item in items if isinstance(item, int))
    )
    parts: list[str] = []
    length = 0
    for index, (first, last) in enumerate(pairs):
        if last == first:
            pieces = [str(first)]
        elif last == first + 1:
            pieces = [str(first), str(last)]
        else:
            pieces = [f"{first}-{last}"]
        for piece in pieces:
            if length + len(piece) + 1 > limit:
                left = sum(b - a + 1 for a, b in pairs[index:])
                parts.append(f"... ({left} more ranks)")
                return ",".join(parts)
            parts.append(piece)
            length += len(piece) + 1
    return ",".join(parts)


def ranks_of_text(text: str) -> list[tuple[int, int]]:
    """The runs of a :func:`ranges_text` (what cannot be read is skipped)."""
    runs: list[tuple[int, int]] = []
    for piece in str(text).split(","):
        first, dash, last = piece.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            continue
        runs.append((low, high))
    return runs


def last_steps_text(verdicts: Mapping[str, Any]) -> str:
    """``"ranks 0-6: 300, rank 7: 288"``: the ``job/last_step/<rank>`` verdicts, grouped."""
    by_step: dict[Any, list[int]] = {}
    for key, value in verdicts.items():
        if str(key).startswith("job/last_step/"):
            try:
                rank = int(str(key).rsplit("/", 1)[1])
            except ValueError:
                continue
            by_step.setdefault(value, []).append(rank)
    parts = []
    for step, ranks in sorted(by_step.items(), key=lambda item: min(item[1])):
        text = ranges_text(ranks)
        parts.append(f"{'ranks' if ',' in text or '-' in text else 'rank'} {text}: {step}")
    return ", ".join(parts)
