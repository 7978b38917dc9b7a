"""Scalar curves as NumPy columns: :func:`scalar_arrays` (what it returns: docs/reading.md).

A file is read in chunks. In each chunk the records are found and their CRCs
checked in bulk (``_record_table.py``); the records of one length are gathered
into rows, and the first of them is walked byte by byte (``_wire.py``) to give
a template: the bytes that fix its shape and where its step and numbers lie.
Every row that shares those bytes has that shape, so its numbers are read as
columns in a few NumPy operations, whatever the number of records. A record
the walk does not accept (a graph, an image, a histogram, anything unusual) is
parsed by protobuf, as ``reader.scalars`` always did.
"""

from __future__ import annotations

import io
import itertools
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError, Message

from rankscribe.writer._framing import HEADER_SIZE, RECORD_OVERHEAD
from rankscribe.writer._names import coerce_kind
from rankscribe.writer.errors import CorruptRecordError, WriterTypeError, WriterValueError
from rankscribe.writer.files import FileKind, file_kind, list_summary_files
from rankscribe.writer.pb import summary_pb2, tensorboard_pb2
from rankscribe.writer.reader._record_table import RecordTable, record_table
from rankscribe.writer.reader._wire import Schema, Template, scalar_template

# Named after the package, like the event readers, so one logger configures both.
logger = logging.getLogger("rankscribe.writer.reader")

PathLike = str | os.PathLike[str]
Int64Array = npt.NDArray[np.int64]
Float64Array = npt.NDArray[np.float64]
ScalarArrays = dict[str, tuple[Int64Array, Float64Array]]

# Read this much of a file at a time. It bounds the memory a read needs (the
# chunk, its rows and their masks) whatever the size of the file, and it is
# small enough that one chunk's buffers are reused for the next: memory fresh
# from the system costs a page fault per page, and 32 MB chunks made a first
# read in a new process twice as slow as 4 MB ones (measured).
_CHUNK_BYTES = 4 << 20

# A template that matches fewer than 1 in this many of the records left in its
# group, or this many records in a row that the walk refuses, and the rest of
# the group is parsed by protobuf: a file of all-different records costs no
# more than protobuf would.
_POOR_TEMPLATE = 16
_REFUSALS = 8

_SCALARS_PLUGIN = b"scalars"

_MESSAGE_TYPES: dict[Schema, type[Message]] = {
    Schema.SUMMARY: summary_pb2.Event,
    Schema.TENSORBOARD: tensorboard_pb2.Event,
}


@dataclass(frozen=True)
class _Piece:
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
class _Singles:
    """Points of records parsed by protobuf, as Python lists until the chunk ends."""

    ordinals: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def piece(self) -> _Piece:
        """The points in file order (records come here grouped by length, not in order)."""
        ordinals = np.array(self.ordinals, dtype=np.int64)
        positions = np.array(self.positions, dtype=np.int64)
        order = np.lexsort((positions, ordinals))
        return _Piece(
            ordinals[order],
            positions[order],
            np.array(self.steps, dtype=np.int64)[order],
            np.array(self.values, dtype=np.float64)[order],
        )


class _Curves:
    """The points found so far, per tag and in any order; :meth:`result` orders them."""

    def __init__(self, wanted: frozenset[str] | None) -> None:
        self.wanted = wanted
        # Points, and TensorBoard tensor-form points, which count only for a
        # tag whose first metadata names the scalars plugin.
        self.points: dict[str, list[_Piece]] = {}
        self.tensor_points: dict[str, list[_Piece]] = {}
        self.single_points: dict[str, _Singles] = {}
        self.single_tensor_points: dict[str, _Singles] = {}
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
            singles = store[tag] = _Singles()
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


def _in_file_order(pieces: list[_Piece]) -> tuple[tuple[int, int], Int64Array, Float64Array]:
    """Join the pieces of one tag in file order; sort point by point only when they interleave."""
    # Each piece is in file order (a template's rows come in order; protobuf's
    # points are sorted when their piece is made).
    pieces = sorted(pieces, key=lambda piece: piece.first)
    apart = all(before.last < after.first for before, after in itertools.pairwise(pieces))
    first = pieces[0].first
    if len(pieces) == 1 and apart:
        return first, pieces[0].steps, pieces[0].values
    steps = np.concatenate([piece.steps for piece in pieces])
    values = np.concatenate([piece.values for piece in pieces])
    if not apart:
        ordinals = np.concatenate([piece.ordinals for piece in pieces])
        positions = np.concatenate([piece._positions() for piece in pieces])
        order = np.lexsort((positions, ordinals))
        steps, values = steps[order], values[order]
    return first, steps, values


# --------------------------------------------------------------------------
# One file
# --------------------------------------------------------------------------


@dataclass
class _FileRead:
    path: Path
    schema: Schema
    strict: bool
    curves: _Curves
    first_ordinal: int
    read: int = 0  # records parsed without error, for the torn-tail message

    @property
    def message_type(self) -> type[Message]:
        return _MESSAGE_TYPES[self.schema]

    def error(self, offset: int, reason: str) -> CorruptRecordError:
        return CorruptRecordError(os.fspath(self.path), offset, reason)


def _read_file(file: _FileRead) -> int:
    """Read one file into ``file.curves``; return how many records it holds."""
    records = 0
    with open(file.path, "rb") as stream:
        carried = b""
        base = 0  # file offset of the buffer's first byte
        wanted = 0
        buffer = bytearray()
        while True:
            size = max(_CHUNK_BYTES, wanted - len(carried))
            buffer, filled = _fill(stream, buffer, carried, size)
            final = filled < len(carried) + size
            table = record_table(memoryview(buffer)[:filled])
            ordinals = file.first_ordinal + records + np.arange(table.offsets.size)
            errors = [file.error(base + d.offset, d.reason) for d in table.damage]
            errors += _parse_records(file, buffer, base, table, ordinals)
            records += table.offsets.size
            errors.sort(key=lambda error: error.offset)
            _report(file, errors)
            if table.stopped_by_damage:
                return records
            if final:
                left = filled - table.stop
                if left:
                    _report_torn_tail(file, base + table.stop, left, table.wanted)
                return records
            carried = bytes(buffer[table.stop : filled])
            base += table.stop
            wanted = table.wanted


def _fill(
    stream: io.BufferedIOBase, buffer: bytearray, carried: bytes, size: int
) -> tuple[bytearray, int]:
    """``carried`` then up to ``size`` bytes of ``stream``, read in place; and how many in all.

    ``buffer`` is the previous chunk's, reused when it is large enough (nothing
    read from it is kept: every column is a copy). The bytes read are followed
    by 8 zeros: rows are read in whole 8-byte words, so a row may run past the
    last record. A plain read, not a memory map, because a file truncated
    under a map kills the process (SIGBUS) where a read sees less.
    """
    end = len(carried) + size
    if len(buffer) < end + 8:
        buffer = bytearray(end + 8)
    buffer[: len(carried)] = carried
    view = memoryview(buffer)
    filled = len(carried)
    while filled < end:
        count = stream.readinto(view[filled:end])
        if not count:
            break
        filled += count
    view.release()
    buffer[filled : filled + 8] = bytes(8)
    return buffer, filled


def _report(file: _FileRead, errors: list[CorruptRecordError]) -> None:
    if errors and file.strict:
        raise errors[0]
    for error in errors:
        logger.warning("%s; skipped", error)


def _report_torn_tail(file: _FileRead, offset: int, left: int, wanted: int) -> None:
    if left < HEADER_SIZE:
        reason = f"{left} of {HEADER_SIZE} header bytes"
    else:
        reason = f"{left - HEADER_SIZE} of {wanted - HEADER_SIZE} payload bytes"
    logger.warning(
        "%s: the last record, at byte %d, is incomplete (%s), as a writer that "
        "stopped mid-write leaves it; the %d records before it were read",
        file.path,
        offset,
        reason,
        file.read,
    )


def _parse_records(
    file: _FileRead, buffer: bytearray, base: int, table: RecordTable, ordinals: Int64Array
) -> list[CorruptRecordError]:
    """Read the scalars of the records in ``table``; return those protobuf refused.

    ``buffer`` ends in at least 8 zeros past the records (see :func:`_fill`).
    """
    if not table.offsets.size:
        return []
    starts = table.offsets + HEADER_SIZE
    lengths = table.lengths
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
    errors: list[CorruptRecordError] = []
    for group in np.split(order, bounds):
        length = int(lengths[group[0]])
        group_errors = _Group(file, buffer, base, length, starts[group], ordinals[group]).read()
        errors.extend(group_errors)
    file.read += table.offsets.size - len(errors)
    file.curves.flush_singles()
    return errors


class _Group:
    """The records of one payload length within a chunk (see the module docstring)."""

    def __init__(
        self,
        file: _FileRead,
        buffer: bytearray,
        base: int,
        length: int,
        starts: Int64Array,
        ordinals: Int64Array,
    ) -> None:
        self.file = file
        self.buffer = buffer
        self.base = base
        self.length = length
        self.starts = starts
        self.ordinals = ordinals
        self.errors: list[CorruptRecordError] = []

    def read(self) -> list[CorruptRecordError]:
        if self.length == 0:
            return []  # an empty Event: valid, and without scalars
        width = (self.length + 7) // 8 * 8
        words = self._rows(width)
        left = np.arange(self.starts.size)
        refusals = 0
        while left.size:
            first = int(left[0])
            start = int(self.starts[first])
            payload = bytes(self.buffer[start : start + self.length])
            template = scalar_template(payload, self.file.schema)
            if template is None:
                self._single(first)
                left = left[1:]
                refusals += 1
                if refusals >= _REFUSALS:
                    break
                continue
            candidates = words if left.size == self.starts.size else words[left]
            matches = _matches(candidates, template, width)
            if not matches[0]:  # cannot happen: a record has its own shape; never loop on it
                self._single(first)
                left = left[1:]
                continue
            refusals = 0
            matched = int(np.count_nonzero(matches))
            if matched == left.size:
                self._emit(template, candidates, self.ordinals[left])
            else:
                self._emit(template, candidates[matches], self.ordinals[left[matches]])
            left = left[~matches]
            if matched * _POOR_TEMPLATE < left.size:
                break
        for index in left.tolist():
            self._single(index)
        return self.errors

    def _rows(self, width: int) -> npt.NDArray[np.uint64]:
        """The group's records as rows of ``width // 8`` words (a view when they run back to back).

        Records are at least a record apart, so first and last exactly that far
        apart means every one is: a training loop's steps, read without a copy.
        """
        count = self.starts.size
        stride = self.length + RECORD_OVERHEAD
        first = int(self.starts[0])
        if int(self.starts[-1]) - first == stride * (count - 1):
            return np.ndarray((count, width // 8), dtype="<u8", buffer=self.buffer,
                              offset=first, strides=(stride, 8))
        windows = np.ndarray(
            (len(self.buffer) - width + 1,),
            dtype=np.dtype((np.void, width)),
            buffer=self.buffer,
            offset=0,
            strides=(1,),
        )
        return windows[self.starts].view("<u8").reshape(count, width // 8)

    def _emit(
        self, template: Template, rows: npt.NDArray[np.uint64], ordinals: Int64Array
    ) -> None:
        curves = self.file.curves
        cells = rows.view(np.uint8)  # (rows, width) bytes, whatever the rows' stride
        steps = _steps(cells, template.step)
        for metadata in template.metadata:
            tag = curves.name(metadata.tag, self.file.path)
            if tag is not None:
                curves.add_metadata(tag, int(ordinals[0]), metadata.position, metadata.plugin)
        for slot in template.scalars:
            tag = curves.name(slot.tag, self.file.path)
            if tag is None:
                continue
            dtype = "<f4" if slot.width == 4 else "<f8"
            number = cells[:, slot.offset : slot.offset + slot.width].view(dtype)
            values = number[:, 0].astype(np.float64)
            store = curves.tensor_points if slot.tensor else curves.points
            store.setdefault(tag, []).append(_Piece(ordinals, slot.position, steps, values))

    def _single(self, index: int) -> None:
        """Parse one record with protobuf, as ``reader.scalars`` always did."""
        start = int(self.starts[index])
        payload = bytes(self.buffer[start : start + self.length])
        file = self.file
        try:
            event = file.message_type.FromString(payload)
        except (DecodeError, UnicodeDecodeError) as exc:
            self.errors.append(file.error(
                self.base + start - HEADER_SIZE,
                f"payload of {len(payload)} bytes is not a valid "
                f"{file.message_type.DESCRIPTOR.full_name}: {exc}",
            ))
            return
        if event.WhichOneof("what") != "summary":
            return
        ordinal = int(self.ordinals[index])
        step = event.step  # type: ignore[attr-defined]
        for position, value in enumerate(event.summary.value):  # type: ignore[attr-defined]
            which = value.WhichOneof("value")
            if file.schema is Schema.SUMMARY:
                if which == "scalar_value":
                    tag = file.curves.name(value.tag, file.path)
                    if tag is not None:
                        file.curves.add_single(
                            tag, ordinal, position, step, value.scalar_value, tensor=False
                        )
                continue
            self._single_tensorboard_value(value, ordinal, position, step, start)

    def _single_tensorboard_value(
        self, value: tensorboard_pb2.Summary.Value, ordinal: int, position: int, step: int,
        start: int,
    ) -> None:
        curves = self.file.curves
        tag = curves.name(value.tag, self.file.path)
        if tag is None:
            return
        if value.HasField("metadata"):
            plugin = value.metadata.plugin_data.plugin_name.encode()
            curves.add_metadata(tag, ordinal, position, plugin)
        which = value.WhichOneof("value")
        if which == "simple_value":
            curves.add_single(tag, ordinal, position, step, value.simple_value, tensor=False)
        elif which == "tensor":
            number = tensor_number(value.tensor)
            if number is None:
                where = f"{self.file.path} at byte {self.base + start - HEADER_SIZE}"
                curves.unreadable.setdefault(tag, []).append(where)
            else:
                curves.add_single(tag, ordinal, position, step, number, tensor=True)


def _matches(rows: npt.NDArray[np.uint64], template: Template, width: int) -> npt.NDArray[np.bool_]:
    padding = bytes(width - template.length)
    mask = np.frombuffer(template.mask + padding, dtype="<u8")
    expected = np.frombuffer(template.expected + padding, dtype="<u8")
    differences = rows ^ expected
    differences &= mask
    return np.asarray(np.bitwise_or.reduce(differences, axis=1) == 0)


def _steps(cells: npt.NDArray[np.uint8], step: tuple[int, int] | None) -> Int64Array:
    if step is None:
        return np.zeros(cells.shape[0], dtype=np.int64)  # no step on the wire reads as 0
    offset, size = step
    result = np.zeros(cells.shape[0], dtype=np.uint64)
    for index in range(size):
        byte = cells[:, offset + index]
        # The tenth byte adds only bit 63: protobuf truncates a varint to 64 bits.
        result |= (byte & np.uint8(0x7F)).astype(np.uint64) << np.uint64(7 * index)
    # Two's complement: a step of 2**63-1 stays that number, never a float on the way.
    return result.view(np.int64)


# TensorBoard DataType -> the NumPy type of its tensor_content.
_CONTENT_TYPES = {
    1: "<f4", 2: "<f8", 3: "<i4", 4: "u1", 5: "<i2", 6: "i1", 9: "<i8", 10: "?",
    17: "<u2", 19: "<f2", 22: "<u4", 23: "<u8",
}
_BFLOAT16 = 14


def tensor_number(tensor: tensorboard_pb2.TensorProto) -> float | None:
    """The one number a TensorBoard tensor holds, as TensorBoard's scalars plugin reads it.

    ``None`` when the tensor holds more or fewer than one number, or numbers of
    a type that is not numeric.
    """
    shape = tensor.tensor_shape
    if shape.unknown_rank or any(dim.size != 1 for dim in shape.dim):
        return None
    dtype = tensor.dtype
    numbers: npt.NDArray[np.generic] | None
    if tensor.tensor_content:
        if dtype == _BFLOAT16:
            raw = np.frombuffer(tensor.tensor_content, dtype="<u2")
            numbers = (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
        elif dtype in _CONTENT_TYPES and len(tensor.tensor_content) % np.dtype(
            _CONTENT_TYPES[dtype]
        ).itemsize == 0:
            numbers = np.frombuffer(tensor.tensor_content, dtype=_CONTENT_TYPES[dtype])
        else:
            return None
    else:
        numbers = _listed_numbers(tensor)
    return float(numbers[0]) if numbers is not None and numbers.size == 1 else None


# TensorBoard DataType -> the repeated field that lists its numbers.
_LISTED_FIELDS = {
    1: "float_val", 2: "double_val", 3: "int_val", 4: "int_val", 5: "int_val", 6: "int_val",
    17: "int_val", 9: "int64_val", 10: "bool_val",
}


def _listed_numbers(tensor: tensorboard_pb2.TensorProto) -> npt.NDArray[np.float64] | None:
    dtype = tensor.dtype
    if dtype in _LISTED_FIELDS:
        return np.array(getattr(tensor, _LISTED_FIELDS[dtype]), dtype=np.float64)
    if dtype == 19:  # half: the 16 bits of each number, in int32 slots
        return np.array(tensor.half_val, dtype=np.uint16).view(np.float16).astype(np.float64)
    if dtype == _BFLOAT16:
        raw = np.array(tensor.half_val, dtype=np.uint32) << np.uint32(16)
        return raw.view(np.float32).astype(np.float64)
    return None


# --------------------------------------------------------------------------
# The public entry point
# --------------------------------------------------------------------------


def _wanted_tags(tags: Iterable[str] | None) -> frozenset[str] | None:
    if tags is None:
        return None
    if isinstance(tags, (str, bytes)):
        raise WriterTypeError(
            f"tags must be None or a collection of str tags (a list or a set), "
            f"not a single {type(tags).__name__}: got {tags!r}; write tags=[{tags!r}]"
        )
    try:
        items = list(tags)
    except TypeError:
        raise WriterTypeError(
            f"tags must be None or a collection of str tags, got {type(tags).__name__}"
        ) from None
    for item in items:
        if not isinstance(item, str):
            raise WriterTypeError(
                f"tags must hold str tags only, got {item!r} ({type(item).__name__})"
            )
    return frozenset(items)


_SCHEMA_OF_KIND = {FileKind.SUMMARY: Schema.SUMMARY, FileKind.TENSORBOARD: Schema.TENSORBOARD}


def _sources(source: PathLike, kind: FileKind | str | None) -> list[tuple[Path, Schema]]:
    if not isinstance(source, (str, os.PathLike)):
        raise WriterTypeError(
            f"path must be a str or os.PathLike naming an event file or a directory, "
            f"got {type(source).__name__}"
        )
    wanted = coerce_kind(kind)
    if wanted is FileKind.LINEAGE:
        raise WriterValueError(
            "kind='lineage' holds no scalars; pass kind='summary', 'tensorboard' or None"
        )
    path = Path(source)
    if path.is_dir():
        if wanted is None:
            # A run written in both formats holds the same scalars twice: read
            # its summary files, and TensorBoard files only when there are none.
            files = list_summary_files(path, FileKind.SUMMARY)
            resolved = FileKind.SUMMARY
            if not files:
                files = list_summary_files(path, FileKind.TENSORBOARD)
                resolved = FileKind.TENSORBOARD
        else:
            files, resolved = list_summary_files(path, wanted), wanted
        return [(file, _SCHEMA_OF_KIND[resolved]) for file in files]
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {os.fspath(path)!r}")
    resolved = wanted or file_kind(path) or FileKind.SUMMARY
    if resolved is FileKind.LINEAGE:
        raise WriterValueError(
            f"{os.fspath(path)!r} is a lineage file by its name, holds no scalars; "
            "scalars are in summary (_MS) and TensorBoard (tfevents) files"
        )
    return [(path, _SCHEMA_OF_KIND[resolved])]


def scalar_arrays(
    path: PathLike,
    tags: Iterable[str] | None = None,
    *,
    strict: bool = False,
    kind: FileKind | str | None = None,
) -> ScalarArrays:
    """Return the scalar curves of an event file or directory as NumPy arrays.

    ``{tag: (steps, values)}``: ``steps`` is int64 and ``values`` float64 (the
    stored float32, widened exactly; TensorBoard's double tensors as they are),
    both in file order. Tags keep their first-seen order; a tag written twice in
    one step appears twice. An event without a step counts as step 0.

    Args:
        path: a summary (``_MS``) or TensorBoard (``tfevents``) file, or a run
            directory: its summary files, or its TensorBoard files when it has
            no summary file, in :func:`list_summary_files` order.
        tags: only these tags are read (the others are skipped without being
            decoded); ``None`` reads every tag. Tags that have no point are left out.
        strict: raise :class:`CorruptRecordError` at the first damaged record
            instead of logging and skipping it, as the event readers do.
        kind: ``"summary"`` or ``"tensorboard"`` when a file's name does not
            say; for a directory, which of its files to read.

    A tag that is not UTF-8 (a foreign or damaged MindSpore file) is read
    with backslash escapes and logged, naming the file; in a TensorBoard file
    such a record is damage, as protobuf and TensorBoard see it. See
    docs/reading.md.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        WriterTypeError: ``path`` or ``tags`` is not of the accepted form.
        WriterValueError: ``path`` is a lineage file, or ``kind`` is not valid.
        CorruptRecordError: with ``strict``, a damaged record.
    """
    wanted = _wanted_tags(tags)
    curves = _Curves(wanted)
    first_ordinal = 0
    for file, schema in _sources(path, kind):
        first_ordinal += _read_file(_FileRead(file, schema, strict, curves, first_ordinal))
    return curves.result()
