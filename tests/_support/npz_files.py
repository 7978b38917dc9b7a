"""Index files and job-view partials read and made with numpy and zipfile, as a user would.

Both are ``.npz`` archives (``docs/lineage-queries.md``, "The index";
``docs/job-view.md``, "Tree"): a ``document.json`` member and ``.npy``
arrays named ``0.npy``, ``1.npy``, ... Tests open them with numpy, and forge
them with ``zipfile`` and ``numpy.lib.format`` (their CRCs then match what
they hold, and their directory entries are the ones RankScribe writes: a
forged file passes the integrity check and meets the checks behind it).
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import numpy as np


def read_archive(data: bytes) -> tuple[Any, list[Any]]:
    """The JSON document and the arrays of an archive, as ``numpy.load`` reads them.

    ``numpy.load`` opens the archive and reads the document; each array is read from its
    member by ``numpy.lib.format.read_array``, as the archive's own lookup by name does.
    That lookup searches a list of the members' names on numpy 1.x: through it, the
    65,534 arrays of the largest index took 78 s on numpy 1.23.5 (5 s on numpy 2).
    """
    with np.load(io.BytesIO(data)) as archive:
        document = json.loads(archive["document.json"])
        arrays = []
        for number in range(len(archive.files) - 1):
            with archive.zip.open(f"{number}.npy") as member:
                arrays.append(np.lib.format.read_array(member, allow_pickle=False))
    return document, arrays


def write_archive(document: Any, arrays: list[Any]) -> bytes:
    """An archive of ``document`` and numpy ``arrays``, written with zipfile and numpy."""
    members = {"document.json": json.dumps(document).encode()}
    for number, array in enumerate(arrays):
        member = io.BytesIO()
        np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
        members[f"{number}.npy"] = member.getvalue()
    return write_members(members)


def read_members(data: bytes) -> dict[str, bytes]:
    """Each member's bytes by name, in the archive's order, as ``zipfile`` reads them."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def write_members(members: dict[str, bytes]) -> bytes:
    """An archive of these members' bytes, in order, written with zipfile."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, body in members.items():
            archive.writestr(_entry(name), body)
    return buffer.getvalue()


def _entry(name: str) -> zipfile.ZipInfo:
    """A member's entry as RankScribe writes it: a fixed date, made on Unix, mode 0600."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.create_system = 3
    info.external_attr = 0o600 << 16
    return info


# The lineage index's layout (docs/lineage-queries.md, "The index"): the lists that may
# be stored as arrays, each replaced in the document by its column's number.
_COLUMN_LISTS = ("path", "dir_mtime", "final", "create_time", "update_time", "files", "graph")
_SPARSE = ("metric", "user_defined")
_TWO_ARRAYS = ("words", "files")  # the column kinds stored as two arrays


def _text(array: Any) -> list[str]:
    return bytes(array.tobytes()).decode("utf-8", "surrogatepass").split("\0")


def _column(kind: str, parts: list[Any]) -> list[Any]:
    """One stored column's values, read as the page describes each kind."""
    if kind in ("i64", "f64", "bool"):
        return parts[0].tolist()
    if kind == "text":
        return _text(parts[0])
    if kind == "words":
        distinct = _text(parts[0])
        return [distinct[code] for code in parts[1].tolist()]
    assert kind == "files", kind
    numbers = parts[1].reshape(-1, 4).tolist()  # size, mtime, inode, ctime per run
    return [[name, *row] for name, row in zip(_text(parts[0]), numbers, strict=True)]


def _slots(document: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Each (container, key) where a stored column's number may stand."""
    slots: list[tuple[Any, Any]] = [(document, name) for name in _COLUMN_LISTS if name in document]
    slots += [(document["fields"], name) for name in document.get("fields", {})]
    for section in _SPARSE:
        for column in document.get(section, {}).values():
            slots += [(column, 0), (column, 1)]
    return slots


def read_index_document(data: bytes) -> dict[str, Any]:
    """An index file's document, every stored column put back in its place as a list."""
    document, arrays = read_archive(data)
    columns: list[list[Any]] = []
    taken = 0
    for kind, count in document.pop("columns"):
        size = 2 if kind in _TWO_ARRAYS else 1
        values = _column(kind, arrays[taken : taken + size])
        taken += size
        assert len(values) == count, (kind, len(values), count)
        columns.append(values)
    assert taken == len(arrays), "arrays left after the index's columns"
    for container, key in _slots(document):
        if type(container[key]) is int:
            container[key] = columns[container[key]]
    return document


def index_file(document: dict[str, Any]) -> bytes:
    """An index file holding ``document`` with every column in its JSON document (a
    valid index too, the page says): a forged or foreign index."""
    return write_archive({**document, "columns": []}, [])
