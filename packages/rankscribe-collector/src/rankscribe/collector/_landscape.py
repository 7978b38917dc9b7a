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

import json
import logging
import os
from pathlib import Path
from typing import Any

import filelock
import numpy as np
from safetensors.numpy import save as safetensors_bytes

from rankscribe.collector._options import LandscapeOptions
from rankscribe.collector.adapters import AdapterRegistry, network_parameters
from rankscribe.writer.files import atomic_write

logger = logging.getLogger(__name__)

__all__ = ["LANDSCAPE_DIR", "METADATA_NAME", "LandscapeSaver"]

LANDSCAPE_DIR = "ckpt_dir"
METADATA_NAME = "train_metadata.json"
#: Seconds to wait for another writer's lock on train_metadata.json.
LOCK_TIMEOUT = 30.0
_READ_ONLY = 0o400


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
        self.metadata_written = False

    @property
    def unit(self) -> str:
        return self.options.unit

    def wants(self, number: int) -> bool:
        """True when ``number`` is in an interval and its parameters are not saved yet."""
        return self.options.covers(number) and str(number) not in self.files

    def save(self, number: int, network: object) -> str | None:
        """Save ``network``'s parameters for step/epoch ``number``; the path, or None on error."""
        if network is None:
            return None
        view = self._adapters.network_view(network)
        label = view.name if view is not None else type(network).__name__
        path = self.directory / f"{label}_{number}_{self.unit}.ckpt"
        try:
            tensors = {
                name: np.ascontiguousarray(array) for name, array in network_parameters(network)
            }
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write(path, [safetensors_bytes(tensors)], mode=_READ_ONLY)
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
                atomic_write(path, [payload], mode=_READ_ONLY)
        except filelock.Timeout:
            logger.error("Write meta data %s failed: its lock was held for more than %g s.",
                         path, LOCK_TIMEOUT)
            return False
        except OSError as error:
            logger.error("Write meta data %s failed, detail: %s", path, error)
            return False
        self.metadata_written = True
        return True
