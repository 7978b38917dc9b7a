"""The keys a base dir's groups were formed by: ``_groups/grouping.json``, written by
``group`` (``_folder.py``) and read by every ``query`` of the base.

Kept apart from the group's files and curves so that a query, which only shows the
keys, loads neither NumPy nor the writer (a warm query starts in milliseconds).
"""

from __future__ import annotations

import logging
import os

from rankscribe.lineage.record._discovery import GROUPS_DIR
from rankscribe.ranks.files import read_regular
from rankscribe.ranks.jsondata import JSONDataError, parse_json

logger = logging.getLogger(__name__)

__all__ = ["GROUPING_FILE", "grouped_by"]

#: In ``_groups``: the keys the groups were formed by (``{"by": [...]}``), for the query.
GROUPING_FILE = "grouping.json"
_GROUPING_LIMIT = 64 * 1024


def grouped_by(base: str) -> list[str]:
    """The keys ``base/_groups`` was formed by, from its :data:`GROUPING_FILE`; [] if none.

    The file is data from a folder others may write: read as a regular file
    only (never through a link), bounded, and anything but a list of names is
    ignored with a warning.
    """
    path = os.path.join(base, GROUPS_DIR, GROUPING_FILE)
    try:
        found = parse_json(
            read_regular(path, limit=_GROUPING_LIMIT), what=path, max_bytes=_GROUPING_LIMIT
        )
    except FileNotFoundError:
        return []
    except (OSError, JSONDataError) as error:
        logger.warning("the grouping of %s is not shown: %s", base, error)
        return []
    keys = found.get("by") if isinstance(found, dict) else None
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        logger.warning("the grouping of %s is not shown: %s holds no list of keys", base, path)
        return []
    return list(keys)
