"""write_hparams: the files it leaves on disk, and what it does not touch."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import write_hparams
from rankscribe.writer.files import read_records
from rankscribe.writer.pb import tensorboard_hparams_pb2, tensorboard_pb2


def make_base(tmp_path: Path, lw: Any) -> Path:
    base = tmp_path / "runs"
    lw.write(base / "adam", [lw.train(optimizer="Adam", loss=0.25), lw.eval({"acc": 0.9})])
    return base


def test_files_are_private_and_read_back(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    written = write_hparams(base, host="node")
    out = base / "tensorboard-hparams"
    assert sorted(Path(path).parent for path in written) == [out, out / "adam"]
    for path in written:
        assert Path(path).name.endswith(".node.rankscribe-hparams")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        events = [tensorboard_pb2.Event.FromString(data) for data in read_records(path)]
        assert events[0].file_version == "brain.Event:2"
    assert not [name for name in os.listdir(out / "adam") if name.endswith(".tmp")]


def test_a_link_planted_at_a_temporary_name_is_not_followed(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    out = base / "tensorboard-hparams"
    (out / "adam").mkdir(parents=True)
    # The names the files will have in the next few seconds, plus ".tmp": what a
    # writer through a fixed temporary name would open.
    now = int(time.time())
    planted = []
    for second in range(now - 1, now + 30):
        for directory in (out, out / "adam"):
            link = directory / f"events.out.tfevents.{second}.node.rankscribe-hparams.tmp"
            os.symlink(victim, link)
            planted.append(link)
    written = write_hparams(base, host="node")
    assert victim.read_bytes() == b"keep me"
    assert all(link.is_symlink() for link in planted)
    for path in written:
        assert not os.path.islink(path)
        assert next(iter(read_records(path)))


def test_writing_again_replaces_only_its_own_files(tmp_path: Path, lw: Any) -> None:
    base = make_base(tmp_path, lw)
    out = base / "tensorboard-hparams" / "adam"
    first = write_hparams(base, host="node")
    other = out / "events.out.tfevents.1.other-tool"
    other.write_bytes(b"")
    second = write_hparams(base, host="other")
    names = sorted(os.listdir(out))
    assert names == sorted([Path(second[1]).name, other.name])
    assert not os.path.exists(first[1])  # another host: another name, the old one removed


def test_a_jobs_merge_notes_are_metrics_or_left_out_never_hyper_parameters(
    tmp_path: Path, lw: Any
) -> None:
    base = tmp_path / "runs"
    notes = {
        "seed": 3,
        "loss_min": 0.2,
        "loss_max": 0.3,
        "ranks_reported": 2,
        "ranks_missing": "",
        "disagreements": "",
        "valid_dataset_sharding": "whole",
        "job/straggler_rank": -1,
        "job/last_step/0": 40,
    }
    lw.write(
        base / "job",
        [lw.custom(notes), lw.train(optimizer="Adam", loss=0.25), lw.eval({"acc": 0.9})],
    )
    written = write_hparams(base, host="node")
    [session_file] = [path for path in written if Path(path).parent.name == "job"]
    events = [tensorboard_pb2.Event.FromString(data) for data in read_records(session_file)]
    start = next(
        value
        for event in events
        for value in event.summary.value
        if value.tag == "_hparams_/session_start_info"
    )
    data = tensorboard_hparams_pb2.HParamsPluginData.FromString(start.metadata.plugin_data.content)
    hparams = set(data.session_start_info.hparams)
    assert "user_defined/seed" in hparams and "optimizer" in hparams
    assert not {
        name for name in hparams if name != "user_defined/seed" and name.startswith("user_defined/")
    }, hparams
    scalars = {
        value.tag: value.simple_value
        for event in events
        for value in event.summary.value
        if value.HasField("simple_value")
    }
    assert scalars == pytest.approx(
        {
            # under names no curve has: tensorboard --logdir BASE draws both
            "final/loss": 0.25,
            "final/metric/acc": 0.9,
            "final/user_defined/loss_min": 0.2,
            "final/user_defined/loss_max": 0.3,
            "final/user_defined/ranks_reported": 2.0,
            "final/user_defined/job/straggler_rank": -1.0,
        }
    )
