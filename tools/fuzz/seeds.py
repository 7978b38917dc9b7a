"""Seed inputs for the fuzzer: small files made by RankScribe's writer and by MindSpore.

A coverage-guided fuzzer mutates what it starts from, so the seeds hold every
kind of record the readers decode: scalars, a histogram, a small image, a
tensor, a graph, and the golden MindSpore files (lineage among them).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "compat" / "data" / "mindspore-2.10"


def _writer_run(directory: Path) -> None:
    from rankscribe.writer import SummaryRecord

    rng = np.random.default_rng(0)
    with SummaryRecord(str(directory), formats=("mindinsight", "tensorboard")) as record:
        for step in (1, 2):
            record.add_value("scalar", "loss", 1.0 / step)
            record.add_value("histogram", "fc/weight", rng.standard_normal((4, 4)))
            record.add_value("image", "input", rng.random((1, 3, 4, 4)))
            record.add_value("tensor", "fc/bias", np.arange(3, dtype=np.int64))
            record.record(step)


def write_seeds(target: str, folder: Path) -> Path:
    """Fill ``folder`` with the seed files of ``target`` ("summary", "tensorboard", "lineage")."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        run = Path(scratch) / "run"
        _writer_run(run)
        made = sorted(path for path in run.iterdir() if path.is_file())
        if target == "summary":
            sources = [p for p in made if p.name.endswith("_MS")]
            sources += sorted(GOLDEN.glob("*/*_MS"))
        elif target == "tensorboard":
            sources = [p for p in made if "tfevents" in p.name]
        else:
            sources = sorted(GOLDEN.glob("*/*_lineage"))
        for number, source in enumerate(sources):
            shutil.copyfile(source, folder / f"seed-{number:02d}")
    return folder
