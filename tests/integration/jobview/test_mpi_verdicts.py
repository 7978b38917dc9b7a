"""Verdicts people act on, from real ``mpiexec`` jobs at the default settings.

The jobs are verdict_scenarios.py's: synchronous steps (an ``Allreduce`` each)
whose compute is marked as a section. What a user observes is checked:

- a 3-rank job whose rank 1 computes 1.25x from the middle of the run is named
  by ``rankscribe-lineage show --json`` — polled while the job runs, every poll
  parsing as JSON — within 10 s of the onset, with its cost; ``show --check``
  exits 3 on it while it runs; the finished job gives one onset and one cost on
  every surface;
- a rank 1.5x slower (8 -> 12 ms of compute) is named with a cost of about
  4 ms a step and about a third of the step; ``on_verdict`` got that record;
  ``show --check`` exits 3 after the job;
- a rank that is slow from step 100 to 500 of 1,600 is named, then ended live:
  ``on_verdict`` gets the ended record, and the merged lineage the span;
- a rank doing 6 ms of extra work every 10th step (~7 % of the job's time, under five
  floors) is named live by ``on_verdict`` within 10 s of the onset, and the merged
  lineage keeps it with the onset ``on_verdict`` was last told;
- healthy 2-rank jobs beside a process that keeps a core busy name nobody:
  ``on_verdict`` is never called and ``show --check`` exits 0, as it does for
  a rank 1 % of the step slower. ``RANKSCRIBE_CLEAN_JOBS`` sets how many clean
  jobs run (default 4; the acceptance run uses 10).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rankscribe.collector import SummaryCollector
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.jobview.feed import STEP_TIME_TAG
from rankscribe.jobview.protocol import LIVE_STATE_NAME
from rankscribe.lineage import get_run_lineage
from rankscribe.writer.reader import scalar_arrays
from tests._support.board_texts import board_texts
from tests._support.job_files import report_verdicts, show
from tests._support.launchers import Launches

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "verdict_scenarios.py"
SLOW_RANK = 1
#: The issue's promise: named within this many seconds of the onset.
NAMED_WITHIN = 10.0
JOB_TIMEOUT = 240.0
POLL_SECONDS = 0.5
CLEAN_JOBS = int(os.environ.get("RANKSCRIBE_CLEAN_JOBS", "4"))


def stragglers(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [record for record in document["verdicts"] if record["kind"] == "straggler"]


def excess_shares(job: Path, rank: int, tag: str) -> dict[int, float]:
    """Per step, ``rank``'s excess on ``tag`` read back from the job's files, as the
    straggler rule takes it: its time less the others' median, over the ranks' median
    step time, clipped to a step."""
    ranks = sorted(int(path.name.split("_")[1]) for path in job.glob("rank_*"))
    kept = [scalar_arrays(job / f"rank_{each}") for each in ranks]

    def by_step(name: str) -> dict[int, list[float]]:
        points = []
        for arrays in kept:
            steps, values = arrays[name]
            points.append(dict(zip(steps.tolist(), values.tolist(), strict=True)))
        shared = set.intersection(*(set(each) for each in points))
        return {int(step): [each[step] for each in points] for step in shared}

    timings, step_times = by_step(tag), by_step(STEP_TIME_TAG)
    mine = ranks.index(rank)
    excess = {}
    for step, values in timings.items():
        scale = statistics.median(step_times[step])
        lead = values[mine] - statistics.median(values[:mine] + values[mine + 1 :])
        excess[step] = max(-scale, min(scale, lead)) / scale
    return excess


def recorded(path: Path) -> list[dict[str, Any]]:
    """What on_verdict was called with (none: the file was never written)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_rank_that_slows_mid_run_is_named_live_within_seconds(mpi: Any, tmp_path: Path) -> None:
    job_dir = tmp_path / "onset"
    named_at: float | None = None
    document: dict[str, Any] = {}
    polls = 0
    check_code: int | None = None
    with Launches(JOB_TIMEOUT) as launches:
        process = mpi.start(launches, 3, *mpi.python(SCENARIO, "onset", tmp_path), cwd=tmp_path)
        while process.poll() is None and named_at is None:
            time.sleep(POLL_SECONDS)
            if not (job_dir / ".rankscribe-live.json").exists():
                continue
            result = show("--json", job_dir)
            if process.poll() is not None:
                break
            assert result.returncode == 0, result.stderr
            document = json.loads(result.stdout)  # parses on a running job
            polls += 1
            if any(SLOW_RANK in record["ranks"] for record in stragglers(document)):
                named_at = time.time()
                check_code = show("--check", job_dir).returncode
        [run] = launches.wait(check=False)
    print(run.output)
    assert run.returncode == 0
    assert polls >= 1, "the job ended before its live view could be read"
    assert named_at is not None, f"rank {SLOW_RANK} was never named while the job ran"
    onset = float((tmp_path / "onset.time").read_text())
    assert 0 <= named_at - onset <= NAMED_WITHIN, f"named {named_at - onset:.1f} s after onset"
    [record] = [r for r in stragglers(document) if SLOW_RANK in r["ranks"]]
    assert record["ranks"] == [SLOW_RANK]
    assert record["tag"] == "rankscribe/section/compute"
    assert 0.0015 <= record["cost_seconds_per_step"] <= 0.003  # 2 ms more compute a step
    assert check_code == 3  # show --check on the running job
    assert any(SLOW_RANK in r["ranks"] for r in recorded(tmp_path / "onset.verdicts.jsonl"))
    # One onset on every surface of the job (ONSET_STEP, within a block of steps). A
    # loaded machine may name the rank first in a window that begins after the onset
    # (steps 571-770 in a CI run): told then, and again with the whole run's earlier step
    # (how late the first can be, the bound on when it was named says).
    called = tmp_path / "onset.verdicts.jsonl"
    onsets = onsets_everywhere(job_dir, run.output, called)
    settled = onsets["merged lineage"]
    assert abs(settled - 500) <= 32, onsets
    told_then_settled(onsets, called, settled)
    # and one cost: the whole run's since that onset, as the merged lineage gives it
    costs = costs_everywhere(job_dir, called)
    assert len(set(costs.values())) == 1, costs


def onsets_everywhere(
    job_dir: Path, printed: str, called: Path, slow_rank: int = SLOW_RANK
) -> dict[str, int]:
    """The slow rank's onset step as each surface of the finished job gives it (another
    rank's verdicts left out: a clean rank that a loaded machine had named for a while
    has an onset of its own)."""
    onsets: dict[str, int] = {}

    def add(surface: str, steps: Any) -> None:
        found = sorted({int(step) for step in steps})
        assert found, f"no onset in {surface}"
        for index, step in enumerate(found):
            onsets[f"{surface} {index}" if index else surface] = step

    def text(surface: str, words: str) -> None:
        add(surface, onsets_named(words, slow_rank))

    add("on_verdict", [r["since_step"] for r in recorded(called) if slow_rank in r["ranks"]])
    text("rank 0's message", printed)
    text("show", show(job_dir).stdout)
    check = show("--check", job_dir)
    assert check.returncode == 3, check.stdout
    text("show --check", check.stdout)
    document = json.loads(show("--json", job_dir).stdout)
    add("show --json", [r["since_step"] for r in stragglers(document) if slow_rank in r["ranks"]])
    text("show --json message", "\n".join(strings_of(document)))
    merged = get_run_lineage(str(job_dir.resolve()))
    assert merged is not None
    lineage = merged.section("user_defined")
    add("merged lineage", [lineage["job/straggler_since_step"]])
    text("merged lineage message", lineage["job/straggler_message"])
    text("TensorBoard text", board_text(job_dir))
    text("report", "\n".join(report_verdicts(job_dir)))
    return onsets


def told_then_settled(
    onsets: dict[str, int], called: Path, settled: int, slow_rank: int = SLOW_RANK
) -> None:
    """Every surface of the finished job gives the ``settled`` onset; ``on_verdict`` and
    rank 0's messages may also give the onset the rank was first named with, later than
    the settled one (the whole run moves an onset earlier only), and were told the
    settled one last."""
    told = ("on_verdict", "rank 0's message")
    assert all(step == settled for name, step in onsets.items() if not name.startswith(told)), (
        onsets
    )
    for surface in told:
        assert min(step for name, step in onsets.items() if name.startswith(surface)) == settled, (
            onsets
        )
    assert [r for r in recorded(called) if slow_rank in r["ranks"]][-1]["since_step"] == settled


def onsets_named(text: str, rank: int) -> list[str]:
    """The "since step N" of each line of ``text`` that names ``rank``."""
    named = re.compile(rf"\brank {rank}\b")
    since = re.compile(r"since step (\d+)")
    return [
        step for line in text.splitlines() if named.search(line) for step in since.findall(line)
    ]


def strings_of(value: Any) -> list[str]:
    """Every string in a JSON document, its keys' values in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [each for item in value for each in strings_of(item)]
    return []


def job_texts(job_dir: Path) -> list[tuple[int, str, str]]:
    """:func:`board_texts` of the job's TensorBoard file."""
    [board] = (job_dir / "job").glob("events.out.tfevents.*")
    return board_texts(board)


def board_text(job_dir: Path) -> str:
    return "\n".join(text for _, _, text in job_texts(job_dir))


def costs_everywhere(job_dir: Path, called: Path, slow_rank: int = SLOW_RANK) -> dict[str, str]:
    """The slow rank's cost ("451 us a step (16% of the step)") as each surface of the
    finished job gives it last: what the job ends with."""
    cost = re.compile(rf"rank {slow_rank} costs (\S+ \S+ a step \(\d+% of the step\))")
    costs: dict[str, str] = {}

    def add(surface: str, text: str) -> None:
        found = cost.findall(text)
        assert found, f"no cost in {surface}: {text}"
        costs[surface] = found[-1]

    last_told = [r for r in recorded(called) if slow_rank in r["ranks"]][-1]
    add("on_verdict", last_told["message"])
    add("show", show(job_dir).stdout)
    add("show --check", show("--check", job_dir).stdout)
    document = json.loads(show("--json", job_dir).stdout)
    [record] = [r for r in stragglers(document) if slow_rank in r["ranks"]]
    add("show --json", record["message"])
    merged = get_run_lineage(str(job_dir.resolve()))
    assert merged is not None
    lineage = merged.section("user_defined")
    add("merged lineage", str(lineage["job/straggler_message"]))
    assert record["cost_seconds_per_step"] == lineage["job/straggler_cost_seconds"]
    assert last_told["cost_seconds_per_step"] == lineage["job/straggler_cost_seconds"]
    # Every cost the texts of the last step give (the last write's, the session's).
    texts = job_texts(job_dir)
    last = max(step for step, _, _ in texts)
    found = sorted({each for step, _, text in texts if step == last for each in cost.findall(text)})
    assert found, f"no cost in the TensorBoard text of step {last}"
    costs.update((f"TensorBoard text {index}", each) for index, each in enumerate(found))
    # The report leads its straggler line with the cost: "451 us a step (16% of the step):
    # straggler rank 2, ...".
    led = re.compile(rf"^(\S+ \S+ a step \(\d+% of the step\)): straggler rank {slow_rank},")
    [costs["report"]] = [
        match[1] for line in report_verdicts(job_dir) if (match := led.match(line))
    ]
    return costs


def test_a_slowdown_that_stops_is_ended_live_and_its_span_is_in_the_lineage(
    mpi: Any, tmp_path: Path
) -> None:
    # rank 1 computes 1.25x over steps 100-499 of 1,600, then as the others
    run = mpi.run(3, *mpi.python(SCENARIO, "ends", tmp_path), cwd=tmp_path, timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.output
    called = [r for r in recorded(tmp_path / "ends.verdicts.jsonl") if SLOW_RANK in r["ranks"]]
    assert called and called[0].get("status") != "ended", called  # named first
    [ended] = [r for r in called if r.get("status") == "ended"]
    assert ended["ranks"] == [SLOW_RANK] and ended["tag"] == "rankscribe/section/compute"
    # Seen to end a few rounds after step 500 (steps count from 1); where its slowness
    # ended, as far as the whole run's evidence written by then shows it.
    assert 500 <= ended["ended_step"] < 1600, ended
    assert ended["since_step"] <= ended["until_step"] <= ended["ended_step"], ended
    assert abs(ended["since_step"] - 101) <= 32, ended  # steps count from 1
    assert f"(ended by step {ended['ended_step']}" in ended["message"]
    # The merged lineage keeps the span, with its end: slow to step 500, to a block of the
    # whole run's evidence at the end (64 steps at 1,600), not when the live view saw it.
    merged = get_run_lineage(str((tmp_path / "ends").resolve()))
    assert merged is not None
    spans = merged.section("user_defined")["job/straggler_live_spans"]
    span = re.fullmatch(
        rf"rank {SLOW_RANK} section/compute steps {ended['since_step']}-(\d+)", spans
    )
    assert span is not None and abs(int(span[1]) - 500) <= 64, spans
    # The state file's ended record says the same.
    state = json.loads((tmp_path / "ends" / LIVE_STATE_NAME).read_text())
    [final] = state["ended_records"]
    assert (final["until_step"], final["ended_step"]) == (int(span[1]), ended["ended_step"])
    # Its cost is its span's, what the first record (from a window slow throughout) said:
    # not the last naming window's, which held steps after the slowness (1.47 ms then,
    # "in 82% of steps", against 2.0 ms).
    assert 0.0015 <= final["cost_seconds_per_step"] <= 0.003, final  # 2 ms more compute
    assert final["cost_seconds_per_step"] >= 0.85 * called[0]["cost_seconds_per_step"], final
    assert final["message"].endswith(
        f"(ended by step {final['ended_step']}, slow until step {final['until_step']})"
    ), final
    # No straggler at the end, and `show` says which one there was while the job ran.
    shown = show(tmp_path / "ends").stdout
    assert "straggler: none; step-time skew" in shown, shown
    assert f"named while the job ran: {spans}\n" in shown, shown


def test_a_short_jobs_verdict_gives_the_onset_the_whole_run_shows_not_its_windows(
    mpi: Any, tmp_path: Path
) -> None:
    # 800 steps of ~2 ms: rank 2 slower from step 301 (steps count from 1); the live view's
    # windows of 200 steps judged within the job all begin after it.
    run = mpi.run(3, *mpi.python(SCENARIO, "short", tmp_path), cwd=tmp_path, timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.output
    job_dir = tmp_path / "short"
    check = show("--check", job_dir)
    assert check.returncode == 3, check.stdout
    assert check.stdout.splitlines()[0].startswith("straggler: rank 2 costs"), check.stdout
    assert len(check.stdout.splitlines()) == 1, check.stdout
    called = tmp_path / "short.verdicts.jsonl"
    onsets = onsets_everywhere(job_dir, run.output, called, 2)
    settled = onsets["merged lineage"]
    assert abs(settled - 301) <= 32, onsets
    # Told as the window first named it, then with the whole run's step: the last of each.
    told_then_settled(onsets, called, settled, 2)
    costs = costs_everywhere(job_dir, called, 2)
    assert len(set(costs.values())) == 1, costs


def test_a_rank_half_as_slow_again_costs_a_third_of_the_step(mpi: Any, tmp_path: Path) -> None:
    run = mpi.run(3, *mpi.python(SCENARIO, "slow", tmp_path), cwd=tmp_path, timeout=JOB_TIMEOUT)
    assert run.returncode == 0
    result = show("--json", tmp_path / "slow")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    [record] = stragglers(document)
    assert record["ranks"] == [SLOW_RANK]
    assert record["tag"] == "rankscribe/section/compute"
    assert 0.003 <= record["cost_seconds_per_step"] <= 0.005  # 12 - 8 ms
    # The merged lineage keeps what the live view named, with its span.
    spans = document["user_defined"]["job/straggler_live_spans"]
    assert f"rank {SLOW_RANK} section/compute steps " in spans, spans
    # 4 ms of a step of about 12.5 ms; on a loaded machine the steps (sleeps, the
    # Allreduce's polls) take longer, so the share is a little smaller.
    assert 0.18 <= record["cost_share"] <= 0.42
    assert record["persistent"] is True
    called = recorded(tmp_path / "slow.verdicts.jsonl")
    assert called and called[0]["kind"] == "straggler" and called[0]["ranks"] == [SLOW_RANK]
    assert show("--check", tmp_path / "slow").returncode == 3


def test_extra_work_every_10th_step_is_named_live_within_seconds(mpi: Any, tmp_path: Path) -> None:
    # rank 1 computes 6 ms more every 10th step from step 300 of 1,500 (steps of ~9 ms):
    # its slow steps leave it the latest by more than half a step, its long leads
    run = mpi.run(3, *mpi.python(SCENARIO, "periodic", tmp_path), cwd=tmp_path, timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.output
    onset = float((tmp_path / "periodic.onset.time").read_text())
    called = recorded(tmp_path / "periodic.verdicts.jsonl")
    assert called, run.output
    first = called[0]
    assert first["ranks"] == [SLOW_RANK] and first["tag"] == "rankscribe/section/compute"
    # Live: the job ran ~11 s past the onset, and the end of training judges after that.
    assert first["called_at"] - onset <= NAMED_WITHIN, (first, onset)
    # The first slow step is 301 (steps count from 1), in the window's block of 8 steps
    # from 296. The first window that names it may begin after the onset, and its onset
    # is then in it: 296-416 in 16 runs of this job here, 464 in a CI run. An onset
    # before that block is where the rank's own steps were slower before the extra work:
    # a loaded CI machine gave 272, "1.04x ... in 11% of steps". The onset is the block
    # from which the rank's excess to the end of the window is clearest (its sum over the
    # square root of the steps), so read back from the files, to the window's last step
    # (the record's steps are those it judged since the onset), its excess is clearer
    # from that onset than from step 296. A clean stretch fails this: 272 and 288 set in
    # place of 296 on this job's files. Never before the whole run's block holding step
    # 301, the end's bound (below).
    since = first["since_step"]
    assert since >= 301 // 64 * 64, first
    if since < 296:
        excess = excess_shares(tmp_path / "periodic", SLOW_RANK, "rankscribe/section/compute")
        after = [excess[step] for step in range(296, since + first["steps"])]
        before = sum(excess[step] for step in range(since, 296))
        clarity = (before + sum(after)) / math.sqrt(len(after) + 296 - since)
        assert clarity >= sum(after) / math.sqrt(len(after)) - 1e-6, (first, before)
    assert 0.03 <= first["cost_share"] <= 0.12, first  # 0.6 ms of a ~9 ms step
    assert not any(r.get("status") == "ended" for r in called), called  # never withdrawn
    result = show("--json", tmp_path / "periodic")
    assert result.returncode == 0, result.stderr
    [record] = stragglers(json.loads(result.stdout))
    assert record["ranks"] == [SLOW_RANK]
    # The onset on_verdict was last told: the one first named, or the earlier step the
    # whole run shows where the naming window began after it (told again; 401 -> 320 in
    # a CI run: the window of steps 401-600 named it).
    last_told = [r for r in called if SLOW_RANK in r["ranks"]][-1]
    assert record["since_step"] == last_told["since_step"]
    assert record["since_step"] <= first["since_step"]
    # The whole run finds the onset to a block of its evidence (1,500 steps in at most 32
    # blocks: 64 steps each, the block holding step 301 from step 256), or a block or two
    # later (the clearest stretch may start a few periods late): 256 and 320 in a CI run's
    # and a local run's ends.
    block = 64
    assert 301 // block * block <= record["since_step"] <= 301 + 2 * block, record


def test_healthy_jobs_beside_a_busy_process_name_nobody(mpi: Any, tmp_path: Path) -> None:
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        run = mpi.run(
            2,
            *mpi.python(SCENARIO, "clean", tmp_path, str(CLEAN_JOBS)),
            cwd=tmp_path,
            timeout=JOB_TIMEOUT + 20 * CLEAN_JOBS,
        )
    finally:
        hog.kill()
        hog.wait(timeout=10)
    assert run.returncode == 0
    names = [f"clean_{index}" for index in range(CLEAN_JOBS)] + ["tiny"]
    for name in names:
        assert (tmp_path / name / ".rankscribe-live.json").exists(), name
        assert recorded(tmp_path / f"{name}.verdicts.jsonl") == [], name
        result = show("--json", tmp_path / name)
        assert result.returncode == 0, result.stderr
        assert stragglers(json.loads(result.stdout)) == [], name
        check = show("--check", tmp_path / name)
        assert check.returncode == 0, (name, check.stdout)


@pytest.mark.parametrize("value", [42, "print", [print]])
def test_on_verdict_must_be_a_callable_or_none(tmp_path: Path, value: Any) -> None:
    with pytest.raises(CollectorTypeError, match=r"'on_verdict'.*callable"):
        SummaryCollector(tmp_path, on_verdict=value)
    SummaryCollector(tmp_path, on_verdict=None).close()
    SummaryCollector(tmp_path, on_verdict=print).close()
