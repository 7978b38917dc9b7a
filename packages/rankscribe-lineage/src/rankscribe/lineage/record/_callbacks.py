"""``TrainLineage`` and ``EvalLineage``: training callbacks that record lineage.

They follow MindInsight's callbacks of the same names and fill the lineage as
MindSpore's SummaryCollector does (``docs/collector-schedule.md``, "What is
collected"), but they are duck-typed: they need no framework and no base class.
What they read is ``run_context.original_args()``, a mapping (or an object
with attributes) that may hold:

===================  ==========================================================
key                  used for
===================  ==========================================================
optimizer            ``optimizer`` (its name, below) and ``learning_rate``:
                     the first element of ``optimizer.learning_rate``, or
                     of ``optimizer.param_groups[0]['lr']``, as float32;
                     without one, the optimizer the network holds
                     (:mod:`rankscribe.lineage.record._optimizer_search`)
loss_fn              ``loss_function`` (its name, below)
network /            ``network``: the name of ``network``, else of the
train_network        backbone found through ``train_network``'s ``network`` /
                     ``_backbone`` / ``backbone`` attributes
epoch_num            ``epoch``
parallel_mode        ``parallel_mode`` (as text)
device_number        ``device_num``
batch_num            ``batch_size`` when the dataset has no ``get_batch_size()``
train_dataset /      ``*_dataset_path`` (``dataset_dir`` or ``dataset_file`` of
valid_dataset        the dataset or, following ``children``, of its source) and
                     ``*_dataset_size``, in samples: ``num_samples`` when the
                     dataset has it, else ``get_dataset_size() * batch size``,
                     else unset (never a count of batches);
                     its graph, when it has ``to_json()`` or ``dataset_graph``
net_outputs          ``loss``: the first element of a tuple or list, averaged
list_callback        ``model``: the latest checkpoint of the first callback with
                     a ``latest_ckpt_file_name`` attribute (ModelCheckpoint)
metrics              ``metric`` (eval): ``json.dumps(metrics)``
cur_step_num         the step passed to ``summary_record.record``
===================  ==========================================================

Names follow one rule (:mod:`rankscribe.lineage.record._object_names`,
``docs/collector-schedule.md``): an object's own ``name`` (a non-empty str),
else a function's or class's ``__name__``, else the class name of an
instance; a bare container (a dict network) or a lambda leaves the field out.

The summary record only needs ``add_value(plugin, name, value)`` and
``record(step)`` (MindSpore's SummaryRecord, rankscribe.writer's, or any
look-alike). With ``raise_exception=False`` (the default) a failure is
logged and training goes on; with True it is raised: a bad argument as the
lineage error that says so, any other failure (the summary record's, a
dataset's) as :class:`LineageLogError` with the failure chained, as
MindInsight's callbacks do.

They have every hook of a training loop's callback (``begin``,
``epoch_begin``, ``step_begin``, ``step_end``, ``epoch_end``, ``end`` and
the ``with`` protocol), so they go in a callback list as the original
documents: ``callbacks=[model_ckpt, summary_callback, TrainLineage(record)]``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any, Protocol

from rankscribe.lineage._checks import check_mapping, is_int
from rankscribe.lineage.errors import (
    LineageError,
    LineageLogError,
    LineageParamTypeError,
    LineageParamValueError,
)
from rankscribe.lineage.record._dataset_graph import DatasetGraphInfo
from rankscribe.lineage.record._model import (
    Algorithm,
    EvalLineageInfo,
    HyperParameters,
    ModelFile,
    TrainDataset,
    TrainLineageInfo,
    UserDefinedInfo,
    ValidDataset,
)
from rankscribe.lineage.record._object_names import object_name
from rankscribe.lineage.record._optimizer_search import optimizer_of

logger = logging.getLogger(__name__)

__all__ = ["EvalLineage", "LineageCallback", "SummaryRecordLike", "TrainLineage"]


class SummaryRecordLike(Protocol):
    """What the lineage callbacks need from a summary record: ``add_value`` and ``record``.

    ``rankscribe.writer.SummaryRecord`` is one; so is MindSpore's ``SummaryRecord``.
    """

    def add_value(self, plugin: str, name: str, value: Any) -> None: ...

    def record(self, step: int) -> Any: ...


def _arguments(run_context: Any) -> Mapping[str, Any]:
    original = getattr(run_context, "original_args", None)
    if not callable(original):
        raise LineageParamTypeError(
            f"run_context must have an original_args() method, got {type(run_context).__name__}"
        )
    args = original()
    if isinstance(args, Mapping):
        return args
    return vars(args) if hasattr(args, "__dict__") else {}


def _to_host(value: Any) -> Any:
    """A framework tensor as a numpy array (MindSpore, PyTorch, TensorFlow); else itself."""
    if callable(getattr(value, "asnumpy", None)):
        return value.asnumpy()
    if callable(getattr(value, "detach", None)):
        return value.detach().cpu().numpy()
    if callable(getattr(value, "numpy", None)):
        return value.numpy()
    return value


def _first_number(value: Any) -> float | None:
    """The first element of a number, sequence, numpy array or tensor."""
    value = _to_host(value)
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if hasattr(value, "reshape") and hasattr(value, "tolist"):
        flat = value.reshape(-1).tolist()
        return _first_number(flat[0]) if flat else None
    if isinstance(value, (list, tuple)):
        return _first_number(value[0]) if value else None
    return None


def _mean_loss(outputs: Any) -> float | None:
    """The loss as SummaryCollector takes it: first of a tuple/list, then the mean."""
    if isinstance(outputs, (list, tuple)):
        outputs = outputs[0] if outputs else None
    outputs = _to_host(outputs)
    if hasattr(outputs, "mean") and hasattr(outputs, "tolist"):
        if getattr(outputs, "size", 1) == 0:
            return None  # an empty array holds no loss (its mean would be nan, with a warning)
        return float(outputs.mean())
    return _first_number(outputs)


def _learning_rate(optimizer: Any) -> float | None:
    rate = getattr(optimizer, "learning_rate", None)
    if rate is None:
        groups = getattr(optimizer, "param_groups", None)
        if isinstance(groups, (list, tuple)) and groups and isinstance(groups[0], Mapping):
            rate = groups[0].get("lr")
    if callable(rate) and not hasattr(rate, "asnumpy"):
        return None  # a schedule function: MindSpore leaves it unset too
    return _first_number(rate)


#: Wrappers that hold the model they run in an attribute (torch's data-parallel
#: wrappers in ``module``, ``torch.compile``'s in ``_orig_mod``): the lineage names the model.
_WRAPPERS = {
    "DistributedDataParallel": "module",
    "DataParallel": "module",
    "FullyShardedDataParallel": "module",
    "OptimizedModule": "_orig_mod",
}


def _unwrapped(network: Any) -> Any:
    for _ in range(4):
        attribute = _WRAPPERS.get(type(network).__name__)
        inner = getattr(network, attribute, None) if attribute is not None else None
        if inner is None:
            return network
        network = inner
    return network


def _backbone(args: Mapping[str, Any]) -> Any:
    network = args.get("network")
    if network is not None:
        return _unwrapped(network)
    network = args.get("train_network")
    for _ in range(4):
        inner = next(
            (
                getattr(network, name)
                for name in ("network", "_backbone", "backbone")
                if getattr(network, name, None) is not None
            ),
            None,
        )
        if inner is None:
            break
        network = inner
    return _unwrapped(network)


def _dataset_path(dataset: Any) -> str | None:
    for _ in range(32):
        if dataset is None:
            return None
        for name in ("dataset_dir", "dataset_file", "dataset_path"):
            value = getattr(dataset, name, None)
            if isinstance(value, (list, tuple)) and value:
                value = value[0]
            if isinstance(value, (str, os.PathLike)):
                return os.fspath(value)
        children = getattr(dataset, "children", None)
        dataset = children[0] if isinstance(children, (list, tuple)) and children else None
    return None


def _batch_size(dataset: Any, args: Mapping[str, Any]) -> int | None:
    getter = getattr(dataset, "get_batch_size", None)
    if callable(getter):
        value = getter()
        if is_int(value):
            return value
    value = args.get("batch_size")
    return value if is_int(value) else None


def _dataset_size(dataset: Any, batch_size: int | None) -> int | None:
    # A dataset that knows its samples is counted exactly; otherwise the
    # original's batches x batch size (which counts a short last batch as full).
    samples = getattr(dataset, "num_samples", None)
    if is_int(samples) and samples >= 0:
        return samples
    getter = getattr(dataset, "get_dataset_size", None)
    if not callable(getter) or batch_size is None:
        return None  # batches of an unknown size: no count of samples to give
    batches = getter()
    if not is_int(batches):
        return None
    return batches * batch_size


def _dataset_graph(dataset: Any, args: Mapping[str, Any]) -> DatasetGraphInfo | None:
    graph = args.get("dataset_graph", getattr(dataset, "dataset_graph", None))
    if graph is None:
        to_json = getattr(dataset, "to_json", None)
        graph = to_json() if callable(to_json) else None
    if isinstance(graph, DatasetGraphInfo):
        return graph
    if isinstance(graph, str):
        graph = json.loads(graph)
    if isinstance(graph, Mapping):
        return DatasetGraphInfo.from_graph_dict(graph)
    return None


def _model_file(args: Mapping[str, Any]) -> ModelFile:
    """``{"ckpt": <real path of the latest checkpoint or null>}`` and its size."""
    callbacks = args.get("list_callback")
    callbacks = getattr(callbacks, "_callbacks", callbacks)
    checkpoint: str | None = None
    for callback in callbacks if isinstance(callbacks, (list, tuple)) else []:
        latest = getattr(callback, "latest_ckpt_file_name", None)
        if latest:
            checkpoint = os.path.realpath(os.fspath(latest))
            break
    size = 0
    if checkpoint is not None:
        try:
            size = (
                _checkpoint_folder_size(checkpoint)
                if os.path.isdir(checkpoint)
                else os.path.getsize(checkpoint)
            )
        except OSError:
            size = 0
    return ModelFile(path=json.dumps({"ckpt": checkpoint}), size=size)


def _is_weights_file(name: str) -> bool:
    return name.endswith((".safetensors", ".ckpt")) or (name.endswith(".bin") and "model" in name)


def _checkpoint_folder_size(folder: str) -> int:
    """The bytes of the model a checkpoint *folder* holds (``docs/lineage-queries.md``, "Fields").

    A folder such as the Hugging Face Trainer's ``checkpoint-<step>/`` holds the
    model's weights beside the optimizer's state, the scheduler's and the random
    generators': the size is that of its weights files at the top level
    (``*.safetensors``, ``*.ckpt``, ``*model*.bin``, shards included), else, with
    none of those, of every regular file at its top level. Links are not followed.
    """
    files: list[tuple[str, int]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                files.append((entry.name, entry.stat(follow_symlinks=False).st_size))
    weights = [size for name, size in files if _is_weights_file(name)]
    return sum(weights) if weights else sum(size for _, size in files)


def _step(args: Mapping[str, Any]) -> int:
    step = args.get("cur_step_num", 0)
    return step if is_int(step) else 0


class LineageCallback:
    """Base of :class:`TrainLineage` and :class:`EvalLineage`: what they share.

    The arguments (``summary_record``: a :class:`SummaryRecordLike`, such as the
    writer's ``SummaryRecord``), the error policy (``raise_exception``) and the
    callback hooks a training loop calls (``on_train_begin``, ``step_end``, ...;
    those a callback does not use do nothing).
    """

    def __init__(
        self,
        summary_record: SummaryRecordLike,
        raise_exception: bool = False,
        user_defined_info: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(raise_exception, bool):
            raise LineageParamTypeError(
                f"raise_exception must be True or False, got {raise_exception!r}"
            )
        for method in ("add_value", "record"):
            if not callable(getattr(summary_record, method, None)):
                raise LineageParamTypeError(
                    f"summary_record must have an {method}() method (a SummaryRecord), got "
                    f"{type(summary_record).__name__}"
                )
        self.summary_record = summary_record
        self.raise_exception = raise_exception
        self.user_defined_info = (
            UserDefinedInfo.from_values(user_defined_info) if user_defined_info else None
        )
        self._user_defined_written = False

    def _guarded(self, what: str, action: Any, run_context: Any) -> None:
        try:
            action(_arguments(run_context))
        except LineageError as error:
            if self.raise_exception:
                raise
            logger.error("%s failed: %s", what, error)
        except Exception as error:
            if self.raise_exception:
                raise LineageLogError(f"{what} failed: {error}") from error
            logger.error("%s failed: %s", what, error)

    def _write_user_defined(self) -> None:
        if self.user_defined_info is not None and not self._user_defined_written:
            self.summary_record.add_value(
                "custom_lineage_data", "custom_lineage_data", self.user_defined_info.to_proto()
            )
            self._user_defined_written = True

    # Callback hooks the training loop may call; the unused ones do nothing.
    def on_train_begin(self, run_context: Any) -> None:
        self.begin(run_context)

    def on_train_end(self, run_context: Any) -> None:
        self.end(run_context)

    def on_eval_end(self, run_context: Any) -> None:
        self.end(run_context)

    def begin(self, run_context: Any) -> None:
        """Called once before training or evaluation starts."""

    def end(self, run_context: Any) -> None:
        """Called once after training or evaluation ends."""

    def epoch_begin(self, run_context: Any) -> None:
        """Not used."""

    def epoch_end(self, run_context: Any) -> None:
        """Not used."""

    def step_begin(self, run_context: Any) -> None:
        """Not used."""

    def step_end(self, run_context: Any) -> None:
        """Not used."""

    def __enter__(self) -> LineageCallback:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


class TrainLineage(LineageCallback):
    """Record the lineage of a training run.

    ``begin`` writes the custom lineage data and the training dataset's graph;
    ``end`` writes the train lineage and calls ``summary_record.record``.

    Args:
        summary_record: where to write (needs ``add_value`` and ``record``).
        raise_exception: raise failures instead of logging them.
        user_defined_info: custom lineage, a flat dict of str to int, float or
            str (ints must fit int32).
    """

    def begin(self, run_context: Any) -> None:
        self._guarded("TrainLineage.begin", self._begin, run_context)

    def end(self, run_context: Any) -> None:
        self._guarded("TrainLineage.end", self._end, run_context)

    def _begin(self, args: Mapping[str, Any]) -> None:
        self._write_user_defined()
        graph = _dataset_graph(args.get("train_dataset"), args)
        if graph is not None:
            self.summary_record.add_value("dataset_graph", "dataset_graph", graph.to_proto())

    def _end(self, args: Mapping[str, Any]) -> None:
        self._write_user_defined()
        lineage = train_lineage_from_args(args)
        self.summary_record.add_value("train_lineage", "train_lineage", lineage.to_proto())
        self.summary_record.record(_step(args))


class EvalLineage(LineageCallback):
    """Record the lineage of an evaluation: its metrics and validation dataset.

    ``end`` writes the evaluation lineage (and the custom lineage data, once)
    and calls ``summary_record.record``. Arguments as for :class:`TrainLineage`.
    """

    def end(self, run_context: Any) -> None:
        self._guarded("EvalLineage.end", self._end, run_context)

    def _end(self, args: Mapping[str, Any]) -> None:
        self._write_user_defined()
        lineage = eval_lineage_from_args(args)
        self.summary_record.add_value("eval_lineage", "eval_lineage", lineage.to_proto())
        self.summary_record.record(_step(args))


def train_lineage_from_args(args: Mapping[str, Any]) -> TrainLineageInfo:
    """The train lineage of a finished training run, from its original args."""
    check_mapping("args", args)
    dataset = args.get("train_dataset")
    batch_size = _batch_size(dataset, args)
    epoch = args.get("epoch_num")
    device_num = args.get("device_number")
    parallel_mode = args.get("parallel_mode")
    optimizer = optimizer_of(args)
    return TrainLineageInfo(
        hyper_parameters=HyperParameters(
            optimizer=object_name(optimizer),
            learning_rate=_learning_rate(optimizer) if optimizer is not None else None,
            loss_function=object_name(args.get("loss_fn")),
            epoch=epoch if is_int(epoch) else None,
            parallel_mode=None if parallel_mode is None else str(parallel_mode),
            device_num=device_num if is_int(device_num) else None,
            batch_size=batch_size,
        ),
        train_dataset=TrainDataset(
            train_dataset_path=_dataset_path(dataset),
            train_dataset_size=_dataset_size(dataset, batch_size),
        ),
        algorithm=Algorithm(
            network=object_name(_backbone(args)),
            loss=_mean_loss(args.get("net_outputs")),
        ),
        model=_model_file(args),
    )


def eval_lineage_from_args(args: Mapping[str, Any]) -> EvalLineageInfo:
    """The evaluation lineage of a finished evaluation, from its original args."""
    check_mapping("args", args)
    metrics = args.get("metrics")
    if metrics is not None and not isinstance(metrics, Mapping):
        raise LineageParamValueError(
            f"metrics must be a dict of metric name to value, got {type(metrics).__name__}"
        )
    dataset = args.get("valid_dataset")
    batch_size = _batch_size(dataset, args)
    plain = {key: _plain(value) for key, value in (metrics or {}).items()}
    left_out = [key for key, value in plain.items() if value is _NOT_JSON]
    if left_out:
        # MindSpore's SummaryCollector warns and leaves out every metric when one is not
        # JSON; here only those are left out (docs/mindinsight-differences.md).
        logger.warning(
            "Evaluation metric values that are neither numbers nor JSON (str, bool, None, "
            "list, dict) are left out of the lineage: %s.",
            ", ".join(map(repr, left_out)),
        )
    return EvalLineageInfo.from_metrics(
        {key: value for key, value in plain.items() if value is not _NOT_JSON},
        ValidDataset(
            valid_dataset_path=_dataset_path(dataset),
            valid_dataset_size=_dataset_size(dataset, batch_size),
        ),
    )


#: What :func:`_plain` returns for a metric value that is neither a number nor JSON.
_NOT_JSON = object()


def _plain(value: Any) -> Any:
    """A metric value json.dumps can write (numpy scalars and 0-d tensors become floats),
    or ``_NOT_JSON``."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    number = _first_number(value)
    if number is not None:
        return number
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return _NOT_JSON
    return value
