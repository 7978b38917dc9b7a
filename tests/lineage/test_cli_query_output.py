"""What `query` prints after its table, and what it says about a misspelt name.

Each test failed before its change: `query` printed no verdict lines (only the demo
did, in reverse order), its "columns not shown" footer ran over several lines, and
`--where "los < 1"` got every field listed with "at column 1" trailing the list, an
unknown `user_defined/` key every key there is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_runs
from rankscribe.lineage.errors import LineageExpressionError
from tests.lineage._cli_run import ERROR, run


@pytest.fixture(autouse=True)
def no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


def verdicts(straggler: int) -> dict[str, Any]:
    """The job keys a merge writes: one straggler (or none), ranks that agree."""
    return {
        "job/straggler_rank": straggler,
        "job/straggler_ranks": str(straggler) if straggler >= 0 else "",
        "job/straggler_timing": "rankscribe/step_time",
        "job/straggler_slowest_share": 0.9 if straggler >= 0 else 0.0,
        "job/straggler_excess": 0.4 if straggler >= 0 else 0.0,
        "job/step_time_skew": 1.5 if straggler >= 0 else 1.01,
        "job/divergence_check": "checked",
    }


@pytest.fixture
def jobs(tmp_path: Path, lw: Any) -> Path:
    """Three jobs (the newest the least accurate) and a single-process run."""
    base = tmp_path / "runs"
    for age, (name, accuracy, straggler) in enumerate(
        (("low", 0.5, -1), ("middle", 0.7, 1), ("high", 0.9, -1))
    ):
        lw.write(
            base / name,
            [lw.custom(verdicts(straggler)), lw.train(optimizer="SGD"), lw.eval({"acc": accuracy})],
            mtime=3000 - age,
        )
    lw.write(base / "single", [lw.train(optimizer="SGD"), lw.eval({"acc": 0.6})], mtime=100)
    return base


def test_query_prints_the_verdict_lines_in_the_tables_order(
    jobs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for order, expected in (
        ("metric/acc desc", ["high", "middle", "single", "low"]),
        ("metric/acc", ["low", "single", "middle", "high"]),
    ):
        code, out, err = run(capsys, "query", str(jobs), "--sort", order)
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert [line.split()[0] for line in lines[1:5]] == expected
        said = [line for line in lines[5:] if ": straggler: " in line]
        # One line per job (the single-process run has none), in the table's order.
        assert [line.split(":")[0] for line in said] == [n for n in expected if n != "single"]
        middle = next(line for line in said if line.startswith("middle: "))
        assert middle.startswith("middle: straggler: rank 1 (slowest in 90% of the steps")
        assert middle.endswith("; divergence: none (the ranks' parameters agree)")
        assert next(line for line in said if line.startswith("high: ")) == (
            "high: straggler: none; step-time skew 1.01; "
            "divergence: none (the ranks' parameters agree)"
        )
        assert lines[-1] == "4 matching runs"
    # Only the jobs shown get a line.
    code, out, _ = run(capsys, "query", str(jobs), "--where", "metric/acc > 0.8")
    assert [line for line in out.splitlines() if ": straggler: " in line] == [
        "high: straggler: none; step-time skew 1.01; divergence: none (the ranks' parameters agree)"
    ]
    # JSON and CSV stay data.
    assert ": straggler: " not in run(capsys, "query", str(jobs), "--format", "csv")[1]


def test_the_columns_left_out_are_one_line(
    tmp_path: Path, lw: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "runs"
    for index in range(2):
        keys = {f"setting_{key:02d}": index for key in range(30)}
        lw.write(base / f"run{index}", [lw.custom(keys), lw.train(optimizer="SGD")])
    code, out, _ = run(capsys, "query", str(base))
    assert code == 0
    lines = out.splitlines()
    [note] = [line for line in lines if "not shown" in line]
    assert lines[-2:] == [note, "2 matching runs"]
    assert len(note) <= 100
    count = int(note.split()[0])
    assert note.startswith(f"{count} more columns not shown (user_defined/")
    listed = note.split(" (", 1)[1].split(" and ")
    assert len(listed) == 2 and listed[1] == (
        f"{count - len(listed[0].split(', '))} more; --columns all shows them)"
    )


def test_a_field_no_run_records_is_named_under_the_count(
    jobs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "query", str(jobs), "--where", "batch_size >= 64")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "0 matching runs",
        "none of the 4 runs records batch_size (named in --where)",
    ]
    where = "batch_size >= 64 or epoch = 3 or optimizer = 'SGD' or batch_size < 8"
    code, out, err = run(capsys, "query", str(jobs), "--where", where)
    assert out.splitlines()[-2:] == [
        "4 matching runs",
        "none of the 4 runs records batch_size or epoch (named in --where)",
    ]
    # A field some run records, and the JSON for programs, get no such line.
    assert run(capsys, "query", str(jobs), "--where", "optimizer = 'Adam'")[1] == (
        "0 matching runs\n"
    )
    for data in ("json", "csv"):
        assert (
            "--where" not in run(capsys, "query", str(jobs), "--where", where, "--format", data)[1]
        )


def test_a_misspelt_field_gets_did_you_mean_before_the_column_not_after_a_list(
    jobs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "query", str(jobs), "--where", "los < 1")
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == f"{ERROR}unknown field 'los' at column 1; did you mean 'loss'?"
    code, _, err = run(capsys, "query", str(jobs), "--where", "loss < 1 and optimiser = 'SGD'")
    assert err.splitlines()[0] == (
        f"{ERROR}unknown field 'optimiser' at column 14; did you mean 'optimizer'?"
    )
    # No name close to it: the fields are listed, after the column.
    code, _, err = run(capsys, "query", str(jobs), "--where", "speed > 1")
    first = err.splitlines()[0]
    assert first.startswith(f"{ERROR}unknown field 'speed' at column 1; the fields are ")
    assert first.endswith("metric/<name> and user_defined/<name>")
    code, _, err = run(capsys, "query", str(jobs), "--sort", "los desc")
    assert "unknown sort key 'los' in 'los desc'; did you mean 'loss'?" in err
    with pytest.raises(LineageExpressionError) as raised:
        filter_runs(jobs, "los < 1")
    assert raised.value.detail == "unknown field 'los'; did you mean 'loss'?"


def test_an_unknown_key_among_fifty_gets_the_close_ones_or_ten_in_order(
    tmp_path: Path, lw: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "runs"
    keys: dict[str, float] = {f"key_{index:02d}": index for index in reversed(range(50))}
    keys["learning_rate_decay"] = 0.5
    lw.write(base / "run", [lw.custom(keys), lw.train(optimizer="SGD")])
    code, _, err = run(capsys, "query", str(base), "--where", "user_defined/learning_rate_decy > 0")
    assert err == (
        f"{ERROR}no run has 'user_defined/learning_rate_decy' (--where); "
        f"did you mean 'user_defined/learning_rate_decay'?\n"
    )
    code, _, err = run(capsys, "query", str(base), "--sort", "user_defined/zzz")
    assert code == 1
    assert err == (
        f"{ERROR}no run has 'user_defined/zzz' (--sort); the user_defined/ keys are: "
        + ", ".join(f"user_defined/key_{index:02d}" for index in range(10))
        + " and 41 more (--columns all shows them)\n"
    )
