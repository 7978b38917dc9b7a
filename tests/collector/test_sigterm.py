"""A SIGTERM during training (a scheduler's time limit, a preemption) stops it, writes what
was recorded, and ends the process by SIGTERM: ``rankscribe.ranks.exits.end_cleanly_on_sigterm``,
which the collector sets for its training runs (its own tests: tests/ranks/test_exits.py).

Without it the process died at once, with its kept step times (up to a second of steps)
and its open files unwritten: a real 2-rank ``mpiexec`` digits job sent SIGTERM had its
summaries end about 600 steps before its last checkpoint. The program runs in a child
process here: the signal, and the end by it, are the process's.
"""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from rankscribe.ranks.exits import TERMINATED_MARK_PREFIX
from rankscribe.writer import events
from tests._support.children import start_until_ready

ROOT = Path(__file__).resolve().parents[2]

# Training of quick steps; the step that prints "ready" is no collected step, so what the
# collector kept of it and of the steps before (since the collected step 300) is in memory
# when the signal comes.
TRAINING = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from rankscribe.collector import (
        ArrayDataset, ArrayNetwork, ArrayOptimizer, SummaryCollector, TrainLoop,
    )

    network = ArrayNetwork({"w": np.zeros(4)}, name="Tiny")
    optimizer = ArrayOptimizer(network, learning_rate=0.1)
    data = ArrayDataset(np.arange(4000.0), np.zeros(4000), batch_size=1, path="tiny")
    calls = [0]

    def step(batch):
        calls[0] += 1
        if calls[0] == READY_AT:
            print("ready", flush=True)
        time.sleep(0.001)
        return np.float32(0.5)

    collector = SummaryCollector(
        sys.argv[1], collect_freq=50, collect_specified_data={"collect_landscape": None}
    )
    try:
        TrainLoop(step, network=network, optimizer=optimizer).train(
            100, data, callbacks=[collector]
        )
    finally:
        print("unwound", flush=True)
    """
)
READY_AT = 320


def last_step(directory: Path, tag: str) -> int:
    steps = [
        event.step
        for event in events.load_dir(str(directory))
        for value in event.values
        if value.tag == tag and event.step is not None
    ]
    return max(steps, default=-1)


def test_a_sigterm_during_training_writes_every_step_then_ends_the_process_by_it(
    tmp_path: Path,
) -> None:
    child = start_until_ready(TRAINING.replace("READY_AT", str(READY_AT)), str(tmp_path))
    child.send_signal(signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM, stderr  # ended by the signal, as sent
    assert "unwound" in stdout  # the program's finally block ran
    assert "SIGTERM during training; stopping here and writing what was recorded" in stderr
    assert "Traceback" not in stderr
    # Every step that ended before the signal is on disk (the step it stopped never ended),
    # and the file was closed (made read-only).
    assert last_step(tmp_path, "rankscribe/step_time") >= READY_AT - 1
    [summary] = tmp_path.glob("*_MS")
    assert stat.S_IMODE(summary.stat().st_mode) & 0o222 == 0


def test_sigterm_is_the_default_again_once_training_ended(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import signal, sys
        import numpy as np
        from rankscribe.collector import (
            ArrayDataset, ArrayNetwork, ArrayOptimizer, SummaryCollector, TrainLoop,
        )

        network = ArrayNetwork({"w": np.zeros(4)}, name="Tiny")
        seen = []

        def step(batch):
            seen.append(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
            return np.float32(0.5)

        collector = SummaryCollector(
            sys.argv[1], collect_specified_data={"collect_landscape": None}
        )
        TrainLoop(step, network=network, optimizer=ArrayOptimizer(network)).train(
            1,
            ArrayDataset(np.arange(4.0), np.zeros(4), batch_size=1, path="tiny"),
            callbacks=[collector],
        )
        print(seen, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "[False, False, False, False] True"


# Rank 0 of a job of 2 in one process (its collectives answered by a stand-in); rank 1's
# mark, that it wrote what it held, is made by the test once the job's directory exists.
RANK_ZERO_OF_TWO = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from rankscribe.collector import (
        ArrayDataset, ArrayNetwork, ArrayOptimizer, SummaryCollector, TrainLoop,
    )
    from rankscribe.ranks import RankInfo
    from tests.collector.coordinators import RankZeroAlone

    info = RankInfo(
        rank=0, world_size=2, local_rank=0, local_size=2, host="h", launcher="pmi"
    )
    network = ArrayNetwork({"w": np.zeros(4)}, name="Tiny")
    calls = [0]


    def rank_zero(directory):
        return SummaryCollector(
            directory,
            collect_specified_data={"collect_landscape": None},
            rank_info=info,
            coordinator=RankZeroAlone(info),
            merge_timeout=5,
        )


    collector = rank_zero(sys.argv[1])

    def step(batch):
        calls[0] += 1
        if calls[0] == 50:
            print("ready", flush=True)
            print(collector.summary_dir, flush=True)
        time.sleep(0.001)
        return np.float32(0.5)

    TrainLoop(step, network=network, optimizer=ArrayOptimizer(network)).train(
        100,
        ArrayDataset(np.arange(400.0), np.zeros(400), batch_size=1, path="tiny"),
        callbacks=[collector],
    )
    """
)


def start_rank_zero(script: str, *arguments: str) -> tuple[subprocess.Popen[str], Path]:
    """The child rank 0, ready, and its job's directory (its next line)."""
    child = start_until_ready(script, *arguments, cwd=ROOT)
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def test_a_rank_of_several_marks_its_end_and_goes_once_the_others_marked_theirs(
    tmp_path: Path,
) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / f"{TERMINATED_MARK_PREFIX}0").touch()  # a run's stopped on SIGTERM
    child, job = start_rank_zero(RANK_ZERO_OF_TWO, str(tmp_path / "job"))
    assert job == tmp_path / "job"
    assert not (job / f"{TERMINATED_MARK_PREFIX}0").exists()  # an earlier run's, removed
    end_beside_rank_one(child, job)


def end_beside_rank_one(child: subprocess.Popen[str], job: Path) -> None:
    """Rank 1 of ``job`` has written what it held; the child, sent SIGTERM, marks that it
    did too and ends by the signal without waiting out the bound."""
    (job / f"{TERMINATED_MARK_PREFIX}1").touch()  # rank 1 wrote what it held
    started = time.monotonic()
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM, stderr
    assert (job / f"{TERMINATED_MARK_PREFIX}0").is_file()  # rank 0 said it did too
    assert "did not say the same" not in stderr
    assert time.monotonic() - started < 8.0  # not the whole wait for a mark that came


# Two jobs in one process, each as rank 0 of 2: the first stopped by an exception the
# script catches, the second sent SIGTERM.
FIRST_JOB_FAILS = textwrap.dedent(
    """
    def failing(batch):
        raise RuntimeError("the first job fails")

    first = rank_zero(sys.argv[2])
    try:
        TrainLoop(failing, network=network, optimizer=ArrayOptimizer(network)).train(
            1,
            ArrayDataset(np.arange(4.0), np.zeros(4), batch_size=1, path="tiny"),
            callbacks=[first],
        )
    except RuntimeError:
        pass
    """
)
SECOND_JOB = "TrainLoop(step, network=network, optimizer=ArrayOptimizer(network)).train("
assert RANK_ZERO_OF_TWO.count(SECOND_JOB) == 1
TWO_JOBS = RANK_ZERO_OF_TWO.replace(SECOND_JOB, FIRST_JOB_FAILS + SECOND_JOB)


def test_a_sigterm_ends_only_the_run_it_stopped(tmp_path: Path) -> None:
    child, job = start_rank_zero(TWO_JOBS, str(tmp_path / "second"), str(tmp_path / "first"))
    end_beside_rank_one(child, job)
    # The first job, which an exception stopped, is neither marked nor waited for.
    assert not (tmp_path / "first" / f"{TERMINATED_MARK_PREFIX}0").exists()
