"""SummaryRecord: the public writer, with the original's names and meaning.

The calls made on the training thread (``add_value``, ``record``) only check
and copy data and queue it; encoding and file I/O happen in the background, in
step order (``_pipeline.py`` hands the encoded steps to ``_step_writer.py``, the
writer thread's side). ``flush()`` returns once everything recorded before it is
on disk, and ``close()`` finishes writing and makes the files read-only; both
also run for any record left open at interpreter exit.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any

from rankscribe.ranks import files
from rankscribe.ranks.launchers import launcher_rank
from rankscribe.writer import operators
from rankscribe.writer._arguments import check_bool, check_int
from rankscribe.writer.deferred import DeferredValue
from rankscribe.writer.encoding._graph_builders import RecordGraph
from rankscribe.writer.encoding._steps import StepJob, encode_step, is_heavy
from rankscribe.writer.encoding._values import (
    ARRAY_PLUGINS,
    LINEAGE_MESSAGES,
    MAX_STEP_BYTES,
    Snapshot,
    check_name,
    check_plugin,
    deferred_snapshot,
    device_snapshot,
    graph_bytes,
    scalar,
    snapshot,
)
from rankscribe.writer.errors import (
    StepTooLargeError,
    WriterStateError,
    WriterValueError,
)
from rankscribe.writer.files import (
    LINEAGE_SUFFIX,
    SUMMARY_SUFFIX,
    claim_timestamp,
    host_name,
    summary_file_name,
)
from rankscribe.writer.format import _events as events
from rankscribe.writer.record import _lifetime
from rankscribe.writer.record._checks import (
    INT64_MAX,
    INT64_MIN,
    MODES,
    check_affix,
    check_export_options,
    check_formats,
    check_log_dir,
    check_max_file_size,
    check_name_length,
    check_plugin_filter,
    check_rank,
    check_timeout,
    integer_step,
)
from rankscribe.writer.record._export import NpyExporter, claim_export_dir
from rankscribe.writer.record._files import RecordFiles
from rankscribe.writer.record._launcher import warn_shared_directory
from rankscribe.writer.record._pipeline import Pipeline
from rankscribe.writer.record._scalar_batches import (
    SCALAR_POINT_BYTES,
    ScalarBatches,
    scalar_column,
    scalar_steps,
)
from rankscribe.writer.record._step_writer import StepWriter
from rankscribe.writer.record._write_errors import WriteErrorPolicy

logger = logging.getLogger(__name__)

DEFAULT_MAX_PENDING_BYTES = 256 << 20
_CALLER = "SummaryRecord"  # as the original's messages name it
_EXPORT_DIR_ATTEMPTS = 100


class SummaryRecord:
    """Record summary data of a training run into files under ``log_dir``.

    Args:
        log_dir: directory of the files; created (0700, as are missing parents) if
            missing.
        file_prefix, file_suffix: parts of the summary file name
            ``{prefix}.out.events.summary.{T}.{rank}.{host}{suffix}``.
        num_process: how many threads encode heavy values in parallel (at most
            the number of CPUs).
        network: an object with a ``graph_proto()`` method returning a
            ``GraphProto``/``ModelProto`` (or its bytes), or a network an
            installed graph builder knows (rankscribe-collector's: a
            ``torch.nn.Module``, an ``ArrayNetwork``); its graph is written
            once, at the first ``record``.
        max_file_size: bytes per file; when a record would not fit, the file is
            closed and a new one started. None means no limit.
        raise_exception: raise write errors (disk full, a record too large for
            ``max_file_size``, ...) to the caller instead of logging them.
        export_options: ``{'tensor_format': 'npy'}`` also saves every tensor
            as ``export_<T>/tensor/<tag>_<step>.npy``.
        rank: the rank that goes into file names (the collector passes it).
            None (the default) takes the rank a launcher exported (``mpiexec``,
            ``torchrun``, Slurm; see ``docs/layout.md``), or 0 without one. Under
            a launch of several ranks, a directory that is not the rank's own
            ``rank_<r>`` (``rankscribe.ranks.rank_dir()``) gets a warning: the
            ranks would share it.
        formats: ``("mindinsight",)``, and/or ``"tensorboard"`` for a second
            file that TensorBoard reads.
        max_pending_bytes: bound of the data recorded but not yet written;
            ``record`` waits when it is reached.
        group_readable: make the files and directories created readable by
            the owner's group (files 0640 while written, 0440 once closed;
            directories 0750) instead of by the owner alone (0600, 0400,
            0700), for a viewer that runs as another user of the group. None
            (the default) follows the environment variable
            ``RANKSCRIBE_GROUP_READABLE=1``.

    One thread at a time calls a record's methods (the training loop's);
    the summary operators (``scalar_summary``, ...) may be called from any thread.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        file_prefix: str = "events",
        file_suffix: str = SUMMARY_SUFFIX,
        num_process: int = 32,
        network: Any = None,
        max_file_size: int | None = None,
        raise_exception: bool = False,
        export_options: dict[str, Any] | None = None,
        *,
        rank: int | str | None = None,
        formats: Iterable[str] = ("mindinsight",),
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        group_readable: bool | None = None,
    ) -> None:
        self._directory = check_log_dir(log_dir)
        check_affix("file_prefix", file_prefix)
        check_affix("file_suffix", file_suffix)
        workers = check_int("num_process", num_process, minimum=1, owner=_CALLER)
        self._max_file_size = check_max_file_size(max_file_size)
        self._raise_exception = check_bool("raise_exception", raise_exception, owner=_CALLER)
        self._export_tensors = check_export_options(export_options)
        self._formats = check_formats(formats)
        launched = launcher_rank(os.environ)
        if rank is None:
            rank = launched.rank if launched is not None else 0
        check_rank(rank)
        check_int("max_pending_bytes", max_pending_bytes, minimum=1, owner=_CALLER)
        if group_readable is not None:
            check_bool("group_readable", group_readable, owner=_CALLER)
        self._group_readable = files.group_readable(group_readable)
        self._graph = RecordGraph(network)

        self._host = host_name()
        check_name_length(
            self._directory,
            max(
                (
                    summary_file_name(file_prefix, int(time.time()), rank, self._host, suffix)
                    for suffix in (file_suffix, LINEAGE_SUFFIX)
                ),
                key=len,
            ),
        )
        files.make_private_dir(self._directory, group_readable=self._group_readable)
        if launched is not None and launched.shared and not isinstance(rank, str):
            warn_shared_directory(self._directory, launched, rank)
        self._timestamp = claim_timestamp(self._directory)
        self._exporter: NpyExporter | None = None
        if self._export_tensors:
            self._exporter, self._timestamp = claim_export_dir(
                self._directory, self._timestamp, group_readable=self._group_readable
            )
        self._prefix, self._suffix, self._rank = file_prefix, file_suffix, rank
        self._network = network
        self._graph_written = False
        self._mode = "train"
        self._pending: dict[str, dict[str, Snapshot]] = {}
        self._scalars: dict[str, float] = {}
        self._scalar_group = 0
        self._pending_lineage: list[Snapshot] = []
        self._closed = False
        self._text_warned = False

        self._files = RecordFiles(
            self._directory,
            self._timestamp,
            (file_prefix, file_suffix, rank, self._host),
            formats=self._formats,
            max_file_size=self._max_file_size,
            group_readable=self._group_readable,
        )
        self._board_file = self._files.board
        # The policy reports to the pipeline made just below, and only from the writer
        # thread, which that pipeline starts.
        self._write_errors = WriteErrorPolicy(self._raise_exception, self._report_write_error)
        self._writer = StepWriter(self._files, self._exporter, self._write_errors)
        self._pipeline = Pipeline(
            self._writer.write,
            self._writer.sync,
            workers=min(workers, os.cpu_count() or 1),
            max_pending_bytes=max_pending_bytes,
            name=f"rankscribe-{self._timestamp}",
        )
        self._scalar_batches = ScalarBatches(self._pipeline)
        # Bound once: record() of a scalar-only step calls it for every step.
        self._add_scalar_step = self._scalar_batches.add
        # Whether a step of scalars alone can skip the general path (no graph
        # still to write, no second format to encode for).
        self._scalars_alone = self._board_file is None and network is None
        _lifetime.track(self)

    # ----------------------------------------------------------------- public API

    @property
    def log_dir(self) -> str:
        """Full path of the summary file, as in the original (not the directory)."""
        return self._files.summary_path()

    @property
    def directory(self) -> str:
        """The directory this record writes into."""
        return self._directory

    @property
    def files(self) -> list[str]:
        """Every file created so far (summary, lineage, TensorBoard), in creation order."""
        return list(self._files.created)

    @property
    def has_pending(self) -> bool:
        """Whether values wait for the next :meth:`record`: added with :meth:`add_value`,
        or by the summary operators (:mod:`rankscribe.writer.operators`)."""
        return bool(
            self._scalars or self._pending or self._pending_lineage or operators.has_buffered()
        )

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
        A scalar or histogram may also be a
        :class:`~rankscribe.writer.deferred.DeferredValue`, resolved off this thread
        when its step is encoded (the collector's values read from a device). A
        scalar, image, tensor or histogram on an accelerator is read that way too where
        a device reader is installed (``rankscribe.writer.deferred.set_device_reader``;
        the collector's torch adapter installs one): its copy to the host is started
        here, its shape and dtype checked, and nothing waits for the device.
        """
        if (
            plugin != "scalar"
            or self._closed
            or type(name) is not str
            or not name
            or not name.isascii()  # such names are checked here: they must encode to UTF-8
        ):
            self._check_open("add_value")
            plugin = check_plugin(plugin)
            name = check_name(name)
            if plugin != "scalar":
                snap = device_snapshot(plugin, name, value) if plugin in ARRAY_PLUGINS else None
                if snap is None:
                    snap = snapshot(plugin, name, value)
                self._add_snapshot(plugin, name, snap)
                return
        # Scalars: the hot path, checked just as fully, inline (no call for a float) as
        # each call layer is a measurable share of what a step costs the training thread.
        if type(value) is float:
            number = value
        elif isinstance(value, DeferredValue):  # read from a device: resolved when encoded
            self._add_snapshot("scalar", name, deferred_snapshot("scalar", name, value))
            return
        else:
            on_device = device_snapshot("scalar", name, value)
            if on_device is not None:  # a device tensor: its copy started, read when encoded
                self._add_snapshot("scalar", name, on_device)
                return
            number = scalar(name, value)
        scalars = self._scalars
        if not scalars:
            # Values are grouped by plugin in the order each plugin first appeared.
            self._scalar_group = len(self._pending)
        elif name in scalars:
            logger.warning(
                "For 'SummaryRecord.add_value', '%s/scalar' has duplicate values; only the "
                "newest one will be recorded.",
                name,
            )
        scalars[name] = number

    def _add_snapshot(self, plugin: str, name: str, snap: Snapshot) -> None:
        if plugin in LINEAGE_MESSAGES:
            self._pending_lineage.append(snap)
            return
        if plugin == "graph":
            self._pending.setdefault(plugin, {})[name] = snap
            return
        if plugin == "text" and self._board_file is None and not self._text_warned:
            self._text_warned = True
            logger.warning(
                "text values are shown by the TensorBoard target only; add "
                "'tensorboard' to formats to record '%s'",
                name,
            )
        by_tag = self._pending.setdefault(plugin, {})
        if name in by_tag:
            logger.warning(
                "For 'SummaryRecord.add_value', '%s/%s' has duplicate values; only the newest "
                "one will be recorded.",
                name,
                plugin,
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
            step = integer_step(step)
        if plugin_filter is not None:  # checked only when given: None is the hot path's
            check_plugin_filter(plugin_filter)
        if not INT64_MIN <= step <= INT64_MAX:
            raise WriterValueError(
                f"For 'SummaryRecord.record', the argument 'step' must fit in an int64 "
                f"[-2**63, 2**63 - 1], but got {step}."
            )
        if self._closed:
            logger.error("The record writer is closed; step %d was not recorded.", step)
            return False
        if (
            self._scalars
            and self._scalars_alone
            and not operators.has_buffered()
            and not self._pending
            and not self._pending_lineage
            and (train_network is None or self._graph_written)
        ):  # the common case: only scalars, for the summary file alone
            self._record_scalars(step, plugin_filter)
            return True
        values, lineage, graph = self._take_pending(plugin_filter, train_network)
        # The filter may have left only scalars (the summary operators' tensors are
        # dropped at most of the collector's steps): they join the scalar batch too.
        left = _plain_scalars(values) if self._scalars_alone and not lineage else None
        if left and graph is None:
            self._add_scalar_step(step, left)
            return True
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

    def _record_scalars(self, step: int, plugin_filter: Callable[[str], bool] | None) -> None:
        """``record`` of a step of pending scalars alone: into the open scalar batch, unless
        ``plugin_filter`` drops them (a filter that raises leaves them pending for a
        retry, as ``record``'s general path does)."""
        keep = plugin_filter is None or bool(plugin_filter("scalar"))
        scalars, self._scalars = self._scalars, {}
        if keep:
            self._add_scalar_step(step, scalars)
        else:
            self._pipeline.raise_pending()

    def write_scalars(self, step: int, scalars: Mapping[str, float]) -> bool:
        """Write ``scalars`` (name -> number) as one event of step ``step``, now.

        Unlike ``add_value`` and ``record``, this leaves alone whatever is pending for
        the next ``record`` (values added with ``add_value``, the summary operators'):
        they are still written at the step that call names. For a program's own
        scalars written beside a training script's (the collector's timings,
        docs/file-format.md, "Scalars written apart"). Names and values are checked as
        ``add_value`` checks a scalar's. Returns False (and logs) when the record is
        closed, True otherwise (nothing is written for no scalars).
        """
        if type(step) is not int:
            step = integer_step(step)
        if not INT64_MIN <= step <= INT64_MAX:
            raise WriterValueError(
                f"For 'SummaryRecord.write_scalars', the argument 'step' must fit in an int64 "
                f"[-2**63, 2**63 - 1], but got {step}."
            )
        checked = {check_name(name): scalar(name, value) for name, value in scalars.items()}
        if self._closed:
            logger.error("The record writer is closed; step %d was not recorded.", step)
            return False
        if not checked:
            return True
        if self._scalars_alone:
            self._add_scalar_step(step, checked)
        else:  # a TensorBoard file too, or a graph still to write at the next record
            self._queue_scalar_step(step, checked)
        return True

    def write_scalar_columns(
        self, columns: Mapping[str, tuple[Sequence[int], Sequence[float]]]
    ) -> bool:
        """Write scalars given by tag, as columns: ``{name: (steps, values)}``.

        What :meth:`write_scalars` of each step would write: one event per step,
        holding every name with a point at that step, steps in ascending order (a
        name twice at one step: its later value). The caller's thread only checks
        the names and turns each column into two arrays; the events are made on the
        writer thread, so handing over many steps of a few names costs the caller
        about what one ``write_scalars`` call does (the collector's kept timings).
        Everything is checked before anything is written: a bad name, a step that is
        not an int64 integer, a value that is not a real number, or columns of
        unequal lengths raise, and none of ``columns`` is recorded. Returns False
        (and logs) when the record is closed, True otherwise.
        """
        checked = [
            scalar_column(check_name(name), steps, values)
            for name, (steps, values) in columns.items()
        ]
        if self._closed:
            logger.error(
                "The record writer is closed; the scalars of %d names were not recorded.",
                len(checked),
            )
            return False
        checked = [column for column in checked if len(column[1])]
        if not checked:
            return True
        if self._scalars_alone:  # they join the open batch of scalar-only steps
            self._scalar_batches.add_columns(checked)
        else:  # a TensorBoard file too: each step as write_scalars queues it
            for step, scalars in scalar_steps(checked):
                self._queue_scalar_step(step, scalars)
        return True

    def _queue_scalar_step(self, step: int, scalars: Mapping[str, float]) -> None:
        """Queue checked scalars as one step of their own, for every file of the record."""
        values = [
            Snapshot("scalar", name, value, len(name) + 16, 64) for name, value in scalars.items()
        ]
        self._queue_step(step, values, [], None)

    def _queue_step(
        self, step: int, values: list[Snapshot], lineage: list[Snapshot], graph: bytes | None
    ) -> None:
        job = StepJob(
            step,
            time.time(),
            values,
            lineage,
            graph,
            tensorboard=self._board_file is not None,
            export_tensors=self._export_tensors,
        )
        memory = sum(snap.memory for snap in values) + sum(snap.memory for snap in lineage)
        heavy = any(is_heavy(snap) for snap in values)
        # A small step joins the open batch of scalar steps (encoded in its turn, and the
        # writer not woken for it); a heavy one goes to the encoder pool after the batch.
        if not heavy and self._scalar_batches.join_step(job, -(-memory // SCALAR_POINT_BYTES)):
            return
        self._scalar_batches.seal()
        self._pipeline.put(partial(encode_step, job), memory, heavy=heavy)

    def flush(self, timeout: float | None = None) -> bool:
        """Write and sync to disk every step recorded so far; True only if all of it is there.

        Returns:
            True when everything recorded so far is on disk (written and fsynced).
            False when ``timeout`` seconds passed first (the data is still being
            written), when a write failed since the previous ``flush`` (a full
            disk, a failed fsync or export), while records wait in memory after a
            failed write (a later ``flush`` returns True once they are written), or
            once a record was given up (then always). A record too large for
            ``max_file_size`` is refused by rule and logged: it does not count.

        Each such False is logged as a ``WARNING`` saying what is not on disk; the
        failed write itself is logged once per kind, as an ``ERROR`` (or raised
        with ``raise_exception=True``, as ``WriterOSError``, an ``OSError``).
        ``docs/file-format.md`` (Durability) has the details.

        Raises:
            WriterTypeError: ``timeout`` is not None or a non-negative number.
        """
        timeout = check_timeout(timeout)
        if self._closed:
            return True
        self._scalar_batches.seal()  # the writer takes the open batch now, not later
        if not self._pipeline.flush(sync=True, timeout=timeout):
            return False
        return self._write_errors.flush_succeeded(self._writer.disk_state)

    def close(self) -> None:
        """Write everything recorded, close the files (now read-only). Idempotent."""
        if self._closed:
            return
        self._closed = True
        _lifetime.untrack(self)
        self._scalar_batches.seal()
        try:
            self._pipeline.close()
        finally:
            self._writer.close()
        # With raise_exception, what failed while closing the files is raised here.
        self._pipeline.raise_pending()

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

    def _report_write_error(self, error: BaseException) -> None:
        self._pipeline.report(error)  # from the writer thread: raised on the next call

    def _abandon_in_child(self) -> None:
        self._closed = True

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise WriterStateError(f"SummaryRecord.{operation}: the record is closed.")

    def _take_pending(
        self, plugin_filter: Callable[[str], bool] | None, train_network: Any
    ) -> tuple[list[Snapshot], list[Snapshot], bytes | None]:
        if self._mode == "train" and operators.has_buffered():
            # Summary operators' values join the step; add_value of the same tag wins.
            for snap in operators.take_buffered():
                if snap.plugin != "scalar" or isinstance(snap.data, DeferredValue):
                    # (a scalar on its way from a device: as add_value keeps one)
                    self._pending.setdefault(snap.plugin, {}).setdefault(snap.tag, snap)
                elif snap.tag not in self._scalars:
                    if not self._scalars:
                        self._scalar_group = len(self._pending)
                    self._scalars[snap.tag] = snap.data
        # Everything that can raise (the network's graph_proto(), the caller's filter)
        # runs before the step's values are taken: when it raises they stay for a retry.
        graph = self._step_graph(train_network)
        keep = self._filtered_plugins(plugin_filter)
        pending, self._pending = self._pending, {}
        lineage, self._pending_lineage = self._pending_lineage, []
        scalars, self._scalars = self._scalars, {}
        if scalars:
            group = {
                name: Snapshot("scalar", name, value, len(name) + 16, 64)
                for name, value in scalars.items()
            }
            if "scalar" in pending:  # deferred scalars came first: one group with them
                pending["scalar"].update(group)
            else:
                ordered = list(pending.items())
                ordered.insert(self._scalar_group, ("scalar", group))
                pending = dict(ordered)
        pending.pop("graph", None)
        if graph is not None:
            self._graph_written = True
            self._scalars_alone = self._board_file is None
        if plugin_filter is not None:
            pending = {name: tags for name, tags in pending.items() if keep[name]}
            lineage = [snap for snap in lineage if keep[snap.plugin]]
        values = [snap for tags in pending.values() for snap in tags.values()]
        return values, lineage, graph

    def _step_graph(self, train_network: Any) -> bytes | None:
        graphs = self._pending.get("graph", {})
        if graphs:
            data: bytes = next(reversed(graphs.values())).data
            return data
        if not self._graph_written:
            produced = self._graph.produce(train_network)
            if produced is not None:
                return graph_bytes(produced)
        return None

    def _filtered_plugins(self, plugin_filter: Callable[[str], bool] | None) -> dict[str, bool]:
        """Whether ``plugin_filter`` keeps each plugin of the pending values."""
        if plugin_filter is None:
            return {}
        plugins = [*self._pending, *(snap.plugin for snap in self._pending_lineage)]
        if self._scalars:
            plugins.append("scalar")
        return {plugin: bool(plugin_filter(plugin)) for plugin in dict.fromkeys(plugins)}


def _plain_scalars(values: list[Snapshot]) -> dict[str, float] | None:
    """``name -> number`` when every value is a scalar already read (None otherwise)."""
    found: dict[str, float] = {}
    for snap in values:
        if snap.plugin != "scalar" or type(snap.data) is not float:
            return None
        found[snap.tag] = snap.data
    return found
