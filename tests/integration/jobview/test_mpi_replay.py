"""A repeated or reordered tree message counts once, under a real ``mpiexec -n 2``.

Two runs of replay_scenarios.py at once: a clean one, and one whose rank 1's
channel delivers its 2nd message twice, its 3rd after its 4th and its 1st again
after its 5th, and whose rank 0 finds three hostile control files in turn
(nested brackets, a 4,000-digit number, binary junk). Every message waits in
rank 0's view until the end of training writes the job files (``job_view_interval``
is longer than the training), so a message merged twice would show there as a count
of 3 ranks at its steps, as it did before each message carried its sender's sequence
number. The faulted job's files count each step's ranks as the clean job's do, and
hold the statistics the offline merge computes from its own rank files. Each control
file is one warning naming its problem, the settings kept and the live view running
on (before, the nested brackets' RecursionError ended the live view's thread).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rankscribe.writer.reader import scalars
from tests._support.launchers import Launches, run_bounded

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "replay_scenarios.py"
SCRIPT_TAG = "script/rank_value"  # replay_scenarios.SCRIPT_TAG
#: Steps of 20 ms: rounds come every 2 s, so rank 1 sends 5 messages well before the end.
STEPS = 700
#: Longer than the training: nothing is appended before the end of training.
INTERVAL = "600"
JOB_TIMEOUT = 180.0

Points = dict[str, dict[int, float]]


def job_points(job_dir: Path) -> Points:
    """``tag -> {step: value}`` of the job's summary files."""
    found: Points = {}
    for path in job_dir.glob("*.job.*_MS"):
        for tag, points in scalars(path).items():
            found.setdefault(tag, {}).update(points)
    return found


def counts(points: Points, *, sampled: bool = True) -> dict[str, dict[int, float]]:
    """The ranks counted at each step of each tag (``<tag>/ranks``).

    ``sampled``: with the machine's samples too (docs/system-metrics.md), taken every few
    seconds at whichever step is under way: the same steps in no two runs.
    """
    return {
        tag: steps
        for tag, steps in points.items()
        if tag.endswith("/ranks") and (sampled or not tag.startswith("rankscribe/system/"))
    }


def test_a_duplicated_replayed_or_reordered_message_changes_nothing(
    mpi: Any, tmp_path: Path
) -> None:
    jobs = {mode: tmp_path / mode for mode in ("clean", "faulted")}
    with Launches(JOB_TIMEOUT) as launches:
        for mode, job in jobs.items():
            mpi.start(launches, 2, *mpi.python(SCENARIO, job, STEPS, INTERVAL, mode), cwd=tmp_path)
        clean, faulted = launches.wait(check=False)
    assert clean.returncode == 0, clean.output
    assert faulted.returncode == 0, faulted.output
    for injected in (
        "rank 1: sends message 2 twice",
        "rank 1: holds message 3 back",
        "rank 1: sends message 3 after message 4",
        "rank 1: sends message 1 again",
    ):
        assert injected in faulted.output, faulted.output
    assert "Traceback" not in faulted.output + clean.output

    live = {mode: job_points(job) for mode, job in jobs.items()}
    steps = set(range(1, STEPS + 1))
    for mode, points in live.items():
        assert set(points[f"{SCRIPT_TAG}/ranks"]) == steps, mode
    # Every tag's count of ranks at every step: the clean run's, 2 wherever both ranks wrote.
    assert counts(live["faulted"], sampled=False) == counts(live["clean"], sampled=False)
    assert len(counts(live["clean"], sampled=False)) >= 4  # the script's, loss, timings
    assert set(live["faulted"][f"{SCRIPT_TAG}/ranks"].values()) == {2}
    # The values too, where they do not depend on the clock.
    for tag in (f"{SCRIPT_TAG}/mean", f"{SCRIPT_TAG}/std", "loss/auto/mean"):
        assert live["faulted"][tag] == live["clean"][tag], tag
    states = {
        mode: json.loads((job / ".rankscribe-live.json").read_text()) for mode, job in jobs.items()
    }
    for key in ("dropped_points", "world_size", "final"):
        assert states["faulted"][key] == states["clean"][key], key
    assert states["faulted"]["dropped_points"] == 0
    assert states["faulted"]["verdicts"]["job/last_step/1"] == STEPS

    # Rank 0 said each repeat (message 2's second copy, message 1's) and took it no more.
    assert faulted.output.count("is ignored: it arrived before") == 2, faulted.output
    assert "message 2 of rank 1 (round" in faulted.output
    assert "message 1 of rank 1 (round" in faulted.output

    # Each hostile control file: one warning naming its problem; the live view goes on.
    assert faulted.output.count("a hostile control file at step") == 3, faulted.output
    ignored = [line for line in faulted.output.splitlines() if "control.json is ignored" in line]
    assert len(ignored) == 3, ignored
    for problem, line in zip(
        ("nested deeper than", "confidence should be", "UTF-8"), ignored, strict=True
    ):
        assert problem in line and "the settings stay as they were" in line, line
    assert "the live view stops" not in faulted.output

    # The offline merge of the faulted job's own rank files gives what its live files hold.
    merged = run_bounded(
        [
            sys.executable,
            "-c",
            "import sys; from rankscribe.lineage.cli import main; sys.exit(main())",
            "merge",
            str(jobs["faulted"]),
        ],
        timeout=60.0,
        check=False,
    )
    assert merged.returncode == 0, merged.output
    offline = job_points(jobs["faulted"])
    assert counts(offline) == counts(live["faulted"])
    for tag, values in live["faulted"].items():
        if tag in offline and not tag.startswith("job/"):
            for step, value in values.items():
                assert np.isclose(value, offline[tag][step], rtol=1e-5, atol=1e-7), (tag, step)
