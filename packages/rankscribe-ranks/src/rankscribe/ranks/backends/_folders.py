"""Whose folder is this: the rules for every folder and file the file backends read.

A rendezvous folder is where ranks leave each other messages. If another user
could write there, they could plant a message, a lock, or a link; so a folder
is used only when this user owns it and neither its group nor others may write
to it, and every file read from it must be a regular file of this user's (not
a link), no larger than :data:`MESSAGE_LIMIT`. Lock files are created 0600.
The rules are in ``docs/layout.md`` ("Who may write a rendezvous folder").
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from rankscribe.ranks.errors import MessageError, RendezvousError, UnsafeFileError
from rankscribe.ranks.files import atomic_write, exclusive_lock, make_private_dir, open_regular

__all__ = [
    "FILE_MODE",
    "MESSAGE_LIMIT",
    "check_folder",
    "lock",
    "private_folder",
    "read_private_file",
    "write_private_file",
]

#: Mode of every file the file backends create (messages, members, locks).
FILE_MODE = 0o600
#: Largest file read from a rendezvous folder (a message or the members list).
MESSAGE_LIMIT = 4 << 30
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def private_folder(path: Path, what: str, *, follow_link: bool, advice: str) -> Path:
    """Make ``path`` (0700, parents too) or accept it if :func:`check_folder` does."""
    if not os.path.lexists(path):
        with contextlib.suppress(FileExistsError):  # another rank made it meanwhile
            make_private_dir(path)
    check_folder(path, what, follow_link=follow_link, advice=advice)
    return path


def check_folder(path: Path, what: str, *, follow_link: bool, advice: str) -> None:
    """Raise :class:`RendezvousError` unless ``path`` is a folder only this user may write.

    ``follow_link``: a symbolic link the user gave (``rendezvous_dir``) is judged by
    the folder it leads to; a link where this package makes its own folders is refused.
    """
    try:
        found = os.stat(path) if follow_link else os.lstat(path)
    except OSError as error:
        raise RendezvousError(f"{what} {path} cannot be used: {error.strerror}") from error
    me = os.geteuid()
    if stat.S_ISLNK(found.st_mode):
        problem = "is a symbolic link, where this package makes a folder of its own"
    elif not stat.S_ISDIR(found.st_mode):
        problem = "is not a folder"
    elif found.st_uid != me:
        problem = (
            f"belongs to uid {found.st_uid}, not to this user (uid {me}): its owner "
            "could plant messages that this job would read"
        )
    elif found.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = (
            f"is writable by its group or by others (mode "
            f"{stat.S_IMODE(found.st_mode):04o}): they could plant messages that "
            f"this job would read; run `chmod go-w {path}` if it is yours"
        )
    else:
        return
    raise RendezvousError(f"{what} {path} {problem}; {advice}")


def read_private_file(path: Path, limit: int = MESSAGE_LIMIT) -> bytes:
    """The bytes of ``path``, a regular file of this user's; :class:`MessageError` if not."""
    try:
        with open_regular(path) as handle:
            found = os.fstat(handle.fileno())
            if found.st_uid != os.geteuid():
                raise MessageError(f"{path} belongs to uid {found.st_uid}, not to this user")
            if found.st_size > limit:
                raise MessageError(f"{path} holds {found.st_size} bytes, more than {limit}")
            data = handle.read(limit + 1)
    except UnsafeFileError as error:
        raise MessageError(str(error)) from error
    except OSError as error:
        raise MessageError(f"{path} cannot be read: {error.strerror}") from error
    if len(data) > limit:
        raise MessageError(f"{path} holds more than {limit} bytes")
    return data


def write_private_file(path: Path, data: bytes | bytearray) -> None:
    """Write ``data`` to ``path`` atomically (0600, fsynced: the writer's ``atomic_write``)."""
    atomic_write(path, [memoryview(data)], mode=FILE_MODE)


def lock(path: Path, timeout: float) -> contextlib.AbstractContextManager[None]:
    """A lock file of this user's alone (0600, never following a planted link), removed
    when released (:func:`rankscribe.ranks.files.exclusive_lock`)."""
    return exclusive_lock(path, timeout=timeout)
