"""Where a rank writes: the run layout of a distributed job.

For ``summary_dir=runs/exp1`` and 4 ranks, rank ``r`` writes into
``runs/exp1/rank_<r>/``; a single process writes straight into ``runs/exp1``.
Rank 0 writes job-wide files (the merged lineage) into ``runs/exp1`` itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from rankscribe.ranks._info import RankInfo
from rankscribe.ranks.errors import RanksTypeError

__all__ = ["DIRECTORY_MODE", "rank_dir"]

#: Summary directories are private to the user who runs the job.
DIRECTORY_MODE = 0o700


def rank_dir(summary_dir: str | os.PathLike[str], info: RankInfo) -> Path:
    """Return (and create, mode 0700) the directory this rank writes its summaries into.

    ``summary_dir`` itself for a single process, ``summary_dir/rank_<rank>``
    otherwise. Directories that already exist keep their permissions; every
    rank may call this at the same time.
    """
    if not isinstance(summary_dir, (str, os.PathLike)):
        raise RanksTypeError(
            f"summary_dir must be a str or os.PathLike, got {type(summary_dir).__name__}"
        )
    if not isinstance(info, RankInfo):
        raise RanksTypeError(f"info must be a RankInfo (from detect()), got {type(info).__name__}")
    base = Path(summary_dir)
    target = base if info.world_size == 1 else base / f"rank_{info.rank}"
    _make_private_dir(base)
    _make_private_dir(target)
    return target


def _make_private_dir(path: Path) -> None:
    try:
        path.mkdir(mode=DIRECTORY_MODE, parents=True)
    except FileExistsError:
        if not path.is_dir():
            raise
        return
    # mkdir's mode is filtered by the umask; the summary files inside are private,
    # so the directory is made exactly 0700 whatever the umask.
    path.chmod(DIRECTORY_MODE)
