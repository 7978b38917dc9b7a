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
then made read-only. ``train_metadata.json`` is written once: under a file
lock, a second writer (another run, or another collector, in the same
directory) finds it there and leaves it as it is, as the original's read-only
file did.
"""

from __future__ import annotations

import bisect
import importlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import filelock
import numpy as np
from safetensors.numpy import save as safetensors_bytes

from rankscribe.collector import adapters
from rankscribe.collector.options import LandscapeOptions

logger = logging.getLogger(__name__)

__all__ = ["LANDSCAPE_DIR", "METADATA_NAME", "LandscapeSaver", "network_arrays"]

LANDSCAPE_DIR = "ckpt_dir"
METADATA_NAME = "train_metadata.json"
#: Seconds to wait for another writer's lock on train_metadata.json.
LOCK_TIMEOUT = 30.0
_READ_ONLY = 0o400


def network_arrays(network: object) -> list[tuple[str, np.ndarray[Any, Any]]]:
    """The ``(name, array)`` parameters of ``network``.

    Uses ``rankscribe.collector.checkpoint.network_parameters`` (the one reader
    ModelCheckpoint uses) when it is available, else the adapters' view.
    """
    try:
        checkpoint = importlib.import_module("rankscribe.collector.checkpoint")
        reader = checkpoint.network_parameters
    except (ImportError, AttributeError):
        view = adapters.network_view(network)
        if view is None:
            raise TypeError(f"cannot read parameters from a {type(network).__name__}") from None
        return [(name, adapters.to_numpy(value)) for name, value in view.parameters()]
    return [(str(name), np.asarray(array)) for name, array in reader(network)]


def _write_atomically(path: Path, payload: bytes) -> None:
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                             dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(payload)
        os.chmod(temporary, _READ_ONLY)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


class LandscapeSaver:
    """Parameter files at the landscape's steps or epochs, and their metadata file."""

    def __init__(self, directory: str | os.PathLike[str], options: LandscapeOptions) -> None:
        self.options = options
        self.directory = Path(directory) / LANDSCAPE_DIR
        self.files: dict[str, str] = {}
        self.metadata_written = False
        # The collector asks wants() at every step: a set lookup, not a scan of the intervals.
        self._covered = frozenset(number for interval in options.intervals for number in interval)
        self._ordered = sorted(self._covered)

    @property
    def unit(self) -> str:
        return self.options.unit

    def wants(self, number: int) -> bool:
        """True when ``number`` is in an interval and its parameters are not saved yet."""
        return number in self._covered and str(number) not in self.files

    def next_wanted(self, number: int) -> int | None:
        """The first step (epoch) after ``number`` in an interval, or None after the last."""
        index = bisect.bisect_right(self._ordered, number)
        return self._ordered[index] if index < len(self._ordered) else None

    def save(self, number: int, network: object) -> str | None:
        """Save ``network``'s parameters for step/epoch ``number``; the path, or None on error."""
        if network is None:
            return None
        view = adapters.network_view(network)
        label = view.name if view is not None else type(network).__name__
        path = self.directory / f"{label}_{number}_{self.unit}.ckpt"
        try:
            tensors = {name: np.ascontiguousarray(array) for name, array in network_arrays(network)}
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            _write_atomically(path, safetensors_bytes(tensors))
        except (OSError, TypeError, ValueError) as error:
            logger.error("Saving the landscape parameters of %s %d failed: %s", self.unit,
                         number, error)
            return None
        self.files[str(number)] = str(path)
        return str(path)

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
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            with filelock.FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT):
                if path.exists():
                    logger.warning("%s already exists; it is kept as it is.", path)
                    return False
                payload = json.dumps(self.metadata(step_per_epoch), indent=1).encode()
                _write_atomically(path, payload)
        except filelock.Timeout:
            logger.error("Write meta data %s failed: its lock was held for more than %g s.",
                         path, LOCK_TIMEOUT)
            return False
        except OSError as error:
            logger.error("Write meta data %s failed, detail: %s", path, error)
            return False
        self.metadata_written = True
        return True
