"""The one binary container of the lineage package: numpy's ``.npz``, read and written here.

The lineage index (``docs/lineage-queries.md``, "The index") and the job
view's partials (``docs/job-view.md``, "Tree") are each one JSON document and
a few one-dimensional arrays of plain numbers. Both are stored as an
uncompressed ``.npz`` archive: a zip file whose members are

- ``document.json``: the document, UTF-8 JSON;
- ``0.npy``, ``1.npy``, ...: the arrays in order, each a version 1.0 ``.npy``
  file of one dimension and one of the kinds :data:`KINDS` (little-endian
  int64, float64, bool, or bytes as ``uint8``).

``numpy.load`` opens such a file (the arrays by their number, the document
as bytes), as do ``zipfile`` and any zip tool. This module writes and reads
the zip's framing itself, with the standard library alone: reading an index
does not import numpy, and neither side copies the data more than once
(``zipfile`` reads a member in chunks of a few kB, copying each: at the
index's 30 MB that cost ten times the CRCs).

Integrity: the zip format keeps a CRC-32 of every member, and a CRC-32
detects every change of up to 32 consecutive bits, so a changed value (0.2
turned 9.0) is always refused. The reader takes only what :func:`pack`
writes: every header field (dates, versions, attributes) as written, no
comment or extra field (a length that grew would hide what follows it), the
members end to end from the first byte to the directory and the end record
last, so a change of any one byte of the archive is an
:class:`ArchiveError`. It detects damage, not forgery: whoever can rewrite
the file can compute the CRCs again, which is why a reader also checks who
owns the file (``docs/lineage-queries.md``).

Why ``.npz`` and not SQLite or a format of our own: measured with
``tools/bench/index_containers.py`` (the table is in
``docs/lineage-queries.md``, "The index").
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Sequence
from typing import Any

from rankscribe.ranks.jsondata import JSONDataError, parse_json

__all__ = ["KINDS", "MAX_ARRAYS", "ArchiveError", "pack_arrays", "unpack_arrays"]

#: The ``.npy`` type descriptions an archive may hold, with each one's item size.
KINDS = {"<i8": 8, "<f8": 8, "<f4": 4, "|b1": 1, "|u1": 1}
#: The most arrays an archive holds (a zip without its 64-bit extension has 65,535 members).
MAX_ARRAYS = 0xFFFF - 1
_LIMIT = 0xFFFFFFFF  # the largest member size and offset of a zip without the extension
_DOCUMENT = "document.json"
_MAGIC = b"\x93NUMPY\x01\x00"
_HEADER_LENGTH = struct.Struct("<H")
_PREFIX = len(_MAGIC) + _HEADER_LENGTH.size
# What numpy writes for a one-dimensional C-order array (format 1.0), padded with spaces
# to a multiple of 64 bytes and ended by a newline. The kind and the count are found
# here; the header is then compared with the one :func:`_npy_header` writes for them.
_HEADER = re.compile(
    rb"\{'descr': '(<i8|<f8|<f4|\|b1|\|u1)', 'fortran_order': False, "
    rb"'shape': \(([0-9]{1,19}),\), \} *\n",
    re.ASCII,
)

# The zip's records (little-endian). A member's local header: signature, version needed,
# flags, method, time, date, CRC-32, sizes, the lengths of its name and extra field.
_LOCAL = struct.Struct("<4sHHHHHLLLHH")
# A member's entry in the directory: signature, version made by and its system, version
# needed, reserved, flags, method, time, date, CRC-32, sizes, the lengths of name, extra
# field and comment, disk, internal and external attributes, the local header's offset.
_ENTRY = struct.Struct("<4sBBBBHHHHLLLHHHHHLL")
# The end record: signature, disks, entries on this disk and in all, the directory's
# size and offset, the length of the comment.
_END = struct.Struct("<4sHHHHLLH")
_VERSION = 20  # 2.0: stored members, no 64-bit extension
_UNIX = 3  # the system the entries were made on (their attributes' meaning)
_ATTRIBUTES = 0o600 << 16  # a regular file its owner reads and writes
_TIME, _DATE = 0, (1 << 5) | 1  # 1980-01-01 00:00: the same content makes the same bytes


class ArchiveError(ValueError):
    """Bytes that are not an archive :func:`pack` wrote, or one whose bytes changed."""


def _npy_header(kind: str, count: int) -> bytes:
    """The ``.npy`` header of a one-dimensional array of ``count`` items of ``kind``.

    numpy writes the same bytes for the arrays an archive holds: it pads the
    shape to room for 21 digits, and both pad the whole to 128 bytes.
    """
    header = f"{{'descr': '{kind}', 'fortran_order': False, 'shape': ({count},), }}"
    # numpy pads the header so that the data starts at a multiple of 64 bytes.
    padding = -(_PREFIX + len(header) + 1) % 64
    text = (header + " " * padding + "\n").encode("ascii")
    return _MAGIC + _HEADER_LENGTH.pack(len(text)) + text


def _names(count: int) -> list[bytes]:
    return [
        _DOCUMENT.encode("ascii"),
        *(f"{number}.npy".encode("ascii") for number in range(count)),
    ]


def pack_arrays(document: Any, arrays: Sequence[tuple[str, bytes | memoryview]]) -> bytes:
    """The archive of ``document`` (JSON-able) and ``arrays`` (``(kind, raw bytes)`` each).

    Each array's bytes are its items in little-endian order; their length
    must be a whole number of items of ``kind`` (one of :data:`KINDS`).
    ValueError for more than :data:`MAX_ARRAYS` arrays or an archive of 4 GiB.
    """
    if len(arrays) > MAX_ARRAYS:
        raise ValueError(f"{len(arrays)} arrays: an archive holds {MAX_ARRAYS} at most")
    text = json.dumps(document, separators=(",", ":"), check_circular=False)
    members: list[list[bytes | memoryview]] = [[text.encode("utf-8", "surrogatepass")]]
    for number, (kind, items) in enumerate(arrays):
        data = memoryview(items).cast("B")  # bytes, whatever the buffer's item type
        if kind not in KINDS or len(data) % KINDS[kind]:
            raise ValueError(f"array {number}: {len(data)} bytes of kind {kind!r}")
        members.append([_npy_header(kind, len(data) // KINDS[kind]), data])
    parts: list[bytes | memoryview] = []
    entries: list[bytes] = []
    offset = 0
    for name, pieces in zip(_names(len(arrays)), members, strict=True):
        crc, size = 0, 0
        for piece in pieces:
            crc, size = zlib.crc32(piece, crc), size + len(piece)
        if size > _LIMIT or offset > _LIMIT:
            raise ValueError("an archive of 4 GiB or more")
        common = (_TIME, _DATE, crc, size, size, len(name))
        parts += [_LOCAL.pack(b"PK\x03\x04", _VERSION, 0, 0, *common, 0), name, *pieces]
        entries.append(_entry(common, offset) + name)
        offset += _LOCAL.size + len(name) + size
    directory = b"".join(entries)
    count = len(members)
    end = _END.pack(b"PK\x05\x06", 0, 0, count, count, len(directory), offset, 0)
    return b"".join([*parts, directory, end])


def _entry(common: tuple[int, ...], offset: int) -> bytes:
    """A member's directory entry (``common``: time, date, CRC-32, sizes, name length)."""
    made = (_VERSION, _UNIX, _VERSION, 0, 0, 0)
    return _ENTRY.pack(b"PK\x01\x02", *made, *common, 0, 0, 0, 0, _ATTRIBUTES, offset)


def unpack_arrays(
    data: bytes | bytearray | memoryview,
    *,
    max_document: int = 1 << 30,
    max_depth: int | None = None,
) -> tuple[Any, list[tuple[str, memoryview]]]:
    """The document and the arrays of an archive, each array as ``(kind, memoryview)``.

    :class:`ArchiveError` for anything :func:`pack` did not write as it is
    (see the module docstring), a document larger than ``max_document``
    bytes or not JSON, or, with ``max_depth``, nested deeper than that
    (measured before parsing, by ``rankscribe.ranks.jsondata``: for small
    documents that come from another process, a partial's header). Without
    it, a document nested past the interpreter's limit is refused all the same.
    """
    view = memoryview(data).cast("B")
    bodies = _members(view)
    if len(bodies[0]) > max_document:
        raise ArchiveError(f"a document of {len(bodies[0])} bytes is too large")
    if max_depth is not None:
        try:
            document = parse_json(
                bodies[0], what="the document", max_bytes=max_document, max_depth=max_depth
            )
        except JSONDataError as error:
            raise ArchiveError(str(error)) from error
        return document, [_array(f"{n}.npy", body) for n, body in enumerate(bodies[1:])]
    try:
        document = json.loads(bytes(bodies[0]).decode("utf-8", "surrogatepass"))
    except ValueError as error:
        raise ArchiveError(f"the document is not JSON ({error})") from error
    except RecursionError as error:
        raise ArchiveError("the document is nested too deeply") from error
    arrays = [_array(f"{number}.npy", body) for number, body in enumerate(bodies[1:])]
    return document, arrays


def _members(view: memoryview) -> list[memoryview]:
    """Each member's bytes (views, not copies), every record and CRC-32 checked."""
    directory_end = len(view) - _END.size
    if directory_end < 0:
        raise ArchiveError(f"{len(view)} bytes are not an archive")
    signature, disk, first_disk, here, count, size, start, comment = _END.unpack_from(
        view, directory_end
    )
    if (signature, disk, first_disk, comment) != (b"PK\x05\x06", 0, 0, 0) or here != count:
        raise ArchiveError("not an archive this code wrote (no end record at its end)")
    if not 1 <= count <= MAX_ARRAYS + 1 or start + size != directory_end:
        raise ArchiveError("the archive's end record does not fit its directory")
    bodies: list[memoryview] = []
    at, offset = start, 0
    for name in _names(count - 1):
        if at + _ENTRY.size + len(name) > directory_end:
            raise ArchiveError("the archive's directory is cut short")
        fields = _ENTRY.unpack_from(view, at)
        crc, length = fields[9], fields[11]
        common = (_TIME, _DATE, crc, length, length, len(name))
        if view[at : at + _ENTRY.size + len(name)] != _entry(common, offset) + name:
            raise ArchiveError(f"the directory entry of {name.decode()} is not as written")
        at += _ENTRY.size + len(name)
        local = _LOCAL.pack(b"PK\x03\x04", _VERSION, 0, 0, *common, 0) + name
        begin = offset + len(local)
        if view[offset:begin] != local or begin + length > start:
            raise ArchiveError(f"member {name.decode()}'s local header is not as written")
        body = view[begin : begin + length]
        if zlib.crc32(body) != crc:
            raise ArchiveError(f"member {name.decode()} changed (its CRC-32 does not match)")
        bodies.append(body)
        offset = begin + length
    if at != directory_end or offset != start:
        # Every byte belongs to a member, the directory or the end record: none unread.
        raise ArchiveError("the archive holds bytes outside its members")
    return bodies


def _array(name: str, data: memoryview) -> tuple[str, memoryview]:
    if data[: len(_MAGIC)] != _MAGIC or len(data) < _PREFIX:
        raise ArchiveError(f"member {name} is not a .npy file of version 1.0")
    (size,) = _HEADER_LENGTH.unpack_from(data, len(_MAGIC))
    header = bytes(data[: _PREFIX + size])
    found = _HEADER.fullmatch(header, _PREFIX)
    if found is None:
        raise ArchiveError(f"member {name} is not a one-dimensional array of a plain kind")
    kind, count = found[1].decode("ascii"), int(found[2])
    if header != _npy_header(kind, count):  # another spelling: a shape of (01,), more padding
        raise ArchiveError(f"member {name}'s .npy header is not as written")
    body = data[_PREFIX + size :]
    if len(body) != count * KINDS[kind]:
        raise ArchiveError(f"member {name} holds {len(body)} bytes, not {count} items of {kind}")
    return kind, body
