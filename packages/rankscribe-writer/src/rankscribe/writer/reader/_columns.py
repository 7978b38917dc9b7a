"""Scalar curves as NumPy columns: :func:`scalar_arrays` (what it returns: docs/reading.md).

A file is read in chunks. In each chunk the records are found and their CRCs
checked in bulk (``_record_table.py``), then read group by group of one payload
length (``_record_groups.py``); damage is reported as the event readers report
it, in file order.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt

from rankscribe.ranks.files import open_regular
from rankscribe.writer.errors import CorruptRecordError, WriterTypeError, WriterValueError
from rankscribe.writer.files import FileKind, file_kind, list_summary_files
from rankscribe.writer.format._framing import HEADER_SIZE
from rankscribe.writer.format._names import coerce_kind
from rankscribe.writer.reader._curves import Curves, logger
from rankscribe.writer.reader._record_groups import FileRead, parse_records
from rankscribe.writer.reader._record_table import record_table
from rankscribe.writer.reader._wire import Schema

# Read this much of a file at a time. It bounds the memory a read needs (the
# chunk, its rows and their masks) whatever the size of the file, and it is
# small enough that one chunk's buffers are reused for the next: memory fresh
# from the system costs a page fault per page, and 32 MB chunks made a first
# read in a new process twice as slow as 4 MB ones (measured).
_CHUNK_BYTES = 4 << 20


def _read_file(file: FileRead) -> int:
    """Read one file into ``file.curves``; return how many records it holds."""
    records = 0
    # A regular file only, never waiting on a FIFO named like an event file; the name is
    # the caller's (listings skip links), so a link given is followed.
    with cast(io.BufferedReader, open_regular(file.path, follow_link=True)) as stream:
        carried = b""
        base = 0  # file offset of the buffer's first byte
        wanted = 0
        buffer = bytearray()
        while True:
            size = max(_CHUNK_BYTES, wanted - len(carried))
            # A length field may claim up to 2 GiB: never allocate past what a
            # regular file holds (one byte more, to see its end).
            status = os.fstat(stream.fileno())
            if stat.S_ISREG(status.st_mode):
                size = min(size, max(status.st_size - stream.tell(), 0) + 1)
            buffer, filled = _fill(stream, buffer, carried, size)
            final = filled < len(carried) + size
            table = record_table(memoryview(buffer)[:filled])
            ordinals = file.first_ordinal + records + np.arange(table.offsets.size)
            errors = [file.error(base + d.offset, d.reason) for d in table.damage]
            errors += parse_records(file, buffer, base, table, ordinals)
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


def _report(file: FileRead, errors: list[CorruptRecordError]) -> None:
    if errors and file.strict:
        raise errors[0]
    for error in errors:
        logger.warning("%s; skipped", error)


def _report_torn_tail(file: FileRead, offset: int, left: int, wanted: int) -> None:
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


def _sources(
    source: str | os.PathLike[str], kind: FileKind | str | None
) -> list[tuple[Path, Schema]]:
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
    path: str | os.PathLike[str],
    tags: Iterable[str] | None = None,
    *,
    strict: bool = False,
    kind: FileKind | str | None = None,
) -> dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]:
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
    curves = Curves(wanted)
    first_ordinal = 0
    for file, schema in _sources(path, kind):
        first_ordinal += _read_file(FileRead(file, schema, strict, curves, first_ordinal))
    return curves.result()
