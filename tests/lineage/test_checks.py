"""The lineage package's argument checks: its own errors, and its command-line option types.

The checks themselves are rankscribe.ranks.arguments' (tests/ranks/test_arguments.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rankscribe.jobview import RankSeries, write_job_view
from rankscribe.jobview.errors import JobViewParamValueError
from rankscribe.lineage.cli import main


@pytest.mark.parametrize(
    ("value", "said"),
    [("3", "expected an int >= 4, got 3"), ("x", "expected an int >= 4, got 'x'")],
)
def test_an_int_option_names_the_form_and_the_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, said: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["report", str(tmp_path), "--max-points", value])
    assert stopped.value.code == 2
    assert f"argument --max-points: {said}" in capsys.readouterr().err


def test_an_int_option_takes_an_int_in_its_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 0 is taken (the base, which holds no run, is what the command then refuses) ...
    assert main(["query", str(tmp_path), "--limit", "0"]) == 1
    assert "no summary or lineage file" in capsys.readouterr().err
    # ... and -1, below the limit's floor, is not.
    with pytest.raises(SystemExit) as stopped:
        main(["query", str(tmp_path), "--limit", "-1"])
    assert stopped.value.code == 2
    assert "argument --limit: expected an int >= 0, got -1" in capsys.readouterr().err


def test_write_job_view_refuses_a_bool_world_size(tmp_path: Path) -> None:
    with pytest.raises(JobViewParamValueError, match="world_size must be an int >= 1, got True"):
        write_job_view(tmp_path, {0: RankSeries(0)}, world_size=True)
    assert list(tmp_path.iterdir()) == []
