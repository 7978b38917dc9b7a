"""``rankscribe-lineage group BASE --by KEY[,KEY...]``: runs side by side across seeds.

One row per group (its key values, its number of runs, the loss and each
final metric as mean +- std with min-max), best first; the groups' curves are
written under ``BASE/_groups/`` (``docs/groups.md``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from typing import Any

from rankscribe.lineage._checks import int_argument
from rankscribe.lineage._words import counted
from rankscribe.lineage.cli._terminal import (
    CommandLineError,
    existing_directory,
    plain_table,
    printable,
    value_text,
)
from rankscribe.lineage.errors import LineageFileNotFoundError

__all__ = ["add_group_command", "spread_text"]


def spread_text(found: Any) -> str:
    """A group's value as ``mean ± std (min–max)``, or ``-`` when none of its runs has it."""
    return "-" if found is None else str(found.text())


def _finals_order(groups: list[Any]) -> list[str]:
    names: dict[str, None] = {}
    for group in groups:
        names.update(dict.fromkeys(group.finals))
    ordered = sorted(names, key=lambda name: (name != "loss", name))
    return ordered


def _as_json(grouped: Any) -> dict[str, Any]:
    return {
        "base": grouped.base,
        "by": grouped.by,
        "directory": grouped.directory,
        "groups": [
            {
                "name": group.name,
                "values": group.values,
                "missing": group.missing,
                "count": len(group.runs),
                "runs": [path[2:] or "." for path in group.runs],
                "finals": {name: found.as_dict() for name, found in group.finals.items()},
                "tags": group.tags,
                "directory": group.directory,
            }
            for group in grouped.groups
        ],
    }


def _write_csv(grouped: Any, finals: list[str]) -> None:
    escape = sys.stdout.isatty()
    writer = csv.writer(sys.stdout, lineterminator="\n")
    statistics = ("mean", "std", "min", "max", "count")
    writer.writerow(
        [
            "group",
            *grouped.by,
            "runs",
            *(f"{name}/{part}" for name in finals for part in statistics),
        ]
    )
    for group in grouped.groups:
        values = ["" if value is None else str(value) for value in group.values.values()]
        cells = [group.name, *values, str(len(group.runs))]
        for name in finals:
            found = group.finals.get(name)
            cells += ["" if found is None else repr(getattr(found, part)) for part in statistics]
        writer.writerow([printable(cell) if escape else cell for cell in cells])


def _table(grouped: Any, finals: list[str], shown_base: str) -> list[str]:
    header = [*map(printable, grouped.by), "runs", *map(printable, finals)]
    rows = [
        [
            *(
                "(missing)" if value is None else value_text(value)
                for value in group.values.values()
            ),
            str(len(group.runs)),
            *(spread_text(group.finals.get(name)) for name in finals),
        ]
        for group in grouped.groups
    ]
    lines = [plain_table(header, rows)] if rows else []
    for key in grouped.by:
        lacking = [group for group in grouped.groups if key in group.missing]
        if lacking:
            count = sum(len(group.runs) for group in lacking)
            lines.append(
                f"{counted(count, 'run')} without {printable(key)}: grouped "
                f"apart, shown as (missing)"
            )
    runs = grouped.run_count
    lines.append(
        f"{counted(len(grouped.groups), 'group')} of "
        f"{counted(runs, 'run')}; values are mean ± std (min–max) over a group's runs"
    )
    if grouped.directory is not None:
        where = printable(os.path.join(shown_base, os.path.basename(grouped.directory)))
        lines.append(f"curves written to {where}/<group>/ (mean, min, max, std, runs per step)")
    return lines


def _group(args: argparse.Namespace) -> int:
    base = os.path.realpath(existing_directory(args.base))
    # Late: the command line's other commands never load numpy or the reader.
    from rankscribe.lineage.group._grouping import group_runs  # noqa: PLC0415

    try:
        grouped = group_runs(
            base,
            by=args.by,
            where=args.where,
            sort=args.sort,
            write=not args.no_write,
            workers=args.workers,
        )
    except LineageFileNotFoundError:
        raise CommandLineError(
            f"no lineage file under {printable(args.base)}: runs are grouped by their lineage"
        ) from None
    finals = _finals_order(grouped.groups)
    if args.format == "json":
        sys.stdout.write(json.dumps(_as_json(grouped), indent=2) + "\n")
    elif args.format == "csv":
        _write_csv(grouped, finals)
    else:
        sys.stdout.write("\n".join(_table(grouped, finals, args.base)) + "\n")
    return 0


def _keys(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one key, e.g. --by learning_rate")
    return names


def add_group_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``group`` among the CLI's subcommands."""
    group = commands.add_parser(
        "group",
        help="groups of runs that agree on lineage keys (seeds side by side): mean ± std, "
        "and their curves' bands under BASE/_groups",
        description="Group the runs under BASE by the lineage values of --by; print each "
        "group's loss and final metrics as mean ± std (min–max) over its runs, best group "
        "first, and write each group's curves (per step: mean, min, max, std, runs) under "
        "BASE/_groups/<group>/ for TensorBoard and MindInsight. A job counts as one run.",
    )
    group.add_argument("base", help="the base directory (runs are it and its subdirectories)")
    group.add_argument(
        "--by",
        required=True,
        type=_keys,
        metavar="KEY[,KEY...]",
        help="the keys whose values form a group: learning_rate, optimizer, "
        "user_defined/<name>, ... (the names query takes)",
    )
    group.add_argument("--where", help="group only the runs that match this filter (as query's)")
    group.add_argument(
        "--sort",
        action="append",
        metavar="KEY",
        help="sort the groups, e.g. 'metric/acc desc' (a --by key by its value, another by "
        "the mean over the group's runs; repeatable; default: the mean loss, lowest first)",
    )
    group.add_argument("--format", choices=("table", "json", "csv"), default="table")
    group.add_argument(
        "--no-write", action="store_true", help="print the groups only; write no curves"
    )
    group.add_argument(
        "--workers",
        type=int_argument(1),
        metavar="N",
        help="processes reading the runs' files (default: one per CPU, at most 8)",
    )
    group.set_defaults(handler=_group)
