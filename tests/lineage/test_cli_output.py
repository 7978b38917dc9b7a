"""What the command line prints: the first-hour fixes (issue 19) and odd bytes (issue 20).

Each test failed before its fix: `--columns summary_dir` refused, a traceback-free but
noisy `Broken pipe` under `| head`, "There is no summary log file" for a dir of summaries,
hidden --where/--sort columns, raw ESC/BEL from files, `show` crashing on a verdict
value of an unexpected type.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage import filter_runs
from rankscribe.lineage.errors import LineageExpressionError
from rankscribe.writer.files import frame
from tests.lineage._cli_run import ERROR, run
from tests.lineage._documented import documented_fields

CONTROL_BYTES = [chr(code) for code in (*range(0x20), 0x7F)]


@pytest.fixture(autouse=True)
def no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


def command(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rankscribe.lineage.cli", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        **kwargs,
    )


def test_every_field_the_help_lists_is_a_column(
    three_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in documented_fields():
        code, out, err = run(capsys, "query", str(three_runs), "--columns", name)
        assert (code, err) == (0, ""), name
        assert out.splitlines()[0].split() == ["run", name]
    code, out, _ = run(
        capsys, "query", str(three_runs), "--columns", "summary_dir", "--sort", "loss"
    )
    assert [line.split() for line in out.splitlines()[1:4]] == [
        ["adam", str(three_runs / "adam")],
        ["sgd", str(three_runs / "sgd")],
        ["golden", str(three_runs / "golden")],
    ]
    code, out, _ = run(
        capsys, "query", str(three_runs), "--columns", "summary_dir", "--format", "csv"
    )
    assert {row["summary_dir"] for row in csv.DictReader(io.StringIO(out))} == {
        str(three_runs / name) for name in ("adam", "sgd", "golden")
    }


def write_many(root: Path, lw: Any, count: int) -> Path:
    payload = b"".join(
        frame(event.SerializeToString())
        for event in (
            lw.train(network="Net", optimizer="Adam", loss=0.5, epoch=3),
            lw.eval({"acc": 0.5}),
        )
    )
    for index in range(count):
        directory = root / f"run-with-a-name-long-enough-to-fill-a-pipe-quickly-{index:05d}"
        directory.mkdir(parents=True)
        path = directory / "events.out.events.summary.1.0.vm_lineage"
        path.write_bytes(payload)
        os.utime(path, (1000, 1000))
    return root


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path, lw: Any) -> None:
    base = write_many(tmp_path / "runs", lw, 1500)  # a table larger than a pipe holds
    process = subprocess.Popen(
        [sys.executable, "-m", "rankscribe.lineage.cli", "query", str(base)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()  # as `| head -1` does
    error = process.stderr.read().decode()
    code = process.wait(timeout=120)
    assert first.split()[0] == b"run"
    assert error == ""  # no "error: [Errno 32] Broken pipe", no "Exception ignored"
    assert code == 141  # as a shell reports a command ended by SIGPIPE


def test_query_says_what_a_dir_without_lineage_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "runs"
    for name in ("a", "b"):
        (base / name).mkdir(parents=True)
        (base / name / "events.out.events.summary.1.0.vm_MS").write_bytes(b"")
    code, out, err = run(capsys, "query", str(base))
    assert (code, out) == (1, "")
    assert err == (
        f"{ERROR}no lineage file under {base}: 2 run directories (a, b) hold "
        f"summary files but none has a lineage file (named *summary.<n>*_lineage; "
        f"a run writes one when it records its lineage)\n"
    )
    assert "summary log" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run(capsys, "query", str(empty))
    assert code == 1 and err.startswith(f"{ERROR}no summary or lineage file in {empty} ")


def test_one_run_directory_without_lineage_is_counted_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "events.out.events.summary.1.0.vm_MS").write_bytes(b"")
    code, _, err = run(capsys, "query", str(tmp_path))
    assert code == 1
    assert f"no lineage file under {tmp_path}: 1 run directory (a) holds summary files" in err


def test_the_columns_where_and_sort_name_are_shown_even_when_alike(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    lw: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    runs = tmp_path / "runs"
    for index in range(3):
        wide = {
            f"note_{key}": f"a long value that differs from run to run: {index} {key}"
            for key in range(4)
        }
        lw.write(
            runs / f"run{index}",
            [
                lw.custom(wide),
                lw.train(optimizer="SGD", learning_rate=0.1, epoch=3, loss=index / 3),
            ],
            mtime=3000 - index,
        )
    code, out, _ = run(capsys, "query", str(runs))
    header = out.splitlines()[0].split()
    assert code == 0
    assert "learning_rate" not in header and "epoch" not in header  # alike: left out
    code, out, _ = run(
        capsys, "query", str(runs), "--where", "learning_rate > 0.01", "--sort", "epoch"
    )
    assert code == 0
    header = out.splitlines()[0].split()
    assert {"learning_rate", "epoch"} <= set(header)
    assert max(len(line) for line in out.splitlines()) <= 60
    assert out.splitlines()[-1] == "3 matching runs"


def test_a_key_no_run_has_is_the_same_error_from_the_api_and_the_command_line(
    three_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "query", str(three_runs), "--where", "metric/acx > 0.9")
    assert code == 1
    assert err == (f"{ERROR}no run has 'metric/acx' (--where); did you mean 'metric/acc'?\n")
    with pytest.raises(LineageExpressionError) as raised:
        filter_runs(three_runs, "metric/acx > 0.9")
    assert raised.value.detail == ("no run has 'metric/acx'; did you mean 'metric/acc'?")
    assert filter_runs(three_runs, "metric/acc > 0.9")["count"] == 0  # a real key: no error


def hostile_base(root: Path, lw: Any) -> Path:
    """A run whose name, keys and values hold ESC, BEL and other control characters."""
    name = "run\x1b]0;owned\x07\x1b[2J"
    lw.write(
        root / name,
        [
            lw.custom({"note\x07": "red \x1b[31malert\x1b[0m\r\n", "seed": 1}),
            lw.train(optimizer="SGD\x1b[5m", network="Net\x08\x08\x08", loss=0.5),
            lw.eval({"acc\x1b": 0.9}),
        ],
        mtime=2000,
    )
    lw.write(root / "plain", [lw.train(optimizer="Adam", network="Net", loss=0.25)], mtime=1000)
    return root / name


def strings(value: Any) -> Any:
    """Every str in a decoded JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


@pytest.mark.parametrize(
    "argv",
    [
        ["query", "BASE"],
        ["query", "BASE", "--columns", "all"],
        ["query", "BASE", "--format", "json"],
        ["show", "RUN"],
        ["show", "RUN", "--json"],
    ],
)
def test_control_characters_from_files_are_escaped(
    tmp_path: Path, lw: Any, argv: list[str]
) -> None:
    run_dir = hostile_base(tmp_path / "runs", lw)
    argv = [
        str(tmp_path / "runs") if arg == "BASE" else str(run_dir) if arg == "RUN" else arg
        for arg in argv
    ]
    process = command(*argv)
    assert process.returncode == 0, process.stderr
    shown = process.stdout + process.stderr
    assert not set(shown) & (set(CONTROL_BYTES) - {"\n"})
    if "--json" in argv or "json" in argv:
        # JSON escapes them itself, and a program reading it gets the values back
        assert "red \x1b[31malert\x1b[0m\r\n" in set(strings(json.loads(process.stdout)))
    else:
        assert "run\\u001b]0;owned\\u0007\\u001b[2J" in shown
        assert "SGD\\u001b[5m" in shown


def test_csv_into_a_file_keeps_values_as_they_are(tmp_path: Path, lw: Any) -> None:
    hostile_base(tmp_path / "runs", lw)
    out = tmp_path / "runs.csv"
    with open(out, "w") as stream:
        process = subprocess.run(
            [
                sys.executable,
                "-m",
                "rankscribe.lineage.cli",
                "query",
                str(tmp_path / "runs"),
                "--format",
                "csv",
            ],
            stdout=stream,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=120,
        )
    assert process.returncode == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text(), newline="")))
    assert rows[0]["optimizer"] == "SGD\x1b[5m"  # data for programs: not rewritten


def test_a_warning_naming_a_hostile_file_is_escaped(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "bad\x1b[2Jname"
    run_dir.mkdir(parents=True)
    (run_dir / "events.out.events.summary.1.0.vm_lineage").write_bytes(b"not a record" * 3)
    process = command("show", str(run_dir))
    assert "\x1b" not in process.stderr and "bad\\u001b[2Jname" in process.stderr


def test_show_survives_verdict_values_of_unexpected_types(
    tmp_path: Path, lw: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "job"
    lw.write(
        run_dir,
        [
            lw.custom(
                {
                    "job/straggler_rank": 1,
                    "job/straggler_slowest_share": "n/a",
                    "job/straggler_excess": 0.5,
                    "job/step_time_skew": "x",
                    "job/stopped_first_rank": "zero",
                    "job/divergence_check": "checked",
                }
            ),
            lw.train(network="Net", loss=0.5),
        ],
    )
    code, out, err = run(capsys, "show", str(run_dir))
    assert (code, err) == (0, "")
    verdicts = out[out.index("job verdicts:") :].splitlines()
    assert "  job/straggler_slowest_share is 'n/a', not a number: left out of the verdicts" in (
        verdicts
    )
    assert "  job/step_time_skew is 'x', not a number: left out of the verdicts" in verdicts
    assert any(line.startswith("  straggler: rank 1") for line in verdicts)
    assert "  divergence: none (the ranks' parameters agree)" in verdicts
    # the table still shows the values as recorded
    assert ["user_defined", "job/straggler_slowest_share", "n/a"] in [
        line.split()[:3] for line in out.splitlines()
    ]


def test_a_query_run_as_a_command_writes_everything_before_it_ends(tmp_path: Path, lw: Any) -> None:
    """The command ends without Python's teardown: its whole table is in the file first."""
    base = write_many(tmp_path / "runs", lw, 1500)
    out = tmp_path / "table.txt"
    with out.open("wb") as stream:
        process = subprocess.run(
            [sys.executable, "-m", "rankscribe.lineage.cli", "query", str(base)],
            stdout=stream,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    assert process.returncode == 0, process.stderr
    lines = out.read_text().splitlines()
    assert lines[0].split()[0] == "run" and lines[-1] == "1500 matching runs"
    assert sum(line.startswith("run-with-a-name") for line in lines) == 1500


BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.mark.parametrize(
    "argv",
    [["query", "BASE"], ["query", "BASE", "--columns", "all"], ["show", "RUN"]],
)
def test_bidirectional_controls_from_files_are_escaped(
    tmp_path: Path, lw: Any, argv: list[str]
) -> None:
    # U+202E in a run name printed the rest of the line reversed ("run-gpj.exe" shown for
    # "run-\u202eexe.jpg"): the terminal reorders what follows a bidi control.
    name = "run-\u202eexe.jpg"
    lw.write(
        tmp_path / "runs" / name,
        [
            lw.custom({"note\u2066": "a\u202db\u200f", "marks": BIDI_CONTROLS}),
            lw.train(optimizer="SGD\u061c", network="Net", loss=0.5),
        ],
        mtime=2000,
    )
    run_dir = tmp_path / "runs" / name
    argv = [
        str(tmp_path / "runs") if arg == "BASE" else str(run_dir) if arg == "RUN" else arg
        for arg in argv
    ]
    process = command(*argv)
    assert process.returncode == 0, process.stderr
    shown = process.stdout + process.stderr
    assert not set(shown) & set(BIDI_CONTROLS)
    assert "run-\\u202eexe.jpg" in shown
    assert "SGD\\u061c" in shown
    if argv[0] == "show":
        assert "a\\u202db\\u200f" in shown
        assert "".join(f"\\u{ord(c):04x}" for c in BIDI_CONTROLS) in shown
