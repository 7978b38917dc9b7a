#!/usr/bin/env python3
"""The lineage index stored three ways, each timed as a warm query would use it.

    python tools/bench/index_containers.py BASE [--repeat 3]

``BASE`` is a base dir whose index is current (``tools/bench/cli.py --keep``
makes one). Its checked columns are stored as:

- ``ours``: the index as this code writes it (``rankscribe-lineage query``);
- ``sqlite``: SQLite as the query engine: one table, a row per run, a typed
  column per field, per ``metric/<k>`` and per ``user_defined/<k>`` (a dict
  value as its JSON text), the lineage files' signatures as columns; the
  filter, the sort and the limit are SQL;
- ``npz``: numpy's ``.npz`` of ``.npy`` columns (text as UTF-8 joined by NUL
  in a ``uint8`` array: an object array would be a pickle).

For each: the write time, the read and check time (in this process), whether
one changed byte in a value (0.2 -> 9.0) is detected, and three warm queries
in a new process -- the default listing, ``--where "loss < 0.5" --sort
"metric/acc desc"`` and ``--format json --limit 5``. ``ours`` runs the console
script (the whole command: freshness, query, table); the others run the same
steps as a short script: the freshness check (one ``lstat`` of each run dir
and of its lineage file, compared with the stored values), the query (SQL, or
numpy on the columns), the rows written out tab-separated (no table layout:
a lower bound on what the command would cost with them).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rankscribe.lineage.index._cache import INDEX_NAME
from rankscribe.lineage.index._index_file import load_index

Seconds = tuple[float, float]  # wall, CPU (user + system)


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def timed(function: Callable[[], object]) -> Seconds:
    started, cpu = time.perf_counter(), _cpu(resource.RUSAGE_SELF)
    function()
    return time.perf_counter() - started, _cpu(resource.RUSAGE_SELF) - cpu


def process(argv: list[str]) -> Seconds:
    started, cpu = time.perf_counter(), _cpu(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, timeout=600)
    return time.perf_counter() - started, _cpu(resource.RUSAGE_CHILDREN) - cpu


def dense_columns(document: dict[str, Any]) -> dict[str, list[Any]]:
    """Every column of the index, one value per run (sparse keys filled with None)."""
    count = len(document["path"])
    files = document["files"]
    numbers = files.numbers.tolist()
    columns: dict[str, list[Any]] = {
        "path": list(document["path"]),
        "dir_mtime": list(document["dir_mtime"]),
        "final": list(document["final"]),
        "create_time": list(document["create_time"]),
        "update_time": list(document["update_time"]),
        "file_name": list(files.names),
        "file_size": numbers[0::4],
        "file_mtime": numbers[1::4],
        "file_inode": numbers[2::4],
        "file_ctime": numbers[3::4],
        "graph": list(document["graph"]),
    }
    columns.update({name: list(column) for name, column in document["fields"].items()})
    for section in ("metric", "user_defined"):
        for key, (positions, values) in document[section].items():
            column: list[Any] = [None] * count
            for position, value in zip(positions, values, strict=True):
                column[position] = json.dumps(value) if isinstance(value, dict) else value
            columns[f"{section}/{key}"] = column
    return columns


def _sql_type(values: list[Any]) -> str:
    kinds = {type(value) for value in values} - {type(None)}
    if kinds <= {int, bool}:
        return "integer"
    if kinds <= {float, int}:
        return "real"
    if kinds <= {str}:
        return "text"
    return ""  # mixed: SQLite keeps each value's own type


def write_sqlite(columns: dict[str, list[Any]], graphs: dict[str, Any], path: Path) -> None:
    path.unlink(missing_ok=True)
    names = list(columns)
    connection = sqlite3.connect(path)
    with connection:
        declared = ", ".join(f'"{name}" {_sql_type(columns[name])}' for name in names)
        connection.execute(f"create table runs ({declared})")
        marks = ", ".join("?" * len(names))
        connection.executemany(
            f"insert into runs values ({marks})", zip(*columns.values(), strict=True)
        )
        connection.execute("create table graphs (id text primary key, graph text)")
        connection.executemany(
            "insert into graphs values (?, ?)",
            [(key, json.dumps(value)) for key, value in graphs.items()],
        )
    connection.close()


def read_sqlite(path: Path) -> None:
    """Every row fetched, each column's types checked in SQL, graphs decoded, quick_check."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = [row[1] for row in connection.execute("pragma table_info(runs)")]
    connection.execute("pragma quick_check").fetchall()
    checks = " + ".join(
        f"""sum(typeof("{name}") not in ('integer', 'real', 'text', 'null'))""" for name in names
    )
    connection.execute(f"select {checks} from runs").fetchall()
    connection.execute("select * from runs").fetchall()
    for _, graph in connection.execute("select * from graphs"):
        json.loads(graph)
    connection.close()


def _text_array(values: list[Any]) -> Any:
    import numpy as np

    joined = "\0".join("" if value is None else str(value) for value in values)
    return np.frombuffer(joined.encode("utf-8", "surrogatepass"), dtype=np.uint8)


def write_npz(columns: dict[str, list[Any]], graphs: dict[str, Any], path: Path) -> None:
    import numpy as np

    arrays: dict[str, Any] = {}
    header: dict[str, str] = {}
    for name, values in columns.items():
        kinds = {type(value) for value in values}
        if kinds <= {int} or kinds <= {bool}:
            arrays[name] = np.asarray(values, dtype=np.int64 if int in kinds else np.bool_)
        elif kinds <= {float, int, type(None)} and kinds & {float, int}:
            arrays[name] = np.asarray(
                [np.nan if value is None else value for value in values], dtype=np.float64
            )
            header[name] = "number"
        else:
            arrays[name] = _text_array(values)
            header[name] = "text"
    arrays["header"] = _text_array([json.dumps({"kinds": header, "graphs": graphs})])
    with open(path, "wb") as stream:
        np.savez(stream, **{name.replace("/", "%2F"): array for name, array in arrays.items()})


def read_npz(path: Path) -> None:
    """Every member read (the zip's CRC-32 checked as it ends), made into lists."""
    import numpy as np

    with np.load(path) as archive:
        for name in archive.files:
            array = archive[name]
            if array.dtype == np.uint8:
                bytes(array).decode("utf-8", "surrogatepass").split("\0")
            else:
                array.tolist()


def write_ours(root: Path, target: Path) -> Callable[[], object]:
    from rankscribe.lineage.index._index_file import write_index

    loaded = load_index(str(root))
    assert loaded is not None
    entries, graphs = loaded.entries, loaded.graphs
    target.mkdir(exist_ok=True)
    return lambda: write_index(str(target), entries, graphs)


# The warm query of the sqlite and npz candidates, in a new process (see the module docstring).
QUERY_SCRIPT = r"""
import json, os, sys
root, store, kind, mode = sys.argv[1:5]
out = sys.stdout
def fresh(paths, dir_mtime, names, signatures):
    base = os.open(root, os.O_RDONLY)
    lstat = os.lstat
    for path, mtime, name, signature in zip(paths, dir_mtime, names, signatures):
        found = lstat(path[2:], dir_fd=base)
        if found.st_mtime_ns != mtime:
            raise SystemExit("stale " + path)
        found = lstat(path[2:] + "/" + name, dir_fd=base)
        if (found.st_size, found.st_mtime_ns, found.st_ino, found.st_ctime_ns) != signature:
            raise SystemExit("stale " + path)
if kind == "sqlite":
    import sqlite3
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute("select path, dir_mtime, file_name, file_size, file_mtime, file_inode,"
                      " file_ctime from runs").fetchall()
    fresh([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
          [r[3:] for r in rows])
    if mode == "default":
        cursor = db.execute("select * from runs")
    elif mode == "where":
        cursor = db.execute('select * from runs where loss < 0.5'
                            ' order by "metric/acc" desc nulls last')
    else:
        cursor = db.execute("select * from runs limit 5")
    names = [item[0] for item in cursor.description]
    rows = cursor.fetchall()
else:
    import numpy as np
    archive = np.load(store)
    kinds = json.loads(bytes(archive["header"]).decode())["kinds"]
    def column(name):
        array = archive[name.replace("/", "%2F")]
        if kinds.get(name) == "text":
            return bytes(array).decode("utf-8", "surrogatepass").split("\0")
        return array
    paths = column("path")
    numbers = np.stack([column(n) for n in ("file_size", "file_mtime", "file_inode",
                                            "file_ctime")], axis=1).tolist()
    fresh(paths, column("dir_mtime").tolist(), column("file_name"), map(tuple, numbers))
    names = [n.replace("%2F", "/") for n in archive.files if n != "header"]
    if mode == "where":
        loss, acc = column("loss"), column("metric/acc")
        keep = np.flatnonzero(loss < 0.5)
        order = keep[np.argsort(-acc[keep], kind="stable")]
        order = np.concatenate([order[~np.isnan(acc[order])], order[np.isnan(acc[order])]])
    elif mode == "limit":
        order = np.arange(5)
    else:
        order = None
    values = []
    for name in names:
        data = column(name)
        if order is not None:
            data = (np.asarray(data, dtype=object) if isinstance(data, list) else data)[order]
        values.append(data.tolist() if hasattr(data, "tolist") else data)
    rows = list(zip(*values))
if mode == "limit":
    json.dump([dict(zip(names, row)) for row in rows], out)
else:
    out.write("\t".join(names) + "\n")
    out.writelines("\t".join(map(str, row)) + "\n" for row in rows)
out.flush()
os._exit(0)
"""


def flip_a_value(path: Path, value: float) -> bool:
    """Change the bytes of the stored float ``value`` into 9.0's (as a disk or a hand might);
    False if the file does not hold it as 8 raw bytes. The file's own check must refuse it."""
    import struct

    data = bytearray(path.read_bytes())
    for order in "<>":
        at = data.find(struct.pack(f"{order}d", value))
        if at >= 0:
            data[at : at + 8] = struct.pack(f"{order}d", 9.0)
            path.write_bytes(bytes(data))
            return True
    return False


def detected(read: Callable[[], object]) -> str:
    try:
        read()
    except (sqlite3.DatabaseError, zipfile.BadZipFile, ValueError, OSError) as error:
        return f"yes ({type(error).__name__})"
    return "NO: served as data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--cold",
        action="store_true",
        help="also time one query with no index (the index removed first; run files cached)",
    )
    args = parser.parse_args(argv)
    root: Path = args.base.resolve()
    script = str(Path(sys.executable).parent / "rankscribe-lineage")
    if args.cold:
        (root / INDEX_NAME).unlink(missing_ok=True)
        cold = process([script, "query", str(root)])
        print(f"cold query of {INDEX_NAME} (wall/CPU s): {cold[0]:.2f}/{cold[1]:.2f}", flush=True)
    subprocess.run([script, "query", str(root)], stdout=subprocess.DEVNULL, check=True)
    loaded = load_index(str(root))
    assert loaded is not None
    columns = dense_columns(loaded.document)
    scratch = Path(tempfile.mkdtemp(prefix="index-containers-"))
    database, archive = scratch / "index.sqlite", scratch / "index.npz"
    ours_writer = write_ours(root, scratch / "ours")
    writes = {
        "ours": timed(ours_writer),
        "sqlite": timed(lambda: write_sqlite(columns, loaded.graphs, database)),
        "npz": timed(lambda: write_npz(columns, loaded.graphs, archive)),
    }
    reads: dict[str, list[Seconds]] = {name: [] for name in writes}
    queries: dict[tuple[str, str], list[Seconds]] = {}
    ours_argv = {
        "default": [script, "query", str(root)],
        "where": [script, "query", str(root), "--where", "loss < 0.5", "--sort", "metric/acc desc"],
        "limit": [script, "query", str(root), "--format", "json", "--limit", "5"],
    }
    for _ in range(args.repeat):
        reads["ours"].append(timed(lambda: load_index(str(root))))
        reads["sqlite"].append(timed(lambda: read_sqlite(database)))
        reads["npz"].append(timed(lambda: read_npz(archive)))
        for mode in ("default", "where", "limit"):
            queries.setdefault(("ours", mode), []).append(process(ours_argv[mode]))
            for kind, store in (("sqlite", database), ("npz", archive)):
                queries.setdefault((kind, mode), []).append(
                    process([sys.executable, "-c", QUERY_SCRIPT, str(root), str(store), kind, mode])
                )

    def median(values: list[Seconds]) -> str:
        wall = statistics.median(value[0] for value in values)
        cpu = statistics.median(value[1] for value in values)
        return f"{wall:5.2f}/{cpu:<5.2f}"

    sizes = {
        "ours": (root / INDEX_NAME).stat().st_size,
        "sqlite": database.stat().st_size,
        "npz": archive.stat().st_size,
    }
    value = next(item for item in columns["metric/acc"] if isinstance(item, float))
    flips = {
        "ours": flip_a_value(scratch / "ours" / INDEX_NAME, value),
        "sqlite": flip_a_value(database, value),
        "npz": flip_a_value(archive, value),
    }

    def ours_detects() -> None:
        if load_index(str(scratch / "ours")) is None:
            raise ValueError("ignored")

    detections = {
        "ours": detected(ours_detects),
        "sqlite": detected(lambda: read_sqlite(database)),
        "npz": detected(lambda: read_npz(archive)),
    }
    load = os.getloadavg()[0]
    print(
        f"{len(columns['path'])} runs, medians of {args.repeat}, load {load:.1f} (wall/CPU seconds)"
    )
    print(
        f"{'format':>7} {'size MB':>8} {'write':>11} {'read+check':>11} {'query':>11} "
        f"{'where+sort':>11} {'json -n 5':>11}  changed value detected"
    )
    for name, written in writes.items():
        print(
            f"{name:>7} {sizes[name] / 1e6:>8.1f} {median([written])} {median(reads[name])} "
            f"{median(queries[name, 'default'])} {median(queries[name, 'where'])} "
            f"{median(queries[name, 'limit'])}  {detections[name]}"
            + ("" if flips[name] else " (the value's bytes not found)"),
            flush=True,
        )
    subprocess.run(["rm", "-rf", str(scratch)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
