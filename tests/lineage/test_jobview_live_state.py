"""The live state file a job view keeps in the job dir, as ``show`` reads it: whatever is in
it (another user's, a damaged one), ``live_lines`` and ``rankscribe-lineage show`` print what
they can and call the rest unknown, with a warning; they never fail."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from rankscribe.jobview import live_lines
from rankscribe.jobview.protocol import LIVE_STATE_NAME
from rankscribe.lineage import cli


def good_state() -> dict[str, Any]:
    return {
        "interval": 3,
        "wall_time": 1_700_000_000.0,
        "final": False,
        "written_through_step": 60,
        "ranks_in_interval": 2,
        "missing_in_interval": "",
        "dropped_points": 0,
        "world_size": 2,
        "verdicts": {
            "job/missing_ranks": "",
            "job/last_step/0": 60,
            "job/last_step/1": 60,
            "job/stopped_first_rank": -1,
        },
    }


def plant(job: Path, text: str) -> None:
    job.mkdir(exist_ok=True)
    (job / LIVE_STATE_NAME).write_text(text)


def show(job: Path, capsys: pytest.CaptureFixture[str]) -> str:
    status = cli.main(["show", str(job)])
    out = capsys.readouterr()
    assert status == 0, out.err
    return out.out


def test_a_good_state_is_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plant(tmp_path / "job", json.dumps(good_state()))
    printed = show(tmp_path / "job", capsys)
    assert "job view (live): interval 3 at 2023-11-1" in printed
    assert "2 of 2 ranks" in printed and "last step: ranks 0,1: 60" in printed


@pytest.mark.parametrize("wall_time", ["NaN", "Infinity", "-Infinity", "1e400", str(10**20)])
def test_a_wall_time_that_is_no_time_is_unknown_with_a_warning(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    wall_time: str,
) -> None:
    # time.localtime raised ValueError (NaN) or OverflowError (1e400, 10**20) out of show.
    text = json.dumps(good_state()).replace("1700000000.0", wall_time)
    plant(tmp_path / "job", text)
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        printed = show(tmp_path / "job", capsys)
    assert "job view (live): interval 3 at ? (unknown time), steps written through 60" in printed
    assert "holds wall_time" in caplog.text and "which is no time: shown as unknown" in caplog.text


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("interval", "1e400"),
        ("written_through_step", "NaN"),
        ("ranks_in_interval", str(10**30)),
        ("world_size", "-Infinity"),
    ],
)
def test_other_numbers_that_do_not_fit_are_unknown(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    key: str,
    value: str,
) -> None:
    state = good_state()
    state[key] = "@"
    plant(tmp_path / "job", json.dumps(state).replace('"@"', value))
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        printed = show(tmp_path / "job", capsys)
    assert "job view (live)" in printed
    assert key in caplog.text


def test_show_reads_the_state_once_and_warns_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    plant(tmp_path / "job", json.dumps(good_state()).replace(": 60,", ": NaN,", 1))
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        printed = show(tmp_path / "job", capsys)
    assert "steps written through ?," in printed
    assert [record.getMessage().split(" holds ")[1] for record in caplog.records] == [
        "written_through_step nan, which is no count or step: shown as unknown"
    ]


@pytest.mark.parametrize(
    "verdicts",
    [
        '{"job/last_step/0": NaN, "job/last_step/1": 1e400}',
        '{"job/last_step/99999999999999999999": 5, "job/stopped_first_rank": 1e400}',
        '{"job/stopped_first_rank": NaN, "job/stopped_first_step": Infinity}',
        '{"job/straggler_ranks": "1", "job/straggler_cost/1": NaN, "job/stopped_first_rank": 1}',
    ],
)
def test_verdict_numbers_that_do_not_fit_never_fail_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verdicts: str
) -> None:
    text = json.dumps(good_state())
    start = text.index('"verdicts": ') + len('"verdicts": ')
    plant(tmp_path / "job", text[:start] + verdicts + "}")
    assert "job view (live)" in show(tmp_path / "job", capsys)


def test_a_deeply_nested_state_is_refused_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # json.loads raised RecursionError: show printed a traceback.
    plant(tmp_path / "job", '{"verdicts": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with caplog.at_level(logging.WARNING, logger="rankscribe"):
        assert live_lines(tmp_path / "job") == []
    assert "nested deeper than" in caplog.text
