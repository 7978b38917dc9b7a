"""What the commands find below a base dir, and what they say when a directory holds no run.

Each test failed before its change: `query save_dir` over Lightning's
save_dir/name/version_<n> said "no summary or lineage file", `show
save_dir/name` and `merge save_dir/name` named no version, and `show` on an
interrupted job (rank dirs, no merged lineage) said "no lineage file" without
naming `merge`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.lineage._cli_run import ERROR, run


@pytest.fixture(autouse=True)
def no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


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
    code, out, err = run(capsys, "show", str(version), "--check")
    assert (code, out) == (2, "")
    assert err == (
        f"rankscribe-lineage: no job in {version} (no lineage file, no live view); its rank "
        f"directories hold files: `rankscribe-lineage merge {version}` writes the job's lineage\n"
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


def test_show_leaves_out_empty_job_keys_says_each_thing_once_and_prints_floats_alike(
    tmp_path: Path, lw: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: nine empty rows, ranks_missing beside job/missing_ranks, 0.9893671274185181."""
    job = tmp_path / "job"
    verdicts = {
        "job/ranks_reported": 1,
        "job/missing_ranks": "1",
        "job/straggler_rank": -1,
        "job/straggler_ranks": "",
        "job/diverged_ranks": "",
        "job/nonfinite_loss_ranks": "",
        "job/step_time_skew": 0.9893671274185181,
        "job/divergence_check": "checked",
        "ranks_reported": 1,
        "ranks_missing": "1",
        "disagreements": "",
        "note": "kept",
    }
    lw.write(job, [lw.custom(verdicts), lw.train(network="Net", loss=1.0007367134094238)])
    code, out, err = run(capsys, "show", str(job))
    assert (code, err) == (0, "")
    rows = {
        tuple(line.split()[:3])
        for line in out.splitlines()
        if line.startswith(("user_defined", "algorithm"))
    }
    assert ("algorithm", "loss", "1.000737") in rows
    assert ("user_defined", "job/step_time_skew", "0.9893671") in rows
    assert ("user_defined", "ranks_missing", "1") in rows
    assert ("user_defined", "ranks_reported", "1") in rows
    assert ("user_defined", "note", "kept") in rows
    keys = [row[1] for row in rows]
    assert "job/missing_ranks" not in keys and "job/ranks_reported" not in keys
    assert not {"job/straggler_ranks", "job/diverged_ranks", "disagreements"} & set(keys)
    assert all(len(line.split()) >= 3 for line in out.splitlines() if line.startswith("user_"))
    assert "4 empty user_defined values not shown (--json shows every key)" in out
    # JSON keeps every key and every digit.
    code, out, _ = run(capsys, "show", str(job), "--json")
    shown = json.loads(out)["user_defined"]
    assert shown["job/missing_ranks"] == "1" and shown["job/straggler_ranks"] == ""
    assert shown["job/step_time_skew"] == 0.9893671274185181


def test_show_says_which_loss_a_merged_job_holds(
    tmp_path: Path, lw: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job's loss is the ranks' mean, not rank 0's (the Progress line's): show says so."""
    job, single = tmp_path / "job", tmp_path / "single"
    lw.write(job, [lw.custom({"ranks_reported": 2, "loss_min": 0.5}), lw.train(loss=0.75)])
    lw.write(single, [lw.train(loss=0.75)])
    note = (
        "loss: the mean of the ranks' final losses (user_defined loss_min and loss_max: "
        "their extremes; one rank's own: show its rank_<r> directory)"
    )
    assert note in run(capsys, "show", str(job))[1].splitlines()
    assert "loss: " not in run(capsys, "show", str(single))[1]
