"""The points of a read, per tag, in any order until they are put in file order.

Records reach the reader grouped by shape, not in file order; each point keeps
the number of its record in the whole read and its place among the record's
values, and :meth:`Curves.result` joins each tag's pieces in file order
(docs/reading.md).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

# Named after the package, like the event readers, so one logger configures both.
logger = logging.getLogger("rankscribe.writer.reader")

Int64Array = npt.NDArray[np.int64]
Float64Array = npt.NDArray[np.float64]
ScalarArrays = dict[str, tuple[Int64Array, Float64Array]]

_SCALARS_PLUGIN = b"scalars"


@dataclass(frozen=True)
class Piece:
    """Points of one tag read together: from one template, or from protobuf in one chunk.

    ``ordinals`` numbers each point's record in the whole read and ``positions``
    (one number for a template's piece) its place among the record's values:
    together they give file order.
    """

    ordinals: Int64Array
    positions: Int64Array | int
    steps: Int64Array
    values: Float64Array

    @property
    def first(self) -> tuple[int, int]:
        return int(self.ordinals[0]), self._position(0)

    @property
    def last(self) -> tuple[int, int]:
        return int(self.ordinals[-1]), self._position(-1)

    def _position(self, index: int) -> int:
        positions = self.positions
        return positions if isinstance(positions, int) else int(positions[index])

    def _positions(self) -> Int64Array:
        if isinstance(self.positions, int):
            return np.full(self.ordinals.size, self.positions, dtype=np.int64)
        return self.positions


@dataclass
class Singles:
    """Points of records parsed by protobuf, as Python lists until the chunk ends."""

    ordinals: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def piece(self) -> Piece:
        """The points in file order (records come here grouped by length, not in order)."""
        ordinals = np.array(self.ordinals, dtype=np.int64)
        positions = np.array(self.positions, dtype=np.int64)
        order = np.lexsort((positions, ordinals))
        return Piece(
            ordinals[order],
            positions[order],
            np.array(self.steps, dtype=np.int64)[order],
            np.array(self.values, dtype=np.float64)[order],
        )


class Curves:
    """The points found so far, per tag and in any order; :meth:`result` orders them."""

    def __init__(self, wanted: frozenset[str] | None) -> None:
        self.wanted = wanted
        # Points, and TensorBoard tensor-form points, which count only for a
        # tag whose first metadata names the scalars plugin.
        self.points: dict[str, list[Piece]] = {}
        self.tensor_points: dict[str, list[Piece]] = {}
        self.single_points: dict[str, Singles] = {}
        self.single_tensor_points: dict[str, Singles] = {}
        self.first_metadata: dict[str, tuple[int, int, bytes]] = {}
        self.unreadable: dict[str, list[str]] = {}
        self._names: dict[bytes, str | None] = {}
        self._warned: set[tuple[str, bytes]] = set()

    def name(self, tag: bytes | str, path: Path) -> str | None:
        """The tag as text, or ``None`` when it was not asked for."""
        if isinstance(tag, str):
            return tag if self.wanted is None or tag in self.wanted else None
        try:
            return self._names[tag]
        except KeyError:
            pass
        try:
            text = tag.decode("utf-8")
        except UnicodeDecodeError:
            # Escaped rather than replaced: two different damaged tags stay two curves.
            text = tag.decode("utf-8", "backslashreplace")
            if (str(path), tag) not in self._warned:
                self._warned.add((str(path), tag))
                logger.warning("%s: a scalar tag is not UTF-8; it is read as %r", path, text)
            # Not cached, so that each file holding it is named in a warning.
            return text if self.wanted is None or text in self.wanted else None
        result = text if self.wanted is None or text in self.wanted else None
        self._names[tag] = result
        return result

    def add_metadata(self, tag: str, ordinal: int, position: int, plugin: bytes) -> None:
        known = self.first_metadata.get(tag)
        if known is None or (ordinal, position) < known[:2]:
            self.first_metadata[tag] = (ordinal, position, plugin)

    def add_single(
        self, tag: str, ordinal: int, position: int, step: int, value: float, *, tensor: bool
    ) -> None:
        store = self.single_tensor_points if tensor else self.single_points
        singles = store.get(tag)
        if singles is None:
            singles = store[tag] = Singles()
        singles.ordinals.append(ordinal)
        singles.positions.append(position)
        singles.steps.append(step)
        singles.values.append(value)

    def flush_singles(self) -> None:
        for store, pieces in (
            (self.single_points, self.points),
            (self.single_tensor_points, self.tensor_points),
        ):
            for tag, singles in store.items():
                pieces.setdefault(tag, []).append(singles.piece())
            store.clear()

    def result(self) -> ScalarArrays:
        curves: list[tuple[tuple[int, int], str, Int64Array, Float64Array]] = []
        for tag in {**self.points, **self.tensor_points}:
            pieces = list(self.points.get(tag, ()))
            metadata = self.first_metadata.get(tag)
            is_scalar_tensor = metadata is not None and metadata[2] == _SCALARS_PLUGIN
            if is_scalar_tensor:
                pieces.extend(self.tensor_points.get(tag, ()))
                for where in self.unreadable.get(tag, ()):
                    logger.warning(
                        "%s: a value of scalar tag %r is not one number; skipped", where, tag
                    )
            pieces = [piece for piece in pieces if piece.ordinals.size]
            if not pieces:
                continue
            first, steps, values = _in_file_order(pieces)
            curves.append((first, tag, steps, values))
        curves.sort(key=lambda curve: curve[0])
        return {tag: (steps, values) for _, tag, steps, values in curves}


def _in_file_order(pieces: list[Piece]) -> tuple[tuple[int, int], Int64Array, Float64Array]:
    """Join the pieces of one tag in file order; sort point by point only when they interleave."""
    # Each piece is in file order (a template's rows come in order; protobuf's
    # points are sorted when their piece is made).
    pieces = sorted(pieces, key=lambda piece: piece.first)
    apart = all(before.last < after.first for before, after in itertools.pairwise(pieces))
    first = pieces[0].first
    if len(pieces) == 1 and apart:
        # The tags of one template share their steps: each curve gets its own copy.
        return first, pieces[0].steps.copy(), pieces[0].values
    steps = np.concatenate([piece.steps for piece in pieces])
    values = np.concatenate([piece.values for piece in pieces])
    if not apart:
        ordinals = np.concatenate([piece.ordinals for piece in pieces])
        positions = np.concatenate([piece._positions() for piece in pieces])
        order = np.lexsort((positions, ordinals))
        steps, values = steps[order], values[order]
    return first, steps, values
