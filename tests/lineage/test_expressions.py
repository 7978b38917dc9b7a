"""The string filter: grammar, errors with a caret, and agreement with the dict condition."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankscribe.lineage import filter_runs, filter_summary_lineage
from rankscribe.lineage.errors import LineageExpressionError, LineageParamValueError


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, lw: Any) -> Path:
    root = tmp_path_factory.mktemp("expr")
    specs = [
        ("adam", dict(optimizer="Adam", loss=0.3, learning_rate=0.1, epoch=3), {"acc": 0.95}),
        (
            "momentum",
            dict(optimizer="Momentum", loss=0.7, learning_rate=0.01, epoch=5),
            {"acc": 0.8},
        ),
        ("sgd", dict(optimizer="SGD", loss=0.4, epoch=5), {"acc": 0.92}),
        ("noeval", dict(optimizer="Adam", loss=0.9), None),
    ]
    for age, (name, train, metrics) in enumerate(specs):
        events = [lw.custom({"my key": age, "tag": name}), lw.train(**train)]
        if metrics is not None:
            events.append(lw.eval(metrics))
        lw.write(root / name, events, mtime=1000 - age)
    return root


def run_names(result: dict[str, Any]) -> list[str]:
    return [os.path.basename(item["summary_dir"]) for item in result["object"]]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("loss < 0.5 and optimizer in ('Adam', 'Momentum') or metric/acc >= 0.9", ["adam", "sgd"]),
        (
            "loss < 0.5 and (optimizer in ('Adam', 'Momentum') or metric/acc >= 0.9)",
            ["adam", "sgd"],
        ),
        ("(loss > 0.5)", ["momentum", "noeval"]),
        ("optimizer = 'Adam'", ["adam", "noeval"]),
        ('optimizer == "Adam"', ["adam", "noeval"]),
        ("optimizer != 'Adam'", ["momentum", "sgd"]),
        ("optimizer NOT IN ('Adam', 'SGD')", ["momentum"]),
        ("optimizer not in ['Adam']", ["momentum", "sgd"]),
        ("epoch in (5,)", ["momentum", "sgd"]),
        ("epoch != 5", ["adam"]),  # noeval has no epoch: missing never matches
        ("learning_rate <= 0.01", ["momentum"]),
        ("learning_rate > 0", ["adam", "momentum"]),
        ("metric/acc > 0.9 AND epoch = 5", ["sgd"]),
        ("metric/acc not in (0.8)", ["adam", "sgd"]),
        ("`user_defined/my key` >= 2", ["sgd", "noeval"]),
        ("'user_defined/my key' = 0", ["adam"]),
        ("user_defined/tag in ('sgd', 'adam')", ["adam", "sgd"]),
        ("summary_dir = './sgd'", ["sgd"]),
        ("summary_dir in ('./sgd', './adam')", ["adam", "sgd"]),
        ("loss < 1e-1", []),
        ("loss >= .9", ["noeval"]),
        ("loss > -1", ["adam", "momentum", "sgd", "noeval"]),
        ("dataset_mark = '2'", ["adam", "momentum", "sgd", "noeval"]),
    ],
)
def test_filters(base: Path, where: str, expected: list[str]) -> None:
    assert run_names(filter_runs(base, where)) == expected


@pytest.mark.parametrize(
    ("where", "column"),
    [("user_defined/absent = 1 or loss < 0.35", 0), ("loss < 1 and metric/ac > 0.5", 13)],
)
def test_a_custom_key_no_run_has_is_an_error_as_on_the_command_line(
    base: Path, where: str, column: int
) -> None:
    # A typo would otherwise match nothing, quietly (the command line refused it already).
    with pytest.raises(
        LineageExpressionError,
        match=r"no run has '(user_defined/absent|metric/ac)'; "
        r"(the user_defined/ keys are: |did you mean 'metric/acc'\?)",
    ) as raised:
        filter_runs(base, where)
    assert raised.value.column == column
    with pytest.raises(LineageParamValueError, match=r"no run has 'metric/ac' \(order_by\)"):
        filter_runs(base, order_by="metric/ac desc")


def test_order_by_limit_offset(base: Path) -> None:
    assert run_names(filter_runs(base, order_by=["metric/acc desc"])) == [
        "adam",
        "sgd",
        "momentum",
        "noeval",  # missing last when descending...
    ]
    assert run_names(filter_runs(base, order_by="metric/acc")) == [
        "momentum",
        "sgd",
        "adam",
        "noeval",  # ... and ascending
    ]
    assert run_names(filter_runs(base, order_by=["epoch desc", "loss"])) == [
        "sgd",
        "momentum",
        "adam",
        "noeval",
    ]
    assert run_names(filter_runs(base, order_by=["-loss"], limit=2, offset=1)) == [
        "momentum",
        "sgd",
    ]
    result = filter_runs(base, "loss > 0", limit=1)
    assert result["count"] == 4 and len(result["object"]) == 1
    assert run_names(filter_runs(base, limit=0)) == []
    assert list(filter_runs(base, lineage_type="dataset")["object"][0]) == [
        "summary_dir",
        "dataset_graph",
    ]


@pytest.mark.parametrize(
    ("where", "column", "words"),
    [
        ("loss <", 6, "expected a number or a quoted string but found the end"),
        ("loss < 0.5 and", 14, "expected a field name"),
        ("loss < 0.5 or (epoch = 1", 24, "expected ')'"),
        ("loss 0.5", 5, "expected a comparison"),
        ("optimizer = Adam", 12, "did you mean 'Adam'"),
        ("optimizer in 'Adam'", 13, "expected '(' and a list"),
        ("optimizer in ('a' 'b')", 18, "expected ',' or ')'"),
        ("optimizer not ('a')", 14, "expected 'in' after 'not'"),
        ("loss < 0.5 epoch", 11, "expected 'and', 'or'"),
        ("loss ~ 1", 5, "unexpected character '~'"),
        ("optimizer = 'Adam", 12, "unexpected character"),
        ("speed > 1", 0, "unknown field 'speed'"),
        ("metric/ > 1", 0, "unknown field 'metric/'"),
        ("loss < 0.5 and optimizer < 'B'", 25, "'optimizer' is text: compare it with ="),
        ("optimizer = 3", 12, "'optimizer' is text: put the value in quotes"),
        ("epoch = 1.5", 8, "'epoch' takes a whole number"),
        ("epoch >= -1", 9, "'epoch' takes a whole number"),
        ("metric/acc > 'high'", 13, "'metric/acc' takes a number"),
        ("loss = true", 7, "'loss' takes a number, got True"),
    ],
)
def test_errors_point_at_the_column(base: Path, where: str, column: int, words: str) -> None:
    with pytest.raises(LineageExpressionError) as caught:
        filter_runs(base, where)
    error = caught.value
    assert error.column == column
    assert words in error.detail
    assert error.error_code == "50542218"
    assert isinstance(error, ValueError)
    lines = str(error).splitlines()
    assert lines[1] == f"  {where}"
    assert lines[2] == "  " + " " * column + "^"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("loss", ["adam", "sgd", "momentum", "noeval"]),
        ("loss desc", ["noeval", "momentum", "sgd", "adam"]),
        ("metric/acc DESCENDING", ["adam", "sgd", "momentum", "noeval"]),  # no value: last
        ("-epoch", ["momentum", "sgd", "adam", "noeval"]),  # a tie keeps the base order
        ("'user_defined/my key' asc", ["adam", "momentum", "sgd", "noeval"]),
    ],
)
def test_sort_keys(base: Path, text: str, expected: list[str]) -> None:
    assert run_names(filter_runs(base, order_by=[text])) == expected


@pytest.mark.parametrize("key", ["speed desc", "", "metric/", "user_defined/ asc"])
def test_bad_sort_key(base: Path, key: str) -> None:
    with pytest.raises(ValueError, match="sort key") as caught:
        filter_runs(base, order_by=[key])
    assert caught.value.error_code == "50542081"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "bad", [{"limit": -1}, {"limit": True}, {"offset": -2}, {"lineage_type": "graph"}]
)
def test_bad_arguments(base: Path, bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        filter_runs(base, **bad)


# --- Hypothesis: the string filter and the dict condition agree --------------------------

OPTIMIZERS = ["Adam", "Momentum", "SGD", "Lamb"]
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "optimizer": st.sampled_from(OPTIMIZERS),
    "epoch": st.integers(0, 6),
    "batch_size": st.sampled_from([8, 16, 32]),
    "loss": st.sampled_from([0.25, 0.5, 0.75, 1.0, 2.0]),
    "learning_rate": st.sampled_from([0.5, 0.25, 0.125]),
    "metric/acc": st.sampled_from([0.0, 0.5, 0.75, 1.0]),
    "user_defined/seed": st.integers(0, 4),
}
TEXT_FIELDS = {"optimizer"}

run_strategy = st.fixed_dictionaries({}, optional={name: values for name, values in FIELDS.items()})


@st.composite
def comparison_strategy(draw: st.DrawFn) -> tuple[str, str, Any]:
    name = draw(st.sampled_from(sorted(FIELDS)))
    operators = (
        ["eq", "in", "not_in"]
        if name in TEXT_FIELDS
        else ["eq", "lt", "gt", "le", "ge", "in", "not_in"]
    )
    operator = draw(st.sampled_from(operators))
    if operator in ("in", "not_in"):
        return name, operator, draw(st.lists(FIELDS[name], min_size=1, max_size=3))
    return name, operator, draw(FIELDS[name])


SYMBOLS = {"eq": "=", "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "in": "in", "not_in": "not in"}


def literal(value: Any) -> str:
    return repr(value)


def to_text(name: str, operator: str, value: Any) -> str:
    if operator in ("in", "not_in"):
        values = ", ".join(literal(item) for item in value)
        return f"{name} {SYMBOLS[operator]} ({values})"
    return f"{name} {SYMBOLS[operator]} {literal(value)}"


def write_runs(root: Path, runs: list[dict[str, Any]]) -> None:
    from rankscribe.lineage.recording import EvalLineageInfo, UserDefinedInfo
    from rankscribe.writer.files import frame
    from rankscribe.writer.pb import lineage_pb2

    for index, run in enumerate(runs):
        events = []
        train = lineage_pb2.LineageEvent(wall_time=1.0)
        hyper = train.train_lineage.hyper_parameters
        for key in ("optimizer", "epoch", "batch_size", "learning_rate"):
            if key in run:
                setattr(hyper, key, run[key])
        train.train_lineage.algorithm.network = f"net{index}"
        if "loss" in run:
            train.train_lineage.algorithm.loss = run["loss"]
        events.append(train)
        if "metric/acc" in run:
            evaluation = EvalLineageInfo.from_metrics({"acc": run["metric/acc"]}).to_proto()
            events.append(lineage_pb2.LineageEvent(wall_time=2.0, evaluation_lineage=evaluation))
        if "user_defined/seed" in run:
            custom = UserDefinedInfo.from_values({"seed": run["user_defined/seed"]}).to_proto()
            events.append(lineage_pb2.LineageEvent(wall_time=0.5, user_defined_info=custom))
        directory = root / f"run{index:02d}"
        directory.mkdir()
        path = directory / "events.out.events.summary.1.0.vm_lineage"
        path.write_bytes(b"".join(frame(event.SerializeToString()) for event in events))
        os.utime(path, (1000 - index, 1000 - index))


def dict_query(
    root: Path, terms: list[tuple[str, str, Any]], runs: list[dict[str, Any]]
) -> list[str]:
    condition: dict[str, dict[str, Any]] = {}
    for name, operator, value in terms:
        condition.setdefault(name, {})
        if operator in condition[name]:  # the dict holds one operand per operator
            return []  # (callers skip such draws)
        condition[name][operator] = value
    result = filter_summary_lineage(str(root), condition, use_index=False)
    # The dict's not_in keeps a run without the value (MindInsight 2.3.1); the string
    # filter's `not in`, like all its comparisons, never matches a missing value.
    missing = {
        f"run{index:02d}"
        for index, run in enumerate(runs)
        for name, operator, _ in terms
        if operator == "not_in" and name not in run
    }
    return [name for name in run_names(result) if name not in missing]


@given(
    runs=st.lists(run_strategy, min_size=1, max_size=8),
    terms=st.lists(comparison_strategy(), min_size=1, max_size=3, unique_by=lambda t: t[:2]),
    alternative=st.lists(comparison_strategy(), min_size=1, max_size=2, unique_by=lambda t: t[:2]),
)
def test_string_filter_agrees_with_dict_condition(
    runs: list[dict[str, Any]],
    terms: list[tuple[str, str, Any]],
    alternative: list[tuple[str, str, Any]],
) -> None:
    # text fields take one operator in the dict form (MindInsight 0.7)
    for group in (terms, alternative):
        texts = [t for t in group if t[0] in TEXT_FIELDS]
        if len(texts) > 1:
            group[:] = [t for t in group if t[0] not in TEXT_FIELDS] + texts[:1]
    with tempfile.TemporaryDirectory(prefix="lineage-hypothesis-") as scratch:
        _check_agreement(Path(scratch), runs, terms, alternative)


def _check_agreement(
    root: Path,
    runs: list[dict[str, Any]],
    terms: list[tuple[str, str, Any]],
    alternative: list[tuple[str, str, Any]],
) -> None:
    write_runs(root, runs)
    named = {name for name, _, _ in terms + alternative}
    absent = {
        name
        for name in named
        if name.startswith(("metric/", "user_defined/")) and not any(name in run for run in runs)
    }
    if absent:  # a key no run has is refused as a typo (the dict condition takes it)
        with pytest.raises(LineageExpressionError, match="no run has"):
            filter_runs(
                root, " and ".join(to_text(*term) for term in terms + alternative), use_index=False
            )
        return
    both = " and ".join(to_text(*term) for term in terms)
    assert run_names(filter_runs(root, both, use_index=False)) == dict_query(root, terms, runs)
    either = f"({both}) or ({' and '.join(to_text(*term) for term in alternative)})"
    first = set(dict_query(root, terms, runs))
    second = set(dict_query(root, alternative, runs))
    expected = [
        name for name in run_names(filter_runs(root, use_index=False)) if name in first | second
    ]
    assert run_names(filter_runs(root, either, use_index=False)) == expected


# ------------------------------------------------ hostile filters: clear errors, no crash


def test_parentheses_nested_5000_deep_are_an_expression_error(base: Path) -> None:
    where = "(" * 5000 + "loss < 1" + ")" * 5000
    with pytest.raises(LineageExpressionError, match="parentheses nested more than 100 deep"):
        filter_runs(str(base), where)
    # Nesting a person writes still works.
    assert filter_runs(str(base), "(" * 50 + "loss < 0.35" + ")" * 50)["count"] == 1


def test_a_5000_digit_number_is_an_expression_error(base: Path) -> None:
    with pytest.raises(LineageExpressionError, match="a number of more than 4300 digits") as e:
        filter_runs(str(base), "epoch < " + "9" * 5000)
    assert e.value.column == len("epoch < ")
    assert filter_runs(str(base), "loss < 1" + "0" * 300)["count"] == 4  # long, but an int


@pytest.mark.parametrize("order_by", [5, 1.5, b"loss", ["loss", 5], {"loss": 1}])
def test_an_order_by_of_the_wrong_type_is_a_type_error_naming_it(base: Path, order_by) -> None:
    from rankscribe.lineage.errors import LineageParamTypeError

    with pytest.raises(LineageParamTypeError, match="'order_by' must be None, a sort key"):
        filter_runs(str(base), order_by=order_by)
    assert run_names(filter_runs(str(base), order_by=("loss",))) == [
        "adam",
        "sgd",
        "momentum",
        "noeval",
    ]


@pytest.mark.parametrize("where", ["(" * 5000 + "loss < 1" + ")" * 5000, "epoch < " + "9" * 5000])
def test_the_cli_reports_a_hostile_filter_without_a_traceback(
    base: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    from rankscribe.lineage.cli import main

    code = main(["query", str(base), "--where", where])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == ""
    assert "Traceback" not in captured.err
    assert captured.err.startswith("rankscribe-lineage: error: ")
    assert "digits" in captured.err.splitlines()[0] or "nested" in captured.err.splitlines()[0]
