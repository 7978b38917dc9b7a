"""The names this package gives and recognises on disk, built on the writer's and ranks' rules.

What makes a file a summary or lineage file, how event files are named and
what the host part is all come from :mod:`rankscribe.writer.files`; this module
holds only what is lineage's own:

- the merged lineage of a distributed job,
  ``events.out.events.summary.<T>.merged.<host>_lineage``: a summary file name
  whose rank part is ``merged``, so MindInsight and this package read it like
  any other lineage file;
- the ``rank_<n>`` directories a distributed job writes into (``docs/layout.md``):
  recognised by :func:`rankscribe.ranks.files.parse_rank_dir_name`, the rule the
  ranks package names them by;
- the TensorBoard HParams files, ``events.out.tfevents.<T>.<host>.rankscribe-hparams``.
"""

from __future__ import annotations

import re
import time

from rankscribe.ranks.files import parse_rank_dir_name
from rankscribe.writer.files import (
    LINEAGE_SUFFIX,
    FileKind,
    file_kind,
    host_name,
    summary_file_name,
    tensorboard_file_name,
)

__all__ = [
    "HPARAMS_SUFFIX",
    "hparams_file_name",
    "is_merged_lineage_name",
    "merged_lineage_name",
    "rank_of_dir_name",
]

_MERGED_PREFIX = "events"
_MERGED_RANK = "merged"
_MERGED_NAME = re.compile(
    rf"^{_MERGED_PREFIX}\.out\.events\.summary\.(\d+)\.{_MERGED_RANK}\..*{LINEAGE_SUFFIX}$"
)
_HPARAMS_LABEL = "rankscribe-hparams"
HPARAMS_SUFFIX = f".{_HPARAMS_LABEL}"


def merged_lineage_name(timestamp: int | None = None, host: str | None = None) -> str:
    """``events.out.events.summary.<T>.merged.<host>_lineage`` (``T`` defaults to now)."""
    stamp = int(time.time()) if timestamp is None else int(timestamp)
    return summary_file_name(
        _MERGED_PREFIX, stamp, _MERGED_RANK, host or host_name(), LINEAGE_SUFFIX
    )


def is_merged_lineage_name(name: str) -> bool:
    """Whether ``name`` is a merged lineage file's name (as :func:`merged_lineage_name` makes)."""
    return file_kind(name) is FileKind.LINEAGE and _MERGED_NAME.match(name) is not None


def rank_of_dir_name(name: str) -> int | None:
    """The rank of a ``rank_<n>`` directory name, or ``None`` for any other name."""
    return parse_rank_dir_name(name)


def hparams_file_name(timestamp: int, host: str | None = None) -> str:
    """``events.out.tfevents.<timestamp>.<host>.rankscribe-hparams``.

    Writing again must find and replace the previous file, so the name ends in a
    fixed label instead of a process id and counter. TensorBoard reads any name
    holding ``tfevents``.
    """
    return tensorboard_file_name(int(timestamp), host or host_name(), label=_HPARAMS_LABEL)
