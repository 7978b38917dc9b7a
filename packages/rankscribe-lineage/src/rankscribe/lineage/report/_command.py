"""``rankscribe-lineage report BASE [-o FILE]``: the runs and jobs of a base dir on one page.

The page (``docs/report.md`` describes it) is one self-contained HTML file:
the runs table, parallel coordinates of hyper-parameters against results,
each job's curves (cross-rank mean within min..max, each rank on demand, step
time per rank with the straggler marked, the job view's verdicts) and the
single-process runs' curves. Its charts are plotly's, which is the optional
extra ``rankscribe-lineage[report]``: the lineage package itself never
imports plotly, and without it the command says what to install.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from rankscribe.lineage._checks import check_int, check_optional_int, int_argument
from rankscribe.lineage._words import counted
from rankscribe.lineage.errors import (
    LineageDirNotExistError,
    LineageFileNotFoundError,
    ReportUnavailableError,
)
from rankscribe.lineage.report._limits import DEFAULT_MAX_POINTS

__all__ = [
    "DEFAULT_REPORT_NAME",
    "ReportUnavailableError",
    "ReportWritten",
    "add_report_command",
    "require_plotly",
    "write_report",
]

DEFAULT_REPORT_NAME = "report.html"
INSTALL_HINT = "pip install 'rankscribe-lineage[report]'"
_PROGRAM = "rankscribe-lineage"


def require_plotly() -> None:
    """Raise :class:`ReportUnavailableError` unless plotly can be imported."""
    if importlib.util.find_spec("plotly") is None:
        raise ReportUnavailableError(
            f"the report draws its charts with plotly, which is not installed: {INSTALL_HINT}"
        )


@dataclass
class ReportWritten:
    path: str
    runs: int
    jobs: int
    single_runs: int
    size: int
    seconds: float


def write_report(
    base: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    max_points: int = DEFAULT_MAX_POINTS,
    workers: int | None = None,
    group_by: str | Sequence[str] | None = None,
) -> ReportWritten:
    """Write the report of the runs under ``base`` to ``output`` (default ``BASE/report.html``).

    ``group_by`` (keys, as ``rankscribe-lineage group --by`` takes them) adds
    a groups section: the runs grouped by those keys, each group's curves as
    a band and its final values as mean ± std (``docs/groups.md``).

    The file is written whole or not at all (``files.atomic_write``, mode
    0600: a report shows paths and settings that are nobody else's business).

    Raises:
        ReportUnavailableError: plotly is not installed.
        LineageDirNotExistError: ``base`` is not a directory.
        LineageFileNotFoundError: ``base`` holds no run (no lineage, summary
            file or ``rank_<n>`` directory in it or its subdirectories).
        LineageParamTypeError: ``max_points`` or ``workers`` is not an int.
        LineageParamValueError: ``max_points`` is below 4 or ``workers`` below 1,
            or a ``group_by`` key is no key to group by.
        OSError: the file could not be written.
    """
    started = time.perf_counter()
    require_plotly()
    directory = os.fspath(base)
    if not os.path.isdir(directory):
        raise LineageDirNotExistError(f"BASE {directory!r} is not a directory")
    check_int("max_points", max_points, minimum=4)
    check_optional_int("workers", workers, minimum=1)
    target = (
        os.fspath(output) if output is not None else os.path.join(directory, DEFAULT_REPORT_NAME)
    )
    # The job view, the reader, numpy: imported by the command that draws them only.
    from rankscribe.lineage.report._data import read_report_data  # noqa: PLC0415
    from rankscribe.lineage.report._page import render_page  # noqa: PLC0415
    from rankscribe.ranks.files import atomic_write  # noqa: PLC0415

    data = read_report_data(directory, max_points=max_points, workers=workers)
    if not data.runs:
        raise LineageFileNotFoundError(
            f"no runs under {directory!r}: no lineage file, summary file or rank_<n> "
            "directory in it or its subdirectories"
        )
    groups = None
    if group_by is not None:
        from rankscribe.lineage.report._groups import read_groups  # noqa: PLC0415

        keys = [group_by] if isinstance(group_by, str) else list(group_by)
        groups = read_groups(directory, keys, max_points=max_points, workers=workers)
    page = "".join(render_page(data, groups=groups)).encode("utf-8")
    atomic_write(target, [page], mode=0o600)
    return ReportWritten(
        path=target,
        runs=len(data.runs),
        jobs=len(data.jobs),
        single_runs=len(data.runs) - len(data.jobs),
        size=len(page),
        seconds=time.perf_counter() - started,
    )


def _report(args: argparse.Namespace) -> int:
    try:
        written = write_report(
            args.base,
            args.output,
            max_points=args.max_points,
            workers=args.workers,
            group_by=args.group_by,
        )
    except ReportUnavailableError as error:
        print(f"{_PROGRAM}: error: {error.message}", file=sys.stderr)
        return 1
    print(
        f"wrote {written.path} ({counted(written.runs, 'run')}: {counted(written.jobs, 'job')}, "
        f"{written.single_runs} single-process; {written.size / 1e6:.1f} MB "
        f"in {written.seconds:.1f} s)"
    )
    return 0


def add_report_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``report`` among the CLI's subcommands."""
    report = commands.add_parser(
        "report",
        help="one self-contained HTML page of the runs and jobs under BASE "
        "(needs rankscribe-lineage[report])",
        description="Write one HTML file (it opens from disk, no network) with the runs table, "
        "hyper-parameters against results, each job's curves and verdicts, and the "
        "single-process runs' curves.",
    )
    report.add_argument("base", help="the base directory (runs are it and its subdirectories)")
    report.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help=f"the HTML file to write (default BASE/{DEFAULT_REPORT_NAME})",
    )
    report.add_argument(
        "--max-points",
        type=int_argument(4),
        default=DEFAULT_MAX_POINTS,
        metavar="N",
        help="longer curves are drawn downsampled to N points, keeping each bucket's min "
        f"and max (default {DEFAULT_MAX_POINTS})",
    )
    report.add_argument(
        "--workers",
        type=int_argument(1),
        metavar="N",
        help="processes reading the summary files (default: one per CPU, at most 8)",
    )
    report.add_argument(
        "--group-by",
        type=_keys,
        metavar="KEY[,KEY...]",
        help="add a groups section: the runs grouped by these lineage keys (as "
        "'rankscribe-lineage group --by'), each group's curves as a band and its final "
        "values as mean ± std",
    )
    report.set_defaults(handler=_report)


def _keys(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one key, e.g. --group-by learning_rate")
    return names
