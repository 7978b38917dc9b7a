"""``rankscribe-lineage report``: output, exit codes, and plotly kept out of the base package."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rankscribe.lineage.cli import main
from tests._support.launchers import run_bounded

from .conftest import Base

BIN = Path(sys.executable).parent


def test_report_writes_the_file_and_says_where(
    base: Base, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "page.html"
    assert main(["report", str(base.path), "-o", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith(f"wrote {out} (4 runs: 1 job, 3 single-process; ")
    assert printed.err == ""
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_missing_base_is_exit_1_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert main(["report", str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"BASE '{missing}' is not a directory" in err
    assert not missing.exists()


def test_a_base_without_runs_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 1
    assert "no runs under" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "report.html").exists()


def test_an_output_that_cannot_be_written_is_exit_1(
    base: Base, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(base.path), "-o", str(tmp_path / "no" / "dir.html")]) == 1
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report"], "the following arguments are required: base"),
        (["report", "x", "--max-points", "2"], "expected an int >= 4, got 2"),
        (["report", "x", "--max-points", "many"], "expected an int >= 4, got 'many'"),
        (["report", "x", "--workers", "0"], "expected an int >= 1, got 0"),
    ],
)
def test_usage_errors_are_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_without_plotly_it_says_what_to_install(
    base: Base,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # None in sys.modules is how Python spells "this module cannot be imported".
    for name in [name for name in sys.modules if name.split(".")[0] == "plotly"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)
    out = tmp_path / "r.html"
    assert main(["report", str(base.path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "rankscribe-lineage: error: the report draws its charts with plotly" in err
    assert "pip install 'rankscribe-lineage[report]'" in err
    assert not out.exists()


def test_the_base_package_and_its_cli_do_not_import_plotly() -> None:
    code = (
        "import sys, rankscribe.lineage, rankscribe.lineage.cli, rankscribe.jobview\n"
        "rankscribe.lineage.cli.build_parser()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'plotly'))\n"
    )
    done = run_bounded([sys.executable, "-c", code], timeout=60, stderr_apart=True)
    assert done.stdout.strip() == "[]"


def test_the_installed_command_lists_report() -> None:
    command = BIN / "rankscribe-lineage"
    done = run_bounded([command, "report", "--help"], timeout=60, check=False, stderr_apart=True)
    assert done.returncode == 0
    assert "-o FILE, --output FILE" in done.stdout
    assert "min and max" in done.stdout
