"""Which job owns a directory: the claim a job makes before any of its ranks writes.

Two jobs started into one summary directory would otherwise both write
``rank_0/``, ``rank_1/``, ... and their files would mix. So before any rank
writes, rank 0 claims the directory: it creates the claim file
:data:`CLAIM_FILE_NAME` in it with its whole content (a new job id, mode
0600, fsynced) already in place: the content goes to a temporary file first,
which is then hard-linked to the claim's name. A link, like ``O_EXCL``, fails
when anything is at that name, so exactly one process claims, and nobody ever
reads a claim that is empty or half written. It then broadcasts the directory
and the id through the job's coordinator, so every rank writes where rank 0
claimed. A directory that holds a claim, or summary files written without one
(``rank_<n>`` directories included), belongs to another job: ``on_exists``
says what happens then. The rule is in ``docs/layout.md`` ("Two jobs, one
directory").
"""

from __future__ import annotations

import errno
import json
import logging
import os
import secrets
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rankscribe.ranks._args import check_choice, check_path, check_timeout
from rankscribe.ranks.coordination._coordinator import Coordinator
from rankscribe.ranks.coordination._deadline import Backoff, Deadline
from rankscribe.ranks.detection._info import detect
from rankscribe.ranks.errors import (
    JobDirClaimedError,
    JobDirError,
    JSONDataError,
    RanksTypeError,
    RanksValueError,
)
from rankscribe.ranks.files import (
    CLAIM_FILE_NAME,
    event_file_kind,
    foreign_owner,
    fsync_directory,
    make_private_dir,
    parse_rank_dir_name,
)
from rankscribe.ranks.messages._jsondata import parse_json

logger = logging.getLogger(__name__)

__all__ = ["JobClaim", "OnExists", "claim_job_dir"]

OnExists = Literal["new", "error", "append"]
_ON_EXISTS = ("new", "error", "append")
# A directory named past <dir>-10000 is a loop, not a job.
_MOST_DIRECTORIES = 10_000
_CLAIM_LIMIT = 64 * 1024
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
# How long a claim that is not (yet) readable is waited for: a claim written by a
# filesystem without hard links appears empty before its content (see _publish_claim).
_CLAIM_PATIENCE = 5.0
# Filesystems that cannot hard-link (some network and FUSE ones) say so with these.
_NO_LINKS = frozenset(
    code
    for code in (errno.EPERM, errno.EXDEV, getattr(errno, "ENOTSUP", None), errno.EOPNOTSUPP)
    if code is not None
)


@dataclass(frozen=True)
class JobClaim:
    """Where a job writes and the id it claimed the directory under.

    ``appended`` is True when ``on_exists="append"`` joined a directory that
    another job (or an earlier run of this one) had claimed or written.
    """

    directory: Path
    job_id: str
    appended: bool = False


def claim_job_dir(
    summary_dir: str | os.PathLike[str],
    *,
    on_exists: OnExists = "new",
    coordinator: Coordinator | None = None,
    timeout: float | None = None,
) -> JobClaim:
    """Claim ``summary_dir`` for this job before any rank writes into it; return the claim.

    Every rank calls this, with the job's ``coordinator`` (``None`` only for a job
    that is one process): rank 0 claims, and every rank gets the same
    :class:`JobClaim` back. When the directory belongs to another job already,
    ``on_exists`` decides:

    - ``"new"`` (the default): claim the first free ``<dir>-2``, ``<dir>-3``, ...
      instead, as the examples do;
    - ``"error"``: raise :class:`JobDirClaimedError` (a ``FileExistsError``) on
      every rank, naming the directory and the job that holds it;
    - ``"append"``: write into it anyway (a job that resumes its own directory);
      the claim's job id is kept.

    ``timeout`` bounds the broadcast (the coordinator's default when None).
    """
    base = check_path("summary_dir", summary_dir)
    check_choice("on_exists", on_exists, _ON_EXISTS)
    if coordinator is not None and not isinstance(coordinator, Coordinator):
        raise RanksTypeError(
            f"coordinator must be a rankscribe.ranks Coordinator (create_coordinator()) or "
            f"None, got {type(coordinator).__name__}"
        )
    if timeout is not None:
        check_timeout("timeout", timeout)
    if coordinator is None:
        world_size = detect().world_size
        if world_size > 1:
            raise RanksValueError(
                f"coordinator must be given on a job of {world_size} ranks, so that they "
                "all write where rank 0 claimed: claim_job_dir(..., "
                "coordinator=create_coordinator())"
            )
        return _outcome_claim(_claim_here(base, on_exists, 1))
    outcome = _claim_here(base, on_exists, coordinator.world_size) if coordinator.rank == 0 else {}
    if coordinator.world_size > 1:
        outcome = coordinator.bcast(outcome, root=0, timeout=timeout)
    return _outcome_claim(outcome)


def _claim_here(base: Path, on_exists: str, world_size: int) -> dict[str, Any]:
    """Rank 0's claim, as data every rank can be sent (an error too, so all raise it)."""
    try:
        for number in range(1, _MOST_DIRECTORIES + 1):
            candidate = base if number == 1 else base.with_name(f"{base.name}-{number}")
            job_id = _try_claim(candidate, world_size)
            if job_id is not None:
                return {"directory": str(candidate), "job_id": job_id, "appended": False}
            if on_exists == "error":
                holder = _read_claim(candidate, Deadline(_CLAIM_PATIENCE)) or {}
                return {"error": "claimed", "directory": str(candidate), "claim": holder}
            if on_exists == "append":
                return _join(candidate, world_size)
            _warn_if_another_users(candidate)
        return {
            "error": "os",
            "directory": str(base),
            "message": f"{base} and {_MOST_DIRECTORIES - 1} numbered siblings are all taken",
        }
    except OSError as error:
        return {"error": "os", "directory": str(base), "message": str(error)}


def _join(directory: Path, world_size: int) -> dict[str, Any]:
    """``on_exists="append"``: the job id of ``directory``'s claim, claiming it if it has none.

    Two jobs that append at once agree: whichever links its claim first wins,
    and the other reads that claim.
    """
    deadline = Deadline(_CLAIM_PATIENCE)
    while True:
        holder = _read_claim(directory, deadline)
        if holder is None:  # a run recorded without a claim: claim it
            job_id = _publish_claim(directory, world_size)
            if job_id is None and not deadline.expired():
                continue  # another job linked its claim first: read it
            if job_id is None:
                return {
                    "error": "os",
                    "directory": str(directory),
                    "message": "its claim file appears and disappears (another process removes it)",
                }
        elif "refused" in holder:
            return {
                "error": "os",
                "directory": str(directory),
                "message": f"its claim file {directory / CLAIM_FILE_NAME} is not this user's "
                f"({holder['refused']}): a job of another user, which this one does not join",
            }
        elif isinstance(holder.get("job_id"), str):
            job_id = holder["job_id"]
        else:
            return {
                "error": "os",
                "directory": str(directory),
                "message": f"its claim file {directory / CLAIM_FILE_NAME} is not a claim this "
                "package writes (damaged, or not a regular file): remove it to append",
            }
        return {"directory": str(directory), "job_id": job_id, "appended": True}


def _outcome_claim(outcome: Any) -> JobClaim:
    """The :class:`JobClaim` rank 0 decided, or its error raised on this rank."""
    if not isinstance(outcome, dict):
        raise JobDirError(f"rank 0 sent {type(outcome).__name__}, not a job claim")
    error = outcome.get("error")
    if error == "claimed":
        holder = dict(outcome.get("claim") or {})
        refused = holder.pop("refused", None)
        if refused is not None:
            by = f"another user's job (its claim file: {refused})"
        elif holder.get("job_id"):
            by = f"job {holder.get('job_id')} (pid {holder.get('pid')} on {holder.get('host')})"
        else:
            by = "a run recorded without a claim"
        raise JobDirClaimedError(
            f"{outcome['directory']} belongs to {by}: pass another summary_dir, remove that "
            f"run, or on_exists='new' to write into the next free '<dir>-N'",
            outcome["directory"],
            dict(holder),
        )
    if error is not None:
        raise JobDirError(
            f"the job directory {outcome.get('directory')} cannot be claimed: "
            f"{outcome.get('message')}"
        )
    return JobClaim(
        Path(outcome["directory"]), str(outcome["job_id"]), bool(outcome.get("appended"))
    )


def _try_claim(directory: Path, world_size: int) -> str | None:
    """The new job id if this process claimed ``directory``; None if it belongs to a job."""
    make_private_dir(directory)
    if os.path.lexists(directory / CLAIM_FILE_NAME) or _holds_a_run(directory):
        return None
    return _publish_claim(directory, world_size)


def _warn_if_another_users(directory: Path) -> None:
    """A claim of another user's, passed by for the next directory, is named with its owner."""
    claim_path = directory / CLAIM_FILE_NAME
    try:
        foreign = foreign_owner(os.lstat(claim_path))
    except OSError:
        return
    if foreign is not None:
        logger.warning("%s: %s; the job goes to the next free directory", claim_path, foreign)


def _publish_claim(directory: Path, world_size: int) -> str | None:
    """Claim ``directory`` with a new job id; None when another claim is there first.

    The claim is written whole and fsynced under a temporary name, then linked
    to :data:`CLAIM_FILE_NAME`: the link fails if anything is at that name (a
    link is never followed), so a claim is never torn nor replaced.
    """
    job_id = secrets.token_hex(8)
    content = json.dumps(
        {
            "job_id": job_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "world_size": world_size,
            "claimed_at": time.time(),
        }
    ).encode("utf-8")
    claim_path = directory / CLAIM_FILE_NAME
    temporary = directory / f"{CLAIM_FILE_NAME}.{job_id}.tmp"
    _write_synced(temporary, content)
    try:
        os.link(temporary, claim_path, follow_symlinks=False)
    except FileExistsError:
        return None  # another job claimed it between the look and the claim
    except OSError as error:
        if error.errno not in _NO_LINKS:
            raise
        # No hard links here: create the claim exclusively and write it in place (a
        # reader that finds it still empty waits, see _read_claim).
        try:
            _write_synced(claim_path, content)
        except FileExistsError:
            return None
    finally:
        os.unlink(temporary)
    fsync_directory(directory)
    return job_id


def _write_synced(path: Path, content: bytes) -> None:
    descriptor = os.open(path, _FLAGS, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())


def _read_claim(directory: Path, deadline: Deadline) -> dict[str, Any] | None:
    """What the claim file says: None when there is none, ``{}`` when it is not a claim.

    A claim file that is still being written (empty, or not yet ending its JSON
    object, and modified in the last seconds) is read again until ``deadline``.
    """
    backoff = Backoff(0.005, 0.1)
    while True:
        claim, whole = _claim_content(directory / CLAIM_FILE_NAME)
        if whole or deadline.expired():
            return claim
        backoff.sleep(deadline)


def _claim_content(path: Path) -> tuple[dict[str, Any] | None, bool]:
    """The claim at ``path`` (None: nothing there; ``{}``: something that is not a claim;
    ``{"refused": why}``: another user's, naming its owner), and whether the file was
    whole (False: it may still be being written)."""
    opened = _claim_file(path)
    if not isinstance(opened, tuple):
        return opened, True
    data, found = opened
    # What _publish_claim writes, cut short, and written moments ago, is a claim being
    # written; an old one is a torn claim, for good.
    cut_short = not data or (data.startswith(b'{"job_id": ') and not data.endswith(b"}"))
    whole = not cut_short or time.time() - found.st_mtime > _CLAIM_PATIENCE
    try:
        claim = parse_json(data, what=f"the claim file {path}", max_bytes=_CLAIM_LIMIT)
    except JSONDataError:
        return {}, whole
    if not isinstance(claim, dict) or not isinstance(claim.get("job_id"), str):
        return {}, True
    return {
        key: claim[key]
        for key in ("job_id", "host", "pid", "world_size")
        if isinstance(claim.get(key), (str, int)) and not isinstance(claim.get(key), bool)
    }, True


def _claim_file(path: Path) -> tuple[bytes, os.stat_result] | dict[str, Any] | None:
    """The claim file's bytes and status, or at once what :func:`_claim_content` says of it."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    with os.fdopen(descriptor, "rb") as handle:
        found = os.fstat(handle.fileno())
        if not stat.S_ISREG(found.st_mode):
            return {}
        foreign = foreign_owner(found)
        if foreign is not None:  # another user's: what it says is not believed
            return {"refused": foreign}
        return handle.read(_CLAIM_LIMIT + 1), found


def _holds_a_run(directory: Path) -> bool:
    """Summary or TensorBoard files in ``directory`` or in its ``rank_<n>`` directories."""
    try:
        entries = list(os.scandir(directory))
    except NotADirectoryError as error:
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(directory)) from error
    for entry in entries:
        if event_file_kind(entry.name) is not None:
            return True
        if (
            parse_rank_dir_name(entry.name) is not None
            and entry.is_dir(follow_symlinks=False)
            and any(event_file_kind(name) is not None for name in os.listdir(entry.path))
        ):
            return True
    return False
