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

from rankscribe.writer.format._events import event_heads, scalar_value_prefix, summary_field_head


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
        all_steps = np.unique(np.concatenate(steps))
        present = np.zeros((len(all_steps), len(tags)), dtype=bool)
        table = np.zeros((len(all_steps), len(tags)), dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            for column, (column_steps, column_values) in enumerate(zip(steps, values, strict=True)):
                rows = np.searchsorted(all_steps, column_steps)
                present[rows, column] = True
                table[rows, column] = column_values
        rows_of_layout: dict[bytes, list[int]] = {}
        for row, key in enumerate(np.packbits(present, axis=1)):
            rows_of_layout.setdefault(key.tobytes(), []).append(row)
        layouts = []
        for members in rows_of_layout.values():
            selected = np.asarray(members, dtype=np.int64)
            layouts.append(StepLayout(selected, np.flatnonzero(present[selected[0]])))
        return cls(tuple(tags), all_steps, table, tuple(layouts))

    def events(self, wall_time: float, *, tensorboard: bool) -> list[bytes]:
        """One serialized ``Event`` per step, in step order, holding that step's scalars."""
        prefixes = [_value_prefix(tag, tensorboard) for tag in self.tags]
        heads = event_heads(wall_time, self.steps.tolist(), tensorboard=tensorboard)
        result: list[bytes] = [b""] * len(heads)
        little_endian = self.values.astype("<f4", copy=False)
        for layout in self.layouts:
            skeleton = bytearray()
            holes = []
            for column in layout.columns.tolist():
                skeleton += prefixes[column]
                holes.append(len(skeleton))
                skeleton += bytes(4)
            filled = np.tile(np.frombuffer(bytes(skeleton), dtype=np.uint8), (len(layout.rows), 1))
            floats = little_endian[np.ix_(layout.rows, layout.columns)].view(np.uint8)
            for index, hole in enumerate(holes):
                filled[:, hole : hole + 4] = floats[:, 4 * index : 4 * index + 4]
            summary_head = summary_field_head(len(skeleton))
            for row, summary in zip(layout.rows.tolist(), filled, strict=True):
                result[row] = b"".join((heads[row], summary_head, summary))
        return result
