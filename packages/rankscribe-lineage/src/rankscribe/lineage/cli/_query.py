"""``rankscribe-lineage query BASE``: the matching runs as a table, JSON or CSV.

Every step is linear in the number of runs (plus the sort's n log n): the
columns are found in one pass over the rows' keys, a column's values are
compared with its first value until one differs, and only the columns that
fit are turned into text (``docs/lineage-queries.md``, "The command line").
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import os
import sys
from typing import Any

from rankscribe.lineage._checks import int_argument
from rankscribe.lineage._words import counted
from rankscribe.lineage.cli._show import usable_verdicts
from rankscribe.lineage.cli._table import SEPARATOR, column_texts, column_width
from rankscribe.lineage.cli._terminal import (
    CommandLineError,
    existing_directory,
    printable,
    terminal_width,
)
from rankscribe.lineage.errors import LineageFileNotFoundError
from rankscribe.lineage.group._keys import grouped_by
from rankscribe.lineage.index._run_table import RunTable
from rankscribe.lineage.query._conditions import FIELD_MAPPING
from rankscribe.lineage.query._expressions import (
    Comparison,
    Expression,
    parse_expression,
    parse_sort_key,
)
from rankscribe.lineage.query._querier import selection_result
from rankscribe.lineage.query._selection import (
    CUSTOM_PREFIXES,
    missing_key_problem,
    select_rows,
)
from rankscribe.lineage.record._discovery import GROUPS_DIR, MAX_DEPTH, list_summary_dirs

__all__ = ["ALL_COLUMNS", "add_query_command", "column_list"]

ALL_COLUMNS = "all"
# Every search field is a column; summary_dir is the run's absolute path.
_COLUMNS = tuple(FIELD_MAPPING)
# Shown by --columns all and the default table (the run column already names the run).
_FIELD_COLUMNS = tuple(name for name in FIELD_MAPPING if name != "summary_dir")


def column_list(text: str) -> list[str]:
    """``--columns``: ``all``, or search field names, ``metric/<k>`` or ``user_defined/<k>``."""
    if text.strip() == ALL_COLUMNS:
        return [ALL_COLUMNS]
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        prefix, _, key = name.partition("/")
        if name not in _COLUMNS and not (key and prefix in CUSTOM_PREFIXES):
            raise argparse.ArgumentTypeError(
                f"unknown column {printable(name)!r}: use field names such as "
                f"{', '.join(_COLUMNS[:4])}, ..., or metric/<name>, user_defined/<name>, or all"
            )
    if not names:
        raise argparse.ArgumentTypeError("name at least one column")
    return names


def _present_columns(table: RunTable, positions: list[int]) -> list[str]:
    """Every field some run has, then the metric/ and user_defined/ keys (one pass each)."""
    if not positions:
        return []
    everyone = len(positions) == len(table)  # any order: whether some run has a value
    present = []
    for name in _FIELD_COLUMNS:
        if name != "dataset_mark":
            column = table.column(name)
            values = column if everyone else map(column.__getitem__, positions)
            if not any(value is not None for value in values):
                continue
        present.append(name)
    in_base_order = everyone and positions == list(range(len(table)))
    return present + table.custom_keys(None if in_base_order else positions)


def _differs(values: list[Any]) -> bool:
    """Whether a column's values differ: another type, or another value (NaN equals NaN)."""
    first = values[0]
    if len(set(map(type, values))) > 1:
        return True
    if values.count(first) == len(values):  # C comparisons; identity first
        return False
    return not (isinstance(first, float) and all(map(math.isnan, values)))


def _named(args: argparse.Namespace) -> list[str]:
    """The names --where and --sort use (their columns are always shown)."""
    names: list[str] = []
    if args.where is not None and args.where.strip():
        parsed = parse_expression(args.where)
        comparisons = [parsed] if isinstance(parsed, Comparison) else parsed.comparisons()
        names += [comparison.name for comparison in comparisons]
    names += [parse_sort_key(key)[0] for key in args.sort or []]
    return list(dict.fromkeys(names))


class _Columns:
    """A column's values and texts for the runs shown, made once (for the width and the table).

    Values are taken from the table's columns by position: C loops, no Python
    call per value.
    """

    def __init__(self, table: RunTable, positions: list[int]) -> None:
        self.table = table
        self.positions = positions
        self.texts: dict[str, list[str]] = {}
        self._values: dict[str, list[Any]] = {}
        # Every run in base order (no --where, --sort or --limit): the columns themselves.
        self.everyone = len(positions) == len(table) and positions == list(range(len(table)))

    def values(self, name: str) -> list[Any]:
        values = self._values.get(name)
        if values is None:
            column = self.table.column(name)
            values = column if self.everyone else list(map(column.__getitem__, self.positions))
            self._values[name] = values
        return values

    def of(self, name: str) -> list[str]:
        texts = self.texts.get(name)
        if texts is None:
            texts = self.texts[name] = column_texts(self.values(name))
        return texts

    def width(self, name: str) -> int:
        cells = None if name in self.texts else column_width(self.values(name))
        if cells is None:  # only its text tells (made once, kept for the table)
            cells = max(map(len, self.of(name)), default=0)
        return max(len(printable(name)), cells)


def _default_columns(
    run_width: int, named: list[str], texts: _Columns
) -> tuple[list[str], list[str]]:
    """The columns to show and those left out: named, then differing, then the rest.

    The columns --where and --sort name claim their room first, then the
    others in order while they fit. A column is turned into text only when
    its name alone would still fit.
    """
    present = _present_columns(texts.table, texts.positions)
    named = [name for name in named if name in present]
    varying = [name for name in present if name in named or _differs(texts.values(name))]
    order = varying + [name for name in present if name not in varying]
    room = terminal_width() - run_width
    chosen: set[str] = set()
    for name in [*named, *(name for name in order if name not in named)]:
        if name not in named and len(SEPARATOR) + len(printable(name)) > room:
            continue  # too wide whatever its values: not turned into text
        needed = len(SEPARATOR) + texts.width(name)
        if needed <= room or name in named:
            chosen.add(name)
            room -= needed
    shown = [name for name in order if name in chosen]
    return shown, [name for name in order if name not in chosen]


def _table_lines(header: list[str], columns: list[list[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, built column by column.

    Each column is padded by one ``map`` (C loops), then the lines are
    joined; the last column needs no padding, as trailing blanks are
    stripped from every line.
    """
    widths = [
        max(len(name), max(map(len, cells), default=0))
        for name, cells in zip(header, columns, strict=True)
    ]
    padded = [
        [name.ljust(width), *map(str.ljust, cells, itertools.repeat(width))]
        for name, cells, width in zip(header[:-1], columns[:-1], widths[:-1], strict=True)
    ]
    padded.append([header[-1], *columns[-1]])
    return list(map(str.rstrip, map(SEPARATOR.join, zip(*padded, strict=True))))


# Lines per write: a reader that stops early (``| head``) is noticed at the next write,
# and a table of 100,000 runs is never one string of megabytes.
_LINES_PER_WRITE = 500


def _write_lines(lines: list[str]) -> None:
    for start in range(0, len(lines), _LINES_PER_WRITE):
        sys.stdout.write("\n".join(lines[start : start + _LINES_PER_WRITE]) + "\n")
        sys.stdout.flush()


def _no_lineage_message(base: str, shown_base: str) -> str:
    """What is under ``base`` when it has no lineage file: the runs with summaries, or nothing."""
    try:
        runs = list_summary_dirs(base)
    except OSError:
        runs = []
    if not runs:
        return (
            f"no summary or lineage file in {shown_base} or its subdirectories "
            f"(a run is BASE itself or a directory up to {MAX_DEPTH} levels below it)"
        )
    names = sorted(os.path.relpath(run.path, base) for run in runs)
    listed = ", ".join(printable(name) for name in names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return (
        f"no lineage file under {shown_base}: "
        f"{counted(len(runs), 'run directory', 'run directories')} ({listed}{more}) "
        f"{'holds' if len(runs) == 1 else 'hold'} summary files "
        f"but none has a lineage file (named *summary.<n>*_lineage; a run writes one "
        f"when it records its lineage)"
    )


def _query(args: argparse.Namespace) -> int:
    # Real path: the runs' summary_dir are real paths, named relative to it.
    base = os.path.realpath(existing_directory(args.base))
    try:
        selection = select_rows(
            base, args.where, order_by=args.sort or None, limit=args.limit, check_keys=False
        )
    except LineageFileNotFoundError:
        raise CommandLineError(_no_lineage_message(base, printable(args.base))) from None
    table = selection.table
    _check_custom_keys(table, args)
    if args.format == "json":
        result = selection_result(selection, ["model"])
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return 0
    positions = selection.positions
    # The run's directory relative to the base dir: ``./name`` as ``name``, ``./`` as ``.``.
    run_names = [path[2:] or "." for path in map(table.paths.__getitem__, positions)]
    shown_names = (
        run_names if all(map(str.isprintable, run_names)) else list(map(printable, run_names))
    )
    hidden: list[str] = []
    texts = _Columns(table, positions)
    by = grouped_by(base)  # the keys `group` formed BASE/_groups by: shown, and said
    if args.columns == [ALL_COLUMNS] or (args.columns is None and args.format == "csv"):
        columns = _present_columns(table, positions)
    elif args.columns:
        columns = args.columns
    else:
        run_width = max([len("run"), *map(len, shown_names)])
        present = set(_present_columns(table, positions))
        named = _named(args) + [key for key in by if key in present]
        columns, hidden = _default_columns(run_width, list(dict.fromkeys(named)), texts)
    if args.format == "csv":
        _write_csv(run_names, texts, columns)
        return 0
    out: list[str] = []
    if positions:
        cells = [shown_names, *(texts.of(name) for name in columns)]
        out += _table_lines(["run", *map(printable, columns)], cells)
    out += _verdict_lines(table, positions, shown_names)
    if by:
        out.append(
            f"grouped by {printable(', '.join(by))} (`rankscribe-lineage group`; the groups' "
            f"curves in {printable(os.path.join(args.base, GROUPS_DIR))})"
        )
    if hidden:
        out.append(_hidden_note(hidden, terminal_width()))
    count = selection.count
    if len(positions) < count:
        out.append(f"{len(positions)} of {count} matching runs shown (--limit {args.limit})")
    else:
        out.append(f"{count} matching run{'s' if count != 1 else ''}")
    unrecorded = _unrecorded_fields(selection.table, selection.expression)
    if unrecorded:
        runs = len(selection.table)
        out.append(
            f"{'no run' if runs == 1 else f'none of the {runs} runs'} records "
            f"{' or '.join(unrecorded)} (named in --where)"
        )
    _write_lines(out)
    return 0


def _unrecorded_fields(table: RunTable, expression: Expression | Comparison | None) -> list[str]:
    """The search fields ``--where`` names that no run of the base dir has a value for.

    Such a condition matches no run; without this line ``0 matching runs`` would not say why.
    """
    if expression is None:
        return []
    comparisons = [expression] if isinstance(expression, Comparison) else expression.comparisons()
    named = dict.fromkeys(comparison.name for comparison in comparisons)  # once, in order
    return [
        name
        for name in named
        if name in _FIELD_COLUMNS
        and name != "dataset_mark"  # made per query: every run has one
        and all(value is None for value in table.column(name))
    ]


def _hidden_note(hidden: list[str], width: int) -> str:
    """One line: how many columns are not shown, the first names that fit, how to see them."""
    head = f"{len(hidden)} more column{'s' if len(hidden) != 1 else ''} not shown ("
    tail = "--columns all shows them)"
    names = list(map(printable, hidden))
    for count in range(len(names), 0, -1):
        rest = len(names) - count
        listed = ", ".join(names[:count]) + (f" and {rest} more" if rest else "")
        line = f"{head}{listed}; {tail}"
        if len(line) <= width:
            return line
    return head + tail


# The verdicts `query` prints under the table (the job's others: `show`).
_VERDICT_KINDS = ("straggler:", "divergence:")


def _verdict_lines(table: RunTable, positions: list[int], names: list[str]) -> list[str]:
    """One line per job shown, in the table's order: its straggler and divergence verdicts.

    A job is a run whose merged lineage holds ``job/`` keys (docs/job-view.md);
    single-process runs get no line. The sentences are ``show``'s; numpy is
    loaded only when some job is shown.
    """
    user_defined = table.custom["user_defined"]
    job_keys = {
        key: dict(zip(*user_defined[key], strict=True))
        for key in user_defined
        if key.startswith("job/")
    }
    if not job_keys:
        return []
    from rankscribe.jobview import verdict_lines  # noqa: PLC0415 - numpy

    lines: list[str] = []
    for position, name in zip(positions, names, strict=True):
        values = {key: held[position] for key, held in job_keys.items() if position in held}
        if not values:
            continue
        wanted = [
            line
            for line in verdict_lines(usable_verdicts(values)[0])
            if line.startswith(_VERDICT_KINDS)
        ]
        said = "; ".join(map(printable, wanted)) if wanted else "no job verdicts recorded"
        lines.append(f"{name}: {said}")
    return lines


def _check_custom_keys(table: RunTable, args: argparse.Namespace) -> None:
    """A metric/ or user_defined/ key that no run has is a typo (the API refuses it too)."""
    used: list[tuple[str, str]] = []
    if args.where is not None and args.where.strip():
        parsed = parse_expression(args.where)
        comparisons = [parsed] if isinstance(parsed, Comparison) else parsed.comparisons()
        used += [(comparison.name, "--where") for comparison in comparisons]
    used += [(parse_sort_key(key)[0], "--sort") for key in args.sort or []]
    used += [(name, "--columns") for name in args.columns or [] if name != ALL_COLUMNS]
    wanted = [
        (name, option)
        for name, option in used
        if name.startswith(tuple(prefix + "/" for prefix in CUSTOM_PREFIXES))
    ]
    if not wanted:
        return
    existing = set(table.custom_keys())
    for name, option in wanted:
        problem = missing_key_problem(existing, name)
        if problem is not None:
            raise CommandLineError(
                f"no run has {printable(name)!r} ({option}); {printable(problem)}"
            )


def _csv_text(value: Any, escape: bool) -> str:
    if value is None:
        return ""
    text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
    return printable(text) if escape else text


def _write_csv(run_names: list[str], texts: _Columns, columns: list[str]) -> None:
    """Every value in full (a file for programs, not a table to read).

    Into a terminal, control characters are escaped as in the table; into a
    file or a pipe the values are written as they are.
    """
    escape = sys.stdout.isatty()
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["run", *columns])
    values = [texts.values(name) for name in columns]
    for at, name in enumerate(run_names):
        writer.writerow(
            [_csv_text(name, escape), *(_csv_text(column[at], escape) for column in values)]
        )


def add_query_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str
) -> None:
    query = commands.add_parser(
        "query",
        help="the runs under a base directory that match",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument(
        "base",
        help=f"the base directory (runs are it and the directories up to {MAX_DEPTH} levels "
        "below it; a run's own subdirectories are part of it)",
    )
    query.add_argument(
        "--where", help="a filter, e.g. \"loss < 0.5 and optimizer in ('Adam', 'Momentum')\""
    )
    query.add_argument(
        "--sort",
        action="append",
        metavar="KEY",
        help="sort key, e.g. 'metric/acc desc' (repeatable; first is most significant)",
    )
    query.add_argument("--limit", type=int_argument(0), help="show at most N runs")
    query.add_argument(
        "--columns",
        type=column_list,
        metavar="NAMES",
        help="comma-separated columns to show, e.g. 'optimizer,loss,metric/acc', or 'all' "
        "(default: the columns --where and --sort name, then those whose values differ "
        "between the runs, as many as fit the terminal)",
    )
    query.add_argument("--format", choices=("table", "json", "csv"), default="table")
    query.set_defaults(handler=_query, ends_at_once=True)
