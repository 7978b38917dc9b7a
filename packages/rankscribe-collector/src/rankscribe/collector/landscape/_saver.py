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
pickle). Each file is written under a temporary name and renamed into place,
then made read-only.

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
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save as safetensors_bytes

from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.adapters._parameters import network_parameters
from rankscribe.collector.collection._options import LandscapeOptions
from rankscribe.ranks.files import (
    LockTimeoutError,
    atomic_write,
    exclusive_lock,
    file_mode,
    make_private_dir,
)

logger = logging.getLogger(__name__)

__all__ = ["LANDSCAPE_DIR", "METADATA_NAME", "LandscapeSaver"]

LANDSCAPE_DIR = "ckpt_dir"
METADATA_NAME = "train_metadata.json"
#: Seconds to wait for another writer's lock on train_metadata.json.
LOCK_TIMEOUT = 30.0
#: Seconds to wait for the parameter files still being written before the metadata is.
WRITE_TIMEOUT = 60.0
# What save() names its files: an earlier run's files of this form are cleared.
_PARAMETER_FILE = re.compile(r".+_[0-9]+_(step|epoch)\.ckpt\Z")


class LandscapeSaver:
    """Parameter files at the landscape's steps or epochs, and their metadata file."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        options: LandscapeOptions,
        *,
        adapters: AdapterRegistry | None = None,
    ) -> None:
        self._adapters = adapters if adapters is not None else AdapterRegistry()
        self.options = options
        self.directory = Path(directory) / LANDSCAPE_DIR
        self.files: dict[str, str] = {}
        # Set when ckpt_dir cannot be used safely: nothing more is written for this run.
        self.disabled = False
        # The collector asks wants() at every step: a set lookup, not a scan of the intervals.
        self._covered = frozenset(number for interval in options.intervals for number in interval)
        self._ordered = sorted(self._covered)
        # Parameter files are written (and fsynced, twice) by one background thread: on
        # the training thread the fsyncs cost a step milliseconds each, 19 times in a
        # default run (tools/bench/collector.py). number -> (path, its write).
        self._writing: dict[str, tuple[str, concurrent.futures.Future[str]]] = {}
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        # What rank 0 says at the first save: (the numbers this run saves, world size).
        self._announcement: tuple[list[int], int] | None = None

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
        """Say on rank 0, once, at WARNING, what this run saves, where and how many bytes.

        The default (MindSpore's) saves 19 full copies of the network's parameters
        per rank, which a user who never asked for a landscape should hear of: the
        line gives the bytes (those of the first file, times the sets the run
        reaches, per rank and for the job) and how to turn it off or save fewer.
        The bytes are known once the first set is copied, so the line is logged
        then (at the first step of the intervals: step 1 by default).
        """
        self._announcement = None
        if rank != 0 or self.disabled:
            return
        total = epoch_num * (1 if self.unit == "epoch" else batch_num)
        planned = self.planned(total)
        if planned:
            self._announcement = (planned, world_size)

    def _say_what_is_saved(self, set_bytes: int) -> None:
        announcement, self._announcement = self._announcement, None
        if announcement is None:
            return
        planned, world_size = announcement
        per_rank = set_bytes * len(planned)
        where = str(self.directory)
        if world_size > 1:
            where += f" ({_size(per_rank * world_size)} for the job's {world_size} ranks, every "
            where += "rank into its own rank_<r>/ckpt_dir)"
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
            where,
        )

    def start_training(self) -> None:
        """Forget this saver's files and clear an earlier run's files from ``ckpt_dir``."""
        self.finish_writes()  # an earlier run's last files are not written after the clearing
        self.files = {}
        self.disabled = False
        try:
            self._clear_previous_run()
        except LockTimeoutError:
            self._disable(f"its lock was held for more than {LOCK_TIMEOUT:g} s")
        except OSError as error:
            self._disable(str(error))

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
            tensors = {
                name: np.ascontiguousarray(array) for name, array in network_parameters(network)
            }
            payload = safetensors_bytes(tensors)  # the copy of this step's parameters
            self._directory_ready()
        except (OSError, TypeError, ValueError) as error:
            self._save_failed(number, error)
            return None
        self._say_what_is_saved(len(payload))
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="rankscribe-landscape"
            )
        write = self._writer.submit(atomic_write, path, [payload], mode=file_mode(final=True))
        self._writing[str(number)] = (str(path), write)
        return str(path)

    def finish_writes(self, timeout: float = WRITE_TIMEOUT) -> None:
        """Wait (at most ``timeout`` s) for the files being written; add those on disk to
        :attr:`files` and log the others, which the metadata then leaves out."""
        writing, self._writing = self._writing, {}
        writer, self._writer = self._writer, None
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
                str(index): list(interval) for index, interval in enumerate(self.options.intervals)
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
        if self.disabled:
            return False
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
