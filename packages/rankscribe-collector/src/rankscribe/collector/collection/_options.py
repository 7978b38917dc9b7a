"""The SummaryCollector's arguments: validation, defaults and ``collect_specified_data``.

Everything here runs once, in the collector's constructor, and follows
MindSpore's ``SummaryCollector`` (``docs/collector-schedule.md`` lists the
``collect_specified_data`` keys and defaults): the same defaults, the same
merge rule for ``keep_default_action``, the same error types, and messages
worded like the original's (so a search for the original message finds ours)
that also name the value received.

- :func:`check_positive_int`: ``collect_freq``, ``collect_tensor_freq``,
  ``max_file_size``, ``num_process``.
- :func:`process_specified_data`: ``collect_specified_data`` and
  ``keep_default_action`` into a :class:`CollectOptions`.
- :func:`custom_lineage_data`: the user's custom lineage over the
  ``MINDINSIGHT_HYPER_CONFIG`` environment variable's.
- :func:`check_export_options`, :func:`check_summary_dir`, :func:`check_coordinator`,
  :func:`check_on_exists`.
- :func:`check_landscape_budget`: ``landscape_budget``, else ``RANKSCRIBE_LANDSCAPE_BUDGET``,
  else :data:`DEFAULT_LANDSCAPE_BUDGET` (docs/collector-schedule.md, "Loss landscape").
- :func:`collector_arguments`: all of them into the :class:`CollectorArguments` a
  collector and its runs read (``on_exists``: docs/layout.md, "Two jobs, one directory").
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from rankscribe.collector._checks import is_int
from rankscribe.collector._checks import shown as _shown
from rankscribe.collector._fingerprint import check_budget
from rankscribe.collector.errors import CollectorTypeError, CollectorValueError
from rankscribe.ranks import Coordinator, OnExists, RankInfo

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_LANDSCAPE_BUDGET",
    "DEFAULT_SPECIFIED_DATA",
    "HYPER_CONFIG_ENV_NAME",
    "HYPER_CONFIG_LEN_LIMIT",
    "LANDSCAPE_BUDGET_ENV",
    "CollectOptions",
    "CollectorArguments",
    "LandscapeOptions",
    "check_coordinator",
    "check_export_options",
    "check_formats",
    "check_landscape_budget",
    "check_merge_timeout",
    "check_on_exists",
    "check_one_of_a_kind",
    "check_optional_positive_int",
    "check_positive_int",
    "check_summary_dir",
    "collector_arguments",
    "custom_lineage_data",
    "process_specified_data",
]

_OWNER = "SummaryCollector"
_Kind = TypeVar("_Kind")

#: What MindInsight's hyper-parameter tools export; its ``custom_lineage_data`` is collected.
HYPER_CONFIG_ENV_NAME = "MINDINSIGHT_HYPER_CONFIG"
#: Longer values are ignored, with a warning (the original's limit).
HYPER_CONFIG_LEN_LIMIT = 100_000

_DEFAULT_LANDSCAPE: dict[str, Any] = {
    "landscape_size": 40,
    "unit": "step",
    # The original's docstring says 128; its code uses 2048.
    "num_samples": 2048,
    "create_landscape": {"train": True, "result": True},
    "intervals": [list(range(1, 10)), list(range(10, 20))],
}

#: ``collect_specified_data`` keys and their defaults (MindSpore's ``_DEFAULT_SPECIFIED_DATA``).
DEFAULT_SPECIFIED_DATA: dict[str, Any] = {
    "collect_metric": True,
    "collect_graph": True,
    "collect_train_lineage": True,
    "collect_eval_lineage": True,
    "collect_input_data": True,
    "collect_dataset_graph": True,
    "histogram_regular": None,
    "collect_landscape": _DEFAULT_LANDSCAPE,
}
_BOOL_KEYS = tuple(key for key, value in DEFAULT_SPECIFIED_DATA.items() if value is True)
_LANDSCAPE_SIZE_RANGE = (3, 256)
_LANDSCAPE_UNITS = ("step", "epoch")
_MIN_INTERVAL_LENGTH = 3
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_EXPORT_FORMATS = ("npy", None)

#: Bytes of landscape parameter files a rank writes at most, by default. It keeps
#: MindSpore's 19 sets for a network of up to 3.3 MB (about 840,000 float32
#: parameters: LeNet-5, the MLPs and small CNNs the landscape is usually drawn for), and
#: bounds a larger network's to what a few summary files take, whatever its size.
DEFAULT_LANDSCAPE_BUDGET = 64_000_000
#: The environment variable read when ``landscape_budget`` is not given.
LANDSCAPE_BUDGET_ENV = "RANKSCRIBE_LANDSCAPE_BUDGET"
#: The budget's word for no budget: every set of the intervals is saved.
_LANDSCAPE_ALL = "all"


@dataclass(frozen=True)
class LandscapeOptions:
    """``collect_specified_data['collect_landscape']``, validated."""

    landscape_size: int
    unit: str
    num_samples: int
    create_landscape: dict[str, bool]
    intervals: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class CollectOptions:
    """What to collect, after defaults and ``keep_default_action`` are applied.

    ``collect_histogram`` is False when the ``histogram_regular`` key is absent
    (possible with ``keep_default_action=False``): the original then collects
    no histograms at all, while ``histogram_regular=None`` means "the first five".
    """

    collect_metric: bool
    collect_graph: bool
    collect_train_lineage: bool
    collect_eval_lineage: bool
    collect_input_data: bool
    collect_dataset_graph: bool
    collect_histogram: bool
    histogram_regular: str | None
    landscape: LandscapeOptions | None
    merged: dict[str, Any]


def _is_instance(value: object, valid: tuple[type, ...]) -> bool:
    # bool is an int, but never a valid one unless asked for by name.
    if isinstance(value, bool) and bool not in valid:
        return False
    return isinstance(value, valid)


def check_type(name: str, value: object, valid: tuple[type, ...]) -> None:
    """Raise the original's TypeError (``check_value_type``) unless ``value`` is of ``valid``."""
    if not _is_instance(value, valid):
        names = [kind.__name__ for kind in valid]
        raise CollectorTypeError(
            f"For `{name}` the type should be a valid type of {names}, but got "
            f"{type(value).__name__} {_shown(value)}."
        )


def check_positive_int(name: str, value: object) -> int:
    """``value`` as an int > 0; TypeError for a non-int (bool included), ValueError otherwise.

    The original's wording (``check_value_type`` and its positive-int check), as every
    option of ``SummaryCollector`` words its errors here.
    """
    check_type(name, value, (int,))
    number = cast(int, value)  # check_type refused a bool and every other type
    if number < 1:
        raise CollectorValueError(
            f'For "{_OWNER}", the value of `{name}` should be greater than 0, but got `{number}`.'
        )
    return number


def check_optional_positive_int(name: str, value: object) -> int | None:
    """None, or an int > 0 as :func:`check_positive_int` checks it."""
    return None if value is None else check_positive_int(name, value)


def check_one_of_a_kind(callbacks: object, kind: type) -> None:
    """At most one callback of ``kind`` in a run's callback list (the original's rule)."""
    found = [item for item in callbacks or [] if isinstance(item, kind)]  # type: ignore[attr-defined]
    if len(found) > 1:
        raise CollectorValueError(
            f"There are more than one {kind.__name__} instance in callback list, but "
            f"expected only one {kind.__name__} instance (found {len(found)})."
        )


def check_summary_dir(summary_dir: object) -> str:
    """The absolute ``summary_dir``: a non-empty path that is not a file."""
    if not isinstance(summary_dir, (str, os.PathLike)):
        raise CollectorTypeError(
            f"For 'summary_dir', the argument input path must be a str or os.PathLike, but got "
            f"{type(summary_dir).__name__} {_shown(summary_dir)}."
        )
    path = os.fspath(summary_dir)
    if not isinstance(path, str) or not path.strip():
        raise CollectorValueError(
            f"For 'summary_dir', the input path must be a non-empty directory path, but got "
            f"{_shown(summary_dir)}."
        )
    if "\0" in path:
        # No file system accepts it; os.path would only say "embedded null byte".
        raise CollectorValueError(
            f"For 'summary_dir', the path must not contain a NUL character ('\\0'), but got "
            f"{_shown(path)}."
        )
    absolute = os.path.realpath(path)
    if os.path.exists(absolute) and not os.path.isdir(absolute):
        raise CollectorValueError(
            f"For 'summary_dir', the path must be a directory, but {absolute!r} is a file."
        )
    return absolute


def check_coordinator(coordinator: object) -> Coordinator | None:
    """``coordinator`` if it is None or a :class:`rankscribe.ranks.Coordinator`, else raise."""
    if coordinator is not None and not isinstance(coordinator, Coordinator):
        raise CollectorTypeError(
            f"For 'coordinator', the value should be a rankscribe.ranks.Coordinator (e.g. "
            f"create_coordinator(...) or FileCoordinator(...)) or None, but got "
            f"{type(coordinator).__name__} {_shown(coordinator)}."
        )
    return coordinator


def check_export_options(export_options: object) -> dict[str, Any] | None:
    """``{'tensor_format': 'npy' | None}`` or None, as SummaryRecord accepts it."""
    if export_options is None:
        return None
    check_type("export_options", export_options, (dict, type(None)))
    assert isinstance(export_options, dict)
    unknown = [key for key in export_options if key != "tensor_format"]
    if unknown:
        raise CollectorValueError(
            f"For 'export_options', the keys {unknown} are unsupported, expect the follow "
            f"keys: ['tensor_format']."
        )
    tensor_format = export_options.get("tensor_format")
    if tensor_format not in _EXPORT_FORMATS:
        raise CollectorValueError(
            f"For 'export_options', the value of 'tensor_format' should be one of "
            f"{list(_EXPORT_FORMATS)}, but got {_shown(tensor_format)}."
        )
    return dict(export_options)


# ------------------------------------------------------------ collect_specified_data


def process_specified_data(specified_data: object, keep_default_action: object) -> CollectOptions:
    """Validate ``collect_specified_data`` and merge it with the defaults.

    With ``keep_default_action=True`` the user's dict is laid over
    :data:`DEFAULT_SPECIFIED_DATA`; with False only the user's keys count.
    """
    check_type("keep_default_action", keep_default_action, (bool,))
    check_type("collect_specified_data", specified_data, (dict, type(None)))
    user: dict[str, Any] = dict(specified_data) if isinstance(specified_data, dict) else {}
    for key in user:
        check_type(f"collect_specified_data -> {_shown(key)}", key, (str,))
    unexpected = sorted(set(user) - set(DEFAULT_SPECIFIED_DATA))
    if unexpected:
        raise CollectorValueError(
            f'For "{_OWNER}", the keys {unexpected} of `collect_specified_data` are '
            f"unsupported, expect the follow keys: {list(DEFAULT_SPECIFIED_DATA)}."
        )
    if "histogram_regular" in user:
        _check_histogram_regular(user["histogram_regular"])
    for key in _BOOL_KEYS:
        if key in user:
            check_type(key, user[key], (bool,))
    merged = copy.deepcopy(DEFAULT_SPECIFIED_DATA) if keep_default_action else {}
    merged.update(user)
    landscape = merged.get("collect_landscape")
    check_type("collect_landscape", landscape, (dict, type(None)))
    landscape_options = _landscape_options(landscape) if landscape else None
    logger.info("For 'collect_specified_data' the value after processing is: %s.", merged)
    return CollectOptions(
        collect_metric=bool(merged.get("collect_metric", False)),
        collect_graph=bool(merged.get("collect_graph", False)),
        collect_train_lineage=bool(merged.get("collect_train_lineage", False)),
        collect_eval_lineage=bool(merged.get("collect_eval_lineage", False)),
        collect_input_data=bool(merged.get("collect_input_data", False)),
        collect_dataset_graph=bool(merged.get("collect_dataset_graph", False)),
        collect_histogram="histogram_regular" in merged,
        histogram_regular=merged.get("histogram_regular"),
        landscape=landscape_options,
        merged=merged,
    )


def _check_histogram_regular(regular: object) -> None:
    check_type("histogram_regular", regular, (str, type(None)))
    if isinstance(regular, str):
        try:
            re.compile(regular)
        except re.error as error:
            raise CollectorValueError(
                f"For `collect_specified_data`, the value of `histogram_regular` "
                f"{_shown(regular)} is not a valid regular expression. Detail: {error}."
            ) from error


def _landscape_options(landscape: Mapping[str, Any]) -> LandscapeOptions:
    """Validate ``collect_landscape``; keys left out take their default.

    The original required ``intervals`` whenever ``collect_landscape`` was
    given (a TypeError for ``None`` otherwise); here it defaults like the rest.
    """
    unexpected = sorted(set(landscape) - set(_DEFAULT_LANDSCAPE))
    if unexpected:
        raise CollectorValueError(
            f'For "{_OWNER}", the keys {unexpected} of `collect_landscape` are unsupported, '
            f"expect the follow keys: {list(_DEFAULT_LANDSCAPE)}."
        )
    values = {**copy.deepcopy(_DEFAULT_LANDSCAPE), **landscape}
    size = values["landscape_size"]
    check_type("landscape_size", size, (int,))
    low, high = _LANDSCAPE_SIZE_RANGE
    if not low <= size <= high:
        raise CollectorValueError(
            f'For "{_OWNER}", the "landscape_size" in collect_specified_data should be less '
            f"than {high} and more than {low}, but got the: {size}."
        )
    unit = values["unit"]
    check_type("unit", unit, (str,))
    if unit not in _LANDSCAPE_UNITS:
        raise CollectorValueError(
            f'For "{_OWNER}", unit in collect_specified_data should be step or epoch, but got '
            f"the: {unit!r}."
        )
    check_type("num_samples", values["num_samples"], (int,))
    if values["num_samples"] <= 0:
        raise CollectorValueError(
            f'For "{_OWNER}", the "num_samples" in collect_specified_data should be a positive '
            f"int (how many samples the landscape is computed on), but got "
            f"{values['num_samples']}."
        )
    return LandscapeOptions(
        landscape_size=size,
        unit=unit,
        num_samples=values["num_samples"],
        create_landscape=_check_create_landscape(values["create_landscape"]),
        intervals=_check_intervals(values["intervals"]),
    )


def _check_create_landscape(create_landscape: object) -> dict[str, bool]:
    check_type("create_landscape", create_landscape, (dict,))
    assert isinstance(create_landscape, dict)
    for key, value in create_landscape.items():
        if key not in ("train", "result"):
            raise CollectorValueError(
                f'For "{_OWNER}", the key to create landscape should be in ["train", '
                f'"result"], but got the: {_shown(key)}.'
            )
        check_type(key, value, (bool,))
    return dict(create_landscape)


def _check_intervals(intervals: object) -> tuple[tuple[int, ...], ...]:
    check_type("intervals", intervals, (list,))
    assert isinstance(intervals, list)
    checked: list[tuple[int, ...]] = []
    for interval in intervals:
        check_type("each interval in intervals", interval, (list,))
        if len(interval) < _MIN_INTERVAL_LENGTH:
            raise CollectorValueError(
                f'For "{_OWNER}", the length of each list in "intervals" should not be less '
                f"than three, but got the: {_shown(interval)}."
            )
        for item in interval:
            if not is_int(item):
                raise CollectorTypeError(
                    f'For "{_OWNER}", the value of each list in "intervals" should be int, '
                    f"but got the: {type(item).__name__} {_shown(item)}."
                )
        checked.append(tuple(interval))
    return tuple(checked)


# ---------------------------------------------------------------- custom lineage


def check_custom_lineage(name: str, data: object) -> dict[str, int | float | str]:
    """A flat dict of str to int (int32), float or str; a bool is a TypeError."""
    check_type(name, data, (dict, type(None)))
    if data is None:
        return {}
    assert isinstance(data, dict)
    for key, value in data.items():
        check_type(f"{name} -> {_shown(key)}", key, (str,))
        check_type(f"the value of {name} -> {key}", value, (int, str, float))
        if isinstance(value, int) and not _INT32_MIN <= value <= _INT32_MAX:
            raise CollectorValueError(
                f"For `{name}`, the value of {key!r} is {value}, which does not fit in an "
                f"int32 [{_INT32_MIN}, {_INT32_MAX}]."
            )
    return dict(data)


def hyper_config_lineage(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``custom_lineage_data`` of the ``MINDINSIGHT_HYPER_CONFIG`` JSON, or ``{}``.

    A value longer than :data:`HYPER_CONFIG_LEN_LIMIT` characters, or one that
    is not a JSON object, is ignored with a warning, as in the original.
    """
    env = os.environ if environ is None else environ
    text = env.get(HYPER_CONFIG_ENV_NAME)
    if text is None:
        return {}
    if len(text) > HYPER_CONFIG_LEN_LIMIT:
        logger.warning(
            "The '%s' of environment variable is too long. The length limit is %d, the "
            "length of hyper_config is %d.",
            HYPER_CONFIG_ENV_NAME,
            HYPER_CONFIG_LEN_LIMIT,
            len(text),
        )
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        logger.warning(
            "The '%s' of environment variable decode error. Detail: %s.",
            HYPER_CONFIG_ENV_NAME,
            error,
        )
        return {}
    if not isinstance(config, dict):
        logger.warning(
            "The '%s' of environment variable must be a JSON object, got %s.",
            HYPER_CONFIG_ENV_NAME,
            type(config).__name__,
        )
        return {}
    data = config.get("custom_lineage_data")
    if data is None:
        logger.info("No custom lineage data in hyper config %s.", HYPER_CONFIG_ENV_NAME)
        return {}
    return check_custom_lineage(f"{HYPER_CONFIG_ENV_NAME} custom_lineage_data", data)


def custom_lineage_data(
    user_data: object, environ: Mapping[str, str] | None = None
) -> dict[str, int | float | str]:
    """The user's ``custom_lineage_data`` laid over the environment's (the user wins)."""
    user = check_custom_lineage("custom_lineage_data", user_data)
    merged: dict[str, int | float | str] = dict(hyper_config_lineage(environ))
    merged.update(user)
    return merged


_custom_lineage = custom_lineage_data  # the name the collector's argument takes over below
_FORMATS = ("mindinsight", "tensorboard")


def check_formats(formats: object) -> tuple[str, ...]:
    """SummaryCollector's ``formats``: a non-empty list of the writer's output formats."""
    chosen = (formats,) if isinstance(formats, str) else formats
    if (
        not isinstance(chosen, Sequence)
        or not chosen
        or any(item not in _FORMATS for item in chosen)
    ):
        raise CollectorValueError(
            f"For 'formats', the value should be a non-empty list of {list(_FORMATS)}, but got "
            f"{formats!r}."
        )
    return tuple(chosen)


def check_merge_timeout(merge_timeout: object) -> float:
    """A finite number of seconds >= 0.

    The ranks' collectives refuse an unbounded wait: an infinite timeout would
    only surface at the end of training, as a merge that never ran.
    """
    check_type("merge_timeout", merge_timeout, (int, float))
    if not 0 <= merge_timeout < math.inf:  # type: ignore[operator]
        raise CollectorValueError(
            f"For 'merge_timeout', the value should be a finite number of seconds >= 0, "
            f"but got {merge_timeout!r}."
        )
    return float(merge_timeout)  # type: ignore[arg-type]


def check_landscape_budget(budget: object, environ: Mapping[str, str] | None = None) -> int | None:
    """Bytes of landscape files per rank (None: no budget): ``budget``, else the variable
    ``RANKSCRIBE_LANDSCAPE_BUDGET``, else :data:`DEFAULT_LANDSCAPE_BUDGET`.

    Either takes an int number of bytes >= 1 or ``"all"``; anything else is refused,
    naming the argument (or the variable), the value and the form expected.
    """
    source, value = "'landscape_budget'", budget
    if budget is None:
        text = (os.environ if environ is None else environ).get(LANDSCAPE_BUDGET_ENV, "").strip()
        if not text:
            return DEFAULT_LANDSCAPE_BUDGET
        source = f"the environment variable {LANDSCAPE_BUDGET_ENV}"
        value = int(text) if text.isascii() and text.isdigit() else text.lower()
    expected = (
        f"an int number of bytes >= 1 (e.g. {DEFAULT_LANDSCAPE_BUDGET} for 64 MB, the "
        f"default) or {_LANDSCAPE_ALL!r} (save every parameter set)"
    )
    if value == _LANDSCAPE_ALL:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise CollectorTypeError(
            f"For {source}, the value should be {expected}, but got {type(value).__name__} "
            f"{_shown(value)}."
        )
    if isinstance(value, str) or value < 1:
        raise CollectorValueError(
            f"For {source}, the value should be {expected}, but got {_shown(value)}."
        )
    return value


_ON_EXISTS = ("new", "error", "append")


def check_on_exists(on_exists: object) -> OnExists:
    """What a job does with a directory another job holds: "new", "error" or "append"."""
    if not isinstance(on_exists, str) or on_exists not in _ON_EXISTS:
        raise CollectorValueError(
            f"For 'on_exists', the value should be one of {list(_ON_EXISTS)}, but got "
            f"{_shown(on_exists)}."
        )
    return on_exists  # type: ignore[return-value]


@dataclass(frozen=True)
class CollectorArguments:
    """A SummaryCollector's arguments, checked; ``collect``: ``collect_specified_data`` merged.

    Not here: ``job_view_interval``, which the live view checks (docs/job-view.md, "Live").
    """

    summary_dir: str
    collect_freq: int
    num_process: int
    collect: CollectOptions
    custom_lineage_data: dict[str, int | float | str]
    collect_tensor_freq: int | None
    max_file_size: int | None
    export_options: dict[str, Any] | None
    merge_timeout: float
    coordinator: Coordinator | None
    rank_info: RankInfo | None
    formats: tuple[str, ...]
    fingerprints: bool
    #: Record the step time and data wait of every step.
    step_times: bool
    fingerprint_budget: int
    on_exists: OnExists
    #: Bytes of landscape parameter files per rank; None: every set (``"all"``).
    landscape_budget: int | None


def collector_arguments(
    summary_dir: object,
    collect_freq: object,
    num_process: object,
    collect_specified_data: object,
    keep_default_action: object,
    custom_lineage_data: object,
    collect_tensor_freq: object,
    max_file_size: object,
    export_options: object,
    *,
    merge_timeout: object,
    coordinator: object,
    rank_info: object,
    formats: object,
    fingerprints: object,
    step_times: object,
    fingerprint_budget: object,
    on_exists: object,
    landscape_budget: object,
) -> CollectorArguments:
    """Check every argument; the first wrong one raises, naming itself (keywords run in order)."""
    return CollectorArguments(
        summary_dir=check_summary_dir(summary_dir),
        collect_freq=check_positive_int("collect_freq", collect_freq),
        num_process=check_positive_int("num_process", num_process),
        collect_tensor_freq=check_optional_positive_int("collect_tensor_freq", collect_tensor_freq),
        max_file_size=check_optional_positive_int("max_file_size", max_file_size),
        export_options=check_export_options(export_options),
        collect=process_specified_data(collect_specified_data, keep_default_action),
        merge_timeout=check_merge_timeout(merge_timeout),
        rank_info=None if rank_info is None else _checked("rank_info", rank_info, RankInfo),
        formats=check_formats(formats),
        fingerprints=_checked("fingerprints", fingerprints, bool),
        step_times=_checked("step_times", step_times, bool),
        fingerprint_budget=check_budget(fingerprint_budget),
        custom_lineage_data=_custom_lineage(custom_lineage_data),
        coordinator=check_coordinator(coordinator),
        on_exists=check_on_exists(on_exists),
        landscape_budget=check_landscape_budget(landscape_budget),
    )


def _checked(name: str, value: Any, kind: type[_Kind]) -> _Kind:
    check_type(name, value, (kind,))
    return value  # type: ignore[no-any-return]
