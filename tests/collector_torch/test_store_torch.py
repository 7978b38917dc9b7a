"""rankscribe.ranks' store backend on a real torch.distributed job (gloo, localhost).

Two processes run store_worker.py; each initialises a gloo process group with
an explicit rank (no launcher variable), so the rank, the world size and the
store all come from torch.
"""

from __future__ import annotations

import json
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests._support.launchers import Launches, clean_environment, run_bounded

WORKER = Path(__file__).resolve().parent / "store_worker.py"
#: No process may outlive this, whatever happens inside it (importing torch is slow here).
PROCESS_TIMEOUT = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def run_ranks(tmp_path: Path, scenario: str, timeout: float) -> dict[int, dict[str, Any]]:
    out = tmp_path / "out"
    out.mkdir()
    port = free_port()
    with Launches(PROCESS_TIMEOUT) as launches:
        for rank in range(2):
            launches.start(
                [sys.executable, WORKER, scenario, str(port), str(rank), "2", out, str(timeout)],
                env=clean_environment(),
            )
        for process in launches.wait(check=False):
            assert process.returncode == 0, process.output
    return {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in out.glob("rank_*.json")}


def test_gather_bcast_and_barrier_through_the_process_group_store(tmp_path: Path) -> None:
    records = run_ranks(tmp_path, "collectives", timeout=30)
    assert {(r["launcher"], r["backend"], r["world_size"]) for r in records.values()} == {
        ("torch", "store", 2)
    }
    root = records[0]
    assert root["values"] == {
        "0": {"rank": 0, "tensor": [0, 0, 0]},
        "1": {"rank": 1, "tensor": [0, 1, 2]},
    }
    assert root["missing"] == [] and records[1]["values"] == {}
    assert {r["word"] for r in records.values()} == {"hello from 1"}
    assert root["leftover"] == []  # the store holds none of the collectives' keys
    assert root["namespace"] == records[1]["namespace"] == "rankscribe/job/0"


def test_a_rank_that_skips_the_gather_is_named_within_the_timeout(tmp_path: Path) -> None:
    records = run_ranks(tmp_path, "skip", timeout=2.0)
    root = records[0]
    # That it waited the whole timeout and no longer is pinned with an injected clock
    # (tests/ranks/test_store.py); here, that a real c10d store gives the same answer.
    assert root["values"] == {"0": "object of 0"} and root["missing"] == [1]


def test_rankscribe_ranks_never_imports_torch() -> None:
    code = textwrap.dedent("""
        import sys
        import rankscribe.ranks as ranks
        info = ranks.detect()
        coordinator = ranks.create_coordinator(info)
        print(info.launcher, coordinator.backend, "torch" in sys.modules)
    """)
    result = run_bounded(
        [sys.executable, "-c", code],
        timeout=PROCESS_TIMEOUT,
        env=clean_environment(),
        check=False,
        stderr_apart=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["single", "single", "False"]
