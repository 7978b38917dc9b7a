#!/usr/bin/env python3
"""The command line as a user runs it, beside the API, a bare import and one stat per run.

    python tools/bench/cli.py [--runs 1000 10000 100000] [--repeat 5] [--keep DIR]

For each size it makes a base dir of that many finished runs (the runs of
``tools/bench/lineage.py``; with ``--keep DIR`` they are made once under DIR
and reused by later invocations), then times, each a median of --repeat,
alternating the commands so that the machine's load moves them alike:

- ``rankscribe-lineage query BASE`` (the default table of every run), and
  with ``--where "loss < 0.5" --sort "metric/acc desc"``, each a new process
  started through the console script in this interpreter's ``bin`` (what a
  user types), output to /dev/null;
- ``rankscribe-lineage show RUN`` of one run;
- the API in a new process (``python -c "...filter_runs(BASE)"``) and in
  this process (warm: the index already read);
- ``python -c "import rankscribe.lineage"``: what any command pays first;
- one ``os.stat`` per run directory, in this process: the least a query that
  notices changed runs must do.

"cold" is one ``query`` with no index (it parses every run and writes the
index; ``--warm-only`` skips it and keeps the index as it is), with the run
files in the page cache (every file is read once first, as after writing
them): what the index costs, not what the disk does. "cold, first touch" is
the same query before that read, whatever the cache holds then; on this
machine's disk, 100,000 run dirs evicted from the cache take ~70 s to list,
so that column measures the disk and the cache as much as the code. With
``--formats`` it also times reading the same index stored other ways, in
this process: the index as it is (version 5: a JSON document and ``.npy``
columns in one ``.npz``, its CRCs and columns checked, ``load_index``; SQLite
as the query engine and numpy's own ``.npz`` reader are compared with it by
``tools/bench/index_containers.py``), the same columns as one JSON document
(version 3, decoded only), one JSON object per run (version 2, decoded only),
and SQLite rows holding each run's values as a JSON text (fetched and decoded).

Ratios: query / API in a new process, query / (import + stat), and query -
import (the command's own work). Targets (issue 21): warm query
from a new process <= 0.6 s at 10,000 runs and <= 1.5 s at 100,000 (with
and without --where/--sort); cold <= 15 s at 100,000.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# The repository root, so that the sibling bench resolves as tools.bench.lineage both when
# run as a script and under mypy (which reads tools/ from the root).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rankscribe.lineage import filter_runs
from rankscribe.lineage.index._cache import INDEX_NAME, forget_scans
from rankscribe.lineage.index._index_encoding import decode_document
from rankscribe.lineage.index._index_file import load_index
from tools.bench import lineage as lineage_bench

WHERE = "loss < 0.5"
SORT = "metric/acc desc"


def console_script() -> str:
    """``rankscribe-lineage`` of this interpreter's environment (a venv's bin)."""
    beside = Path(sys.executable).parent / "rankscribe-lineage"
    if beside.exists():
        return str(beside)
    found = shutil.which("rankscribe-lineage")
    if found is None:
        raise SystemExit("rankscribe-lineage is not installed in this environment")
    return found


# On a shared machine the wall time of a process is mostly its wait for a core: each
# measurement is (wall seconds, CPU seconds: user + system, of the process or this one).
Seconds = tuple[float, float]


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def run_process(argv: list[str]) -> Seconds:
    started, cpu = time.perf_counter(), _cpu(resource.RUSAGE_CHILDREN)
    subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True, timeout=3600
    )
    return time.perf_counter() - started, _cpu(resource.RUSAGE_CHILDREN) - cpu


def in_this_process(function: Callable[[], object]) -> Seconds:
    started, cpu = time.perf_counter(), _cpu(resource.RUSAGE_SELF)
    function()
    return time.perf_counter() - started, _cpu(resource.RUSAGE_SELF) - cpu


def stat_each(paths: list[str]) -> Seconds:
    def stats() -> None:
        for path in paths:
            os.stat(path)

    return in_this_process(stats)


def read_every_file(root: Path) -> None:
    """Read every file under ``root`` once (into the page cache)."""
    for directory, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(directory, name), "rb") as stream:
                while stream.read(1 << 20):
                    pass


def base_of(count: int, keep: Path | None) -> tuple[Path, bool]:
    """The base dir of ``count`` runs (made now unless kept), and whether to delete it."""
    if keep is not None:
        root = keep / f"cli-bench-{count}"
        complete = root / ".cli-bench-complete"  # not a run: no summary file name
        if not complete.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            lineage_bench.generate(root, count)
            complete.touch()
        return root, False
    root = Path(tempfile.mkdtemp(prefix=f"cli-bench-{count}-"))
    lineage_bench.generate(root, count)
    return root, True


def measure(count: int, repeat: int, keep: Path | None, cold: bool = True) -> dict[str, Seconds]:
    """Each command's median times over ``root``; without ``cold`` the index is kept as it is."""
    root, remove = base_of(count, keep)
    script = console_script()
    try:
        paths = [entry.path for entry in os.scandir(root) if entry.is_dir()]
        run = sorted(paths)[0]
        cold_time: Seconds = (float("nan"), float("nan"))
        first_touch: Seconds = (float("nan"), float("nan"))
        if cold:
            (root / INDEX_NAME).unlink(missing_ok=True)
            first_touch = run_process([script, "query", str(root)])
            read_every_file(root)
            (root / INDEX_NAME).unlink(missing_ok=True)
            cold_time = run_process([script, "query", str(root)])
        else:  # warm only: the index is made current (written now if absent or stale)
            run_process([script, "query", str(root)])
        api_code = (
            "import sys; from rankscribe.lineage import filter_runs; filter_runs(sys.argv[1])"
        )
        commands: dict[str, Callable[[], Seconds]] = {
            "query": lambda: run_process([script, "query", str(root)]),
            "query_where": lambda: run_process(
                [script, "query", str(root), "--where", WHERE, "--sort", SORT]
            ),
            "show": lambda: run_process([script, "show", run]),
            "api_process": lambda: run_process([sys.executable, "-c", api_code, str(root)]),
            "import": lambda: run_process([sys.executable, "-c", "import rankscribe.lineage"]),
            "stat": lambda: stat_each(paths),
            "api_warm": lambda: in_this_process(lambda: filter_runs(root)),
        }
        forget_scans()
        filter_runs(root)  # this process has read the index: api_warm is warm
        times: dict[str, list[Seconds]] = {name: [] for name in commands}
        for _ in range(repeat):
            for name, command in commands.items():
                times[name].append(command())
        row = {
            name: (
                statistics.median(wall for wall, _ in values),
                statistics.median(cpu for _, cpu in values),
            )
            for name, values in times.items()
        }
        row["cold"] = cold_time
        row["first_touch"] = first_touch
        return row
    finally:
        if remove:
            shutil.rmtree(root, ignore_errors=True)


def format_times(root: Path) -> dict[str, Seconds]:
    """Reading the index of ``root`` as stored now, and as two other formats would store it."""
    filter_runs(root)  # the index is there and current
    loaded = load_index(str(root))
    assert loaded is not None
    rows = {
        entry.path: {
            "files": entry.files,
            "dir_mtime": entry.dir_mtime,
            "final": entry.final,
            "update_time": entry.update_time,
            "create_time": entry.create_time,
            "lineage": entry.summary,
        }
        for entry in loaded.entries
    }
    scratch = Path(tempfile.mkdtemp(prefix="index-formats-"))
    try:
        columnar = scratch / "columns.json"
        columnar.write_text(json.dumps(decode_document((root / INDEX_NAME).read_bytes())))
        per_run = scratch / "rows.json"
        per_run.write_text(json.dumps({"runs": rows, "graphs": loaded.graphs}))
        database = scratch / "rows.sqlite"
        with sqlite3.connect(database) as connection:
            connection.execute(
                "create table runs (path text primary key, dir_mtime integer,"
                " final integer, files text, lineage text)"
            )
            connection.executemany(
                "insert into runs values (?, ?, ?, ?, ?)",
                [
                    (
                        path,
                        row["dir_mtime"],
                        row["final"],
                        json.dumps(row["files"]),
                        json.dumps(row["lineage"]),
                    )
                    for path, row in rows.items()
                ],
            )
        connection.close()

        def from_sqlite() -> None:
            with sqlite3.connect(f"file:{database}?mode=ro&immutable=1", uri=True) as reader:
                fetched = reader.execute("select * from runs").fetchall()
            reader.close()
            for _, _, _, files, lineage in fetched:
                json.loads(files)
                json.loads(lineage)

        return {
            ".npz of a JSON document and .npy columns, CRCs and columns checked (ours)": (
                in_this_process(lambda: load_index(str(root)))
            ),
            "columnar JSON (version 3), decoded only": in_this_process(
                lambda: json.loads(columnar.read_bytes())
            ),
            "one JSON object per run (previous), decoded": in_this_process(
                lambda: json.loads(per_run.read_bytes())
            ),
            "SQLite rows with JSON texts, fetched and decoded": in_this_process(from_sqlite),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="make the base dirs under DIR and reuse them")
    parser.add_argument(
        "--formats", action="store_true", help="also time reading the index in other formats"
    )
    parser.add_argument(
        "--warm-only",
        action="store_true",
        help="keep a kept base dir's index (no cold query; its column shows nan)",
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {load:.1f}; "
        f"medians of {args.repeat}; console script {console_script()}"
    )
    print("each cell: wall seconds / CPU seconds (user + system); ratios on CPU seconds")
    print(
        f"{'runs':>7} {'query':>11} {'where+sort':>11} {'show':>11} {'API proc':>11} "
        f"{'API warm':>11} {'import':>11} {'stat':>11} {'cold':>11} {'1st touch':>11} "
        f"{'q/API':>6} "
        f"{'q/(imp+stat)':>12} {'q-import':>8}"
    )
    for count in args.runs:
        row = measure(count, args.repeat, args.keep, cold=not args.warm_only)
        cells = " ".join(
            f"{row[name][0]:>5.2f}/{row[name][1]:<5.2f}"
            for name in (
                "query",
                "query_where",
                "show",
                "api_process",
                "api_warm",
                "import",
                "stat",
                "cold",
                "first_touch",
            )
        )
        query, api, imported, stat = (
            row[name][1] for name in ("query", "api_process", "import", "stat")
        )
        print(
            f"{count:>7} {cells} {query / api:>5.2f}x {query / (imported + stat):>11.2f}x "
            f"{query - imported:>7.2f}s",
            flush=True,
        )
        if args.formats:
            root, remove = base_of(count, args.keep)
            try:
                for name, (wall, cpu) in format_times(root).items():
                    print(f"{'':>7} index read, {name}: {wall:.2f}s / {cpu:.2f}s CPU", flush=True)
            finally:
                if remove:
                    shutil.rmtree(root, ignore_errors=True)
    print(
        "targets: warm query <= 0.6 s at 10,000 runs, <= 1.5 s at 100,000 (with and "
        "without --where/--sort); cold <= 15 s at 100,000 (files cached; first touch: "
        "whatever the page cache held)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
