"""The report as a user gets it: ``rankscribe-lineage report`` run in-process, and the
charts of the page it wrote, read back from the page's own JSON."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rankscribe.lineage import RunLineage
from rankscribe.lineage.cli import main
from rankscribe.lineage.recording import HyperParameters, TrainLineageInfo, write_merged_lineage
from rankscribe.writer import SummaryRecord


@dataclass(frozen=True)
class Written:
    """What ``rankscribe-lineage report`` says it wrote."""

    path: Path
    runs: int
    jobs: int
    single_runs: int


_WROTE = re.compile(r"wrote (.+) \((\d+) runs?: (\d+) jobs?, (\d+) single-process; ")


def write_page(base: str | Path, output: str | Path | None = None, *options: str) -> Written:
    """``rankscribe-lineage report BASE [-o OUTPUT] [options]``, and what it said it wrote."""
    argv = ["report", str(base), *(["-o", str(output)] if output is not None else []), *options]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(argv) == 0
    said = _WROTE.match(printed.getvalue())
    assert said, printed.getvalue()
    return Written(Path(said[1]), int(said[2]), int(said[3]), int(said[4]))


def page_figures(page: str) -> list[dict[str, Any]]:
    """The page's charts as plotly figures ({"data": [...], "layout": {...}}): the JSON each
    ``Plotly.newPlot("<id>", data, layout, config)`` call of the page holds."""
    decoder = json.JSONDecoder()
    figures = []
    for call in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page):
        data, end = decoder.raw_decode(page, call.end())
        between = re.match(r"\s*,\s*", page[end:])
        assert between, page[end : end + 40]
        layout, _ = decoder.raw_decode(page, end + between.end())
        figures.append({"data": data, "layout": layout})
    return figures


def decoded(array: Any) -> np.ndarray:
    """A plotly typed array (``{"dtype": ..., "bdata": base64}``) or a plain list, as NumPy."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
    return np.asarray(array)


def job_page(
    directory: Path, verdicts: dict[str, Any], *, ranks: int = 4, steps: int = 3, loss: bool = False
) -> str:
    """The report page of one job of ``ranks`` ranks whose merged lineage holds ``verdicts``
    (under ``directory/base/job``); a collective evened the step times out, so they are the
    same on every rank; with ``loss``, each rank records a falling ``loss`` too."""
    job = directory / "base" / "job"
    for rank in range(ranks):
        with SummaryRecord(job / f"rank_{rank}", rank=rank) as record:
            for step in range(1, steps + 1):
                if loss:
                    record.add_value("scalar", "loss", 1.0 / step)
                record.add_value("scalar", "rankscribe/step_time", 0.05)
                record.record(step)
    train = TrainLineageInfo(hyper_parameters=HyperParameters(optimizer="SGD"))
    lineage = RunLineage.from_records(str(job), train=train)
    write_merged_lineage(job, lineage, user_defined=verdicts)
    return write_page(directory / "base", directory / "report.html").path.read_text("utf-8")
