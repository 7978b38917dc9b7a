#!/usr/bin/env python3
"""The main job: three short data-parallel training runs under mpiexec, then a query over them.

    tox -e demo                     # installs everything, then runs this
    python tools/demo.py [--ranks 2] [--base runs]

Each job trains examples/digits/train.py on 2 ranks (different learning rates
and optimizers) into ``<base>/<job>/`` (``rank_0/``, ``rank_1/`` and the
merged lineage), and the runs are then listed with
``rankscribe-lineage query <base> --sort "metric/accuracy desc"`` (the best job
first), followed by one
line per job with its straggler and divergence verdicts (read from the merged
lineage: see docs/job-view.md); last, ``rankscribe-lineage report`` draws
them all into ``<base>/report.html`` (see docs/report.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rankscribe.lineage import filter_runs
from rankscribe.lineage.jobview import verdict_lines

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "digits" / "train.py"
JOBS = [
    ("sgd-lr0.1", ["--optimizer", "sgd", "--lr", "0.1"]),
    ("momentum-lr0.05", ["--optimizer", "momentum", "--lr", "0.05"]),
    ("momentum-lr0.01", ["--optimizer", "momentum", "--lr", "0.01"]),
]
# Generous: a job takes a few seconds on 2 cores.
JOB_TIMEOUT = 300
COLUMNS = [
    "optimizer",
    "learning_rate",
    "epoch",
    "batch_size",
    "device_num",
    "loss",
    "train_dataset_count",
    "metric/accuracy",
]


def _tool(name: str) -> str:
    """A command installed next to this interpreter (the tox env's), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"demo: '{name}' was not found; run this through 'tox -e demo'")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--base", default="runs", help="where the jobs' directories go")
    args = parser.parse_args()
    mpiexec = _tool("mpiexec")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    for job, options in JOBS:
        # --tensorboard: so `tensorboard --logdir runs` works on the result too
        command = [
            mpiexec,
            "-n",
            str(args.ranks),
            sys.executable,
            str(TRAIN),
            "--summary-dir",
            str(Path(args.base) / job),
            *options,
            "--tensorboard",
        ]
        print(
            f"\n$ mpiexec -n {args.ranks} python {TRAIN.relative_to(ROOT)} "
            f"--summary-dir {Path(args.base) / job} {' '.join(options)}",
            flush=True,
        )
        subprocess.run(command, check=True, timeout=JOB_TIMEOUT, env=env)
    query = [
        _tool("rankscribe-lineage"),
        "query",
        args.base,
        "--sort",
        "metric/accuracy desc",
        "--columns",
        ",".join(COLUMNS),
    ]
    print(f"\n$ rankscribe-lineage query {args.base} --sort 'metric/accuracy desc'", flush=True)
    code = subprocess.run(query, check=False).returncode
    print(flush=True)
    _print_verdicts(args.base)
    report = Path(args.base) / "report.html"
    print(f"\n$ rankscribe-lineage report {args.base} -o {report}", flush=True)
    drawn = subprocess.run(
        [_tool("rankscribe-lineage"), "report", args.base, "-o", str(report)], check=False
    ).returncode
    print(f"open {report.resolve()} in a browser: the runs, their curves, the job verdicts")
    return code or drawn


def _print_verdicts(base: str) -> None:
    """One line per job, in the table's order: its straggler and divergence verdicts."""
    root = os.path.realpath(base)
    result = filter_runs(root, order_by=["metric/accuracy"], lineage_type="model")
    for item in result["object"]:
        name = os.path.relpath(item["summary_dir"], root)
        lines = verdict_lines(item["model_lineage"]["user_defined"])
        wanted = [line for line in lines if line.startswith(("straggler:", "divergence:"))]
        print(f"{name}: {'; '.join(wanted) if wanted else 'no job verdicts recorded'}")


if __name__ == "__main__":
    sys.exit(main())
