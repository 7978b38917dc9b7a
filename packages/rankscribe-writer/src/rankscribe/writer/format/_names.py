"""File names of summary, lineage and TensorBoard event files: building and parsing.

The viewer (MindInsight) finds summary files by the pattern ``summary\\.(\\d+)``
and orders them by that number, the creation time ``T``; lineage files are the
same names ending in ``_lineage`` instead of the summary suffix. Names must
never collide, so each (directory, T) pair is claimed once per process and a
claimed or already-present T is bumped to the next free second: the name keeps
the original's exact shape and the viewer's ordering stays the creation order.

Reading goes the other way: :func:`parse_file_name` splits a name into an
:class:`EventFileName`, :func:`file_kind` classifies a name the way MindInsight
and TensorBoard do and :func:`list_summary_files` lists a directory in reading
order. :mod:`rankscribe.writer.files` is the public face of this module.
"""

from __future__ import annotations

import enum
import itertools
import os
import platform
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rankscribe.ranks.files import event_file_kind
from rankscribe.writer._arguments import check_path
from rankscribe.writer.errors import WriterValueError

LINEAGE_SUFFIX = "_lineage"
#: What SummaryRecord's summary files end in by default, as MindSpore names them.
SUMMARY_SUFFIX = "_MS"
_LABEL = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
_AFFIX = re.compile(r"^\w+[0-9a-zA-Z_.]*$", re.ASCII)
# MindInsight's rule for a summary file's name (`summary.<digits>` anywhere in it; the
# ranks package's `event_file_kind` applies it): the digits are its creation time.
_MINDINSIGHT_SUMMARY = re.compile(r"summary\.(\d+)")
# TensorBoard's test (`IsTensorFlowEventsFile`): "tfevents" anywhere in the name.
_TENSORBOARD_EVENTS = re.compile(r"tfevents\.(\d+)")

_claim_lock = threading.Lock()
_claimed: dict[str, set[int]] = {}
_tensorboard_counter = itertools.count()


def host_name() -> str:
    """The host part of file names (the original uses ``platform.node()``)."""
    return platform.node() or "localhost"


def is_valid_affix(value: object) -> bool:
    """Whether ``value`` is a usable ``file_prefix``/``file_suffix``."""
    return isinstance(value, str) and bool(_AFFIX.match(value))


def summary_file_name(prefix: str, timestamp: int, rank: int | str, host: str, suffix: str) -> str:
    """``{prefix}.out.events.summary.{T}.{rank}.{host}{suffix}``, as MindSpore >= 1.2 names them."""
    return f"{prefix}.out.events.summary.{timestamp}.{rank}.{host}{suffix}"


def claim_timestamp(directory: str, not_before: int | None = None) -> int:
    """Return a creation time for new files in ``directory`` that no other file uses.

    Starts at the current second (or ``not_before``, when later) and moves
    forward past every second already claimed in this process or already used by
    a summary file in the directory.
    """
    key = os.path.realpath(directory)
    candidate = max(int(time.time()), not_before or 0)
    with _claim_lock:
        taken = _claimed.setdefault(key, set()) | _timestamps_on_disk(key)
        while candidate in taken:
            candidate += 1
        _claimed[key].add(candidate)
    return candidate


def _timestamps_on_disk(directory: str) -> set[int]:
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    found = set()
    for name in names:
        match = _MINDINSIGHT_SUMMARY.search(name)
        if match:
            found.add(int(match.group(1)))
    return found


def _new_lock_in_child() -> None:
    """A lock that a thread of the parent (a rotating writer) held at fork stays held."""
    global _claim_lock  # noqa: PLW0603
    _claim_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def tensorboard_file_name(timestamp: int, host: str, *, label: str | None = None) -> str:
    """``events.out.tfevents.{T}.{host}.{pid}.{n}``; TensorBoard reads any name with 'tfevents'.

    The pid and a process-wide counter keep two writers in one second apart.
    With ``label`` the name is ``events.out.tfevents.{T}.{host}.{label}`` instead:
    a fixed ending for a file that a later writer finds and replaces as a whole
    (the lineage package's job and HParams files). ``label`` is ASCII letters,
    digits, ``_``, ``-`` and ``.`` (no path separator).

    Raises:
        WriterValueError: ``label`` is not such a word.
    """
    if label is None:
        ending = f"{os.getpid()}.{next(_tensorboard_counter)}"
    elif isinstance(label, str) and _LABEL.fullmatch(label):
        ending = label
    else:
        raise WriterValueError(
            f"label must be a non-empty word of ASCII letters, digits, '_', '-' and '.', "
            f"but got {label!r}"
        )
    return f"events.out.tfevents.{timestamp}.{host}.{ending}"


# Not StrEnum: that would change what str() and format() of a member give
# (its value instead of "FileKind.SUMMARY"), and callers may print kinds.
class FileKind(str, enum.Enum):  # noqa: UP042
    """What a file holds, as told by its name."""

    SUMMARY = "summary"  # summary_pb2.Event records (MindSpore's `_MS` files)
    LINEAGE = "lineage"  # lineage_pb2.LineageEvent records (`_lineage` files)
    TENSORBOARD = "tensorboard"  # tensorboard_pb2.Event records (`events.out.tfevents.*`)


_MINDSPORE_NAME = re.compile(
    r"^(?P<prefix>.+?)\.out\.events\.summary\.(?P<timestamp>\d+)\."
    r"(?:(?P<rank>\d+)\.)?(?P<host_and_suffix>.*)$"
)
_TENSORBOARD_NAME = re.compile(
    r"^(?P<prefix>.*?)\.?out\.tfevents\.(?P<timestamp>\d+)\.?(?P<host>.*)$"
)
# Suffixes MindSpore itself writes, longest first: `_MS_lineage` is the 0.1-0.2
# lineage name (`<summary file>_lineage`), `_explain` the 1.x XAI file.
_KNOWN_SUFFIXES = ("_MS_lineage", "_lineage", "_explain", "_MS")


@dataclass(frozen=True)
class EventFileName:
    """The parts of an event file name.

    ``rank`` is ``None`` for names written by MindSpore <= 1.1, which had no
    device id, and for TensorBoard files. For TensorBoard files ``host`` is
    everything after the timestamp and ``suffix`` is empty, because TensorBoard
    writers append free-form text there.
    """

    name: str
    kind: FileKind
    prefix: str
    timestamp: int
    rank: int | None
    host: str
    suffix: str


def file_kind(path: str | os.PathLike[str]) -> FileKind | None:
    """Return what the file named ``path`` holds, or ``None`` if it is no event file.

    The rules are MindInsight's and TensorBoard's, so a file one of them would
    load is recognised even when its name does not follow the default pattern.
    MindSpore 1.x ``_explain`` files are not recognised: nothing here reads them.
    The rule itself is the job layout's (``rankscribe.ranks.files.event_file_kind``).
    """
    kind = event_file_kind(os.path.basename(os.fspath(path)))
    return None if kind is None else FileKind(kind)


def parse_file_name(path: str | os.PathLike[str]) -> EventFileName:
    """Split an event file name into prefix, timestamp, rank, host and suffix.

    Understands every form MindSpore wrote (docs/file-format.md, "File names")::

        events.out.events.summary.1795244534.0.vm_MS       (>= 1.2: with rank)
        events.out.events.summary.1795244534.vm_MS         (<= 1.1: no rank)
        events.out.events.summary.1795244534.vm_MS_lineage (0.1-0.2 lineage)

    and TensorBoard's ``events.out.tfevents.{T}.{host}...``. Only the directory
    part of ``path`` is ignored.

    The host and the suffix touch without a separator, so they are told apart
    by MindSpore's own suffixes (``_MS``, ``_lineage``, ``_MS_lineage``,
    ``_explain``) and otherwise at the last ``_`` (host names rarely hold one);
    a name with no ``_`` after the timestamp has an empty suffix. A host whose
    first label is all digits is read as a rank, as in the current form.

    Raises:
        WriterValueError: the name is not an event file name.
    """
    check_path("path", path, owner="parse_file_name")
    name = os.path.basename(os.fspath(path))
    kind = file_kind(name)
    match = _MINDSPORE_NAME.match(name) if kind in (FileKind.SUMMARY, FileKind.LINEAGE) else None
    if kind is not None and match is not None:
        host, suffix = _split_host_and_suffix(match["host_and_suffix"])
        rank = match["rank"]
        return EventFileName(
            name=name,
            kind=kind,
            prefix=match["prefix"],
            timestamp=int(match["timestamp"]),
            rank=None if rank is None else int(rank),
            host=host,
            suffix=suffix,
        )
    tensorboard = _TENSORBOARD_NAME.match(name) if kind is FileKind.TENSORBOARD else None
    if tensorboard is not None:
        return EventFileName(
            name=name,
            kind=FileKind.TENSORBOARD,
            prefix=tensorboard["prefix"].rstrip("."),
            timestamp=int(tensorboard["timestamp"]),
            rank=None,
            host=tensorboard["host"],
            suffix="",
        )
    raise WriterValueError(
        f"{name!r} is not an event file name: expected "
        "'{prefix}.out.events.summary.{timestamp}.{rank}.{host}{suffix}' "
        "or 'events.out.tfevents.{timestamp}.{host}'"
    )


def _split_host_and_suffix(text: str) -> tuple[str, str]:
    for suffix in _KNOWN_SUFFIXES:
        if text.endswith(suffix):
            return text[: -len(suffix)], suffix
    cut = text.rfind("_")
    if cut < 0:
        return text, ""
    return text[:cut], text[cut:]


def _sort_timestamp(name: str) -> int:
    match = _MINDINSIGHT_SUMMARY.search(name) or _TENSORBOARD_EVENTS.search(name)
    return int(match[1]) if match else 0


def coerce_kind(kind: FileKind | str | None) -> FileKind | None:
    if kind is None or isinstance(kind, FileKind):
        return kind
    try:
        return FileKind(kind)
    except ValueError:
        valid = ", ".join(repr(k.value) for k in FileKind)
        raise WriterValueError(f"kind must be one of {valid} or None, got {kind!r}") from None


def list_summary_files(
    directory: str | os.PathLike[str], kind: FileKind | str | None = None
) -> list[Path]:
    """Return the event files directly inside ``directory``, in reading order.

    Args:
        directory: the run directory; subdirectories are not searched (to
            MindInsight each one is a run of its own).
        kind: ``"summary"``, ``"lineage"``, ``"tensorboard"`` (or the
            :class:`FileKind`) to keep only that kind; ``None`` keeps all three.

    The order is MindInsight's: by the timestamp in the name (when the writer
    was created), then by name. Symbolic links are skipped, as MindInsight
    skips them, so a link cannot pull files from outside the directory into a
    run. Files :func:`file_kind` does not recognise are ignored.

    Raises:
        FileNotFoundError, NotADirectoryError: ``directory`` is not a directory.
        WriterValueError: ``kind`` is not one of the above.
    """
    check_path("directory", directory, owner="list_summary_files")
    wanted = coerce_kind(kind)
    found: list[Path] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                continue
            entry_kind = file_kind(entry.name)
            if entry_kind is None or (wanted is not None and entry_kind is not wanted):
                continue
            found.append(Path(entry.path))
    found.sort(key=lambda path: (_sort_timestamp(path.name), path.name))
    return found
