"""Jobs whose verdicts people act on, run by ``mpiexec -n N python -m mpi4py``.

    python -m mpi4py verdict_scenarios.py <scenario> <out_dir> [<jobs>]

Every step computes (a sleep that stands for the work, marked with
``collector.section("compute")``) and then averages a gradient with
``comm.Allreduce``: synchronous data parallel, every rank's step time the
slowest rank's. The collectors keep the default settings (``job_view_interval``
60 s, the 2 s timing rounds) and get ``on_verdict``, which appends each
record it is called with to ``<out>/<job>.verdicts.jsonl`` (rank 0 only). The
pytest side is test_mpi_verdicts.py:

- ``onset`` (3 ranks): rank 1 computes ONSET_FACTOR times longer from step
  ONSET_STEP of ONSET_STEPS on, and writes the wall time it got there to
  ``<out>/onset.time``;
- ``ends`` (3 ranks): rank 1 computes ONSET_FACTOR times longer from step ENDS_FROM
  to ENDS_UNTIL of ENDS_STEPS, then as the others;
- ``slow`` (3 ranks): rank 1 computes SLOW_MS instead of BASE_MS a step;
- ``periodic`` (3 ranks): rank 1 computes PERIODIC_EXTRA_MS more every PERIODIC_EVERY-th
  step from step PERIODIC_FROM of PERIODIC_STEPS on (extra work on one rank, a few % of
  the job's time), and writes the wall time it got there to ``<out>/periodic.onset.time``;
- ``short`` (3 ranks): SHORT_STEPS steps of SHORT_MS, a job of a few seconds that the
  live view judges once or twice; rank 2 computes ONSET_FACTOR times longer from step
  SHORT_FROM on, so the last window holds its slowness whole;
- ``clean`` (2 ranks): ``<jobs>`` jobs one after the other with the same work on
  every rank (``clean_<i>``), then ``tiny``, whose rank 1 computes TINY_MS more
  a step (1 % of the step).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from rankscribe.collector import SummaryCollector, TrainSession
from rankscribe.ranks import detect

BASE_MS = 8.0
SLOW_MS = 12.0
TINY_MS = 0.1
ONSET_FACTOR = 1.25
ONSET_STEP, ONSET_STEPS = 500, 1500
#: ``ends``: rank 1 computes ONSET_FACTOR times longer over [ENDS_FROM, ENDS_UNTIL), then
#: as the others for long enough that the live view ends its verdict (the window's 200
#: steps, then 3 judgements of 2 s without it).
ENDS_FROM, ENDS_UNTIL, ENDS_STEPS = 100, 500, 1600
SLOW_STEPS = 600
PERIODIC_EXTRA_MS, PERIODIC_EVERY = 6.0, 10
PERIODIC_FROM, PERIODIC_STEPS = 300, 1500
CLEAN_STEPS = 400
SHORT_MS, SHORT_FROM, SHORT_STEPS = 2.0, 300, 800


def _on_verdict(path: Path) -> Any:
    def record(verdict: dict[str, Any]) -> None:
        # With the wall time it was called at (``called_at``): the pytest side tells a
        # verdict the live view made from one made at the end of training.
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({**verdict, "called_at": time.time()}) + "\n")

    return record


def job(out: Path, name: str, steps: int, compute_ms: Any) -> None:
    """One job of ``steps`` steps; ``compute_ms(rank, step)``: the rank's work at the step."""
    info = detect()
    comm = MPI.COMM_WORLD
    collector = SummaryCollector(
        out / name,
        collect_freq=50,
        collect_specified_data={"collect_landscape": None},
        merge_timeout=60.0,
        on_verdict=_on_verdict(out / f"{name}.verdicts.jsonl"),
        formats=("mindinsight", "tensorboard"),  # the verdicts' TensorBoard text too
    )
    gradient = np.ones(64, dtype=np.float32)
    total = np.empty_like(gradient)
    with TrainSession([collector], epochs=1) as running:
        for _ in running.epochs():
            for step in range(steps):
                with collector.section("compute"):
                    time.sleep(compute_ms(info.rank, step) / 1e3)
                comm.Allreduce(gradient, total)
                running.step(None, float(total[0]))
    collector.close()


def _mark_onset(path: Path) -> None:
    """The wall time now, in ``path`` (written whole: the pytest side may poll it)."""
    marker = path.with_name(path.name + ".tmp")
    marker.write_text(repr(time.time()))
    os.replace(marker, path)


def scenario_onset(out: Path) -> None:
    def compute_ms(rank: int, step: int) -> float:
        if rank == 1 and step == ONSET_STEP:
            _mark_onset(out / "onset.time")
        slow = rank == 1 and step >= ONSET_STEP
        return BASE_MS * (ONSET_FACTOR if slow else 1.0)

    job(out, "onset", ONSET_STEPS, compute_ms)


def scenario_ends(out: Path) -> None:
    def compute_ms(rank: int, step: int) -> float:
        slow = rank == 1 and ENDS_FROM <= step < ENDS_UNTIL
        return BASE_MS * (ONSET_FACTOR if slow else 1.0)

    job(out, "ends", ENDS_STEPS, compute_ms)


def scenario_slow(out: Path) -> None:
    job(out, "slow", SLOW_STEPS, lambda rank, step: SLOW_MS if rank == 1 else BASE_MS)


def scenario_periodic(out: Path) -> None:
    def compute_ms(rank: int, step: int) -> float:
        if rank == 1 and step == PERIODIC_FROM:
            _mark_onset(out / "periodic.onset.time")
        extra = rank == 1 and step >= PERIODIC_FROM and step % PERIODIC_EVERY == 0
        return BASE_MS + (PERIODIC_EXTRA_MS if extra else 0.0)

    job(out, "periodic", PERIODIC_STEPS, compute_ms)


def scenario_short(out: Path) -> None:
    def compute_ms(rank: int, step: int) -> float:
        return SHORT_MS * (ONSET_FACTOR if rank == 2 and step >= SHORT_FROM else 1.0)

    job(out, "short", SHORT_STEPS, compute_ms)


def scenario_clean(out: Path, jobs: int) -> None:
    for index in range(jobs):
        job(out, f"clean_{index}", CLEAN_STEPS, lambda rank, step: BASE_MS)
    job(out, "tiny", CLEAN_STEPS, lambda rank, step: BASE_MS + (TINY_MS if rank == 1 else 0.0))


def main() -> None:
    scenario, out = sys.argv[1], Path(sys.argv[2])
    if scenario == "clean":
        scenario_clean(out, int(sys.argv[3]))
    else:
        globals()[f"scenario_{scenario}"](out)
    print(f"rank {detect().rank}: {scenario} done", flush=True)


if __name__ == "__main__":
    main()
