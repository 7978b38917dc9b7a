"""``rankscribe-lineage`` options in a wrong form: a usage error naming the option, no wait."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage.cli import main
from rankscribe.writer import SummaryRecord


def _two_ranks(job: Path) -> None:
    for rank in (0, 1):
        with SummaryRecord(job / f"rank_{rank}", rank=rank) as record:
            for step in (1, 2):
                record.add_value("scalar", "loss", 1.0 / step)
                record.record(step)


# (argv after RUN_DIR, the words argparse's message holds)
MERGE_OPTIONS = [
    (
        ["--timeout", "inf"],
        "argument --timeout: expected a finite number of seconds >= 0, got 'inf' (a wait must end)",
    ),
    (["--timeout", "Infinity"], "argument --timeout: expected a finite number of seconds"),
    (
        ["--timeout", "nan"],
        "argument --timeout: expected a finite number of seconds >= 0, got 'nan'",
    ),
    (["--timeout", "-1"], "argument --timeout: expected a finite number of seconds >= 0, got '-1'"),
    (
        ["--timeout", "soon"],
        "argument --timeout: expected a finite number of seconds >= 0, got 'soon'",
    ),
    (["--world-size", "0"], "argument --world-size: expected an int >= 1, got 0"),
    (["--world-size", "1.5"], "argument --world-size: expected an int >= 1, got '1.5'"),
    (["--world-size", "two"], "argument --world-size: expected an int >= 1, got 'two'"),
]


@pytest.mark.parametrize(
    ("options", "words"), MERGE_OPTIONS, ids=[" ".join(options) for options, _ in MERGE_OPTIONS]
)
def test_merge_option_in_a_wrong_form_is_a_usage_error(
    lw: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], words: str
) -> None:
    _two_ranks(tmp_path)
    before = sorted(os.listdir(tmp_path))
    codes: list[int] = []
    done, errors = lw.finishes_within(
        5.0, lambda: codes.append(main(["merge", str(tmp_path), *options]))
    )
    assert done, f"merge {' '.join(options)} did not return"
    assert codes == [] and [type(error) for error in errors] == [SystemExit]
    assert errors[0].code == 2
    assert words in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == before


def test_query_limit_in_a_wrong_form_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["query", str(tmp_path), "--limit", "-1"])
    assert caught.value.code == 2
    assert "argument --limit: expected an int >= 0, got -1" in capsys.readouterr().err


def test_merge_world_size_below_the_rank_dirs_names_the_option_and_the_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _two_ranks(tmp_path)
    before = sorted(os.listdir(tmp_path))
    assert main(["merge", str(tmp_path), "--world-size", "1"]) == 1
    error = capsys.readouterr().err
    assert f"--world-size 1 is less than the ranks found in {tmp_path}" in error
    assert "rank dirs of ranks 0, 1; pass --world-size 2 or more" in error
    assert "series keys" not in error
    assert sorted(os.listdir(tmp_path)) == before
    assert main(["merge", str(tmp_path), "--world-size", "2"]) == 0
