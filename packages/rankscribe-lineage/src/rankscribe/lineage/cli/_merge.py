"""``rankscribe-lineage merge RUN_DIR`` and ``hparams BASE``: the commands that write files."""

from __future__ import annotations

import argparse
import os

from rankscribe.lineage._checks import int_argument, ranks_text, seconds_argument
from rankscribe.lineage._words import counted
from rankscribe.lineage.cli._terminal import (
    CommandLineError,
    existing_directory,
    printable,
    runs_below_text,
)
from rankscribe.lineage.errors import LineageError

# The merge, the job view and the hparams writer (the writer, numpy, protobuf) are
# imported by the commands that use them: every other command starts without them.

__all__ = ["add_hparams_command", "add_merge_command"]


def _merge(args: argparse.Namespace) -> int:
    from rankscribe.jobview import verdict_lines  # noqa: PLC0415
    from rankscribe.jobview.parts import ranges_text  # noqa: PLC0415
    from rankscribe.lineage.merge._merge import merge_run_dir, rank_dirs  # noqa: PLC0415

    directory = existing_directory(args.run_dir)
    found = sorted(rank_dirs(directory))
    if args.world_size is not None and found and found[-1] >= args.world_size:
        raise CommandLineError(
            f"--world-size {args.world_size} is less than the ranks found in "
            f"{printable(args.run_dir)}: rank dirs of ranks {ranks_text(found)}; pass "
            f"--world-size {found[-1] + 1} or more"
        )
    try:
        outcome = merge_run_dir(args.run_dir, timeout=args.timeout, world_size=args.world_size)
    except LineageError as error:
        below = "" if found else runs_below_text(directory, args.run_dir)
        if not below:
            raise
        # Lightning's save_dir/name: the jobs are its version_<n> dirs.
        raise CommandLineError(
            f"{printable(error.message)}; the runs below it: {below} (merge one of them) "
            f"[{type(error).__name__} {error.error_code}]"
        ) from None
    reported = ",".join(str(rank) for rank in outcome.ranks_reported)
    line = f"wrote {printable(str(outcome.path))} (ranks {reported}"
    if outcome.ranks_missing:
        line += f"; missing {ranges_text(outcome.missing_ranges, limit=300)}"
    print(line + ")")
    if outcome.job_view is not None:
        for path in outcome.job_view.paths:
            print(f"wrote {printable(str(path))} (job view)")
        for verdict in verdict_lines(outcome.job_view.verdicts):
            print(f"  {printable(verdict)}")
    return 0


def _hparams(args: argparse.Namespace) -> int:
    from rankscribe.lineage._hparams import write_hparams  # noqa: PLC0415

    existing_directory(args.base)
    written = write_hparams(args.base, args.out)
    out = printable(os.path.dirname(written[0]))
    print(f"wrote HParams for {counted(len(written) - 1, 'run')} under {out}")
    print(f"view them with: tensorboard --logdir {out}")
    return 0


def add_merge_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = commands.add_parser(
        "merge",
        help="merge the rank_* dirs of a distributed job: its lineage, cross-rank curves, verdicts",
    )
    merge.add_argument("run_dir", help="the job directory holding rank_0, rank_1, ...")
    merge.add_argument(
        "--timeout",
        type=seconds_argument,
        default=0.0,
        help="seconds to wait for missing ranks before merging what is there (default 0)",
    )
    merge.add_argument("--world-size", type=int_argument(1), help="how many ranks the job had")
    merge.set_defaults(handler=_merge)


def add_hparams_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hparams = commands.add_parser("hparams", help="write TensorBoard HParams summaries")
    hparams.add_argument("base", help="the base directory")
    hparams.add_argument("--out", help="output directory (default BASE/tensorboard-hparams)")
    hparams.set_defaults(handler=_hparams)
