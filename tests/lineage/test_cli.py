"""rankscribe-lineage: show, query, merge, hparams; user mistakes are one line, no traceback."""

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

from rankscribe.lineage.cli import main
from rankscribe.writer.files import read_records
from rankscribe.writer.pb import tensorboard_hparams_pb2, tensorboard_pb2


@pytest.fixture
def base(three_runs: Path) -> Path:
    return three_runs


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_show(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "show", str(base / "golden"))
    assert code == 0 and err == ""
    assert "hyper_parameters  learning_rate       0.01" in out
    assert "algorithm         loss                2.302703" in out
    assert "user_defined      note                golden" in out
    assert "dataset_graph: MnistDataset -> Map -> Map -> Batch" in out


def test_show_json(base: Path, capsys: pytest.CaptureFixture[str], lw: Any) -> None:
    code, out, _ = run(capsys, "show", str(base / "golden"), "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["summary_dir"] == str(base / "golden")
    assert shown["hyper_parameters"]["learning_rate"] == 0.01
    assert shown["user_defined"] == {"note": "golden", "seed": 7, "dropout": 0.25}


def test_show_relative_path(
    base: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(base)
    code, out, _ = run(capsys, "show", "adam")
    assert code == 0 and "hyper_parameters  optimizer  Adam" in out


def test_query_table(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "query", str(base), "--where", "metric/acc >= 0.5", "--sort", "metric/acc desc"
    )
    assert code == 0 and err == ""
    lines = out.splitlines()
    # the columns whose values differ between the runs come first
    assert lines[0].split() == [
        "run",
        "optimizer",
        "loss",
        "metric/acc",
        "user_defined/seed",
        "network",
        "epoch",
        "dataset_mark",
    ]
    assert [line.split()[0] for line in lines[1:3]] == ["adam", "sgd"]
    assert lines[-1] == "2 matching runs"


def test_query_limit_is_reported(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "query", str(base), "--limit", "1", "--sort", "loss")
    assert code == 0
    assert out.splitlines()[1].startswith("adam")
    assert out.splitlines()[-1] == "1 of 3 matching runs shown (--limit 1)"


def test_query_json_and_csv(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "query", str(base), "--where", "optimizer = 'Adam'", "--format", "json"
    )
    result = json.loads(out)
    assert result["count"] == 1
    assert result["object"][0]["model_lineage"]["user_defined"] == {"seed": 1}
    code, out, _ = run(capsys, "query", str(base), "--format", "csv", "--sort", "loss")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["run"] for row in rows] == ["adam", "sgd", "golden"]
    assert rows[0]["metric/acc"] == "0.9" and rows[2]["user_defined/seed"] == "7"
    assert rows[1]["user_defined/seed"] == ""


@pytest.mark.parametrize(
    ("argv", "first_line"),
    [
        (["show", "/no/such/dir"], "rankscribe-lineage: error: no such directory: /no/such/dir\n"),
        (["query", "/no/such/dir"], "rankscribe-lineage: error: no such directory: /no/such/dir\n"),
        (
            ["query", "BASE", "--where", "loss <"],
            "rankscribe-lineage: error: expected a number or a quoted string but found the end "
            "of the filter at column 7",
        ),
        (
            ["query", "BASE", "--where", "speed > 1"],
            "rankscribe-lineage: error: unknown field 'speed' at column 1; the fields are ",
        ),
        (["query", "BASE", "--sort", "speed"], "rankscribe-lineage: error:"),
        (["merge", "BASE"], "rankscribe-lineage: error: Merge rank lineage error: no rank_<n>"),
        (["show", "BASE"], "rankscribe-lineage: error: no lineage file in BASE"),
    ],
)
def test_user_mistakes(
    base: Path, capsys: pytest.CaptureFixture[str], argv: list[str], first_line: str
) -> None:
    argv = [str(base) if arg == "BASE" else arg for arg in argv]
    first_line = first_line.replace("BASE", str(base))
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    assert err.startswith(first_line)
    assert "Traceback" not in err
    if "--where" in argv and "speed" not in argv[-1]:
        lines = err.splitlines()
        assert lines[1] == "  loss <" and lines[2] == "        ^"
    elif "--where" not in argv:
        assert len(err.splitlines()) == 1


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["query"])
    assert caught.value.code == 2
    with pytest.raises(SystemExit):
        main(["query", "x", "--limit", "-1"])


def test_no_traceback_in_a_real_process(base: Path) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "rankscribe.lineage.cli", "query", str(base), "--where", "((("],
        capture_output=True,
        text=True,
        check=False,
    )
    assert process.returncode == 1
    assert process.stderr.startswith("rankscribe-lineage: error: expected a field name")
    assert "Traceback" not in process.stderr


def test_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str], lw: Any) -> None:
    for rank in (0, 1):
        lw.write(
            tmp_path / "job" / f"rank_{rank}",
            [lw.train(network="Net", loss=1.0 + rank, device_num=3)],
        )
    code, out, _ = run(capsys, "merge", str(tmp_path / "job"), "--timeout", "0")
    assert code == 0
    assert out.startswith(f"wrote {tmp_path / 'job'}/events.out.events.summary.")
    assert out.rstrip().endswith("(ranks 0,1; missing 2)")
    code, out, _ = run(capsys, "merge", str(tmp_path / "job"), "--world-size", "2")
    assert out.rstrip().endswith("(ranks 0,1)")
    assert len([n for n in os.listdir(tmp_path / "job") if n.endswith("_lineage")]) == 1


def _events(path: Path) -> list[tensorboard_pb2.Event]:
    return [tensorboard_pb2.Event.FromString(payload) for payload in read_records(path)]


def _plugin_data(value: tensorboard_pb2.Summary.Value) -> Any:
    assert value.metadata.plugin_data.plugin_name == "hparams"
    return tensorboard_hparams_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)


def test_hparams(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "hparams", str(base))
    assert code == 0
    out_dir = base / "tensorboard-hparams"
    assert f"under {out_dir}" in out
    (experiment_file,) = [p for p in out_dir.iterdir() if p.is_file()]
    events = _events(experiment_file)
    assert events[0].file_version == "brain.Event:2"
    experiment = _plugin_data(events[1].summary.value[0]).experiment
    assert events[1].summary.value[0].tag == "_hparams_/experiment"
    infos = {info.name: info for info in experiment.hparam_infos}
    assert infos["optimizer"].type == tensorboard_hparams_pb2.DATA_TYPE_STRING
    assert [v.string_value for v in infos["optimizer"].domain_discrete.values] == [
        "Adam",
        "Momentum",
        "SGD",
    ]
    assert infos["epoch"].type == tensorboard_hparams_pb2.DATA_TYPE_FLOAT64
    assert "user_defined/seed" in infos
    assert [m.name.tag for m in experiment.metric_infos] == [
        "final/loss",
        "final/metric/acc",
        "final/metric/loss",
    ]

    (session_file,) = (out_dir / "adam").iterdir()
    events = _events(session_file)
    start = _plugin_data(events[1].summary.value[0]).session_start_info
    assert events[1].summary.value[0].tag == "_hparams_/session_start_info"
    assert start.hparams["optimizer"].string_value == "Adam"
    assert start.hparams["epoch"].number_value == 3
    assert start.group_name == "adam"
    scalars = {value.tag: value.simple_value for value in events[2].summary.value}
    assert scalars == {"final/loss": 0.25, "final/metric/acc": pytest.approx(0.9)}
    end = _plugin_data(events[3].summary.value[0]).session_end_info
    assert end.status == tensorboard_hparams_pb2.STATUS_SUCCESS
    # the export is not a run of the base dir, and writing again replaces it
    code, _, _ = run(capsys, "hparams", str(base))
    assert len(list((out_dir / "adam").iterdir())) == 1
    code, out, _ = run(capsys, "query", str(base))
    assert out.splitlines()[-1] == "3 matching runs"


@pytest.mark.tensorboard  # runs in the tensorboard env, where tensorboard is installed
def test_hparams_read_by_tensorboard(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tensorboard.backend.event_processing import event_accumulator as accumulator

    out = base.parent / "hp"
    run(capsys, "hparams", str(base), "--out", str(out))
    reader = accumulator.EventAccumulator(str(out / "adam"))
    reader.Reload()
    assert "_hparams_/session_start_info" in reader.PluginTagToContent("hparams")
    assert reader.Scalars("final/loss")[0].value == 0.25


def test_query_shows_the_columns_asked_for(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "query", str(base), "--columns", "optimizer,metric/acc")
    assert code == 0
    header = out.splitlines()[0].split()
    assert header == ["run", "optimizer", "metric/acc"]


@pytest.mark.parametrize("columns", ["optimiser", "metric/", "", "bogus/x"])
def test_query_refuses_unknown_columns(
    base: Path, capsys: pytest.CaptureFixture[str], columns: str
) -> None:
    with pytest.raises(SystemExit) as raised:
        run(capsys, "query", str(base), "--columns", columns)
    assert raised.value.code == 2
    assert "--columns" in capsys.readouterr().err


@pytest.mark.parametrize("output", ["table", "csv"])
def test_query_through_a_symlinked_base_shows_plain_run_names(
    lw: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    real = tmp_path / "scratch" / "runs"
    lw.write(real / "exp1", [lw.train(optimizer="Adam", loss=0.5)])
    link = tmp_path / "runs"
    os.symlink(real, link)
    assert main(["query", str(link), "--format", output]) == 0
    lines = capsys.readouterr().out.splitlines()
    run_column = lines[1].split(",")[0] if output == "csv" else lines[1].split()[0]
    assert run_column == "exp1"


def _job_missing_rank_1(lw: Any, tmp_path: Path) -> Path:
    job = tmp_path / "job"
    lw.write(job / "rank_0", [lw.train(optimizer="Adam", loss=0.5, device_num=2)])
    return job


def test_cli_merge_with_nan_timeout_exits_with_an_error(
    lw: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _job_missing_rank_1(lw, tmp_path)
    codes: list[int] = []
    done, errors = lw.finishes_within(
        5.0, lambda: codes.append(main(["merge", str(job), "--timeout", "nan"]))
    )
    assert done, "`rankscribe-lineage merge --timeout nan` never returned"
    # A malformed option is a usage error: argparse's exit status 2, before any merge.
    assert codes == [] and [type(error) for error in errors] == [SystemExit]
    assert errors[0].code == 2  # type: ignore[attr-defined]
    assert "argument --timeout: expected a finite number of seconds >= 0, got 'nan'" in (
        capsys.readouterr().err
    )
