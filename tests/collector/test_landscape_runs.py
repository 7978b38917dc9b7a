"""The loss landscape across runs: what a run says it saves, and a second run's clean start.

The default (MindSpore's) saves 19 full parameter sets; rank 0 says so in one WARNING
line naming the directory, the bytes, and how to turn it off or save fewer. A second
training run into the same summary dir clears the first run's ``train_metadata.json``
and parameter files before it saves its own, without following links.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from rankscribe.collector import SummaryCollector, TrainLoop
from rankscribe.ranks import Coordinator, GatherResult, RankInfo
from rankscribe.writer.reader import scalars

TURN_OFF = "collect_specified_data={'collect_landscape': None}"


def _train(data: Any, directory: Path, epochs: int, bias: float, **collector: Any) -> None:
    def step(batch: Any) -> float:
        data.network["fc.bias"][:] += 1.0
        return 0.5

    data.network["fc.bias"][:] = bias
    TrainLoop(step, network=data.network, optimizer=data.optimizer).train(
        epochs, data.dataset, callbacks=[SummaryCollector(directory, **collector)]
    )


def _landscape_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "Loss landscape" in record.getMessage()
    ]


def test_the_default_is_announced_once_with_directory_count_and_how_to_turn_it_off(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    _train(model(12), tmp_path, epochs=2, bias=0.0)
    lines = _landscape_lines(caplog)
    assert len(lines) == 1
    assert "saving 19 full parameter sets" in lines[0]
    assert "(steps 1-19)" in lines[0]
    assert str(tmp_path / "ckpt_dir") in lines[0]
    assert TURN_OFF in lines[0]
    # what it said, and the metadata; the lock file is gone once released
    assert len(os.listdir(tmp_path / "ckpt_dir")) == 19 + 1
    # the bytes it gave: one set's file, and 19 of them for the rank
    one_set = (tmp_path / "ckpt_dir" / "TinyNet_1_step.ckpt").stat().st_size
    assert f"), {one_set} B each, {19 * one_set / 1000:.1f} kB per rank, into " in lines[0]
    assert "save fewer sets with {'collect_landscape': {'intervals': [[1, 2, 3]]}}" in lines[0]


def test_a_short_run_announces_only_the_sets_it_reaches(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    _train(
        model(3),
        tmp_path,
        epochs=4,
        bias=0.0,
        collect_specified_data={"collect_landscape": {"intervals": [[1, 2, 3], [5, 7, 20]]}},
    )
    (line,) = _landscape_lines(caplog)
    assert "saving 5 full parameter sets" in line and "(steps 1-3, 5, 7)" in line
    saved = json.loads((tmp_path / "ckpt_dir" / "train_metadata.json").read_text())
    assert sorted(saved["model_params_file_map"], key=int) == ["1", "2", "3", "5", "7"]


def test_turned_off_nothing_is_announced(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    _train(
        model(2), tmp_path, epochs=1, bias=0.0, collect_specified_data={"collect_landscape": None}
    )
    assert _landscape_lines(caplog) == []


class _Alone:
    """The two collectives the collector calls, for a rank whose peers never report."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    world_size = 2

    def bcast(self, obj: Any, root: int = 0, timeout: float | None = None) -> Any:
        """The claim of the job's directory (docs/layout.md): rank 0's never reaches rank 1."""
        from rankscribe.ranks.errors import CollectiveTimeoutError

        if self.rank != root:
            raise CollectiveTimeoutError("bcast", 1.0, [root], "rank 0 never sent its claim")
        return obj

    def gather(self, obj: Any, root: int = 0, timeout: float | None = None) -> Any:
        if self.rank != root:
            return GatherResult(root=root, rank=self.rank, world_size=2)
        return GatherResult(root=0, rank=0, world_size=2, values={0: obj}, missing=(1,))


Coordinator.register(_Alone)


@pytest.mark.parametrize("rank", [0, 1])
def test_only_rank_zero_announces(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, rank: int
) -> None:
    caplog.set_level(logging.INFO, logger="rankscribe.collector")
    info = RankInfo(
        rank=rank, world_size=2, local_rank=rank, local_size=2, host="h", launcher="pmi"
    )
    _train(model(2), tmp_path, epochs=1, bias=0.0, rank_info=info, coordinator=_Alone(rank))
    lines = _landscape_lines(caplog)
    if rank == 0:
        assert len(lines) == 1 and str(tmp_path / "rank_0" / "ckpt_dir") in lines[0]
        assert "every rank into its own rank_<r>/ckpt_dir" in lines[0]
    else:
        assert lines == []
    # every rank saves its own sets, announced or not
    assert sorted(os.listdir(tmp_path / f"rank_{rank}" / "ckpt_dir"))[:2] == [
        "TinyNet_1_step.ckpt",
        "TinyNet_2_step.ckpt",
    ]


def test_a_second_run_replaces_the_first_runs_metadata_and_files(
    model: Any, tmp_path: Path
) -> None:
    data = model(2)
    _train(
        data,
        tmp_path,
        epochs=2,
        bias=100.0,
        collect_specified_data={"collect_landscape": {"intervals": [[1, 2, 3, 4]]}},
    )
    directory = tmp_path / "ckpt_dir"
    assert (
        len(json.loads((directory / "train_metadata.json").read_text())["model_params_file_map"])
        == 4
    )

    _train(
        data,
        tmp_path,
        epochs=1,
        bias=0.0,
        collect_specified_data={"collect_landscape": {"intervals": [[1, 2, 3]]}},
    )
    metadata = json.loads((directory / "train_metadata.json").read_text())
    assert metadata["epoch_group"] == {"0": [1, 2, 3]}
    assert metadata["model_params_file_map"] == {
        str(step): str(directory / f"TinyNet_{step}_step.ckpt") for step in (1, 2)
    }
    # the second run's values, and none of the first run's files beside them
    np.testing.assert_array_equal(
        load_file(directory / "TinyNet_2_step.ckpt")["fc.bias"], np.full(3, 2.0, np.float32)
    )
    assert sorted(os.listdir(directory)) == [
        "TinyNet_1_step.ckpt",
        "TinyNet_2_step.ckpt",
        "train_metadata.json",
    ]


def test_clearing_removes_links_not_their_targets_and_keeps_other_files(
    model: Any, tmp_path: Path
) -> None:
    directory = tmp_path / "summary" / "ckpt_dir"
    directory.mkdir(parents=True)
    outside = tmp_path / "precious.ckpt"
    outside.write_bytes(b"keep me")
    (directory / "TinyNet_7_step.ckpt").symlink_to(outside)
    (directory / "train_metadata.json").symlink_to(outside)
    (directory / "notes.txt").write_text("mine")
    (directory / "Old_3_epoch.ckpt").mkdir()  # not a file: left alone

    _train(
        model(2),
        tmp_path / "summary",
        epochs=1,
        bias=0.0,
        collect_specified_data={"collect_landscape": {"intervals": [[1, 2, 3]]}},
    )
    assert outside.read_bytes() == b"keep me"
    assert not (directory / "TinyNet_7_step.ckpt").is_symlink()
    assert sorted(os.listdir(directory)) == [
        "Old_3_epoch.ckpt",
        "TinyNet_1_step.ckpt",
        "TinyNet_2_step.ckpt",
        "notes.txt",
        "train_metadata.json",
    ]
    assert not (directory / "train_metadata.json").is_symlink()


def test_a_linked_ckpt_dir_is_refused_and_training_goes_on(
    model: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    summary = tmp_path / "summary"
    summary.mkdir()
    (summary / "ckpt_dir").symlink_to(elsewhere)
    _train(model(2), summary, epochs=1, bias=0.0)
    assert os.listdir(elsewhere) == []
    assert "cannot be used" in caplog.text and "no landscape parameters are saved" in caplog.text
    assert [step for step, _ in scalars(summary)["loss/auto"]] == [1]  # collect_freq 10
