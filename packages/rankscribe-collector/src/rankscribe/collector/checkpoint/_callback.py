"""``ModelCheckpoint``: the callback that saves the network's parameters during training.

MindSpore's ``ModelCheckpoint`` / ``CheckpointManager`` semantics:

- from the first step of training, ``<prefix>-graph.meta`` holds the train
  network's graph (a serialized ``GraphProto``) when the network can describe
  one — once per run, as the original writes it once per callback;
- files are named ``<prefix>-<epoch>_<step>.ckpt``, ``<step>`` counting within
  the epoch; when the directory already holds checkpoints of ``prefix`` (or of
  ``prefix_<n>``), the prefix becomes ``prefix_<max n + 1>`` so no earlier run
  is overwritten;
- a save is due every ``save_checkpoint_steps`` steps, or when more than
  ``save_checkpoint_seconds`` have passed since the last one; ``end`` saves the
  final step unless that step was just saved;
- after each save at most ``keep_checkpoint_max`` files are kept (oldest
  deleted first), or, by ``keep_checkpoint_per_n_minutes``, of the files saved
  in the last N minutes only the oldest is kept when the previous save was less
  than N minutes ago — which leaves about one file per N minutes plus the newest.

Where this differs from the original, on purpose:

- old files are deleted *after* the new one is safely on disk, so a failed
  write never leaves fewer checkpoints than before; and only files this
  callback wrote are ever deleted;
- every file is written atomically (see ``rankscribe.ranks.files.atomic_write``);
- with ``async_save`` at most one write is in flight: a save that comes due
  while the previous one is still writing waits for it (bounded memory), and a
  failed background write raises :class:`CheckpointWriteError` on the next
  ``step_end`` it is called at (the next save's step, where a loop leaves it the steps
  it has nothing to do at, below), ``end`` or ``with``-exit instead of being lost in a
  thread;
- it tells its loop at which steps it has nothing to do (a
  :class:`~rankscribe.collector._callback.QuietUntil`: below the next save's step, or
  before the next save's time with the default clock), so a ``TrainLoop`` or
  ``TrainSession`` may leave it uncalled there (docs/collector-cost.md, "Quiet steps");
- ``latest_ckpt_file_name`` is the newest *complete* file (absolute path), or
  ``None`` before the first one;
- a save killed part-way leaves its hidden temporary file
  (``.<prefix>-<epoch>_<step>.ckpt.<random>.tmp``, see ``atomic_write``); the
  first save of each run removes those of its prefix and of the ``prefix_<n>``
  runs its renaming rule counts as earlier runs of the same prefix — regular
  files only, never a link or a directory, never another prefix's;
- steps of an evaluation run (``mode == "eval"``) save nothing.

Several ranks: pass each rank its own directory (the SummaryCollector and the
example scripts pass ``rankscribe.ranks.rank_dir(...)``). When ``directory`` is
not already ``rank_<r>`` and the job has more than one rank (as
``rankscribe.ranks.detect()`` sees it), ``rank_<r>`` is appended, so ranks never
write over each other's files.

A ``directory`` inside a SummaryCollector's ``summary_dir`` (or equal to it)
follows the job's claim: when the job writes into ``<summary_dir>-2`` because
``summary_dir`` holds another job, the checkpoints go to the same place in
``<summary_dir>-2``. The callback may be made before the collector claims, so
where it writes is settled at the first step of each run; directories it made
in the other job's directory and left empty are removed (``docs/layout.md``,
"Checkpoints inside the job directory").
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from rankscribe.collector import _clock
from rankscribe.collector._callback import (
    Callback,
    CallbackParams,
    QuietUntil,
    RunContext,
    own_step_hooks,
)
from rankscribe.collector._checks import CHECKPOINT_CHECKS
from rankscribe.collector.adapters import AdapterRegistry
from rankscribe.collector.checkpoint._config import CheckpointConfig
from rankscribe.collector.checkpoint._format import (
    CHECKPOINT_SUFFIX,
    AppendValue,
    checkpoint_parameters,
    prepare_append_info,
    prepare_tensors,
    write_checkpoint_file,
)
from rankscribe.collector.checkpoint._manager import (
    CheckpointManager,
    remove_stale_temporaries,
    unique_prefix,
)
from rankscribe.collector.errors import (
    CheckpointError,
    CheckpointTimeoutError,
    CheckpointTypeError,
    CheckpointValueError,
    CheckpointWriteError,
)
from rankscribe.ranks import detect, rank_dir
from rankscribe.ranks.files import atomic_write, file_mode, make_private_dir, rank_dir_name

__all__ = ["GRAPH_META_SUFFIX", "CheckpointManager", "ModelCheckpoint"]

logger = logging.getLogger(__name__)

#: ``<prefix>`` + this names the graph file written beside the checkpoints.
GRAPH_META_SUFFIX = "-graph.meta"
#: How long ``end`` and leaving the ``with`` block wait for a background save.
DEFAULT_SAVE_TIMEOUT = 600.0


class ModelCheckpoint(Callback):
    """Save the network's parameters at the configured steps (MindSpore's ``ModelCheckpoint``).

    Args:
        prefix: file name prefix, a non-empty str without a path separator.
        directory: where to write; default the current directory. Missing
            directories are created 0700 (0750 with ``RANKSCRIBE_GROUP_READABLE=1``),
            parents included; files are 0400 (0440). See the module docstring for
            several ranks.
        config: a :class:`CheckpointConfig`; default ``CheckpointConfig()``.
        clock: seconds as a float, for ``save_checkpoint_seconds`` and
            ``keep_checkpoint_per_n_minutes`` (tests pass a fake one).
        save_timeout: seconds to wait for a background save before raising
            :class:`CheckpointTimeoutError`.

    The network saved is ``config.saved_network``, else the run's
    ``train_network``, else its ``network``: a PyTorch module's ``state_dict()``
    (parameters and buffers, without a data-parallel wrapper's ``module.``
    prefix), any other network's parameters as ``network_parameters`` reads them.
    """

    def __init__(
        self,
        prefix: str = "CKP",
        directory: str | os.PathLike[str] | None = None,
        config: CheckpointConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        save_timeout: float = DEFAULT_SAVE_TIMEOUT,
    ) -> None:
        _check_prefix(prefix)
        if config is None:
            config = CheckpointConfig()
        elif not isinstance(config, CheckpointConfig):
            raise CheckpointTypeError(
                "For 'ModelCheckpoint', the type of argument 'config' should be "
                f"'CheckpointConfig' or None, but got {type(config).__name__}."
            )
        if not callable(clock):
            raise CheckpointTypeError(f"clock must be callable, got {type(clock).__name__}")
        self._save_timeout = _check_timeout(save_timeout)
        self._config = config
        self._clock = clock
        self._base = _checkpoint_base(directory)  # before this rank's rank_<r>
        self._directory, self._made = _rank_directory(self._base)
        self._placed = False  # the job's claim is followed (at the first step of a run)
        self._requested_prefix = prefix
        self._prefix = unique_prefix(self._directory, prefix)
        self._manager = CheckpointManager(
            config.keep_checkpoint_max, config.keep_checkpoint_per_n_minutes
        )
        self._adapters = AdapterRegistry()
        self._trained = False  # a training run has used this callback already
        self._saver = _BackgroundSaver()
        self._last_triggered_step = 0
        self._last_save_time = clock()
        self._latest: str | None = None
        self._swept = False  # this run's stale temporaries are removed
        self._graph_saved = False  # this run's <prefix>-graph.meta is written
        #: The steps this callback has nothing to do at, for the loop (docs/collector-cost.md,
        #: "Quiet steps"); every step until the first of a training run has been called.
        self._quiet_steps = QuietUntil()
        self._offers = False  # whether it says so in this run (its own step hooks: begin)
        if not (config.save_checkpoint_steps or config.save_checkpoint_seconds):
            logger.warning(
                "CheckpointConfig has neither save_checkpoint_steps nor save_checkpoint_seconds: "
                "ModelCheckpoint saves the final step only, at the end of training (MindSpore's "
                "saved nothing)"
            )

    @property
    def latest_ckpt_file_name(self) -> str | None:
        """Absolute path of the newest complete checkpoint, or None before the first."""
        return self._latest

    @property
    def prefix(self) -> str:
        """The prefix files are named with (``prefix_<n>`` after renaming)."""
        return self._prefix

    @property
    def directory(self) -> str:
        """The absolute directory files are written into (moved by a job's claim, see above)."""
        return str(self._directory)

    @property
    def config(self) -> CheckpointConfig:
        return self._config

    @property
    def manager(self) -> CheckpointManager:
        return self._manager

    def begin(self, run_context: RunContext) -> None:
        if run_context.original_args().mode == "eval":
            return
        if self._trained:
            self._start_another_run()
        self._trained = True
        self._placed = False
        # The seconds trigger counts from the start of training, not from
        # construction (nor from an evaluation run in between).
        self._last_save_time = self._clock()
        self._quiet_steps.stop()  # the first step places the files and saves the graph
        # A subclass's own step hooks (or hooks set on this callback): every step called.
        self._offers = own_step_hooks(self, ModelCheckpoint)

    def _start_another_run(self) -> None:
        """The same callback trains again: its step count starts over.

        The original kept the last run's step, so a second run saved nothing
        and the lineage named the first run's weights. Here the new run takes
        a fresh prefix (as a new callback would: the first run's files stay)
        and retention counts the new run's files only.
        """
        self._saver.wait(self._save_timeout)
        self._prefix = unique_prefix(self._directory, self._requested_prefix)
        self._manager = CheckpointManager(
            self._config.keep_checkpoint_max, self._config.keep_checkpoint_per_n_minutes
        )
        self._last_triggered_step = 0
        self._latest = None
        self._swept = False
        self._graph_saved = False

    def _follow_the_jobs_claim(self) -> None:
        """Move into ``<summary_dir>-N`` when this directory lies in a job's ``summary_dir``
        that the job (a SummaryCollector of this process) left for ``<summary_dir>-N``."""
        self._placed = True
        # Imported here: the collector's run module is the one that records claims.
        from rankscribe.collector.run._run import moved_by_claim  # noqa: PLC0415

        moved = moved_by_claim(self._base)
        if moved is None or moved == self._base:
            return
        self._saver.wait(self._save_timeout)
        left, made = self._directory, self._made
        self._base = moved
        self._directory, self._made = _rank_directory(moved)
        self._prefix = unique_prefix(self._directory, self._requested_prefix)
        _remove_empty(left, made)
        logger.info(
            "ModelCheckpoint writes into %s: its job writes into %s instead of the directory "
            "it was given",
            self._directory,
            moved,
        )

    def step_end(self, run_context: RunContext) -> None:
        self._saver.raise_failure()
        params = run_context.original_args()
        if params.mode != "eval":
            if not self._placed:
                self._follow_the_jobs_claim()
            if not self._graph_saved:
                self._save_graph(params)
            self._save_if_due(params, force=False)
            self._offer_quiet_steps()

    def _offer_quiet_steps(self) -> None:
        """Tell the loop the steps this callback has nothing to do at: those before the
        next save's step, or, by seconds, those that end before the next save's time (on
        the default clock only: a clock of the caller's is not the loop's)."""
        quiet = self._quiet_steps
        if not self._offers:
            quiet.stop()
            return
        steps = self._config.save_checkpoint_steps
        seconds = self._config.save_checkpoint_seconds
        if steps:
            quiet.until, quiet.due = self._last_triggered_step + steps, math.inf
        elif not seconds:
            quiet.forever()  # the final step only, at the end
        elif self._clock is time.monotonic:
            quiet.until = sys.maxsize
            quiet.due = _clock.now() + (self._last_save_time + seconds - self._clock())
        else:
            quiet.stop()

    def _save_graph(self, params: CallbackParams) -> None:
        """Write ``<prefix>-graph.meta``, the train network's graph proto, once per run.

        As the original, from the first step of training, when the network can
        describe its graph; a network without one writes nothing.
        """
        self._graph_saved = True
        network = params.train_network if params.train_network is not None else params.network
        view = self._adapters.network_view(network) if network is not None else None
        try:
            graph = view.graph() if view is not None else None
        except (TypeError, ValueError) as error:
            logger.warning(
                "the graph of %s cannot be built, so no %s-graph.meta is written: %s",
                type(network).__name__,
                self._prefix,
                error,
            )
            return
        if graph is None:
            return
        path = self._directory / f"{self._prefix}{GRAPH_META_SUFFIX}"
        try:
            atomic_write(path, [graph.SerializeToString()], mode=file_mode(final=True))
        except OSError as error:
            raise CheckpointWriteError(f"cannot write graph {str(path)!r}: {error}") from error

    def end(self, run_context: RunContext) -> None:
        params = run_context.original_args()
        if params.mode != "eval":
            if not self._placed:
                self._follow_the_jobs_claim()
            self._save_if_due(params, force=True)
        self._saver.wait(self._save_timeout)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._saver.wait(self._save_timeout)
        except CheckpointError:
            if exc is None:
                raise
            # Training already failed: report that error, and log this one.
            logger.exception("checkpoint save failed while training was failing")

    def _save_if_due(self, params: CallbackParams, force: bool) -> None:
        step = params.cur_step_num
        if not isinstance(step, int) or step <= 0 or step == self._last_triggered_step:
            return
        if not self._is_due(step, force):
            return
        network = self._network(params)
        # One write in flight at most: the previous must finish (and its error
        # surface) before the next snapshot is taken.
        self._saver.wait(self._save_timeout)
        if not self._swept:
            # Nothing of this callback is in flight now: every temporary of the
            # prefix is a killed save's.
            remove_stale_temporaries(self._directory, self._requested_prefix)
            self._swept = True
        path = self._directory / self._file_name(params)
        in_background = self._config.async_save
        tensors = prepare_tensors(checkpoint_parameters(network), copy=in_background)
        append_info = prepare_append_info(self._append_values(params), copy=in_background)
        self._last_triggered_step = step
        saved_at = self._clock()

        def write() -> None:
            write_checkpoint_file(
                path, tensors, append_info, self._config.enc_key, self._config.enc_mode
            )
            self._manager.record(str(path), saved_at)
            self._latest = str(path)

        if in_background:
            self._saver.start(path, write)
        else:
            try:
                write()
            except OSError as error:
                raise CheckpointWriteError(
                    f"cannot write checkpoint {str(path)!r}: {error}"
                ) from error

    def _is_due(self, step: int, force: bool) -> bool:
        steps = self._config.save_checkpoint_steps
        if steps:
            return force or step >= self._last_triggered_step + steps
        seconds = self._config.save_checkpoint_seconds
        if not seconds:
            return force  # no trigger during training: the final step only
        now = self._clock()
        if force or now - self._last_save_time > seconds:
            self._last_save_time = now
            return True
        return False

    def _network(self, params: CallbackParams) -> Any:
        for network in (self._config.saved_network, params.train_network, params.network):
            if network is not None:
                return network
        raise CheckpointValueError(
            "ModelCheckpoint has no network to save: set CheckpointConfig(saved_network=...) "
            "or train_network / network in the run's CallbackParams"
        )

    def _file_name(self, params: CallbackParams) -> str:
        step = params.cur_step_num
        per_epoch = params.batch_num
        if isinstance(per_epoch, int) and per_epoch > 0:
            step = (step - 1) % per_epoch + 1
        return f"{self._prefix}-{params.cur_epoch_num}_{step}{CHECKPOINT_SUFFIX}"

    def _append_values(self, params: CallbackParams) -> dict[str, AppendValue]:
        values: dict[str, Any] = self._config.append_dict or {}
        # In the original the config's epoch_num / step_num are offsets (0 for
        # the bare keywords) added to the run's counters.
        if "epoch_num" in values:
            values["epoch_num"] = values["epoch_num"] + params.cur_epoch_num
        if "step_num" in values:
            values["step_num"] = values["step_num"] + params.cur_step_num
        return values


class _BackgroundSaver:
    """At most one checkpoint write running in a thread; its failure kept for the caller.

    The thread is not a daemon: a checkpoint being written when the script
    returns is finished rather than abandoned.
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._path: Path | None = None
        self._failure: BaseException | None = None

    def start(self, path: Path, write: Callable[[], None]) -> None:
        self._path = path
        self._thread = threading.Thread(
            target=self._run, args=(path, write), name="rankscribe-checkpoint-save"
        )
        self._thread.start()

    def wait(self, timeout: float) -> None:
        """Wait for the write in flight; raise its failure, or a timeout."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise CheckpointTimeoutError(
                    f"the background save of {str(self._path)!r} did not finish within "
                    f"{timeout:g} s; it is still running"
                )
            self._thread = None
        self.raise_failure()

    def raise_failure(self) -> None:
        """Raise the failure of a finished background write, once."""
        failure, self._failure = self._failure, None
        if failure is not None:
            raise CheckpointWriteError(
                f"the background save of {str(self._path)!r} failed: {failure}"
            ) from failure

    def _run(self, path: Path, write: Callable[[], None]) -> None:
        try:
            write()
        except BaseException as error:
            # Logged now (the training thread may never call back) and kept so
            # that the next call on the training thread raises it.
            logger.error("background save of checkpoint %s failed: %s", path, error)
            self._failure = error


def _check_prefix(prefix: object) -> None:
    # The original raises ValueError for any bad prefix, including a non-str, in these
    # words. It accepts '', which is refused here: its files would be named
    # '-1_1.ckpt', which shell tools read as an option (docs/mindinsight-differences.md).
    if (
        not isinstance(prefix, str)
        or not prefix
        or "/" in prefix
        or (os.altsep is not None and os.altsep in prefix)
        or os.sep in prefix
        or "\0" in prefix
    ):
        raise CheckpointValueError(
            "For 'ModelCheckpoint', the argument 'prefix' for checkpoint file name is "
            "invalid, it must be a non-empty string and does not contain '/', but got "
            f"{prefix!r}."
        )


def _check_timeout(timeout: object) -> float:
    # Thread.join cannot wait an infinite time (OverflowError): finite too.
    return CHECKPOINT_CHECKS.check_number(
        "save_timeout",
        timeout,
        positive=True,
        finite=True,
        unit="seconds",
    )


def _checkpoint_base(directory: str | os.PathLike[str] | None) -> Path:
    """The absolute directory asked for, without this rank's ``rank_<r>``."""
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise CheckpointTypeError(
            f"directory must be a str, os.PathLike or None, got {type(directory).__name__}"
        )
    if directory is not None and "\0" in os.fsdecode(directory):
        # No file system accepts it; os would only say "embedded null byte".
        raise CheckpointValueError(
            f"directory must be a path without NUL characters ('\\0'), got {directory!r}"
        )
    base = Path(os.path.abspath(os.getcwd() if directory is None else directory))
    info = detect()
    if not info.is_single and base.name == rank_dir_name(info.rank):
        base = base.parent  # already this rank's directory: rank_dir gives it back
    return base


def _rank_directory(base: Path) -> tuple[Path, Path | None]:
    """This rank's directory under ``base``, created; and the first directory made for it
    (None when every one existed)."""
    info = detect()
    leaf = base if info.is_single else base / rank_dir_name(info.rank)
    made = leaf if not os.path.lexists(leaf) else None
    while made is not None and not os.path.lexists(made.parent):
        made = made.parent
    try:
        # Every directory made on the way is private (or group-readable when
        # asked), not only the last; rank_dir then finds them all there.
        make_private_dir(leaf)
        return rank_dir(base, info), made
    except OSError as error:
        raise CheckpointWriteError(
            f"cannot create checkpoint directory {str(base)!r}: {error}"
        ) from error


def _remove_empty(directory: Path, made: Path | None) -> None:
    """Remove ``directory`` and its parents up to ``made``, the first one this callback made,
    while they are empty (``rmdir`` removes nothing else)."""
    if made is None or not (directory == made or made in directory.parents):
        return
    current = directory
    while True:
        try:
            os.rmdir(current)
        except OSError:
            return
        if current in (made, current.parent):
            return
        current = current.parent
