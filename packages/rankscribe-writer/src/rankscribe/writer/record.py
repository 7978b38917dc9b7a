"""SummaryRecord: the public writer, with the original's names and meaning.

The calls made on the training thread (``add_value``, ``record``) only check
and copy data and queue it; encoding and file I/O happen in the background
(see pipeline.py), in step order. ``flush()`` returns once everything recorded
before it is on disk, and ``close()`` finishes writing and makes the files
read-only; both also run for any record left open at interpreter exit.
"""

from __future__ import annotations

import atexit
import logging
import numbers
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from functools import partial
from types import TracebackType
from typing import Any

from rankscribe.writer import events, naming, operators, tensorboard
from rankscribe.writer.errors import (
    RecordTooLargeError,
    StepTooLargeError,
    WriterError,
    WriterStateError,
    WriterTypeError,
    WriterValueError,
)
from rankscribe.writer.eventfile import EventFile
from rankscribe.writer.export import FORMATS as EXPORT_FORMATS
from rankscribe.writer.export import NpyExporter
from rankscribe.writer.pipeline import Pipeline
from rankscribe.writer.steps import EncodedStep, StepJob, encode_step, is_heavy
from rankscribe.writer.values import (
    LINEAGE_MESSAGES,
    MAX_STEP_BYTES,
    Snapshot,
    check_name,
    check_plugin,
    graph_bytes,
    scalar,
    snapshot,
)

logger = logging.getLogger(__name__)

FORMATS = ("mindinsight", "tensorboard")
MODES = ("train", "eval")
DEFAULT_MAX_PENDING_BYTES = 256 << 20
# A batch of scalar-only steps holds at most this many steps, and counts as
# this many bytes against max_pending_bytes.
_MAX_SCALAR_BATCH = 1024
_SCALAR_BATCH_BYTES = 64 * _MAX_SCALAR_BATCH
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

_live_records: weakref.WeakSet[SummaryRecord] = weakref.WeakSet()
_live_lock = threading.Lock()


class SummaryRecord:
    """Record summary data of a training run into files under ``log_dir``.

    Args:
        log_dir: directory of the files; created (0700) if missing.
        file_prefix, file_suffix: parts of the summary file name
            ``{prefix}.out.events.summary.{T}.{rank}.{host}{suffix}``.
        num_process: how many threads encode heavy values in parallel (at most
            the number of CPUs).
        network: an object with a ``graph_proto()`` method returning a
            ``GraphProto``/``ModelProto`` (or its bytes); its graph is written
            once, at the first ``record``.
        max_file_size: bytes per file; when a record would not fit, the file is
            closed and a new one started. None means no limit.
        raise_exception: raise write errors (disk full, a record too large for
            ``max_file_size``, ...) to the caller instead of logging them.
        export_options: ``{'tensor_format': 'npy'}`` also saves every tensor
            as ``export_<T>/tensor/<tag>_<step>.npy``.
        rank: the rank that goes into file names (the collector passes it).
        formats: ``("mindinsight",)``, and/or ``"tensorboard"`` for a second
            file that TensorBoard reads.
        max_pending_bytes: bound of the data recorded but not yet written;
            ``record`` waits when it is reached.

    One thread at a time calls a record's methods (the training loop's);
    the summary operators (``scalar_summary``, ...) may be called from any thread.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        file_prefix: str = "events",
        file_suffix: str = "_MS",
        num_process: int = 32,
        network: Any = None,
        max_file_size: int | None = None,
        raise_exception: bool = False,
        export_options: dict[str, Any] | None = None,
        *,
        rank: int | str = 0,
        formats: Iterable[str] = ("mindinsight",),
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    ) -> None:
        self._directory = _check_log_dir(log_dir)
        _check_affix("file_prefix", file_prefix)
        _check_affix("file_suffix", file_suffix)
        workers = _check_positive_int("num_process", num_process)
        self._max_file_size = _check_max_file_size(max_file_size)
        self._raise_exception = _check_bool("raise_exception", raise_exception)
        self._export_tensors = _check_export_options(export_options)
        self._formats = _check_formats(formats)
        _check_rank(rank)
        _check_positive_int("max_pending_bytes", max_pending_bytes)
        if network is not None and not callable(getattr(network, "graph_proto", None)):
            raise WriterTypeError(
                "For 'SummaryRecord', the argument 'network' must have a graph_proto() method "
                f"returning its graph, but got {type(network).__name__}."
            )

        os.makedirs(self._directory, mode=0o700, exist_ok=True)
        self._host = naming.host_name()
        self._timestamp = naming.claim_timestamp(self._directory)
        self._prefix, self._suffix, self._rank = file_prefix, file_suffix, rank
        self._network = network
        self._graph_written = False
        self._mode = "train"
        self._pending: dict[str, dict[str, Snapshot]] = {}
        self._scalars: dict[str, float] = {}
        self._scalar_group = 0
        self._scalar_batch: list[tuple[float, int, dict[str, float]]] | None = None
        self._batch_lock = threading.Lock()
        self._pending_lineage: list[Snapshot] = []
        self._closed = False
        self._errors_logged: set[str] = set()
        self._text_warned = False

        self._created: list[str] = []  # every file opened, in order
        self._summary_file: EventFile | None = None
        if "mindinsight" in self._formats:
            self._summary_file = EventFile(
                self._names(file_suffix), first_payload=_version_payload,
                max_file_size=self._max_file_size, on_open=self._created.append,
            )
        self._lineage_file = EventFile(
            self._names(naming.LINEAGE_SUFFIX), max_file_size=self._max_file_size,
            on_open=self._created.append,
        )
        self._board_file: EventFile | None = None
        if "tensorboard" in self._formats:
            self._board_file = EventFile(
                self._board_names(), first_payload=_board_version_payload,
                max_file_size=self._max_file_size, on_open=self._created.append,
            )
        self._exporter = NpyExporter(self._directory, self._timestamp)
        self._pipeline = Pipeline(
            self._write, self._sync, workers=min(workers, os.cpu_count() or 1),
            max_pending_bytes=max_pending_bytes, name=f"rankscribe-{self._timestamp}",
        )
        # Whether a step of scalars alone can skip the general path (no graph
        # still to write, no second format to encode for).
        self._scalars_alone = self._board_file is None and network is None
        with _live_lock:
            _live_records.add(self)
        operators.record_opened()

    # ----------------------------------------------------------------- public API

    @property
    def log_dir(self) -> str:
        """Full path of the summary file, as in the original (not the directory)."""
        if self._summary_file is not None and self._summary_file.paths:
            return self._summary_file.paths[0]  # the name it got, if another process had T
        return os.path.join(self._directory, self._first_name(self._suffix))

    @property
    def directory(self) -> str:
        """The directory this record writes into."""
        return self._directory

    @property
    def files(self) -> list[str]:
        """Every file created so far (summary, lineage, TensorBoard), in creation order."""
        return list(self._created)

    def set_mode(self, mode: str) -> None:
        """'train' or 'eval' (the collector switches to 'eval' for evaluation)."""
        if mode not in MODES:
            raise WriterValueError(
                f"For 'SummaryRecord.set_mode', the argument 'mode' must be one of "
                f"{list(MODES)}, but got {mode!r}."
            )
        self._mode = mode

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        """Queue ``value`` under ``name`` for the next ``record``.

        ``plugin`` is one of scalar, image, histogram, tensor (NumPy-readable
        values: arrays, CPU tensors, numbers), graph, landscape,
        train_lineage, eval_lineage, dataset_graph, custom_lineage_data
        (protobuf messages) or text (TensorBoard target only). The value is
        copied now: changing it afterwards does not change what is recorded.
        """
        if (
            plugin == "scalar" and not self._closed and type(name) is str and name
            and name.isascii()  # other names are checked below: they must encode to UTF-8
        ):
            self._add_scalar(name, scalar(name, value))  # the hot path, checked just as fully
            return
        self._check_open("add_value")
        plugin = check_plugin(plugin)
        name = check_name(name)
        if plugin == "scalar":
            self._add_scalar(name, scalar(name, value))
            return
        snap = snapshot(plugin, name, value)
        if plugin in LINEAGE_MESSAGES:
            self._pending_lineage.append(snap)
            return
        if plugin == "graph":
            self._pending.setdefault(plugin, {})[name] = snap
            return
        if plugin == "text" and self._board_file is None and not self._text_warned:
            self._text_warned = True
            logger.warning("text values are shown by the TensorBoard target only; add "
                           "'tensorboard' to formats to record '%s'", name)
        by_tag = self._pending.setdefault(plugin, {})
        if name in by_tag:
            logger.warning(
                "For 'SummaryRecord.add_value', '%s/%s' has duplicate values; only the newest "
                "one will be recorded.", name, plugin,
            )
        by_tag[name] = snap

    def record(
        self,
        step: int,
        train_network: Any = None,
        plugin_filter: Callable[[str], bool] | None = None,
    ) -> bool:
        """Write everything added since the last call as step ``step``.

        Summary values become one event of the summary file; each lineage
        value becomes its own lineage event. ``plugin_filter(plugin)`` may
        drop whole plugins. Returns False (and logs) when the record is closed
        or the step is too large to be written.
        """
        if type(step) is not int:
            step = _integer_step(step)
        if not _INT64_MIN <= step <= _INT64_MAX:
            raise WriterValueError(
                f"For 'SummaryRecord.record', the argument 'step' must fit in an int64 "
                f"[-2**63, 2**63 - 1], but got {step}."
            )
        if self._closed:
            logger.error("The record writer is closed; step %d was not recorded.", step)
            return False
        if (
            self._scalars and self._scalars_alone and not operators.has_buffered()
            and not self._pending
            and not self._pending_lineage and plugin_filter is None
            and (train_network is None or self._graph_written)
        ):  # the common case: only scalars, for the summary file alone
            scalars, self._scalars = self._scalars, {}
            self._batch_scalar_step(step, scalars)
            return True
        values, lineage, graph = self._take_pending(plugin_filter, train_network)
        size = events.summary_event_size(sum(snap.encoded_size for snap in values))
        refused: StepTooLargeError | None = None
        if size > MAX_STEP_BYTES:
            refused = StepTooLargeError(step, size, MAX_STEP_BYTES)
            values = []
        if values or lineage or graph is not None:
            self._queue_step(step, values, lineage, graph)
        else:
            self._pipeline.raise_pending()
        if refused is not None:
            if self._raise_exception:
                raise refused
            logger.error("%s", refused)
            return False
        return True

    def _batch_scalar_step(self, step: int, scalars: dict[str, float]) -> None:
        """Add a scalar-only step to the open batch, or queue a new batch holding it.

        Steps of scalars alone cost the caller a list append while the writer
        is busy: the batch in the queue stays open, and grows, until the writer
        thread takes it (it seals it then) or another kind of step is queued.
        """
        entry = (time.time(), step, scalars)
        batch_is_new = False
        with self._batch_lock:
            batch = self._scalar_batch
            if batch is not None and len(batch) < _MAX_SCALAR_BATCH:
                batch.append(entry)
            else:
                batch = self._scalar_batch = [entry]
                batch_is_new = True
        if batch_is_new:
            self._pipeline.put(partial(self._encode_scalar_batch, batch), _SCALAR_BATCH_BYTES)
        elif self._pipeline.has_error:  # the step is in; now an earlier error may surface
            self._pipeline.raise_pending()

    def _seal_scalar_batch(self) -> None:
        """Close the open batch: what comes next is written after it."""
        with self._batch_lock:
            self._scalar_batch = None

    def _encode_scalar_batch(
        self, batch: list[tuple[float, int, dict[str, float]]]
    ) -> list[tuple[int, bytes]]:
        # Writer thread: seal the batch first, so no step joins it while it is encoded.
        with self._batch_lock:
            if self._scalar_batch is batch:
                self._scalar_batch = None
        return [(step, events.scalar_event(wall_time, step, scalars.items()))
                for wall_time, step, scalars in batch]

    def _queue_step(
        self, step: int, values: list[Snapshot], lineage: list[Snapshot], graph: bytes | None
    ) -> None:
        self._seal_scalar_batch()
        job = StepJob(
            step, time.time(), values, lineage, graph,
            tensorboard=self._board_file is not None, export_tensors=self._export_tensors,
        )
        memory = sum(snap.memory for snap in values) + sum(snap.memory for snap in lineage)
        self._pipeline.put(
            partial(encode_step, job), memory, heavy=any(is_heavy(snap) for snap in values)
        )

    def flush(self, timeout: float | None = None) -> bool:
        """Return once every step recorded so far is written and synced to disk.

        Returns False if ``timeout`` seconds passed first (the data is still
        being written).
        """
        if self._closed:
            return True
        return self._pipeline.flush(sync=True, timeout=timeout)

    def close(self) -> None:
        """Write everything recorded, close the files (now read-only). Idempotent."""
        if self._closed:
            return
        self._closed = True
        with _live_lock:
            _live_records.discard(self)
        operators.record_closed()
        try:
            self._pipeline.close()
        finally:
            for stream in (self._summary_file, self._lineage_file, self._board_file):
                if stream is not None:
                    self._guarded("close", None, stream.close)

    def __enter__(self) -> SummaryRecord:
        if self._closed:
            # A ValueError, as the original raises here.
            raise WriterValueError("SummaryRecord is closed and cannot be entered again.")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<SummaryRecord {self._directory!r} rank={self._rank} {state}>"

    # ------------------------------------------------------------ caller thread

    def _abandon_in_child(self) -> None:
        self._closed = True

    def _add_scalar(self, name: str, value: float) -> None:
        scalars = self._scalars
        if not scalars:
            # Values are grouped by plugin in the order each plugin first appeared.
            self._scalar_group = len(self._pending)
        elif name in scalars:
            logger.warning(
                "For 'SummaryRecord.add_value', '%s/scalar' has duplicate values; only the "
                "newest one will be recorded.", name,
            )
        scalars[name] = value

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise WriterStateError(f"SummaryRecord.{operation}: the record is closed.")

    def _take_pending(
        self, plugin_filter: Callable[[str], bool] | None, train_network: Any
    ) -> tuple[list[Snapshot], list[Snapshot], bytes | None]:
        if self._mode == "train" and operators.has_buffered():
            # Summary operators' values join the step; add_value of the same tag wins.
            for snap in operators.take_buffered():
                if snap.plugin != "scalar":
                    self._pending.setdefault(snap.plugin, {}).setdefault(snap.tag, snap)
                elif snap.tag not in self._scalars:
                    if not self._scalars:
                        self._scalar_group = len(self._pending)
                    self._scalars[snap.tag] = snap.data
        pending, self._pending = self._pending, {}
        lineage, self._pending_lineage = self._pending_lineage, []
        scalars, self._scalars = self._scalars, {}
        if scalars:
            group = {name: Snapshot("scalar", name, value, len(name) + 16, 64)
                     for name, value in scalars.items()}
            ordered = list(pending.items())
            ordered.insert(self._scalar_group, ("scalar", group))
            pending = dict(ordered)
        graph: bytes | None = None
        graphs = pending.pop("graph", {})
        if graphs:
            graph = next(reversed(graphs.values())).data
        elif not self._graph_written:
            source = self._network if self._network is not None else train_network
            if source is not None and callable(getattr(source, "graph_proto", None)):
                graph = graph_bytes(source.graph_proto())
        if graph is not None:
            self._graph_written = True
            self._scalars_alone = self._board_file is None
        if plugin_filter is not None:
            pending = {name: tags for name, tags in pending.items() if plugin_filter(name)}
            lineage = [snap for snap in lineage if plugin_filter(snap.plugin)]
        values = [snap for tags in pending.values() for snap in tags.values()]
        return values, lineage, graph

    def _names(self, suffix: str) -> Callable[[], str]:
        """Summary or lineage file paths: the shared first T, then a fresh T per rotation."""
        return self._rotating_paths(lambda timestamp: naming.summary_file_name(
            self._prefix, timestamp, self._rank, self._host, suffix))

    def _board_names(self) -> Callable[[], str]:
        # TensorBoard reads a directory's files in name order, so a rotated file
        # needs a later T, not just a higher counter ("...10" sorts before "...2").
        return self._rotating_paths(
            lambda timestamp: naming.tensorboard_file_name(timestamp, self._host))

    def _rotating_paths(self, name_for: Callable[[int], str]) -> Callable[[], str]:
        used: list[int] = []

        def next_path() -> str:
            timestamp = (
                naming.claim_timestamp(self._directory, not_before=used[-1] + 1)
                if used else self._timestamp
            )
            used.append(timestamp)
            return os.path.join(self._directory, name_for(timestamp))

        return next_path

    def _first_name(self, suffix: str) -> str:
        return naming.summary_file_name(
            self._prefix, self._timestamp, self._rank, self._host, suffix)

    # ------------------------------------------------------------ writer thread

    def _write(self, encoded: EncodedStep | list[tuple[int, bytes]]) -> None:
        if type(encoded) is list:  # a batch of scalar-only steps: one event each
            assert self._summary_file is not None
            append = self._summary_file.append
            for scalar_step, event in encoded:
                try:
                    append(event)
                except (OSError, WriterError) as error:
                    self._write_failed("summary", error, scalar_step)
            return
        assert isinstance(encoded, EncodedStep)
        step = encoded.step
        if self._summary_file is not None:
            for payload in encoded.summary:
                self._guarded("summary", step, self._summary_file.append, payload)
        for payload in encoded.lineage:
            self._guarded("lineage", step, self._lineage_file.append, payload)
        if self._board_file is not None:
            for payload in encoded.tensorboard:
                self._guarded("tensorboard", step, self._board_file.append, payload)
        for tag, array in encoded.exports:
            self._guarded("export", step, self._exporter.export, tag, step, array)

    def _sync(self, durable: bool) -> None:
        for stream in (self._summary_file, self._lineage_file, self._board_file):
            if stream is not None:
                self._guarded("sync", None, stream.sync if durable else stream.write_buffered)

    def _guarded(
        self, target: str, step: int | None, action: Callable[..., Any], *args: Any
    ) -> None:
        """Run a write; apply ``raise_exception`` to what fails, keep going either way."""
        try:
            action(*args)
        except (OSError, WriterError) as error:  # never the writer thread's end
            self._write_failed(target, error, step)

    def _write_failed(self, target: str, error: Exception, step: int | None) -> None:
        """Raise on the caller's next call, or log: every refused record, a failing disk once."""
        if self._raise_exception:
            self._pipeline.report(error)
            return
        if isinstance(error, RecordTooLargeError):
            logger.warning("%s data of step %s was not written: %s", target, step, error)
            return
        # One log line per kind of failure: a full disk fails every file alike.
        kind = f"{type(error).__name__}:{getattr(error, 'errno', None)}"
        if kind not in self._errors_logged:
            self._errors_logged.add(kind)
            logger.error("writing %s data failed (further such errors are not logged): %s",
                         target, error)


def _integer_step(step: object) -> int:
    """An int step from any integer type (NumPy's included), never from bool or float."""
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise WriterTypeError(
            f"For 'SummaryRecord.record', the argument 'step' must be an int, but got "
            f"{type(step).__name__}."
        )
    return int(step)


def _version_payload() -> bytes:
    return events.version_event(time.time())


def _board_version_payload() -> bytes:
    return tensorboard.version_event(time.time())


# ---------------------------------------------------------------- validation


def _check_log_dir(log_dir: object) -> str:
    if not isinstance(log_dir, (str, os.PathLike)) or not os.fspath(log_dir):
        raise WriterTypeError(
            f"For 'SummaryRecord', the argument 'log_dir' must be a non-empty path, but got "
            f"{log_dir!r}."
        )
    path = os.path.abspath(os.fspath(log_dir))
    if os.path.exists(path) and not os.path.isdir(path):
        raise WriterValueError(
            f"For 'SummaryRecord', the argument 'log_dir' must be a directory, but {path!r} "
            f"is a file."
        )
    return path


def _check_affix(argument: str, value: object) -> None:
    if not naming.is_valid_affix(value):
        raise WriterValueError(
            f"For 'SummaryRecord', the argument '{argument}' must match "
            f"'^\\w+[0-9a-zA-Z_.]*$' (ASCII letters, digits, '_' and '.'), but got {value!r}."
        )


def _check_bool(argument: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise WriterTypeError(
            f"For 'SummaryRecord', the argument '{argument}' must be a bool, but got "
            f"{type(value).__name__}."
        )
    return value


def _check_positive_int(argument: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WriterTypeError(
            f"For 'SummaryRecord', the argument '{argument}' must be an int, but got "
            f"{type(value).__name__}."
        )
    if value <= 0:
        raise WriterValueError(
            f"For 'SummaryRecord', the argument '{argument}' must be greater than 0, but got "
            f"{value}."
        )
    return value


def _check_max_file_size(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise WriterTypeError(
            f"For 'SummaryRecord', the argument 'max_file_size' must be an int or None, but "
            f"got {type(value).__name__}."
        )
    if value < 0:
        # The original accepts a negative size as "no limit", with a warning.
        logger.warning("For 'SummaryRecord', 'max_file_size' %d is negative: no limit is set.",
                       value)
        return None
    if value == 0:
        raise WriterValueError(
            "For 'SummaryRecord', the argument 'max_file_size' must be greater than 0 (bytes) "
            "or None for no limit, but got 0."
        )
    return value


def _check_export_options(options: object) -> bool:
    if options is None:
        return False
    if not isinstance(options, dict):
        raise WriterTypeError(
            f"For 'SummaryRecord', the argument 'export_options' must be a dict or None, but "
            f"got {type(options).__name__}."
        )
    unknown = set(options) - {"tensor_format"}
    if unknown:
        raise WriterValueError(
            f"For 'SummaryRecord', the keys of 'export_options' must be in ['tensor_format'], "
            f"but got {sorted(map(str, unknown))}."
        )
    tensor_format = options.get("tensor_format")
    if tensor_format is not None and tensor_format not in EXPORT_FORMATS:
        raise WriterValueError(
            f"For 'SummaryRecord', export_options['tensor_format'] must be one of "
            f"{[*EXPORT_FORMATS, None]}, but got {tensor_format!r}."
        )
    return tensor_format is not None


def _check_formats(formats: object) -> tuple[str, ...]:
    if isinstance(formats, str):
        formats = (formats,)
    chosen: tuple[object, ...] = ()
    if isinstance(formats, Iterable):
        chosen = tuple(formats)
    if not chosen or any(item not in FORMATS for item in chosen):
        raise WriterValueError(
            f"For 'SummaryRecord', the argument 'formats' must be a non-empty collection of "
            f"{list(FORMATS)}, but got {formats!r}."
        )
    return tuple(str(item) for item in chosen)


def _check_rank(rank: object) -> None:
    valid_int = isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0
    valid_str = isinstance(rank, str) and naming.is_valid_affix(rank)
    if not (valid_int or valid_str):
        raise WriterValueError(
            f"For 'SummaryRecord', the argument 'rank' must be an int >= 0 or a word such as "
            f"'merged', but got {rank!r}."
        )


def _forget_records_in_child() -> None:
    """In a forked child, the parent's records are the parent's: never write or close them.

    The child inherits the open files but not the writer threads; closing them
    at the child's exit would write the parent's buffered records a second
    time and make its open files read-only.
    """
    global _live_lock  # noqa: PLW0603 - a lock held by a parent thread at fork stays held
    _live_lock = threading.Lock()
    records = list(_live_records)
    _live_records.clear()
    for record in records:
        record._abandon_in_child()
    operators.reset_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_records_in_child)


@atexit.register
def _close_live_records() -> None:
    """Finish writing every record the program left open."""
    with _live_lock:
        records = list(_live_records)
    for record in records:
        try:
            record.close()
        except Exception:
            logger.exception("closing %r at exit failed", record)
