"""One of two jobs racing for the same directories, started by test_claim.py as a process.

    python claim_racer.py <name> <other> <base> <races> <on_exists>

For each race ``i`` both processes wait at a barrier of marker files, then claim
``<base>/race_<i>`` at once with ``on_exists``; each prints one line per race:
``<i> <directory> <job_id>`` (or ``<i> error <type>: <message>``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rankscribe.ranks import claim_job_dir

BARRIER_SECONDS = 30


def wait_for_both(base: Path, race: int, name: str, other: str) -> None:
    (base / f"ready_{race}_{name}").touch()
    deadline = time.monotonic() + BARRIER_SECONDS
    while not (base / f"ready_{race}_{other}").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: the other process never reached race {race}")


def main() -> None:
    name, other, base, races, on_exists = sys.argv[1:6]
    root = Path(base)
    for race in range(int(races)):
        wait_for_both(root, race, name, other)
        try:
            claim = claim_job_dir(root / f"race_{race}", on_exists=on_exists)  # type: ignore[arg-type]
        except Exception as error:  # reported, for the test to show
            print(f"{race} error {type(error).__name__}: {error}", flush=True)
            continue
        print(f"{race} {claim.directory} {claim.job_id}", flush=True)


if __name__ == "__main__":
    main()
