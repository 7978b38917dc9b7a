"""The warning a plain SummaryRecord gives when the ranks of one launch share its directory.

A ``SummaryRecord`` opened without ``rank=`` labels its files with the rank the
launcher exported (``rankscribe.ranks.launchers.launcher_rank``, which reads the
ranks package's one table of launcher variables), so that the ranks of an
``mpiexec`` or ``torchrun`` job never all write files named rank 0 (see
``docs/layout.md``, "A plain SummaryRecord under a launcher"). When those ranks
all write into one directory, their curves mix: this module says so.
"""

from __future__ import annotations

import logging
import os

from rankscribe.ranks.files import rank_dir_name
from rankscribe.ranks.launchers import LauncherRank

logger = logging.getLogger(__name__)


def warn_shared_directory(directory: str, launched: LauncherRank, rank: int) -> None:
    """Say so when the ranks of one launch would all write into ``directory``."""
    if os.path.basename(os.path.normpath(directory)) == rank_dir_name(rank):
        return
    size = "several" if launched.world_size is None else str(launched.world_size)
    logger.warning(
        "SummaryRecord(%r) under %s (%s=%d, %s ranks): every rank that opens this "
        "directory writes its own files into it (this one labelled rank %d), and readers "
        "of the directory mix the ranks' curves. Give each rank its own directory: "
        "rankscribe.ranks.rank_dir(%r, rankscribe.ranks.detect()) gives %r.",
        directory,
        launched.launcher,
        launched.variable,
        launched.rank,
        size,
        rank,
        directory,
        os.path.join(directory, rank_dir_name(rank)),
    )
