"""The job's files on disk: modes, private directories, atomic writes, rank names.

A module for the sibling packages (the writer, lineage, the collector) and for
tools that write beside RankScribe, not part of ``rankscribe.ranks``' top-level
API (``docs/contributing.md``, "Sibling modules"). Each rule has one home here:

- modes: :func:`file_mode` and :func:`dir_mode`, private by default and
  group-readable when asked (an argument, or :data:`GROUP_READABLE_ENV` set to 1);
- safe creation: :func:`atomic_write` (the one way RankScribe replaces a whole
  file), :func:`make_private_dir` (the one way it creates directories),
  :func:`fsync_directory`, and :func:`drop_cached_pages` for large files on disk;
- safe reading: :func:`open_regular` (:func:`open_regular_descriptor`, its bare
  descriptor) and :func:`read_regular`, the one way to read a
  file from a directory others may write (regular files only, no link followed, never
  blocking on a FIFO);
- :func:`exclusive_lock`, a lock between processes whose lock file is gone once
  nobody holds it;
- the job's layout (``docs/layout.md``): :data:`CLAIM_FILE_NAME`,
  :data:`JOB_RENDEZVOUS_DIRNAME`, :func:`rank_dir_name` and
  :func:`parse_rank_dir_name`, and :func:`event_file_kind`, which tells the event
  files a viewer would load from every other name in a directory;
- the ranks that write outside the job's directory (each rank named a directory of
  its own): :data:`RANK_DIRS_FILE_NAME`, :func:`write_rank_dirs`,
  :func:`recorded_rank_dirs` and :func:`read_rank_dirs`;
- whose a file is: :func:`foreign_owner`, the one rule for a file at a job's or a
  base's well-known name (only the user running the process is believed), and
  :func:`user_text`, a user as a warning names it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import IO, BinaryIO, Literal

from rankscribe.ranks._args import check_int
from rankscribe.ranks.coordination._deadline import Backoff, Deadline
from rankscribe.ranks.errors import (
    JSONDataError,
    LockTimeoutError,
    RanksTypeError,
    RanksValueError,
    UnsafeFileError,
)
from rankscribe.ranks.messages._jsondata import parse_json

__all__ = [
    "CLAIM_FILE_NAME",
    "GROUP_READABLE_ENV",
    "JOB_RENDEZVOUS_DIRNAME",
    "MAX_RANK_DIR_PROBLEMS",
    "PRIVATE_FILE_MODE",
    "RANK_DIRS_FILE_NAME",
    "EventFileKind",
    "LockTimeoutError",
    "RecordedRankDirs",
    "UnsafeFileError",
    "atomic_write",
    "dir_mode",
    "drop_cached_pages",
    "event_file_kind",
    "exclusive_lock",
    "file_mode",
    "foreign_owner",
    "fsync_directory",
    "group_readable",
    "make_private_dir",
    "open_regular",
    "open_regular_descriptor",
    "parse_rank_dir_name",
    "rank_dir_name",
    "read_rank_dirs",
    "read_regular",
    "recorded_rank_dirs",
    "user_text",
    "write_rank_dirs",
]

#: The claim file in a job's directory: who claimed it, when, under which job id.
CLAIM_FILE_NAME = ".rankscribe-job"
#: The hidden folder, inside a job's directory, where the file backend's ranks meet
#: when ``create_coordinator`` is given ``job_dir`` and nothing better connects them.
JOB_RENDEZVOUS_DIRNAME = ".rankscribe-rendezvous"
#: In a job's directory: where the ranks that named directories of their own write
#: (``docs/layout.md``, "Ranks that name directories of their own").
RANK_DIRS_FILE_NAME = ".rankscribe-rank-dirs"
_RANK_DIRS_LIMIT = 16 * 1024 * 1024

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
    drop_cache: bool = False,
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
    write part-way through with it). ``drop_cache``: once fsynced, the file's pages
    leave the page cache (:func:`drop_cached_pages`), for a large file nothing reads
    soon. Returns ``path`` as a string.
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
            if drop_cache:
                drop_cached_pages(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise
    fsync_directory(directory)
    return target


def drop_cached_pages(descriptor: int) -> None:
    """Let the kernel drop the page cache's pages of the file open at ``descriptor``, which
    must be on disk already (fsynced): ``posix_fadvise(POSIX_FADV_DONTNEED)`` where the
    system has it, otherwise nothing; an error is ignored (it is advice).

    A large file written once and not read soon (the loss landscape's parameter sets)
    otherwise holds as much page cache as its size, and each new file needs new pages:
    on a virtual machine whose memory the host hands out at first touch, writing a 12.4 MB
    set took 30-150 ms of CPU, and 4-5 ms when each file's pages were given back after
    its fsync (the next file's pages are then the ones just freed). Nothing is lost: the
    pages hold what the disk holds, and a later read reads the disk.
    """
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return
    with suppress(OSError):
        advise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)


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
    """Make renames and creations in ``directory`` durable (best effort).

    Opened as a directory only and without blocking: a FIFO swapped in at the name
    is never waited on.
    """
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(directory, flags)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


# ---------------------------------------------------------------- reading what others may plant

# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever (and
# a read of one with a writer attached, for its data); on a regular file it changes
# nothing. O_NOFOLLOW: a link at the name is refused, not followed.
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
# What open(O_NOFOLLOW | O_NONBLOCK) answers for a link (Linux: ELOOP; the BSDs:
# EMLINK) and for a socket (ENXIO, EOPNOTSUPP).
_REFUSED_AT_OPEN = frozenset({errno.ELOOP, errno.EMLINK, errno.ENXIO, errno.EOPNOTSUPP})
_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _not_regular(path: str, mode: int) -> UnsafeFileError:
    kind = next((kind for test, kind in _KINDS if test(mode)), "something else")
    return UnsafeFileError(path, f"it is {kind}, not a regular file")


def _refused_at_open(path: str, error: OSError, follow_link: bool) -> UnsafeFileError:
    try:
        return _not_regular(path, (os.stat if follow_link else os.lstat)(path).st_mode)
    except OSError:
        return UnsafeFileError(path, f"it is not a regular file ({error.strerror})")


def open_regular(
    path: str | os.PathLike[str],
    *,
    owned: bool = False,
    follow_link: bool = False,
    buffering: int = -1,
) -> BinaryIO:
    """Open ``path`` for reading as a regular file only: the one way RankScribe opens a
    file in a directory that others may write (a summary dir, a base dir, a job dir).

    The name is opened with ``O_NOFOLLOW | O_NONBLOCK``, so a symbolic link planted at
    it is refused, not followed, and a FIFO never blocks the open; then ``fstat`` of
    what was opened must say a regular file (a FIFO, a socket, a device or a directory
    is refused). With ``owned``, the file must also belong to this user and be
    writable by no one else, as the files RankScribe keeps for itself are
    (``docs/file-format.md``, "Modes"). ``follow_link`` is for a path the user named
    (a checkpoint given by name may be a link the user made): a link is followed, and
    what it leads to must still be a regular file. ``buffering`` is ``open``'s (0:
    unbuffered).

    Raises:
        UnsafeFileError: (an ``OSError``) a link or no regular file is at the name, or,
            with ``owned``, a file of another user or one others may write; the message
            names the path and what was found.
        FileNotFoundError, PermissionError, ...: as ``open`` raises them.
    """
    descriptor = open_regular_descriptor(path, owned=owned, follow_link=follow_link)
    try:
        return os.fdopen(descriptor, "rb", buffering=buffering)
    except BaseException:
        os.close(descriptor)
        raise


def open_regular_descriptor(
    path: str | os.PathLike[str], *, owned: bool = False, follow_link: bool = False
) -> int:
    """:func:`open_regular` as a bare descriptor (the caller closes it), for a reader of
    many small files that pays for no file object (the lineage scan)."""
    target = os.fspath(path)
    flags = _READ_FLAGS & ~getattr(os, "O_NOFOLLOW", 0) if follow_link else _READ_FLAGS
    try:
        descriptor = os.open(target, flags)
    except OSError as error:
        if error.errno in _REFUSED_AT_OPEN:
            raise _refused_at_open(target, error, follow_link) from error
        raise
    try:
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode):
            raise _not_regular(target, found.st_mode)
        if owned:
            _check_owned(target, found)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def user_text(uid: int) -> str:
    """``uid 65534 (nobody)``: a user as a warning names it (the name when the system knows it)."""
    try:
        import pwd  # noqa: PLC0415 - POSIX only; importing this module needs no pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError, OverflowError):  # no pwd, or no such user
        return f"uid {uid}"


def foreign_owner(found: os.stat_result) -> str | None:
    """Why a file or directory ``found`` (its ``stat``) is not this user's to trust, or ``None``.

    Accepted is only what belongs to the user running this process (its effective uid;
    so a file of root's when root runs it, and no other). Anything else at one of a job's
    or a base's well-known names (``docs/layout.md``, "Files of another user") may say
    what another user wants it to: the answer names its owner and this user, as
    ``"it belongs to uid 65534 (nobody), not to this user, uid 0 (root)"``.
    """
    owner = getattr(os, "geteuid", None)
    if owner is None or found.st_uid == owner():
        return None
    return f"it belongs to {user_text(found.st_uid)}, not to this user, {user_text(owner())}"


def _check_owned(path: str, found: os.stat_result) -> None:
    foreign = foreign_owner(found)
    if foreign is not None:
        raise UnsafeFileError(path, foreign)
    if found.st_mode & 0o022:
        mode = stat.S_IMODE(found.st_mode)
        raise UnsafeFileError(path, f"others may write it (mode {mode:04o})")


def read_regular(
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    owned: bool = False,
    follow_link: bool = False,
) -> bytes:
    """The bytes of ``path``, opened with :func:`open_regular` (same rules, same errors).

    ``limit``: the most bytes the caller expects; a longer file is refused with
    :class:`UnsafeFileError` after reading ``limit + 1`` bytes
    at most.
    """
    if limit is not None:
        check_int("limit", limit, minimum=0)
    with open_regular(path, owned=owned, follow_link=follow_link) as handle:
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise UnsafeFileError(os.fspath(path), f"it is longer than the {limit} bytes expected")
    return data


_RANK_DIR_PREFIX = "rank_"
_RANK_DIR = re.compile(rf"{_RANK_DIR_PREFIX}(0|[1-9][0-9]*)", re.ASCII)


_LOCK_FLAGS = (
    os.O_RDWR
    | os.O_CREAT
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


@contextmanager
def exclusive_lock(path: str | os.PathLike[str], *, timeout: float) -> Iterator[None]:
    """Hold an exclusive lock between processes on the lock file ``path``; remove the file
    when done, so a finished run leaves no ``*.lock`` behind (``docs/layout.md``, "Lock
    files").

    The lock is ``flock`` on the file, opened read-write (so it holds on NFS too, where
    ``flock`` is a byte-range lock) with ``O_NOFOLLOW | O_NONBLOCK`` (a link or a FIFO
    planted at the name is refused, as :func:`open_regular` refuses them). The holder
    removes the file *before* it unlocks, and a process that gets the lock checks that
    the file it locked is still the one at ``path``: a waiter that had opened the file
    the holder removed finds it gone (or another one there) and tries again on the
    current one. So two processes never hold the lock at once, and only the holder of
    a lock file removes it. Every user of a lock file must take it this way.

    Raises:
        LockTimeoutError: (a ``TimeoutError``) the lock was not free within ``timeout``
            seconds (polled, never a blocking wait).
        UnsafeFileError: something other than a regular file is at ``path``.
    """
    import fcntl  # noqa: PLC0415 - POSIX only; importing this module needs no fcntl

    target = os.fspath(path)
    deadline = Deadline(timeout)
    backoff = Backoff(0.001, 0.05)
    while True:
        descriptor = _open_lock_file(target)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            if deadline.expired():
                raise LockTimeoutError(
                    f"the lock file {target} was held by another process for {timeout:g} s"
                ) from None
            backoff.sleep(deadline)
            continue
        except BaseException:
            os.close(descriptor)
            raise
        if _still_at(target, descriptor):
            break
        os.close(descriptor)  # the holder before removed it: lock the current file
    try:
        yield
    finally:
        try:
            with suppress(FileNotFoundError):
                os.unlink(target)  # before the unlock: see the docstring
        finally:
            os.close(descriptor)  # closing unlocks


def _open_lock_file(path: str) -> int:
    try:
        descriptor = os.open(path, _LOCK_FLAGS, file_mode(final=False))
    except OSError as error:
        if error.errno in _REFUSED_AT_OPEN:
            raise _refused_at_open(path, error, follow_link=False) from error
        raise
    try:
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode):
            raise _not_regular(path, found.st_mode)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _still_at(path: str, descriptor: int) -> bool:
    """True when the file open at ``descriptor`` is the one at ``path``."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return os.path.samestat(named, os.fstat(descriptor))


def rank_dir_name(rank: int) -> str:
    """``rank_<rank>``: the directory rank ``rank`` of a distributed job writes into.

    The job layout (``docs/layout.md``): every rank writes only into its own
    ``rank_<n>`` directory of the job's directory; this package makes them, the
    lineage package merges and reports them.

    Raises:
        RanksTypeError: ``rank`` is not an int (or is a bool).
        RanksValueError: ``rank`` is negative.
    """
    check_int("rank", rank, minimum=0)
    return f"{_RANK_DIR_PREFIX}{rank}"


def parse_rank_dir_name(name: str) -> int | None:
    """The rank of a directory named as :func:`rank_dir_name` names it, else ``None``.

    Only ``rank_`` followed by ASCII digits with no leading zero (``rank_0`` itself
    aside) is a rank directory, so that each rank has exactly one directory name:
    ``rank_01``, ``rank_-1``, ``rank_`` and ``rank_`` with non-ASCII digits
    (``rank_١``) are not.

    Raises:
        RanksTypeError: ``name`` is not a str.
    """
    if not isinstance(name, str):
        raise RanksTypeError(f"name must be a str, got {type(name).__name__}")
    match = _RANK_DIR.fullmatch(name)
    return int(match[1]) if match else None


EventFileKind = Literal["summary", "lineage", "tensorboard"]

# MindInsight's own tests (summary_watcher, ms_data_loader): a summary file is
# any name containing `summary.<digits>`; the ones ending in `_lineage` hold
# lineage and the ones ending in `_explain` hold MindSpore 1.x XAI data.
_MINDINSIGHT_SUMMARY = re.compile(r"summary\.(\d+)")


def event_file_kind(name: str) -> EventFileKind | None:
    """What the file called ``name`` holds as a viewer tells it, or ``None`` (no event file).

    The rules are MindInsight's (``summary.<digits>`` anywhere in the name; ending in
    ``_lineage``: lineage; ending in ``_explain``: MindSpore 1.x XAI data, which nothing
    here reads) and TensorBoard's (``tfevents`` anywhere). A directory holding such a
    file holds a run (``docs/layout.md``, "Two jobs, one directory"); the writer's
    ``FileKind`` is this answer as an enum.
    """
    if _MINDINSIGHT_SUMMARY.search(name):
        if name.endswith("_lineage"):
            return "lineage"
        if name.endswith("_explain"):
            return None
        return "summary"
    if "tfevents" in name:
        return "tensorboard"
    return None


def write_rank_dirs(job_dir: str | os.PathLike[str], directories: dict[int, str]) -> str:
    """Record in ``job_dir`` the directory of each rank that writes outside it.

    ``directories`` maps a rank to the absolute path of the directory it writes
    into; the file (:data:`RANK_DIRS_FILE_NAME`, JSON, private) is written with
    :func:`atomic_write`. Returns its path.
    """
    entries = {}
    for rank, directory in sorted(directories.items()):
        check_int("rank", rank, minimum=0)
        if not isinstance(directory, str):
            raise RanksTypeError(
                f"the directory of rank {rank} must be a str (an absolute path), got "
                f"{type(directory).__name__}"
            )
        if not os.path.isabs(directory):
            raise RanksValueError(
                f"the directory of rank {rank} must be an absolute path, got {directory!r}"
            )
        entries[str(rank)] = directory
    data = json.dumps({"rank_dirs": entries}, sort_keys=True).encode("utf-8")
    return atomic_write(os.path.join(os.fspath(job_dir), RANK_DIRS_FILE_NAME), [data])


@dataclass(frozen=True)
class RecordedRankDirs:
    """What a job's :data:`RANK_DIRS_FILE_NAME` says, once checked (:func:`recorded_rank_dirs`).

    ``directories``: rank to directory, each entry one the job may have written (a rank
    below ``2**31``; an absolute, normalised path named ``rank_<rank>`` inside the job's
    parent directory). ``refused``: how many entries were left out (the whole file
    counts one when it was refused: another user's, a link, malformed). ``problems``:
    why, one line each, at most :data:`MAX_RANK_DIR_PROBLEMS` of them, for a warning.
    """

    directories: dict[int, str] = field(default_factory=dict)
    refused: int = 0
    problems: tuple[str, ...] = ()


#: :attr:`RecordedRankDirs.problems` names at most this many of the entries left out.
MAX_RANK_DIR_PROBLEMS = 5
_MOST_RANK = 2**31 - 1  # an MPI rank is an int
_MOST_PATH = 4096  # PATH_MAX on Linux


def recorded_rank_dirs(job_dir: str | os.PathLike[str]) -> RecordedRankDirs:
    """The ranks' directories :func:`write_rank_dirs` recorded in ``job_dir``, checked.

    The file is read with :func:`read_regular` (a link or a FIFO at the name is refused)
    and only when it belongs to the user running this process (:func:`foreign_owner`):
    another user's says nothing. An entry counts when its rank is ASCII digits naming
    a rank below ``2**31`` and its directory is an absolute path written as
    :func:`write_rank_dirs` writes one: normalised (no ``..``), named
    ``rank_<rank>`` (:func:`rank_dir_name`), inside the job's parent directory (as
    ``job_dir`` names it or as it resolves). Everything else is left out and counted.
    Whether the directory is there, and whose it is, the reader checks when it reads it.
    """
    given = os.fspath(job_dir)
    path = os.path.join(given, RANK_DIRS_FILE_NAME)
    try:
        data = read_regular(path, limit=_RANK_DIRS_LIMIT, owned=True)
    except FileNotFoundError:
        return RecordedRankDirs()
    except OSError as error:  # not a regular file of ours: another user's, a link, a FIFO
        return RecordedRankDirs(refused=1, problems=(_problem_of(path, error),))
    try:
        recorded = parse_json(
            data, what=f"the rank directories file {path}", max_bytes=_RANK_DIRS_LIMIT
        )
    except JSONDataError as error:
        return RecordedRankDirs(refused=1, problems=(str(error),))
    entries = recorded.get("rank_dirs") if isinstance(recorded, dict) else None
    if not isinstance(entries, dict):
        return RecordedRankDirs(refused=1, problems=(f"{path} holds no rank_dirs object",))
    parents = tuple(
        {
            os.path.dirname(os.path.abspath(given)).rstrip(os.sep) + os.sep,
            os.path.dirname(os.path.realpath(given)).rstrip(os.sep) + os.sep,
        }
    )
    found: dict[int, str] = {}
    problems: list[str] = []
    refused = 0
    for name, directory in entries.items():
        rank, problem = _recorded_entry(name, directory, parents)
        if rank is None:
            refused += 1
            if len(problems) < MAX_RANK_DIR_PROBLEMS:
                problems.append(f"{path}: {problem}")
        else:
            found[rank] = directory
    return RecordedRankDirs(found, refused, tuple(problems))


def _problem_of(path: str, error: OSError) -> str:
    return str(error) if isinstance(error, UnsafeFileError) else f"cannot read {path}: {error}"


def _recorded_entry(
    name: object, directory: object, parents: tuple[str, ...]
) -> tuple[int | None, str]:
    """The rank of one entry of the file, or None and why it is left out."""
    # At most 10 digits: int() of thousands of digits is slow, then refused (ValueError).
    if not (isinstance(name, str) and name.isascii() and name.isdigit() and len(name) <= 10):
        return None, f"the rank {str(name)[:40]!r} is not a rank number"
    rank = int(name)
    if rank > _MOST_RANK:
        return None, f"the rank {name} is beyond 2**31 - 1"
    problem = _recorded_directory_problem(rank, directory, parents)
    return (None, problem) if problem is not None else (rank, "")


def _recorded_directory_problem(
    rank: int, directory: object, parents: tuple[str, ...]
) -> str | None:
    if not isinstance(directory, str) or not directory or len(directory) > _MOST_PATH:
        return f"rank {rank}'s directory is no path"
    where = f"rank {rank}'s directory {directory[:200]!r}"
    if "\0" in directory or not os.path.isabs(directory):
        return f"{where} is not an absolute path"
    if os.path.normpath(directory) != directory:
        return f"{where} is not written as the job writes it (normalised, no '..')"
    name = f"{_RANK_DIR_PREFIX}{rank}"  # rank_dir_name(rank), for a rank known good
    if os.path.basename(directory) != name:
        return f"{where} is not named {name}"
    if not directory.startswith(parents):  # each parent ends in a separator
        return f"{where} is outside the job's parent directory {min(parents)}"
    return None


def read_rank_dirs(job_dir: str | os.PathLike[str]) -> dict[int, str]:
    """The ranks' directories :func:`write_rank_dirs` recorded in ``job_dir`` (``{}``: none).

    :attr:`RecordedRankDirs.directories` of :func:`recorded_rank_dirs` (same checks):
    a file of another user, a link, a FIFO, a file that is not such a record count as
    none, and entries that are not a rank and its ``rank_<n>`` directory in the job's
    parent directory are left out.
    """
    return recorded_rank_dirs(job_dir).directories
