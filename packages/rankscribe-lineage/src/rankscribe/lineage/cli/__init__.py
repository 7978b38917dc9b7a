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
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from rankscribe.lineage._checks import int_argument, ranks_text, seconds_argument
from rankscribe.lineage._hparams import write_hparams
from rankscribe.lineage.cli._table import closest_first, column_texts, fit_columns, order_columns
from rankscribe.lineage.errors import LineageError, LineageExpressionError, LineageFileNotFoundError
from rankscribe.lineage.jobview import verdict_lines
from rankscribe.lineage.merge._merge import merge_run_dir, rank_dirs
from rankscribe.lineage.query._conditions import FIELD_MAPPING
from rankscribe.lineage.query._expressions import parse_expression, parse_sort_key
from rankscribe.lineage.query._querier import filter_runs, get_run_lineage
from rankscribe.lineage.record._parser import SECTION_KEYS
from rankscribe.lineage.report._command import add_report_command

__all__ = ["main"]

PROGRAM = "rankscribe-lineage"
_FIELD_COLUMNS = tuple(name for name in FIELD_MAPPING if name != "summary_dir")
ALL_COLUMNS = "all"
DEFAULT_WIDTH = 100
_PREFIXES = ("metric", "user_defined")
# Where a query field's name is not the key the lineage file (and `show`) uses.
_QUERY_NAMES = {
    (section, key): name
    for name, (section, key) in FIELD_MAPPING.items()
    if key is not None and key != name
}
_NAMES_NOTE = """\
names: `show` prints each value under the section and key the lineage file stores
it with (MindInsight's lineage names, e.g. train_dataset.train_dataset_size); `query`
uses MindInsight's search names, which differ for a few of them by design (e.g.
train_dataset_count). `show` gives the query name beside each value whose name differs
(metric/<name>, train_dataset_count, test_dataset_path, test_dataset_count, model_size),
and '-' beside the values queries cannot search (parallel_mode, model path)."""


class _CommandLineError(Exception):
    """A mistake on the command line, reported as one line."""


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


def _existing_directory(path: str) -> str:
    """The absolute path of ``path``, or a one-line problem naming it."""
    directory = os.path.abspath(path)
    if not os.path.exists(directory):
        raise _CommandLineError(f"no such directory: {path}")
    if not os.path.isdir(directory):
        raise _CommandLineError(f"not a directory: {path}")
    return directory


_SEARCHABLE = {(section, key) for section, key in FIELD_MAPPING.values() if key is not None}


def _query_name(section: str, key: str) -> str:
    """The name --where and --sort use, when it is not ``key``; '-' if it cannot be searched."""
    if section in _PREFIXES:
        return f"{section}/{key}"
    if (section, key) not in _SEARCHABLE:
        return "-"
    return _QUERY_NAMES.get((section, key), "")


def _show(args: argparse.Namespace) -> int:
    directory = _existing_directory(args.dir)
    try:
        lineage = get_run_lineage(directory)
    except LineageFileNotFoundError:
        raise _CommandLineError(
            f"no lineage file in {args.dir} (lineage files are named *summary.<n>*_lineage; "
            f"a run writes one when it records its lineage)"
        ) from None
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
            rows.append([section, key, _text(value), _query_name(section, key)])
    print(f"run {result['summary_dir']}")
    print(_table(["section", "key", "value", "query name"], rows))
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
    """Every field some run shown has, then its metric/ and user_defined/ keys."""
    present = [
        name
        for name in _FIELD_COLUMNS
        if any(item["model_lineage"].get(name) is not None for item in objects)
    ]
    return present + _custom_keys(objects)


def _custom_keys(objects: list[dict[str, Any]]) -> list[str]:
    keys: list[str] = []
    for prefix in _PREFIXES:
        for item in objects:
            for key in item["model_lineage"][prefix]:
                label = f"{prefix}/{key}"
                if label not in keys:
                    keys.append(label)
    return keys


def _cell(item: dict[str, Any], column: str) -> Any:
    lineage = item["model_lineage"]
    for prefix in _PREFIXES:
        if column.startswith(prefix + "/"):
            return lineage[prefix].get(column[len(prefix) + 1 :])
    return lineage.get(column)


def _column_list(text: str) -> list[str]:
    """``--columns``: ``all``, or search field names, ``metric/<k>`` or ``user_defined/<k>``."""
    if text.strip() == ALL_COLUMNS:
        return [ALL_COLUMNS]
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        prefix, _, key = name.partition("/")
        if name not in _FIELD_COLUMNS and not (key and prefix in _PREFIXES):
            raise argparse.ArgumentTypeError(
                f"unknown column {name!r}: use field names such as {', '.join(_FIELD_COLUMNS[:4])}"
                f", ..., or metric/<name>, user_defined/<name>, or all"
            )
    if not names:
        raise argparse.ArgumentTypeError("name at least one column")
    return names


def _names_used(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The (name, option) pairs of --where, --sort and --columns."""
    used: list[tuple[str, str]] = []
    if args.where is not None and args.where.strip():
        parsed = parse_expression(args.where)
        comparisons = parsed.comparisons() if hasattr(parsed, "comparisons") else [parsed]
        used += [(comparison.name, "--where") for comparison in comparisons]
    used += [(parse_sort_key(key)[0], "--sort") for key in args.sort or []]
    used += [(name, "--columns") for name in args.columns or [] if name != ALL_COLUMNS]
    return used


def _check_custom_keys(base: str, args: argparse.Namespace) -> None:
    """A metric/ or user_defined/ key that no run has is a typo until shown otherwise."""
    wanted = [(name, option) for name, option in _names_used(args)
              if name.startswith(tuple(prefix + "/" for prefix in _PREFIXES))]
    if not wanted:
        return
    existing = set(_custom_keys(filter_runs(base, lineage_type="model")["object"]))
    for name, option in wanted:
        if name in existing:
            continue
        prefix = name.split("/", 1)[0] + "/"
        same_kind = [key for key in existing if key.startswith(prefix)]
        if same_kind:
            listed = ", ".join(closest_first(name, same_kind))
            raise _CommandLineError(
                f"no run has {name!r} ({option}); the {prefix} keys are: {listed}")
        raise _CommandLineError(f"no run has {name!r} ({option}); no run has a {prefix} key")


def _terminal_width() -> int:
    """The width to fit: $COLUMNS, else the terminal's, else 100 (e.g. into a pipe)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if sys.stdout.isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def _default_columns(
    objects: list[dict[str, Any]], run_names: list[str]
) -> tuple[list[str], list[str]]:
    """The columns that differ first, as many as fit; returns (shown, left out)."""
    names = order_columns(
        _columns(objects), [{name: _cell(item, name) for name in _columns(objects)}
                            for item in objects]
    )
    widths = [
        (name, max(len(name), *(len(text) for text in column_texts(
            [_cell(item, name) for item in objects]))))
        for name in names
    ]
    run_width = max([len("run"), *(len(name) for name in run_names)])
    return fit_columns(run_width, widths, _terminal_width())


def _run_name(summary_dir: str, base: str) -> str:
    return os.path.relpath(summary_dir, base)


def _query(args: argparse.Namespace) -> int:
    # Real path: the runs' summary_dir are real paths, named relative to it.
    base = os.path.realpath(_existing_directory(args.base))
    _check_custom_keys(base, args)
    result = filter_runs(
        base, args.where, order_by=args.sort or None, limit=args.limit, lineage_type="model"
    )
    objects = result["object"]
    if args.format == "json":
        print(json.dumps(result, indent=2))
        return 0
    run_names = [_run_name(item["summary_dir"], base) for item in objects]
    hidden: list[str] = []
    if args.columns == [ALL_COLUMNS] or (args.columns is None and args.format == "csv"):
        columns = _columns(objects)
    elif args.columns:
        columns = args.columns
    else:
        columns, hidden = _default_columns(objects, run_names)
    if args.format == "csv":
        _write_csv(["run", *columns], run_names, objects, columns)
        return 0
    cells = [column_texts([_cell(item, column) for item in objects]) for column in columns]
    rows = [[name, *(cells[index][row] for index in range(len(columns)))]
            for row, name in enumerate(run_names)]
    if rows:
        print(_table(["run", *columns], rows))
    if hidden:
        note = (f"{len(hidden)} more column{'s' if len(hidden) != 1 else ''} not shown: "
                f"{', '.join(hidden)} (--columns all shows them)")
        print(textwrap.fill(note, _terminal_width(), break_on_hyphens=False))
    shown = len(objects)
    if shown < result["count"]:
        print(f"{shown} of {result['count']} matching runs shown (--limit {args.limit})")
    else:
        print(f"{result['count']} matching run{'s' if result['count'] != 1 else ''}")
    return 0


def _write_csv(header: list[str], run_names: list[str], objects: list[dict[str, Any]],
               columns: list[str]) -> None:
    """Every value in full (a file for programs, not a table to read)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for name, item in zip(run_names, objects, strict=True):
        values = [_cell(item, column) for column in columns]
        writer.writerow([name, *("" if value is None else _text(value) for value in values)])
    sys.stdout.write(buffer.getvalue())


def _merge(args: argparse.Namespace) -> int:
    directory = _existing_directory(args.run_dir)
    found = sorted(rank_dirs(directory))
    if args.world_size is not None and found and found[-1] >= args.world_size:
        raise _CommandLineError(
            f"--world-size {args.world_size} is less than the ranks found in {args.run_dir}: "
            f"rank dirs of ranks {ranks_text(found)}; pass --world-size {found[-1] + 1} or more"
        )
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
    _existing_directory(args.base)
    written = write_hparams(args.base, args.out)
    out = os.path.dirname(written[0])
    print(f"wrote HParams for {len(written) - 1} runs under {out}")
    print(f"view them with: tensorboard --logdir {out}")
    return 0


def _fields_help() -> str:
    fields = textwrap.fill(
        ", ".join(FIELD_MAPPING), width=88, initial_indent="  ", subsequent_indent="  "
    )
    return (
        "fields --where, --sort and --columns take:\n"
        f"{fields},\n"
        "  metric/<name> (an evaluation metric), user_defined/<name> (custom lineage data)\n"
        "--where compares them with = != < <= > >= in (...) not in (...), joined by and/or;\n"
        "text values are quoted: optimizer = 'SGD'. summary_dir takes the run name the table\n"
        "shows (or ./<name>, or an absolute path). A run without a value never matches.\n\n"
        + _NAMES_NOTE
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Look at, query, merge and export the lineage of runs."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    show = commands.add_parser(
        "show", help="the lineage of one run directory", epilog=_NAMES_NOTE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("dir", help="the run directory")
    show.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show.set_defaults(handler=_show)

    query = commands.add_parser(
        "query", help="the runs under a base directory that match", epilog=_fields_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("base", help="the base directory (runs are it and its subdirectories)")
    query.add_argument(
        "--where", help="a filter, e.g. \"loss < 0.5 and optimizer in ('Adam', 'Momentum')\""
    )
    query.add_argument(
        "--sort", action="append", metavar="KEY",
        help="sort key, e.g. 'metric/acc desc' (repeatable; first is most significant)",
    )
    query.add_argument("--limit", type=int_argument(0), help="show at most N runs")
    query.add_argument(
        "--columns", type=_column_list, metavar="NAMES",
        help="comma-separated columns to show, e.g. 'optimizer,loss,metric/acc', or 'all' "
             "(default: the columns whose values differ between the runs first, as many as "
             "fit the terminal)",
    )
    query.add_argument("--format", choices=("table", "json", "csv"), default="table")
    query.set_defaults(handler=_query)

    merge = commands.add_parser(
        "merge",
        help="merge the rank_* dirs of a distributed job: its lineage, cross-rank curves, verdicts",
    )
    merge.add_argument("run_dir", help="the job directory holding rank_0, rank_1, ...")
    merge.add_argument(
        "--timeout", type=seconds_argument, default=0.0,
        help="seconds to wait for missing ranks before merging what is there (default 0)",
    )
    merge.add_argument("--world-size", type=int_argument(1), help="how many ranks the job had")
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
    except _CommandLineError as problem:
        print(f"{PROGRAM}: error: {problem}", file=sys.stderr)
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

