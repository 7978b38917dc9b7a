"""Review: `query` through a symbolic link to the runs dir names the runs as they are under it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage.cli import main


@pytest.mark.parametrize("output", ["table", "csv"])
def test_query_through_a_symlinked_base_shows_plain_run_names(
    lw: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    real = tmp_path / "scratch" / "runs"
    lw.write(real / "exp1", [lw.train(optimizer="Adam", loss=0.5)])
    link = tmp_path / "runs"
    os.symlink(real, link)
    assert main(["query", str(link), "--format", output]) == 0
    lines = capsys.readouterr().out.splitlines()
    run_column = lines[1].split(",")[0] if output == "csv" else lines[1].split()[0]
    assert run_column == "exp1"
