"""The checkpoint files of a prefix: listing, retention, renaming, stale temporaries.

:class:`CheckpointManager` is MindSpore's class of the same name (the file list a
``ModelCheckpoint`` keeps, usable on its own); :func:`unique_prefix` is the
original's rule for a prefix a directory already holds; :func:`remove_stale_temporaries`
clears what a killed save left behind.
"""

from __future__ import annotations

import logging
import os
import re

from rankscribe.collector._checks import CHECKPOINT_CHECKS
from rankscribe.collector.checkpoint._format import CHECKPOINT_SUFFIX
from rankscribe.collector.errors import CheckpointTypeError

__all__ = ["CheckpointManager", "remove_stale_temporaries", "unique_prefix"]

logger = logging.getLogger(__name__)


class CheckpointManager:
    """Checkpoint files of one prefix and which to delete (MindSpore's ``CheckpointManager``).

    ``ModelCheckpoint`` keeps one (its ``manager``) for the files it wrote and
    applies its retention rule after each save. The original's members work on
    their own too: ``CheckpointManager()`` starts empty;
    :meth:`update_ckpoint_filelist` lists a directory's files of a prefix;
    :meth:`remove_ckpoint_file`, :meth:`remove_oldest_ckpoint_file` and
    :meth:`keep_one_ckpoint_per_minutes` delete from that list. Files are
    listed oldest first: in save order, or by modification time after
    :meth:`update_ckpoint_filelist`. A file deleted by someone else is simply
    forgotten.

    Args:
        keep_checkpoint_max, keep_checkpoint_per_n_minutes: the retention rule
            :class:`ModelCheckpoint` applies (see :class:`CheckpointConfig`);
            None or 0 keeps every file.
    """

    def __init__(
        self,
        keep_checkpoint_max: int | None = None,
        keep_checkpoint_per_n_minutes: int | None = None,
    ) -> None:
        self._keep_max = _count("keep_checkpoint_max", keep_checkpoint_max)
        self._window = _count("keep_checkpoint_per_n_minutes", keep_checkpoint_per_n_minutes) * 60.0
        self._files: list[tuple[str, float]] = []  # (path, saved at), oldest first
        self._last_saved_at: float | None = None

    @property
    def ckpoint_filelist(self) -> list[str]:
        """The files kept, oldest first (the original's property name)."""
        return [path for path, _ in self._files]

    @property
    def ckpoint_num(self) -> int:
        """How many files are in :attr:`ckpoint_filelist`."""
        return len(self._files)

    def update_ckpoint_filelist(self, directory: str | os.PathLike[str], prefix: str) -> None:
        """List ``directory``'s checkpoints of ``prefix`` by the original's rule.

        MindSpore's rule (its ``CheckpointManager`` through version 1.1, whose unit
        test this one follows): a name that starts with ``prefix``, ends with
        ``.ckpt`` and holds no letter in between. So for ``CKP`` it lists
        ``CKP-1_1.ckpt``, the renamed runs' ``CKP_1-1_1.ckpt`` and ``CKP1_1.ckpt``,
        but not ``CKP-graph.meta``, ``CKPa-1_1.ckpt`` nor ``CKP-a_1.ckpt``.
        Links are not listed.
        """
        if not isinstance(directory, (str, os.PathLike)):
            raise CheckpointTypeError(
                f"directory must be a str or os.PathLike, got {type(directory).__name__}"
            )
        if not isinstance(prefix, str) or not prefix:
            raise CheckpointTypeError(f"prefix must be a non-empty str, got {prefix!r}")
        found: list[tuple[str, float]] = []
        for entry in os.scandir(directory):
            middle = entry.name[len(prefix) : -len(CHECKPOINT_SUFFIX)]
            if (
                entry.name.startswith(prefix)
                and entry.name.endswith(CHECKPOINT_SUFFIX)
                and not any(character.isalpha() for character in middle)
                and entry.is_file(follow_symlinks=False)
            ):
                found.append((entry.path, entry.stat(follow_symlinks=False).st_mtime))
        self._files = sorted(found, key=lambda item: (item[1], item[0]))

    def remove_ckpoint_file(self, file_name: str | os.PathLike[str]) -> None:
        """Delete ``file_name`` and drop it from the list; a failure is logged, as the original."""
        path = os.fspath(file_name)
        _delete(path)
        self._files = [entry for entry in self._files if entry[0] != path]

    def remove_oldest_ckpoint_file(self) -> None:
        """Delete the first (oldest) file of the list; nothing when the list is empty."""
        if self._files:
            self.remove_ckpoint_file(self._files[0][0])

    def keep_one_ckpoint_per_minutes(self, minutes: float, cur_time: float) -> None:
        """Of the files modified less than ``minutes`` before ``cur_time``, keep the oldest only.

        ``cur_time`` is a ``time.time()`` value, compared with the files'
        modification times, as in the original.
        """
        _check_number("minutes", minutes)
        _check_number("cur_time", cur_time)
        recent: list[tuple[float, str]] = []
        for path, _ in self._files:
            try:
                modified = os.stat(path, follow_symlinks=False).st_mtime
            except FileNotFoundError:
                continue
            if cur_time - modified < 60.0 * minutes:
                recent.append((modified, path))
        for _, path in sorted(recent)[1:]:
            self.remove_ckpoint_file(path)

    def record(self, path: str, saved_at: float) -> list[str]:
        """Add a file just written at ``saved_at``; delete and return what the rule drops."""
        self._files = [
            (known, when) for known, when in self._files if known != path and os.path.exists(known)
        ]
        doomed = self._to_delete(saved_at)
        self._files = [entry for entry in self._files if entry[0] not in doomed]
        self._files.append((path, saved_at))
        self._last_saved_at = saved_at
        for old in doomed:
            _delete(old)
        return doomed

    def _to_delete(self, now: float) -> list[str]:
        if self._keep_max:
            excess = len(self._files) + 1 - self._keep_max
            return [path for path, _ in self._files[: max(excess, 0)]]
        last = self._last_saved_at
        if self._window and last is not None and now - last < self._window:
            recent = [path for path, when in self._files if now - when < self._window]
            return recent[1:]
        return []


def unique_prefix(directory: str | os.PathLike[str], prefix: str) -> str:
    """``prefix``, or ``prefix_<n>`` when ``directory`` already holds its checkpoints.

    The original's rule: a file ``<prefix>-*.ckpt`` asks for at least
    ``prefix_1``, a file ``<prefix>_<k>-*.ckpt`` for ``prefix_<k + 1>``.
    """
    pattern = re.compile(rf"{re.escape(prefix)}(?:_(\d+))?-.*_.*{re.escape(CHECKPOINT_SUFFIX)}")
    suffix = 0
    for name in os.listdir(directory):
        match = pattern.fullmatch(name)
        if match:
            suffix = max(suffix, int(match.group(1)) + 1 if match.group(1) else 1)
    return f"{prefix}_{suffix}" if suffix else prefix


def remove_stale_temporaries(directory: str | os.PathLike[str], prefix: str) -> list[str]:
    """Delete the temporaries killed saves of ``prefix`` (or ``prefix_<n>``) left behind.

    Only regular files named as ``atomic_write`` names a checkpoint's
    temporary are removed; a link is never followed nor removed. Returns the
    paths removed.
    """
    pattern = re.compile(
        rf"\.{re.escape(prefix)}(?:_\d+)?-\d+_\d+{re.escape(CHECKPOINT_SUFFIX)}\.[0-9a-f]+\.tmp"
    )
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError as error:
        logger.warning("cannot list %s for stale checkpoint temporaries: %s", directory, error)
        return removed
    for entry in entries:
        try:
            if not (pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False)):
                continue
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        except OSError as error:
            logger.warning("cannot remove stale checkpoint temporary %s: %s", entry.path, error)
            continue
        logger.info("removed %s, left by a checkpoint save that did not finish", entry.path)
        removed.append(entry.path)
    return removed


def _count(name: str, value: object) -> int:
    return CHECKPOINT_CHECKS.check_optional_int(name, value, minimum=0) or 0


def _check_number(name: str, value: object) -> None:
    CHECKPOINT_CHECKS.check_number(name, value)


def _delete(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as error:
        logger.warning("cannot delete old checkpoint %s: %s", path, error)
