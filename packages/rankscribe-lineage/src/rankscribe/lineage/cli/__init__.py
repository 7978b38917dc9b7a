"""``rankscribe-lineage``: look at, query, merge and export run lineages.

    rankscribe-lineage show DIR [--json]
    rankscribe-lineage query BASE [--where EXPR] [--sort KEY]... [--limit N]
                             [--columns NAMES] [--format table|json|csv]
    rankscribe-lineage merge RUN_DIR [--timeout SECONDS] [--world-size N]
                             (the merged lineage and the job view: cross-rank
                             curves and verdicts, see rankscribe.jobview._view)
    rankscribe-lineage hparams BASE [--out DIR]
    rankscribe-lineage group BASE --by KEY[,KEY...] [--where EXPR] [--sort KEY]...
                             (groups of runs: mean ± std, curves under BASE/_groups)
    rankscribe-lineage report BASE [-o FILE] [--group-by KEY,...]   (one HTML page; [report])

A mistake (a bad path, a filter that does not parse, nothing to merge) is one
line on stderr and exit status 1 — with the filter and a caret under the
offending column for a filter that does not parse; a usage error is exit 2.
Warnings about skipped files go to stderr too. Output cut short by its reader
(``query ... | head``) ends the command quietly, as Unix tools end.

Each command lives in its own module (``_show``, ``_query``, ``_merge``);
what they print goes through ``_terminal`` (escaping, widths) and ``_table``
(columns and numbers). ``docs/lineage-queries.md`` describes the commands.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import textwrap
import threading
from collections.abc import Sequence

from rankscribe.jobview.errors import JobViewError
from rankscribe.lineage.cli._group import add_group_command
from rankscribe.lineage.cli._merge import add_hparams_command, add_merge_command
from rankscribe.lineage.cli._query import add_query_command
from rankscribe.lineage.cli._show import NAMES_NOTE, add_show_command
from rankscribe.lineage.cli._terminal import PROGRAM, CommandLineError, EscapingFormatter, printable
from rankscribe.lineage.errors import LineageError, LineageExpressionError, LineageFileNotFoundError
from rankscribe.lineage.query._conditions import FIELD_MAPPING
from rankscribe.lineage.report._command import add_report_command

# What a shell reports for a command ended by SIGPIPE (128 + the signal's number).
_BROKEN_PIPE_STATUS = 128 + getattr(signal, "SIGPIPE", 13)


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
        + NAMES_NOTE
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Look at, query, merge and export the lineage of runs."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    add_show_command(commands)
    add_query_command(commands, _fields_help())
    add_merge_command(commands)
    add_hparams_command(commands)
    add_group_command(commands)
    add_report_command(commands)  # report BASE [-o FILE]: one HTML page
    return parser


def _error(text: str) -> None:
    print(f"{PROGRAM}: error: {text}", file=sys.stderr)


def _set_up_logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(EscapingFormatter(f"{PROGRAM}: warning: %(message)s"))
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(handler)
        root.setLevel(logging.WARNING)


def _reader_went_away() -> int:
    """Stdout's reader closed it (``| head``): end quietly, as Unix tools do.

    Python would otherwise report the broken pipe again when it flushes
    stdout at exit: stdout is pointed at /dev/null first.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (captured)
        pass
    return _BROKEN_PIPE_STATUS


def _end_at_once(code: int) -> None:
    """End the program now, its output written, without freeing its objects one by one.

    A query over 100,000 runs holds millions of small objects; Python's
    teardown frees each (0.1 s of a 1.5 s query, ``tools/bench/cli.py``),
    and the system frees the whole process at once. Only when the program
    was run as a command (never a caller's ``main([...])``), its output is
    flushed, and nothing else runs: no other thread, no child process.
    """
    logging.shutdown()  # every handler flushed, as at a normal exit
    sys.stderr.flush()
    processes = sys.modules.get("multiprocessing")
    if threading.active_count() == 1 and not (processes and processes.active_children()):
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _set_up_logging()
    try:
        code = int(args.handler(args))
        sys.stdout.flush()  # a reader gone away shows here, not at exit
        if argv is None and getattr(args, "ends_at_once", False):
            _end_at_once(code)
        return code
    except BrokenPipeError:
        return _reader_went_away()
    except CommandLineError as problem:
        _error(str(problem))
    except LineageExpressionError as error:
        # The place follows the problem, the advice follows the place ("unknown field 'los'
        # at column 1; did you mean 'loss'?"), never a list of every field.
        detail, separator, advice = printable(error.detail).partition("; ")
        _error(f"{detail} at column {error.column + 1}{separator}{advice}")
        print(f"  {printable(error.expression)}\n  {' ' * error.column}^", file=sys.stderr)
    except LineageFileNotFoundError as error:
        _error(printable(error.message))
    except LineageError as error:
        _error(f"{printable(error.message)} [{type(error).__name__} {error.error_code}]")
    except JobViewError as error:  # the job view's own, as the merge or show met it
        _error(f"{printable(str(error))} [{type(error).__name__}]")
    except OSError as error:
        _error(printable(str(error)))
    return 1
