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
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.lineage.job._statistics import (
    FINGERPRINT_TAG,
    LOSS_TAGS,
    JobStatistics,
    RankArrays,
    TagStatistics,
    is_timing_tag,
    merge_groups,
    rank_arrays,
    single_rank_rows,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "Partial",
    "PartialFormatError",
    "is_per_rank_tag",
]

_MAGIC = b"RSJP3\n"
_LENGTH = struct.Struct("<Q")
# TagStatistics' columns, in this order, as rows of one int64 and one float64 block (the
# finite moments and the non-finite counts apart, so a merge matches numpy for inf and NaN:
# job/_statistics.py).
_INT_FIELDS = ("steps", "count", "min_rank", "max_rank", "nan", "posinf", "neginf")
_FLOAT_FIELDS = ("finite_mean", "m2", "minimum", "maximum")
#: Parts of one tag merged in before they are combined: a tree node's children and its own
#: (fan-in 8) in one pass, and a bound on what waits (the offline merge folds in every rank).
_COMBINE_AT = 16
#: A header larger than this is refused before it is parsed.
_MAX_HEADER = 64 << 20


class PartialFormatError(ValueError):
    """Bytes that are not a partial this version wrote (a foreign or damaged message)."""


def is_per_rank_tag(tag: str) -> bool:
    """Whether ``tag`` travels as each rank's own points (timings and the fingerprint)."""
    return tag == FINGERPRINT_TAG or is_timing_tag(tag)


class Partial:
    """The merged new points of a group of ranks for one interval (see the module docstring)."""

    def __init__(
        self,
        tags: dict[str, TagStatistics] | None = None,
        per_rank: dict[str, dict[int, RankArrays]] | None = None,
        last_steps: dict[int, int] | None = None,
        nonfinite_loss: dict[int, int] | None = None,
        finished: set[int] | None = None,
    ) -> None:
        self._tags: dict[str, TagStatistics] = {} if tags is None else tags
        # Statistics merged in but not yet combined (see merge): tag -> parts.
        self._unmerged: dict[str, list[TagStatistics]] = {}
        # Tags whose statistics are one rank's points as they came (of_rank): the wire
        # carries their steps and values only, not the 11 columns (tag -> rank, statistics).
        self._one_rank: dict[str, tuple[int, TagStatistics]] = {}
        # (steps, values) columns, spelled out: this is a public class (RankArrays is private)
        self.per_rank: dict[
            str, dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]
        ] = {} if per_rank is None else per_rank
        self.last_steps: dict[int, int] = {} if last_steps is None else last_steps
        self.nonfinite_loss: dict[int, int] = {} if nonfinite_loss is None else nonfinite_loss
        self.finished: set[int] = set() if finished is None else finished

    def __repr__(self) -> str:
        return f"Partial(ranks={len(self.last_steps)}, tags={sorted(self.tags)})"

    @property
    def tags(self) -> dict[str, TagStatistics]:
        """The statistics of every quantity tag (the parts merged in so far, combined)."""
        if self._unmerged:
            self._combine(list(self._unmerged))
        return self._tags

    @tags.setter
    def tags(self, tags: dict[str, TagStatistics]) -> None:
        self._tags, self._unmerged, self._one_rank = tags, {}, {}

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
        # The tags recorded at the same steps (usually all of them) are computed together.
        groups: dict[tuple[int, ...], tuple[npt.NDArray[np.int64], list[str], list[Any]]] = {}
        for tag, (steps, values) in _rank_columns(scalars):
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
                _group_by_steps(groups, tag, steps, values)
        partial._add_one_rank(rank, groups)
        partial.last_steps[rank] = last
        return partial

    def _add_one_rank(
        self,
        rank: int,
        groups: dict[tuple[int, ...], tuple[npt.NDArray[np.int64], list[str], list[Any]]],
    ) -> None:
        for steps, tags, rows in groups.values():
            statistics = single_rank_rows(rank, steps, np.concatenate(rows).reshape(len(rows), -1))
            for tag, item in zip(tags, statistics, strict=True):
                self._tags[tag] = item
                self._one_rank[tag] = (rank, item)

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
        are concatenated (a later interval's points follow). The statistics'
        arithmetic waits until they are read (or :data:`_COMBINE_AT` parts
        wait): a node's children, merged one by one, then combine in a single
        vectorized pass (``merge_groups`` of job/_statistics.py), not one pass per child.
        """
        for tag, statistics in other.tags.items():
            self._one_rank.pop(tag, None)
            parts = self._unmerged.setdefault(tag, [])
            parts.append(statistics)
            if len(parts) >= _COMBINE_AT:
                self._combine([tag])
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

    def _combine(self, tags: list[str]) -> None:
        groups = []
        for tag in tags:
            parts = self._unmerged.pop(tag)
            known = self._tags.get(tag)
            groups.append(parts if known is None else [known, *parts])
        self._tags.update(zip(tags, merge_groups(groups), strict=True))

    def split(self, last: int) -> tuple[Partial, Partial]:
        """(the points at steps <= ``last``, the rest); ranks and loss notes go with the first."""
        upto, after = Partial(), Partial()
        for tag, statistics in self.tags.items():
            cut = _cut(statistics.steps, last)
            if cut == len(statistics.steps):
                upto.tags[tag] = statistics  # whole (nothing changes statistics in place)
                continue
            if cut:
                upto.tags[tag] = _slice(statistics, 0, cut)
            after.tags[tag] = _slice(statistics, cut, len(statistics.steps))
        for tag, ranks in self.per_rank.items():
            for rank, (steps, values) in ranks.items():
                cut = _cut(steps, last)
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
        tags: dict[str, TagStatistics] = {}
        one_rank: list[tuple[str, int, int]] = []
        for tag, statistics in self.tags.items():
            rank, made = self._one_rank.get(tag, (-1, None))
            if made is statistics:
                one_rank.append((tag, rank, len(statistics.steps)))
            else:
                tags[tag] = statistics
        ints = [getattr(statistics, name) for name in _INT_FIELDS for statistics in tags.values()]
        floats = [
            getattr(statistics, name) for name in _FLOAT_FIELDS for statistics in tags.values()
        ]
        for tag, _, _ in one_rank:
            ints.append(self._tags[tag].steps)
            floats.append(self._tags[tag].minimum)  # one rank's value is its own minimum
        per_rank = []
        for tag, ranks in self.per_rank.items():
            per_rank.append([tag, list(ranks), [len(steps) for steps, _ in ranks.values()]])
            ints.extend(steps for steps, _ in ranks.values())
            floats.extend(values for _, values in ranks.values())
        header = json.dumps(
            {
                "tags": [[tag, len(statistics.steps)] for tag, statistics in tags.items()],
                "one_rank": one_rank,
                "per_rank": per_rank,
                "last_steps": [[rank, step] for rank, step in self.last_steps.items()],
                "nonfinite_loss": [[rank, step] for rank, step in self.nonfinite_loss.items()],
                "finished": sorted(self.finished),
            },
            separators=(",", ":"),
        ).encode("utf-8")
        prefix = _MAGIC + _LENGTH.pack(len(header)) + header
        # join copies straight from the arrays' buffers: one copy less than tobytes() first.
        return b"".join([prefix, _joined(ints, "<i8").data, _joined(floats, "<f8").data])

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


def _joined(arrays: list[npt.NDArray[Any]], dtype: str) -> npt.NDArray[Any]:
    """The arrays end to end as ``dtype`` (numpy arrays travel as their raw bytes)."""
    if not arrays:
        return np.empty(0, dtype=dtype)
    return np.concatenate(arrays, dtype=dtype, casting="same_kind")


def _length(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PartialFormatError(f"an array length must be an int >= 0, got {value!r}")
    return value


def _tag_name(value: Any) -> str:
    if not isinstance(value, str):
        raise PartialFormatError(f"a tag must be a str, got {value!r}")
    return value


def _rank_number(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value < 2**62:
        raise PartialFormatError(f"{what} must be an int, got {value!r}")
    return value


def _decoded(header: Any, view: memoryview, offset: int) -> Partial:
    if not isinstance(header, dict):
        raise PartialFormatError("the header is not an object")
    tags = [(_tag_name(tag), _length(count)) for tag, count in header["tags"]]
    one_rank = [
        (_tag_name(tag), _rank_number(rank, "a rank"), _length(count))
        for tag, rank, count in header["one_rank"]
    ]
    per_rank = []
    for tag, ranks, counts in header["per_rank"]:
        if not isinstance(ranks, list) or not isinstance(counts, list) or len(ranks) != len(counts):
            raise PartialFormatError(f"the per-rank points of {tag!r} name ranks and lengths apart")
        per_rank.append(
            (
                _tag_name(tag),
                [_rank_number(rank, "a rank") for rank in ranks],
                [_length(count) for count in counts],
            )
        )
    lengths = [count for _, count in tags]
    # The runs after the columns: one-rank tags' points, then the per-rank points.
    runs = [tag for tag, _, _ in one_rank] + [tag for tag, _, counts in per_rank for _ in counts]
    rank_lengths = [count for _, _, count in one_rank] + [
        count for _, _, counts in per_rank for count in counts
    ]
    points, rank_points = sum(lengths), sum(rank_lengths)
    int_count = len(_INT_FIELDS) * points + rank_points
    float_count = len(_FLOAT_FIELDS) * points + rank_points
    if len(view) - offset != 8 * (int_count + float_count):
        raise PartialFormatError(
            f"the header names arrays of {8 * (int_count + float_count)} bytes, "
            f"the message holds {len(view) - offset}"
        )
    # One copy each (aligned, writable, native order); every column is a view into them.
    ints = np.frombuffer(view, dtype="<i8", count=int_count, offset=offset).astype(np.int64)
    floats = np.frombuffer(
        view, dtype="<f8", count=float_count, offset=offset + 8 * int_count
    ).astype(np.float64)
    columns = ints[: len(_INT_FIELDS) * points].reshape(len(_INT_FIELDS), points)
    moments = floats[: len(_FLOAT_FIELDS) * points].reshape(len(_FLOAT_FIELDS), points)
    _check_columns(columns, [tag for tag, _ in tags], lengths)
    rank_steps = ints[len(_INT_FIELDS) * points :]
    rank_values = floats[len(_FLOAT_FIELDS) * points :]
    _check_ascending(rank_steps, runs, rank_lengths)
    partial = Partial()
    start = 0
    for tag, count in tags:
        stop = start + count
        fields: dict[str, Any] = {
            name: columns[row, start:stop] for row, name in enumerate(_INT_FIELDS)
        }
        fields.update({name: moments[row, start:stop] for row, name in enumerate(_FLOAT_FIELDS)})
        partial.tags[tag] = TagStatistics(**fields)
        start = stop
    start = _decoded_one_rank(partial, one_rank, rank_steps, rank_values)
    for tag, ranks, counts in per_rank:
        held = partial.per_rank.setdefault(tag, {})
        for rank, count in zip(ranks, counts, strict=True):
            stop = start + count
            held[rank] = (rank_steps[start:stop], rank_values[start:stop])
            start = stop
    for rank, step in header["last_steps"]:
        partial.last_steps[_rank_number(rank, "a rank")] = _rank_number(step, "a step")
    for rank, step in header["nonfinite_loss"]:
        partial.nonfinite_loss[_rank_number(rank, "a rank")] = _rank_number(step, "a step")
    partial.finished = {_rank_number(rank, "a rank") for rank in header["finished"]}
    return partial


def _decoded_one_rank(
    partial: Partial,
    one_rank: list[tuple[str, int, int]],
    steps: npt.NDArray[np.int64],
    values: npt.NDArray[np.float64],
) -> int:
    """The one-rank tags' statistics, rebuilt from their points; returns where they end."""
    if len({(rank, count) for _, rank, count in one_rank}) == 1 and one_rank[0][2]:
        # A rank's own message: every tag at the same steps, checked at once.
        rank, count, size = one_rank[0][1], one_rank[0][2], len(one_rank)
        block = steps[: size * count].reshape(size, count)
        if bool((block == block[0]).all()):
            rows = list(values[: size * count].reshape(size, count))
            group = (block[0], [tag for tag, _, _ in one_rank], rows)
            partial._add_one_rank(rank, {(count,): group})
            return size * count
    by_rank: dict[int, dict[tuple[int, ...], Any]] = {}
    start = 0
    for tag, rank, count in one_rank:
        stop = start + count
        if count:
            groups = by_rank.setdefault(rank, {})
            _group_by_steps(groups, tag, steps[start:stop], values[start:stop])
        start = stop
    for rank, groups in by_rank.items():
        partial._add_one_rank(rank, groups)
    return start


def _check_columns(columns: npt.NDArray[np.int64], tags: list[str], lengths: list[int]) -> None:
    """What merging relies on, for every tag at once: counts >= 1, non-finite counts in range."""
    _check_ascending(columns[0], tags, lengths)
    rows = dict(zip(_INT_FIELDS, columns, strict=True))
    below = np.flatnonzero(rows["count"] < 1)
    if len(below):
        raise PartialFormatError(f"tag {_tag_at(tags, lengths, below[0])!r} has a count below 1")
    nan, posinf, neginf = rows["nan"], rows["posinf"], rows["neginf"]
    wrong = np.flatnonzero(
        (nan < 0) | (posinf < 0) | (neginf < 0) | (nan + posinf + neginf > rows["count"])
    )
    if len(wrong):
        raise PartialFormatError(
            f"tag {_tag_at(tags, lengths, wrong[0])!r} counts more non-finite points than points"
        )


def _check_ascending(steps: npt.NDArray[np.int64], tags: list[str], lengths: list[int]) -> None:
    """Each run of ``lengths`` steps (one per tag) ascending and unique: what merging relies on."""
    if len(steps) < 2:
        return
    descending = steps[1:] <= steps[:-1]
    starts = np.cumsum(lengths)[:-1]
    starts = starts[(starts > 0) & (starts < len(steps))]
    descending[starts - 1] = False  # the first step of a run follows another run's last
    found = np.flatnonzero(descending)
    if len(found):
        tag = _tag_at(tags, lengths, found[0] + 1)
        raise PartialFormatError(f"the steps of tag {tag!r} are not ascending")


def _tag_at(tags: list[str], lengths: list[int], index: int) -> str:
    """The tag of the run that holds position ``index``."""
    return tags[int(np.searchsorted(np.cumsum(lengths), index, side="right"))]


def _rank_columns(
    scalars: Mapping[str, Any],
) -> Iterable[tuple[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]]:
    """Each tag's sorted unique (steps, values); tags given as arrays at the same steps at once."""
    arrays = all(
        isinstance(points, tuple) and len(points) == 2 and isinstance(points[0], np.ndarray)
        for points in scalars.values()
    )
    if arrays and len(scalars) > 1:
        columns = list(scalars.values())
        size = len(columns[0][0])
        if size > 1 and all(
            len(steps) == size == len(values) and steps.dtype == np.int64
            for steps, values in columns
        ):
            # One check for every tag: the same steps, ascending (what a rank's tail holds).
            steps = np.concatenate([steps for steps, _ in columns]).reshape(len(columns), size)
            shared = steps[0]
            if bool((steps == shared).all()) and bool((shared[1:] > shared[:-1]).all()):
                values = np.concatenate([values for _, values in columns], dtype=np.float64)
                rows = values.reshape(len(columns), size)
                shared = shared.copy()
                return [(tag, (shared, rows[row])) for row, tag in enumerate(scalars)]
    return [
        (
            tag,
            _sorted_arrays(points[0], points[1])
            if isinstance(points, tuple) and len(points) == 2 and isinstance(points[0], np.ndarray)
            else rank_arrays(points),
        )
        for tag, points in scalars.items()
    ]


def _group_by_steps(
    groups: dict[tuple[int, ...], tuple[npt.NDArray[np.int64], list[str], list[Any]]],
    tag: str,
    steps: npt.NDArray[np.int64],
    values: npt.NDArray[np.float64],
) -> None:
    """File ``tag``'s values under the group of its steps (a new group if none has them)."""
    key: tuple[int, ...] = (len(steps), int(steps[0]), int(steps[-1]))
    while key in groups:
        shared, tags, rows = groups[key]
        if shared is steps or bool((shared == steps).all()):  # the key holds the length
            tags.append(tag)
            rows.append(values)
            return
        key = (*key, len(key))  # same length and ends, other steps: a key of its own
    groups[key] = (steps, [tag], [values])


def _sorted_arrays(steps: npt.NDArray[Any], values: npt.NDArray[Any]) -> RankArrays:
    steps = np.asarray(steps, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if len(steps) > 1 and not bool(np.all(steps[1:] > steps[:-1])):
        order = np.argsort(steps, kind="stable")
        steps, values = steps[order], values[order]
        last_of_step = np.append(steps[1:] != steps[:-1], True)
        steps, values = steps[last_of_step], values[last_of_step]
    return steps, values


def _cut(steps: npt.NDArray[np.int64], last: int) -> int:
    """How many of ``steps`` (ascending) are <= ``last``; the usual all or none without a search."""
    if not len(steps) or steps[0] > last:
        return 0
    if steps[-1] <= last:
        return len(steps)
    return int(np.searchsorted(steps, last, side="right"))


def _slice(statistics: TagStatistics, start: int, stop: int) -> TagStatistics:
    return TagStatistics(
        **{name: getattr(statistics, name)[start:stop] for name in _INT_FIELDS + _FLOAT_FIELDS}
    )
