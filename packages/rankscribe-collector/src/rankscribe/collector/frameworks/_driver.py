"""Driving the collector from another framework's hooks (Lightning, Hugging Face, Accelerate).

The integrations (:mod:`rankscribe.collector.lightning`,
:mod:`rankscribe.collector.transformers`, :mod:`rankscribe.collector.accelerate`)
translate their framework's hooks into the callback events a
:class:`~rankscribe.collector.TrainLoop` gives (``docs/integrations.md``):
:class:`FrameworkRun` holds the :class:`~rankscribe.collector.CallbackParams`
built by :class:`~rankscribe.collector.TrainLoop`'s own code and calls the
:class:`~rankscribe.collector.SummaryCollector` with them, so the rank layout,
the lineage, the job merge and the job view are the collector's, not a second
implementation.

:func:`claim_summary_dir` (``<dir>``, else ``<dir>-2``, ...: the ranks' one
rule, :func:`rankscribe.ranks.claim_job_dir`) and :func:`claim_version_dir`
(Lightning's ``version_<n>``, then claimed the same way) are how every rank of a
job agrees on a new directory for a run without ever writing into an earlier one.
The :class:`~rankscribe.collector.SummaryCollector` then made for that directory
finds it claimed by this job (its rank 0's process wrote the claim) and writes
into it as it is, without claiming again (``docs/layout.md``, "Two jobs, one
directory").
"""

from __future__ import annotations

import atexit
import logging
import math
import numbers
import os
import re
import sys
import weakref
from collections.abc import Iterable, Mapping
from types import SimpleNamespace
from typing import Any

from rankscribe.collector._callback import Callback, CallbackList, CallbackParams, RunContext
from rankscribe.collector._collector import SummaryCollector
from rankscribe.collector.errors import CollectorStateError, CollectorTypeError, CollectorValueError
from rankscribe.collector.loop._loop import train_params
from rankscribe.ranks import (
    Coordinator,
    JobDirClaimedError,
    RankInfo,
    RanksError,
    claim_job_dir,
    create_coordinator,
)
from rankscribe.ranks.exits import before_abort
from rankscribe.ranks.files import make_private_dir

logger = logging.getLogger(__name__)

__all__ = [
    "CheckpointNote",
    "ConfiguredOptimizer",
    "FrameworkRun",
    "check_run_dir",
    "claim_summary_dir",
    "claim_version_dir",
    "job_coordinator",
    "lineage_values",
    "numeric_scalars",
    "optimizer_for_lineage",
    "parameter_count",
    "unwrapped_optimizer",
]

#: Characters a version or run name may hold (it becomes a directory name).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def check_name(owner: str, argument: str, value: object) -> str:
    """A directory name given by the user: letters, digits, ``_ . -``, no path parts."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise CollectorValueError(
            f"For '{owner}', the argument '{argument}' must be a name of letters, digits, "
            f"'_', '.' and '-' (at most 128, not starting with '.' or '-'), but got {value!r}."
        )
    return value


def check_run_dir(owner: str, argument: str, value: object) -> str:
    """A directory argument of an integration (a path, not a file), as it was given.

    Checked here with the integration's own names, before the collector checks it
    again as its ``summary_dir``: an error names the argument the user wrote.
    """
    if not isinstance(value, (str, os.PathLike)):
        raise CollectorTypeError(
            f"For '{owner}', the argument '{argument}' must be a str or os.PathLike, but got "
            f"{type(value).__name__}."
        )
    path = os.fspath(value)
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise CollectorValueError(
            f"For '{owner}', the argument '{argument}' must be a non-empty directory path "
            f"without NUL characters, but got {value!r}."
        )
    if os.path.exists(path) and not os.path.isdir(path):
        raise CollectorValueError(
            f"For '{owner}', the argument '{argument}' must be a directory, but "
            f"{os.path.realpath(path)!r} is a file."
        )
    return path


def claim_version_dir(
    coordinator: Coordinator,
    parent: str,
    *,
    given: str | None = None,
    owner: str,
) -> str:
    """Lightning's ``version_<n>`` under ``parent``, agreed by every rank and claimed for the job.

    Rank 0 creates the first free ``version_<n>`` with ``mkdir`` (atomic: a job
    started at the same moment gets the next one) and every rank receives its
    name (a collective every rank calls); then the job claims it as any job
    claims its directory (:func:`rankscribe.ranks.claim_job_dir`). A ``given``
    name that already holds a run is refused: a run never writes into another.
    """
    chosen: str = ""
    if coordinator.rank == 0:
        try:
            chosen = given if given is not None else _free_version(parent)
        except OSError as error:
            chosen = f"error: {error}"
    chosen = coordinator.bcast(chosen, root=0) if coordinator.world_size > 1 else chosen
    if not isinstance(chosen, str) or not chosen or chosen.startswith("error: "):
        raise CollectorStateError(
            f"For '{owner}', rank 0 could not create a version directory under {parent!r}: "
            f"{str(chosen)[7:]}"
        )
    try:
        claim_job_dir(os.path.join(parent, chosen), on_exists="error", coordinator=coordinator)
    except JobDirClaimedError as error:
        raise CollectorValueError(
            f"For '{owner}', the version {chosen!r} already holds a run; a run is never "
            f"written into an earlier one: give another version or leave it to choose the "
            f"next one ({error})"
        ) from error
    return chosen


def _free_version(parent: str) -> str:
    make_private_dir(parent)
    taken = set(os.listdir(parent))
    numbers = [
        int(name[8:])
        for name in taken
        if name.startswith("version_") and name[8:].isdigit() and name[8:].isascii()
    ]
    index = max(numbers) + 1 if numbers else 0
    for _ in range(100_000):
        name = f"version_{index}"
        try:
            os.mkdir(os.path.join(parent, name), 0o700)
        except FileExistsError:
            index += 1
            continue
        return name
    raise CollectorValueError(f"no free version under {parent!r}")


def claim_summary_dir(coordinator: Coordinator, summary_dir: str) -> str:
    """``summary_dir``, or ``<summary_dir>-2``, ... when it holds a run: the ranks' one rule."""
    return os.fspath(claim_job_dir(summary_dir, on_exists="new", coordinator=coordinator).directory)


def parameter_count(model: Any) -> int | None:
    """The number of a torch-style model's parameters (``None`` when it cannot tell)."""
    parameters = getattr(model, "parameters", None)
    if not callable(parameters):
        return None
    try:
        return int(sum(int(parameter.numel()) for parameter in parameters()))
    except (AttributeError, TypeError, RuntimeError):
        return None


def unwrapped_optimizer(optimizer: Any) -> Any:
    """The optimizer a framework's wrapper holds (Accelerate's ``AcceleratedOptimizer``)."""
    for _ in range(8):  # wrappers of wrappers, never a cycle
        inner = getattr(optimizer, "optimizer", None)
        if inner is None or inner is optimizer or not hasattr(inner, "param_groups"):
            return optimizer
        optimizer = inner
    return optimizer


class ConfiguredOptimizer:
    """An optimizer as configured: its name and the learning rate the run was given.

    A framework's scheduler moves the optimizer's own learning rate (a linear
    decay ends near 0); the lineage shows the configured one. The name is
    ``name`` when given (a configuration's ``"optimizer": "SGD"``), else the
    optimizer's class name.
    """

    def __init__(self, optimizer: Any, learning_rate: float, *, name: str | None = None) -> None:
        self.optimizer = optimizer
        self.name = name if name else type(unwrapped_optimizer(optimizer)).__name__
        self.learning_rate = float(learning_rate)


def optimizer_for_lineage(optimizer: Any, name: object, learning_rate: float | None) -> Any:
    """What the lineage is given as the optimizer, from what the run knows of it.

    ``optimizer``: the object (None when the script handed none over), named by
    its class; ``name``: a name the configuration gives (a non-empty str, else
    ignored), used when there is no object. Without an
    object and without a name the lineage names no optimizer: a
    ``SimpleNamespace`` holding the learning rate has no name by the lineage's
    rule (``docs/collector-schedule.md``, "Names in the train lineage": a
    standard-library container names nothing), so the rate is kept and no
    optimizer is made up.
    """
    given = name.strip() if isinstance(name, str) and name.strip() else None
    if learning_rate is None:
        return optimizer if optimizer is not None else given
    if optimizer is None and given is None:
        return SimpleNamespace(learning_rate=float(learning_rate))
    # The object, when there is one, is what trained: its class names it.
    return ConfiguredOptimizer(
        optimizer, learning_rate, name=None if optimizer is not None else given
    )


def numeric_scalars(values: Mapping[str, Any]) -> dict[str, float]:
    """The values a framework logged that are numbers (tensors of one element too)."""
    scalars: dict[str, float] = {}
    for name, value in values.items():
        number = _number(value)
        if number is not None and isinstance(name, str) and name:
            scalars[name] = number
    return scalars


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)
    size = getattr(value, "numel", None) or getattr(value, "size", None)
    if callable(size):
        size = size()
    if callable(item) and size == 1:
        try:
            number = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return float(number) if isinstance(number, numbers.Real) else None
    return None


def lineage_values(values: Mapping[str, Any], prefix: str = "") -> dict[str, int | float | str]:
    """Hyper-parameters as lineage ``user_defined`` values: numbers stay, the rest is text.

    Nested mappings are flattened with ``/``; ``None`` is left out; text is cut at
    200 characters (a lineage value is for comparing runs, not for storage).
    """
    flat: dict[str, int | float | str] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(lineage_values(value, prefix=f"{name}/"))
        elif value is None:
            continue
        elif isinstance(value, bool):
            flat[name] = str(value)
        elif isinstance(value, int):
            flat[name] = value if -(2**63) <= value < 2**63 else str(value)
        elif isinstance(value, float):
            flat[name] = value if math.isfinite(value) else str(value)
        else:
            text = value if isinstance(value, str) else repr(value)
            flat[name] = text[:200]
    return flat


class CheckpointNote(Callback):
    """The checkpoint the framework saved last: the train lineage's model file.

    The lineage builders take the model file from any callback with a
    ``latest_ckpt_file_name`` (as MindSpore's ``ModelCheckpoint`` has).
    """

    def __init__(self) -> None:
        self.latest_ckpt_file_name: str | None = None


#: Every run that began training (weakly held; :func:`_say_unended_runs` asks which still is).
_training_runs: weakref.WeakSet[FrameworkRun] = weakref.WeakSet()


@atexit.register
def _say_unended_runs() -> None:
    """At interpreter exit, training that never ended: rank 0 of several says how to merge.

    Lightning tells its logger of an exception out of a fit; Transformers'
    callbacks and Accelerate's trackers hear of none (an exception out of
    ``Trainer.train``, a script that stops before ``end_training``), so the
    collector's end, which merges the job's lineage, never comes. The
    exception Python printed, when there was one, is named. Only a warning:
    the rank's files are closed by the writer's own exit handler (registered
    before this one, so it runs after), and no collective runs at exit.
    """
    error = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    exc_type = type(error) if isinstance(error, BaseException) else None
    for run in list(_training_runs):
        if run.training:
            run.collector._say_interrupted(exc_type, error if exc_type is not None else None)


before_abort(_say_unended_runs)  # (an MPI job's abort skips the exit handlers)


class FrameworkRun:
    """One training run of a framework, told to the collector as a :class:`TrainLoop` would.

    Args:
        collector: the rank's :class:`SummaryCollector` (made for the job's directory).
        owner: the integration's name, for messages.
    """

    def __init__(self, collector: SummaryCollector, *, owner: str) -> None:
        if not isinstance(collector, SummaryCollector):
            raise CollectorTypeError(
                f"For '{owner}', the collector must be a SummaryCollector, but got "
                f"{type(collector).__name__}."
            )
        self.collector = collector
        self.checkpoint = CheckpointNote()
        self._owner = owner
        self._callbacks = CallbackList([collector, self.checkpoint], owner)
        self._params: CallbackParams | None = None
        self._context: RunContext | None = None
        self._state = "new"  # -> "training" -> "trained" -> "closed"

    @property
    def params(self) -> CallbackParams | None:
        return self._params

    @property
    def training(self) -> bool:
        return self._state == "training"

    def begin(
        self,
        *,
        network: Any = None,
        optimizer: Any = None,
        loss_fn: Any = None,
        train_dataset: Iterable[Any] | None = None,
        epochs: int = 1,
        steps_per_epoch: int | None = None,
        extra: Mapping[str, Any] | None = None,
        device_number: int | None = None,
        gradient_network: Any = None,
    ) -> None:
        """Training begins: the collector opens the rank's files (``begin``).

        ``device_number``: the processes training together, when the framework
        says otherwise than the launcher (default: the launcher's world size).
        ``gradient_network``: the ``DistributedDataParallel`` module the framework
        wrapped ``network`` in (the collector's gradient probe reads its buckets;
        ``network`` still names the model and gives its parameters), or None.
        """
        if self._state != "new":
            raise CollectorStateError(f"{self._owner}: a run begins once.")
        params = train_params(
            self._callbacks,
            network=network,
            optimizer=optimizer,
            loss_fn=loss_fn,
            device_number=device_number,
            epochs=max(int(epochs), 1),
            steps=steps_per_epoch,
            train_dataset=train_dataset,
        )
        for key, value in (extra or {}).items():
            setattr(params, key, value)
        if gradient_network is not None:
            params.gradient_network = gradient_network
        self._params = params
        self._context = RunContext(params)
        self._callbacks.__enter__()
        self._state = "training"
        _training_runs.add(self)
        try:
            self._callbacks.begin(self._context)
        except BaseException as error:
            self.close(error)
            raise

    def _training(self) -> tuple[CallbackParams, RunContext]:
        if self._state != "training" or self._params is None or self._context is None:
            raise CollectorStateError(f"{self._owner}: no training run is open ({self._state}).")
        return self._params, self._context

    def epoch_begin(self, epoch: int) -> None:
        params, context = self._training()
        params.cur_epoch_num = epoch
        self._callbacks.epoch_begin(context)

    def step_begin(self, batch: Any = None) -> None:
        params, context = self._training()
        params.cur_epoch_num = max(params.cur_epoch_num, 1)
        params.cur_step_num += 1
        params.train_dataset_element = batch
        self._callbacks.step_begin(context)

    def step_end(
        self,
        outputs: Any = None,
        *,
        step: int | None = None,
        batch: Any = None,
        no_loss_reason: str | None = None,
    ) -> None:
        """The step is done; ``step`` renumbers it (the framework's own count, if later).

        ``batch``: the step's batch when the framework shows it only now (the
        Hugging Face Trainer's model inputs). ``no_loss_reason``: with ``outputs``
        None, why the step has no loss, in the integration's words (which values
        it saw, how to name the loss); the collector's warning says it.
        """
        params, context = self._training()
        if step is not None and step > params.cur_step_num:
            params.cur_step_num = step
        params.net_outputs = outputs
        # One of the "other attributes" CallbackParams allows; the collector's loss warning
        # reads it (collection/_extractor.py).
        setattr(params, "no_loss_reason", no_loss_reason if outputs is None else None)  # noqa: B010
        if batch is not None:
            params.train_dataset_element = batch
        self._callbacks.step_end(context)

    def epoch_end(self) -> None:
        _, context = self._training()
        self._callbacks.epoch_end(context)

    def scalars(self, values: Mapping[str, float], step: int | None) -> None:
        """Scalars the framework logged, into this rank's summary at ``step``.

        ``step`` is the framework's (``None``: the run's current step). A step
        before the last one written goes in as it is: the reader keeps every
        point, and the framework is the authority on its own steps.
        """
        record = self.collector.record
        if record is None or not values:
            return
        if step is None:
            step = self._params.cur_step_num if self._params is not None else 0
        for name, value in values.items():
            record.add_value("scalar", name, value)
        record.record(int(step))

    def end_training(self) -> None:
        """Training ended: the train lineage, and the job's merge (every rank)."""
        _, context = self._training()
        self._state = "trained"
        try:
            self._callbacks.end(context)
        except BaseException as error:
            self.close(error)
            raise

    def evaluation(self, metrics: Mapping[str, Any], valid_dataset: Any = None) -> None:
        """The final evaluation's metrics: the eval lineage, merged for the job (every rank)."""
        if self._state not in {"trained", "training"} or self._params is None:
            raise CollectorStateError(f"{self._owner}: evaluate after training ({self._state}).")
        eval_params = CallbackParams(
            **{
                **vars(self._params),
                "mode": "eval",
                "valid_dataset": valid_dataset,
                "metrics": dict(metrics),
                "cur_step_num": 0,
                "epoch_num": 1,
                "cur_epoch_num": 1,
            }
        )
        context = RunContext(eval_params)
        self._callbacks.begin(context)
        self._callbacks.end(context)

    def close(self, error: BaseException | None = None) -> None:
        """Close the rank's files (flushed: what was recorded is on disk)."""
        if self._state in {"new", "closed"}:
            self._state = "closed"
            return
        self._state = "closed"
        if error is None:
            self._callbacks.__exit__(None, None, None)
        else:
            self._callbacks.__exit__(type(error), error, error.__traceback__)
        self.collector.close()


def job_coordinator(info: RankInfo, parent: str, timeout: float, owner: str) -> Coordinator:
    """The collectives of this job (the collector's merge uses the same)."""
    try:
        return create_coordinator(info, timeout=timeout, job_dir=parent)
    except RanksError as error:
        raise CollectorStateError(
            f"For '{owner}', the ranks of this job cannot reach each other: {error}"
        ) from error
