"""Verdicts people act on, rank 0's side (docs/job-view.md, "Verdict records", "Live").

- judge_window names a rank slower in a timing with its cost (seconds per step
  against the other ranks' median, share of the step), persistent or not and
  since when; balanced noisy ranks and a 1 % difference name nobody;
- LiveJobView judges each round: the state file holds the records, on_verdict
  gets each new record once (an exception in it is logged, training goes on),
  one warning names the rank, the timing, the cost and ``rankscribe-lineage show``;
- the control file changes the thresholds; a planted link, FIFO, oversized or
  malformed file is refused with one warning and the settings stay;
- the live view's own cost: the rank the watch runs on, late by no more than its view
  threads' CPU a step, is warned of once and not named, live or in the whole run's keys;
  any other rank, or a rank 0 later than that, is;
- ``rankscribe-lineage show --json`` and ``--check`` on a running job's dir and
  on a dir with no job (exit 3 / 0 / 2).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from rankscribe.jobview import (
    LiveJobView,
    StragglerRecord,
    VerdictRecord,
    VerdictSettings,
    judge_timings,
    live_lines,
)
from rankscribe.jobview.errors import JobViewParamTypeError, JobViewParamValueError
from rankscribe.jobview.feed import STEP_TIME_TAG
from rankscribe.jobview.protocol import (
    CONTROL_NAME,
    END_JUDGEMENTS,
    LIVE_SPANS_KEY,
    LIVE_STATE_NAME,
    ControlFile,
    JobPartial,
    TimingWatch,
    WatchSettings,
    judge_window,
    records_from_verdicts,
)
from rankscribe.lineage.cli import main
from tests._support.board_texts import board_texts

COMPUTE = "rankscribe/section/compute"
BASE = 0.008


def window(
    ranks: int,
    steps: int,
    *,
    slow: int | None = None,
    factor: float = 1.0,
    onset: int = 0,
    noise: float = 0.1,
    seed: int = 0,
) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Compute sections and synchronous step times (the slowest rank's + 1 ms) of a job."""
    rng = np.random.default_rng(seed)
    numbers = np.arange(steps, dtype=np.int64)
    compute = BASE * rng.lognormal(0.0, noise, size=(ranks, steps))
    if slow is not None:
        compute[slow, onset:] *= factor
    step = compute.max(axis=0) + 0.001
    return {
        COMPUTE: {rank: (numbers, compute[rank]) for rank in range(ranks)},
        STEP_TIME_TAG: {rank: (numbers, step.copy()) for rank in range(ranks)},
    }


def test_a_slow_rank_is_named_with_its_cost() -> None:
    [record] = judge_window(window(3, 200, slow=1, factor=1.5))
    assert record["kind"] == "straggler"
    assert record["ranks"] == [1]
    assert record["tag"] == COMPUTE
    assert record["cost_seconds_per_step"] == pytest.approx(0.004, rel=0.15)
    assert record["cost_share"] == pytest.approx(0.004 / 0.013, rel=0.2)
    assert record["persistent"] is True
    assert record["top"][0]["rank"] == 1
    assert "rank 1" in record["message"] and "section 'compute'" in record["message"]
    json.dumps(record)  # plain JSON-ready


@pytest.mark.parametrize("ranks", [2, 3, 8])
@pytest.mark.parametrize("seed", range(5))
def test_balanced_noisy_ranks_and_a_one_percent_difference_name_nobody(
    ranks: int, seed: int
) -> None:
    assert judge_window(window(ranks, 200, noise=0.3, seed=seed)) == []
    assert judge_window(window(ranks, 200, slow=1, factor=1.01, seed=seed)) == []


def test_an_onset_mid_window_says_since_when_and_too_few_steps_judge_nothing() -> None:
    [record] = judge_window(window(3, 200, slow=1, factor=1.5, onset=80))
    assert 70 <= record["since_step"] <= 90
    assert judge_window(window(3, 5, slow=1, factor=3.0)) == []


def plain(records: list[StragglerRecord | VerdictRecord]) -> list[dict[str, Any]]:
    """The records as the plain dicts they are (a test reads any key of either kind)."""
    return [cast("dict[str, Any]", record) for record in records]


def test_a_standing_verdict_keeps_its_onset_in_its_record_and_its_message() -> None:
    # The window slides past the onset; the record keeps the first onset, and its message
    # (what the warning, show and the TensorBoard text print) says the same step.
    timings = window(3, 600, slow=1, factor=1.5, onset=80)

    def steps(low: int, high: int) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
        return {
            tag: {
                rank: (numbers[low:high], values[low:high])
                for rank, (numbers, values) in ranks.items()
            }
            for tag, ranks in timings.items()
        }

    watch = TimingWatch()
    watch.add(steps(0, 200))
    [first] = plain(watch.judge())
    assert 70 <= first["since_step"] <= 90
    watch.add(steps(200, 600))  # the window is now steps 400-599
    watch.judge()
    [record] = plain(watch.records)
    assert record["since_step"] == first["since_step"]
    assert f"since step {first['since_step']}," in record["message"]


def test_the_cost_floor_is_the_users_to_change() -> None:
    slight = window(3, 200, slow=1, factor=1.1, noise=0.02)
    [record] = judge_window(slight)
    assert record["cost_share"] < 0.1
    assert judge_window(slight, WatchSettings(verdict=VerdictSettings(cost_floor_share=0.2))) == []


def partial_of(
    timings: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]], rank: int
) -> JobPartial:
    return JobPartial.of_rank(rank, {tag: ranks[rank] for tag, ranks in timings.items()})


def live_round(
    view: LiveJobView, timings: dict[str, Any], ranks: int
) -> list[StragglerRecord | VerdictRecord]:
    merged = partial_of(timings, 0)
    for rank in range(1, ranks):
        merged.merge(partial_of(timings, rank))
    view.add(merged)
    return view.judge()


def test_the_live_view_calls_on_verdict_once_warns_once_and_survives_its_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    called: list[Mapping[str, Any]] = []

    def on_verdict(record: Mapping[str, Any]) -> None:
        called.append(record)
        raise RuntimeError("the caller's bug")

    view = LiveJobView(tmp_path, world_size=3, on_verdict=on_verdict)
    timings = window(3, 400, slow=1, factor=1.5)
    with caplog.at_level(logging.WARNING):
        first = {
            tag: {r: (s[:200], v[:200]) for r, (s, v) in ranks.items()}
            for tag, ranks in timings.items()
        }
        later = {
            tag: {r: (s[200:], v[200:]) for r, (s, v) in ranks.items()}
            for tag, ranks in timings.items()
        }
        assert [record["ranks"] for record in live_round(view, first, 3)] == [[1]]
        assert live_round(view, later, 3) == []  # the same verdict: not new, not changed
    assert len(called) == 1 and called[0]["ranks"] == [1]
    warnings = [
        r.getMessage() for r in caplog.records if "rankscribe-lineage show" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert "rank 1" in warnings[0] and "section 'compute'" in warnings[0]
    assert "ms a step" in warnings[0]
    assert any("on_verdict raised" in r.getMessage() for r in caplog.records)
    state = json.loads((tmp_path / LIVE_STATE_NAME).read_text())
    assert [record["ranks"] for record in state["verdict_records"]] == [[1]]


def test_show_json_and_check_on_a_running_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow_dir, clean_dir, empty_dir = tmp_path / "slow", tmp_path / "clean", tmp_path / "empty"
    for directory in (slow_dir, clean_dir, empty_dir):
        directory.mkdir()
    live_round(LiveJobView(slow_dir, world_size=3), window(3, 200, slow=1, factor=1.5), 3)
    clean = LiveJobView(clean_dir, world_size=3)
    live_round(clean, window(3, 200), 3)
    clean.write()  # the state file of an interval
    assert main(["show", "--json", str(slow_dir)]) == 0
    document = json.loads(capsys.readouterr().out)
    [record] = document["verdicts"]
    assert record["kind"] == "straggler" and record["ranks"] == [1]
    assert isinstance(record["cost_seconds_per_step"], float)
    assert main(["show", "--check", str(slow_dir)]) == 3
    assert "straggler: rank 1" in capsys.readouterr().out
    assert main(["show", "--check", str(clean_dir)]) == 0
    assert main(["show", "--json", str(clean_dir)]) == 0
    assert json.loads(capsys.readouterr().out)["verdicts"] == []
    assert main(["show", "--check", str(empty_dir)]) == 2
    assert "no job in" in capsys.readouterr().err


def test_a_job_that_just_started_is_shown_running_and_not_sent_to_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job"
    (job / "rank_0").mkdir(parents=True)  # a rank's files, no lineage yet
    (job / "rank_0" / "events.out.events.summary.1.0.vm_MS").write_bytes(b"")
    view = LiveJobView(job, world_size=2, interval_seconds=30.0)
    view.write_started()  # what rank 0 does when training starts
    assert main(["show", str(job)]) == 0
    printed = capsys.readouterr().out
    assert "job view (live): interval 0 at " in printed
    assert ", no steps written yet, 0 of 2 ranks in it" in printed
    assert "merge" not in printed
    assert main(["show", "--json", str(job)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["running"] is True
    assert document["live"]["interval"] == 0
    assert document["live"]["interval_seconds"] == 30.0
    assert document["live"]["started_at"] == pytest.approx(document["live"]["wall_time"])
    assert document["verdicts"] == []
    # A later write keeps the start time; a second start-state write changes nothing.
    written = json.loads((job / ".rankscribe-live.json").read_text())
    view.write_started()
    assert json.loads((job / ".rankscribe-live.json").read_text()) == written


def test_a_live_state_overdue_for_three_intervals_is_of_a_stopped_job_which_show_sends_to_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    view = LiveJobView(tmp_path, world_size=2, interval_seconds=30.0)
    view.write_started()
    state_file = tmp_path / ".rankscribe-live.json"
    state = json.loads(state_file.read_text())
    state["wall_time"] -= 91  # 3 intervals of 30 s and one more second: overdue
    state_file.write_text(json.dumps(state))
    assert main(["show", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "its live view was last written 91 s ago and is rewritten every 30 s" in printed
    assert f"rankscribe-lineage merge {tmp_path}" in printed
    assert main(["show", "--json", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["running"] is False
    state["wall_time"] += 40  # 51 s ago: within the floor of 60 s, still running
    state_file.write_text(json.dumps(state))
    assert main(["show", str(tmp_path)]) == 0
    assert "merge" not in capsys.readouterr().out
    state["final"] = True  # the last interval was written: not running, but not overdue
    state_file.write_text(json.dumps(state))
    assert main(["show", "--json", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["running"] is False


def test_a_start_state_that_cannot_be_written_is_logged_and_training_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    view = LiveJobView(tmp_path / "gone", world_size=2, interval_seconds=30.0)
    with caplog.at_level(logging.WARNING):
        view.write_started()  # the job dir does not exist: an OSError inside
    assert "was not written at the start" in caplog.text
    assert not (tmp_path / "gone").exists()


def test_show_before_the_first_interval_is_written_warns_of_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # A verdict judged before any step was written: the state file said the steps were
    # written through -2**63, which show's reader refused with a warning, twice.
    live_round(LiveJobView(tmp_path, world_size=3), window(3, 200, slow=1, factor=1.5), 3)
    caplog.clear()  # the live view's own warning of the straggler
    with caplog.at_level(logging.WARNING):
        assert main(["show", str(tmp_path)]) == 0
        assert main(["show", "--json", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert caplog.records == []
    assert "job view (live): interval 1 at " in printed
    assert ", no steps written yet, 3 of 3 ranks in it" in printed
    assert "straggler (recent steps): rank 1 costs" in printed


def test_records_from_a_merged_lineages_verdict_keys() -> None:
    records = records_from_verdicts(
        {
            "job/straggler_ranks": "2,3",
            "job/straggler_rank": 3,
            "job/straggler_timing/2": "rankscribe/forward_time",
            "job/straggler_timing/3": "rankscribe/forward_time",
            "job/straggler_excess/3": 0.5,
            "job/diverged_ranks": "1",
            "job/diverged_first_step": 7,
            "job/nonfinite_loss_ranks": "",
            "job/stopped_first_rank": -1,
        }
    )
    assert [(r["kind"], r["ranks"], r["timing"]) for r in records] == [
        ("straggler", [2, 3], "rankscribe/forward_time"),
        ("divergence", [1], None),
    ]
    assert records[1]["since_step"] == 7
    # Every kind has the keys its type declares, and no other.
    assert all(set(record) == VerdictRecord.__required_keys__ for record in records)
    assert records_from_verdicts({"job/diverged_ranks": 5, "job/straggler_ranks": "x-y"}) == []


def write_control(directory: Path, content: str | bytes) -> Path:
    path = directory / CONTROL_NAME
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def test_the_control_file_changes_settings_and_refuses_what_it_should(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    control = ControlFile(tmp_path)
    assert control.read() is None  # no file
    path = write_control(tmp_path, '{"cost_floor": 0.02, "job_view_interval": 5}')
    assert control.read() == {"cost_floor": 0.02, "job_view_interval": 5.0}
    assert control.read() is None  # unchanged
    with caplog.at_level(logging.WARNING):
        for bad in (
            '{"cost_floor": 2}',
            '{"cost_flor": 0.1}',
            "[1, 2]",
            "{not json",
            '{"window_steps": 5}',
            b"{" + b" " * 5000 + b"}",
        ):
            path.unlink()
            write_control(tmp_path, bad)
            assert control.read() is None
            assert control.read() is None  # said once
    refusals = [r.getMessage() for r in caplog.records if CONTROL_NAME in r.getMessage()]
    assert len(refusals) == 6
    assert any("cost_floor should be a share" in message for message in refusals)
    path.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text('{"cost_floor": 0.5}')
    path.symlink_to(target)
    assert control.read() is None  # a planted link is not followed
    path.unlink()
    os.mkfifo(path)
    assert control.read() is None  # a planted FIFO never blocks


HUGE = "1" + "0" * 4000  # 4,001 digits: under the file's cap and Python's int limit


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[" * 2000 + "]" * 2000, "nested deeper than"),
        ('{"cost_floor": ' + "[" * 1500 + "]" * 1500 + "}", "nested deeper than"),
        ("{" * 2000, "nested deeper than"),
        (bytes(range(256)) * 8, "UTF-8"),
        (b"\x00" * 4096, "JSON"),
        ("\ufeff" + '{"cost_floor": 0.5}', "JSON"),
        ('{"job_view_interval": ' + HUGE + "}", "job_view_interval should be a number"),
        ('{"confidence": -' + HUGE + "}", "confidence should be a number"),
        ('{"cost_floor": ' + HUGE + "}", "cost_floor should be a share"),
        ('{"window_steps": ' + HUGE + "}", "window_steps should be an int"),
        ('{"job_view_interval": 1' + "0" * 4070 + ".5}", "job_view_interval should be"),
        ('{"confidence": 1e999}', "confidence should be a number"),
        ('{"confidence": NaN}', "confidence should be a number"),
        ('{"cost_floor": -Infinity}', "cost_floor should be a share"),
        ('{"' + "k" * 4000 + '": 1}', "is not a setting"),
        ('{"window_steps": 400.0}', "window_steps should be an int"),
        ('{"window_steps": true}', "window_steps should be an int"),
        ("null", "not a JSON object"),
        ('"' + "\\" * 2000 + '"', "not a JSON object"),
        ("", "JSON"),
    ],
    ids=lambda value: f"{value[:24]!r}" if isinstance(value, (str, bytes)) else None,
)
def test_any_control_file_content_is_one_warning_and_the_settings_stay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str | bytes, problem: str
) -> None:
    # Before: 2,000 nested brackets raised RecursionError out of read() (which ended the
    # live view), and so did a number past float's range (OverflowError).
    control = ControlFile(tmp_path)
    path = write_control(tmp_path, '{"cost_floor": 0.25}')
    assert control.read() == {"cost_floor": 0.25}
    path.unlink()
    write_control(tmp_path, content)
    with caplog.at_level(logging.WARNING):
        assert control.read() is None  # no new settings: the old ones stay
        assert control.read() is None  # the same content: not said again
    refusals = [r.getMessage() for r in caplog.records if CONTROL_NAME in r.getMessage()]
    assert len(refusals) == 1, refusals
    assert problem in refusals[0], refusals[0]
    assert "the settings stay as they were" in refusals[0]
    assert len(refusals[0]) < 600  # the problem named, not the file's content repeated
    path.unlink()
    write_control(tmp_path, '{"confidence": 7}')
    assert control.read() == {"confidence": 7.0}  # a good file is taken again


def test_a_merged_lineages_straggler_record_carries_its_cost_keys() -> None:
    [record] = records_from_verdicts(
        {
            "job/straggler_ranks": "1",
            "job/straggler_rank": 1,
            "job/straggler_timing/1": "rankscribe/section/compute",
            "job/straggler_cost_seconds/1": 0.004,
            "job/straggler_cost_share/1": 0.33,
            "job/straggler_since_step": 600,
            "job/straggler_persistent": 1,
            "job/straggler_share_of_steps": 0.98,
            "job/straggler_message": "rank 1 costs 4 ms a step (33% of the step)",
        }
    )
    assert record["cost_seconds_per_step"] == 0.004 and record["cost_share"] == 0.33
    assert record["since_step"] == 600 and record["persistent"] is True
    assert record["share_of_steps"] == 0.98
    assert record["message"] == "rank 1 costs 4 ms a step (33% of the step)"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("30", JobViewParamTypeError),
        (-1.0, JobViewParamValueError),
        (math.inf, JobViewParamValueError),
    ],
)
def test_a_bad_interval_is_refused_naming_it(tmp_path: Path, value: object, error: type) -> None:
    with pytest.raises(error, match="interval_seconds"):
        LiveJobView(tmp_path, world_size=2, interval_seconds=value)  # type: ignore[arg-type]


def _rounds(
    timings: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]], low: int, high: int
) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
    return {
        tag: {rank: (steps[low:high], values[low:high]) for rank, (steps, values) in ranks.items()}
        for tag, ranks in timings.items()
    }


def test_a_verdict_whose_rank_recovers_ends_after_three_judgements_and_on_verdict_is_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Rank 1 is 1.5x slow for steps 0-199, like the others for 200-599, slow again from 600.
    slow = window(3, 800, slow=1, factor=1.5)
    even = window(3, 800, seed=1)
    timings = {
        tag: {
            rank: (steps, np.where((steps < 200) | (steps >= 600), values, even[tag][rank][1]))
            for rank, (steps, values) in ranks.items()
        }
        for tag, ranks in slow.items()
    }
    told: list[Mapping[str, Any]] = []
    watch = TimingWatch(on_verdict=told.append)
    watch.add(_rounds(timings, 0, 200))
    with caplog.at_level(logging.INFO):
        [named] = plain(watch.judge())
    assert named["ranks"] == [1] and "status" not in named
    watch.add(_rounds(timings, 200, 600))  # the window holds only even steps now
    for _ in range(END_JUDGEMENTS - 1):
        assert watch.judge() == []  # missing, not yet ended: it still stands
        assert [record["ranks"] for record in watch.records] == [[1]]
    with caplog.at_level(logging.INFO):
        [ended] = plain(watch.judge())
    assert ended["status"] == "ended"
    assert ended["until_step"] == 599
    assert ended["since_step"] == named["since_step"]
    assert "3 judgements in a row" in ended["reason"]
    assert ended["message"] == f"{named['message']} (ended by step 599)"
    assert watch.records == []
    assert plain(list(watch.ended)) == [ended]
    assert [record.get("status") for record in told] == [None, "ended"]
    assert "verdict ended: rank 1 costs" in caplog.text
    # Slow again: a new verdict, told and warned of like the first.
    watch.add(_rounds(timings, 600, 800))
    with caplog.at_level(logging.INFO):
        [again] = plain(watch.judge())
    assert again["ranks"] == [1] and "status" not in again
    assert len(told) == 3
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "costs" in r.message]
    assert len(warnings) == 2


def _named_then_recovered(
    told: list[Mapping[str, Any]],
) -> tuple[TimingWatch, dict[str, Any]]:
    """A watch that named rank 1 (1.5x slow over steps 0-199 of 3 ranks) in its first
    judgement, and the record it named; then given steps 200-599, the rank like the
    others (the judgements that end the verdict are the caller's)."""
    slow = window(3, 600, slow=1, factor=1.5)
    even = window(3, 600, seed=1)
    timings = {
        tag: {
            rank: (steps, np.where(steps < 200, values, even[tag][rank][1]))
            for rank, (steps, values) in ranks.items()
        }
        for tag, ranks in slow.items()
    }
    watch = TimingWatch(on_verdict=told.append)
    watch.add(_rounds(timings, 0, 200))
    [named] = plain(watch.judge())
    watch.add(_rounds(timings, 200, 600))
    return watch, named


@pytest.mark.parametrize(
    ("slow_until", "until"),
    [
        (311, 311),  # where the whole run's evidence says its slowness ended
        (599, 599),  # slow to the last step judged: that step
        (900, 599),  # past the last step judged, or before the onset: the last step judged
        (-5, 599),
    ],
)
def test_an_ended_verdicts_span_ends_where_the_whole_runs_evidence_says(
    slow_until: int, until: int
) -> None:
    told: list[Mapping[str, Any]] = []
    watch, named = _named_then_recovered(told)
    since = named["since_step"]
    assert watch.span_starts() == [(COMPUTE, 1, since)]
    # Another onset's end, or another rank's, is not this verdict's.
    run_until = {
        (COMPUTE, 1, since): slow_until,
        (COMPUTE, 1, since + 1): 250,
        (COMPUTE, 2, since): 450,
    }
    for _ in range(END_JUDGEMENTS - 1):
        assert watch.judge(run_until=run_until) == []
    [ended] = plain(watch.judge(run_until=run_until))
    assert (ended["until_step"], ended["ended_step"]) == (until, 599)
    slow_text = f", slow until step {until}" if until != 599 else ""
    assert ended["message"] == f"{named['message']} (ended by step 599{slow_text})"
    assert told[-1] == ended
    assert watch.span_starts() == [(COMPUTE, 1, since)]  # ended, its span still read


def test_a_verdict_ended_before_the_evidence_showed_where_is_given_its_end_later() -> None:
    """Ended by the watch before the whole run's evidence (written every minute or so)
    showed where the slowness ended: at the end of training that evidence gives it, in a
    new record; ``on_verdict`` is not told again."""
    told: list[Mapping[str, Any]] = []
    watch, named = _named_then_recovered(told)
    for _ in range(END_JUDGEMENTS):
        watch.judge(run_until={})
    [ended] = plain(list(watch.ended))
    assert (ended["until_step"], ended["ended_step"]) == (599, 599)
    handed_out = watch.ended[0]
    since = named["since_step"]
    watch.end_spans({(COMPUTE, 1, since): 191})
    [given] = plain(list(watch.ended))
    assert (given["until_step"], given["ended_step"]) == (191, 599)
    assert given["message"] == f"{named['message']} (ended by step 599, slow until step 191)"
    assert handed_out["until_step"] == 599  # the record handed out is not changed
    watch.end_spans({(COMPUTE, 1, since): 250})  # given once: kept
    assert plain(list(watch.ended)) == [given]
    assert len(told) == 2 and told[-1] == ended


def test_an_ended_verdict_takes_the_cost_of_its_span_once_its_end_is_known() -> None:
    """The ended record's cost was the last naming window's (steps after the slowness
    ended in it): once its span's end is known, it takes the judgement of the span alone
    (its ranks kept), once; a span whose end is the last step judged is not asked for,
    and one the span's judgement does not name keeps its own."""
    told: list[Mapping[str, Any]] = []
    watch, named = _named_then_recovered(told)
    for _ in range(END_JUDGEMENTS):
        watch.judge(run_until={})
    since = named["since_step"]
    assert watch.spans_to_cost() == []  # its end is still the last step judged
    handed_out = watch.ended[0]
    watch.end_spans({(COMPUTE, 1, since): 191})
    span = (COMPUTE, 1, since, 191)
    assert watch.spans_to_cost() == [span]
    record: Any = {
        **named,
        "ranks": [1, 2],
        "cost_seconds_per_step": 0.25,
        "cost_share": 0.5,
        "share_of_steps": 1.0,
        "steps": 192,
    }
    elsewhere: Any = {**record, "steps": 7}  # another span's
    watch.cost_spans({span: record, (COMPUTE, 1, since, 300): elsewhere})
    [costed] = plain(list(watch.ended))
    assert costed["ranks"] == [1]
    assert (costed["cost_seconds_per_step"], costed["cost_share"], costed["steps"]) == (
        0.25,
        0.5,
        192,
    )
    assert costed["message"].startswith("rank 1 costs 250.0 ms a step (50% of the step)")
    assert costed["message"].endswith(" (ended by step 599, slow until step 191)")
    assert handed_out["cost_seconds_per_step"] != 0.25  # the record handed out is not changed
    assert watch.spans_to_cost() == []  # once a span
    again: Any = {**record, "steps": 9}
    watch.cost_spans({span: again})
    assert plain(list(watch.ended)) == [costed]
    assert len(told) == 2  # on_verdict is not told again
    # A span the judgement does not name keeps the window's cost, and is done.
    other, _ = _named_then_recovered([])
    for _ in range(END_JUDGEMENTS):
        other.judge(run_until={})
    other.end_spans({(COMPUTE, 1, since): 191})
    before = plain(list(other.ended))
    other.cost_spans({})
    assert plain(list(other.ended)) == before and other.spans_to_cost() == []


def test_a_verdict_missing_once_then_back_neither_ends_nor_is_told_again() -> None:
    # Blocks of 200 steps (the window): rank 1 slow, even, slow, even, slow.
    slow = window(3, 1000, slow=1, factor=1.5)
    even = window(3, 1000, seed=1)
    timings = {
        tag: {
            rank: (steps, np.where((steps // 200) % 2 == 0, values, even[tag][rank][1]))
            for rank, (steps, values) in ranks.items()
        }
        for tag, ranks in slow.items()
    }
    told: list[Mapping[str, Any]] = []
    watch = TimingWatch(on_verdict=told.append)
    watch.add(_rounds(timings, 0, 200))
    watch.judge()
    for block, missing in ((1, 1), (3, END_JUDGEMENTS - 1)):
        watch.add(_rounds(timings, 200 * block, 200 * block + 200))  # an even window
        for _ in range(missing):
            watch.judge()
        watch.add(_rounds(timings, 200 * block + 200, 200 * block + 400))  # slow again
        watch.judge()
        assert [record["ranks"] for record in watch.records] == [[1]]
    assert watch.ended == []
    assert [record["ranks"] for record in told] == [[1]]  # told once, when first named


def one_then_another(until: int, since: int) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """A job of 3 ranks and 800 steps: rank 1 1.5x slow before step ``until``, rank 2 from
    step ``since`` to the end."""
    base = window(3, 800, seed=1)
    first = window(3, 800, slow=1, factor=1.5)
    second = window(3, 800, slow=2, factor=1.5, onset=since)
    return {
        tag: {
            rank: (
                steps,
                np.where(
                    steps < until,
                    first[tag][rank][1],
                    np.where(steps >= since, second[tag][rank][1], values),
                ),
            )
            for rank, (steps, values) in ranks.items()
        }
        for tag, ranks in base.items()
    }


def test_the_verdicts_the_live_view_named_reach_the_end_with_their_spans(tmp_path: Path) -> None:
    # Rank 1 slow for steps 0-199 (it ends), rank 2 slow from step 600 to the end.
    timings = one_then_another(200, 600)
    view = LiveJobView(tmp_path, world_size=3)

    def rounds(low: int, high: int, judgements: int = 1) -> None:
        merged = partial_of(_rounds(timings, low, high), 0)
        for rank in (1, 2):
            merged.merge(partial_of(_rounds(timings, low, high), rank))
        view.add(merged)
        for _ in range(judgements):
            view.judge(final=True)  # a judgement each (rounds are seconds apart in a job)

    rounds(0, 200)
    [first] = [r for r in plain(view.watch.records) if r["kind"] == "straggler"]
    rounds(200, 600, END_JUDGEMENTS)
    rounds(600, 800)
    [ended] = plain(list(view.watch.ended))
    verdicts = view.finish()
    [standing] = [r for r in plain(view.watch.records) if r["kind"] == "straggler"]
    assert standing["ranks"] == [2]
    # Ended by step 599 before any write: the end of training's evidence gives its span's
    # end, the block of 32 steps (at 800) before the one holding its last slow step, 199.
    assert (ended["until_step"], ended["ended_step"]) == (599, 599)
    [given] = plain(list(view.watch.ended))
    assert (given["until_step"], given["ended_step"]) == (191, 599)
    # Its cost then is its span's (the whole run's evidence through step 191, 192 steps),
    # which is what the first window, slow throughout, cost.
    assert given["steps"] == 192 and ended["steps"] == 200
    span = (COMPUTE, 1, ended["since_step"], 191)
    [(found, record)] = view.state.span_records([span, (COMPUTE, 2, 0, 191)]).items()
    assert found == span and record["cost_seconds_per_step"] == given["cost_seconds_per_step"]
    assert view.state.span_records([(COMPUTE, 2, 0, 191)]) == {}  # rank 1's, not rank 2's
    assert given["cost_seconds_per_step"] == pytest.approx(first["cost_seconds_per_step"], rel=0.02)
    assert verdicts[LIVE_SPANS_KEY] == (
        f"rank 1 section/compute steps {ended['since_step']}-191; "
        f"rank 2 section/compute steps {standing['since_step']}-end"
    )
    assert 590 <= standing["since_step"] <= 615


@pytest.mark.parametrize("exact", [True, False])
def test_the_watch_judges_float32_timings_as_they_came_in_half_the_memory(exact: bool) -> None:
    """A rank's timings come from its summary files, float32: the watch holds its window
    in float32 then (and the same records as judging the float64 arrays); a value float32
    does not hold keeps the whole window in float64, with the same records too."""
    timings = window(40, 260, slow=7, factor=1.4, onset=100, seed=3)
    for ranks in timings.values():
        for rank, (steps, values) in ranks.items():
            stored = values.astype(np.float32).astype(np.float64)
            if not exact and rank == 39:
                stored[-1] += 1e-12  # not a float32
            ranks[rank] = (steps, stored)
    watch = TimingWatch(settings=WatchSettings(window_steps=200))
    watch.add(timings)
    found = watch.judge()
    want = judge_window(
        {
            tag: {rank: (s[-200:], v[-200:]) for rank, (s, v) in ranks.items()}
            for tag, ranks in timings.items()
        },
        WatchSettings(window_steps=200),
    )
    assert [record["ranks"] for record in found] == [[7]]
    assert [(r["cost_seconds_per_step"], r["since_step"]) for r in found] == [
        (r["cost_seconds_per_step"], r["since_step"]) for r in want
    ]
    held = [values for tag in timings for _, values in watch._series[tag].values()]
    assert {values.dtype for values in held} == {np.dtype(np.float32 if exact else np.float64)}
    assert all(
        values.tolist() == timings[tag][rank][1][-200:].tolist()
        for tag in timings
        for rank, (_, values) in watch._series[tag].items()
    )


def test_whole_rounds_are_judged_as_the_window_lies_with_judge_timings_records() -> None:
    """A round of at least window_steps steps from every rank lays each timing's window out
    as one array, judged as it lies (no table of it made: 52 MB a timing at 65,536 ranks);
    a later round of fewer steps is judged from each rank's window. Either way the records
    are judge_timings' of the float64 (ranks, steps) arrays of the last 200 steps, a
    negative or infinite time no point, in whatever order the ranks came."""
    timings = window(60, 230, slow=11, factor=1.5, onset=120, seed=5)
    for ranks in timings.values():
        for rank, (steps, values) in ranks.items():
            ranks[rank] = (steps, values.astype(np.float32).astype(np.float64))
    compute = timings[COMPUTE]
    compute[3][1][50], compute[4][1][60], compute[5][1][70] = -1.0, np.inf, np.nan
    watch = TimingWatch(settings=WatchSettings(window_steps=200))

    def expected(last: int) -> list[StragglerRecord]:
        tables = {
            name: np.array([timings[tag][rank][1][last - 200 : last] for rank in range(60)])
            for name, tag in (("section/compute", COMPUTE), ("step_time", STEP_TIME_TAG))
        }
        for name, table in tables.items():
            tables[name] = np.where(np.isfinite(table) & (table >= 0), table, np.nan)
        steps = np.arange(last - 200, last)
        return judge_timings(tables, step_time=tables["step_time"], steps=steps)

    first = {tag: dict(reversed(ranks.items())) for tag, ranks in timings.items()}
    watch.add(first)
    want = expected(230)
    assert [record["ranks"] for record in want] == [[11]]
    assert watch.judge() == want
    more = window(60, 260, slow=11, factor=1.5, onset=120, seed=6)
    for tag, ranks in more.items():
        for rank, (steps, values) in ranks.items():
            stored = values.astype(np.float32).astype(np.float64)
            timings[tag][rank] = (steps, np.concatenate([timings[tag][rank][1], stored[230:]]))
    later = {
        tag: {rank: (s[230:], timings[tag][rank][1][230:]) for rank, (s, _) in ranks.items()}
        for tag, ranks in more.items()
    }
    again = TimingWatch(settings=WatchSettings(window_steps=200))
    again.add(first)
    again.add(later)
    assert again.judge() == expected(260)


@pytest.mark.parametrize(("cpu_per_cost", "named"), [(1.25, False), (0.8, True)])
def test_the_watchs_own_rank_late_by_its_live_views_cpu_is_warned_of_not_named(
    cpu_per_cost: float, named: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # Rank 0 runs the watch and the live view's threads; it is 1.5x slow. Its live view
    # used cpu_per_cost times that cost in CPU a step: when that covers the cost, the
    # lateness is RankScribe's own and nobody is named, with one warning.
    timings = window(3, 200, slow=0, factor=1.5)
    [judged] = judge_window(timings)
    cost = judged["cost_seconds_per_step"]
    assert judged["ranks"] == [0] and judged["since_step"] < 99
    told: list[Mapping[str, Any]] = []
    watch = TimingWatch(on_verdict=told.append)
    watch.add(_rounds(timings, 0, 100))
    watch.own_work(0, cpu_per_cost * cost * 100)
    watch.add(_rounds(timings, 100, 200))
    watch.own_work(0, cpu_per_cost * cost * 200)
    assert watch.own_cpu_per_step(0) == pytest.approx(cpu_per_cost * cost)
    with caplog.at_level(logging.WARNING):
        records = plain(watch.judge())
        watch.judge()
    own = [r.getMessage() for r in caplog.records if "RankScribe's cost" in r.getMessage()]
    if named:
        assert [record["ranks"] for record in records] == [[0]] and len(told) == 1
        assert own == []
    else:
        assert records == [] and told == [] and watch.records == []
        [message] = own  # once, however many judgements it explains
        assert message.startswith("rankscribe job view: rank 0 costs ")
        assert "on its section/compute" in message
        assert "a round every min(job_view_interval, 2 s)" in message


def test_the_live_views_cpu_on_its_own_rank_explains_no_other_rank() -> None:
    timings = window(3, 200, slow=1, factor=1.5)
    watch = TimingWatch()
    watch.add(_rounds(timings, 0, 100))
    watch.own_work(0, 0.0)
    watch.add(_rounds(timings, 100, 200))
    watch.own_work(0, 100.0)  # a second of CPU a step: far more than rank 1's cost
    assert [record["ranks"] for record in plain(watch.judge())] == [[1]]


def test_the_live_views_cpu_a_step_is_read_between_its_totals_and_restarts_with_its_threads() -> (
    None
):
    timings = window(3, 400)
    watch = TimingWatch()
    watch.own_work(0, 0.01)  # before any step: nothing to pin it to
    assert watch.own_cpu_per_step(0) == 0.0
    watch.add(_rounds(timings, 0, 100))
    watch.own_work(0, 0.5)  # over the steps so far: 0.5 s from before step 0 to step 99
    assert watch.own_cpu_per_step(0) == pytest.approx(0.005)
    watch.add(_rounds(timings, 100, 200))
    watch.own_work(0, 1.5)  # 1 s over steps 99-199
    assert watch.own_cpu_per_step(149) == pytest.approx(0.01)
    assert watch.own_cpu_per_step(0) == pytest.approx((1.5 - 0.005) / 199)
    assert watch.own_cpu_per_step(199) == 0.0
    watch.add(_rounds(timings, 200, 300))
    watch.own_work(0, 0.2)  # a lower total: the view's threads started again
    assert watch.own_cpu_per_step(0) == 0.0
    watch.add(_rounds(timings, 300, 400))
    watch.own_work(0, 1.2)
    assert watch.own_cpu_per_step(0) == pytest.approx(1.0 / 100)  # since the restart


@pytest.mark.parametrize(("cpu_per_cost", "named"), [(1.25, False), (0.8, True)])
def test_the_whole_runs_verdict_leaves_out_the_live_views_own_cost_on_its_rank_too(
    tmp_path: Path, cpu_per_cost: float, named: bool
) -> None:
    # Rank 0, whose live view judges, 1.5x slow the whole run: the merged lineage's keys
    # (the whole run's judgement) leave it out when its view's CPU a step covers the cost.
    timings = window(3, 400, slow=0, factor=1.5)

    def finished(directory: Path, cpu_per_step: float | None) -> dict[str, Any]:
        directory.mkdir()
        view = LiveJobView(directory, world_size=3)
        for low, high in ((0, 200), (200, 400)):
            merged = partial_of(_rounds(timings, low, high), 0)
            for rank in (1, 2):
                merged.merge(partial_of(_rounds(timings, low, high), rank))
            view.add(merged)
            if cpu_per_step is not None:
                view.watch.own_work(0, cpu_per_step * high)
            view.judge(final=True)
        return dict(view.finish())

    plain_run = finished(tmp_path / "plain", None)
    assert plain_run["job/straggler_ranks"] == "0"
    cost = float(plain_run["job/straggler_cost_seconds"])
    told = finished(tmp_path / "told", cpu_per_cost * cost)
    assert told["job/straggler_ranks"] == ("0" if named else "")
    assert (LIVE_SPANS_KEY in told) is named


def test_a_short_job_ends_with_one_verdict_per_slowness_and_the_onset_the_whole_run_shows(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A job of two rounds (a few seconds): rank 1 slow for steps 0-199, rank 2 from step 300
    # to the end. The last round's window (steps 600-799) holds rank 2 slow throughout, and
    # rank 1's verdict of the first round is missing from one judgement only.
    timings = one_then_another(200, 300)
    told: list[Mapping[str, Any]] = []
    view = LiveJobView(tmp_path, world_size=3, on_verdict=told.append)

    def add(low: int, high: int) -> None:
        merged = partial_of(_rounds(timings, low, high), 0)
        for rank in (1, 2):
            merged.merge(partial_of(_rounds(timings, low, high), rank))
        view.add(merged)

    add(0, 200)
    view.write()
    [named] = plain(view.judge())
    assert named["ranks"] == [1]
    # The end of training, as the live view's last round makes it: the round's judgement
    # (its window, steps 600-799, names rank 2 since its first step), then the final
    # write (the whole run's judgement) and the end of training's judgement.
    add(200, 800)
    [window_named] = plain(view.judge(final=True))
    assert window_named["ranks"] == [2] and window_named["since_step"] >= 600
    # A write while its onset is open: the verdicts written give the record's onset; the
    # next round's judgement settles it with that write's judgement of the whole run, and
    # the onsets the round thread may read meanwhile are only ever that judgement's.
    kept: list[tuple[int, int] | None] = []
    judged_whole_run = type(view.state).verdicts

    def verdicts_kept(state: Any, *args: Any, **kwargs: Any) -> Any:
        found = judged_whole_run(state, *args, **kwargs)
        kept.append(state.straggler_onsets.get((COMPUTE, 2)))
        return found

    monkeypatch.setattr(type(view.state), "verdicts", verdicts_kept)
    view.write()
    monkeypatch.undo()
    # (None: the onsets of the write before, which did not name rank 2)
    assert kept[-1] is not None and 280 <= kept[-1][0] <= 310, kept
    assert all(each is None or each == kept[-1] for each in kept), kept
    written = json.loads((tmp_path / LIVE_STATE_NAME).read_text())["verdicts"]
    assert written["job/straggler_rank"] == 2
    assert written["job/straggler_since_step"] == window_named["since_step"]
    [moved] = plain(view.judge(final=True))
    assert moved["ranks"] == [2] and 280 <= moved["since_step"] <= 310
    view.write(final=True)
    view.judge(final=True)
    verdicts = view.verdicts()
    [ended] = plain(list(view.watch.ended))
    assert ended["ranks"] == [1] and ended["since_step"] == named["since_step"]
    # Slow over steps 0-199: to the whole run's block (32 steps at 800), the last of the
    # block before the one holding 199, most of whose steps are even (192-223); ended by
    # the last step judged.
    assert (ended["until_step"], ended["ended_step"]) == (191, 799)
    assert ended["message"].endswith("(ended by step 799, slow until step 191)")
    assert "end of training" in ended["reason"]
    [standing] = [r for r in plain(view.watch.records) if r["kind"] == "straggler"]
    assert standing["ranks"] == [2]
    # Slow since step 300, not since the last window's first step.
    assert 280 <= standing["since_step"] <= 310
    assert f"since step {standing['since_step']}," in standing["message"]
    assert verdicts["job/straggler_rank"] == 2
    assert verdicts["job/straggler_since_step"] == standing["since_step"]
    assert verdicts[LIVE_SPANS_KEY] == (
        f"rank 1 section/compute steps {named['since_step']}-191; "
        f"rank 2 section/compute steps {standing['since_step']}-end"
    )
    # One cost too: the standing record's, its message's and the job verdicts' are the
    # whole run's since the onset.
    assert standing["cost_seconds_per_step"] == verdicts["job/straggler_cost_seconds"]
    assert standing["message"] == verdicts["job/straggler_message"]
    # Told of rank 2 when named, again when the whole run's judgement moved its onset, and
    # with the whole run's cost at the final write; of rank 1 when it ended, at that write
    # before its verdicts (missing from the last judgement, its slowness over in the whole
    # run's evidence: TimingWatch.end_over).
    assert [(r["ranks"], r.get("status"), r["since_step"]) for r in told] == [
        ([1], None, named["since_step"]),
        ([2], None, window_named["since_step"]),
        ([2], None, standing["since_step"]),
        ([1], "ended", named["since_step"]),
        ([2], None, standing["since_step"]),
    ]
    assert told[4] == standing and told[2]["message"] != standing["message"]
    # Rank 0's log warned of rank 2 twice: when named, and with the onset it moved to.
    warned = [r.getMessage() for r in caplog.records if "rank 2 costs" in r.getMessage()]
    assert [
        f"since step {record['since_step']}," in line
        for record, line in zip((window_named, standing), warned, strict=True)
    ] == [True, True]
    assert "before the steps that named it" in warned[1]
    # The state file says the same: its verdicts, and rank 1's among the ended records.
    state = json.loads((tmp_path / LIVE_STATE_NAME).read_text())
    assert state["verdicts"]["job/straggler_since_step"] == standing["since_step"]
    assert [record["ranks"] for record in state["ended_records"]] == [[1]]
    # What `show --check` prints of the job at its end: rank 2 alone.
    assert main(["show", "--check", str(tmp_path)]) == 3
    assert capsys.readouterr().out.splitlines() == [f"straggler: {standing['message']}"]


def test_at_the_end_a_standing_record_takes_the_whole_runs_cost_since_its_onset() -> None:
    # The whole run's judgement with the record's onset (a live view's, at its final write)
    # gives another cost and factor than the last window: the record, its message and
    # on_verdict's last call take them; a record of another onset or rank does not count.
    told: list[StragglerRecord | VerdictRecord] = []
    watch = TimingWatch(on_verdict=told.append)
    watch.add(window(3, 200, slow=1, factor=1.5))
    [named] = plain(watch.judge())
    since = named["since_step"]
    run = {**named, "cost_seconds_per_step": 0.0025, "cost_share": 0.21, "factor": 1.38}
    run.update(share_of_steps=0.97, persistent=False, period_steps=4, steps=150)
    run.update(cost_basis="arrival", slowest_share=0.61, top=[{"rank": 1, "cost": 0.0025}])
    elsewhere = {**run, "since_step": since + 40, "cost_seconds_per_step": 0.009}
    other_rank = {**run, "ranks": [2], "cost_seconds_per_step": 0.007}
    records = cast("list[StragglerRecord]", [other_rank, elsewhere, run])
    [taken] = plain(list(watch.take_costs(records)))
    assert {**taken, "message": ""} == {**run, "message": ""}  # every field of the judgement
    assert (taken["ranks"], taken["since_step"], taken["tag"]) == ([1], since, COMPUTE)
    assert taken["message"] == (
        "rank 1 costs 2.5 ms a step (21% of the step): section 'compute' 1.38x the others' "
        f"median since step {since}, in 97% of steps (intermittent: every 4th step)"
    )
    assert plain(watch.records) == [taken]
    assert plain(told) == [named, taken]
    assert watch.take_costs(records) == [] and len(told) == 2  # told once
    # The end of training's judgement of the window does not tell its own cost back: the
    # cost the record ends with is the whole run's, taken once more after it.
    assert watch.judge(run_onsets={(COMPUTE, 1): (since, since + 31)}, final=True) == []
    assert watch.records[0]["cost_seconds_per_step"] == named["cost_seconds_per_step"]
    assert watch.take_costs(records) == [] and plain(watch.records) == [taken]
    assert len(told) == 2

    # A cost that moves by less than its message rounds to is told too: on_verdict's last
    # call gives the cost the lineage gives (1.9118 against 1.9347 ms, both "1.9 ms", in a
    # CI run of the mpi onset job).
    nearly = {**run, "cost_seconds_per_step": 0.0025001}
    [retold] = plain(list(watch.take_costs(cast("list[StragglerRecord]", [nearly]))))
    assert retold["message"] == taken["message"]
    assert told[-1]["cost_seconds_per_step"] == 0.0025001 and len(told) == 3

    # Only a record of the same onset gives its cost.
    alone: list[StragglerRecord | VerdictRecord] = []
    watch = TimingWatch(on_verdict=alone.append)
    watch.add(window(3, 200, slow=1, factor=1.5))
    watch.judge()
    assert watch.take_costs(cast("list[StragglerRecord]", [elsewhere, other_rank])) == []
    assert plain(watch.records) == [named] and plain(alone) == [named]


def test_at_the_end_a_slow_nodes_record_takes_the_whole_runs_order_of_its_ranks() -> None:
    # Ranks 2 and 3 (a block of two) 1.5x slow: one record naming both, the costlier first;
    # the whole run's judgement holds them the other way round.
    timings = window(8, 200, slow=2, factor=1.5, seed=4)
    third = window(8, 200, slow=3, factor=1.5, seed=5)
    timings[COMPUTE][3] = third[COMPUTE][3]
    compute = np.stack([values for _, values in timings[COMPUTE].values()])
    step = compute.max(axis=0) + 0.001
    timings[STEP_TIME_TAG] = {rank: (steps, step) for rank, (steps, _) in timings[COMPUTE].items()}
    watch = TimingWatch()
    watch.add(timings)
    [named] = plain(watch.judge())
    assert sorted(named["ranks"]) == [2, 3]
    run = {**named, "ranks": named["ranks"][::-1]}
    [taken] = plain(list(watch.take_costs(cast("list[StragglerRecord]", [run]))))
    first, second = run["ranks"]
    assert taken["ranks"] == [first, second]
    assert taken["message"].startswith(f"ranks {first},{second} cost ")


def end_of_training(view: LiveJobView) -> dict[str, float | int | str]:
    """The live view's last round, final write and end of training's judgement, in the
    order a job's last round makes them; the job's verdicts."""
    view.judge(final=True)
    view.write(final=True)
    view.judge(final=True)
    return view.verdicts()


def _one_ends_another_from_490() -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Eight ranks, 800 steps: rank 1 3x slow for steps 100-449, rank 6 1.5x from step 490."""
    base = window(8, 800, seed=1)
    first = window(8, 800, slow=1, factor=3.0, seed=2)
    second = window(8, 800, slow=6, factor=1.5, seed=3)
    slow_steps = {1: (100, 450), 6: (490, 800)}
    return {
        tag: {
            rank: (
                steps,
                np.where(
                    (steps >= slow_steps.get(rank, (0, 0))[0])
                    & (steps < slow_steps.get(rank, (0, 0))[1]),
                    (first if rank == 1 else second)[tag][rank][1],
                    values,
                ),
            )
            for rank, (steps, values) in ranks.items()
        }
        for tag, ranks in base.items()
    }


def test_at_the_end_a_precise_live_onset_stays_and_a_slowness_over_ends_with_its_span(
    tmp_path: Path,
) -> None:
    # Rank 1 3x slow for steps 100-449: named in a round, missing from the last window; the
    # whole run, judged from its onset to the last step, still names it. Rank 6 1.5x slow
    # from step 490, named by a round whose window (450-649) shows its onset more finely
    # than the whole run's blocks.
    timings = _one_ends_another_from_490()
    told: list[Mapping[str, Any]] = []
    view = LiveJobView(tmp_path, world_size=8, tensorboard=True, on_verdict=told.append)

    def judged(low: int, high: int) -> dict[int, dict[str, Any]]:
        merged = partial_of(_rounds(timings, low, high), 0)
        for rank in range(1, 8):
            merged.merge(partial_of(_rounds(timings, low, high), rank))
        view.add(merged)
        # (final: judged now, as rounds seconds apart are; not the end of training's)
        return {record["ranks"][0]: record for record in plain(view.judge(final=True))}

    round_one = judged(0, 450)
    assert list(round_one) == [1] and round_one[1]["since_step"] == 250  # the window's first step
    named = judged(450, 650)[6]
    assert 480 < named["since_step"] <= 496
    merged = partial_of(_rounds(timings, 650, 800), 0)
    for rank in range(1, 8):
        merged.merge(partial_of(_rounds(timings, 650, 800), rank))
    view.add(merged)
    verdicts = end_of_training(view)  # rank 1 missing from its third judgement in a row
    # Rank 1's slowness is over in the whole run's evidence (steps 450-799 no slower than
    # the others): it ends with its span, to a block of 32 steps, not "-end".
    [ended] = plain(list(view.watch.ended))
    assert ended["ranks"] == [1] and ended["status"] == "ended"
    assert ended["until_step"] in (447, 479)  # the block holding step 449, or the one before
    assert ended["ended_step"] == 799
    assert "slow no longer in the whole run's evidence" in ended["reason"]
    assert ended["message"].endswith(f"(ended by step 799, slow until step {ended['until_step']})")
    # Its cost is the span's: 3x a compute of 10 ms, not diluted by the steps after it.
    assert ended["cost_seconds_per_step"] > 0.012
    assert [(r["ranks"], r.get("status")) for r in told if r["ranks"] == [1]][-1] == (
        [1],
        "ended",
    )
    standing = {record["ranks"][0]: record for record in plain(view.watch.records)}
    assert list(standing) == [6]
    assert standing[6]["since_step"] == named["since_step"]  # the finer live onset
    # The job's verdicts tell the same story: rank 6 stands, rank 1 was slow over its span.
    assert verdicts["job/straggler_rank"] == 6
    assert verdicts["job/straggler_ranks"] == "6"
    assert verdicts[LIVE_SPANS_KEY] == (
        f"rank 1 section/compute steps {ended['since_step']}-{ended['until_step']}; "
        f"rank 6 section/compute steps {standing[6]['since_step']}-end"
    )
    state = json.loads((tmp_path / LIVE_STATE_NAME).read_text())
    assert state["verdicts"]["job/straggler_rank"] == 6
    assert [record["ranks"] for record in state["ended_records"]] == [[1]]
    # The last text gives the records the job ended with, and says so: rank 6 alone.
    [board] = (path for path in view.paths if "tfevents" in path)
    texts = [text for _, tag, text in board_texts(board) if tag == "verdicts"]
    assert "(recent steps)" not in texts[-1]  # (a running job's say so: test_jobview_live)
    ended_with = f"straggler (at the end of training): {standing[6]['message']}"
    assert f"- {ended_with}" in texts[-1].splitlines()
    assert ended_with in live_lines(tmp_path)  # what `show` prints of the state file
    assert "straggler (at the end of training): rank 1" not in texts[-1]
    assert not any("rank 1" in line and "at the end" in line for line in live_lines(tmp_path))
    # The whole run's judgement, from rank 1's onset to the last step, still names it (it
    # stood with it at the end before): the span is what the job's verdicts give of it.
    assert "1" in str(view.state.verdicts()["job/straggler_ranks"]).split(",")


def test_at_the_end_a_slowness_the_last_judgement_still_names_stands_though_it_is_over(
    tmp_path: Path,
) -> None:
    """Rank 1 3x slow over steps 300-767 of 800: over in the whole run's evidence (the
    block of steps 768-799 as fast as the others), but the last window (600-799) names it,
    slow in 168 of its 200 steps: it stands to the end, not ended as over."""
    base = window(8, 800, seed=1)
    slow = window(8, 800, slow=1, factor=3.0, seed=2)
    timings = {
        tag: {
            rank: (
                steps,
                np.where((rank == 1) & (steps >= 300) & (steps < 768), slow[tag][rank][1], values),
            )
            for rank, (steps, values) in ranks.items()
        }
        for tag, ranks in base.items()
    }
    view = LiveJobView(tmp_path, world_size=8)
    for low, high in ((0, 450), (450, 650), (650, 800)):
        merged = partial_of(_rounds(timings, low, high), 0)
        for rank in range(1, 8):
            merged.merge(partial_of(_rounds(timings, low, high), rank))
        view.add(merged)
        view.judge(final=True)
    span = (COMPUTE, 1, int(plain(view.watch.records)[0]["since_step"]))
    verdicts = end_of_training(view)
    assert view.state.straggler_over.get(span) == 767  # over in the evidence
    assert view.watch.ended == []
    [standing] = plain(view.watch.records)
    assert standing["ranks"] == [1]
    assert verdicts["job/straggler_rank"] == 1
    assert verdicts[LIVE_SPANS_KEY] == f"rank 1 section/compute steps {span[2]}-end"


def test_at_the_end_a_rank_whose_verdict_ended_live_is_judged_from_after_its_span(
    tmp_path: Path,
) -> None:
    """Rank 1 3x slow over steps 100-449 of 800, its verdict ended live (missing from
    three judgements in a row); rank 6 1.5x slow from step 490. The whole run, judged from
    rank 1's onset to the last step, still names it; its span is over in the evidence, so
    the job's verdicts judge it from the step after the span: rank 6 alone stands."""
    timings = _one_ends_another_from_490()
    view = LiveJobView(tmp_path, world_size=8)
    for low, high, judgements in ((0, 450, 1), (450, 650, END_JUDGEMENTS), (650, 800, 1)):
        merged = partial_of(_rounds(timings, low, high), 0)
        for rank in range(1, 8):
            merged.merge(partial_of(_rounds(timings, low, high), rank))
        view.add(merged)
        for _ in range(judgements):
            view.judge(final=True)  # (judged now, as rounds seconds apart are)
    [ended] = plain(list(view.watch.ended))
    assert ended["ranks"] == [1] and f"{END_JUDGEMENTS} judgements" in ended["reason"]
    verdicts = end_of_training(view)
    assert verdicts["job/straggler_ranks"] == "6"
    spans = str(verdicts[LIVE_SPANS_KEY])
    assert spans.startswith(f"rank 1 section/compute steps {ended['since_step']}-")
    assert not spans.startswith(f"rank 1 section/compute steps {ended['since_step']}-end")
    assert "1" in str(view.state.verdicts()["job/straggler_ranks"]).split(",")  # from its onset


def _steps_of(
    timings: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]], low: int, high: int
) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """``timings`` of steps ``low`` to ``high`` (not included)."""
    return {
        tag: {
            rank: (numbers[low:high], values[low:high]) for rank, (numbers, values) in ranks.items()
        }
        for tag, ranks in timings.items()
    }


@pytest.mark.parametrize(
    ("window_end", "run_block", "moves"),
    [
        # Named from the window's first step (571: steps 571-770 are all slow), and the
        # whole run's block of 64 steps holding it begins at 512: the window could not see
        # the onset, and the whole run's is taken.
        (771, (512, 575), True),
        # The same, where the whole run's block ended before the window (the rule of old).
        (771, (480, 511), True),
        # Named with an onset inside its window (steps 450-649: the slowness from 500 is
        # in it): the window's finer onset stays, though the whole run's block is earlier.
        (650, (448, 511), False),
        # Inside its window, but the whole run's block ended before the window began: the
        # rank was slow before it (the window's onset is then noise's), and it moves.
        (650, (384, 447), True),
        # The whole run's onset later than the record's: an onset never moves later.
        (771, (576, 639), False),
    ],
)
def test_an_onset_the_window_could_not_see_takes_the_whole_runs(
    window_end: int, run_block: tuple[int, int], moves: bool
) -> None:
    timings = window(3, 800, slow=1, factor=1.5, onset=500, seed=4)
    told: list[StragglerRecord | VerdictRecord] = []
    watch = TimingWatch(on_verdict=told.append)
    watch.add(_steps_of(timings, 0, window_end))
    # (the whole run's judgement names nobody yet: the onset stays open)
    [named] = plain(watch.judge(run_onsets={}))
    assert watch.has_open_onsets
    first = window_end - 200  # the window's first step
    if window_end == 771:
        assert named["since_step"] == first  # slow throughout the window
    else:
        assert first < named["since_step"] and abs(named["since_step"] - 500) <= 8, named
    watch.add(_steps_of(timings, window_end, window_end + 1))  # one step more: told nothing new
    changed = plain(watch.judge(run_onsets={(COMPUTE, 1): run_block}))
    [standing] = plain(watch.records)
    if moves:
        assert [record["since_step"] for record in changed] == [run_block[0]]
        assert standing["since_step"] == run_block[0]
        assert f"since step {run_block[0]}," in standing["message"]
        assert plain(told)[-1] == standing and len(told) == 2
    else:
        assert changed == [] and standing["since_step"] == named["since_step"]
        assert len(told) == 1
    assert not watch.has_open_onsets  # settled either way
