"""One interval's new points of a group of ranks, merged: what travels up the tree.

A :class:`Partial` holds, for the ranks of one subtree and one interval of
the live job view (``docs/job-view.md``, "Live" and "Tree"):

- ``tags``: the mergeable statistics (count, mean, M2, extremes with their
  ranks) of every quantity tag, per step: their size grows with the steps
  of the interval, never with the ranks;
- ``per_rank``: each rank's own points of the tags whose rules need every
  rank's value at a step (the timing tags: a median; the parameter
  fingerprint: a majority), for this interval only;
- ``last_steps``: every rank whose points arrived, with its last step so far
  (-1 before its first point): the ranks of the interval;
- ``nonfinite_loss``: the first step of each rank whose loss was NaN/inf;
- ``finished``: the ranks whose last message (at the end of training) this
  holds: they send nothing after it, and are not missing from later rounds.

Two partials of disjoint ranks merge in any order (Chan's update for the
statistics). On the wire a partial is data only — a JSON header naming the
arrays, then the arrays' raw little-endian bytes — never a pickle: a message
from a store or a folder another user could write must not run code.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.lineage.job._statistics import (
    FINGERPRINT_TAG,
    LOSS_TAGS,
    JobStatistics,
    RankArrays,
    TagStatistics,
    is_timing_tag,
    rank_arrays,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "Partial",
    "PartialFormatError",
    "is_per_rank_tag",
]

_MAGIC = b"RSJP2\n"
_LENGTH = struct.Struct("<Q")
# TagStatistics' columns, in this order (the finite moments and the non-finite counts
# apart, so a merge matches numpy for inf and NaN: job/_statistics.py).
_TAG_FIELDS = (
    ("steps", "<i8"),
    ("count", "<i8"),
    ("finite_mean", "<f8"),
    ("m2", "<f8"),
    ("minimum", "<f8"),
    ("min_rank", "<i8"),
    ("maximum", "<f8"),
    ("max_rank", "<i8"),
    ("nan", "<i8"),
    ("posinf", "<i8"),
    ("neginf", "<i8"),
)
#: A header larger than this is refused before it is parsed.
_MAX_HEADER = 64 << 20


class PartialFormatError(ValueError):
    """Bytes that are not a partial this version wrote (a foreign or damaged message)."""


def is_per_rank_tag(tag: str) -> bool:
    """Whether ``tag`` travels as each rank's own points (timings and the fingerprint)."""
    return tag == FINGERPRINT_TAG or is_timing_tag(tag)


@dataclass
class Partial:
    """The merged new points of a group of ranks for one interval (see the module docstring)."""

    tags: dict[str, TagStatistics] = field(default_factory=dict)
    # (steps, values) columns, spelled out: this is a public class (RankArrays is private)
    per_rank: dict[str, dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]] = field(
        default_factory=dict
    )
    last_steps: dict[int, int] = field(default_factory=dict)
    nonfinite_loss: dict[int, int] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)

    @classmethod
    def of_rank(
        cls,
        rank: int,
        scalars: Mapping[
            str, Iterable[tuple[int, float]] | tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]
        ],
        *,
        last_step: int = -1,
        finished: bool = False,
    ) -> Partial:
        """One rank's new points (``tag -> [(step, value)]`` or ``(steps, values)`` arrays).

        ``last_step``: the rank's last step before these points (-1: none);
        ``finished``: these are its last points (the end of training).
        """
        partial = cls()
        if finished:
            partial.finished.add(rank)
        last = last_step
        for tag, points in scalars.items():
            if isinstance(points, tuple) and len(points) == 2 and isinstance(points[0], np.ndarray):
                steps, values = _sorted_arrays(points[0], points[1])
            else:
                steps, values = rank_arrays(points)
            if len(steps) == 0:
                continue
            last = max(last, int(steps[-1]))
            if is_per_rank_tag(tag):
                partial.per_rank.setdefault(tag, {})[rank] = (steps, values)
            if tag in LOSS_TAGS:
                bad = np.flatnonzero(~np.isfinite(values))
                if len(bad):
                    first = int(steps[bad[0]])
                    partial.nonfinite_loss[rank] = min(
                        first, partial.nonfinite_loss.get(rank, first)
                    )
            if tag != FINGERPRINT_TAG:
                partial.tags[tag] = TagStatistics.of_rank(rank, steps, values)
        partial.last_steps[rank] = last
        return partial

    @property
    def ranks(self) -> list[int]:
        return sorted(self.last_steps)

    @property
    def points(self) -> int:
        """Steps held over all tags (a measure of the partial's size)."""
        return sum(len(item.steps) for item in self.tags.values())

    def merge(self, other: Partial) -> None:
        """Fold ``other`` (other ranks, or the same ranks' later points) into this one.

        The statistics merge by step; per-rank points of the same rank and tag
        are concatenated (a later interval's points follow).
        """
        for tag, statistics in other.tags.items():
            known = self.tags.get(tag)
            self.tags[tag] = statistics if known is None else known.merge(statistics)
        for tag, ranks in other.per_rank.items():
            mine = self.per_rank.setdefault(tag, {})
            for rank, (steps, values) in ranks.items():
                held = mine.get(rank)
                mine[rank] = (
                    (steps, values)
                    if held is None
                    else _sorted_arrays(
                        np.concatenate([held[0], steps]), np.concatenate([held[1], values])
                    )
                )
        for rank, step in other.last_steps.items():
            self.last_steps[rank] = max(step, self.last_steps.get(rank, -1))
        for rank, step in other.nonfinite_loss.items():
            self.nonfinite_loss[rank] = min(step, self.nonfinite_loss.get(rank, step))
        self.finished |= other.finished

    def split(self, last: int) -> tuple[Partial, Partial]:
        """(the points at steps <= ``last``, the rest); ranks and loss notes go with the first."""
        upto, after = Partial(), Partial()
        for tag, statistics in self.tags.items():
            cut = int(np.searchsorted(statistics.steps, last, side="right"))
            if cut:
                upto.tags[tag] = _slice(statistics, 0, cut)
            if cut < len(statistics.steps):
                after.tags[tag] = _slice(statistics, cut, len(statistics.steps))
        for tag, ranks in self.per_rank.items():
            for rank, (steps, values) in ranks.items():
                cut = int(np.searchsorted(steps, last, side="right"))
                if cut:
                    upto.per_rank.setdefault(tag, {})[rank] = (steps[:cut], values[:cut])
                if cut < len(steps):
                    after.per_rank.setdefault(tag, {})[rank] = (steps[cut:], values[cut:])
        upto.last_steps = dict(self.last_steps)
        upto.nonfinite_loss = dict(self.nonfinite_loss)
        upto.finished = set(self.finished)
        return upto, after

    def job_statistics(self) -> JobStatistics:
        """These points as :class:`JobStatistics` (what ``write_job_view`` takes)."""
        return JobStatistics(
            tags=dict(self.tags),
            timings={
                tag: dict(ranks) for tag, ranks in self.per_rank.items() if is_timing_tag(tag)
            },
            fingerprints=dict(self.per_rank.get(FINGERPRINT_TAG, {})),
            nonfinite_loss=dict(self.nonfinite_loss),
            last_steps={
                rank: (step if step >= 0 else None)
                for rank, step in sorted(self.last_steps.items())
            },
        )

    def drop_through(self, last: int) -> int:
        """Remove the points at steps <= ``last`` (already written); return how many there were."""
        kept, dropped = self.split(last)[1], 0
        dropped = self.points - kept.points
        self.tags, self.per_rank = kept.tags, kept.per_rank
        return dropped

    # ------------------------------------------------------------------ the wire

    def to_bytes(self) -> bytes:
        """The data-only encoding (see the module docstring)."""
        arrays: list[bytes] = []
        tags = []
        for tag, statistics in self.tags.items():
            tags.append([tag, len(statistics.steps)])
            arrays.extend(
                np.ascontiguousarray(getattr(statistics, name), dtype=dtype).tobytes()
                for name, dtype in _TAG_FIELDS
            )
        per_rank = []
        for tag, ranks in self.per_rank.items():
            for rank, (steps, values) in ranks.items():
                per_rank.append([tag, rank, len(steps)])
                arrays.append(np.ascontiguousarray(steps, dtype="<i8").tobytes())
                arrays.append(np.ascontiguousarray(values, dtype="<f8").tobytes())
        header = json.dumps(
            {
                "tags": tags,
                "per_rank": per_rank,
                "last_steps": [[rank, step] for rank, step in self.last_steps.items()],
                "nonfinite_loss": [[rank, step] for rank, step in self.nonfinite_loss.items()],
                "finished": sorted(self.finished),
            },
            separators=(",", ":"),
        ).encode("utf-8")
        return b"".join([_MAGIC, _LENGTH.pack(len(header)), header, *arrays])

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Partial:
        """Decode :meth:`to_bytes`; :class:`PartialFormatError` for anything else."""
        view = memoryview(data).cast("B")
        start = len(_MAGIC) + _LENGTH.size
        if len(view) < start or bytes(view[: len(_MAGIC)]) != _MAGIC:
            raise PartialFormatError("not a job-view partial (wrong magic bytes)")
        (size,) = _LENGTH.unpack(view[len(_MAGIC) : start])
        if size > min(_MAX_HEADER, len(view) - start):
            raise PartialFormatError(f"a header of {size} bytes does not fit the message")
        try:
            header = json.loads(bytes(view[start : start + size]).decode("utf-8"))
            return _decoded(header, view, start + size)
        except (ValueError, TypeError, KeyError, IndexError) as error:
            if isinstance(error, PartialFormatError):
                raise
            raise PartialFormatError(f"a malformed job-view partial: {error}") from error


class _Cursor:
    def __init__(self, view: memoryview, offset: int) -> None:
        self.view, self.offset = view, offset

    def take(self, count: int, dtype: str) -> npt.NDArray[Any]:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise PartialFormatError(f"an array length must be an int >= 0, got {count!r}")
        end = self.offset + 8 * count
        if end > len(self.view):
            raise PartialFormatError("the message ends before its arrays do")
        array = np.frombuffer(self.view[self.offset : end], dtype=dtype).astype(
            dtype[1:], copy=True
        )
        self.offset = end
        return array


def _rank_number(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value < 2**62:
        raise PartialFormatError(f"{what} must be an int, got {value!r}")
    return value


def _decoded(header: Any, view: memoryview, offset: int) -> Partial:
    if not isinstance(header, dict):
        raise PartialFormatError("the header is not an object")
    cursor = _Cursor(view, offset)
    partial = Partial()
    for tag, count in header["tags"]:
        if not isinstance(tag, str):
            raise PartialFormatError(f"a tag must be a str, got {tag!r}")
        columns = {name: cursor.take(count, dtype) for name, dtype in _TAG_FIELDS}
        _check_steps(columns["steps"], tag)
        if bool(np.any(columns["count"] < 1)):
            raise PartialFormatError(f"tag {tag!r} has a count below 1")
        others = columns["nan"] + columns["posinf"] + columns["neginf"]
        if bool(
            np.any(
                (columns["nan"] < 0)
                | (columns["posinf"] < 0)
                | (columns["neginf"] < 0)
                | (others > columns["count"])
            )
        ):
            raise PartialFormatError(f"tag {tag!r} counts more non-finite points than points")
        partial.tags[tag] = TagStatistics(**columns)
    for tag, rank, count in header["per_rank"]:
        if not isinstance(tag, str):
            raise PartialFormatError(f"a tag must be a str, got {tag!r}")
        steps = cursor.take(count, "<i8")
        values = cursor.take(count, "<f8")
        _check_steps(steps, tag)
        partial.per_rank.setdefault(tag, {})[_rank_number(rank, "a rank")] = (steps, values)
    for rank, step in header["last_steps"]:
        partial.last_steps[_rank_number(rank, "a rank")] = _rank_number(step, "a step")
    for rank, step in header["nonfinite_loss"]:
        partial.nonfinite_loss[_rank_number(rank, "a rank")] = _rank_number(step, "a step")
    partial.finished = {_rank_number(rank, "a rank") for rank in header["finished"]}
    if cursor.offset != len(view):
        raise PartialFormatError(f"{len(view) - cursor.offset} bytes follow the last array")
    return partial


def _check_steps(steps: npt.NDArray[Any], tag: str) -> None:
    """What merging relies on: steps ascending and unique."""
    if len(steps) > 1 and not bool(np.all(steps[1:] > steps[:-1])):
        raise PartialFormatError(f"the steps of tag {tag!r} are not ascending")


def _sorted_arrays(steps: npt.NDArray[Any], values: npt.NDArray[Any]) -> RankArrays:
    steps = np.asarray(steps, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if len(steps) > 1 and not bool(np.all(steps[1:] > steps[:-1])):
        order = np.argsort(steps, kind="stable")
        steps, values = steps[order], values[order]
        last_of_step = np.append(steps[1:] != steps[:-1], True)
        steps, values = steps[last_of_step], values[last_of_step]
    return steps, values


def _slice(statistics: TagStatistics, start: int, stop: int) -> TagStatistics:
    return TagStatistics(**{name: getattr(statistics, name)[start:stop] for name, _ in _TAG_FIELDS})
