"""Review: an offline merge given a NaN timeout must not wait forever for a missing rank."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import LineageMergeError, merge_run_dir
from rankscribe.lineage.cli import main


def _job_missing_rank_1(lw: Any, tmp_path: Path) -> Path:
    job = tmp_path / "job"
    lw.write(job / "rank_0", [lw.train(optimizer="Adam", loss=0.5, device_num=2)])
    return job


def _finishes(call: Any) -> tuple[bool, list[BaseException]]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as error:  # reported to the test
            errors.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(5.0)
    return not thread.is_alive(), errors


def test_nan_timeout_is_refused_instead_of_waiting_forever(lw: Any, tmp_path: Path) -> None:
    job = _job_missing_rank_1(lw, tmp_path)
    done, errors = _finishes(lambda: merge_run_dir(job, timeout=float("nan")))
    assert done, "merge_run_dir(timeout=nan) never returned while rank 1 was missing"
    assert len(errors) == 1 and isinstance(errors[0], LineageMergeError)
    assert "timeout" in str(errors[0])


def test_cli_merge_with_nan_timeout_exits_with_an_error(
    lw: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _job_missing_rank_1(lw, tmp_path)
    codes: list[int] = []
    done, errors = _finishes(lambda: codes.append(main(["merge", str(job), "--timeout", "nan"])))
    assert done, "`rankscribe-lineage merge --timeout nan` never returned"
    assert not errors
    assert codes != [0]
    assert "timeout" in capsys.readouterr().err
