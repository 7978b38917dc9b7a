"""What the examples share: the rule that a rerun never writes into an earlier job.

One rule for every example (``docs/layout.md``, "A rerun of an example"): the job goes
to ``<summary-dir>``, or, when that already holds a recorded run, to the first of
``<summary-dir>-2``, ``<summary-dir>-3``, ... that does not. Rank 0 decides and creates
the directory; every rank gets rank 0's answer through ``share``, a broadcast from
rank 0 that every rank calls (MPI's ``bcast``, ``torch.distributed``'s
``broadcast_object_list``, or nothing for one process).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rankscribe.writer.files import make_private_dir


def claim_job_dir(requested: str | os.PathLike[str], rank: int,
                  share: Callable[[str], str]) -> Path:
    """The job's directory: ``requested`` or its first free ``-N`` sibling, alike on every rank.

    Rank 0 says so when the job does not go to ``requested``.
    """
    choice = str(_first_free(Path(requested))) if rank == 0 else ""
    claimed = Path(share(choice))
    if rank == 0 and claimed != Path(requested):
        print(f"{os.fspath(requested)} already holds a run; this one goes to {claimed}")
    return claimed


def _first_free(requested: Path) -> Path:
    candidate, number = requested, 1
    while True:
        try:
            make_private_dir(candidate, exist_ok=False)  # made here: no other job has it
            return candidate
        except FileExistsError:
            if not _holds_a_run(candidate):  # e.g. made empty by the user beforehand
                return candidate
        number += 1
        candidate = requested.with_name(f"{requested.name}-{number}")


def _holds_a_run(directory: Path) -> bool:
    """Whether a summary file is in ``directory`` or one of its ``rank_*`` directories."""
    if not directory.is_dir():
        return True  # a file or a dangling link is in the way: never write there
    places = [directory, *sorted(directory.glob("rank_*"))]
    return any("summary." in entry.name for place in places if place.is_dir()
               for entry in place.iterdir())
