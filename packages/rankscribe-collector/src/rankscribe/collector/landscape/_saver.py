"""Saving what MindInsight needs to draw a loss landscape (``collect_landscape``).

As MindSpore's SummaryCollector does: at each step (or epoch, per ``unit``)
listed in ``intervals``, the network's parameters are saved into
``<directory>/ckpt_dir/<Network>_<number>_<unit>.ckpt``; at the end of
training, ``ckpt_dir/train_metadata.json`` lists those files with the
landscape settings::

    {"epoch_group": {"0": [1, 2, ...], ...}, "model_params_file_map": {"1": "<path>", ...},
     "step_per_epoch": 30, "unit": "step", "num_samples": 2048, "landscape_size": 40,
     "create_landscape": {"train": true, "result": true}}

Parameter files use the safetensors format (tensors and names only, no
pickle). The training thread copies the parameters once and lays out the
header (``_tensor_file``); a background thread writes the header and the
copies' buffers under a temporary name, renames the file into place and makes
it read-only.

The copies' memory is kept ready for the next set while sets remain to be saved:
a set written to disk gives its arrays back for the next copy (one set's worth at
most), and when the first set the run saves is a later step than the first save
call (the budget kept later sets), the writer thread makes that set's arrays ahead,
every page written once (``blank_arrays``). Where memory is handed out at its first
touch (a virtual machine's), a copy into new memory cost the training thread up to
100 ms; after the run's last set nothing is kept.

A rank writes at most ``budget`` bytes of parameter files (``landscape_budget``,
default 64 MB; None: no budget). The bytes of one set are known when the first
is copied: when every set the run reaches fits, all are saved (MindSpore's
default); otherwise :func:`budgeted_groups` keeps an evenly spread part of the
later intervals, each with its first and last number and at least three, and
``epoch_group`` lists only those, so that every number it names has its file,
as MindSpore's ``SummaryLandscape`` requires (docs/mindinsight-differences.md).
Rank 0 says which sets were left out and how to save them all, once.

A training run starts by clearing what an earlier run left in ``ckpt_dir``:
first ``train_metadata.json`` (one atomic unlink: from then on no metadata
names files of another run), then the parameter files (names
``<Network>_<number>_<step|epoch>.ckpt``). Entries are removed by name
relative to the opened directory and never followed: a symbolic link is
removed as a link, and a ``ckpt_dir`` that is itself a link is refused, as
is any entry that is not a regular file or a link. Files of other names are
left alone. While a run goes on, ``train_metadata.json`` is written once:
under a file lock, a second writer in the same directory at the same time
finds it there and leaves it as it is, as the original's read-only file did.
The lock file (``train_metadata.json.lock``) is removed when released
(``rankscribe.ranks.files.exclusive_lock``). See docs/collector-schedule.md.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import json
import logging
import os
import re
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.adapters._parameters import network_parameters
from rankscribe.collector.collection._options import (
    DEFAULT_LANDSCAPE_BUDGET,
    LANDSCAPE_BUDGET_ENV,
    LandscapeOptions,
)
from rankscribe.collector.landscape._tensor_file import (
    Layout,
    TensorFile,
    blank_arrays,
    tensor_file,
)
from rankscribe.ranks.files import (
    LockTimeoutError,
    atomic_write,
    exclusive_lock,
    file_mode,
    make_private_dir,
)

logger = logging.getLogger(__name__)

__all__ = ["LANDSCAPE_DIR", "METADATA_NAME", "LandscapeSaver", "budgeted_groups"]

LANDSCAPE_DIR = "ckpt_dir"
METADATA_NAME = "train_metadata.json"
#: Seconds to wait for another writer's lock on train_metadata.json.
LOCK_TIMEOUT = 30.0
#: Seconds to wait for the parameter files still being written before the metadata is.
WRITE_TIMEOUT = 60.0
# What save() names its files: an earlier run's files of this form are cleared.
_PARAMETER_FILE = re.compile(r".+_[0-9]+_(step|epoch)\.ckpt\Z")
#: The fewest sets an interval is drawn from (MindSpore's SummaryLandscape refuses fewer).
MIN_GROUP = 3


class LandscapeSaver:
    """Parameter files at the landscape's steps or epochs, and their metadata file."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        options: LandscapeOptions,
        *,
        budget: int | None = DEFAULT_LANDSCAPE_BUDGET,
        adapters: AdapterRegistry | None = None,
    ) -> None:
        self._adapters = adapters if adapters is not None else AdapterRegistry()
        self.options = options
        #: Bytes of parameter files this rank writes at most in a run; None: no budget.
        self.budget = budget
        self.directory = Path(directory) / LANDSCAPE_DIR
        self.files: dict[str, str] = {}
        # Set when ckpt_dir cannot be used safely: nothing more is written for this run.
        self.disabled = False
        # The intervals the metadata lists: the options', or the part the budget keeps.
        self._groups: tuple[tuple[int, ...], ...] = options.intervals
        # The collector asks wants() at every step: a set lookup, not a scan of the intervals.
        self._covered = frozenset(number for interval in options.intervals for number in interval)
        self._ordered = sorted(self._covered)
        # The numbers the run reaches (announce()); None: every number of the intervals.
        self._reached: list[int] | None = None
        # Whether the first set's bytes have decided what this run saves.
        self._decided = False
        self._queued_bytes = 0
        # Parameter files are written (and fsynced, twice) by one background thread: on
        # the training thread the fsyncs cost a step milliseconds each, 19 times in a
        # default run (tools/bench/collector.py). number -> (path, its write).
        self._writing: dict[str, tuple[str, concurrent.futures.Future[str]]] = {}
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        # Set on rank 0 until it said, at the first save, what this run saves: the world size.
        self._announce_to: int | None = None
        # Arrays ready for the next set's copy, while sets remain (the module's docstring):
        # (their layout, the arrays), at most one set; the writer thread puts them here
        # while they are wanted (until the run's last set is copied).
        self._spare: tuple[Layout, list[Any]] | None = None
        self._spare_wanted = True
        self._spare_lock = threading.Lock()

    @property
    def unit(self) -> str:
        return self.options.unit

    def wants(self, number: int) -> bool:
        """True when ``number`` is in an interval and its parameters are not saved yet."""
        return (
            not self.disabled
            and number in self._covered
            and str(number) not in self.files
            and str(number) not in self._writing
        )

    def next_wanted(self, number: int) -> int | None:
        """The first step (epoch) after ``number`` in an interval, or None after the last."""
        if self.disabled:
            return None
        index = bisect.bisect_right(self._ordered, number)
        return self._ordered[index] if index < len(self._ordered) else None

    def planned(self, total: int | None) -> list[int]:
        """The steps (or epochs) whose parameters a run of ``total`` units saves.

        Every number of the intervals when ``total`` is unknown (None or 0).
        """
        return [number for number in self._ordered if not total or number <= total]

    def announce(self, *, epoch_num: int, batch_num: int, rank: int, world_size: int) -> None:
        """Note the numbers this run reaches (every rank), and on rank 0 say once, at
        WARNING, what the run saves, where and how many bytes.

        The default (MindSpore's) saves 19 full copies of the network's parameters
        per rank, which a user who never asked for a landscape should hear of: the
        line gives the bytes (those of the first file, times the sets the run
        saves, per rank and for the job), what the budget left out, and how to turn
        it off, save fewer or save all. The bytes are known once the first set is
        copied, so what is saved is decided and the line logged then (at the first
        number of the intervals: step 1 by default).
        """
        total = epoch_num * (1 if self.unit == "epoch" else batch_num)
        self._reached = self.planned(total)
        self._announce_to = world_size if rank == 0 and not self.disabled else None

    def _decide(self, set_bytes: int) -> None:
        """What this run saves, now that a set's bytes are known: all it reaches, or what fits."""
        self._decided = True
        reached = self._reached if self._reached is not None else self.planned(None)
        if self.budget is None or set_bytes * len(reached) <= self.budget:
            self._say_what_is_saved(set_bytes, reached)
            return
        self._groups = budgeted_groups(self.options.intervals, reached, self.budget // set_bytes)
        self._covered = frozenset(number for group in self._groups for number in group)
        self._ordered = sorted(self._covered)
        self._say_what_fits(set_bytes, reached)

    def _none_fit(self, data_bytes: int) -> bool:
        """Decide now, from the parameters' bytes, when not even the fewest sets an interval
        is drawn from fit (and not all do): nothing is saved. A file holds those bytes and a
        short header, so the file would not fit either, and the set is never copied: for a
        large network, a copy of every parameter on the training thread spared.
        """
        reached = self._reached if self._reached is not None else self.planned(None)
        if self.budget is None or data_bytes == 0:
            return False
        fit = self.budget // data_bytes
        if fit >= MIN_GROUP or fit >= len(reached):
            return False
        self._decide(data_bytes)
        return True

    def _where(self, per_rank: int, world_size: int) -> str:
        where = str(self.directory)
        if world_size > 1:
            where += f" ({_size(per_rank * world_size)} for the job's {world_size} ranks, every "
            where += "rank into its own rank_<r>/ckpt_dir)"
        return where

    def _say_what_is_saved(self, set_bytes: int, planned: list[int]) -> None:
        world_size, self._announce_to = self._announce_to, None
        if world_size is None or not planned:
            return
        per_rank = set_bytes * len(planned)
        logger.warning(
            "Loss landscape (on by default, as in MindSpore): saving %d full parameter sets "
            "of the network (%ss %s), %s each, %s per rank, into %s; turn it off with "
            "collect_specified_data={'collect_landscape': None}, or save fewer sets with "
            "{'collect_landscape': {'intervals': [[1, 2, 3]]}}.",
            len(planned),
            self.unit,
            _numbers(planned),
            _size(set_bytes),
            _size(per_rank),
            self._where(per_rank, world_size),
        )

    def _say_what_fits(self, set_bytes: int, reached: list[int]) -> None:
        """Rank 0's line when the budget keeps only part of the sets: what, and how to get all."""
        world_size, self._announce_to = self._announce_to, None
        if world_size is None:
            return
        budget = self.budget
        assert budget is not None
        kept = self._ordered
        left_out = [number for number in reached if number not in self._covered]
        if kept:
            count = len(self._groups)
            which = (
                "each interval"
                if count == len(self.options.intervals)
                else "the last interval"
                if count == 1
                else f"the last {count} intervals"
            )
            saved = (
                f"saving {len(kept)} of them ({self.unit}s {_numbers(kept)}: the first, the last "
                f"and evenly spread sets of {which}), {_size(set_bytes * len(kept))} per rank, "
                f"into {self._where(set_bytes * len(kept), world_size)}"
            )
        else:
            saved = (
                f"saving none of them and no {METADATA_NAME}: an interval is drawn from "
                f"{MIN_GROUP} sets at least"
            )
        logger.warning(
            "Loss landscape (on by default, as in MindSpore): the %d full parameter sets of "
            "the network (%ss %s), %s each, would take %s per rank, over the landscape budget "
            "of %s per rank; %s. Left out: %ss %s. Save them all with "
            "SummaryCollector(..., landscape_budget='all') or %s=all, or turn the landscape "
            "off with collect_specified_data={'collect_landscape': None}.",
            len(reached),
            self.unit,
            _numbers(reached),
            _size(set_bytes),
            _size(set_bytes * len(reached)),
            _size(budget),
            saved,
            self.unit,
            _numbers(left_out),
            LANDSCAPE_BUDGET_ENV,
        )

    def start_training(self) -> None:
        """Forget this saver's files and clear an earlier run's files from ``ckpt_dir``."""
        self.finish_writes()  # an earlier run's last files are not written after the clearing
        with self._spare_lock:
            self._spare_wanted = True
        self.files = {}
        self.disabled = False
        self._groups = self.options.intervals
        self._covered = frozenset(number for group in self._groups for number in group)
        self._ordered = sorted(self._covered)
        self._reached, self._decided, self._queued_bytes = None, False, 0
        try:
            self._clear_previous_run()
        except LockTimeoutError:
            self._disable(f"its lock was held for more than {LOCK_TIMEOUT:g} s")
        except OSError as error:
            self._disable(str(error))

    def stop_saving(self) -> list[int]:
        """Save no further set in this run (the collector's cost budget sheds the landscape:
        docs/collector-cost.md, "The cost budget"); returns the numbers left out.

        The sets saved (or being written) stay: the intervals keep those of their numbers,
        and an interval left with fewer than ``MIN_GROUP`` is dropped from the metadata.
        """
        kept = {int(number) for number in (*self.files, *self._writing)}
        left_out = [number for number in self._ordered if number not in kept]
        self._groups = tuple(
            group
            for group in (tuple(n for n in interval if n in kept) for interval in self._groups)
            if len(group) >= MIN_GROUP
        )
        self._covered = frozenset(number for number in self._covered if number in kept)
        self._ordered = sorted(self._covered)
        self._drop_spare()
        return left_out

    def _disable(self, reason: str) -> None:
        self.disabled = True
        logger.error(
            "The loss landscape's directory %s cannot be used (%s): no landscape "
            "parameters are saved in this run.",
            self.directory,
            reason,
        )

    def _clear_previous_run(self) -> None:
        try:
            descriptor = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return
        try:
            with exclusive_lock(
                str(self.directory / METADATA_NAME) + ".lock", timeout=LOCK_TIMEOUT
            ):
                removed = _unlink_entry(descriptor, METADATA_NAME)
                with os.scandir(descriptor) as entries:
                    names = [entry.name for entry in entries]
                for name in names:
                    if _PARAMETER_FILE.match(name):
                        removed += _unlink_entry(descriptor, name)
            if removed:
                os.fsync(descriptor)
                logger.info("Removed %d files of an earlier run from %s.", removed, self.directory)
        finally:
            os.close(descriptor)

    def _directory_ready(self) -> None:
        """Create ``ckpt_dir`` (0700, or 0750 group-readable); refuse a link or a file there."""
        make_private_dir(self.directory)
        if not stat.S_ISDIR(os.lstat(self.directory).st_mode):
            raise NotADirectoryError(f"{self.directory} is not a directory (a link, or a file)")

    def save(self, number: int, network: object) -> str | None:
        """Start saving ``network``'s parameters for step/epoch ``number``.

        The parameters are copied now; the file is written in the background and
        is in :attr:`files` once :meth:`finish_writes` (which :meth:`write_metadata`
        calls first) saw it on disk. Returns the file's path, or None on an error
        found here.
        """
        if network is None or self.disabled:
            return None
        view = self._adapters.network_view(network)
        label = view.name if view is not None else type(network).__name__
        path = self.directory / f"{label}_{number}_{self.unit}.ckpt"
        try:
            named = network_parameters(network)  # views of the network's own memory
            if not self._decided and self._none_fit(sum(array.nbytes for _, array in named)):
                return None  # no copy of a network too large for the budget
            file = tensor_file(named)  # the header: nothing copied yet
            self._directory_ready()
        except (OSError, TypeError, ValueError) as error:
            self._save_failed(number, error)
            return None
        if not self._decided:
            self._decide(file.size)
            if number not in self._covered and self._later(number):
                # The first set saved comes later: its arrays are made meanwhile.
                self._thread().submit(self._make_spare, file.layout)
        if number not in self._covered:
            return None  # left out by the budget: said at the decision
        if self.budget is not None and self._queued_bytes + file.size > self.budget:
            # The network's sets grew after the first: the budget still holds.
            logger.warning(
                "The landscape parameters of %s %d (%s) would take this rank over its landscape "
                "budget of %s; they are not saved.",
                self.unit,
                number,
                _size(file.size),
                _size(self.budget),
            )
            return None
        file.copy(into=self._take_spare(file.layout))  # the one copy of this step's parameters
        self._queued_bytes += file.size
        if not self._later(number):
            self._drop_spare()  # the run's last set: nothing more to copy into
        write = self._thread().submit(self._write_set, path, file)
        self._writing[str(number)] = (str(path), write)
        return str(path)

    def _thread(self) -> concurrent.futures.ThreadPoolExecutor:
        """The one background thread that writes the sets (made at the first)."""
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="rankscribe-landscape"
            )
        return self._writer

    def _later(self, number: int) -> bool:
        """Whether a set after ``number`` is still to be saved in this run: the next number
        of the intervals, if the run reaches it (it reaches every number up to its last)."""
        index = bisect.bisect_right(self._ordered, number)
        if index == len(self._ordered):
            return False
        reached = self._reached
        return reached is None or (bool(reached) and self._ordered[index] <= reached[-1])

    def _write_set(self, path: Path, file: TensorFile) -> str:
        """Writer thread: ``file`` on disk; its arrays then wait for the next set."""
        # The writer thread joins nothing: it writes the header and the copies' buffers.
        # Its pages leave the page cache once on disk: nothing reads it in training, and the
        # next set's pages are then these (ranks/files.py, drop_cached_pages).
        written = atomic_write(path, file.chunks(), mode=file_mode(final=True), drop_cache=True)
        self._keep_spare(file.layout, file.arrays)
        return written

    def _make_spare(self, layout: Layout) -> None:
        """Writer thread: arrays of ``layout`` made and touched ahead of the next copy."""
        with self._spare_lock:
            if not self._spare_wanted or self._spare is not None:
                return
        self._keep_spare(layout, blank_arrays(layout))

    def _keep_spare(self, layout: Layout, arrays: list[Any]) -> None:
        """Writer thread: ``arrays`` are the spare, while one is wanted and none is kept."""
        with self._spare_lock:
            if self._spare_wanted and self._spare is None:
                self._spare = (layout, arrays)

    def _take_spare(self, layout: Layout) -> list[Any] | None:
        """The spare arrays when they are of ``layout`` (then no longer spare), else None."""
        with self._spare_lock:
            spare, self._spare = self._spare, None
        return spare[1] if spare is not None and spare[0] == layout else None

    def _drop_spare(self) -> None:
        """No spare kept, nor any made or given back later in this run."""
        with self._spare_lock:
            self._spare, self._spare_wanted = None, False

    def finish_writes(self, timeout: float = WRITE_TIMEOUT) -> None:
        """Wait (at most ``timeout`` s) for the files being written; add those on disk to
        :attr:`files` and log the others, which the metadata then leaves out."""
        writing, self._writing = self._writing, {}
        writer, self._writer = self._writer, None
        self._drop_spare()
        if writer is None:
            return
        late = concurrent.futures.wait(
            [write for _, write in writing.values()], timeout=timeout
        ).not_done
        for number, (path, write) in writing.items():
            if write in late:
                logger.error(
                    "The landscape parameters of %s %s were not written within %g s; "
                    "%s is left out of the metadata.",
                    self.unit,
                    number,
                    timeout,
                    path,
                )
            elif (error := write.exception()) is not None:
                self._save_failed(int(number), error)
            else:
                self.files[number] = path
        # A late write finishes on its own; the thread ends after it.
        writer.shutdown(wait=False)

    def _save_failed(self, number: int, error: BaseException) -> None:
        logger.error(
            "Saving the landscape parameters of %s %d failed: %s", self.unit, number, error
        )

    def metadata(self, step_per_epoch: int) -> dict[str, Any]:
        return {
            "epoch_group": {
                str(index): list(interval) for index, interval in enumerate(self._groups)
            },
            "model_params_file_map": dict(self.files),
            "step_per_epoch": step_per_epoch,
            "unit": self.unit,
            "num_samples": self.options.num_samples,
            "landscape_size": self.options.landscape_size,
            "create_landscape": dict(self.options.create_landscape),
        }

    def write_metadata(self, step_per_epoch: int) -> bool:
        """Write ``train_metadata.json`` unless it exists; True when this call wrote it."""
        path = self.directory / METADATA_NAME
        # Only files that are on disk are named in it.
        self.finish_writes()
        if self.disabled or not self._groups:
            return False  # not self._groups: the budget kept no interval; said at the decision
        try:
            self._directory_ready()
            with exclusive_lock(str(path) + ".lock", timeout=LOCK_TIMEOUT):
                if path.exists():
                    logger.warning("%s already exists; it is kept as it is.", path)
                    return False
                payload = json.dumps(self.metadata(step_per_epoch), indent=1).encode()
                atomic_write(path, [payload], mode=file_mode(final=True))
        except LockTimeoutError:
            logger.error(
                "Write meta data %s failed: its lock was held for more than %g s.",
                path,
                LOCK_TIMEOUT,
            )
            return False
        except OSError as error:
            logger.error("Write meta data %s failed, detail: %s", path, error)
            return False
        return True


def budgeted_groups(
    intervals: Sequence[Sequence[int]], reached: Sequence[int], fit: int
) -> tuple[tuple[int, ...], ...]:
    """The intervals cut to at most ``fit`` distinct numbers, in ``reached`` only.

    An interval is drawn from its sets: the landscape is centred on its last,
    the training path runs from its first, and MindSpore's SummaryLandscape
    refuses fewer than :data:`MIN_GROUP`. So each interval kept keeps its first
    and last number and numbers evenly spread between them, at least
    ``MIN_GROUP``; when not every interval can have that many, the later ones
    are kept (the last interval's last set is the one the training's result
    landscape is drawn around). The numbers that fit are shared evenly among
    the intervals kept, one more to a later one first. An interval with fewer
    than ``MIN_GROUP`` numbers reached is not kept; nor, with ``fit`` under
    ``MIN_GROUP``, is any.
    """
    seen = set(reached)
    viable = [
        group
        for group in (
            tuple(dict.fromkeys(n for n in interval if n in seen)) for interval in intervals
        )
        if len(group) >= MIN_GROUP
    ]
    count = min(len(viable), fit // MIN_GROUP)
    if count == 0:
        return ()
    kept = viable[len(viable) - count :]
    shares = [MIN_GROUP] * count
    spare = fit - MIN_GROUP * count
    while spare:
        growing = [index for index in reversed(range(count)) if shares[index] < len(kept[index])]
        for index in growing[:spare]:
            shares[index] += 1
        spare -= min(spare, len(growing))
        if not growing:
            break
    return tuple(_spread(group, share) for group, share in zip(kept, shares, strict=True))


def _spread(group: tuple[int, ...], count: int) -> tuple[int, ...]:
    """``count`` (>= 2) entries of ``group``: its first, its last and evenly between."""
    last, gaps = len(group) - 1, count - 1
    return tuple(group[(index * last + gaps // 2) // gaps] for index in range(count))


def _unlink_entry(directory: int, name: str) -> int:
    """Remove ``name`` from the open ``directory`` unless it is a directory; 1 if removed."""
    try:
        entry = os.lstat(name, dir_fd=directory)
    except FileNotFoundError:
        return 0
    if not (stat.S_ISREG(entry.st_mode) or stat.S_ISLNK(entry.st_mode)):
        logger.warning("%s in the landscape directory is not a file; it is left alone.", name)
        return 0
    os.unlink(name, dir_fd=directory)  # a link goes, its target stays
    return 1


def _size(count: int) -> str:
    """``count`` bytes in decimal units: ``512 B``, ``10.4 kB``, ``1.9 GB``."""
    if count < 1000:
        return f"{count} B"
    value, unit = count / 1000, "kB"
    for larger in ("MB", "GB"):
        if value < 1000:
            break
        value, unit = value / 1000, larger
    return f"{value:.1f} {unit}"


def _numbers(numbers: list[int]) -> str:
    """``1-9, 10-19`` style: consecutive runs of ``numbers`` (sorted) joined."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)
