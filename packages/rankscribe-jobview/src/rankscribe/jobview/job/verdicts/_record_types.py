"""The verdict records' types (``docs/job-view.md``, "Verdict records").

Records are plain dicts, ready for JSON; these ``TypedDict`` s say which keys each kind
holds, for a type checker and an editor:

- :class:`StragglerRecord`: what :func:`~rankscribe.jobview.judge_timings` returns and
  the live view hands ``on_verdict`` for a straggler, every key always present
  (``evidence`` once the machine's readings were looked up).
- :class:`VerdictRecord`: any kind (``straggler``, ``divergence``, ``gradient``,
  ``nonfinite``, ``stopped``) as read back from a merged lineage's ``job/`` keys or the
  live state, the same keys for every kind; a key that does not apply to a kind, or that
  the files did not hold, is None. A ``gradient`` record (one per rank) has five keys
  more: ``bucket``, ``parameters``, ``ratio``, ``nonfinite`` and ``element``.

Without ``from __future__ import annotations``: a ``TypedDict`` knows a key is
``NotRequired`` only from an evaluated annotation (Python 3.11 reads a string as required).
"""

from typing import NotRequired, TypedDict

__all__ = ["CostlyRank", "EvidenceReading", "StragglerRecord", "VerdictRecord"]


class CostlyRank(TypedDict):
    """One of a timing's costliest ranks (a record's ``top``), named or not."""

    rank: int
    cost_seconds_per_step: float
    cost_share: float
    #: Its time in the timing over the others' median, and that said with its cost: "forward
    #: 1.50x the others', costs the job 0.1 % today" (a straggler record's; not read back).
    factor: NotRequired[float]
    note: NotRequired[str]


class EvidenceReading(TypedDict):
    """A named rank's system reading that differs most from the other ranks'."""

    rank: int
    tag: str
    value: float
    median: float
    text: str


class StragglerRecord(TypedDict):
    """A straggler verdict of one timing: the ranks it names and what they cost."""

    kind: str
    ranks: list[int]
    timing: str
    tag: str
    cost_seconds_per_step: float
    cost_share: float
    cost_basis: str
    since_step: int
    persistent: bool
    period_steps: int
    share_of_steps: float
    factor: float
    slowest_share: float
    steps: int
    top: list[CostlyRank]
    message: str
    evidence: NotRequired[list[EvidenceReading]]
    #: "ended" on the record the live view hands ``on_verdict`` when the verdict ends
    #: (absent while it stands), with the last step of its slowness, the last step judged
    #: and why.
    status: NotRequired[str]
    until_step: NotRequired[int]
    ended_step: NotRequired[int]
    reason: NotRequired[str]


class VerdictRecord(TypedDict):
    """A verdict of any kind, read back from a job's files (None: not applicable or not
    recorded)."""

    kind: str
    ranks: list[int]
    timing: str | None
    cost_seconds_per_step: float | None
    cost_share: float | None
    since_step: int | None
    persistent: bool | None
    share_of_steps: float | None
    top: list[CostlyRank]
    message: str
    #: A ``gradient`` record's: the DDP bucket whose local norm stood apart at
    #: ``since_step`` (None: the rank's whole gradient), its ratio to the other ranks'
    #: median (None for a non-finite norm) and whether the norm was NaN or infinite.
    bucket: NotRequired[int | None]
    #: The bucket's parameter names, when the merged lineage holds them (rank 0's
    #: collector adds them; the live view's records have none): at most 8, then "...".
    parameters: NotRequired[list[str]]
    ratio: NotRequired[float | None]
    nonfinite: NotRequired[bool]
    #: A ``gradient`` record's: named by the bucket's peak (its largest row of 256
    #: elements against the rest of the bucket stood apart, as when one element grew
    #: x2^16; ``ratio`` is that to the other ranks' median), not by the norm.
    element: NotRequired[bool]
