#!/usr/bin/env python3
"""Coverage-guided fuzzing of RankScribe's readers with atheris (libFuzzer for Python).

    python tools/fuzz/fuzz.py summary -runs=400000 -rss_limit_mb=2048
    python tools/fuzz/fuzz.py lineage -max_total_time=600

The first argument names a target of ``tools/fuzz/targets.py`` (``summary``,
``tensorboard``, ``lineage``, ...); the rest go to libFuzzer. Each target fails an
input that takes more than ``targets.TIME_LIMIT`` (1 s) of CPU time; libFuzzer's
own ``-timeout`` (wall time, 10 s unless given) catches an input that blocks. The run starts from
seed files made by RankScribe's own writer (a run with every kind of value and
a lineage), plus the golden MindSpore files of ``tests/compat/data``, and
keeps its growing corpus in ``.cache/fuzz/<target>/``. An input that makes a
target fail is written by libFuzzer as ``crash-<hash>`` in the working
directory: after fixing it, copy it into ``tools/fuzz/corpus/<target>/``, where
the writer and lineage test envs replay it on every run.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The targets import the readers lazily (the writer's test env has no lineage
# package); importing them here, inside the context, gets them instrumented.
INSTRUMENTED = (
    "rankscribe.writer",
    "rankscribe.writer.reader",
    "rankscribe.writer.dump",
    "rankscribe.lineage",
    "rankscribe.lineage.cli",
    "rankscribe.jobview",
    "rankscribe.jobview._view",
    "rankscribe.jobview.parts",
    "rankscribe.jobview.feed",
    "rankscribe.lineage.recording",
    "rankscribe.ranks",
    "rankscribe.ranks.files",
    "rankscribe.ranks.jsondata",
    "rankscribe.ranks.backends._rendezvous",
)
# Where the target needs it (the checkpoint reader is the collector's).
OPTIONAL_INSTRUMENTED = ("rankscribe.collector",)
with atheris.instrument_imports(include=["rankscribe"]):
    for module in INSTRUMENTED:
        importlib.import_module(module)
    for module in OPTIONAL_INSTRUMENTED:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    import seeds
    import targets


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in targets.TARGETS:
        print(
            f"usage: fuzz.py {{{','.join(targets.TARGETS)}}} [libFuzzer options]", file=sys.stderr
        )
        return 2
    name = sys.argv[1]
    target = targets.TARGETS[name]
    work = ROOT / ".cache" / "fuzz" / name
    work.mkdir(parents=True, exist_ok=True)
    seed_dir = seeds.write_seeds(name, ROOT / ".cache" / "fuzz" / f"{name}-seeds")

    def one_input(data: bytes) -> None:
        target(data)

    options = sys.argv[2:]
    if not any(option.startswith("-timeout=") for option in options):
        options.append("-timeout=10")
    argv = [sys.argv[0], *options, str(work), str(seed_dir)]
    regression = targets.CORPUS / name
    if regression.is_dir():
        argv.append(str(regression))
    atheris.Setup(argv, one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
