"""Real launched jobs of the framework integrations (the ``integrations`` tox env).

Each test launches a 2-process job the way the framework's users do
(Lightning's own DDP launcher, ``torchrun``), then reads what it wrote with the
project's own reader and lineage API.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: A 2-process job of a few steps takes 10-30 s on 2 shared cores; the rest is margin.
JOB_TIMEOUT = 300


def run_job(arguments: Sequence[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a job to its end; fail with its output when it fails or overruns."""
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    try:
        process = subprocess.run(
            [str(argument) for argument in arguments],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=JOB_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        output = [
            part.decode(errors="replace") if isinstance(part, bytes) else str(part or "")
            for part in (error.stdout, error.stderr)
        ]
        pytest.fail(f"the job did not end in {JOB_TIMEOUT} s:\n" + "\n".join(output))
    if process.returncode != 0:
        pytest.fail(f"the job exited {process.returncode}:\n{process.stdout}\n{process.stderr}")
    return process


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


def snapshot(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with a digest of its bytes."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }
