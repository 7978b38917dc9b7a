"""``rankscribe-lineage show RUN_DIR``: one run's lineage, each value under its section.

Values come from files: each is escaped before it reaches the terminal
(:func:`rankscribe.lineage.cli._terminal.printable`), and the job verdicts of
a merged lineage are formatted only from values of the types the merge
writes (a hand-edited or foreign file cannot make ``show`` fail).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Mapping
from typing import Any

from rankscribe.lineage.cli._terminal import (
    PROGRAM,
    CommandLineError,
    existing_directory,
    plain_table,
    printable,
    runs_below_text,
    value_text,
)
from rankscribe.lineage.errors import LineageFileNotFoundError
from rankscribe.lineage.query._conditions import FIELD_MAPPING
from rankscribe.lineage.query._querier import get_run_lineage
from rankscribe.lineage.query._selection import CUSTOM_PREFIXES

__all__ = ["CHECK_NO_JOB", "CHECK_VERDICT", "NAMES_NOTE", "add_show_command", "usable_verdicts"]

#: ``show --check``: the exit status when a straggler, divergence or gradient verdict
#: stands ...
CHECK_VERDICT = 3
#: ... and when the directory holds no job (no lineage file, no live view).
CHECK_NO_JOB = 2
EXIT_NOTE = """\
exit status: 0 shown (with --check: no straggler, divergence or gradient verdict
stands); 1 an error (e.g. no lineage file and no live view, without --check); 2 with
--check: no job in DIR (no lineage file and no live view) or a usage error; 3 with
--check: a straggler, divergence or gradient verdict stands (each is printed). --check
and --json work while the job runs (from its live view, docs/job-view.md) and after it
ended."""

# Where a query field's name is not the key the lineage file (and `show`) uses.
_QUERY_NAMES = {
    (section, key): name
    for name, (section, key) in FIELD_MAPPING.items()
    if key is not None and key != name
}
_SEARCHABLE = {(section, key) for section, key in FIELD_MAPPING.values() if key is not None}
NAMES_NOTE = """\
names: `show` prints each value under the section and key the lineage file stores
it with (MindInsight's lineage names, e.g. train_dataset.train_dataset_size); `query`
uses MindInsight's search names, which differ for a few of them by design (e.g.
train_dataset_count). `show` gives the query name beside each value whose name differs
(metric/<name>, train_dataset_count, test_dataset_path, test_dataset_count, model_size),
and '-' beside the values queries cannot search (parallel_mode, model path)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


# The job verdict keys the merge writes and the type of each (job/<key>/<rank> by prefix).
_VERDICT_TYPES = {
    "job/straggler_rank": (_is_int, "a rank (int)"),
    "job/step_time_skew": (_is_number, "a number"),
    "job/straggler_slowest_share": (_is_number, "a number"),
    "job/straggler_excess": (_is_number, "a number"),
    "job/divergence_check": (_is_text, "text"),
    "job/diverged_ranks": (_is_text, "text"),
    "job/diverged_first_step": (_is_int, "a step (int)"),
    "job/nonfinite_loss_ranks": (_is_text, "text"),
    "job/nonfinite_loss_first_step": (_is_int, "a step (int)"),
    "job/stopped_first_rank": (_is_int, "a rank (int)"),
    "job/stopped_first_step": (_is_int, "a step (int)"),
    "job/stopped_early_ranks": (_is_text, "text"),
    "job/missing_ranks": (_is_text, "text"),
    "job/ranks_reported": (_is_int, "a count (int)"),
    "job/straggler_live_spans": (_is_text, "text"),
    "job/gradient_check": (_is_text, "text"),
    "job/gradient_ranks": (_is_text, "text"),
    "job/gradient_first_step": (_is_int, "a step (int)"),
    "job/gradient_fallout_ranks": (_is_text, "text"),
}
_VERDICT_PREFIX_TYPES = {
    "job/diverged_step/": (_is_int, "a step (int)"),
    "job/nonfinite_loss_step/": (_is_int, "a step (int)"),
    "job/last_step/": (_is_int, "a step (int)"),
    "job/gradient_step/": (_is_int, "a step (int)"),
    "job/gradient_bucket/": (_is_int, "a bucket (int)"),
    "job/gradient_ratio/": (_is_number, "a number"),
    "job/gradient_nonfinite/": (_is_int, "0 or 1"),
    "job/gradient_element/": (_is_int, "0 or 1"),
    "job/gradient_named_steps/": (_is_int, "a count (int)"),
    "job/gradient_persistent/": (_is_int, "0 or 1"),
    "job/gradient_parameters/": (_is_text, "text"),
    "job/gradient_fallout_step/": (_is_int, "a step (int)"),
    "job/gradient_fallout_of/": (_is_int, "a rank (int)"),
}


def _expected_type(key: str) -> tuple[Any, str] | None:
    rule = _VERDICT_TYPES.get(key)
    if rule is None:
        rule = next(
            (found for prefix, found in _VERDICT_PREFIX_TYPES.items() if key.startswith(prefix)),
            None,
        )
    return rule


def usable_verdicts(user_defined: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The ``job/`` values of the types the merge writes, and a note for each other one.

    A value of another type (``job/straggler_slowest_share = "n/a"``) is left
    out of the verdicts and named in a note; the table still shows it.
    """
    usable: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in user_defined.items():
        if not isinstance(key, str) or not key.startswith("job/"):
            continue
        rule = _expected_type(key)
        if rule is None or rule[0](value):
            usable[key] = value
        else:
            notes.append(f"{key} is {value!r}, not {rule[1]}: left out of the verdicts")
    return usable, notes


def _query_name(section: str, key: str) -> str:
    """The name --where and --sort use, when it is not ``key``; '-' if it cannot be searched."""
    if section in CUSTOM_PREFIXES:
        return f"{section}/{key}"
    if (section, key) not in _SEARCHABLE:
        return "-"
    return _QUERY_NAMES.get((section, key), "")


def _graph_line(graph: dict[str, Any]) -> str:
    """The pipeline leaf to root, e.g. ``MnistDataset -> Map -> Map -> Batch``."""
    chain: list[str] = []
    node: Any = graph
    while isinstance(node, dict) and node:
        chain.append(str(node.get("op_type", "?")))
        children = node.get("children") or []
        node = children[0] if isinstance(children, list) and children else None
    return " -> ".join(reversed(chain))


def _verdict_lines(user_defined: Mapping[str, Any]) -> list[str]:
    usable, notes = usable_verdicts(user_defined)
    from rankscribe.jobview import verdict_lines  # noqa: PLC0415 - numpy, for show

    return [*verdict_lines(usable), *notes]


# A job verdict key that says what the merge's own key says (shown once, as the merge's).
_SAME_AS_MERGE = {"job/missing_ranks": "ranks_missing", "job/ranks_reported": "ranks_reported"}


def _shown_value(value: Any) -> str:
    """A value as the table shows it: floats to 7 significant digits, like a float32.

    The lineage holds float32 values (a loss) beside doubles (a skew computed
    by the merge): every float is printed alike, the JSON keeps them whole.
    """
    if isinstance(value, float) and math.isfinite(value):
        text = f"{value:.7g}"
        return text if "." in text or "e" in text else text + ".0"  # still reads as a float
    return value_text(value)


def _table_rows(result: Mapping[str, Any]) -> tuple[list[list[str]], int]:
    """The rows of ``show``'s table, and how many empty ``user_defined`` values were left out.

    An empty text in ``user_defined`` (the merge writes "" for "no rank") makes
    no row, nor does a ``job/`` key saying what the merge's own key says.
    """
    from rankscribe.lineage.record._parser import SECTION_KEYS  # noqa: PLC0415 - protobuf

    rows: list[list[str]] = []
    left_out = 0
    user_defined = result.get("user_defined", {})
    for section in (*SECTION_KEYS, "user_defined"):
        if section == "dataset_graph":
            continue
        for key, value in result.get(section, {}).items():
            if section == "user_defined":
                if value == "":
                    left_out += 1
                    continue
                same = _SAME_AS_MERGE.get(str(key))
                if same is not None and same in user_defined and user_defined[same] == value:
                    continue
            rows.append(
                [
                    section,
                    printable(str(key)),
                    _shown_value(value),
                    printable(_query_name(section, str(key))),
                ]
            )
    return rows, left_out


def _live_records(state: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The live view's verdict records of the shape it writes (others left out: files are data)."""
    found = state.get("verdict_records") if state is not None else None
    if not isinstance(found, list):
        return []
    return [
        record
        for record in found
        if isinstance(record, dict)
        and isinstance(record.get("kind"), str)
        and isinstance(record.get("ranks"), list)
        and all(_is_int(rank) for rank in record["ranks"])
        and isinstance(record.get("message", ""), str)
    ]


def job_records(
    state: Mapping[str, Any] | None, user_defined: Mapping[str, Any] | None
) -> list[Mapping[str, Any]]:
    """The verdict records of a job: its live view's, then its merged lineage's not among them.

    The live view judges the recent steps and gives stragglers their cost; the
    merged lineage (at the end) adds the whole run's verdicts. A verdict of the
    whole run (any kind but a straggler) that both hold is the merged lineage's,
    which knows more (a gradient verdict's bucket parameters).
    """
    from rankscribe.jobview.parts import records_from_verdicts  # noqa: PLC0415 - numpy

    records = _live_records(state)
    if user_defined is not None:
        merged = records_from_verdicts(usable_verdicts(user_defined)[0])
        whole_run = {
            (record["kind"], tuple(record["ranks"])): record
            for record in merged
            if record["kind"] != "straggler"
        }
        records = [
            whole_run.get((record["kind"], tuple(record["ranks"])), record)
            if record["kind"] != "straggler"
            else record
            for record in records
        ]
        covered = {(record["kind"], rank) for record in records for rank in record["ranks"]}
        for record in merged:
            if not all((record["kind"], rank) in covered for rank in record["ranks"]):
                records.append(record)
    return records


def _check(directory: str, state: Mapping[str, Any] | None, lineage: Any) -> int:
    from rankscribe.jobview.parts import ACTIONABLE_KINDS  # noqa: PLC0415 - numpy

    if state is None and lineage is None:
        fix = ""
        if _unmerged_ranks(directory):  # an interrupted job: its ranks wrote, nobody merged
            fix = (
                f"; its rank directories hold files: `{PROGRAM} merge "
                f"{shlex.quote(printable(directory))}` writes the job's lineage"
            )
        print(
            f"{PROGRAM}: no job in {printable(directory)} (no lineage file, no live view){fix}",
            file=sys.stderr,
        )
        return CHECK_NO_JOB
    user_defined = lineage.section("user_defined") if lineage is not None else None
    standing = [
        record for record in job_records(state, user_defined) if record["kind"] in ACTIONABLE_KINDS
    ]
    for record in standing:
        print(printable(f"{record['kind']}: {record.get('message', '')}"))
    return CHECK_VERDICT if standing else 0


def _without_lineage(
    args: argparse.Namespace, directory: str, state: Mapping[str, Any] | None, live: list[str]
) -> int:
    """A job still training (no lineage file yet): its live view, else an error.

    The live view writes its state file when training starts and every interval; one
    not rewritten for ``STOPPED_INTERVALS`` intervals is of a job that stopped without
    its merge, and only then is the merge named.
    """
    if args.check:
        return _check(directory, state, None)
    silent = _silent_for(state) if state is not None else None
    if state is not None and args.json:
        running = {
            "summary_dir": directory,
            "running": not state.get("final") and silent is None,
            "live": state,
            "verdicts": job_records(state, None),
        }
        sys.stdout.write(json.dumps(running, indent=2) + "\n")
        return 0
    if live and not args.json:
        print("\n".join(printable(line) for line in live))
        if silent is not None:
            shown = printable(args.dir)
            seconds, interval = silent
            print(
                f"its live view was last written {seconds:.0f} s ago and is rewritten every "
                f"{interval:g} s while the job trains: the job stopped "
                f"without its merge? `{PROGRAM} merge {shlex.quote(shown)}` writes the job's "
                "view from its rank directories"
            )
        return 0
    raise CommandLineError(_no_lineage_problem(directory, args.dir)) from None


#: A live state file not rewritten for this many of its intervals (and at least
#: STOPPED_FLOOR seconds) is of a job that stopped: ``show`` names the merge.
STOPPED_INTERVALS = 3
STOPPED_FLOOR = 60.0


def _silent_for(state: Mapping[str, Any]) -> tuple[float, float] | None:
    """(seconds since a running job's live state was last written, its interval) when it
    is overdue (None: final, on time, or no interval known)."""
    interval, written = state.get("interval_seconds"), state.get("wall_time")
    if state.get("final") or not isinstance(interval, (int, float)):
        return None
    if not isinstance(written, (int, float)) or isinstance(written, bool):
        return None
    silent = time.time() - written
    overdue = silent > max(STOPPED_INTERVALS * interval, STOPPED_FLOOR)
    return (silent, float(interval)) if overdue else None


def _unmerged_ranks(directory: str) -> list[int]:
    """The ranks whose ``rank_<n>`` directories under ``directory`` hold run files."""
    from rankscribe.lineage.record._discovery import runs_below  # noqa: PLC0415
    from rankscribe.ranks.files import parse_rank_dir_name  # noqa: PLC0415

    return sorted(
        rank
        for rank in (parse_rank_dir_name(name) for name in runs_below(directory) if "/" not in name)
        if rank is not None
    )


def _no_lineage_problem(directory: str, shown_dir: str) -> str:
    """Why ``show`` has nothing to show, and where to look instead.

    A job directory whose ranks wrote files but that has no merged lineage
    (the job was interrupted, or killed before its end) names the merge; a
    directory with runs below it (Lightning's ``save_dir/name``, above its
    ``version_<n>``) names them.
    """
    shown = printable(shown_dir)
    ranks = _unmerged_ranks(directory)
    if ranks:
        listed = ", ".join(f"rank_{rank}" for rank in ranks[:5])
        listed += " ..." if len(ranks) > 5 else ""
        return (
            f"no merged lineage in {shown}: it holds the rank directories of a job ({listed}) "
            f"but not the job's lineage, which rank 0 writes when training ends (was the job "
            f"interrupted?); run `{PROGRAM} merge {shlex.quote(shown)}` to write it from the "
            f"rank directories"
        )
    problem = (
        f"no lineage file in {shown} (lineage files are named *summary.<n>*_lineage; a run "
        f"writes one when it records its lineage)"
    )
    below = runs_below_text(directory, shown_dir, with_lineage=True)
    if below:
        problem += (
            f"; the runs below it: {below} (show one of them; "
            f"`{PROGRAM} query {shlex.quote(shown)}` lists them all)"
        )
    return problem


def _machine(directory: str, user_defined: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Each rank's machine summary (docs/system-metrics.md), and how many ranks the job has.

    A job's rank directories (at most 16 and the ranks a straggler verdict
    names, as the evidence reads them), else the run directory itself.
    """
    from rankscribe.jobview.parts import (  # noqa: PLC0415 - numpy, for show
        SYSTEM_TAGS,
        machine_summary,
        read_readings,
    )
    from rankscribe.ranks.files import parse_rank_dir_name  # noqa: PLC0415
    from rankscribe.writer import WriterError, reader  # noqa: PLC0415

    ranks = _unmerged_ranks(directory)
    if ranks:
        named = str(user_defined.get("job/straggler_ranks", "")).split(",")
        readings = read_readings(directory, [int(rank) for rank in named if rank.isdigit()])
        return machine_summary(readings), len(ranks)
    try:
        columns = reader.scalar_arrays(directory, SYSTEM_TAGS)
    except (OSError, WriterError):
        return [], 0  # the lineage is shown; a summary file that cannot be read is left out
    rank = parse_rank_dir_name(os.path.basename(os.path.normpath(directory)))
    return machine_summary({rank or 0: dict(columns)} if columns else {}), 1


def _machine_lines(rows: list[dict[str, Any]], ranks: int) -> list[str]:
    from rankscribe.jobview.parts import machine_lines  # noqa: PLC0415

    if not rows:
        return []
    out = ["machine (the median of each rank's samples, docs/system-metrics.md):"]
    out += [f"  {line}" for line in machine_lines(rows)]
    if ranks > len(rows):
        out.append(f"  ({ranks - len(rows)} other ranks not read: their rank_<n> directories)")
    return out


def _show(args: argparse.Namespace) -> int:
    directory = existing_directory(args.dir)
    from rankscribe.jobview import state_lines  # noqa: PLC0415 - numpy, for show
    from rankscribe.jobview.parts import read_live_state  # noqa: PLC0415 - numpy, for show

    state = read_live_state(directory)
    live = state_lines(state)  # a job still training: its live view (docs/job-view.md)
    try:
        lineage = get_run_lineage(directory)
    except LineageFileNotFoundError:
        return _without_lineage(args, directory, state, live)
    if lineage is None:
        print(
            f"{PROGRAM}: {printable(directory)} has lineage files but none could be read",
            file=sys.stderr,
        )
        return 1
    if args.check:
        return _check(directory, state, lineage)
    result = lineage.summary_info()
    result["user_defined"] = lineage.section("user_defined")
    result["verdicts"] = job_records(state, result["user_defined"])
    if state is not None:
        result["live"] = state
    machine, ranks = _machine(directory, result["user_defined"])
    result["machine"] = machine
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")  # JSON escapes control bytes
        return 0
    rows, left_out = _table_rows(result)
    out = [
        f"run {printable(result['summary_dir'])}",
        plain_table(["section", "key", "value", "query name"], rows),
    ]
    if left_out:
        out.append(
            f"{left_out} empty user_defined value{'s' if left_out != 1 else ''} not shown "
            f"(--json shows every key)"
        )
    if "loss" in result.get("algorithm", {}) and "ranks_reported" in result["user_defined"]:
        # A merged job's loss is not any one rank's (docs/integrations.md, "Which loss is which").
        out.append(
            "loss: the mean of the ranks' final losses (user_defined loss_min and loss_max: "
            "their extremes; one rank's own: show its rank_<r> directory)"
        )
    graph = result.get("dataset_graph") or {}
    if graph:
        out.append(f"dataset_graph: {printable(_graph_line(graph))}")
    verdicts = _verdict_lines(result["user_defined"])
    if verdicts:
        out.append("job verdicts:")
        out += [f"  {printable(line)}" for line in verdicts]
    out += _machine_lines(machine, ranks)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def add_show_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    show = commands.add_parser(
        "show",
        help="the lineage of one run directory",
        epilog=f"{NAMES_NOTE}\n\n{EXIT_NOTE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("dir", help="the run directory")
    show.add_argument(
        "--json",
        action="store_true",
        help="print JSON instead of a table (with a 'verdicts' list of records)",
    )
    show.add_argument(
        "--check",
        action="store_true",
        help=f"print the standing straggler, divergence and gradient verdicts only; exit "
        f"{CHECK_VERDICT} "
        f"when one stands, 0 when none does, {CHECK_NO_JOB} when DIR holds no job",
    )
    show.set_defaults(handler=_show)
