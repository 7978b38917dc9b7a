"""Modes of what the collector creates: private by default, group-readable when asked.

Under the common umask 022 every directory (parents made on the way
included), lock and file the collector and its checkpoints create is for the
owner alone; ``RANKSCRIBE_GROUP_READABLE=1`` (the writer's switch, see
``rankscribe.writer.files``) opens them to the owner's group, never to others.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from rankscribe.collector import ModelCheckpoint, SummaryCollector, TrainLoop
from rankscribe.ranks import RankInfo
from rankscribe.ranks.files import GROUP_READABLE_ENV
from tests._support.launchers import drop_launcher_variables
from tests._support.modes import umask_022  # noqa: F401 - autouse: every test here runs under it
from tests.collector.coordinators import RankZeroAlone

LANDSCAPE = {"collect_landscape": {"unit": "step", "intervals": [[1, 2, 3]]}}


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture(autouse=True)
def single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    drop_launcher_variables(monkeypatch)


@pytest.fixture(params=[False, True], ids=["private", "group-readable"])
def shared(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param:
        monkeypatch.setenv(GROUP_READABLE_ENV, "1")
    return bool(request.param)


MODES = {  # kind: (private, group-readable)
    "dir": (0o700, 0o750),
    "file": (0o400, 0o440),
    "lock": (0o600, 0o640),
}


def expected(shared: bool, kind: str) -> int:
    return MODES[kind][shared]


def test_checkpoint_directories_and_files(model: Any, tmp_path: Path, shared: bool) -> None:
    directory = tmp_path / "runs" / "exp1" / "ckpt"
    data = model(batches=2)
    TrainLoop(lambda batch: 0.5, network=data.network).train(
        1, data.dataset, callbacks=[ModelCheckpoint(directory=directory)]
    )
    for made in (tmp_path / "runs", tmp_path / "runs" / "exp1", directory):
        assert mode(made) == expected(shared, "dir"), made
    for name in ("CKP-1_1.ckpt", "CKP-1_2.ckpt", "CKP-graph.meta"):
        assert mode(directory / name) == expected(shared, "file"), name


def test_summary_directories(model: Any, tmp_path: Path, shared: bool) -> None:
    data = model(batches=2)
    summary = tmp_path / "runs" / "exp1" / "summary"
    TrainLoop(lambda batch: 0.5, network=data.network).train(
        1,
        data.dataset,
        callbacks=[SummaryCollector(summary, collect_specified_data={"collect_landscape": None})],
    )
    for made in (tmp_path / "runs", tmp_path / "runs" / "exp1", summary):
        assert mode(made) == expected(shared, "dir"), made
    assert {mode(summary / name) for name in os.listdir(summary)} == {expected(shared, "file")}


def test_landscape_directory_lock_and_files(model: Any, tmp_path: Path, shared: bool) -> None:
    data = model(batches=3)
    TrainLoop(lambda batch: 0.5, network=data.network).train(
        1,
        data.dataset,
        callbacks=[SummaryCollector(tmp_path / "summary", collect_specified_data=LANDSCAPE)],
    )
    landscape = tmp_path / "summary" / "ckpt_dir"
    assert mode(landscape) == expected(shared, "dir")
    assert not (landscape / "train_metadata.json.lock").exists()  # removed when released
    assert mode(landscape / "train_metadata.json") == expected(shared, "file")
    assert mode(landscape / "TinyNet_1_step.ckpt") == expected(shared, "file")


def test_the_merge_lock(model: Any, tmp_path: Path, shared: bool) -> None:
    info = RankInfo(rank=0, world_size=2, local_rank=0, local_size=2, host="h", launcher="pmi")
    data = model(batches=2)
    collector = SummaryCollector(
        tmp_path / "summary",
        rank_info=info,
        coordinator=RankZeroAlone(info),
        merge_timeout=1.0,
        collect_specified_data={"collect_landscape": None},
    )
    TrainLoop(lambda batch: 0.5, network=data.network).train(1, data.dataset, callbacks=[collector])
    assert not (tmp_path / "summary" / ".rankscribe-merge.lock").exists()  # removed when released
    assert os.listdir(tmp_path / "summary")  # the merge ran
