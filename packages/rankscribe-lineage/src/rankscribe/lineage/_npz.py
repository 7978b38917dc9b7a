"""The one binary container of the lineage package: numpy's ``.npz``, read and written here.

The lineage index (``docs/lineage-queries.md``, "The index") and the job
view's partials (``docs/job-view.md``, "Tree") are each one JSON document and
a few one-dimensional arrays of plain numbers. Both are stored as an
uncompressed ``.npz`` archive: a zip file (``zipfile``) whose members are

- ``document.json``: the document, UTF-8 JSON;
- ``0.npy``, ``1.npy``, ...: the arrays in order, each a version 1.0 ``.npy``
  file of one dimension and one of the kinds :data:`KINDS` (little-endian
  int64, float64, bool, or bytes as ``uint8``).

``numpy.load`` opens such a file (the arrays by their number, the document
as bytes), as does any zip tool; this module reads and writes it with the
standard library alone, so reading an index does not import numpy.

Integrity: the zip format keeps a CRC-32 of every member, which
``zipfile`` checks as it reads the member's last byte; a member whose bytes
changed, a member missing or added, a truncated archive or a ``.npy``
header that is not what :func:`pack` writes is an :class:`ArchiveError`.
A CRC-32 detects every change of up to 32 consecutive bits, so a changed
value (0.2 turned 9.0) is always refused. What the CRCs do not cover (a
member's timestamp, the zip's comment) holds no data. It detects damage, not
forgery: whoever can rewrite the file can recompute the CRCs, which is why a
reader also checks who owns the file (``docs/lineage-queries.md``).

Why ``.npz`` and not SQLite or a format of our own: measured with
``tools/bench/index_containers.py`` (the table is in
``docs/lineage-queries.md``, "The index").
"""

from __future__ import annotations

import io
import json
import re
import struct
import zipfile
import zlib
from collections.abc import Sequence
from typing import Any

__all__ = ["KINDS", "ArchiveError", "pack", "unpack"]

#: The ``.npy`` type descriptions an archive may hold, with each one's item size.
KINDS = {"<i8": 8, "<f8": 8, "|b1": 1, "|u1": 1}
_DOCUMENT = "document.json"
_MAGIC = b"\x93NUMPY\x01\x00"
_HEADER_LENGTH = struct.Struct("<H")
_PREFIX = len(_MAGIC) + _HEADER_LENGTH.size
# What numpy writes for a one-dimensional C-order array (format 1.0), padded with spaces
# to a multiple of 64 bytes and ended by a newline; nothing else is read.
_HEADER = re.compile(
    rb"\{'descr': '(<i8|<f8|\|b1|\|u1)', 'fortran_order': False, 'shape': \(([0-9]{1,19}),\), \}"
    rb" *\n",
    re.ASCII,
)


class ArchiveError(ValueError):
    """Bytes that are not an archive :func:`pack` wrote, or one whose bytes changed."""


def _npy(kind: str, data: bytes | memoryview) -> bytes:
    """A ``.npy`` file of the one-dimensional array ``data`` (raw little-endian items)."""
    count = len(data) // KINDS[kind]
    header = f"{{'descr': '{kind}', 'fortran_order': False, 'shape': ({count},), }}"
    # numpy pads the header so that the data starts at a multiple of 64 bytes.
    padding = -(_PREFIX + len(header) + 1) % 64
    text = (header + " " * padding + "\n").encode("ascii")
    return _MAGIC + _HEADER_LENGTH.pack(len(text)) + text


def pack(document: Any, arrays: Sequence[tuple[str, bytes | memoryview]]) -> bytes:
    """The archive of ``document`` (JSON-able) and ``arrays`` (``(kind, raw bytes)`` each).

    Each array's bytes are its items in little-endian order; their length
    must be a whole number of items of ``kind`` (one of :data:`KINDS`).
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        text = json.dumps(document, separators=(",", ":"), check_circular=False)
        archive.writestr(_member(_DOCUMENT), text.encode("utf-8", "surrogatepass"))
        for number, (kind, items) in enumerate(arrays):
            data = memoryview(items).cast("B")  # bytes, whatever the buffer's item type
            if kind not in KINDS or len(data) % KINDS[kind]:
                raise ValueError(f"array {number}: {len(data)} bytes of kind {kind!r}")
            header = _npy(kind, data)
            info = _member(f"{number}.npy")
            info.file_size = len(header) + len(data)  # zip64 records where it needs them
            with archive.open(info, "w") as member:
                member.write(header)
                member.write(data)
    return buffer.getvalue()


# What every member's entry in the zip directory holds besides its name, sizes and CRC:
# fixed, so that the same content makes the same bytes and a changed byte shows.
_DATE = (1980, 1, 1, 0, 0, 0)
_UNIX = 3  # the system the entry was made on (its attributes' meaning)
_ATTRIBUTES = 0o600 << 16  # a regular file its owner reads and writes, as zipfile writes it


def _member(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_DATE)
    info.compress_type = zipfile.ZIP_STORED
    info.create_system = _UNIX
    info.external_attr = _ATTRIBUTES
    return info


def _as_written(member: zipfile.ZipInfo) -> bool:
    """Whether ``member``'s directory entry holds what :func:`pack` writes beside the data."""
    return (
        member.compress_type == zipfile.ZIP_STORED
        and member.create_system == _UNIX
        and member.create_version == member.extract_version == zipfile.DEFAULT_VERSION
        and (member.flag_bits, member.reserved, member.volume) == (0, 0, 0)
        and (member.internal_attr, member.external_attr) == (0, _ATTRIBUTES)
        and member.date_time == _DATE
        and not member.comment
        and not member.extra
        and member.file_size == member.compress_size
        and member.orig_filename == member.filename  # zipfile cuts a name at a NUL
    )


def unpack(
    data: bytes | bytearray | memoryview, *, max_document: int = 1 << 30
) -> tuple[Any, list[tuple[str, memoryview]]]:
    """The document and the arrays of an archive, each array as ``(kind, memoryview)``.

    :class:`ArchiveError` for anything :func:`pack` did not write as it is:
    a member changed (its CRC-32), missing, added or out of order, a
    ``.npy`` header of another form, a document larger than
    ``max_document`` bytes or not JSON.
    """
    view = memoryview(data).cast("B")
    if bytes(view[-_END.size :][:4]) != b"PK\x05\x06" or bytes(view[-2:]) != b"\0\0":
        # The end record (no comment) ends the archive: nothing was added after it.
        raise ArchiveError("not an archive this code wrote (no end record at its end)")
    try:
        with zipfile.ZipFile(io.BytesIO(view)) as archive:  # the directory only
            members = archive.infolist()
            directory, comment = archive.start_dir, archive.comment
    except (zipfile.BadZipFile, NotImplementedError, ValueError, EOFError, OSError) as error:
        # NotImplementedError: a directory asking for a zip version zipfile does not read.
        raise ArchiveError(f"not a zip archive this code wrote ({error})") from error
    names = [member.filename for member in members]
    expected = [_DOCUMENT, *(f"{number}.npy" for number in range(len(names) - 1))]
    if names != expected:
        raise ArchiveError(f"members {_names(names)} are not {_names(expected)}")
    end = _END.unpack_from(view, len(view) - _END.size)
    if (
        comment
        or end[1:5] != (0, 0, len(members), len(members))
        or (end[6], end[6] + end[5]) != (directory, len(view) - _END.size)
        or not all(map(_as_written, members))
        or bytes(view[directory : directory + end[5]]) != b"".join(map(_entry, members))
    ):
        # Not what pack writes: a changed byte in the directory (a length that grew would
        # hide the entries after it), or an archive of another program.
        raise ArchiveError("the zip directory is not as this code writes it")
    if members[0].file_size > max_document:
        raise ArchiveError(f"a document of {members[0].file_size} bytes is too large")
    bodies = [_member_bytes(view, member) for member in members]
    ends = [member.header_offset for member in members[1:]] + [directory]
    if members[0].header_offset or any(
        end != stop for (_, stop), end in zip(bodies, ends, strict=True)
    ):
        # Every byte before the directory belongs to a member: none is skipped unread.
        raise ArchiveError("the members do not follow each other")
    text = bodies[0][0]
    try:
        document = json.loads(bytes(text).decode("utf-8", "surrogatepass"))
    except ValueError as error:
        raise ArchiveError(f"the document is not JSON ({error})") from error
    except RecursionError as error:
        raise ArchiveError("the document is nested too deeply") from error
    arrays = [_array(name, body) for name, (body, _) in zip(names[1:], bodies[1:], strict=True)]
    return document, arrays


# A member's entry in the zip directory: signature, versions and systems, flags, method,
# time, date, CRC-32, sizes, lengths of name, extra and comment, disk, attributes, offset.
_ENTRY = struct.Struct("<4s4B4HL2L5H2L")
# The zip's end record (its last 22 bytes when it has no comment).
_END = struct.Struct("<4sHHHHLLH")
# A zip member's local header: signature, versions, flags, method, time, date, CRC-32,
# sizes, then the lengths of the name and the extra field that follow it.
_LOCAL = struct.Struct("<4sHHHHHLLLHH")
_DOS_TIME = (0, (_DATE[0] - 1980) << 9 | _DATE[1] << 5 | _DATE[2])


def _entry(member: zipfile.ZipInfo) -> bytes:
    """The directory entry :func:`pack` writes for ``member`` (zipfile reads each field of a
    directory, but not every length: a name length that grew reads the same name)."""
    name = member.filename.encode("ascii", "replace")
    fields: tuple[Any, ...] = (b"PK\x01\x02", member.create_version, member.create_system)
    fields += (member.extract_version, member.reserved, member.flag_bits, member.compress_type)
    fields += (*_DOS_TIME, member.CRC, member.compress_size, member.file_size, len(name))
    fields += (0, 0, member.volume, member.internal_attr, member.external_attr)
    return _ENTRY.pack(*fields, member.header_offset) + name


def _member_bytes(view: memoryview, member: zipfile.ZipInfo) -> tuple[memoryview, int]:
    """A stored member's bytes (a view, not a copy), its CRC-32 checked, and where they end.

    ``zipfile`` itself reads a member in chunks of a few kB, copying each:
    at the index's 30 MB that is ten times the CRC's own cost.
    """
    start = member.header_offset
    if start < 0 or start + _LOCAL.size > len(view):
        raise ArchiveError(f"member {member.filename} is out of the archive")
    local = _LOCAL.unpack_from(view, start)
    expected = (
        b"PK\x03\x04",
        member.extract_version,
        member.flag_bits,
        zipfile.ZIP_STORED,
        *_DOS_TIME,
        member.CRC,
        member.compress_size,
        member.file_size,
        len(member.filename),
        0,
    )
    if local != expected:
        raise ArchiveError(f"member {member.filename}'s local header is not its directory entry")
    name_end = start + _LOCAL.size + local[9]
    if bytes(view[start + _LOCAL.size : name_end]) != member.filename.encode("ascii"):
        raise ArchiveError(f"member {member.filename} is named otherwise in its local header")
    begin = name_end + local[10]
    body = view[begin : begin + member.file_size]
    if member.file_size != member.compress_size or len(body) != member.file_size:
        raise ArchiveError(f"member {member.filename} is truncated")
    if zlib.crc32(body) != member.CRC:
        raise ArchiveError(f"member {member.filename} changed (its CRC-32 does not match)")
    return body, begin + member.file_size


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(name[:40]) for name in names[:4])
    return f"[{shown}{', ...' if len(names) > 4 else ''}]"


def _array(name: str, data: memoryview) -> tuple[str, memoryview]:
    if data[: len(_MAGIC)] != _MAGIC or len(data) < _PREFIX:
        raise ArchiveError(f"member {name} is not a .npy file of version 1.0")
    (size,) = _HEADER_LENGTH.unpack_from(data, len(_MAGIC))
    found = _HEADER.fullmatch(bytes(data[_PREFIX : _PREFIX + size]))
    if found is None:
        raise ArchiveError(f"member {name} is not a one-dimensional array of a plain kind")
    kind, count = found[1].decode("ascii"), int(found[2])
    body = data[_PREFIX + size :]
    if len(body) != count * KINDS[kind]:
        raise ArchiveError(f"member {name} holds {len(body)} bytes, not {count} items of {kind}")
    return kind, body
