"""What MindSpore's ``SummaryLandscape`` requires of ``ckpt_dir/train_metadata.json``.

MindInsight draws a loss landscape from the ``LossLandscape`` values that
MindSpore's ``SummaryLandscape`` computes from the collector's parameter files;
``SummaryLandscape`` finds them through ``train_metadata.json`` and refuses a
file that breaks its ``_check_json_file_data`` rules (MindSpore 2.x,
``mindspore/train/callback/_landscape.py``), restated here:

- the keys are exactly ``epoch_group``, ``model_params_file_map``,
  ``step_per_epoch``, ``unit``, ``num_samples``, ``landscape_size`` and
  ``create_landscape``;
- every list of ``epoch_group`` has at least 3 numbers, and each of them is a
  key of ``model_params_file_map`` (a missing one stops the drawing);
- ``step_per_epoch`` and ``num_samples`` are ints, ``landscape_size`` 3..256,
  ``unit`` ``step`` or ``epoch``, ``create_landscape`` ``{"train": bool, "result": bool}``.

The training landscape of a group is centred on its last set and the result
landscape on the last group's last set, so those must be files on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors.numpy import load_file

METADATA_KEYS = {
    "epoch_group",
    "model_params_file_map",
    "step_per_epoch",
    "unit",
    "num_samples",
    "landscape_size",
    "create_landscape",
}


def read_metadata(ckpt_dir: Path) -> dict[str, Any]:
    metadata: dict[str, Any] = json.loads((ckpt_dir / "train_metadata.json").read_text())
    return metadata


def assert_drawable(metadata: dict[str, Any]) -> None:
    """``metadata`` passes SummaryLandscape's checks, and every file it names loads."""
    assert set(metadata) == METADATA_KEYS
    groups, files = metadata["epoch_group"], metadata["model_params_file_map"]
    assert isinstance(groups, dict) and groups, groups
    assert list(groups) == [str(index) for index in range(len(groups))]
    for numbers in groups.values():
        assert len(numbers) >= 3, groups
        assert all(type(number) is int for number in numbers), groups
        assert all(str(number) in files for number in numbers), (groups, sorted(files))
    for path in files.values():
        assert load_file(path), path  # a safetensors file of the network's parameters
    assert type(metadata["step_per_epoch"]) is int
    assert type(metadata["num_samples"]) is int
    assert 3 <= metadata["landscape_size"] <= 256
    assert metadata["unit"] in ("step", "epoch")
    create = metadata["create_landscape"]
    assert set(create) == {"train", "result"} and all(type(v) is bool for v in create.values())


def shape(metadata: dict[str, Any]) -> dict[str, str]:
    """Each key's type: what a full metadata file and a budgeted one share."""
    return {key: type(value).__name__ for key, value in metadata.items()}
