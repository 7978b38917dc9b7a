"""A lineage query as the file system sees it: which runs it read, and a query made as a
new process makes it (docs/lineage-queries.md, "The index").

Imported as ``tests.lineage._index_reads``; only public names are imported here.

- A query reads a run's lineage files with ``os.open`` (files of a shared folder are
  opened without following links, rankscribe.ranks.files): a run whose lineage file was
  opened was parsed, a run answered without that was taken from the index.
- A process keeps the index it last read or wrote and uses it only while the file on disk
  is that very file (the same inode, size and mtime). The index replaced by a copy of
  itself, with its times and its directory's times put back, is read from disk again:
  the next query reads it as a new process would.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from rankscribe.lineage import filter_summary_lineage
from rankscribe.writer.files import LINEAGE_SUFFIX
from tests.lineage._documented import INDEX_NAME


@dataclass(frozen=True)
class Query:
    """What one query answered and which runs' lineage files it read."""

    count: int  # the runs it answered with
    read: frozenset[str]  # the directories whose lineage files it opened

    @property
    def parsed_runs(self) -> int:
        return len(self.read)

    @property
    def reused_runs(self) -> int:
        """The runs answered without a lineage file read: taken from the index."""
        return self.count - len(self.read)


@contextmanager
def lineage_reads() -> Iterator[set[str]]:
    """The directories whose lineage files are opened inside the block."""
    read: set[str] = set()
    real_open = os.open

    def opened(path: Any, *args: Any, **options: Any) -> int:
        name = os.fsdecode(path)
        if os.path.basename(name).endswith(LINEAGE_SUFFIX):
            read.add(os.path.dirname(name))
        return real_open(path, *args, **options)

    with mock.patch.object(os, "open", opened):
        yield read


def query(base: Path, **options: Any) -> Query:
    """``filter_summary_lineage(base)``, and the runs it read."""
    with lineage_reads() as read:
        result = filter_summary_lineage(str(base), **options)
    return Query(result["count"], frozenset(read))


def as_a_new_process(base: Path) -> None:
    """The next query in ``base`` reads its index from disk, as a new process would.

    Nothing a query looks at changes: the copy has the index's bytes, mode and times, and
    the base directory gets its times back. Without an index, nothing is kept to forget.
    """
    index = base / INDEX_NAME
    if not index.exists():
        return
    directory = os.stat(base)
    copy = base / f".{INDEX_NAME}.copy"
    shutil.copy2(index, copy)  # bytes, mode and times; a new inode
    os.replace(copy, index)
    os.utime(base, ns=(directory.st_atime_ns, directory.st_mtime_ns))


@contextmanager
def listings() -> Iterator[list[tuple[str, str]]]:
    """Every directory listed inside the block: ``("entries", path)`` for ``os.scandir``
    (entry objects, as a walk over the runs lists), ``("names", path)`` for ``os.listdir``
    (names only, as the warm path lists the base dir: docs/lineage-queries.md)."""
    listed: list[tuple[str, str]] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def by_entries(path: Any = ".") -> Any:
        listed.append(("entries", os.fsdecode(path)))
        return real_scandir(path)

    def by_names(path: Any = ".") -> list[Any]:
        listed.append(("names", os.fsdecode(path)))
        return real_listdir(path)

    with mock.patch.object(os, "scandir", by_entries), mock.patch.object(os, "listdir", by_names):
        yield listed
