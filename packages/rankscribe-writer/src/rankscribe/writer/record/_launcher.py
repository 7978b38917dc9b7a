"""Which rank a launcher says this process is, read from the environment alone.

A ``SummaryRecord`` opened without ``rank=`` labels its files with this rank, so
that the ranks of an ``mpiexec`` or ``torchrun`` job never all write files named
rank 0 (see ``docs/layout.md``, "A plain SummaryRecord under a launcher"). The
writer must not import ``rankscribe.ranks`` (the package graph points the other
way), so the launchers' rank variables are listed here a second time. The table
is the rank / world size column of ``rankscribe.ranks._info`` (``detect()``), in
the same order, and must be kept in step with it:

========== ======================= ==========================================
launcher   rank                    world size
========== ======================= ==========================================
openmpi    OMPI_COMM_WORLD_RANK    OMPI_COMM_WORLD_SIZE
pmi        PMI_RANK                PMI_SIZE (MPICH Hydra, Intel MPI, srun)
pmix       PMIX_RANK               SLURM_NTASKS (none outside srun: unknown)
torchrun   RANK                    WORLD_SIZE (both must be set)
slurm      SLURM_PROCID            SLURM_NTASKS
========== ======================= ==========================================

Unlike ``detect()``, a malformed variable is not an error here (a summary is
still worth writing): it is skipped with a warning naming it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from rankscribe.writer.format._names import rank_dir_name

logger = logging.getLogger(__name__)

#: (launcher, rank variable, world size variable, whether the size is required)
LAUNCHER_VARIABLES: tuple[tuple[str, str, str, bool], ...] = (
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", False),
    ("pmi", "PMI_RANK", "PMI_SIZE", False),
    ("pmix", "PMIX_RANK", "SLURM_NTASKS", False),
    ("torchrun", "RANK", "WORLD_SIZE", True),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", False),
)


@dataclass(frozen=True)
class LauncherRank:
    """This process's rank as a launcher exported it; ``world_size`` None when not exported."""

    launcher: str
    variable: str
    rank: int
    world_size: int | None

    @property
    def shared(self) -> bool:
        """Whether other ranks of the same launch may exist (several, or an unknown number)."""
        return self.world_size is None or self.world_size > 1


def _number(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name, "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


def launcher_rank(environ: Mapping[str, str]) -> LauncherRank | None:
    """The first launcher of the table whose rank variable is set, or None (no launcher)."""
    for launcher, rank_name, size_name, size_required in LAUNCHER_VARIABLES:
        if rank_name not in environ or (size_required and size_name not in environ):
            continue
        rank = _number(environ, rank_name)
        size = _number(environ, size_name) if size_name in environ else None
        if rank is None or (size_name in environ and (size is None or size <= rank)):
            logger.warning(
                "%s=%r (with %s=%r) is not a rank below the world size; SummaryRecord ignores it",
                rank_name,
                environ[rank_name],
                size_name,
                environ.get(size_name),
            )
            continue
        return LauncherRank(launcher, rank_name, rank, size)
    return None


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
