"""The one door to the straggler rule for timing arrays: :func:`judge_timings`.

The benchmark (``tools/bench/detection.py``), the live view, the offline
merge and people with timings from other tools judge the same way: per-rank,
per-step arrays in, verdict records out (``docs/job-view.md``, "Judging
timings from anywhere"). :func:`timings_evidence` makes the arrays'
:class:`StragglerEvidence` (bounded and mergeable), which :func:`straggler_records`
judges; :func:`judge_timings` judges each timing's totals made straight from the
window (:func:`window_totals`: the same records, without the evidence's blocks of
every rank); :func:`judge_by_step` judges tables already laid out step by step, in
float32 where their values are (the live view's window: the same records again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview.errors import JobViewParamTypeError, JobViewParamValueError
from rankscribe.jobview.job._statistics import (
    ARRIVAL_TIME_TAG,
    DATA_WAIT_TAG,
    FORWARD_TIME_TAG,
    SECTION_TAG_PREFIX,
    STEP_TIME_TAG,
    SYNC_SECTION,
)
from rankscribe.jobview.job.verdicts._record_types import StragglerRecord
from rankscribe.jobview.job.verdicts._straggler_verdicts import VerdictSettings, totals_records
from rankscribe.jobview.job.verdicts._stragglers import (
    StragglerEvidence,
    TagTotals,
    row_medians,
    window_evidence,
    window_totals,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["judge_by_step", "judge_timings", "timing_tag", "timings_evidence"]

_SHORT_NAMES = {
    "arrival": ARRIVAL_TIME_TAG,
    "forward": FORWARD_TIME_TAG,
    "data_wait": DATA_WAIT_TAG,
    "step_time": STEP_TIME_TAG,
}


def timing_tag(name: str) -> str:
    """The recorded tag of a timing name: ``forward`` -> ``rankscribe/forward_time``,
    ``arrival`` -> ``rankscribe/arrival_time``,
    ``section/<n>`` -> ``rankscribe/section/<n>``; any other name is kept as it is."""
    if not isinstance(name, str):
        raise JobViewParamTypeError(f"name must be a str, got {type(name).__name__}")
    if name in _SHORT_NAMES:
        return _SHORT_NAMES[name]
    if name.startswith("section/"):
        return SECTION_TAG_PREFIX + name.removeprefix("section/")
    return name


def _table(name: str, value: Any, shape: tuple[int, int] | None) -> npt.NDArray[np.float64]:
    try:
        table = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise JobViewParamTypeError(
            f"{name} must be a (ranks, steps) array of seconds, got {type(value).__name__}"
        ) from None
    if table.ndim != 2 or (shape is not None and table.shape != shape):
        expected = f"{shape}" if shape is not None else "(ranks, steps)"
        raise JobViewParamValueError(
            f"{name} must be a {expected} array of seconds (NaN: no point), got shape {table.shape}"
        )
    # The largest and smallest values but NaN (two reductions, no array of the table's size).
    if table.size and (
        np.fmax.reduce(table, axis=None) == np.inf or np.fmin.reduce(table, axis=None) < 0
    ):
        raise JobViewParamValueError(
            f"{name} must hold finite seconds >= 0 (NaN: no point); it holds a negative "
            f"or infinite value"
        )
    return table


def _step_scale(
    step_time: Any, tables: Mapping[str, npt.NDArray[np.float64]], shape: tuple[int, int]
) -> npt.NDArray[np.float64]:
    """The job's step time at each step: the median over the ranks."""
    if step_time is None:
        # Without a step time: the ranks' median of the timings' sum at each step.
        total = np.zeros(shape)
        for table in tables.values():
            total += np.nan_to_num(table)
        return row_medians(total.T)
    try:
        scale = np.asarray(step_time, dtype=np.float64)
    except (TypeError, ValueError):
        raise JobViewParamTypeError(
            f"step_time must be a (ranks, steps) or (steps,) array of seconds, "
            f"got {type(step_time).__name__}"
        ) from None
    if bool(np.any(np.isinf(scale))) or bool(np.any(scale < 0)):
        # As the timings: a negative or infinite step time is no scale to judge by.
        raise JobViewParamValueError(
            "step_time must hold finite seconds >= 0 (NaN or 0: a step not judged); it holds "
            "a negative or infinite value"
        )
    if scale.shape == shape:
        return row_medians(scale.T)
    if scale.shape == (shape[1],):
        return scale
    raise JobViewParamValueError(
        f"step_time must be a {shape} or ({shape[1]},) array of seconds, got shape {scale.shape}"
    )


def timings_evidence(
    timings: Mapping[str, npt.ArrayLike],
    *,
    step_time: npt.ArrayLike | None = None,
    steps: npt.ArrayLike | None = None,
    ranks: npt.ArrayLike | None = None,
) -> StragglerEvidence:
    """The bounded, mergeable evidence of timing arrays (what :func:`judge_timings` judges).

    Evidence of consecutive windows, or of groups of ranks, merges
    (``StragglerEvidence.merge``) into the evidence of the whole.
    Arguments as for :func:`judge_timings`.
    """
    tables, step_numbers, rank_numbers, scale = _checked(timings, step_time, steps, ranks)
    evidence = window_evidence()
    if not len(step_numbers):
        return evidence
    for name in list(tables):
        # Laid out step by step, as the live view's tables are: the same sums as its, and
        # each chunk of ranks read in rows (half the time at 16,384 ranks of a transposed view).
        by_step = np.ascontiguousarray(tables.pop(name).T)
        evidence.add_timings(timing_tag(name), step_numbers, rank_numbers, by_step, scale)
        del by_step
    return evidence


def _checked(
    timings: Any, step_time: Any, steps: Any, ranks: Any
) -> tuple[dict[str, npt.NDArray[np.float64]], npt.NDArray[np.int64], list[int], Any]:
    """The arguments of :func:`timings_evidence` checked: the tables by name, the step
    numbers, the ranks and the job's step time at each step."""
    if not isinstance(timings, Mapping) or not timings:
        raise JobViewParamTypeError(
            f"timings must be a non-empty mapping of timing name to a (ranks, steps) array, "
            f"got {timings!r:.80}"
        )
    shape: tuple[int, int] | None = None
    tables: dict[str, npt.NDArray[np.float64]] = {}
    named: dict[str, str] = {}
    for name, value in timings.items():
        if not isinstance(name, str) or not name:
            raise JobViewParamTypeError(f"timings keys must be non-empty str, got {name!r}")
        tag = timing_tag(name)
        if tag == SECTION_TAG_PREFIX + SYNC_SECTION:
            raise JobViewParamValueError(
                f"timings[{name!r}] is the collective's wait, in which the fast ranks wait "
                "longest: give each rank's step time less it as 'arrival'"
            )
        if tag in named:
            raise JobViewParamValueError(
                f"timings {named[tag]!r} and {name!r} are one timing ({tag}); give it once"
            )
        named[tag] = name
        tables[name] = _table(f"timings[{name!r}]", value, shape)
        shape = tables[name].shape
    assert shape is not None
    step_numbers = _steps(steps, shape[1])
    rank_numbers = _ranks(ranks, shape[0])
    scale = _step_scale(step_time, tables, shape)
    return tables, step_numbers, rank_numbers, scale


def _steps(steps: Any, count: int) -> npt.NDArray[np.int64]:
    if steps is None:
        return np.arange(count, dtype=np.int64)
    numbers = np.asarray(steps)
    if (
        numbers.shape != (count,)
        or not np.issubdtype(numbers.dtype, np.integer)
        or (count > 1 and not bool(np.all(np.diff(numbers) > 0)))
    ):
        raise JobViewParamValueError(
            f"steps must be {count} increasing ints (one per column of the timings), "
            f"got {steps!r:.80}"
        )
    return numbers.astype(np.int64)


def _ranks(ranks: Any, count: int) -> list[int]:
    if ranks is None:
        return list(range(count))
    numbers = np.asarray(ranks)
    if (
        numbers.shape != (count,)
        or not np.issubdtype(numbers.dtype, np.integer)
        or bool((np.diff(np.sort(numbers)) == 0).any())
        or (count and int(numbers.min()) < 0)
    ):
        raise JobViewParamValueError(
            f"ranks must be {count} distinct ints >= 0 (one per row of the timings), "
            f"got {ranks!r:.80}"
        )
    return [int(rank) for rank in numbers]


def judge_timings(
    timings: Mapping[str, npt.ArrayLike],
    *,
    step_time: npt.ArrayLike | None = None,
    steps: npt.ArrayLike | None = None,
    ranks: npt.ArrayLike | None = None,
    settings: VerdictSettings | None = None,
) -> list[StragglerRecord]:
    """Judge per-rank, per-step timings: the straggler verdict records, costliest first.

    Args:
        timings: timing name -> a ``(ranks, steps)`` array of seconds (NaN:
            no point). Names: ``forward``, ``data_wait``, ``step_time``,
            ``arrival`` (when the rank was ready to synchronise: the step time
            less its collective's), ``section/<name>`` (the collector's
            timings; not ``section/sync``, the collective's wait, in which the
            fast ranks wait longest: refused), or any other name (kept as it is).
        step_time: the wall step time, ``(ranks, steps)`` or ``(steps,)``:
            the cost is a share of the job's step time (the median over the
            ranks at each step). Without it, the ranks' median of the
            timings' sum at each step stands in.
        steps: the step number of each column (increasing ints; default
            ``0, 1, ...``): a verdict's ``since_step`` is one of them.
        ranks: the rank of each row (distinct ints; default ``0, 1, ...``).
        settings: the thresholds (default ``VerdictSettings()``).

    Returns:
        One record per timing that names a rank, as plain JSON-ready dicts
        (``docs/job-view.md``, "Verdict records"): ``kind``, ``ranks``,
        ``timing``, ``cost_seconds_per_step``, ``cost_share``, ``since_step``,
        ``persistent``, ``share_of_steps``, ``top``, ``message``, ...

    Raises:
        JobViewParamTypeError, JobViewParamValueError: a malformed argument
            (named in the message).
    """
    if settings is not None and not isinstance(settings, VerdictSettings):
        raise JobViewParamTypeError(
            f"settings must be a VerdictSettings or None, got {type(settings).__name__}"
        )
    tables, step_numbers, rank_numbers, scale = _checked(timings, step_time, steps, ranks)
    if not len(step_numbers) or not rank_numbers:
        return []
    # Each timing's totals straight from its window (no evidence's blocks of every rank):
    # the same records as judging timings_evidence(...). Each table laid out step by step
    # as timings_evidence lays it out, into one array (the tables are of one shape): a
    # new one for each would be paged in anew. The periodic sums are made later, for the
    # ranks the verdict may name alone, from the table's rows read again.
    totals: dict[str, TagTotals] = {}
    by_step = np.empty(tuple(reversed(next(iter(tables.values())).shape)))
    for name in list(tables):
        table = tables.pop(name)
        _by_step(table, by_step)
        totals[timing_tag(name)] = window_totals(
            step_numbers, rank_numbers, by_step, scale, periodic_later=_rows_by_step(table)
        )
    return totals_records(totals, settings)


#: Ranks whose rows are laid out step by step at once (:func:`_by_step`): 400 KB of a table
#: of 100 steps read, 100 pieces of 4 KB written.
_TRANSPOSED_RANKS = 512


def _by_step(table: npt.NDArray[np.float64], by_step: npt.NDArray[np.float64]) -> None:
    """A ``(ranks, steps)`` table laid out step by step into ``by_step`` (``(steps,
    ranks)``, contiguous), a few hundred ranks at a time: one transposed copy writes each
    step's row a point at a time across the whole table (3.3 ms at 16,384 ranks x 100
    steps; 1.8 ms so)."""
    for start in range(0, len(table), _TRANSPOSED_RANKS):
        by_step[:, start : start + _TRANSPOSED_RANKS] = table[start : start + _TRANSPOSED_RANKS].T


def _rows_by_step(table: npt.NDArray[np.float64]) -> Callable[[slice], npt.NDArray[np.float64]]:
    """The rows of a ``(ranks, steps)`` table, a slice of them laid out step by step."""
    return lambda rows: np.ascontiguousarray(table[rows].T)


def judge_by_step(
    tables: dict[str, npt.NDArray[np.floating[Any]]],
    steps: npt.NDArray[np.int64],
    ranks: list[int],
    settings: VerdictSettings,
) -> list[StragglerRecord]:
    """:func:`judge_timings` of tables the caller made and checked: tag -> a ``(steps,
    ranks)`` table (float32 kept as it is: each chunk is read into float64, so the records
    are those of the float64 table), its values seconds >= 0 or NaN; ``steps``
    increasing, ``ranks`` distinct. The step time's table (``STEP_TIME_TAG``), where
    there is one, is the scale, else the ranks' median of the timings' sum at each step.
    Each table is taken out of ``tables`` as it is judged (the caller's memory goes with
    it): at 65,536 ranks x 200 steps a float32 table is 52 MB, judge_timings' float64
    ``(ranks, steps)`` table and its transposed copy 210 MB."""
    if not tables or not len(steps) or not ranks:
        return []
    step_table = tables.get(STEP_TIME_TAG)
    if step_table is not None:
        scale = row_medians(step_table)
        del step_table  # judged and let go with the others below
    else:
        total = np.zeros((len(steps), len(ranks)))
        for table in tables.values():
            total += np.nan_to_num(table)
        scale = row_medians(total)
        del total
    totals: dict[str, TagTotals] = {}
    for tag in sorted(tables):
        totals[tag] = window_totals(steps, ranks, tables.pop(tag), scale)
    return totals_records(totals, settings)
