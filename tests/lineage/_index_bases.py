"""Base dirs of runs for the lineage index tests, shared by their modules.

Imported as ``tests.lineage._index_bases`` (pytest puts the repository root on the
path); the runs are written with the ``lw`` fixture's helpers (conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.lineage._documented import INDEX_NAME
from tests.lineage._npz_files import index_file, read_index_document

OLD = 1_600_000_000  # an mtime well before any scan


def finish(run: Path) -> None:
    """What a writer leaves: read-only files, and (here) a directory that settled long ago."""
    for file in run.iterdir():
        file.chmod(0o400)
    os.utime(run, (OLD, OLD))


def graph_base(root: Path, lw: Any, count: int = 3) -> Path:
    """``count`` runs under ``root``, two dataset graphs between them, older runs first."""
    for index in range(count):
        lw.write(
            root / f"run{index}",
            [
                lw.graph({"op_type": f"G{index % 2}"}),
                lw.train(network=f"Net{index}", loss=index / 10),
            ],
            mtime=1_000_000 + index,
        )
    return root


def read_index(base: Path) -> dict[str, Any]:
    """The index document of ``base``, read as docs/lineage-queries.md describes it."""
    return read_index_document((base / INDEX_NAME).read_bytes())


def index_bytes(document: dict[str, Any]) -> bytes:
    """The bytes of an index file holding ``document`` (a forged or foreign index)."""
    return index_file(document)
