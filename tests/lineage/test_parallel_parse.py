"""A cold scan of many runs parses them in helper processes too: the same answer, or a fallback."""

from __future__ import annotations

import gc
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_summary_lineage

# The parse in helper processes hides the scan's counts from the file system.
# private: the parse pool (its threshold, worker module and processes) and the scan's counts
from rankscribe.lineage.index import _cache, _parallel
from tests.lineage._documented import INDEX_NAME


@pytest.fixture
def base(tmp_path: Path, lw: Any) -> Path:
    root = tmp_path / "base"
    for index in range(40):
        lw.write(
            root / f"run{index:02d}",
            [
                lw.graph({"op_type": f"G{index % 3}"}),
                lw.custom({"seed": index}),
                lw.train(network=f"Net{index}", loss=index / 40),
                lw.eval({"acc": index}),
            ],
            mtime=1_000_000 + index,
        )
    (root / "broken").mkdir()
    broken = root / "broken" / "events.out.events.summary.1.0.vm_lineage"
    broken.write_bytes(b"garbage!" * 4)
    # Older than the index by more than a timestamp tick: its index entry is trusted.
    os.utime(broken, (1_000_000, 1_000_000))
    _cache.forget_scans()
    return root


def answers(base: Path) -> tuple[Any, Any]:
    condition = {"sorted_name": "metric/acc", "sorted_type": "descending", "limit": 100}
    return (
        filter_summary_lineage(str(base), condition, use_index=False),
        filter_summary_lineage(
            str(base), {"lineage_type": {"eq": "dataset"}, "limit": 100}, use_index=False
        ),
    )


def test_helpers_give_the_same_answer(
    base: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    expected = answers(base)
    monkeypatch.setattr(_parallel, "PARALLEL_FROM_RUNS", 4)
    monkeypatch.setenv(_parallel.WORKERS_VARIABLE, "3")
    started: list[list[str]] = []
    real_popen = _parallel.subprocess.Popen

    def popen(argv: list[str], **kwargs: Any) -> Any:
        started.append(argv)
        return real_popen(argv, **kwargs)

    monkeypatch.setattr(_parallel.subprocess, "Popen", popen)
    with caplog.at_level(logging.WARNING):
        scan = _cache.scan_base_dir(str(base))
    assert started == [[sys.executable, "-m", "rankscribe.lineage.index._parse_worker"]] * 2
    assert scan.parsed_runs == 41
    assert any("broken" in record.getMessage() for record in caplog.records)
    assert (base / INDEX_NAME).is_file()
    assert answers(base) == expected
    _cache.forget_scans()
    condition = {"sorted_name": "metric/acc", "sorted_type": "descending", "limit": 100}
    assert filter_summary_lineage(str(base), condition) == expected[0]  # from the index


def test_a_failing_helper_costs_only_time(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    condition = {"sorted_name": "metric/acc", "sorted_type": "descending", "limit": 100}
    expected = filter_summary_lineage(str(base), condition, use_index=False)
    monkeypatch.setattr(_parallel, "PARALLEL_FROM_RUNS", 4)
    monkeypatch.setenv(_parallel.WORKERS_VARIABLE, "2")
    monkeypatch.setattr(_parallel, "WORKER_MODULE", "rankscribe.lineage.no_such_module")
    assert filter_summary_lineage(str(base), condition) == expected
    assert _cache.scan_base_dir(str(base)).reused_runs == 41  # indexed all the same


def test_few_runs_use_no_helper(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no helper for a small scan")

    monkeypatch.setattr(_parallel.subprocess, "Popen", refuse)
    assert _cache.scan_base_dir(str(base)).parsed_runs == 41


def test_many_changed_runs_are_parsed_again_with_helpers(
    base: Path, lw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cache.scan_base_dir(str(base))
    for index in range(0, 40, 2):  # rewritten after the index: same names, new content
        lw.write(
            base / f"run{index:02d}", [lw.train(network=f"New{index}")], mtime=2_000_000 + index
        )
    _cache.forget_scans()
    expected = answers(base)
    monkeypatch.setattr(_parallel, "PARALLEL_FROM_RUNS", 4)
    monkeypatch.setenv(_parallel.WORKERS_VARIABLE, "2")
    started: list[Any] = []
    real_popen = _parallel.subprocess.Popen
    monkeypatch.setattr(
        _parallel.subprocess,
        "Popen",
        lambda argv, **kwargs: started.append(argv) or real_popen(argv, **kwargs),
    )
    scan = _cache.scan_base_dir(str(base))
    assert (scan.parsed_runs, len(started)) == (20, 1)
    assert answers(base) == expected
    networks = {
        item["model_lineage"]["network"]
        for item in filter_summary_lineage(str(base), {"limit": 100})["object"]
    }
    assert {"New0", "New38", "Net1", "Net39"} <= networks


def test_a_helper_answers_in_parts_that_one_unpickler_reads(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import pickle

    # private: the parse worker's protocol, no public door
    from rankscribe.lineage.index import _parse_worker

    # Each job: the run's path, its relative path, and its directory's mtime taken before
    # the listing (as the scan hands them to a helper).
    jobs = [
        (str(base / name), f"./{name}", os.stat(base / name).st_mtime_ns)
        for name in sorted(os.listdir(base))
        if name.startswith("run")
    ]
    answer = io.BytesIO()

    class Pipes:
        def __init__(self, data: io.BytesIO) -> None:
            self.buffer = data

    monkeypatch.setattr(_parse_worker, "ANSWER_PART", 7)
    monkeypatch.setattr(sys, "stdin", Pipes(io.BytesIO(pickle.dumps(("directory", jobs)))))
    monkeypatch.setattr(sys, "stdout", Pipes(answer))
    # main() is a helper process's whole life: it silences logging and pauses the cycle
    # collector for good; give this test process both back.
    gc_was_enabled = gc.isenabled()
    try:
        assert _parse_worker.main() == 0
    finally:
        logging.disable(logging.NOTSET)
        if gc_was_enabled:
            gc.enable()
    answer.seek(0)
    answers = pickle.Unpickler(answer)
    parts = [answers.load() for _ in range(6)]  # 40 runs in parts of 7
    with pytest.raises(EOFError):
        answers.load()
    assert [len(part) for part in parts] == [7, 7, 7, 7, 7, 5]
    outcomes = [outcome for part in parts for outcome in part]
    runs = [run for run, _, _ in outcomes]
    assert [run.relative_path for run in runs] == [job[1] for job in jobs]
    # The directory's mtime is taken by the helper that lists it.
    assert [run.dir_mtime_ns for run in runs] == [os.stat(job[0]).st_mtime_ns for job in jobs]
    summaries = [outcome[1][0] for outcome in outcomes]
    assert [summary["fields"]["network"] for summary in summaries] == [
        f"Net{index}" for index in range(40)
    ]
    # One graph dict per distinct graph, shared across parts (one pickler's memo).
    assert len({id(summary["graph_dict"]) for summary in summaries}) == 3
