"""Files on disk: names, record framing and atomic writes (a public module).

Everything another package (or a user's tool) needs to find, parse, frame or
safely create RankScribe's files is here, so that each rule has one home (the
name rules are defined in the private ``_names`` module and framing in
``_framing``; this module is their only public face):

- names: :func:`summary_file_name`, :func:`parse_file_name`, :func:`file_kind`,
  :func:`list_summary_files`, :func:`tensorboard_file_name`, :func:`host_name`,
  :func:`claim_timestamp`, :func:`is_valid_affix`, :data:`LINEAGE_SUFFIX`;
- framing (TFRecord's, see ``docs/file-format.md``): :func:`frame`,
  :class:`RecordReader`, :func:`read_records`, :data:`RECORD_OVERHEAD`;
- safe creation: :func:`atomic_write` (the one way RankScribe replaces a whole
  file) and :func:`fsync_directory`.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterable
from contextlib import suppress
from typing import IO

from rankscribe.writer._framing import (
    RECORD_OVERHEAD,
    RawRecord,
    RecordReader,
    frame,
    read_records,
)
from rankscribe.writer._names import (
    LINEAGE_SUFFIX,
    EventFileName,
    FileKind,
    claim_timestamp,
    file_kind,
    host_name,
    is_valid_affix,
    list_summary_files,
    parse_file_name,
    summary_file_name,
    tensorboard_file_name,
)

__all__ = [
    "LINEAGE_SUFFIX",
    "PRIVATE_FILE_MODE",
    "RECORD_OVERHEAD",
    "EventFileName",
    "FileKind",
    "RawRecord",
    "RecordReader",
    "atomic_write",
    "claim_timestamp",
    "file_kind",
    "frame",
    "fsync_directory",
    "host_name",
    "is_valid_affix",
    "list_summary_files",
    "parse_file_name",
    "read_records",
    "summary_file_name",
    "tensorboard_file_name",
]

#: Mode of a finished file: read-only, for its owner alone.
PRIVATE_FILE_MODE = 0o400

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_TEMPORARY_ATTEMPTS = 100


def atomic_write(
    path: str | os.PathLike[str],
    chunks: Iterable[bytes | memoryview],
    *,
    mode: int = PRIVATE_FILE_MODE,
    write: Callable[[IO[bytes], bytes | memoryview], object] | None = None,
) -> str:
    """Write ``chunks`` to ``path`` so that no reader ever sees half a file.

    The data goes to a hidden ``.<name>.<random>.tmp`` in the same directory
    (created with ``O_EXCL | O_NOFOLLOW``, so a link planted at that name is
    never followed, and the rename cannot cross filesystems); it is fsynced,
    given ``mode`` and renamed over ``path``, and the directory is fsynced so
    the rename survives a power loss. ``os.replace`` replaces a symbolic link
    at ``path`` itself, never its target. On any error the temporary file is
    removed and the error re-raised: ``path`` keeps its old content.

    ``write(handle, chunk)`` replaces ``handle.write`` (crash tests stop a
    write part-way through with it). Returns ``path`` as a string.
    """
    target = os.fspath(path)
    directory, name = os.path.split(target)
    directory = directory or "."
    descriptor, temporary = _create_temporary(directory, name)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            for chunk in chunks:
                if write is None:
                    handle.write(chunk)
                else:
                    write(handle, chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise
    fsync_directory(directory)
    return target


def _create_temporary(directory: str, name: str) -> tuple[int, str]:
    for _ in range(_TEMPORARY_ATTEMPTS):
        temporary = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(temporary, _OPEN_FLAGS, 0o600), temporary
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name!r} in {directory!r}")


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make renames and creations in ``directory`` durable (best effort)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
