"""Where each rank stopped: a tie never goes to an innocent rank; 'undetermined' when unsure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscribe.jobview import RankSeries, verdict_lines, write_job_view
from rankscribe.jobview.errors import JobViewError, JobViewParamValueError
from rankscribe.jobview.feed import STEP_TIME_TAG


def _job(last_steps: dict[int, int], step_seconds: float = 0.3) -> dict[int, RankSeries]:
    """Ranks that recorded steps 1 to their last; steps of 0.3 s are each written at once."""
    return {
        rank: RankSeries(
            rank, {STEP_TIME_TAG: [(step, step_seconds) for step in range(1, last + 1)]}
        )
        for rank, last in last_steps.items()
    }


def _dir(parent: Path, name: str) -> Path:
    (parent / name).mkdir()
    return parent / name


def test_one_rank_alone_with_the_smallest_last_step_stopped_first(tmp_path: Path) -> None:
    verdicts = write_job_view(tmp_path, _job({0: 20, 1: 14, 2: 20}), world_size=3).verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (1, 14)
    assert verdicts["job/stopped_first_evidence"] == "last_step"
    assert "stopped first: rank 1 at step 14" in "\n".join(verdict_lines(verdicts))


def test_a_tie_is_undetermined_not_the_lowest_rank(tmp_path: Path) -> None:
    """The victim (rank 3) and rank 0 stopped at the same step: nothing tells them apart."""
    verdicts = write_job_view(tmp_path, _job({0: 14, 1: 15, 2: 15, 3: 14}), world_size=4).verdicts
    assert verdicts["job/stopped_first_rank"] == -1
    assert verdicts["job/stopped_first_step"] == 14
    assert verdicts["job/stopped_first_evidence"] == "undetermined"
    assert verdicts["job/stopped_first_tied_ranks"] == "0,3"
    assert verdicts["job/stopped_early_ranks"] == "0,3"
    lines = verdict_lines(verdicts)
    assert (
        "stopped first: undetermined (ranks 0,3 stopped at step 14; nothing tells them apart)"
    ) in lines


def test_the_launchers_report_breaks_a_tie(tmp_path: Path) -> None:
    verdicts = write_job_view(
        tmp_path, _job({0: 14, 1: 15, 2: 15, 3: 14}), world_size=4, failed=[3]
    ).verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (3, 14)
    assert verdicts["job/stopped_first_evidence"] == "launcher"
    assert any("reported by the launcher" in line for line in verdict_lines(verdicts))


def test_lock_step_ranks_name_nobody_without_the_launchers_report(tmp_path: Path) -> None:
    job = _job({0: 30, 1: 30, 2: 30})
    verdicts = write_job_view(tmp_path, job, world_size=3).verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_evidence"]) == (-1, "")
    assert not any(line.startswith("stopped first") for line in verdict_lines(verdicts))
    reported = write_job_view(tmp_path, job, world_size=3, failed=[2]).verdicts
    assert (reported["job/stopped_first_rank"], reported["job/stopped_first_step"]) == (2, 30)


def test_quick_steps_less_than_a_second_apart_are_undetermined(tmp_path: Path) -> None:
    """Steps of 10 ms: a rank killed may not have written its last 100 (a second's)."""
    within = write_job_view(_dir(tmp_path, "in"), _job({0: 2000, 1: 1900}, 0.01), world_size=2)
    verdicts = within.verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (-1, 1900)
    assert verdicts["job/stopped_first_evidence"] == "undetermined"
    assert verdicts["job/stopped_first_tied_ranks"] == "0,1"
    assert (
        "stopped first: undetermined (last recorded: rank 0 at step 2000, rank 1 at step "
        "1900; a rank killed may not have written its last second of steps)"
    ) in verdict_lines(verdicts)
    beyond = write_job_view(_dir(tmp_path, "out"), _job({0: 2000, 1: 1899}, 0.01), world_size=2)
    assert (
        beyond.verdicts["job/stopped_first_rank"],
        beyond.verdicts["job/stopped_first_step"],
    ) == (
        1,
        1899,
    )
    assert beyond.verdicts["job/stopped_first_evidence"] == "last_step"


def test_the_rank_whose_exception_wrote_its_steps_is_not_blamed_on_the_others(
    tmp_path: Path,
) -> None:
    """Rank 1 raised at step 3000 and wrote every step; the launcher killed rank 0, which
    had not written its last 224 steps of 1.6 ms (as a real 2-rank mpiexec job did)."""
    verdicts = write_job_view(tmp_path, _job({0: 2776, 1: 3000}, 0.0016), world_size=2).verdicts
    assert verdicts["job/stopped_first_rank"] == -1
    assert verdicts["job/stopped_first_evidence"] == "undetermined"
    assert verdicts["job/stopped_first_tied_ranks"] == "0,1"
    named = write_job_view(tmp_path, _job({0: 2776, 1: 3000}, 0.0016), world_size=2, failed=[1])
    assert (named.verdicts["job/stopped_first_rank"], named.verdicts["job/stopped_first_step"]) == (
        1,
        3000,
    )
    assert named.verdicts["job/stopped_first_evidence"] == "launcher"


def test_the_rank_whose_training_raised_is_named_among_those_that_may_have_stopped_first(
    tmp_path: Path,
) -> None:
    """The same job with rank 1's stop record (its training raised): named, not undetermined."""
    verdicts = write_job_view(
        tmp_path, _job({0: 2776, 1: 3000}, 0.0016), world_size=2, raised={1: "RuntimeError"}
    ).verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_step"]) == (1, 3000)
    assert verdicts["job/stopped_first_evidence"] == "exception"
    assert verdicts["job/stopped_first_exception"] == "RuntimeError"
    assert verdicts["job/stopped_early_ranks"] == ""  # rank 0 may have gone as far
    assert "stopped first: rank 1 at step 3000 (its training raised RuntimeError)" in (
        verdict_lines(verdicts)
    )


def test_a_rank_that_raised_after_another_surely_stopped_is_not_named(tmp_path: Path) -> None:
    """Rank 0 stopped at step 100 of 0.3 s steps; rank 1 raised at 3000 (a timeout after it)."""
    verdicts = write_job_view(
        tmp_path, _job({0: 100, 1: 3000}), world_size=2, raised={1: "TimeoutError"}
    ).verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_evidence"]) == (
        0,
        "last_step",
    )


def test_ranks_that_all_raised_decide_nothing_and_one_of_a_tie_does(tmp_path: Path) -> None:
    both = write_job_view(
        tmp_path, _job({0: 2776, 1: 3000}, 0.0016), world_size=2, raised={0: "E", 1: "E"}
    ).verdicts
    assert both["job/stopped_first_evidence"] == "undetermined"
    tied = write_job_view(tmp_path, _job({0: 30, 1: 30, 2: 30}), world_size=3, raised={2: "E"})
    assert (tied.verdicts["job/stopped_first_rank"], tied.verdicts["job/stopped_first_step"]) == (
        2,
        30,
    )
    assert tied.verdicts["job/stopped_first_evidence"] == "exception"


@pytest.mark.parametrize(
    ("raised_at", "named"),
    [
        ({0: ("a", 1000.84), 1: ("a", 1000.0)}, 1),  # one host: rank 1 raised first
        ({0: ("a", 1000.0), 1: ("a", 1000.84)}, 0),
        ({0: ("a", 1000.84), 1: ("b", 1000.0)}, -1),  # two hosts: their clocks may differ
        ({0: ("a", 1000.0), 1: ("a", 1000.0)}, -1),  # at one moment
        ({1: ("a", 1000.0)}, -1),  # rank 0's record gave no time
    ],
)
def test_of_ranks_that_all_raised_on_one_host_the_first_to_raise_is_named(
    tmp_path: Path, raised_at: dict[int, tuple[str, float]], named: int
) -> None:
    """Under torchrun and gloo, rank 1 raised and rank 0 raised 0.84 s later, its
    connection closed by the dead rank (a real job: both stopped at step 39)."""
    view = write_job_view(
        tmp_path,
        _job({0: 39, 1: 39}, 0.02),
        world_size=2,
        raised={0: "RuntimeError", 1: "RuntimeError"},
        raised_at=raised_at,
    )
    verdicts = view.verdicts
    assert verdicts["job/stopped_first_rank"] == named
    if named >= 0:
        assert verdicts["job/stopped_first_evidence"] == "exception"
        assert verdicts["job/stopped_first_lead_seconds"] == pytest.approx(0.84)
        assert (
            f"stopped first: rank {named} at step 39 (its training raised RuntimeError, "
            "0.84 s before any other rank's)"
        ) in verdict_lines(verdicts)


@pytest.mark.parametrize(
    "raised_at", [{-1: ("a", 1.0)}, {1: ("a",)}, {1: (3, 1.0)}, {1: ("a", float("nan"))}]
)
def test_raised_at_must_map_ranks_to_a_host_and_a_time(
    tmp_path: Path, raised_at: dict[Any, Any]
) -> None:
    with pytest.raises(JobViewError, match="raised_at must map ranks"):
        write_job_view(tmp_path, _job({0: 3}), world_size=1, raised_at=raised_at)


@pytest.mark.parametrize(
    ("raised", "error"),
    [({-1: "E"}, "the key -1"), ({"1": "E"}, "the key '1'"), ({1: 3}, "got int for rank 1")],
)
def test_raised_must_map_ranks_to_exception_names(
    tmp_path: Path, raised: dict[Any, Any], error: str
) -> None:
    with pytest.raises(JobViewError, match=f"raised must map ranks .*{error}"):
        write_job_view(tmp_path, _job({0: 3}), world_size=1, raised=raised)


def test_a_rank_keeps_at_most_4096_steps_unwritten(tmp_path: Path) -> None:
    """Steps of 0.1 ms: a second holds 10,000 of them, but a write comes every 4,096."""
    within = write_job_view(_dir(tmp_path, "in"), _job({0: 10000, 1: 5904}, 1e-4), world_size=2)
    assert within.verdicts["job/stopped_first_evidence"] == "undetermined"
    beyond = write_job_view(_dir(tmp_path, "out"), _job({0: 10000, 1: 5903}, 1e-4), world_size=2)
    assert beyond.verdicts["job/stopped_first_rank"] == 1


def test_many_undetermined_ranks_are_told_as_a_range_of_steps(tmp_path: Path) -> None:
    last = {rank: 1000 - rank for rank in range(6)}
    verdicts = write_job_view(tmp_path, _job(last, 0.01), world_size=6).verdicts
    assert verdicts["job/stopped_first_tied_ranks"] == "0-5"
    assert (
        "stopped first: undetermined (last recorded: ranks 0-5 at steps 995 to 1000; a rank "
        "killed may not have written its last second of steps)"
    ) in verdict_lines(verdicts)


def test_a_job_whose_every_rank_was_sent_sigterm_names_none_first(tmp_path: Path) -> None:
    """A scheduler's time limit: each rank wrote every step it ran, at one step or at
    neighbouring ones (the signal came between two steps on one rank only)."""
    together = write_job_view(
        _dir(tmp_path, "one"), _job({0: 40, 1: 40}, 0.01), world_size=2, terminated=[0, 1]
    ).verdicts
    assert together["job/stopped_first_rank"] == -1
    assert together["job/stopped_first_evidence"] == "sigterm"
    assert together["job/sigterm_ranks"] == "0,1"
    assert (
        "stopped: every rank was sent SIGTERM (at step 40; each wrote every step it ran): "
        "none stopped first"
    ) in verdict_lines(together)
    apart = write_job_view(
        _dir(tmp_path, "two"), _job({0: 4873, 1: 4874}, 0.01), world_size=2, terminated=[1, 0]
    ).verdicts
    assert (apart["job/stopped_first_rank"], apart["job/stopped_first_evidence"]) == (
        -1,
        "sigterm",
    )
    assert (
        "stopped: every rank was sent SIGTERM (rank 0 at step 4873, rank 1 at step 4874; each "
        "wrote every step it ran): none stopped first"
    ) in verdict_lines(apart)
    assert not any(line.startswith("stopped first") for line in verdict_lines(apart))
    many = write_job_view(
        _dir(tmp_path, "many"),
        _job({rank: 100 + rank % 2 for rank in range(6)}, 0.01),
        world_size=6,
        terminated=range(6),  # type: ignore[arg-type]
    ).verdicts
    assert "every rank was sent SIGTERM (at steps 100 to 101;" in verdict_lines(many)[-1]


def test_a_rank_sent_sigterm_wrote_every_step_so_its_last_step_is_sure(tmp_path: Path) -> None:
    """Steps of 10 ms: a rank killed may not have written its last 100; one a SIGTERM
    stopped wrote them all. Rank 0, sent SIGTERM at step 1900, surely stopped before rank 1
    recorded step 2000; the reverse is not sure (rank 1 may have run to 2000 unwritten)."""
    job = _job({0: 1900, 1: 2000}, 0.01)
    sure = write_job_view(_dir(tmp_path, "sure"), job, world_size=2, terminated=[0]).verdicts
    assert (sure["job/stopped_first_rank"], sure["job/stopped_first_step"]) == (0, 1900)
    assert sure["job/stopped_first_evidence"] == "last_step"
    assert sure["job/sigterm_ranks"] == "0"
    lines = verdict_lines(sure)
    assert "stopped first: rank 0 at step 1900 (stopped early: rank 0)" in lines
    assert "sent SIGTERM: rank 0 (each wrote every step it ran)" in lines
    unsure = write_job_view(
        _dir(tmp_path, "unsure"), _job({0: 1950, 1: 2000}, 0.01), world_size=2, terminated=[1]
    ).verdicts
    assert unsure["job/stopped_first_evidence"] == "undetermined"
    assert "sent SIGTERM: rank 1 (each wrote every step it ran)" in verdict_lines(unsure)


def test_a_rank_that_raised_is_named_before_the_ranks_its_launcher_sent_sigterm(
    tmp_path: Path,
) -> None:
    """torchrun sends SIGTERM to the ranks left when one fails: the one that raised."""
    verdicts = write_job_view(
        tmp_path,
        _job({0: 2000, 1: 1990, 2: 2000}, 0.01),
        world_size=3,
        raised={1: "RuntimeError"},
        terminated=[0, 2],
    ).verdicts
    assert (verdicts["job/stopped_first_rank"], verdicts["job/stopped_first_evidence"]) == (
        1,
        "exception",
    )
    assert verdicts["job/sigterm_ranks"] == "0,2"


def test_only_the_ranks_with_steps_count_toward_every_rank_sent_sigterm(tmp_path: Path) -> None:
    """A rank named that recorded no step (or is not in the job) is not one of the ranks
    whose stop is judged: rank 1, not sent SIGTERM, keeps the job's stop open."""
    job = _job({0: 40, 1: 40}, 0.01)
    verdicts = write_job_view(tmp_path, job, world_size=2, terminated=[0, 7]).verdicts
    assert verdicts["job/stopped_first_evidence"] == ""
    assert verdicts["job/sigterm_ranks"] == "0"


def test_a_job_whose_every_rank_was_interrupted_by_ctrl_c_names_none_first(
    tmp_path: Path,
) -> None:
    """Ctrl-C under mpiexec: every rank raised KeyboardInterrupt and closed its files."""
    together = write_job_view(
        _dir(tmp_path, "one"), _job({0: 3420, 1: 3420}, 0.01), world_size=2, interrupted=[0, 1]
    ).verdicts
    assert (together["job/stopped_first_rank"], together["job/stopped_first_evidence"]) == (
        -1,
        "sigint",
    )
    assert together["job/sigint_ranks"] == "0,1"
    assert "job/sigterm_ranks" not in together
    assert verdict_lines(together)[-1] == (
        "stopped: every rank was interrupted (Ctrl-C, SIGINT) (at step 3420; each wrote every "
        "step it ran): none stopped first"
    )
    # Ranks 10 ms apart: each wrote every step, so neither is read as killed before the other.
    apart = write_job_view(
        _dir(tmp_path, "two"), _job({0: 4873, 1: 4874}, 0.01), world_size=2, interrupted=[0, 1]
    ).verdicts
    assert (apart["job/stopped_first_rank"], apart["job/stopped_first_evidence"]) == (
        -1,
        "sigint",
    )
    assert "rank 0 at step 4873, rank 1 at step 4874" in verdict_lines(apart)[-1]
    mixed = write_job_view(
        _dir(tmp_path, "mixed"),
        _job({0: 40, 1: 40, 2: 41}, 0.01),
        world_size=3,
        terminated=[2],
        interrupted=[0, 1],
    ).verdicts
    assert mixed["job/stopped_first_evidence"] == "signal"
    assert (mixed["job/sigterm_ranks"], mixed["job/sigint_ranks"]) == ("2", "0,1")
    assert verdict_lines(mixed)[-1].startswith(
        "stopped: every rank was sent SIGTERM or SIGINT (rank 0 at step 40, rank 1 at step 40, "
        "rank 2 at step 41;"
    )


def test_a_rank_interrupted_by_ctrl_c_wrote_every_step_so_its_last_step_is_sure(
    tmp_path: Path,
) -> None:
    """As a rank sent SIGTERM: rank 0, interrupted at step 1900, surely stopped before
    rank 1 recorded step 2000; a rank without a record (killed) is not read as sure."""
    job = _job({0: 1900, 1: 2000}, 0.01)
    sure = write_job_view(_dir(tmp_path, "sure"), job, world_size=2, interrupted=[0]).verdicts
    assert (sure["job/stopped_first_rank"], sure["job/stopped_first_evidence"]) == (
        0,
        "last_step",
    )
    assert "interrupted (Ctrl-C): rank 0 (each wrote every step it ran)" in verdict_lines(sure)
    unsure = write_job_view(
        _dir(tmp_path, "unsure"), _job({0: 1950, 1: 2000}, 0.01), world_size=2, interrupted=[1]
    ).verdicts
    assert unsure["job/stopped_first_evidence"] == "undetermined"
    lost = write_job_view(
        _dir(tmp_path, "lost"), _job({0: 40, 1: 40}), world_size=2, lost_peer=[0], interrupted=[1]
    ).verdicts
    assert lost["job/stopped_first_evidence"] == ""  # rank 1 left a record: not the lost one


def test_the_rank_the_others_lost_is_named_not_one_that_raised_on_losing_it(
    tmp_path: Path,
) -> None:
    """torchrun, rank 1 killed (SIGKILL) at about step 242: its files end at step 22 (it
    kept the rest), and rank 0 raised gloo's error on the closed connection."""
    job = _job({0: 242, 1: 22}, 0.0037)
    named = write_job_view(_dir(tmp_path, "lost"), job, world_size=2, lost_peer=[0]).verdicts
    assert (named["job/stopped_first_rank"], named["job/stopped_first_step"]) == (1, 22)
    assert named["job/stopped_first_evidence"] == "lost_peer"
    assert named["job/lost_peer_ranks"] == "0"
    assert (
        "stopped first: rank 1 at step 22 (its last recorded step; it left no stop record, "
        "and rank 0 raised on losing the connection to another rank)"
    ) in verdict_lines(named)
    # Read as the rank's own exception (before), rank 0 was named: the innocent rank.
    own = write_job_view(_dir(tmp_path, "own"), job, world_size=2, raised={0: "RuntimeError"})
    assert own.verdicts["job/stopped_first_rank"] == 0
    # Lock-step ranks at one step: the same.
    level = write_job_view(
        _dir(tmp_path, "level"), _job({0: 30, 1: 30, 2: 30}), world_size=3, lost_peer=[0, 2]
    ).verdicts
    assert (level["job/stopped_first_rank"], level["job/stopped_first_evidence"]) == (
        1,
        "lost_peer",
    )


@pytest.mark.parametrize(
    ("stops", "why"),
    [
        ({"lost_peer": [0]}, "two ranks left no record"),
        ({"lost_peer": [0], "raised": {2: "ValueError"}}, "a rank raised on its own"),
        ({"lost_peer": [0], "terminated": [2]}, "a rank sent SIGTERM may be the cause"),
        ({}, "nobody lost a rank"),
    ],
)
def test_the_lost_rank_is_named_only_when_it_alone_left_no_record(
    tmp_path: Path, stops: dict[str, Any], why: str
) -> None:
    job = _job({0: 242, 1: 22, 2: 242}, 0.0037)  # rank 2 sent SIGTERM: exact, still tied
    verdicts = write_job_view(tmp_path, job, world_size=3, **stops).verdicts
    assert verdicts["job/stopped_first_evidence"] != "lost_peer", why
    if "raised" in stops:
        assert verdicts["job/stopped_first_rank"] == 2  # its own exception names it
    else:
        assert verdicts["job/stopped_first_rank"] == -1
    if stops.get("lost_peer"):
        assert "lost a peer: rank 0 (raised on losing the connection to another rank)" in (
            verdict_lines(verdicts)
        )


def test_a_rank_with_a_stop_record_is_never_the_one_that_left_none(tmp_path: Path) -> None:
    """Rank 1 was sent SIGTERM and rank 0 lost it: rank 1 left a record, so nobody is
    named for leaving none; nor is the one rank of a job of one."""
    both = write_job_view(
        _dir(tmp_path, "two"), _job({0: 40, 1: 40}), world_size=2, lost_peer=[0], terminated=[1]
    ).verdicts
    assert (both["job/stopped_first_rank"], both["job/stopped_first_evidence"]) == (-1, "")
    alone = write_job_view(_dir(tmp_path, "one"), _job({0: 40}), world_size=1).verdicts
    assert (alone["job/stopped_first_rank"], alone["job/stopped_first_evidence"]) == (-1, "")


@pytest.mark.parametrize("lost_peer", [[-1], ["1"], [True], "0", None])
def test_lost_peer_must_hold_ranks(tmp_path: Path, lost_peer: object) -> None:
    with pytest.raises(JobViewError, match="lost_peer"):
        write_job_view(tmp_path, _job({0: 3}), world_size=1, lost_peer=lost_peer)  # type: ignore[arg-type]


@pytest.mark.parametrize("ranks", [[-1], ["1"], [True], "0", None])
@pytest.mark.parametrize("name", ["terminated", "interrupted"])
def test_the_signalled_ranks_must_be_ranks(tmp_path: Path, name: str, ranks: object) -> None:
    with pytest.raises(JobViewError, match=name):
        write_job_view(tmp_path, _job({0: 3}), world_size=1, **{name: ranks})  # type: ignore[arg-type]


@pytest.mark.parametrize("failed", [[-1], ["1"], [True]])
def test_failed_must_hold_ranks(tmp_path: Path, failed: list[object]) -> None:
    with pytest.raises(JobViewParamValueError, match="failed"):
        write_job_view(tmp_path, _job({0: 3}), world_size=1, failed=failed)  # type: ignore[arg-type]


def test_verdict_lines_read_unexpected_types_as_unknown() -> None:
    lines = verdict_lines(
        {
            "job/straggler_rank": 1,
            "job/straggler_slowest_share": "n/a",
            "job/straggler_excess": None,
            "job/step_time_skew": "x",
            "job/stopped_first_rank": "2",
            "job/straggler_timing": 5,
        }
    )
    # Unknown values are left out of the sentence (never "nan%"), the timing too.
    assert lines[0] == "straggler: rank 1 (no measure recorded)"
    assert not any("nan" in line for line in lines), lines


def test_the_largest_step_reaches_the_job_file_unwrapped(tmp_path: Path) -> None:
    """Step 2**63 - 1 used to wrap to -2**63 in a float-to-int64 cast."""
    from rankscribe.writer import reader

    largest = 2**63 - 1
    series = {
        rank: RankSeries(rank, {"loss": [(1, 1.0 + rank), (largest, 2.0 + rank)]})
        for rank in range(2)
    }
    view = write_job_view(tmp_path, series, world_size=2)
    means = dict(reader.scalars(view.paths[0])["loss/mean"])
    assert means == {1: 1.5, largest: 2.5}
    assert view.verdicts["job/last_step/0"] == float(largest)  # beyond int32: a float
