"""A plain SummaryRecord under a real ``mpiexec -n 3`` never mixes ranks silently.

Each rank's files carry its real rank (read from the launcher's environment), a
directory the three ranks share gets one warning per rank naming
``rankscribe.ranks.rank_dir()``, and the ranks' own directories get none
(docs/layout.md, "A plain SummaryRecord under a launcher").
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from rankscribe.writer.files import parse_file_name
from rankscribe.writer.reader import scalars

SCRIPT = Path(__file__).with_name("plain_record.py")


def test_three_ranks_in_one_directory_are_labelled_and_warned(mpi: Any, tmp_path: Path) -> None:
    run = mpi.run(3, sys.executable, str(SCRIPT), str(tmp_path), cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.output

    shared = sorted(os.listdir(tmp_path / "shared"))
    ranks = [parse_file_name(name).rank for name in shared]
    assert Counter(ranks) == {0: 1, 1: 1, 2: 1}, ranks  # each rank once, none unlabelled
    for rank in range(3):
        # one warning per rank, each naming the rank's own directory
        assert run.output.count(f"this one labelled rank {rank})") == 1, run.output
        assert repr(str(tmp_path / "shared" / f"rank_{rank}")) in run.output
    assert run.output.count("rankscribe.ranks.rank_dir(") == 3

    # Each file alone is one rank's curve: 30 steps, no repeats.
    for name in shared:
        steps = [step for step, _ in scalars(tmp_path / "shared" / name)["loss"]]
        assert steps == list(range(1, 31))

    # Written where the warning says, each rank has its own directory and curve.
    assert sorted(os.listdir(tmp_path / "own")) == ["rank_0", "rank_1", "rank_2"]
    for rank in range(3):
        [name] = os.listdir(tmp_path / "own" / f"rank_{rank}")
        assert parse_file_name(name).rank == rank
        assert [step for step, _ in scalars(tmp_path / "own" / f"rank_{rank}")["loss"]] == list(
            range(1, 31)
        )
