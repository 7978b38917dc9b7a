"""Real launched jobs of the framework integrations (the ``integrations`` tox env).

Each test launches a 2-process job the way the framework's users do
(Lightning's own DDP launcher, ``torchrun``), then reads what it wrote with the
project's own reader and lineage API.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tests._support.launchers import Finished, clean_environment, run_bounded

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: A 2-process job of a few steps takes 10-30 s on 2 shared cores; the rest is margin.
JOB_TIMEOUT = 300


def run_job(arguments: Sequence[str | Path], cwd: Path) -> Finished:
    """Run a job to its end; fail with its output when it fails or overruns."""
    env = clean_environment(
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return run_bounded(arguments, timeout=JOB_TIMEOUT, cwd=cwd, env=env)


def torchrun(script: Path, *arguments: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(script),
        *arguments,
    ]
