#!/usr/bin/env python3
"""The main job: three short data-parallel training runs under mpiexec, then a query over them.

    tox -e demo                     # installs everything, then runs this
    python tools/demo.py [--ranks 2] [--base runs]

Each job trains examples/digits/train.py on 2 ranks (different learning rates
and optimizers) into ``<base>/<job>/`` (``rank_0/``, ``rank_1/`` and the
merged lineage), and the runs are then listed with
``rankscribe-lineage query <base> --sort "metric/accuracy desc"`` (the best job
first), which ends with one line per job with its straggler and divergence
verdicts (read from the merged lineage: see docs/job-view.md); last,
``rankscribe-lineage report`` draws them all into ``<base>/report.html`` (see
docs/report.md). Each command is printed as it is run, so the same line typed
by hand prints the same.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "digits" / "train.py"
JOBS = [
    ("sgd-lr0.1", ["--optimizer", "sgd", "--lr", "0.1"]),
    ("momentum-lr0.05", ["--optimizer", "momentum", "--lr", "0.05"]),
    ("momentum-lr0.01", ["--optimizer", "momentum", "--lr", "0.01"]),
]
# Generous: a job takes a few seconds on 2 cores.
JOB_TIMEOUT = 300


def _tool(name: str) -> str:
    """A command installed next to this interpreter (the tox env's), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"demo: '{name}' was not found; run this through 'tox -e demo'")
    return found


def _run(
    shown: list[str],
    command: list[str],
    timeout: float | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """Print ``shown`` (the command as a user types it), then run ``command`` (the same)."""
    print(f"\n$ {shlex.join(shown)}", flush=True)
    return subprocess.run(command, check=False, timeout=timeout, env=env).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--base", default="runs", help="where the jobs' directories go")
    args = parser.parse_args()
    mpiexec = _tool("mpiexec")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    for job, options in JOBS:
        # --tensorboard: so `tensorboard --logdir runs` works on the result too
        train = [
            str(TRAIN.relative_to(ROOT)),
            "--summary-dir",
            str(Path(args.base) / job),
            *options,
            "--tensorboard",
        ]
        shown = ["mpiexec", "-n", str(args.ranks), "python", *train]
        command = [mpiexec, "-n", str(args.ranks), sys.executable, str(ROOT / train[0]), *train[1:]]
        code = _run(shown, command, timeout=JOB_TIMEOUT, env=env)
        if code:
            return code
    # The query prints its table, then one verdict line per job in the table's order.
    query = ["query", args.base, "--sort", "metric/accuracy desc"]
    code = _run(["rankscribe-lineage", *query], [_tool("rankscribe-lineage"), *query])
    report = ["report", args.base, "-o", str(Path(args.base) / "report.html")]
    drawn = _run(["rankscribe-lineage", *report], [_tool("rankscribe-lineage"), *report])
    print(
        f"open {(Path(args.base) / 'report.html').resolve()} in a browser: "
        "the runs, their curves, the job verdicts"
    )
    return code or drawn


if __name__ == "__main__":
    sys.exit(main())
