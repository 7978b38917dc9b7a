"""A straggler verdict's evidence: the named rank's system readings against the other ranks'.

Through the public doors: ``write_job_view`` on ranks' series, ``system_evidence``,
``verdict_lines``, and ``rankscribe-lineage merge`` / ``show`` on rank dirs written
with ``SummaryRecord``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.jobview import RankSeries, judge_timings, verdict_lines, write_job_view
from rankscribe.jobview.feed import STEP_TIME_TAG, SYSTEM_TAG_PREFIX, system_evidence
from rankscribe.jobview.protocol import SYSTEM_TAGS, is_timing_tag, system_evidence_records
from rankscribe.lineage.cli import main
from rankscribe.writer import SummaryRecord
from tests._support.needs import needs

STEPS, SLOW = 40, 2
CLOCK, THERMAL = SYSTEM_TAG_PREFIX + "gpu_sm_clock_mhz", SYSTEM_TAG_PREFIX + "gpu_throttle_thermal"
RSS, CPU = SYSTEM_TAG_PREFIX + "rss_bytes", SYSTEM_TAG_PREFIX + "cpu_percent"
CORE = SYSTEM_TAG_PREFIX + "core_percent"


def scalars(rank: int, *, slow: bool, hot: bool) -> dict[str, list[tuple[int, float]]]:
    rng = np.random.default_rng(rank)
    steps = range(1, STEPS + 1)
    samples = range(5, STEPS + 1, 5)
    return {
        STEP_TIME_TAG: [
            (s, 0.01 * (2.0 if slow else 1.0) * (1 + 0.05 * rng.random())) for s in steps
        ],
        CLOCK: [(s, 1410.0 if hot else 1980.0 + rank) for s in samples],
        # Thermal throttling in 6 of a hot rank's 8 samples.
        THERMAL: [(s, 1.0 if hot and index < 6 else 0.0) for index, s in enumerate(samples)],
        CPU: [(s, 95.0 + rank) for s in samples],  # alike on every rank: no evidence
        RSS: [(s, 9e9 if rank == 0 else 2e9) for s in samples],  # differs by role: never cited
    }


def series(ranks: int = 4) -> dict[int, RankSeries]:
    return {
        rank: RankSeries(rank, scalars(rank, slow=rank == SLOW, hot=rank == SLOW))
        for rank in range(ranks)
    }


def test_the_straggler_verdict_cites_its_clock_and_throttling(tmp_path: Path) -> None:
    verdicts = write_job_view(tmp_path, series(), world_size=4).verdicts
    assert verdicts["job/straggler_rank"] == SLOW
    assert verdicts[f"job/straggler_evidence/{SLOW}"] == (
        "thermal throttling in 75 % of the samples (others: 0 %); "
        "SM clock 1.41 GHz against a median of 1.98 GHz"
    )
    assert verdicts["job/straggler_evidence"] == verdicts[f"job/straggler_evidence/{SLOW}"]
    lines = verdict_lines(verdicts)
    straggler = next(index for index, line in enumerate(lines) if line.startswith("straggler:"))
    assert lines[straggler + 1] == (
        f"evidence: rank {SLOW}: " + str(verdicts[f"job/straggler_evidence/{SLOW}"])
    )


def test_no_straggler_no_evidence(tmp_path: Path) -> None:
    clean = {rank: RankSeries(rank, scalars(rank, slow=False, hot=rank == 1)) for rank in range(3)}
    verdicts = write_job_view(tmp_path, clean, world_size=3).verdicts
    assert verdicts["job/straggler_rank"] == -1
    assert not any(key.startswith("job/straggler_evidence") for key in verdicts)


def test_a_reading_no_other_rank_has_is_no_evidence() -> None:
    ranks = series(2)
    del ranks[0].scalars[CLOCK], ranks[0].scalars[THERMAL]
    verdicts = {"job/straggler_ranks": "1", "job/straggler_rank": 1}
    assert system_evidence(verdicts, ranks) == {}


def _cpu_and_core(readings: dict[int, tuple[float, float]]) -> dict[int, RankSeries]:
    """Ranks whose samples read ``(its CPU %, its core's busy %)`` throughout."""
    samples = range(5, STEPS + 1, 5)
    return {
        rank: RankSeries(
            rank, {CPU: [(s, cpu) for s in samples], CORE: [(s, core) for s in samples]}
        )
        for rank, (cpu, core) in readings.items()
    }


@pytest.mark.parametrize(
    ("readings", "evidence"),
    [
        # Rank 1's core is busy with another process; rank 0's is not.
        (
            {0: (40.0, 45.0), 1: (16.0, 100.0)},
            "CPU 16 % against a median of 40 %, with its core 100 % busy "
            "(another process on its core)",
        ),
        # Rank 0 waits at the collective in a busy loop of its own: its core is busy with
        # it, rank 1's with something else.
        (
            {0: (95.0, 100.0), 1: (16.0, 100.0)},
            "CPU 16 % against a median of 95 %, with its core 100 % busy "
            "(another process on its core)",
        ),
        # Every core busy with other work (more busy loops than cores): rank 1 runs less,
        # and its core is no busier with others than the other ranks' are.
        ({0: (12.0, 100.0), 1: (9.0, 100.0), 2: (12.0, 100.0)}, "CPU 9 % against a median of 12 %"),
    ],
)
def test_a_core_is_said_to_be_shared_when_others_take_more_of_it_than_of_the_other_ranks(
    readings: dict[int, tuple[float, float]], evidence: str
) -> None:
    verdicts = {"job/straggler_ranks": "1", "job/straggler_rank": 1}
    assert system_evidence(verdicts, _cpu_and_core(readings))["job/straggler_evidence/1"] == (
        evidence
    )


def test_every_tag_is_under_the_prefix_and_none_is_a_timing() -> None:
    assert all(tag.startswith(SYSTEM_TAG_PREFIX) for tag in SYSTEM_TAGS)
    assert not any(is_timing_tag(tag) for tag in SYSTEM_TAGS)
    assert {CLOCK, THERMAL, RSS, CPU} <= set(SYSTEM_TAGS)


def write_rank(directory: Path, rank: int, points: dict[str, list[tuple[int, float]]]) -> None:
    by_step: dict[int, list[tuple[str, float]]] = {}
    for tag, pairs in points.items():
        for step, value in pairs:
            by_step.setdefault(step, []).append((tag, value))
    with SummaryRecord(directory, rank=rank) as record:
        for step in sorted(by_step):
            for tag, value in by_step[step]:
                record.add_value("scalar", tag, value)
            record.record(step)


def test_merge_and_show_print_the_evidence_from_the_rank_dirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job"
    for rank, one in series(3).items():
        write_rank(job / f"rank_{rank}", rank, one.scalars)
    assert main(["merge", str(job)]) == 0
    capsys.readouterr()
    assert main(["show", str(job)]) == 0
    shown = capsys.readouterr().out
    assert "evidence: rank 2: thermal throttling in 75 % of the samples (others: 0 %)" in shown
    assert main(["show", str(job), "--json"]) == 0
    keys: dict[str, Any] = json.loads(capsys.readouterr().out)["user_defined"]
    assert "SM clock 1.41 GHz against a median of 1.98 GHz" in keys["job/straggler_evidence/2"]


def test_straggler_records_get_their_ranks_evidence() -> None:
    rng = np.random.default_rng(0)
    forward = 0.01 * (1 + 0.02 * rng.random((4, 200)))
    forward[SLOW] *= 1.6
    records = judge_timings({"forward": forward}, step_time=np.full((4, 200), 0.03))
    assert [record["ranks"] for record in records] == [[SLOW]]
    readings = {
        rank: {
            tag: (np.asarray([s for s, _ in points]), np.asarray([v for _, v in points]))
            for tag, points in one.scalars.items()
            if tag.startswith(SYSTEM_TAG_PREFIX)
        }
        for rank, one in series().items()
    }
    [record] = system_evidence_records(records, readings)
    assert [(item["rank"], item["tag"]) for item in record["evidence"]] == [
        (SLOW, THERMAL),
        (SLOW, CLOCK),
    ]
    assert record["evidence"][1]["value"] == 1410.0
    assert record["evidence"][1]["median"] == pytest.approx(1981.0)
    assert "evidence" not in records[0]  # the records given stay as they were


@needs("plotly", envs="lineage")  # the report draws with it
def test_the_report_prints_the_evidence(tmp_path: Path) -> None:
    job = tmp_path / "job"
    for rank, one in series(3).items():
        write_rank(job / f"rank_{rank}", rank, one.scalars)
    assert main(["merge", str(job)]) == 0
    out = tmp_path / "report.html"
    assert main(["report", str(job), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "evidence: rank 2: thermal throttling in 75 % of the samples (others: 0 %)" in page


def test_show_summarises_each_ranks_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job"
    for rank, one in series(3).items():
        write_rank(job / f"rank_{rank}", rank, one.scalars)
    assert main(["merge", str(job)]) == 0
    capsys.readouterr()
    assert main(["show", str(job)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("machine (the median of each rank's samples, docs/system-metrics.md):")
    assert lines[start + 1 : start + 4] == [
        "  rank 0: 8 samples; CPU 95 %; memory (RSS) 9.0 GB",
        "  rank 1: 8 samples; CPU 96 %; memory (RSS) 2.0 GB",
        "  rank 2: 8 samples; CPU 97 %; memory (RSS) 2.0 GB",
    ]
    assert main(["show", str(job), "--json"]) == 0
    machine = json.loads(capsys.readouterr().out)["machine"]
    assert machine[2] == {"rank": 2, "samples": 8, "cpu_percent": 97.0, "rss_bytes": 2e9}


def test_show_summarises_a_single_runs_machine_with_its_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lw: Any
) -> None:
    run = tmp_path / "run"
    gpu = SYSTEM_TAG_PREFIX + "gpu_utilization"
    write_rank(run, 0, {CPU: [(1, 50.0), (2, 70.0), (3, 60.0)], gpu: [(1, 80.0), (3, 90.0)]})
    lw.write(run, [lw.train(optimizer="SGD", network="Net", loss=0.5, epoch=1)])
    assert main(["show", str(run)]) == 0
    shown = capsys.readouterr().out
    assert "  rank 0: 3 samples; CPU 60 %; GPU utilisation 85 %\n" in shown
