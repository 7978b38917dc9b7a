"""Every invalid SummaryCollector argument (MindSpore's checks): error type and message.

Also: the defaults, the keep_default_action merge, and MINDINSIGHT_HYPER_CONFIG.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankscribe.collector import (
    ArrayDataset,
    ArrayNetwork,
    CallbackParams,
    CollectorError,
    RunContext,
    SummaryCollector,
    TrainLoop,
)
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.lineage.recording import parse_run
from rankscribe.writer.events import load_dir, load_lineage_dir

TYPE = CollectorTypeError
#: The keys of collect_specified_data (docs/collector-schedule.md), in their documented order.
SPECIFIED_DATA_KEYS = [
    "collect_metric",
    "collect_graph",
    "collect_train_lineage",
    "collect_eval_lineage",
    "collect_input_data",
    "collect_dataset_graph",
    "histogram_regular",
    "collect_landscape",
]
#: The longest MINDINSIGHT_HYPER_CONFIG read (docs/collector-schedule.md: 100,000 characters).
HYPER_CONFIG_LEN_LIMIT = 100_000
VALUE = CollectorValueError


def collector(tmp_path: Path, **arguments: Any) -> SummaryCollector:
    return SummaryCollector(tmp_path / "summary", **arguments)


def raises(error: type[Exception], message: str) -> Any:
    return pytest.raises(error, match=re.escape(message))


# -------------------------------------------------------------- positive ints


POSITIVE_INTS = ["collect_freq", "collect_tensor_freq", "max_file_size", "num_process"]


@pytest.mark.parametrize("name", POSITIVE_INTS)
@pytest.mark.parametrize("value", ["3", 2.0, True, [1]])
def test_positive_int_arguments_refuse_other_types(tmp_path: Path, name: str, value: Any) -> None:
    with raises(
        TYPE,
        f"For `{name}` the type should be a valid type of ['int'], but got "
        f"{type(value).__name__} {value!r}.",
    ):
        collector(tmp_path, **{name: value})


@pytest.mark.parametrize("name", POSITIVE_INTS)
@pytest.mark.parametrize("value", [0, -1])
def test_positive_int_arguments_refuse_zero_and_negatives(
    tmp_path: Path, name: str, value: int
) -> None:
    with raises(
        VALUE,
        f'For "SummaryCollector", the value of `{name}` should be greater than 0, '
        f"but got `{value}`.",
    ):
        collector(tmp_path, **{name: value})


@pytest.mark.parametrize("name", ["collect_tensor_freq", "max_file_size"])
def test_optional_positive_ints_accept_none(tmp_path: Path, name: str) -> None:
    with collector(tmp_path, **{name: None}) as instance:
        record = instance.record
        assert record is not None
        record.add_value("tensor", "big", np.zeros(10_000))  # no max_file_size: no limit
        record.record(1)
    recorded = [event.step for event in load_dir(tmp_path / "summary") if event.what == "summary"]
    assert recorded == [1]


def test_collect_freq_none_is_a_type_error(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `collect_freq` the type should be a valid type of ['int'], but got NoneType None.",
    ):
        collector(tmp_path, collect_freq=None)


# ---------------------------------------------------------------- summary_dir


def test_summary_dir_must_be_a_path(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For 'summary_dir', the argument input path must be a str or os.PathLike, but got int 5.",
    ):
        SummaryCollector(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["", "   "])
def test_summary_dir_must_not_be_empty(value: str) -> None:
    with raises(VALUE, "For 'summary_dir', the input path must be a non-empty directory path"):
        SummaryCollector(value)


def test_summary_dir_must_not_be_a_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with raises(
        VALUE, f"For 'summary_dir', the path must be a directory, but {str(path)!r} is a file."
    ):
        SummaryCollector(path)


def test_summary_dir_must_not_hold_a_nul_character(tmp_path: Path) -> None:
    path = f"{tmp_path}/runs\0exp1"
    with raises(
        VALUE,
        f"For 'summary_dir', the path must not contain a NUL character ('\\0'), but got {path!r}.",
    ):
        SummaryCollector(path)


# ---------------------------------------------------------------- coordinator


@pytest.mark.parametrize("value", [5, "mpi", object()])
def test_coordinator_must_be_a_coordinator(tmp_path: Path, value: Any) -> None:
    with raises(
        TYPE,
        "For 'coordinator', the value should be a rankscribe.ranks.Coordinator "
        "(e.g. create_coordinator(...) or FileCoordinator(...)) or None, but got "
        f"{type(value).__name__} ",
    ):
        collector(tmp_path, coordinator=value)


def test_a_coordinator_is_accepted(tmp_path: Path) -> None:
    from rankscribe.ranks import RankInfo, create_coordinator

    info = RankInfo(rank=0, world_size=1, local_rank=0, local_size=1, host="h", launcher="single")
    with create_coordinator(info) as coordinator:
        assert isinstance(collector(tmp_path, coordinator=coordinator), SummaryCollector)


def test_constructor_creates_the_directory_as_the_original(tmp_path: Path) -> None:
    # MindSpore's constructor makes summary_dir (docs/mindinsight-differences.md,
    # "Directories"); its files come with training.
    collector(tmp_path)
    assert (tmp_path / "summary").is_dir()
    assert list((tmp_path / "summary").iterdir()) == []


# ------------------------------------------------------ collect_specified_data


def test_collect_specified_data_must_be_a_dict(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `collect_specified_data` the type should be a valid type of "
        "['dict', 'NoneType'], but got list [('collect_metric', True)].",
    ):
        collector(tmp_path, collect_specified_data=[("collect_metric", True)])


def test_collect_specified_data_keys_must_be_str(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `collect_specified_data -> 1` the type should be a valid type of "
        "['str'], but got int 1.",
    ):
        collector(tmp_path, collect_specified_data={1: True})


def test_collect_specified_data_unknown_keys(tmp_path: Path) -> None:
    with raises(
        VALUE,
        "For \"SummaryCollector\", the keys ['collect_loss', 'z'] of "
        "`collect_specified_data` are unsupported, expect the follow keys: "
        f"{SPECIFIED_DATA_KEYS}.",
    ):
        collector(tmp_path, collect_specified_data={"z": 1, "collect_loss": True})


@pytest.mark.parametrize(
    "key",
    [
        "collect_metric",
        "collect_graph",
        "collect_train_lineage",
        "collect_eval_lineage",
        "collect_input_data",
        "collect_dataset_graph",
    ],
)
@pytest.mark.parametrize("value", [1, "True", None])
def test_boolean_keys_must_be_bool(tmp_path: Path, key: str, value: Any) -> None:
    with raises(
        TYPE,
        f"For `{key}` the type should be a valid type of ['bool'], but got "
        f"{type(value).__name__} {value!r}.",
    ):
        collector(tmp_path, collect_specified_data={key: value})


def test_histogram_regular_must_be_str_or_none(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `histogram_regular` the type should be a valid type of ['str', "
        "'NoneType'], but got int 5.",
    ):
        collector(tmp_path, collect_specified_data={"histogram_regular": 5})


def test_histogram_regular_must_compile(tmp_path: Path) -> None:
    with raises(
        VALUE,
        "For `collect_specified_data`, the value of `histogram_regular` "
        "'conv[' is not a valid regular expression. Detail: ",
    ):
        collector(tmp_path, collect_specified_data={"histogram_regular": "conv["})


def test_keep_default_action_must_be_bool(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `keep_default_action` the type should be a valid type of ['bool'], but got str 'yes'.",
    ):
        collector(tmp_path, keep_default_action="yes")


# ----------------------------------------------------------- collect_landscape


def landscape(tmp_path: Path, **values: Any) -> SummaryCollector:
    return collector(tmp_path, collect_specified_data={"collect_landscape": values})


def test_collect_landscape_must_be_a_dict_or_none(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `collect_landscape` the type should be a valid type of ['dict', "
        "'NoneType'], but got str 'on'.",
    ):
        collector(tmp_path, collect_specified_data={"collect_landscape": "on"})


def test_collect_landscape_unknown_keys(tmp_path: Path) -> None:
    with raises(
        VALUE,
        "For \"SummaryCollector\", the keys ['size'] of `collect_landscape` are "
        "unsupported, expect the follow keys: ['landscape_size', 'unit', "
        "'num_samples', 'create_landscape', 'intervals'].",
    ):
        landscape(tmp_path, size=3)


@pytest.mark.parametrize("size", [2, 257, -1])
def test_landscape_size_range(tmp_path: Path, size: int) -> None:
    with raises(
        VALUE,
        'For "SummaryCollector", the "landscape_size" in collect_specified_data '
        f"should be less than 256 and more than 3, but got the: {size}.",
    ):
        landscape(tmp_path, landscape_size=size)


@pytest.mark.parametrize("size", [3, 256])
def test_landscape_size_bounds_are_allowed(tmp_path: Path, size: int) -> None:
    instance = landscape(tmp_path, landscape_size=size, intervals=[[1, 2, 3]])
    network = ArrayNetwork({"w": np.ones(2)})
    loop = TrainLoop(lambda batch: 1.0, network=network)
    loop.train(1, ArrayDataset(np.zeros((2, 1))), callbacks=[instance])
    metadata = json.loads((tmp_path / "summary" / "ckpt_dir" / "train_metadata.json").read_text())
    assert metadata["landscape_size"] == size


def test_landscape_size_type(tmp_path: Path) -> None:
    with raises(
        TYPE, "For `landscape_size` the type should be a valid type of ['int'], but got str '40'."
    ):
        landscape(tmp_path, landscape_size="40")


def test_landscape_unit_value(tmp_path: Path) -> None:
    with raises(
        VALUE,
        'For "SummaryCollector", unit in collect_specified_data should be step '
        "or epoch, but got the: 'batch'.",
    ):
        landscape(tmp_path, unit="batch")


def test_landscape_unit_type(tmp_path: Path) -> None:
    with raises(TYPE, "For `unit` the type should be a valid type of ['str'], but got int 1."):
        landscape(tmp_path, unit=1)


def test_landscape_num_samples_type(tmp_path: Path) -> None:
    with raises(
        TYPE, "For `num_samples` the type should be a valid type of ['int'], but got float 1.5."
    ):
        landscape(tmp_path, num_samples=1.5)


def test_create_landscape_type(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `create_landscape` the type should be a valid type of ['dict'], but "
        "got list ['train'].",
    ):
        landscape(tmp_path, create_landscape=["train"])


def test_create_landscape_keys(tmp_path: Path) -> None:
    with raises(
        VALUE,
        'For "SummaryCollector", the key to create landscape should be in '
        '["train", "result"], but got the: \'eval\'.',
    ):
        landscape(tmp_path, create_landscape={"eval": True})


def test_create_landscape_values(tmp_path: Path) -> None:
    with raises(TYPE, "For `train` the type should be a valid type of ['bool'], but got int 1."):
        landscape(tmp_path, create_landscape={"train": 1})


def test_intervals_type(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `intervals` the type should be a valid type of ['list'], but got tuple ([1, 2, 3],).",
    ):
        landscape(tmp_path, intervals=([1, 2, 3],))


def test_each_interval_type(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `each interval in intervals` the type should be a valid type of "
        "['list'], but got range range(1, 4).",
    ):
        landscape(tmp_path, intervals=[range(1, 4)])


def test_each_interval_has_three_entries(tmp_path: Path) -> None:
    with raises(
        VALUE,
        'For "SummaryCollector", the length of each list in "intervals" should '
        "not be less than three, but got the: [1, 2].",
    ):
        landscape(tmp_path, intervals=[[1, 2, 3], [1, 2]])


@pytest.mark.parametrize("item", ["3", 3.0, True])
def test_interval_entries_are_ints(tmp_path: Path, item: Any) -> None:
    with raises(
        TYPE,
        'For "SummaryCollector", the value of each list in "intervals" should be '
        f"int, but got the: {type(item).__name__} {item!r}.",
    ):
        landscape(tmp_path, intervals=[[1, 2, item]])


# --------------------------------------------------------- custom_lineage_data


def test_custom_lineage_data_type(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `custom_lineage_data` the type should be a valid type of ['dict', "
        "'NoneType'], but got list [1].",
    ):
        collector(tmp_path, custom_lineage_data=[1])


def test_custom_lineage_data_keys(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `custom_lineage_data -> 1` the type should be a valid type of ['str'], but got int 1.",
    ):
        collector(tmp_path, custom_lineage_data={1: 2})


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}])
def test_custom_lineage_data_values(tmp_path: Path, value: Any) -> None:
    with raises(
        TYPE,
        "For `the value of custom_lineage_data -> lr` the type should be a valid "
        f"type of ['int', 'str', 'float'], but got {type(value).__name__}",
    ):
        collector(tmp_path, custom_lineage_data={"lr": value})


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_custom_lineage_ints_fit_int32(tmp_path: Path, value: int) -> None:
    with raises(
        VALUE,
        f"For `custom_lineage_data`, the value of 'steps' is {value}, which does "
        "not fit in an int32",
    ):
        collector(tmp_path, custom_lineage_data={"steps": value})


# -------------------------------------------------------------- export_options


def test_export_options_type(tmp_path: Path) -> None:
    with raises(
        TYPE,
        "For `export_options` the type should be a valid type of ['dict', "
        "'NoneType'], but got str 'npy'.",
    ):
        collector(tmp_path, export_options="npy")


def test_export_options_keys(tmp_path: Path) -> None:
    with raises(
        VALUE,
        "For 'export_options', the keys ['format'] are unsupported, expect the "
        "follow keys: ['tensor_format'].",
    ):
        collector(tmp_path, export_options={"format": "npy"})


def test_export_options_tensor_format(tmp_path: Path) -> None:
    with raises(
        VALUE,
        "For 'export_options', the value of 'tensor_format' should be one of "
        "['npy', None], but got 'csv'.",
    ):
        collector(tmp_path, export_options={"tensor_format": "csv"})


# -------------------------------------------------------------- merge_timeout


@pytest.mark.parametrize("timeout", [math.inf, -math.inf, math.nan])
def test_a_non_finite_merge_timeout_is_refused(tmp_path: Path, timeout: float) -> None:
    # The ranks' collectives refuse an unbounded wait: accepted here, it would only
    # surface at the end of a multi-rank job, as a lineage merge skipped with a log line.
    with pytest.raises(ValueError, match="merge_timeout"):
        SummaryCollector(tmp_path, merge_timeout=timeout)


# -------------------------------------------------------- checks at begin()


def begin(instance: SummaryCollector, **state: Any) -> None:
    params = CallbackParams(list_callback=[instance], **state)
    instance.begin(RunContext(params))


def test_mode_must_be_train_or_eval(tmp_path: Path) -> None:
    with (
        collector(tmp_path) as instance,
        raises(
            VALUE,
            "Only support `train` (model.train) and `eval` (model.eval) mode, but got "
            "`predict` mode.",
        ),
    ):
        begin(instance, mode="predict")


def test_only_one_collector_per_callback_list(tmp_path: Path) -> None:
    first, second = collector(tmp_path), collector(tmp_path)
    params = CallbackParams(mode="train", list_callback=[first, second])
    with (
        first,
        raises(
            VALUE,
            "There are more than one SummaryCollector instance in callback "
            "list, but expected only one SummaryCollector instance (found 2).",
        ),
    ):
        first.begin(RunContext(params))


class TimedCollector(SummaryCollector):
    """A user's subclass: another class name than SummaryCollector's."""


def test_a_collector_subclass_beside_a_collector_is_refused(tmp_path: Path) -> None:
    # MindSpore compares class names, so a subclass passes its check and both record the
    # run; here it counts as a second collector (docs/mindinsight-differences.md,
    # "collector-subclass").
    first = collector(tmp_path)
    second = TimedCollector(tmp_path / "other", collect_specified_data={"collect_landscape": None})
    params = CallbackParams(mode="train", list_callback=[first, second])
    with (
        second,
        raises(
            VALUE,
            "There are more than one SummaryCollector instance in callback "
            "list, but expected only one SummaryCollector instance (found 2).",
        ),
    ):
        second.begin(RunContext(params))


def test_errors_share_one_hierarchy(model: Any, tmp_path: Path) -> None:
    for arguments in ({"collect_freq": 0}, {"collect_freq": "1"}):
        with pytest.raises(CollectorError):
            collector(tmp_path, **arguments)
    assert issubclass(CollectorValueError, ValueError)
    assert issubclass(CollectorTypeError, TypeError)


# -------------------------------------------------------------- defaults, merge


def collected(
    directory: Path, model: Any, specified: dict[str, Any] | None = None, **arguments: Any
) -> dict[str, Any]:
    """Train an epoch and evaluate with a collector; what its files then hold.

    ``{"scalars"|"histograms"|"images": tags, "graphs": count, "lineage": record kinds,
    "landscape": train_metadata.json or None}``.
    """
    data = model(2)
    instance = SummaryCollector(directory, collect_specified_data=specified, **arguments)
    loop = TrainLoop(
        lambda batch: 0.5,
        eval_fn=lambda batch: {"acc": 0.5},
        network=data.network,
        optimizer=data.optimizer,
    )
    loop.train(1, data.dataset, callbacks=[instance])
    loop.eval(data.dataset, callbacks=[instance])
    found: dict[str, Any] = {"scalars": set(), "histograms": set(), "images": set(), "graphs": 0}
    for event in load_dir(directory):
        found["graphs"] += event.graph is not None
        for value in event.values if event.what == "summary" else ():
            found[f"{value.plugin}s"].add(value.tag)
    found["lineage"] = sorted(record.what for record in load_lineage_dir(directory))
    metadata = directory / "ckpt_dir" / "train_metadata.json"
    found["landscape"] = json.loads(metadata.read_text()) if metadata.exists() else None
    return found


PARAMETERS = {"fc.weight", "fc.bias", "head.weight", "head.bias", "norm.gamma"}
LINEAGE = ["dataset_graph", "evaluation_lineage", "train_lineage"]
DEFAULT_INTERVALS = {"0": list(range(1, 10)), "1": list(range(10, 20))}


def test_defaults(model: Any, tmp_path: Path) -> None:
    found = collected(tmp_path, model)
    assert "loss/auto" in found["scalars"]  # collect_metric
    assert found["graphs"] == 1  # collect_graph
    assert found["lineage"] == LINEAGE  # the train, eval and dataset-graph lineage
    assert found["images"] == {"input_data/auto"}  # collect_input_data
    # collect_histogram, every parameter (histogram_regular None; norm.beta stays zero)
    assert found["histograms"] == {f"{name}/auto" for name in PARAMETERS}
    landscape = found["landscape"]
    assert landscape is not None
    assert (landscape["landscape_size"], landscape["unit"]) == (40, "step")
    assert landscape["num_samples"] == 2048
    assert landscape["create_landscape"] == {"train": True, "result": True}
    assert landscape["epoch_group"] == DEFAULT_INTERVALS


def test_user_dict_is_merged_over_the_defaults(model: Any, tmp_path: Path) -> None:
    specified = {"collect_metric": False, "histogram_regular": "^fc", "collect_landscape": None}
    found = collected(tmp_path, model, specified)
    assert "loss/auto" not in found["scalars"]
    assert found["graphs"] == 1 and found["images"] == {"input_data/auto"}
    assert found["lineage"] == LINEAGE
    assert found["histograms"] == {"fc.weight/auto", "fc.bias/auto"}


def test_without_default_action_only_the_user_dict_counts(model: Any, tmp_path: Path) -> None:
    found = collected(tmp_path, model, {"collect_metric": True}, keep_default_action=False)
    assert "loss/auto" in found["scalars"]
    assert (found["graphs"], found["images"], found["histograms"]) == (0, set(), set())
    assert found["lineage"] == [] and found["landscape"] is None
    nothing = collected(tmp_path / "nothing", model, keep_default_action=False)
    assert "loss/auto" not in nothing["scalars"]
    assert nothing["lineage"] == [] and nothing["landscape"] is None


def test_landscape_keys_left_out_take_their_defaults(model: Any, tmp_path: Path) -> None:
    found = collected(tmp_path, model, {"collect_landscape": {"unit": "epoch"}})
    assert found["landscape"] is not None
    assert found["landscape"]["unit"] == "epoch" and found["landscape"]["landscape_size"] == 40


def test_defaults_are_not_shared_between_collectors(model: Any, tmp_path: Path) -> None:
    # A first collector's settings (and a run of it) leave the next one's defaults alone,
    # and the user's dict as it was.
    specified = {"collect_landscape": {"intervals": [[1, 2, 3]], "unit": "epoch"}}
    collected(tmp_path / "first", model, specified)
    assert specified == {"collect_landscape": {"intervals": [[1, 2, 3]], "unit": "epoch"}}
    second = collected(tmp_path / "second", model)["landscape"]
    assert second is not None and second["unit"] == "step"
    assert second["epoch_group"] == DEFAULT_INTERVALS


# ----------------------------------------------------- MINDINSIGHT_HYPER_CONFIG


def config(data: Any) -> str:
    return json.dumps({"custom_lineage_data": data})


def custom_lineage(
    directory: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: Any,
    hyper_config: str,
    user: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The custom lineage a run records with ``hyper_config`` in the environment."""
    monkeypatch.setenv("MINDINSIGHT_HYPER_CONFIG", hyper_config)
    data = model(2)
    instance = SummaryCollector(
        directory, collect_specified_data={"collect_landscape": None}, custom_lineage_data=user
    )
    TrainLoop(lambda batch: 0.5, network=data.network).train(1, data.dataset, callbacks=[instance])
    lineage = parse_run(str(directory)).lineage
    assert lineage is not None
    return dict(lineage.section("user_defined"))


def test_hyper_config_is_merged_under_the_user_values(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = config({"lr": 0.1, "tag": "env", "batch": 32})
    found = custom_lineage(tmp_path, monkeypatch, model, environ, {"tag": "user"})
    assert found == {"lr": pytest.approx(0.1), "tag": "user", "batch": 32}


def test_hyper_config_at_the_limit_is_read(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    padding = "x" * (HYPER_CONFIG_LEN_LIMIT - len(config({"k": ""})))
    environ = config({"k": padding})
    assert len(environ) == HYPER_CONFIG_LEN_LIMIT
    assert custom_lineage(tmp_path, monkeypatch, model, environ) == {"k": padding}


def test_hyper_config_over_the_limit_is_ignored(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    padding = "x" * HYPER_CONFIG_LEN_LIMIT
    assert custom_lineage(tmp_path, monkeypatch, model, config({"k": padding}), {"a": 1}) == {
        "a": 1
    }
    assert "is too long. The length limit is 100000" in caplog.text


def test_hyper_config_that_is_not_json_is_ignored(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert custom_lineage(tmp_path, monkeypatch, model, "{oops", {"a": 1}) == {"a": 1}
    assert "decode error" in caplog.text


def test_hyper_config_holding_a_json_list_is_ignored_with_a_warning(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # MindSpore's SummaryCollector fails with AttributeError ('list' object has no
    # attribute 'get') when it is made; here the run goes on without the environment's
    # data (docs/mindinsight-differences.md, "hyper-config-not-object").
    environ = json.dumps([{"custom_lineage_data": {"lr": 0.1}}])
    assert custom_lineage(tmp_path, monkeypatch, model, environ, {"a": 1}) == {"a": 1}
    assert (
        "The 'MINDINSIGHT_HYPER_CONFIG' of environment variable must be a JSON object, got list."
        in caplog.text
    )


def test_hyper_config_without_custom_data(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = custom_lineage(tmp_path, monkeypatch, model, json.dumps({"x": 1}), {"a": 1})
    assert found == {"a": 1}


def test_hyper_config_with_bad_values_is_a_type_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINDINSIGHT_HYPER_CONFIG", config({"flag": True}))
    with raises(
        TYPE,
        "For `the value of MINDINSIGHT_HYPER_CONFIG custom_lineage_data -> flag` "
        "the type should be a valid type of ['int', 'str', 'float'], but got bool",
    ):
        collector(tmp_path)


def test_hyper_config_is_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINDINSIGHT_HYPER_CONFIG", json.dumps({"custom_lineage_data": {"a": [1]}}))
    with raises(TYPE, "For `the value of MINDINSIGHT_HYPER_CONFIG custom_lineage_data -> a`"):
        collector(tmp_path)
