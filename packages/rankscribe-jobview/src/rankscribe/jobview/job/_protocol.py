"""The live job view's protocol, in one place (``docs/job-view.md``, "Live" and "Tree").

Both halves use this module: each rank's thread
(the collector's ``_live.py``) and rank 0's view
(:mod:`rankscribe.jobview.job._live`). It lives in ``rankscribe.lineage``
because its messages are job-view partials (NumPy statistics of this
package); ``rankscribe.ranks``, the ground floor, moves their bytes up the
tree without knowing what they are.

- **Rounds.** Every :func:`round_period` seconds (the timing interval, 2 s
  by default, never longer than ``job_view_interval``) each rank sends one
  message to its parent; rounds start at multiples of the period on the wall
  clock and are numbered by that multiple (:func:`round_number`), so every
  rank agrees on a round's number. The last round, at the end of training,
  is :data:`FINAL_ROUND`. Rank 0 judges the recent timings every round and
  appends to the job files every ``job_view_interval``.
- **Messages.** One kind: a partial (:func:`encode`/:func:`decode`), the
  bytes of ``job/_wire.py`` (``RSJP3``: a JSON header, an int64 and a
  float64 block; data only, never a pickle). A message that is not one
  raises :class:`PartialFormatError` and is ignored with a warning.
- **Control.** Rank 0 reads :data:`CONTROL_NAME` in the job directory each
  round (``job/_control.py``): thresholds and the interval, changed while
  the job runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rankscribe.jobview.job._partials import Partial, PartialFormatError

__all__ = [
    "CONTROL_NAME",
    "DEFAULT_JOB_VIEW_INTERVAL",
    "DEFAULT_TIMING_INTERVAL",
    "FINAL_ROUND",
    "PartialFormatError",
    "decode",
    "encode",
    "round_name",
    "round_number",
    "round_period",
    "rounds_per_interval",
]

#: Seconds between two appends to the job files (0: only at the end of training).
DEFAULT_JOB_VIEW_INTERVAL = 60.0
#: Seconds between two rounds of the tree (each rank's recent timings to rank 0).
DEFAULT_TIMING_INTERVAL = 2.0
#: The round number of the last round (every earlier round has a smaller one).
FINAL_ROUND = 1 << 62
#: The control file rank 0 reads in the job directory each round.
CONTROL_NAME = ".rankscribe-control.json"


def round_period(interval: float, timing_interval: float = DEFAULT_TIMING_INTERVAL) -> float:
    """Seconds between rounds: the timing interval, or ``interval`` when that is shorter."""
    return min(interval, timing_interval) if interval > 0 else 0.0


def rounds_per_interval(interval: float, period: float) -> int:
    """How many rounds make one ``job_view_interval`` (at least 1)."""
    return max(1, math.ceil(interval / period - 1e-9)) if period > 0 else 1


def round_number(period: float, wall_time: float) -> int:
    """The round that starts at ``wall_time`` (seconds since the epoch)."""
    return round(wall_time / period)


def round_name(number: int) -> str:
    return "the last round" if number == FINAL_ROUND else f"round {number}"


def encode(partial: Partial) -> bytes:
    """A round's message: the partial's bytes."""
    return partial.to_bytes()


def decode(message: bytes, ranks: Sequence[tuple[int, int]] | None = None) -> Partial:
    """The partial of a message; :class:`PartialFormatError` when it is not one.

    ``ranks``: the sender's subtree as inclusive (first, last) runs; a message naming
    any other rank is refused (None: any rank).
    """
    try:
        return Partial.from_bytes(message, ranks=ranks)
    except ValueError as error:
        if isinstance(error, PartialFormatError):
            raise
        raise PartialFormatError(str(error)) from error
