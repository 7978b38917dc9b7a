"""rankscribe-lineage as a new user meets it: each message and table, output and exit code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rankscribe.lineage.cli import main
from tests.lineage._cli_run import ERROR, run
from tests.lineage._documented import documented_fields


@pytest.fixture
def base(three_runs: Path) -> Path:
    return three_runs


@pytest.fixture(autouse=True)
def no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.mark.parametrize("command", ["show", "query", "hparams"])
def test_a_missing_path_is_named_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = str(tmp_path / "no-such-run")
    code, out, err = run(capsys, command, missing)
    assert (code, out) == (1, "")
    assert err == f"{ERROR}no such directory: {missing}\n"
    assert err.count(missing) == 1


def test_a_file_instead_of_a_directory(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = next((base / "adam").iterdir())
    code, out, err = run(capsys, "show", str(file))
    assert (code, out, err) == (1, "", f"{ERROR}not a directory: {file}\n")


def test_an_unquoted_text_value_gets_a_hint_unlike_the_input(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "query", str(base), "--where", "optimizer = SGD")
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == (
        f"{ERROR}expected a number or a quoted string but found the bare word SGD "
        "(did you mean 'SGD'?) at column 13"
    )
    code, out, _ = run(capsys, "query", str(base), "--where", "optimizer = 'SGD'")
    assert code == 0 and out.splitlines()[1].split()[0] == "sgd"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "--sort",
            "metric/acuracy desc",
            "no run has 'metric/acuracy' (--sort); did you mean 'metric/acc'?",
        ),
        (
            "--columns",
            "optimizer,metric/acuracy",
            "no run has 'metric/acuracy' (--columns); did you mean 'metric/acc'?",
        ),
        (
            "--where",
            "user_defined/sed > 1",
            "no run has 'user_defined/sed' (--where); did you mean 'user_defined/seed'?",
        ),
        ("--sort", "metric/loss", None),
    ],
)
def test_a_metric_or_user_defined_key_no_run_has_is_an_error(
    base: Path,
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
    message: str | None,
) -> None:
    code, out, err = run(capsys, "query", str(base), option, value)
    if message is None:  # a key some run has is fine, even if others lack it
        assert code == 0 and err == "" and out.splitlines()[-1] == "3 matching runs"
        return
    assert (code, out) == (1, "")
    assert err == f"{ERROR}{message}\n"


def test_no_custom_key_of_that_kind_at_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lw: Any
) -> None:
    lw.write(tmp_path / "runs" / "plain", [lw.train(optimizer="SGD")])
    code, out, err = run(capsys, "query", str(tmp_path / "runs"), "--sort", "metric/acc")
    assert (code, out) == (1, "")
    assert err == f"{ERROR}no run has 'metric/acc' (--sort); no run has a metric/ key\n"


def test_help_lists_the_fields(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["query", "--help"])
    assert raised.value.code == 0
    out = capsys.readouterr().out
    listed = out[out.index("fields --where, --sort and --columns take:") :]
    for name in documented_fields():
        assert re.search(rf"\b{name}\b", listed), name
    assert "metric/<name>" in listed and "user_defined/<name>" in listed
    assert "train_dataset_size" in listed and "train_dataset_count" in listed


def test_show_without_a_lineage_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "events.out.events.summary.1.0.vm_MS").write_bytes(b"")
    code, out, err = run(capsys, "show", str(run_dir))
    assert (code, out) == (1, "")
    assert err.startswith(f"{ERROR}no lineage file in {run_dir} ")
    assert "summary log" not in err
    assert len(err.splitlines()) == 1


def test_show_gives_the_query_name_where_it_differs(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "show", str(base / "golden"))
    assert code == 0
    lines = {tuple(line.split()[:2]): line.split()[2:] for line in out.splitlines()[2:]}
    assert lines[("train_dataset", "train_dataset_size")] == ["40", "train_dataset_count"]
    assert lines[("valid_dataset", "valid_dataset_size")] == ["16", "test_dataset_count"]
    assert lines[("model", "size")] == ["5251", "model_size"]
    assert lines[("metric", "acc")] == ["0.0", "metric/acc"]
    assert lines[("hyper_parameters", "optimizer")] == ["Momentum"]  # the same name
    assert lines[("hyper_parameters", "parallel_mode")] == ["stand_alone", "-"]
    # and the name shown is the one a query takes
    code, out, _ = run(capsys, "query", str(base), "--where", "train_dataset_count = 40")
    assert code == 0 and out.splitlines()[1].split()[0] == "golden"
    with pytest.raises(SystemExit):
        main(["show", "--help"])
    assert "train_dataset_count" in capsys.readouterr().out


def test_numbers_in_a_table_are_formatted_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lw: Any
) -> None:
    runs = tmp_path / "runs"
    lw.write(
        runs / "a",
        [
            lw.train(loss=0.16649036, learning_rate=0.1, epoch=3),
            lw.eval({"acc": 0.9583333333333334}),
        ],
        mtime=3000,
    )
    lw.write(
        runs / "b",
        [lw.train(loss=2.5, learning_rate=0.001, epoch=12), lw.eval({"acc": 0.5})],
        mtime=2000,
    )
    code, out, _ = run(
        capsys, "query", str(runs), "--columns", "loss,metric/acc,learning_rate,epoch"
    )
    assert code == 0
    rows = [line.split() for line in out.splitlines()[1:3]]
    # four significant digits for the smallest magnitude of each column, decimals alike
    assert rows == [
        ["a", "0.1665", "0.9583", "0.100000", "3"],
        ["b", "2.5000", "0.5000", "0.001000", "12"],
    ]


@pytest.mark.parametrize(
    "where",
    ["summary_dir = 'sgd'", "summary_dir in ('sgd', './nothing')", "summary_dir = './sgd'"],
)
def test_summary_dir_takes_the_run_name_the_table_shows(
    base: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    code, out, _ = run(capsys, "query", str(base), "--where", where)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["sgd"]
    assert out.splitlines()[-1] == "1 matching run"


def test_the_default_columns_fit_100_and_differing_ones_come_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lw: Any
) -> None:
    runs = tmp_path / "runs"
    shared = {f"setting_{index}": "the same everywhere" for index in range(6)}
    for index, optimizer in enumerate(("Adam", "SGD", "Momentum")):
        lw.write(
            runs / f"run-{optimizer.lower()}",
            [
                lw.custom({**shared, "seed": index}),
                lw.train(
                    optimizer=optimizer,
                    network="ResNet50",
                    epoch=90,
                    loss_function="SoftmaxCrossEntropyWithLogits",
                    train_dataset_path="/data/imagenet/train",
                    loss=1.0 + index / 3,
                ),
                lw.eval({"acc": 0.7 + index / 10, "top5": 0.9}),
            ],
            mtime=3000 - index,
        )
    code, out, _ = run(capsys, "query", str(runs))
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    header = lines[0].split()
    assert header[0] == "run"
    varying = {"optimizer", "loss", "metric/acc", "user_defined/seed"}
    assert set(header[1:5]) == varying
    # The columns left out: one line, before the count (it was one line per 100 characters).
    [note] = [line for line in lines if "not shown" in line]
    assert lines[-2] == note
    assert note.endswith("; --columns all shows them)")
    count = int(note.split()[0])
    listed, _, more = note.split(" (", 1)[1].rsplit("; ", 1)[0].partition(" and ")
    hidden = listed.split(", ")
    assert count == len(hidden) + (int(more.split()[0]) if more else 0)
    assert hidden and not set(hidden) & varying
    assert len(set(header[1:]) | set(hidden)) == len(header) - 1 + len(hidden)
    code, out, _ = run(capsys, "query", str(runs), "--columns", "all")
    assert code == 0
    everything = out.splitlines()[0].split()
    assert set(hidden) < set(everything) and set(header) < set(everything)
    assert len(everything) == len(header) + count
    assert out.splitlines()[-1] == "3 matching runs"
    assert "not shown" not in out
