"""Many tags' scalars at many steps, encoded as one ``Event`` per step in either schema.

The job view writes about 750,000 values per file (70 curves of 10,000 steps); a
protobuf object per value would take seconds. Each tag's ``Summary.value`` entry is the
same bytes at every step but for its 4 float bytes, and steps that hold the same tags
share one byte layout: such a group of steps is filled with a few NumPy assignments,
and each step's event is its head (``wall_time``, ``step``) and that row. The bytes are
those protobuf writes for the same message (``docs/file-format.md``, "Payloads"); the
writer's tests parse them back with protobuf.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from rankscribe.writer.format._events import (
    EVENT_STEP_KEY,
    scalar_value_prefix,
    summary_field_head,
    wall_time_field,
)


@lru_cache(maxsize=4096)
def _value_prefix(tag: str, tensorboard: bool) -> bytes:
    return scalar_value_prefix(tag, tensorboard=tensorboard)


@dataclass(frozen=True)
class StepLayout:
    """Which tags (columns) a group of steps (rows) holds; every row of it the same."""

    rows: npt.NDArray[np.int64]
    columns: npt.NDArray[np.int64]


@dataclass(frozen=True)
class ScalarTable:
    """Every column's float32 value at every step, and the layouts of the steps."""

    tags: tuple[str, ...]
    steps: npt.NDArray[np.int64]  # ascending, each once
    values: npt.NDArray[np.float32]  # (steps, columns); what a step lacks is never read
    layouts: tuple[StepLayout, ...]

    @classmethod
    def of(
        cls,
        tags: Sequence[str],
        steps: Sequence[npt.NDArray[np.int64]],
        values: Sequence[npt.NDArray[np.float64]],
    ) -> ScalarTable:
        """The table of columns ``tags[i]`` at ``steps[i]`` holding ``values[i]``.

        A step given twice in one column keeps the value given last. Values beyond
        float32's range become +-inf, as NumPy rounds them.
        """
        if not tags:
            empty = np.zeros(0, dtype=np.int64)
            return cls((), empty, np.zeros((0, 0), dtype=np.float32), ())
        first = np.asarray(steps[0], dtype=np.int64)
        if _ascending(first) and all(np.array_equal(first, other) for other in steps[1:]):
            # Every column at the same steps, each once (the collector's timings): one
            # layout, the values as they are, no search.
            table = np.empty((len(first), len(tags)), dtype=np.float32)
            with np.errstate(over="ignore", invalid="ignore"):
                for column, column_values in enumerate(values):
                    table[:, column] = column_values
            everything = StepLayout(
                np.arange(len(first), dtype=np.int64), np.arange(len(tags), dtype=np.int64)
            )
            return cls(tuple(tags), first, table, (everything,))
        all_steps = _distinct(np.concatenate(steps))
        present = np.zeros((len(all_steps), len(tags)), dtype=bool)
        table = np.zeros((len(all_steps), len(tags)), dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            for column, (column_steps, column_values) in enumerate(zip(steps, values, strict=True)):
                rows = np.searchsorted(all_steps, column_steps)
                present[rows, column] = True
                table[rows, column] = column_values
        # Rows grouped by the columns they hold: the rows sorted by their bits (packed into
        # bytes; a stable sort, so ascending within a group), cut where the bits change.
        # NumPy's unique of the bytes as one value took 1.3-9 times as long.
        packed = np.packbits(present, axis=1)
        if (packed == packed[0]).all():  # every step holds the same tags
            groups = [np.arange(len(all_steps), dtype=np.int64)]
        else:
            order = np.lexsort(packed.T[::-1])
            ordered = packed[order]
            groups = np.split(order, np.flatnonzero((ordered[1:] != ordered[:-1]).any(axis=1)) + 1)
        layouts = [StepLayout(rows, np.flatnonzero(present[rows[0]])) for rows in groups]
        return cls(tuple(tags), all_steps, table, tuple(layouts))

    def events(self, wall_time: float, *, tensorboard: bool) -> list[bytes]:
        """One serialized ``Event`` per step, in step order, holding that step's scalars."""
        prefixes = [_value_prefix(tag, tensorboard) for tag in self.tags]
        wall = wall_time_field(wall_time, tensorboard=tensorboard)
        step_bytes, step_sizes = step_fields(self.steps, tensorboard=tensorboard)
        result: list[bytes] = [b""] * len(self.steps)
        little_endian = self.values.astype("<f4", copy=False)
        for layout in self.layouts:
            skeleton = bytearray()
            holes = []
            for column in layout.columns.tolist():
                skeleton += prefixes[column]
                holes.append(len(skeleton))
                skeleton += bytes(4)
            body = np.frombuffer(summary_field_head(len(skeleton)) + skeleton, dtype=np.uint8)
            floats = little_endian[np.ix_(layout.rows, layout.columns)].view(np.uint8)
            # Each step field's length (its varint's; none for step 0 in TensorBoard's
            # schema) gives one array of whole events, filled column by column and cut
            # into rows: no Python work per value, one slice per step.
            sizes = step_sizes[layout.rows]
            alike = bool((sizes == sizes[0]).all())
            for size in [int(sizes[0])] if alike else np.unique(sizes).tolist():
                chosen = slice(None) if alike else sizes == size
                rows = layout.rows[chosen]
                head = len(wall) + size
                width = head + len(body)
                filled = np.empty((len(rows), width), dtype=np.uint8)
                filled[:, : len(wall)] = np.frombuffer(wall, dtype=np.uint8)
                filled[:, len(wall) : head] = step_bytes[rows, :size]
                filled[:, head:] = body
                values = floats[chosen]
                start = width - len(skeleton)
                for index, hole in enumerate(holes):
                    at = start + hole
                    filled[:, at : at + 4] = values[:, 4 * index : 4 * index + 4]
                blob = filled.tobytes()
                for place, row in enumerate(rows.tolist()):
                    result[row] = blob[place * width : (place + 1) * width]
        return result


def _distinct(steps: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``steps`` sorted, each once (``np.unique``'s result, by a sort)."""
    ordered = np.sort(steps)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _ascending(steps: npt.NDArray[np.int64]) -> bool:
    """Whether ``steps`` are non-empty and strictly ascending (each step once)."""
    return len(steps) > 0 and bool((steps[1:] > steps[:-1]).all())


# A varint's bytes hold 7 bits each: 10 of them hold any 64-bit number.
_VARINT_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)
# The least number of each length past one byte: 2^7, 2^14, ... 2^63.
_VARINT_LIMITS = np.uint64(1) << _VARINT_SHIFTS[1:]
_GROUP_INDEX = np.arange(10)


def step_fields(
    steps: npt.NDArray[np.int64], *, tensorboard: bool
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Each step's ``Event.step`` field (its key and varint) as rows of bytes, and their sizes.

    A negative step is its 64-bit two's complement (10 bytes), as protobuf writes an int64;
    TensorBoard's schema leaves out a step of 0 (size 0).
    """
    number = steps.astype(np.int64).view(np.uint64)
    # A varint is as long as the last of its groups that holds a bit (at least one); the
    # bytes before its last carry the continuation bit. Only the longest's groups are made
    # (steps under 2^14, two of the ten).
    lengths = 1 + np.searchsorted(_VARINT_LIMITS, number, side="right")
    longest = int(lengths.max()) if len(lengths) else 1
    fields = np.empty((len(steps), 1 + longest), dtype=np.uint8)
    fields[:, 0] = EVENT_STEP_KEY[0]
    fields[:, 1:] = (number[:, None] >> _VARINT_SHIFTS[:longest]).astype(np.uint8) & 0x7F
    fields[:, 1:] |= ((lengths - 1)[:, None] > _GROUP_INDEX[:longest]).view(np.uint8) << 7
    sizes = (1 + lengths).astype(np.int64)
    if tensorboard:
        sizes[steps == 0] = 0
    return fields, sizes
