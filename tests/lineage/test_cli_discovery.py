"""What the commands find below a base dir, and what they say when a directory holds no run.

Each test failed before its change: `query save_dir` over Lightning's
save_dir/name/version_<n> said "no summary or lineage file", `show
save_dir/name` and `merge save_dir/name` named no version, and `show` on an
interrupted job (rank dirs, no merged lineage) said "no lineage file" without
naming `merge`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage.cli import main

ERROR = "rankscribe-lineage: error: "


@pytest.fixture(autouse=True)
def no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def lightning_job(version: Path, lw: Any, learning_rate: float, *, merged: bool = True) -> None:
    """RankScribeLogger's layout for 2 ranks: version_<n>/rank_<r>/ and the merged lineage."""
    for rank in (0, 1):
        lw.write(
            version / f"rank_{rank}",
            [lw.train(network="Classifier", optimizer="SGD", learning_rate=learning_rate)],
            name=f"events.out.events.summary.10.{rank}.vm_lineage",
        )
    if merged:
        lw.write(
            version,
            [lw.train(network="Classifier", optimizer="SGD", learning_rate=learning_rate)],
            name="events.out.events.summary.10.merged.vm_lineage",
        )


@pytest.fixture
def save_dir(tmp_path: Path, lw: Any) -> Path:
    base = tmp_path / "runs"
    lightning_job(base / "digits" / "version_0", lw, 0.1)
    lightning_job(base / "digits" / "version_1", lw, 0.05)
    return base


def test_query_over_save_dir_lists_each_version(
    save_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "query", str(save_dir), "--sort", "learning_rate")
    assert (code, err) == (0, "")
    table = [line.split() for line in out.splitlines()]
    assert table[0][:2] == ["run", "learning_rate"]
    assert [line[:2] for line in table[1:3]] == [
        ["digits/version_1", "0.05000"],
        ["digits/version_0", "0.10000"],
    ]
    assert table[-1] == ["2", "matching", "runs"]


def test_show_on_save_dir_name_names_the_versions(
    save_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = save_dir / "digits"
    code, out, err = run(capsys, "show", str(name))
    assert (code, out) == (1, "")
    assert err.startswith(f"{ERROR}no lineage file in {name} ")
    assert err.rstrip().endswith(
        f"; the runs below it: {name}/version_0, {name}/version_1 (show one of them; "
        f"`rankscribe-lineage query {name}` lists them all)"
    )
    code, out, err = run(capsys, "merge", str(name))
    assert code == 1
    assert f"; the runs below it: {name}/version_0, {name}/version_1 (merge one of them)" in err


def test_show_on_an_interrupted_job_names_the_merge(
    tmp_path: Path, lw: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    version = tmp_path / "runs" / "digits" / "version_0"
    lightning_job(version, lw, 0.1, merged=False)
    code, out, err = run(capsys, "show", str(version))
    assert (code, out) == (1, "")
    assert err == (
        f"{ERROR}no merged lineage in {version}: it holds the rank directories of a job "
        f"(rank_0, rank_1) but not the job's lineage, which rank 0 writes when training ends "
        f"(was the job interrupted?); run `rankscribe-lineage merge {version}` to write it "
        f"from the rank directories\n"
    )
    # The fix it names works: the merge writes the job's lineage, and show shows it.
    assert run(capsys, "merge", str(version))[0] == 0
    code, out, err = run(capsys, "show", str(version))
    assert code == 0 and out.startswith(f"run {version}\n")


def test_a_directory_with_nothing_below_says_so_without_a_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    (empty / "a" / "b").mkdir(parents=True)
    code, _, err = run(capsys, "show", str(empty))
    assert code == 1 and "below" not in err
    code, _, err = run(capsys, "query", str(empty))
    assert err == (
        f"{ERROR}no summary or lineage file in {empty} or its subdirectories (a run is BASE "
        f"itself or a directory up to 4 levels below it)\n"
    )
