"""What the lineage package creates is private by default, group-readable on request: lock files,
the index, HParams files and folders, merged lineage."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_summary_lineage, merge_run_dir, write_hparams
from rankscribe.ranks.files import GROUP_READABLE_ENV
from tests._support.modes import umask_022  # noqa: F401 - autouse: every test here runs under it


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def make_job(root: Path, lw: Any) -> Path:
    for rank in range(2):
        lw.write(root / "job" / f"rank_{rank}", [lw.train(network="Net", loss=1.0 + rank)])
    return root / "job"


@pytest.mark.parametrize(
    ("shared", "files", "finished", "dirs"),
    [(False, 0o600, 0o400, 0o700), (True, 0o640, 0o440, 0o750)],
)
def test_what_the_lineage_package_creates_has_the_mode_of_the_switch(
    tmp_path: Path,
    lw: Any,
    monkeypatch: pytest.MonkeyPatch,
    shared: bool,
    files: int,
    finished: int,
    dirs: int,
) -> None:
    if shared:
        monkeypatch.setenv(GROUP_READABLE_ENV, "1")
    job = make_job(tmp_path, lw)
    assert filter_summary_lineage(str(job), use_index=True)["count"] == 2
    # the index is renamed into place whole: no lock file
    assert not (job / ".rankscribe-lineage-index.lock").exists()
    assert mode(job / ".rankscribe-lineage-index.npz") == files
    merged = Path(merge_run_dir(job).path)
    assert not (job / ".rankscribe-merge.lock").exists()  # removed when released
    assert mode(merged) == finished
    out = tmp_path / "made" / "on the way" / "hparams"  # parents made on the way
    written = write_hparams(job, out, host="node")
    assert written
    for path in written:
        assert mode(Path(path)) == files
    for folder in (tmp_path / "made", tmp_path / "made" / "on the way", out):
        assert mode(folder) == dirs, folder
