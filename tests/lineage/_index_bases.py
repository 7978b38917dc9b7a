"""Base dirs of runs for the lineage index tests, shared by their modules.

Imported as ``tests.lineage._index_bases`` (pytest puts the repository root on the
path); the runs are written with the ``lw`` fixture's helpers (conftest.py).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rankscribe.lineage import filter_summary_lineage
from tests._support.growth import MEGABYTE, assert_linear
from tests._support.npz_files import index_file, read_index_document
from tests.lineage._documented import INDEX_NAME

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


# The columns with one value per run; "fields" holds more of them, and "metric",
# "user_defined" and "warnings" are sparse.
_PER_RUN = ("path", "dir_mtime", "final", "create_time", "update_time", "files", "graph")


def _with_ghosts(document: dict[str, Any], ghosts: int) -> dict[str, Any]:
    """``document`` (an index of one run) with ``ghosts`` more runs, none of them on disk."""
    grown = copy.deepcopy(document)
    for name in _PER_RUN:
        [value] = grown[name]
        grown[name] = [value] + [copy.deepcopy(value) for _ in range(ghosts)]
    grown["path"] = [grown["path"][0], *(f"./ghost{index:08d}" for index in range(ghosts))]
    for name, column in grown["fields"].items():
        [value] = column
        grown["fields"][name] = [value] * (ghosts + 1)
    return grown


def many_runs(document: dict[str, Any], size: int) -> dict[str, Any]:
    return _with_ghosts(document, size // 400)


def a_metric_per_run(document: dict[str, Any], size: int) -> dict[str, Any]:
    ghosts = size // 450
    grown = _with_ghosts(document, ghosts)
    for index in range(1, ghosts + 1):
        grown["metric"][f"m{index:08d}"] = [[index], [0.5]]
    return grown


def warnings_on_every_run(document: dict[str, Any], size: int) -> dict[str, Any]:
    ghosts = size // 500
    grown = _with_ghosts(document, ghosts)
    grown["warnings"] = {str(index): ["a warning"] * 3 for index in range(1, ghosts + 1)}
    return grown


def one_run_of_many_metrics(document: dict[str, Any], size: int) -> dict[str, Any]:
    grown = copy.deepcopy(document)
    grown["metric"] = {f"m{index:08d}": [[0], [0.5]] for index in range(size // 28)}
    return grown


#: Hostile shapes of an index: each makes, from the index of one run, one of about
#: ``size`` bytes (tests/lineage/test_index_growth.py says why these).
HOSTILE_INDEX_SHAPES: list[Callable[[dict[str, Any], int], dict[str, Any]]] = [
    many_runs,
    a_metric_per_run,
    warnings_on_every_run,
    one_run_of_many_metrics,
]


def assert_index_read_linearly(
    base: Path,
    shape: Callable[[dict[str, Any], int], dict[str, Any]],
    encode: Callable[[dict[str, Any]], bytes],
    *,
    size: int = MEGABYTE,
) -> None:
    """Fail unless a query of ``base`` (one run) takes time linear in the size of its index
    made hostile by ``shape`` and stored by ``encode``, from ``size`` bytes
    (tests/_support/growth.py)."""
    assert filter_summary_lineage(str(base))["count"] == 1  # writes the index
    document = read_index(base)
    assert document["path"] == ["./run0"]
    index = base / INDEX_NAME

    def build(size: int) -> bytes:
        data = encode(shape(document, size))
        if not size // 2 <= len(data) <= 2 * size:  # a denser encoding: more of the shape
            data = encode(shape(document, size * size // len(data)))
        assert size // 2 <= len(data) <= 2 * size, (size, len(data))
        return data

    def query(data: bytes) -> object:
        # A new file (a new inode): the query reads it from disk, as a new process would.
        index.unlink()
        descriptor = os.open(index, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        found = filter_summary_lineage(str(base))
        assert found["count"] == 1
        return found

    assert_linear(query, build, base=size)
