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
    """The JSON document and the arrays of an archive, as ``numpy.load`` reads them."""
    with np.load(io.BytesIO(data)) as archive:
        document = json.loads(archive["document.json"])
        arrays = [archive[str(number)] for number in range(len(archive.files) - 1)]
    return document, arrays


def write_archive(document: Any, arrays: list[Any]) -> bytes:
    """An archive of ``document`` and numpy ``arrays``, written with zipfile and numpy."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(_entry("document.json"), json.dumps(document).encode())
        for number, array in enumerate(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
            archive.writestr(_entry(f"{number}.npy"), member.getvalue())
    return buffer.getvalue()


def _entry(name: str) -> zipfile.ZipInfo:
    """A member's entry as RankScribe writes it: a fixed date, made on Unix, mode 0600."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.create_system = 3
    info.external_attr = 0o600 << 16
    return info
