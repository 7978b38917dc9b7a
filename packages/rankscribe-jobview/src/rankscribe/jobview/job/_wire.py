"""The wire format of a job-view partial (docs/job-view.md, "Tree").

A message is the lineage package's one container
(:mod:`rankscribe.jobview._npz`: numpy's ``.npz``, a CRC-32 per member)
holding a JSON header and three arrays, one of little-endian int64, one of
float64 and one of float32:

- ``tags``: ``[[tag, n], ...]``, whole statistics: their columns as rows of
  ``n`` in the int block (:data:`INT_FIELDS`) and in the float block
  (:data:`FLOAT_FIELDS`), every tag's row side by side;
- ``one_rank``: ``[[tag, rank, n], ...]``, statistics that are one rank's
  points as they came (a rank's own partial): ``n`` steps in the int block,
  ``n`` values in the float block; the reader rebuilds the statistics;
- ``per_rank``: ``[[tag, [rank, ...], [n, ...]], ...]``: each rank's points
  of the tags whose rules need every rank's value, steps then values; ranks that
  share their steps as ``[tag, [rank, ...], n]`` (the steps once, then each rank's
  ``n`` values), and ranks that share their values too (the fingerprint of a
  data-parallel job) as ``[tag, [rank, ...], n, "same_values"]`` (steps and values once);
  the values of a timing or of a gradient probe's tag (:data:`GRADIENT_TAG_PREFIX`)
  that are all float32 (a rank reads them from its summary files, whose scalars are
  float32) travel in the float32 block, the entry marked ``"float32"`` as 4th item,
  and decode to float32 arrays: half the bytes, the same numbers (a DDP probe's 16
  tags of 8 buckets outnumber the timings);
- ``last_steps``, ``nonfinite_loss`` (``[[rank, step], ...]``), ``finished``.

Data only, never a pickle (a message from a store or a folder another user
could write must not run code); everything the merge relies on (a message
whose bytes are the ones sent, lengths that add up to the arrays, steps
ascending, counts in range) is checked before a partial is made, else
:class:`PartialFormatError`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview import _npz
from rankscribe.jobview.job._statistics import (
    GRADIENT_TAG_PREFIX,
    TagStatistics,
    is_timing_tag,
    shared_steps,
    shared_values,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "FLOAT_FIELDS",
    "INT_FIELDS",
    "Decoded",
    "PartialFormatError",
    "StepGroups",
    "decode",
    "encode",
    "group_by_steps",
]

_FORMAT = "rankscribe-job-partial"
_VERSION = 6
#: The 4th item of a per-rank entry whose ranks share their steps and their values...
_SAME_VALUES = "same_values"
#: ... and of a timing's whose values travel (and are held) as float32.
_FLOAT32 = "float32"
#: The message's arrays, in this order.
_KINDS = ["<i8", "<f8", "<f4"]
# TagStatistics' columns, in this order, as rows of one int64 and one float64 block (the
# finite moments and the non-finite counts apart, so a merge matches numpy for inf and NaN:
# job/_statistics.py).
INT_FIELDS = ("steps", "count", "min_rank", "max_rank", "nan", "posinf", "neginf")
FLOAT_FIELDS = ("finite_mean", "m2", "minimum", "maximum")
#: A header larger than this is refused before it is parsed.
_MAX_HEADER = 64 << 20
# The header nests 4 levels (object, per_rank, a tag's entry, its ranks).
_MAX_HEADER_DEPTH = 8


#: A group's key: its length, first and last steps (and its steps' bytes: group_by_steps).
StepKey = tuple[int, ...] | tuple[int, int, int, bytes]
#: Tags of one rank grouped by their steps: key -> (steps, tags, value rows).
StepGroups = dict[StepKey, tuple["npt.NDArray[np.int64]", list[str], list[Any]]]


class PartialFormatError(ValueError):
    """Bytes that are not a partial this version wrote (a foreign or damaged message)."""


@dataclass
class Decoded:
    """What a message holds; ``one_rank``: (rank, its tags grouped by steps) to rebuild."""

    tags: dict[str, TagStatistics] = field(default_factory=dict)
    one_rank: list[tuple[int, StepGroups]] = field(default_factory=list)
    per_rank: dict[str, dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]] = field(
        default_factory=dict
    )
    last_steps: dict[int, int] = field(default_factory=dict)
    nonfinite_loss: dict[int, int] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)


def encode(
    tags: Mapping[str, TagStatistics],
    one_rank: Iterable[tuple[str, int, TagStatistics]],
    per_rank: Mapping[str, Mapping[int, tuple[npt.NDArray[Any], npt.NDArray[Any]]]],
    *,
    last_steps: Mapping[int, int],
    nonfinite_loss: Mapping[int, int],
    finished: Iterable[int],
) -> bytes:
    """The message of a partial (see the module docstring)."""
    ints = [getattr(statistics, name) for name in INT_FIELDS for statistics in tags.values()]
    floats = [getattr(statistics, name) for name in FLOAT_FIELDS for statistics in tags.values()]
    singles = []
    for tag, rank, statistics in one_rank:
        singles.append([tag, rank, len(statistics.steps)])
        ints.append(statistics.steps)
        floats.append(statistics.minimum)  # one rank's value is its own minimum
    runs: list[list[Any]] = []
    narrow: list[npt.NDArray[np.float32]] = []
    for tag, ranks in per_rank.items():
        columns = list(ranks.values())
        shared = shared_steps(columns) if len(ranks) > 1 else None
        if shared is None:
            run: list[Any] = [tag, list(ranks), [len(steps) for steps, _ in columns]]
            ints.extend(steps for steps, _ in columns)
        else:
            ints.append(shared)  # every rank at the same steps: they travel once
            same = shared_values(columns)
            if same is not None:  # and the same values (a data-parallel fingerprint): once too
                runs.append([tag, list(ranks), len(shared), _SAME_VALUES])
                floats.append(same)
                continue
            run = [tag, list(ranks), len(shared)]
        narrowed = _as_float32(tag, columns)
        if narrowed is not None:
            run.append(_FLOAT32)
            narrow.append(narrowed)
        else:
            floats.extend(values for _, values in columns)
        runs.append(run)
    header = {
        "format": _FORMAT,
        "version": _VERSION,
        "tags": [[tag, len(statistics.steps)] for tag, statistics in tags.items()],
        "one_rank": singles,
        "per_rank": runs,
        "last_steps": [[rank, step] for rank, step in last_steps.items()],
        "nonfinite_loss": [[rank, step] for rank, step in nonfinite_loss.items()],
        "finished": sorted(finished),
    }
    # The arrays' own buffers go into the archive: no copy made by tobytes() first.
    return _npz.pack_arrays(
        header,
        [
            ("<i8", _joined(ints, "<i8").data),
            ("<f8", _joined(floats, "<f8").data),
            ("<f4", _joined(narrow, "<f4").data),
        ],
    )


def _narrowable(tag: str) -> bool:
    """Whether ``tag``'s per-rank values may travel as float32 (see the module docstring)."""
    return is_timing_tag(tag) or tag.startswith(GRADIENT_TAG_PREFIX)


def _as_float32(
    tag: str, columns: Sequence[tuple[npt.NDArray[Any], npt.NDArray[Any]]]
) -> npt.NDArray[np.float32] | None:
    """A timing's or a gradient tag's values of every rank, end to end, as float32 when
    each one is a float32 (NaN and inf included), else None (a value a float32 does not
    hold: they go as float64; another tag: its rules read float64)."""
    if not _narrowable(tag) or not columns:
        return None
    if all(values.dtype == np.float32 for _, values in columns):
        return _joined([values for _, values in columns], "<f4")
    wide = _joined([values for _, values in columns], "<f8")
    narrow = wide.astype(np.float32)
    return narrow if bool(np.array_equal(narrow, wide, equal_nan=True)) else None


def decode(
    data: bytes | bytearray | memoryview, ranks: Sequence[tuple[int, int]] | None = None
) -> Decoded:
    """What :func:`encode` wrote; :class:`PartialFormatError` for anything else.

    ``ranks``: the ranks the sender may speak for, as inclusive (first, last) runs
    (its subtree); a message naming any other rank is refused. None: any rank.
    """
    try:
        header, arrays = _npz.unpack_arrays(
            data, max_document=_MAX_HEADER, max_depth=_MAX_HEADER_DEPTH
        )
    except _npz.ArchiveError as error:
        raise PartialFormatError(f"not a job-view partial, or a damaged one ({error})") from error
    if not isinstance(header, dict) or (header.get("format"), header.get("version")) != (
        _FORMAT,
        _VERSION,
    ):
        raise PartialFormatError("not a job-view partial of this version")
    if [kind for kind, _ in arrays] != _KINDS:
        raise PartialFormatError(
            "a job-view partial holds one int64, one float64 and one float32 array"
        )
    try:
        return _decoded(header, arrays[0][1], arrays[1][1], arrays[2][1], ranks)
    except (ValueError, TypeError, KeyError, IndexError) as error:
        if isinstance(error, PartialFormatError):
            raise
        raise PartialFormatError(f"a malformed job-view partial: {error}") from error


def _joined(arrays: Sequence[npt.NDArray[Any]], dtype: str) -> npt.NDArray[Any]:
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


def _rank_numbers(values: list[Any], what: str) -> list[int]:
    """Each of ``values`` checked as :func:`_rank_number` checks one, without a Python call
    per value where all are plain ints in range (a header names every rank of a subtree:
    65,536 at rank 0 of such a job); else the first bad one is named as it would be."""
    if values and not (
        all(type(value) is int for value in values) and min(values) >= -1 and max(values) < 2**62
    ):
        for value in values:
            _rank_number(value, what)
    return values


def _rank_pairs(pairs: Any, first: str, second: str) -> dict[int, int]:
    """A header's ``[[rank, step], ...]`` as a dict, each number checked as
    :func:`_rank_number` checks it (read at once where they are pairs of plain ints)."""
    if isinstance(pairs, list) and pairs:
        try:
            firsts, seconds = zip(*pairs, strict=True)
        except (TypeError, ValueError):
            pass  # not pairs: the loop below fails on them as it always has
        else:
            return dict(
                zip(
                    _rank_numbers(list(firsts), first),
                    _rank_numbers(list(seconds), second),
                    strict=True,
                )
            )
    return {_rank_number(a, first): _rank_number(b, second) for a, b in pairs}


def _decoded(
    header: dict[str, Any],
    int_bytes: memoryview,
    float_bytes: memoryview,
    narrow_bytes: memoryview,
    allowed: Sequence[tuple[int, int]] | None,
) -> Decoded:
    tags = [(_tag_name(tag), _length(count)) for tag, count in header["tags"]]
    one_rank = [
        (_tag_name(tag), _rank_number(rank, "a rank"), _length(count))
        for tag, rank, count in header["one_rank"]
    ]
    per_rank = _per_rank_header(header["per_rank"])
    lengths = [count for _, count in tags]
    # The runs after the columns: one-rank tags' points, then the per-rank points (steps
    # once for ranks that share them).
    runs = [tag for tag, _, _ in one_rank]
    rank_lengths = [count for _, _, count in one_rank]
    value_count = sum(rank_lengths)
    narrow_count = 0
    for tag, ranks, counts, flag in per_rank:
        if isinstance(counts, int):
            runs.append(tag)
            rank_lengths.append(counts)
            items = counts if flag == _SAME_VALUES else counts * len(ranks)
        else:
            runs.extend(tag for _ in counts)
            rank_lengths.extend(counts)
            items = sum(counts)
        if flag == _FLOAT32:
            narrow_count += items
        else:
            value_count += items
    points, rank_points = sum(lengths), sum(rank_lengths)
    int_count = len(INT_FIELDS) * points + rank_points
    float_count = len(FLOAT_FIELDS) * points + value_count
    if (len(int_bytes), len(float_bytes), len(narrow_bytes)) != (
        8 * int_count,
        8 * float_count,
        4 * narrow_count,
    ):
        raise PartialFormatError(
            f"the header names arrays of {int_count}, {float_count} and {narrow_count} items, "
            f"the message holds {len(int_bytes) // 8}, {len(float_bytes) // 8} and "
            f"{len(narrow_bytes) // 4}"
        )
    # One copy each (aligned, writable, native order); every column is a view into them.
    ints = np.frombuffer(int_bytes, dtype="<i8").astype(np.int64)
    floats = np.frombuffer(float_bytes, dtype="<f8").astype(np.float64)
    columns = ints[: len(INT_FIELDS) * points].reshape(len(INT_FIELDS), points)
    moments = floats[: len(FLOAT_FIELDS) * points].reshape(len(FLOAT_FIELDS), points)
    _check_columns(columns, [tag for tag, _ in tags], lengths)
    if allowed is not None:
        _check_column_ranks(columns, allowed)
    rank_steps = ints[len(INT_FIELDS) * points :]
    rank_values = floats[len(FLOAT_FIELDS) * points :]
    _check_ascending(rank_steps, runs, rank_lengths)
    partial = Decoded()
    start = 0
    for tag, count in tags:
        stop = start + count
        fields: dict[str, Any] = {
            name: columns[row, start:stop] for row, name in enumerate(INT_FIELDS)
        }
        fields.update({name: moments[row, start:stop] for row, name in enumerate(FLOAT_FIELDS)})
        partial.tags[tag] = TagStatistics(**fields)
        start = stop
    start = _decoded_one_rank(partial, one_rank, rank_steps, rank_values)
    narrow = np.frombuffer(narrow_bytes, dtype="<f4").astype(np.float32)
    _decoded_per_rank(partial, per_rank, rank_steps[start:], rank_values[start:], narrow)
    partial.last_steps.update(_rank_pairs(header["last_steps"], "a rank", "a step"))
    partial.nonfinite_loss.update(_rank_pairs(header["nonfinite_loss"], "a rank", "a step"))
    partial.finished = {_rank_number(rank, "a rank") for rank in header["finished"]}
    if allowed is not None:
        _check_ranks(partial, allowed)
    return partial


#: A per-rank tag's header entry: its ranks and each one's length, or one length they share,
#: and its flag: ``"same_values"`` (one run of values for all of them), ``"float32"`` (its
#: values in the float32 block) or None.
PerRankRun = tuple[str, list[int], "int | list[int]", "str | None"]


def _per_rank_header(entries: Any) -> list[PerRankRun]:
    """The header's ``per_rank`` entries, checked: ``[tag, ranks, lengths or one length]``,
    then ``"same_values"`` (one length only) or ``"float32"`` (a timing) as a 4th item."""
    per_rank: list[PerRankRun] = []
    for entry in entries:
        if not isinstance(entry, list) or len(entry) not in (3, 4):
            raise PartialFormatError(
                f"a per-rank entry must be [tag, ranks, lengths], got {entry!r:.80}"
            )
        tag, ranks, counts = entry[:3]
        # counts: each rank's length, or one length for ranks that share their steps
        shared = not isinstance(counts, list)
        flag = entry[3] if len(entry) == 4 else None
        if flag not in (None, _SAME_VALUES, _FLOAT32):
            raise PartialFormatError(
                f"the per-rank points of {tag!r} are marked {flag!r}, not "
                f"{_SAME_VALUES!r} or {_FLOAT32!r}"
            )
        if flag == _SAME_VALUES and not shared:
            raise PartialFormatError(
                f"the per-rank points of {tag!r} share their values with one length only"
            )
        if flag == _FLOAT32 and not (isinstance(tag, str) and _narrowable(tag)):
            raise PartialFormatError(
                f"only a timing's or a gradient tag's values travel as float32, not {tag!r}'s"
            )
        if not isinstance(ranks, list) or (not shared and len(ranks) != len(counts)):
            raise PartialFormatError(f"the per-rank points of {tag!r} name ranks and lengths apart")
        per_rank.append(
            (
                _tag_name(tag),
                _rank_numbers(ranks, "a rank"),
                _length(counts) if shared else [_length(count) for count in counts],
                flag,
            )
        )
    return per_rank


def _decoded_per_rank(
    partial: Decoded,
    per_rank: list[PerRankRun],
    steps: npt.NDArray[np.int64],
    wide: npt.NDArray[np.float64],
    narrow: npt.NDArray[np.float32],
) -> None:
    """Each rank's (steps, values) views; ranks that share their steps (and values) share
    one array (two)."""
    start, used = 0, {True: 0, False: 0}  # steps, and values of each block, taken so far
    for tag, ranks, counts, flag in per_rank:
        held = partial.per_rank.setdefault(tag, {})
        # The values come from the float64 block, or the float32 one (a timing's).
        in_narrow = flag == _FLOAT32
        values: npt.NDArray[Any] = (narrow if in_narrow else wide)[used[in_narrow] :]
        value_start = 0
        if flag == _SAME_VALUES and isinstance(counts, int):  # one run of steps, one of values
            # Copies: a view would keep the message's whole block of values alive after
            # the other ranks' points in it are let go (job/_evidence.py, LiveVerdicts.add).
            pair = (steps[start : start + counts].copy(), values[:counts].copy())
            held.update(dict.fromkeys(ranks, pair))
            start += counts
            value_start = counts
        elif isinstance(counts, int):  # one run of steps, every rank's values after another
            shared = steps[start : start + counts]
            value_start = counts * len(ranks)
            # Each rank's row of one (ranks, steps) view, made in one pass (not a slice each).
            rows = list(values[:value_start].reshape(len(ranks), counts))
            held.update(zip(ranks, zip(itertools.repeat(shared), rows, strict=False), strict=True))
            start += counts
        else:
            for rank, count in zip(ranks, counts, strict=True):
                held[rank] = (
                    steps[start : start + count],
                    values[value_start : value_start + count],
                )
                start += count
                value_start += count
        used[in_narrow] += value_start


def _check_ranks(partial: Decoded, allowed: Sequence[tuple[int, int]]) -> None:
    """Every rank the partial names is one of ``allowed``'s (the sender's subtree)."""
    named = [
        *(rank for rank, _ in partial.one_rank),
        *(rank for ranks in partial.per_rank.values() for rank in ranks),
        *partial.last_steps,
        *partial.nonfinite_loss,
        *partial.finished,
    ]
    # At once (rank 0 of 65,536 ranks reads 65,536 of them from each child, three times).
    rank = _first_outside(np.fromiter(named, dtype=np.int64, count=len(named)), allowed)
    if rank is not None:
        raise PartialFormatError(
            f"it names rank {rank}, which is not in the sender's subtree ({_runs_text(allowed)})"
        )


def _first_outside(
    held: npt.NDArray[np.int64], allowed: Sequence[tuple[int, int]], *, none: bool = False
) -> int | None:
    """The first of ``held`` in none of the runs ``allowed`` (``none``: -1, "no rank", is
    allowed too), or None."""
    inside = held == -1 if none else np.zeros(len(held), dtype=bool)
    for first, last in allowed:
        inside |= (held >= first) & (held <= last)
    return None if bool(inside.all()) else int(held[np.flatnonzero(~inside)[0]])


def _check_column_ranks(columns: npt.NDArray[np.int64], allowed: Sequence[tuple[int, int]]) -> None:
    """The ranks that hold each step's minimum and maximum are in ``allowed`` too (or -1)."""
    held = columns[INT_FIELDS.index("min_rank") : INT_FIELDS.index("max_rank") + 1].ravel()
    rank = _first_outside(held, allowed, none=True)
    if rank is not None:
        raise PartialFormatError(
            f"it names rank {rank} (a minimum's or maximum's), which is not in the sender's "
            f"subtree ({_runs_text(allowed)})"
        )


def _runs_text(runs: Sequence[tuple[int, int]]) -> str:
    return "ranks " + ", ".join(
        str(first) if first == last else f"{first}-{last}" for first, last in runs
    )


def _decoded_one_rank(
    partial: Decoded,
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
            partial.one_rank.append((rank, {(count,): group}))
            return size * count
    by_rank: dict[int, StepGroups] = {}
    start = 0
    for tag, rank, count in one_rank:
        stop = start + count
        if count:
            groups = by_rank.setdefault(rank, {})
            group_by_steps(groups, tag, steps[start:stop], values[start:stop])
        start = stop
    partial.one_rank.extend(by_rank.items())
    return start


def _check_columns(columns: npt.NDArray[np.int64], tags: list[str], lengths: list[int]) -> None:
    """What merging relies on, for every tag at once: counts >= 1, non-finite counts in range."""
    _check_ascending(columns[0], tags, lengths)
    rows = dict(zip(INT_FIELDS, columns, strict=True))
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


def group_by_steps(
    groups: StepGroups,
    tag: str,
    steps: npt.NDArray[np.int64],
    values: npt.NDArray[np.float64],
) -> None:
    """File ``tag``'s values under the group of its steps (a new group if none has them).

    A group's key is its length and first and last steps, and its steps' bytes when
    another group has that length and those ends already: each tag costs one look-up
    and at most two comparisons of its steps, however many tags share their ends.
    """
    ends = (len(steps), int(steps[0]), int(steps[-1]))
    key: StepKey = ends
    known = groups.get(key)
    if known is not None:
        shared, tags, rows = known
        if shared is steps or bool((shared == steps).all()):  # the key holds the length
            tags.append(tag)
            rows.append(values)
            return
        # Same length and ends, other steps: keyed by the steps themselves (int64 arrays
        # of one length are equal exactly when their bytes are).
        key = (*ends, np.ascontiguousarray(steps, dtype=np.int64).tobytes())
        known = groups.get(key)
        if known is not None:
            known[1].append(tag)
            known[2].append(values)
            return
    groups[key] = (steps, [tag], [values])
