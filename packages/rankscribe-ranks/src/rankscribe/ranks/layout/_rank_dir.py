"""Where a rank writes: the run layout of a distributed job.

For ``summary_dir=runs/exp1`` and 4 ranks, rank ``r`` writes into
``runs/exp1/rank_<r>/``; a single process writes straight into ``runs/exp1``.
Rank 0 writes job-wide files (the merged lineage) into ``runs/exp1`` itself.
The ``rank_<r>`` name is :func:`rankscribe.ranks.files.rank_dir_name`, the one
definition every package reads and writes; see ``docs/layout.md``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from rankscribe.ranks._args import check_path
from rankscribe.ranks.detection._info import RankInfo, check_info
from rankscribe.ranks.files import make_private_dir, rank_dir_name

__all__ = ["DIRECTORY_MODE", "rank_dir"]

#: Summary directories are private to the user who runs the job.
DIRECTORY_MODE = 0o700


def rank_dir(summary_dir: str | os.PathLike[str], info: RankInfo) -> Path:
    """Return (and create, mode 0700) the directory this rank writes its summaries into.

    ``summary_dir`` itself for a single process, ``summary_dir/rank_<rank>``
    otherwise. Directories that already exist keep their permissions; every
    rank may call this at the same time.
    """
    base = check_path("summary_dir", summary_dir)
    info = check_info("info", info)
    target = base if info.world_size == 1 else base / rank_dir_name(info.rank)
    try:
        # Made with exactly the package's directory mode, never through a planted link.
        make_private_dir(target)
    except NotADirectoryError as error:
        raise FileExistsError(
            errno.EEXIST,
            f"something other than a directory is in the way ({error.strerror})",
            str(target),
        ) from error
    return target
