"""How the lineage index file stores its document: a JSON document and arrays, in one ``.npz``.

The document (its layout: :mod:`rankscribe.lineage.index._index_file`) is
stored in the lineage package's one container (:func:`rankscribe.jobview.parts.pack_arrays`:
numpy's ``.npz``, a CRC-32 per member) as its JSON document and its long
columns as ``.npy`` arrays (``docs/lineage-queries.md``, "The index"). A
column of one plain type is not in the JSON: in its place the document holds
the column's number, and its values are the next arrays of the archive, as
the document's ``"columns"`` list describes them (``[kind, value count]``
per column):

- ``i64``: one ``<i8`` array;
- ``f64``: one ``<f8`` array (every float, NaN and -0.0 included);
- ``bool``: one ``|b1`` array;
- ``text``: one ``|u1`` array: UTF-8 (lone surrogates kept, as file names may
  hold them), the values joined by NUL (a column whose text holds a NUL stays
  JSON);
- ``words``: a text column whose values repeat (graph ids, optimizers): its
  distinct values as a ``text`` array, then one ``<i8`` per value numbering
  them (from 0, in order of first appearance);
- ``files``: the lineage files of runs that each have one, as a ``text``
  array of names and one ``<i8`` array holding each run's size, mtime (ns),
  inode and ctime (ns) in turn.

Which columns may be arrays: ``path``, ``dir_mtime``, ``final``,
``create_time``, ``update_time``, ``files``, ``graph``, each field column,
and the positions and values of each ``metric`` and ``user_defined`` key.
Any of them may be JSON instead (a column of mixed types, None among its
values, or numbers beyond 64 bits): an archive with no array is a valid
index too.

Why: decoding 100,000 runs' columns from JSON made a Python object per value
out of text (0.51 s); the same columns as raw arrays are read back and
checked in 0.14 s (``tools/bench/index_containers.py``). The archive's CRCs
detect a changed byte; the arrays' lengths are checked against the counts
(a truncated file is unreadable, never half read); the values' types come
from the kind, so they are what the index's checks expect.
"""

from __future__ import annotations

import array
import functools
import itertools
import sys
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from rankscribe.jobview.parts import MAX_ARRAYS, pack_arrays, unpack_arrays

__all__ = [
    "ColumnsError",
    "FileColumns",
    "TypedColumn",
    "decode_columns",
    "decode_document",
    "encode_document",
    "split_document",
]

_COLUMN_LISTS = ("path", "dir_mtime", "final", "create_time", "update_time", "files", "graph")
_SPARSE = ("metric", "user_defined")
_FILE_NUMBERS = 4
_LITTLE = sys.byteorder == "little"


class TypedColumn(list[Any]):
    """A column read from a binary kind: every value is of :attr:`value_type`."""

    __slots__ = ("value_type",)

    def __init__(self, values: list[Any], value_type: type) -> None:
        super().__init__(values)
        self.value_type = value_type


class ColumnsError(ValueError):
    """The binary columns do not add up: a truncated or damaged file."""


class FileColumns(NamedTuple):
    """A ``files`` column kept as read: one lineage file per run, a name and four numbers.

    ``numbers`` holds each run's size, mtime (ns), inode and ctime (ns) in
    turn: a warm query compares it with the files' ``lstat`` as one array (no
    Python int per value); :meth:`rows` makes the ``[name, size, mtime,
    inode, ctime]`` lists.
    """

    names: list[str]
    numbers: array.array[int]

    @property
    def mtimes(self) -> array.array[int]:
        return self.numbers[1::_FILE_NUMBERS]

    def rows(self) -> list[list[Any]]:
        numbers = iter(self.numbers.tolist())
        return list(map(list, zip(self.names, numbers, numbers, numbers, numbers, strict=False)))


def _numbers(code: str, values: list[Any]) -> bytes:
    packed = array.array(code, values)
    if not _LITTLE:
        packed.byteswap()
    return packed.tobytes()


def _array(code: str, data: bytes | memoryview) -> array.array[Any]:
    packed = array.array(code)
    packed.frombytes(data)
    if not _LITTLE:
        packed.byteswap()
    return packed


def _unpacked(code: str, data: bytes | memoryview) -> list[Any]:
    return _array(code, data).tolist()


def _text(values: list[str]) -> bytes | None:
    joined = "\0".join(values)
    if joined.count("\0") != len(values) - 1:
        return None
    return joined.encode("utf-8", "surrogatepass")


def _encoded(values: list[Any]) -> tuple[str, list[bytes]] | None:
    """A column as a kind and its parts, or None to keep it JSON."""
    if not values:
        return None
    types = set(map(type, values))
    if len(types) != 1:
        return None
    encoder = _ENCODERS.get(types.pop())
    try:
        return None if encoder is None else encoder(values)
    except OverflowError:  # an integer beyond 64 bits
        return None


def _plain(kind: str, encode: Callable[[list[Any]], bytes | None]) -> Any:
    def encoded(values: list[Any]) -> tuple[str, list[bytes]] | None:
        data = encode(values)
        return None if data is None else (kind, [data])

    return encoded


def _files(values: list[list[Any]]) -> tuple[str, list[bytes]] | None:
    """Runs of one lineage file each, ``[name, size, mtime, inode, ctime]``."""
    if set(map(len, values)) != {1 + _FILE_NUMBERS}:
        return None
    names, *numbers = map(list, zip(*values, strict=True))
    if set(map(type, names)) != {str} or any(set(map(type, part)) != {int} for part in numbers):
        return None
    text = _text(names)
    flat = list(itertools.chain.from_iterable(zip(*numbers, strict=True)))
    return None if text is None else ("files", [text, _numbers("q", flat)])


# A text column with at most this share of distinct values is stored as words.
_REPEATED = 4


def _strings(values: list[str]) -> tuple[str, list[bytes]] | None:
    """Text columns: ``words`` when values repeat (ids, names), else ``text``."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) * _REPEATED > len(values):
        text = _text(values)
        return None if text is None else ("text", [text])
    words = _text(distinct)
    if words is None:
        return None
    number = {word: at for at, word in enumerate(distinct)}
    return "words", [words, _numbers("q", list(map(number.__getitem__, values)))]


_ENCODERS: dict[type, Callable[[list[Any]], tuple[str, list[bytes]] | None]] = {
    int: _plain("i64", functools.partial(_numbers, "q")),
    float: _plain("f64", functools.partial(_numbers, "d")),
    bool: _plain("bool", bytes),
    str: _strings,
    list: _files,
}


def _slots(document: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """Each (container, key) of the document where a binary column may stand."""
    for name in _COLUMN_LISTS:
        if name in document:
            yield document, name
    fields = document.get("fields")
    if isinstance(fields, dict):
        for name in fields:
            yield fields, name
    for section in _SPARSE:
        keyed = document.get(section)
        if not isinstance(keyed, dict):
            continue
        for column in keyed.values():
            if isinstance(column, list) and len(column) == 2:
                yield column, 0
                yield column, 1


def encode_document(document: dict[str, Any]) -> bytes:
    """The file's bytes for ``document`` (left as it is: the columns are copied)."""
    line = dict(document)
    for section in ("fields", *_SPARSE):  # containers the slots replace values in
        if isinstance(line.get(section), dict):
            line[section] = {
                key: list(value) if section in _SPARSE and isinstance(value, list) else value
                for key, value in line[section].items()
            }
    described: list[list[Any]] = []
    arrays: list[tuple[str, bytes]] = []
    for container, key in _slots(line):
        values = container[key]
        encoded = _encoded(values) if isinstance(values, list) else None
        if encoded is None:
            continue
        kind, pieces = encoded
        if len(arrays) + len(pieces) > MAX_ARRAYS:
            continue  # a base of tens of thousands of keys: the rest stay JSON
        container[key] = len(described)
        described.append([kind, len(values)])
        arrays += zip(_PART_KINDS[kind], pieces, strict=True)
    line["columns"] = described
    return pack_arrays(line, arrays)


def split_document(data: bytes) -> tuple[Any, list[tuple[str, memoryview]]]:
    """The document (its columns not yet resolved) and the archive's arrays.

    :class:`rankscribe.jobview.parts.ArchiveError` (a ValueError) for a file
    that is not an archive, or whose bytes changed.
    """
    document, arrays = unpack_arrays(data)
    return document, arrays


def _decoders() -> dict[str, Callable[[list[memoryview], int], Any]]:
    def text(parts: list[memoryview], count: int) -> list[Any]:
        return TypedColumn(bytes(parts[0]).decode("utf-8", "surrogatepass").split("\0"), str)

    def words(parts: list[memoryview], count: int) -> list[Any]:
        distinct = text(parts, count)
        codes = _array("q", parts[1])
        if codes and (min(codes) < 0 or max(codes) >= len(distinct)):
            raise ColumnsError("a words column names a word it does not hold")
        return TypedColumn(list(map(distinct.__getitem__, codes)), str)

    def files(parts: list[memoryview], count: int) -> FileColumns:
        found = FileColumns(text(parts, count), _array("q", parts[1]))
        if (len(found.names), len(found.numbers)) != (count, count * _FILE_NUMBERS):
            raise ColumnsError(f"a files column does not hold {count} runs")
        return found

    return {
        "i64": lambda parts, count: TypedColumn(_unpacked("q", parts[0]), int),
        "f64": lambda parts, count: TypedColumn(_unpacked("d", parts[0]), float),
        "bool": lambda parts, count: TypedColumn([value != 0 for value in parts[0]], bool),
        "text": text,
        "words": words,
        "files": files,
    }


_DECODERS = _decoders()
# The .npy kinds of each column kind's arrays, in order.
_PART_KINDS = {
    "i64": ("<i8",),
    "f64": ("<f8",),
    "bool": ("|b1",),
    "text": ("|u1",),
    "words": ("|u1", "<i8"),
    "files": ("|u1", "<i8"),
}


def decode_columns(
    line: dict[str, Any], arrays: list[tuple[str, memoryview]], *, file_columns: bool = False
) -> dict[str, Any]:
    """The document with its array columns in place; ValueError if they do not add up.

    With ``file_columns``, an array ``files`` column is a :class:`FileColumns`
    (else it is made into lists, as a JSON ``files`` column reads).
    """
    described = line.pop("columns", [])
    if not isinstance(described, list):
        raise ColumnsError("'columns' is not a list")
    columns: list[list[Any]] = []
    taken = 0
    for item in described:
        if not (
            isinstance(item, list)
            and len(item) == 2
            and item[0] in _DECODERS
            and type(item[1]) is int
        ):
            raise ColumnsError(f"column description {str(item)[:60]} is not [kind, count]")
        kind, count = item
        kinds = _PART_KINDS[kind]
        parts = arrays[taken : taken + len(kinds)]
        taken += len(kinds)
        if tuple(part_kind for part_kind, _ in parts) != kinds:
            raise ColumnsError(f"a {kind} column is not stored as arrays of {', '.join(kinds)}")
        values = _DECODERS[kind]([data for _, data in parts], count)
        if isinstance(values, FileColumns) and not file_columns:
            values = values.rows()
        if len(values) != count and not isinstance(values, FileColumns):
            raise ColumnsError(f"a {kind} column holds {len(values)} values, not {count}")
        columns.append(values)
    if taken != len(arrays):
        raise ColumnsError(f"{len(arrays) - taken} arrays after the index's columns")
    for container, key in list(_slots(line)):
        number = container[key]
        if type(number) is int:
            if not 0 <= number < len(columns):
                raise ColumnsError(f"column {key!r} refers to no stored column")
            container[key] = columns[number]
    return line


def decode_document(data: bytes) -> Any:
    """A whole file's document, every column a list (what :func:`encode_document` took)."""
    line, arrays = split_document(data)
    return decode_columns(line, arrays) if isinstance(line, dict) else line
