"""Files on disk: names, record framing and atomic writes (a public module).

Everything another package (or a user's tool) needs to find, parse, frame or
safely create RankScribe's files is here, so that each rule has one home (the
name rules are defined in the private ``format._names`` module, framing in
``format._framing`` and wire primitives in ``format._wire``; this module is their
only public face):

- names: :func:`summary_file_name`, :func:`parse_file_name`, :func:`file_kind`,
  :func:`list_summary_files`, :func:`tensorboard_file_name`, :func:`host_name`,
  :func:`claim_timestamp`, :func:`is_valid_affix`, :data:`LINEAGE_SUFFIX`,
  :data:`SUMMARY_SUFFIX`, and the job's rank directories: :func:`rank_dir_name`,
  :func:`parse_rank_dir_name`;
- framing (TFRecord's, see ``docs/file-format.md``): :func:`frame`,
  :class:`RecordReader`, :func:`read_records`, :data:`RECORD_OVERHEAD`;
- the version strings that open each file, :data:`SUMMARY_FILE_VERSION` and
  :data:`TENSORBOARD_FILE_VERSION` (the other packages' event files are written by
  :mod:`rankscribe.writer.eventfiles`, which encodes and frames their events);
- safe creation: :func:`atomic_write` (the one way RankScribe replaces a whole
  file), :func:`make_private_dir` (the one way it creates directories) and
  :func:`fsync_directory`;
- modes: :func:`file_mode` and :func:`dir_mode`, private by default and
  group-readable when asked (an argument, or :data:`GROUP_READABLE_ENV` set to 1).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from contextlib import suppress
from typing import IO

from rankscribe.writer.format._framing import (
    RECORD_OVERHEAD,
    RawRecord,
    RecordReader,
    frame,
    read_records,
)
from rankscribe.writer.format._names import (
    LINEAGE_SUFFIX,
    SUMMARY_SUFFIX,
    EventFileName,
    FileKind,
    claim_timestamp,
    file_kind,
    host_name,
    is_valid_affix,
    list_summary_files,
    parse_file_name,
    parse_rank_dir_name,
    rank_dir_name,
    summary_file_name,
    tensorboard_file_name,
)
from rankscribe.writer.format._wire import SUMMARY_FILE_VERSION, TENSORBOARD_FILE_VERSION

__all__ = [
    "GROUP_READABLE_ENV",
    "LINEAGE_SUFFIX",
    "PRIVATE_FILE_MODE",
    "RECORD_OVERHEAD",
    "SUMMARY_FILE_VERSION",
    "SUMMARY_SUFFIX",
    "TENSORBOARD_FILE_VERSION",
    "EventFileName",
    "FileKind",
    "RawRecord",
    "RecordReader",
    "atomic_write",
    "claim_timestamp",
    "dir_mode",
    "file_kind",
    "file_mode",
    "frame",
    "fsync_directory",
    "group_readable",
    "host_name",
    "is_valid_affix",
    "list_summary_files",
    "make_private_dir",
    "parse_file_name",
    "parse_rank_dir_name",
    "rank_dir_name",
    "read_records",
    "summary_file_name",
    "tensorboard_file_name",
]

#: Mode of a finished file: read-only, for its owner alone.
PRIVATE_FILE_MODE = 0o400

#: Set to 1 (or true, yes, on) to make what RankScribe creates readable by the owner's
#: group, for a TensorBoard or MindInsight that runs as another user of that group.
GROUP_READABLE_ENV = "RANKSCRIBE_GROUP_READABLE"
_TRUE = ("1", "true", "yes", "on")


def group_readable(requested: bool | None = None) -> bool:
    """Whether new files and directories are group-readable: ``requested`` when given,
    else whether :data:`GROUP_READABLE_ENV` is set to 1 (private by default)."""
    if requested is not None:
        return bool(requested)
    return os.environ.get(GROUP_READABLE_ENV, "").strip().lower() in _TRUE


def file_mode(final: bool, group_readable: bool | None = None) -> int:
    """The mode of a file RankScribe creates.

    ``final``: 0400 (0440 group-readable) for a finished file, else 0600 (0640) for one
    still being written, a lock file, or a file that is replaced as a whole.
    ``group_readable`` None follows :data:`GROUP_READABLE_ENV`.
    """
    shared = _group_readable(group_readable)
    if final:
        return 0o440 if shared else 0o400
    return 0o640 if shared else 0o600


def dir_mode(group_readable: bool | None = None) -> int:
    """The mode of a directory RankScribe creates: 0700, or 0750 group-readable."""
    return 0o750 if _group_readable(group_readable) else 0o700


_group_readable = group_readable  # the functions above name their argument alike


def make_private_dir(
    path: str | os.PathLike[str],
    *,
    group_readable: bool | None = None,
    exist_ok: bool = True,
) -> str:
    """Create the directory ``path`` and every missing parent with :func:`dir_mode`.

    Each directory made here is created with ``mkdir`` (which never follows a
    link), then opened with ``O_NOFOLLOW | O_DIRECTORY`` and given exactly its
    mode (no umask widens or narrows it), so a link planted at its name is
    refused rather than followed. A directory that exists already is left as it
    is (it may be a link the user made): it must be a directory, and with
    ``exist_ok=False`` it is an error (``FileExistsError``), as is anything at
    the name. Returns the absolute path.
    """
    target = os.path.abspath(os.fspath(path))
    mode = dir_mode(group_readable)
    missing: list[str] = []
    probe = target
    while not os.path.lexists(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not missing:
        if not exist_ok:
            raise FileExistsError(errno.EEXIST, "something exists already at this name", target)
        if not os.path.isdir(target):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", target)
        return target
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            if directory == target and not exist_ok:
                raise
            # Made meanwhile by another process (another rank): a real directory only.
            if not stat.S_ISDIR(os.lstat(directory).st_mode):
                raise NotADirectoryError(
                    errno.ENOTDIR, "not a directory (a link or a file appeared here)", directory
                ) from None
            continue
        _set_dir_mode(directory, mode)
    return target


def _set_dir_mode(directory: str, mode: int) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(directory, flags)
    except OSError as error:
        raise NotADirectoryError(
            errno.ENOTDIR, f"not a directory (a link replaced it?): {error.strerror}", directory
        ) from error
    try:
        if not stat.S_ISDIR(os.fstat(descriptor).st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", directory)
        os.fchmod(descriptor, mode)
    finally:
        os.close(descriptor)


_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_TEMPORARY_ATTEMPTS = 100
_MAX_NAME = 255  # bytes in a file name on most filesystems


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
    # The temporary name must fit where ``name`` (up to 255 bytes) fits: shorten its stem.
    stem = name
    while len(stem.encode()) > _MAX_NAME - len(".123456789abc.tmp") - 1:
        stem = stem[:-1]
    for _ in range(_TEMPORARY_ATTEMPTS):
        temporary = os.path.join(directory, f".{stem}.{secrets.token_hex(6)}.tmp")
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
