"""The report's limits that the command line shows before anything is drawn.

Apart from :mod:`rankscribe.lineage.report._downsample` (numpy): the command
line builds its help from them without importing numpy (``docs/report.md``).
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_POINTS"]

#: Points of one drawn curve at most (two per bucket).
DEFAULT_MAX_POINTS = 1000
