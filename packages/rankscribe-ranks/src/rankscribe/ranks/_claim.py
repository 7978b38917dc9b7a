"""Which job owns a directory: the claim a job makes before any of its ranks writes.

Two jobs started into one summary directory would otherwise both write
``rank_0/``, ``rank_1/``, ... and their files would mix. So before any rank
writes, rank 0 claims the directory: it creates the claim file
:data:`CLAIM_FILE_NAME` in it with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (mode
0600), which exactly one process can do, and writes a new job id into it; it
then broadcasts the directory and the id through the job's coordinator, so
every rank writes where rank 0 claimed. A directory that holds a claim, or
summary files written without one (``rank_<n>`` directories included), belongs
to another job: ``on_exists`` says what happens then. The rule is in
``docs/layout.md`` ("Two jobs, one directory").
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rankscribe.ranks._args import check_choice, check_path, check_timeout
from rankscribe.ranks._coordinator import Coordinator
from rankscribe.ranks._info import detect
from rankscribe.ranks.errors import (
    JobDirClaimedError,
    JobDirError,
    RanksTypeError,
    RanksValueError,
    UnsafeFileError,
)
from rankscribe.ranks.files import (
    event_file_kind,
    fsync_directory,
    make_private_dir,
    parse_rank_dir_name,
    read_regular,
)

__all__ = ["CLAIM_FILE_NAME", "JobClaim", "OnExists", "claim_job_dir"]

#: The claim file in a job's directory: who claimed it, when, under which job id.
CLAIM_FILE_NAME = ".rankscribe-job"

OnExists = Literal["new", "error", "append"]
_ON_EXISTS = ("new", "error", "append")
# A directory named past <dir>-10000 is a loop, not a job.
_MOST_DIRECTORIES = 10_000
_CLAIM_LIMIT = 64 * 1024
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


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
            holder = _read_claim(candidate)
            if on_exists == "error":
                return {"error": "claimed", "directory": str(candidate), "claim": holder}
            if on_exists == "append":
                job_id = holder.get("job_id")
                if not isinstance(job_id, str):
                    job_id = _write_claim(candidate, world_size, exclusive=False)
                return {"directory": str(candidate), "job_id": job_id, "appended": True}
        return {
            "error": "os",
            "directory": str(base),
            "message": f"{base} and {_MOST_DIRECTORIES - 1} numbered siblings are all taken",
        }
    except OSError as error:
        return {"error": "os", "directory": str(base), "message": str(error)}


def _outcome_claim(outcome: Any) -> JobClaim:
    """The :class:`JobClaim` rank 0 decided, or its error raised on this rank."""
    if not isinstance(outcome, dict):
        raise JobDirError(f"rank 0 sent {type(outcome).__name__}, not a job claim")
    error = outcome.get("error")
    if error == "claimed":
        holder = outcome.get("claim") or {}
        by = (
            f"job {holder.get('job_id')} (pid {holder.get('pid')} on {holder.get('host')})"
            if holder.get("job_id")
            else "a run recorded without a claim"
        )
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
    try:
        return _write_claim(directory, world_size, exclusive=True)
    except FileExistsError:
        return None  # another job claimed it between the look and the claim


def _write_claim(directory: Path, world_size: int, *, exclusive: bool) -> str:
    job_id = secrets.token_hex(8)
    claim = {
        "job_id": job_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "world_size": world_size,
        "claimed_at": time.time(),
    }
    flags = _FLAGS if exclusive else _FLAGS & ~os.O_EXCL | os.O_TRUNC
    path = directory / CLAIM_FILE_NAME
    try:
        # O_NONBLOCK: rewriting a claim ("append") must not wait on a FIFO planted there.
        descriptor = os.open(path, flags | os.O_NONBLOCK, 0o600)
    except OSError as error:
        if error.errno in (errno.ENXIO, errno.ELOOP):  # a FIFO without a reader, a link
            raise UnsafeFileError(str(path), "it is not a regular file", "write") from error
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise UnsafeFileError(str(path), "it is not a regular file", "write")
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(claim, handle)
        handle.flush()
        os.fsync(handle.fileno())
    fsync_directory(directory)
    return job_id


def _read_claim(directory: Path) -> dict[str, Any]:
    """What the claim file says (empty when there is none or it is not one)."""
    try:
        data = read_regular(directory / CLAIM_FILE_NAME, limit=_CLAIM_LIMIT)
    except OSError:  # none, or a link, a FIFO, ... (UnsafeFileError): no claim
        return {}
    try:
        claim = json.loads(data)
    except ValueError:
        return {}
    if not isinstance(claim, dict):
        return {}
    return {
        key: claim[key]
        for key in ("job_id", "host", "pid", "world_size")
        if isinstance(claim.get(key), (str, int)) and not isinstance(claim.get(key), bool)
    }


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
