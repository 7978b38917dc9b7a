"""When the SummaryCollector collects, and what: MindSpore's schedule, shared across ranks.

The unit is the step, or the epoch in dataset sink mode (docs/collector-schedule.md,
"When a unit is collected"):

- the first unit seen is always collected, with nothing filtered, then flushed;
- after it, a unit is collected when ``unit % collect_freq == 0``;
- TensorSummary data follows a separate *tensor range* computed from the total
  number of units (:func:`tensor_collect_range`);
- the plugin filter of a collected unit (:class:`Collect`): everything when it is
  in both schedules, only ``tensor`` when it is only in the tensor range,
  everything but ``tensor`` when it is only on the frequency.

Across ranks: the steps at which a single process running the job's longest
run would have recorded tensor data (the first unit, then the reachable units of
the tensor range) are the *job's* tensor units. Every rank computes them from
the same run lengths, agreed at the start (:meth:`CollectionSchedule.agree_run_lengths`),
and :func:`share_tensor_units` gives each rank its share: a unit goes only to a
rank whose run reaches it, and the units every rank reaches are shared as
:func:`rankscribe.ranks.split_evenly` shares them. A rank records tensor data only
at the units of its own share. The shares are disjoint and together are the
job's list (docs/collector-schedule.md, "Tensor steps on several ranks"). With
one rank, the share is the whole list and the schedule is exactly the original's.

When no rank knows its run's length (a loop over an iterable that has none, no
``steps_per_epoch``), there is no range to spread the tensor units over: they
are open-ended instead (:func:`open_ended_tensor_units`), and the ranks take
them in turn.

Decision of this package where the original differs: a unit is collected at
most once. The original's ``epoch_end`` re-runs the check on the last step of
each epoch in step mode and writes that step a second time.
"""

from __future__ import annotations

import bisect
import enum
import itertools
from collections.abc import Callable, Iterator, Sequence

from rankscribe.collector._checks import is_int
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.ranks import split_evenly

__all__ = [
    "DEFAULT_TENSOR_SUMMARY_LIMIT",
    "Collect",
    "CollectionSchedule",
    "open_ended_tensor_units",
    "share_tensor_units",
    "tensor_collect_range",
    "total_units",
]

#: At most this many tensor-collection units when ``collect_tensor_freq`` is not set.
DEFAULT_TENSOR_SUMMARY_LIMIT = 20
_TENSOR = "tensor"


def only_tensor(plugin: str) -> bool:
    return plugin == _TENSOR


def all_but_tensor(plugin: str) -> bool:
    return plugin != _TENSOR


class Collect(enum.Enum):
    """What one unit collects; ``plugin_filter`` is what ``SummaryRecord.record`` takes."""

    NOTHING = "nothing"
    EVERYTHING = "everything"
    TENSOR_ONLY = "tensor only"
    ALL_BUT_TENSOR = "all but tensor"

    @property
    def plugin_filter(self) -> Callable[[str], bool] | None:
        if self is Collect.TENSOR_ONLY:
            return only_tensor
        if self is Collect.ALL_BUT_TENSOR:
            return all_but_tensor
        return None

    @property
    def extracts(self) -> bool:
        """True when the collector's own values (loss, histograms, images) are kept."""
        return self in (Collect.EVERYTHING, Collect.ALL_BUT_TENSOR)


def total_units(epoch_num: int, batch_num: int, sink_mode: bool) -> int:
    """The run's length in units: epochs in sink mode, ``epoch_num * batch_num`` otherwise."""
    return epoch_num if sink_mode else epoch_num * batch_num


def tensor_collect_range(total: int, collect_freq: int, collect_tensor_freq: int | None) -> range:
    """The units at which TensorSummary data may be collected (MindSpore's rule).

    ``range(0, total + 1, collect_tensor_freq)`` when that is set. Otherwise
    ``range(0, total + 1, collect_freq)``, unless that has more than 20 units:
    then ``range(0, total + 1, total // 19)[:20]``, or ``range(0, total + 1)[:21]``
    when ``total // 19 <= 1`` (units count from 1, so 0 takes one place).
    """
    if collect_tensor_freq is not None:
        return range(0, total + 1, collect_tensor_freq)
    if len(range(0, total + 1, collect_freq)) > DEFAULT_TENSOR_SUMMARY_LIMIT:
        tensor_freq = total // (DEFAULT_TENSOR_SUMMARY_LIMIT - 1)
        if tensor_freq > 1:
            return range(0, total + 1, tensor_freq)[:DEFAULT_TENSOR_SUMMARY_LIMIT]
        return range(0, total + 1)[: DEFAULT_TENSOR_SUMMARY_LIMIT + 1]
    return range(0, total + 1, collect_freq)


def open_ended_tensor_units(
    first: int, collect_freq: int, collect_tensor_freq: int | None
) -> Iterator[int]:
    """The tensor units after ``first`` of a run whose length nobody knows, in order.

    Every multiple of ``collect_tensor_freq`` when that is set, without end (what
    :func:`tensor_collect_range` gives a run of any length); otherwise
    ``collect_freq``, ``2 collect_freq``, ``4 collect_freq``, ... (the spacing
    doubling), at most :data:`DEFAULT_TENSOR_SUMMARY_LIMIT` units with ``first``:
    the original's limit, spread over a run of any length without knowing it.

    >>> list(itertools.islice(open_ended_tensor_units(1, 10, 4), 3))
    [4, 8, 12]
    >>> list(open_ended_tensor_units(1, 10, None))[:5]
    [10, 20, 40, 80, 160]
    """
    if collect_tensor_freq is not None:
        return (
            unit
            for unit in itertools.count(collect_tensor_freq, collect_tensor_freq)
            if unit > first
        )
    doubling = (collect_freq << power for power in itertools.count())
    later = (unit for unit in doubling if unit > first)
    return itertools.islice(later, DEFAULT_TENSOR_SUMMARY_LIMIT - 1)


def share_tensor_units(units: Sequence[int], run_lengths: Sequence[int], rank: int) -> list[int]:
    """Rank ``rank``'s share of the job's tensor ``units``, given every rank's run length.

    ``run_lengths[r]`` is the last unit rank ``r`` runs. A unit goes only to a
    rank that reaches it: going up through the distinct run lengths, the units
    past the previous length and up to this one are shared by
    :func:`rankscribe.ranks.split_evenly` among the ranks whose runs are at least
    this long, in rank order. Every rank computes the same shares from the same
    lengths; they are disjoint, and cover every unit that some rank reaches. With
    equal lengths this is ``split_evenly(units, len(run_lengths), rank)``.

    >>> [share_tensor_units([1, 2, 4, 6, 8], [8, 5], rank) for rank in (0, 1)]
    [[1, 2, 6, 8], [4]]
    """
    own: list[int] = []
    below = None
    for length in sorted(set(run_lengths)):
        segment = [unit for unit in units if (below is None or unit > below) and unit <= length]
        reaching = [other for other, reach in enumerate(run_lengths) if reach >= length]
        if rank in reaching:
            own.extend(split_evenly(segment, len(reaching), reaching.index(rank)))
        below = length
    return own


class CollectionSchedule:
    """Decides, unit by unit, what this rank collects.

    Call :meth:`first` at the first unit of a run (it fixes the tensor range
    from ``total``), then :meth:`next` for every later unit. :meth:`reset`
    starts a new run (the collector calls it when it is entered again).
    """

    def __init__(
        self,
        collect_freq: int,
        collect_tensor_freq: int | None = None,
        *,
        world_size: int = 1,
        rank: int = 0,
    ) -> None:
        self.collect_freq = collect_freq
        self.collect_tensor_freq = collect_tensor_freq
        self.world_size = world_size
        self.rank = rank
        #: Every rank's run length in units, as the ranks agreed (None: not agreed).
        self.run_lengths: list[int] | None = None
        self.job_tensor_units: list[int] = []
        self.own_tensor_units: list[int] = []
        self._own: set[int] = set()
        self._last: int | None = None
        #: Whether no rank knew its run's length at the start (open-ended tensor units).
        self.length_unknown = False
        # Then, the job's units still to come (None: none, or the length is known).
        self._open_ended: Iterator[int] | None = None

    @property
    def started(self) -> bool:
        return self._last is not None

    def reset(self) -> None:
        self.run_lengths = None
        self.job_tensor_units, self.own_tensor_units = [], []
        self._own = set()
        self._last = None
        self.length_unknown = False
        self._open_ended = None

    def agree_run_lengths(self, run_lengths: Sequence[int] | None) -> None:
        """Every rank's run length in units, in rank order, as the ranks agreed at the start.

        Call it before :meth:`first` with the same list on every rank (the
        collector exchanges the lengths when training begins): the job's tensor
        units are then those of the longest run, and each unit goes to a rank
        whose run reaches it (:func:`share_tensor_units`). None (the default):
        every rank is taken to run as long as this one.
        """
        if run_lengths is None:
            self.run_lengths = None
            return
        if isinstance(run_lengths, (str, bytes)) or not isinstance(run_lengths, Sequence):
            raise CollectorTypeError(
                f"run_lengths must be a list of one int >= 0 per rank, or None, but got "
                f"{type(run_lengths).__name__}."
            )
        lengths = list(run_lengths)
        if len(lengths) != self.world_size or not all(
            is_int(length) and length >= 0 for length in lengths
        ):
            raise CollectorValueError(
                f"run_lengths must be a list of one int >= 0 per rank ({self.world_size} "
                f"ranks), but got {lengths!r}."
            )
        self.run_lengths = lengths

    def first(self, unit: int, total: int) -> Collect:
        """The first unit of the run: always collected, tensors only if in this rank's share.

        ``total``: this rank's run length in units (it replaces this rank's
        agreed length, should they differ); 0 when the loop cannot tell. When no
        rank's length reaches ``unit`` (none was told), the tensor units are
        open-ended (:func:`open_ended_tensor_units`) and the ranks take them in turn.
        """
        lengths = [total] * self.world_size if self.run_lengths is None else list(self.run_lengths)
        lengths[self.rank] = total
        self._last = unit
        # Lengths that no rank's first unit fits in are not lengths: 0, from a loop over
        # an iterable without one.
        self.length_unknown = max(lengths) < unit
        if self.length_unknown:
            # No rank knows how long it runs: the units come open-ended, taken in turn
            # (the job's i-th unit is rank i % world_size's), as far as the run goes.
            self._open_ended = open_ended_tensor_units(
                unit, self.collect_freq, self.collect_tensor_freq
            )
            self.job_tensor_units, self.own_tensor_units = [], []
            self._own = set()
            self._take_job_unit(unit)
            self._reach(unit)
            return Collect.EVERYTHING if unit in self._own else Collect.ALL_BUT_TENSOR
        self._open_ended = None
        job_total = max(lengths)
        tensor_range = tensor_collect_range(job_total, self.collect_freq, self.collect_tensor_freq)
        later = [number for number in tensor_range if unit < number <= job_total]
        self.job_tensor_units = [unit, *later]
        self.own_tensor_units = share_tensor_units(self.job_tensor_units, lengths, self.rank)
        self._own = set(self.own_tensor_units)
        return Collect.EVERYTHING if unit in self._own else Collect.ALL_BUT_TENSOR

    def _take_job_unit(self, unit: int) -> None:
        """The open-ended job's next unit: this rank's when its turn comes."""
        if len(self.job_tensor_units) % self.world_size == self.rank:
            self.own_tensor_units.append(unit)
            self._own.add(unit)
        self.job_tensor_units.append(unit)

    def _reach(self, unit: int) -> None:
        """With open-ended units: the job's list past ``unit`` by a unit of every rank
        (this rank's next unit after ``unit`` is then known), or to its end."""
        units = self._open_ended
        if units is None:
            return
        job = self.job_tensor_units
        while len(job) < self.world_size or job[-self.world_size] <= unit:
            following = next(units, None)
            if following is None:
                self._open_ended = None
                return
            self._take_job_unit(following)

    def missed_tensor_units(self, reached: int) -> list[int]:
        """This rank's tensor units after ``reached``, the last unit it ran: not recorded
        (none in a run of unknown length: its end is its length)."""
        if self.length_unknown:
            return []
        return [unit for unit in self.own_tensor_units if unit > reached]

    def would_collect(self, unit: int) -> bool:
        """Whether :meth:`next` would collect ``unit`` (the schedule does not move)."""
        if self._last is None:
            return True
        self._reach(unit)
        return unit != self._last and (unit % self.collect_freq == 0 or unit in self._own)

    def extracts_at(self, unit: int) -> bool:
        """Whether :meth:`next` of ``unit``, a later unit than any collected yet, returns
        a decision that ``extracts`` (the schedule started; the unit is on the frequency)."""
        return self._last is not None and unit % self.collect_freq == 0

    def next_collected(self, unit: int) -> int:
        """The first unit after ``unit`` that :meth:`next` may collect (``unit + 1`` if unstarted).

        Every unit before it collects nothing: the collector skips the schedule there.
        """
        if self._last is None:
            return unit + 1
        self._reach(unit)
        on_frequency = (unit // self.collect_freq + 1) * self.collect_freq
        own = self.own_tensor_units
        index = bisect.bisect_right(own, unit)
        return min(on_frequency, own[index]) if index < len(own) else on_frequency

    def next(self, unit: int) -> Collect:
        """A later unit: the frequency and this rank's tensor share decide."""
        if unit == self._last:
            return Collect.NOTHING
        decision = self.decision_at(unit)
        if decision is not Collect.NOTHING:
            self._last = unit
        return decision

    def decision_at(self, unit: int) -> Collect:
        """What :meth:`next` of ``unit``, a later unit than any collected yet, returns,
        without recording that it was collected."""
        self._reach(unit)
        on_frequency = unit % self.collect_freq == 0
        tensors = unit in self._own
        if not (on_frequency or tensors):
            return Collect.NOTHING
        if on_frequency and tensors:
            return Collect.EVERYTHING
        return Collect.ALL_BUT_TENSOR if on_frequency else Collect.TENSOR_ONLY
