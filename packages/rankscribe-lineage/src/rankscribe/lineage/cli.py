"""``rankscribe-lineage``: look at, query, merge and export run lineages.

    rankscribe-lineage show DIR [--json]
    rankscribe-lineage query BASE [--where EXPR] [--sort KEY]... [--limit N]
                             [--format table|json|csv]
    rankscribe-lineage merge RUN_DIR [--timeout SECONDS] [--world-size N]
                             (the merged lineage and the job view: cross-rank
                             curves and verdicts, see rankscribe.lineage.jobview)
    rankscribe-lineage hparams BASE [--out DIR]
    rankscribe-lineage report BASE [-o FILE]   (one HTML page; rankscribe-lineage[report])

A mistake (a bad path, a filter that does not parse, nothing to merge) is one
line on stderr and exit status 1 — with the filter and a caret under the
offending column for a filter that does not parse; a usage error is exit 2.
Warnings about skipped files go to stderr too.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from rankscribe.lineage._conditions import FIELD_MAPPING
from rankscribe.lineage._hparams import write_hparams
from rankscribe.lineage._merge import merge_run_dir
from rankscribe.lineage._parser import SECTION_KEYS
from rankscribe.lineage._querier import filter_runs, get_run_lineage
from rankscribe.lineage._report import add_report_command
from rankscribe.lineage.errors import LineageError, LineageExpressionError, LineageFileNotFoundError
from rankscribe.lineage.jobview import verdict_lines

PROGRAM = "rankscribe-lineage"
_FIELD_COLUMNS = tuple(name for name in FIELD_MAPPING if name != "summary_dir")


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
             for line in [header, *rows]]
    return "\n".join(line.rstrip() for line in lines)


def _show(args: argparse.Namespace) -> int:
    directory = os.path.abspath(args.dir)
    lineage = get_run_lineage(directory)
    if lineage is None:
        print(f"{PROGRAM}: {directory} has lineage files but none could be read", file=sys.stderr)
        return 1
    result = lineage.summary_info()
    result["user_defined"] = lineage.section("user_defined")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    rows: list[list[str]] = []
    for section in (*SECTION_KEYS, "user_defined"):
        if section == "dataset_graph":
            continue
        for key, value in result.get(section, {}).items():
            rows.append([section, key, _text(value)])
    print(f"run {result['summary_dir']}")
    print(_table(["section", "key", "value"], rows))
    graph = result.get("dataset_graph") or {}
    if graph:
        print(f"dataset_graph: {_graph_line(graph)}")
    verdicts = verdict_lines(result["user_defined"])
    if verdicts:
        print("job verdicts:")
        for line in verdicts:
            print(f"  {line}")
    return 0


def _graph_line(graph: dict[str, Any]) -> str:
    """The pipeline leaf to root, e.g. ``MnistDataset -> Map -> Map -> Batch``."""
    chain: list[str] = []
    node: dict[str, Any] | None = graph
    while node:
        chain.append(str(node.get("op_type", "?")))
        children = node.get("children") or []
        node = children[0] if children else None
    return " -> ".join(reversed(chain))


def _columns(objects: list[dict[str, Any]]) -> list[str]:
    present = [
        name
        for name in _FIELD_COLUMNS
        if any(item["model_lineage"].get(name) is not None for item in objects)
    ]
    extra: list[str] = []
    for prefix in ("metric", "user_defined"):
        for item in objects:
            for key in item["model_lineage"][prefix]:
                label = f"{prefix}/{key}"
                if label not in extra:
                    extra.append(label)
    return present + extra


def _cell(item: dict[str, Any], column: str) -> Any:
    lineage = item["model_lineage"]
    for prefix in ("metric", "user_defined"):
        if column.startswith(prefix + "/"):
            return lineage[prefix].get(column[len(prefix) + 1 :])
    return lineage.get(column)


def _column_list(text: str) -> list[str]:
    """``--columns``: search field names, ``metric/<k>`` or ``user_defined/<k>``."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        prefix, _, key = name.partition("/")
        if name not in _FIELD_COLUMNS and not (key and prefix in ("metric", "user_defined")):
            raise argparse.ArgumentTypeError(
                f"unknown column {name!r}: use field names such as {', '.join(_FIELD_COLUMNS[:4])}"
                f", ..., or metric/<name>, user_defined/<name>"
            )
    if not names:
        raise argparse.ArgumentTypeError("name at least one column")
    return names


def _query(args: argparse.Namespace) -> int:
    # Real path: the runs' summary_dir are real paths, named relative to it.
    base = os.path.realpath(args.base)
    result = filter_runs(
        base, args.where, order_by=args.sort or None, limit=args.limit, lineage_type="model"
    )
    objects = result["object"]
    if args.format == "json":
        print(json.dumps(result, indent=2))
        return 0
    columns = args.columns or _columns(objects)
    header = ["run", *columns]
    rows = [
        [os.path.relpath(item["summary_dir"], base), *(_text(_cell(item, c)) for c in columns)]
        for item in objects
    ]
    if args.format == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(
            [row[0], *("" if cell == "-" else cell for cell in row[1:])] for row in rows
        )
        sys.stdout.write(buffer.getvalue())
        return 0
    if rows:
        print(_table(header, rows))
    shown = len(objects)
    if shown < result["count"]:
        print(f"{shown} of {result['count']} matching runs shown (--limit {args.limit})")
    else:
        print(f"{result['count']} matching run{'s' if result['count'] != 1 else ''}")
    return 0


def _merge(args: argparse.Namespace) -> int:
    outcome = merge_run_dir(args.run_dir, timeout=args.timeout, world_size=args.world_size)
    reported = ",".join(str(rank) for rank in outcome.ranks_reported)
    print(f"wrote {outcome.path} (ranks {reported}", end="")
    if outcome.ranks_missing:
        print(f"; missing {','.join(str(rank) for rank in outcome.ranks_missing)}", end="")
    print(")")
    if outcome.job_view is not None:
        for path in outcome.job_view.paths:
            print(f"wrote {path} (job view)")
        for line in verdict_lines(outcome.job_view.verdicts):
            print(f"  {line}")
    return 0


def _hparams(args: argparse.Namespace) -> int:
    written = write_hparams(args.base, args.out)
    out = os.path.dirname(written[0])
    print(f"wrote HParams for {len(written) - 1} runs under {out}")
    print(f"view them with: tensorboard --logdir {out}")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an int >= 0, got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Look at, query, merge and export the lineage of runs."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    show = commands.add_parser("show", help="the lineage of one run directory")
    show.add_argument("dir", help="the run directory")
    show.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show.set_defaults(handler=_show)

    query = commands.add_parser("query", help="the runs under a base directory that match")
    query.add_argument("base", help="the base directory (runs are it and its subdirectories)")
    query.add_argument(
        "--where", help="a filter, e.g. \"loss < 0.5 and optimizer in ('Adam', 'Momentum')\""
    )
    query.add_argument(
        "--sort", action="append", metavar="KEY",
        help="sort key, e.g. 'metric/acc desc' (repeatable; first is most significant)",
    )
    query.add_argument("--limit", type=_positive_int, help="show at most N runs")
    query.add_argument(
        "--columns", type=_column_list, metavar="NAMES",
        help="comma-separated columns to show, e.g. 'optimizer,loss,metric/acc' "
             "(default: every field any run has)",
    )
    query.add_argument("--format", choices=("table", "json", "csv"), default="table")
    query.set_defaults(handler=_query)

    merge = commands.add_parser(
        "merge",
        help="merge the rank_* dirs of a distributed job: its lineage, cross-rank curves, verdicts",
    )
    merge.add_argument("run_dir", help="the job directory holding rank_0, rank_1, ...")
    merge.add_argument(
        "--timeout", type=_seconds, default=0.0,
        help="seconds to wait for missing ranks before merging what is there (default 0)",
    )
    merge.add_argument("--world-size", type=_positive_int, help="how many ranks the job had")
    merge.set_defaults(handler=_merge)

    hparams = commands.add_parser("hparams", help="write TensorBoard HParams summaries")
    hparams.add_argument("base", help="the base directory")
    hparams.add_argument("--out", help="output directory (default BASE/tensorboard-hparams)")
    hparams.set_defaults(handler=_hparams)

    add_report_command(commands)  # report BASE [-o FILE]: one HTML page
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format=f"{PROGRAM}: warning: %(message)s")
    try:
        return int(args.handler(args))
    except LineageExpressionError as error:
        print(f"{PROGRAM}: error: {error.detail} at column {error.column + 1}", file=sys.stderr)
        print(f"  {error.expression}\n  {' ' * error.column}^", file=sys.stderr)
    except LineageFileNotFoundError as error:
        print(f"{PROGRAM}: error: {error.message}", file=sys.stderr)
    except LineageError as error:
        print(f"{PROGRAM}: error: {error.message} [{type(error).__name__} {error.error_code}]",
              file=sys.stderr)
    except OSError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
