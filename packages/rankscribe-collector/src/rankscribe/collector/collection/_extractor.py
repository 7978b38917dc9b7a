"""What the collector takes from the training state at a collected step.

MindSpore's rules (docs/collector-schedule.md, "What is collected"):

- loss, scalar ``loss/auto``: the network's output, its first element if it
  is a tuple or list, averaged with ``np.mean`` (on an accelerator: read later,
  without a wait on the training thread);
- histograms ``<name>/auto``: the optimizer's parameters, the first five, or
  those whose names ``re.match`` ``histogram_regular``; a run given no optimizer
  has the one its network holds (``rankscribe.lineage.recording.optimizer_of``);
- input images, image ``input_data/auto``: the first column of the step's
  dataset element, when it is a 4-D NCHW batch;
- the graph, once: what the network describes (see :mod:`rankscribe.collector.adapters._graph`).

Each source that cannot be read is disabled for the rest of the run, with one
warning, as in the original; training goes on. The learning rate is not
collected here: it only goes into the train lineage (:mod:`rankscribe.collector.run._lineage`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from rankscribe.collector import _clock
from rankscribe.collector._callback import CallbackParams
from rankscribe.collector.adapters import AdapterRegistry, NetworkView, OptimizerView
from rankscribe.collector.collection._options import CollectOptions
from rankscribe.lineage.recording import optimizer_of
from rankscribe.writer.pb import anf_ir_pb2

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_HISTOGRAM_COUNT",
    "Extractor",
    "describe_batch",
    "histogram_parameters",
    "mean_loss",
]

#: Parameters recorded as histograms when ``histogram_regular`` is None.
DEFAULT_HISTOGRAM_COUNT = 5
LOSS_TAG = "loss/auto"
INPUT_TAG = "input_data/auto"
# Network classes already reported as having no graph.
_GRAPHLESS_WARNED: set[type] = set()
GRAPH_TAG = "train_network/auto"
_IMAGE_DIMENSIONS = 4


class ValueSink(Protocol):
    """What the extractor writes into (a SummaryRecord)."""

    def add_value(self, plugin: str, name: str, value: Any) -> None: ...


class UnreadableLossError(Exception):
    """The network's output holds no loss the collector can read."""


def mean_loss(outputs: object, *, adapters: AdapterRegistry | None = None) -> float:
    """The loss of a step: first of a tuple/list, then ``np.mean``.

    Raises :class:`UnreadableLossError` when ``outputs`` is None, an empty
    sequence, or not numeric. ``adapters`` reads framework tensors (a fresh
    registry when None).
    """
    if outputs is None:
        raise UnreadableLossError("Can not find any output by this network")
    if isinstance(outputs, (list, tuple)):
        if not outputs:
            raise UnreadableLossError("the network returned an empty list or tuple")
        outputs = outputs[0]
    try:
        array = (adapters or AdapterRegistry()).to_numpy(outputs)
    except TypeError as error:
        raise UnreadableLossError(
            f"The output type could not be identified ({type(outputs).__name__}), expect "
            "type is one of [int, float, Tensor, list, tuple]"
        ) from error
    if array.size == 0:
        raise UnreadableLossError("the network's loss is an empty array")
    return float(np.mean(array))


def histogram_parameters(
    parameters: Sequence[tuple[str, Any]], regular: str | None
) -> list[tuple[str, Any]]:
    """The first five parameters, or those whose names ``re.match`` ``regular``."""
    if regular is None:
        return list(parameters[:DEFAULT_HISTOGRAM_COUNT])
    pattern = re.compile(regular)
    return [(name, value) for name, value in parameters if pattern.match(name)]


def describe_batch(value: object, depth: int = 0) -> str:
    """A batch's structure in a few words: ``dict(input_ids: Tensor(16, 12), ...)``."""
    shape = getattr(value, "shape", None)
    if shape is not None and not isinstance(value, (str, bytes)):
        try:
            dimensions = ", ".join(str(int(size)) for size in shape)
        except (TypeError, ValueError):
            dimensions = "?"
        return f"{type(value).__name__}({dimensions})"
    if depth < 2 and isinstance(value, Mapping):
        items = [f"{key}: {describe_batch(item, depth + 1)}" for key, item in value.items()]
        return f"{type(value).__name__}({_shortened(items)})"
    if depth < 2 and isinstance(value, (list, tuple)):
        parts = [describe_batch(item, depth + 1) for item in value]
        return f"{type(value).__name__}[{_shortened(parts)}]"
    return type(value).__name__


def _shortened(parts: list[str], keep: int = 4) -> str:
    shown = ", ".join(parts[:keep])
    return f"{shown}, ... {len(parts) - keep} more" if len(parts) > keep else shown


def _is_image_batch(value: object) -> bool:
    dimensions = getattr(value, "ndim", None)
    if dimensions is None:
        dimensions = np.ndim(value)  # type: ignore[arg-type]
    return bool(dimensions == _IMAGE_DIMENSIONS)


class StepSeconds(NamedTuple):
    """The training thread's seconds in a collected step's optional values."""

    images: float
    histograms: float


class Extractor:
    """Adds the collector's own values of one collected step to a summary record."""

    def __init__(self, options: CollectOptions, *, adapters: AdapterRegistry | None = None) -> None:
        self._adapters = adapters if adapters is not None else AdapterRegistry()
        self.collect_metric = options.collect_metric
        #: The loss could not be read at a collected step: as the original, the
        #: collector reads none again, and the train lineage leaves its loss empty.
        self.loss_unreadable = False
        self.collect_input_data = options.collect_input_data
        self.collect_histogram = options.collect_histogram
        self.collect_graph = options.collect_graph
        self.histogram_regular = options.histogram_regular
        self._optimizer: tuple[object, OptimizerView | None] | None = None
        self._optimizer_warned = False
        #: This process's rank (the collector sets it). A source that cannot be read
        #: (no graph, no image, no optimizer) is the same script on every rank: only
        #: rank 0 warns, the others log it at DEBUG, so a job says it once.
        self.rank = 0

    def _warn_once_per_job(self, message: str, *args: object, level: int = logging.WARNING) -> None:
        logger.log(level if self.rank == 0 else logging.DEBUG, message, *args)

    def add_step_values(
        self,
        record: ValueSink,
        params: CallbackParams,
        *,
        histograms: bool = True,
        images: bool = True,
    ) -> StepSeconds:
        """Input images, loss, histograms, in the original's order; the seconds the images
        and the histograms took (the collector's cost budget sheds them first; False
        leaves them out at this step)."""
        image_seconds = histogram_seconds = 0.0
        if self.collect_input_data and images:
            started = _clock.now()
            self._add_input_data(record, params)
            # Only while they are recorded: a batch found to hold no images turns them off
            # at once, and shedding them would save nothing.
            if self.collect_input_data:
                image_seconds = _clock.now() - started
        if self.collect_metric:
            self._add_loss(record, params)
        if self.collect_histogram and histograms:
            started = _clock.now()
            self._add_histograms(record, params)
            histogram_seconds = _clock.now() - started
        return StepSeconds(images=image_seconds, histograms=histogram_seconds)

    def host_loss_alone(
        self, params: CallbackParams, *, histograms: bool = True, images: bool = True
    ) -> list[tuple[str, float]] | None:
        """The step's values as ``(tag, number)`` when they are the loss alone, read on the
        host (``[]`` when the loss is not collected either); None when
        :meth:`add_step_values` has more to do (input images or histograms due at this
        step, a loss on a device or in another form, or none where one is collected)."""
        if (self.collect_input_data and images) or (self.collect_histogram and histograms):
            return None
        if not self.collect_metric:
            return []
        number = self.host_loss(params)
        return None if number is None else [(LOSS_TAG, number)]

    def loss_alone(self, *, histograms: bool, images: bool) -> bool:
        """Whether a collected step's values are the loss alone, when the histograms and
        the input images are (or are not) due there: what :meth:`host_loss_alone` returns
        a list for, given a loss read on the host."""
        return self.collect_metric and not (
            (self.collect_input_data and images) or (self.collect_histogram and histograms)
        )

    def host_loss(self, params: CallbackParams) -> float | None:
        """The step's loss as a float, read as :meth:`add_step_values` reads it, when it
        is one number on the host; else None (on a device, several numbers, none)."""
        return self.host_loss_of(params.net_outputs)

    def host_loss_of(self, outputs: Any) -> float | None:
        """:meth:`host_loss` of a step whose ``net_outputs`` are ``outputs``."""
        if isinstance(outputs, (list, tuple)) and outputs:
            outputs = outputs[0]
        return self._adapters.host_number(outputs) if outputs is not None else None

    # ------------------------------------------------------------------ images

    def _disable_input_data(self, reason: str, *, level: int = logging.WARNING) -> None:
        self.collect_input_data = False
        self._warn_once_per_job(
            "%s, so SummaryCollector will not collect input data.", reason, level=level
        )

    def _add_input_data(self, record: ValueSink, params: CallbackParams) -> None:
        element = params.train_dataset_element
        if element is None:
            self._disable_input_data(
                "The training loop handed the collector no batch (train_dataset_element is None)"
            )
            return
        if isinstance(element, (str, bytes, Mapping)):
            # A dict of columns is how text jobs (Hugging Face's) hand their batches: no
            # images there either, so said at INFO, as a tabular batch is.
            self._disable_input_data(
                f"The type of input data is not Tensor/list/tuple: the batch is "
                f"{describe_batch(element)}",
                level=logging.INFO if isinstance(element, Mapping) else logging.WARNING,
            )
            return
        if isinstance(element, (list, tuple)):
            if not element:
                self._disable_input_data(
                    "The 'train_dataset_element' in RunContext.original_args is empty"
                )
                return
            element = element[0]
        if not _is_image_batch(element):
            # At INFO (MindSpore warns): tabular and text jobs, whose data never were
            # images, would see this warning in every run (docs/mindinsight-differences.md).
            self._disable_input_data(
                "The input data of network are not image (the first column must be a 4-D "
                f"NCHW batch; the batch is {describe_batch(params.train_dataset_element)})",
                level=logging.INFO,
            )
            return
        try:
            # Through the adapter: a framework tensor NumPy cannot read directly
            # (bfloat16, on a device) arrives as a plain array.
            record.add_value("image", INPUT_TAG, self._adapters.to_numpy(element))
        except (TypeError, ValueError) as error:
            self._disable_input_data(f"The input data of network are not image ({error})")

    # -------------------------------------------------------------------- loss

    def _add_loss(self, record: ValueSink, params: CallbackParams) -> None:
        outputs = params.net_outputs
        if isinstance(outputs, (list, tuple)) and outputs:
            outputs = outputs[0]
        # The usual loss, one number on the host: read at once (a few microseconds; the
        # general path below costs ten times that on a CPU whose caches the step evicted).
        number = self._adapters.host_number(outputs) if outputs is not None else None
        if number is not None:
            record.add_value("scalar", LOSS_TAG, number)
            return
        # A loss on an accelerator: its copy to the host starts here, and the record
        # gets it later (docs/collector-schedule.md, "Values read from a device").
        late = self._adapters.late_loss(outputs) if outputs is not None else None
        if late is not None:
            record.add_value("scalar", LOSS_TAG, late)
            return
        try:
            loss = mean_loss(params.net_outputs, adapters=self._adapters)
        except UnreadableLossError as error:
            self.collect_metric = False
            self.loss_unreadable = True
            # A framework integration that saw the step's values says which (and how to
            # name the loss) in ``no_loss_reason``; the original's words otherwise.
            reason = params.no_loss_reason if params.net_outputs is None else None
            logger.warning(
                "%s, so no loss was recorded in SummaryCollector.",
                reason if isinstance(reason, str) and reason else error,
            )
            return
        record.add_value("scalar", LOSS_TAG, loss)

    # -------------------------------------------------------------- histograms

    def optimizer_view(self, params: CallbackParams) -> OptimizerView | None:
        """The view of the run's optimizer: the one given, else the one the network holds."""
        # Searched once per network (or optimizer) given, not at every collected step.
        source = params.optimizer
        if source is None:
            source = params.eval_network if params.mode == "eval" else params.train_network
            source = source if source is not None else params.network
        if self._optimizer is None or self._optimizer[0] is not source:
            optimizer = optimizer_of(vars(params))
            self._optimizer = (source, self._adapters.optimizer_view(optimizer))
        return self._optimizer[1]

    def _add_histograms(self, record: ValueSink, params: CallbackParams) -> None:
        view = self.optimizer_view(params)
        if view is None:
            if not self._optimizer_warned:
                self._optimizer_warned = True
                self._warn_once_per_job(
                    "Can not find optimizer in the training state, so we "
                    "will not collect data about optimizer in "
                    "SummaryCollector."
                )
            return
        # A view that can name its parameters without reading them (the torch one) is
        # read only for those chosen, and may count their buckets where they live.
        named = getattr(view, "named_tensors", None)
        pairs = histogram_parameters(
            named() if callable(named) else view.parameters(), self.histogram_regular
        )
        convert = getattr(view, "histogram_values", None)
        values = [value for _, value in pairs]
        if callable(convert):
            values = convert(values)
        for (name, _), value in zip(pairs, values, strict=True):
            try:
                record.add_value("histogram", f"{name}/auto", value)
            except (TypeError, ValueError) as error:
                logger.warning("Parameter %r is not recorded as a histogram: %s", name, error)

    # ------------------------------------------------------------------- graph

    def graph(self, params: CallbackParams) -> anf_ir_pb2.GraphProto | None:
        """The train network's graph, or None with one warning when it cannot give one."""
        if not self.collect_graph:
            return None
        self.collect_graph = False  # the graph is collected once, whatever happens
        network = params.train_network if params.train_network is not None else params.network
        view: NetworkView | None = self._adapters.network_view(network)
        try:
            graph = view.graph() if view is not None else None
        except (TypeError, ValueError) as error:
            self._warn_once_per_job(
                "The graph of %s cannot be built (%s), so SummaryCollector will not collect graph.",
                type(network).__name__,
                error,
            )
            return None
        if (
            graph is None
            and type(network) not in _GRAPHLESS_WARNED
            and not getattr(view, "graph_failure_reported", False)
        ):
            # Once per network class: a second run of the same network says nothing new.
            # A view whose adapter already said why it has no graph (the torch tracer's
            # one warning) is not reported a second time.
            _GRAPHLESS_WARNED.add(type(network))
            self._warn_once_per_job(
                "Can not get graph proto: the network (%s) does not "
                "describe its graph, so SummaryCollector will not collect "
                "graph.",
                type(network).__name__,
            )
        return graph
