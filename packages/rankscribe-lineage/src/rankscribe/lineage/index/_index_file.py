"""The lineage index file of a base dir: its format, reading and checking it, writing it.

Format (``docs/lineage-queries.md``, "The index"): one document,
``.rankscribe-lineage-index.npz``, stored column by column (one list per
property, position ``i`` of every list describing run ``i``); its long
columns of one type are stored as ``.npy`` arrays beside the JSON document
in one ``.npz`` archive (:mod:`rankscribe.lineage.index._index_encoding`)::

    {"format": "rankscribe-lineage-index", "version": 6,
     "package": "<rankscribe-lineage version>", "parser": "<digest of the parser's code>",
     "path": ["./run1", ...], "dir_mtime": [...], "final": [...],
     "create_time": [...], "update_time": [...],
     "files": [[name, size, mtime_ns, inode, ctime_ns, ...], ...],
     "graph": [<graph id> or null, ...],            null: the run has no usable lineage
     "fields": {"loss": [value or null, ...], ...},   one dense column per field
     "metric": {"acc": [[run positions], [values]], ...},   sparse columns
     "user_defined": {...},  "warnings": {"<position>": [...]},
     "graphs": {"<graph id>": {...}},
     "containers": [["./name", ...], [mtime_ns, ...]]}   directories entered that are no run

Chosen by measurement (``docs/lineage-queries.md``). A warm query reads the
checked columns (:mod:`rankscribe.lineage.index._fresh_index`); per-run
entries are made only when some run changed.

- The archive's CRC-32s catch a changed byte: such a file is ignored with
  one warning and rebuilt, like one that is truncated or not an archive.
- The header's ``package`` and ``parser`` (a digest of the source of the
  modules that turn lineage files into the index's values) are the
  invalidation key: another version's index is ignored with a warning and
  rebuilt. ``INDEX_VERSION`` remains for the layout of the document itself.
- Each run's values are checked as they are read, column by column; a run
  whose values have the wrong types is dropped (and read again from its
  files by the scan) with one warning for the whole index.
- The file is written whole to a private temporary file and renamed over
  the index: a reader sees the old or the new index, never half of one, and
  takes no lock (network filesystems lock badly); the last rename wins.
- An index that another user owns or may write is not trusted; a base dir
  where the index cannot be written still answers queries.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import itertools
import logging
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from rankscribe.lineage.index import _index_encoding as encoding
from rankscribe.lineage.record._fields import FIELD_MAPPING, field_kind
from rankscribe.ranks.files import file_mode, foreign_owner, fsync_directory, open_regular

logger = logging.getLogger(__name__)

__all__ = [
    "INDEX_NAME",
    "IndexEntry",
    "LoadedIndex",
    "Signature",
    "index_header",
    "index_signature",
    "load_index",
    "write_index",
]

INDEX_NAME = ".rankscribe-lineage-index.npz"
INDEX_FORMAT = "rankscribe-lineage-index"
INDEX_VERSION = 6
# The modules whose code decides what the index stores for a run, and how.
_PARSER_MODULES = (
    __name__,
    "rankscribe.lineage.index._index_encoding",
    "rankscribe.jobview._npz",
    "rankscribe.lineage.record._discovery",
    "rankscribe.lineage.record._parser",
    "rankscribe.lineage.record._model",
    "rankscribe.lineage.record._dataset_graph",
    "rankscribe.lineage.record._floats",
    "rankscribe.lineage.index._run_summary",
)
# The searchable fields an index entry keeps (summary_dir and dataset_mark are per query).
ROW_FIELDS = tuple(name for name in FIELD_MAPPING if name not in ("summary_dir", "dataset_mark"))

Signature = tuple[int, int, int]  # the index file's inode, size and mtime
# A lineage file's name, size, mtime (ns), inode and ctime (ns).
FileSignature = tuple[str, int, int, int, int]
_FILE_WIDTH = 5


class IndexEntry(NamedTuple):
    """One run as the index keeps it."""

    path: str  # relative to the base dir: "./", "./<name>" or "./<name>/<name>"...
    dir_mtime: int
    final: bool
    create_time: int
    update_time: int
    files: list[Any]  # FileSignature after FileSignature, flat (as the file stores them)
    summary: dict[str, Any] | None  # fields, metric, user_defined, graph (an id)
    warnings: tuple[str, ...] = ()

    # What a run listing is ordered by (record._discovery.Listed).
    @property
    def relative_path(self) -> str:
        return self.path

    @property
    def update_time_ns(self) -> int:
        return self.update_time


class LoadedIndex:
    """An index file's checked columns, and what its freshness rule needs.

    A warm query reads the columns themselves (``document``, the layout
    above); the per-run :attr:`entries` are made only when some run changed.
    """

    def __init__(
        self,
        document: dict[str, Any],
        mtime_ns: int,
        signature: Signature | None,
        bad: set[int] | None = None,
    ) -> None:
        self.document = document
        # The index file's own mtime (the file server's clock, never this machine's).
        self.mtime_ns = mtime_ns
        self.signature = signature
        self.bad = bad or set()
        self.dropped = len(self.bad)  # malformed entries left out
        self.graphs: dict[str, Any] = document["graphs"]
        #: The directories entered that are no run, and their mtimes (ns).
        self.containers: dict[str, int] = dict(zip(*document["containers"], strict=True))
        self._entries: list[IndexEntry] | None = None
        self._positions: dict[str, int] | None = None

    @property
    def entries(self) -> list[IndexEntry]:
        if self._entries is None:
            entries = _entries(self.document)
            self._entries = [entry for at, entry in enumerate(entries) if at not in self.bad]
        return self._entries

    @property
    def positions(self) -> dict[str, int]:
        if self._positions is None:
            self._positions = {entry.path: at for at, entry in enumerate(self.entries)}
        return self._positions


@functools.cache
def index_header() -> dict[str, Any]:
    """The header an index of this code has; another header means another parser."""
    digest = hashlib.blake2b(digest_size=12)
    for name in _PARSER_MODULES:
        # Found, not imported: a warm query never imports the parser (protobuf), and the
        # digest must not depend on what this process happened to import.
        spec = importlib.util.find_spec(name)
        source = spec.origin if spec is not None else None
        try:
            with open(str(source), "rb") as stream:
                digest.update(stream.read())
        except OSError:  # no source (a frozen build): the version alone decides
            digest.update(name.encode())
    # Imported by now (this module is reached through it); importing it here would cycle.
    package = getattr(sys.modules.get("rankscribe.lineage"), "__version__", "unknown")
    return {
        "format": INDEX_FORMAT,
        "version": INDEX_VERSION,
        "package": str(package),
        "parser": digest.hexdigest(),
    }


def _file_signature(found: os.stat_result) -> Signature:
    return (found.st_ino, found.st_size, found.st_mtime_ns)


def index_signature(base_dir: str) -> Signature | None:
    try:
        return _file_signature(os.stat(os.path.join(base_dir, INDEX_NAME)))
    except OSError:
        return None


def _distrusted(found: os.stat_result) -> str | None:
    """Why an index file could lie (another user's, or one others may write), or None."""
    foreign = foreign_owner(found)
    if foreign is None and found.st_mode & 0o022:
        return f"others may write it (mode {stat.S_IMODE(found.st_mode):04o})"
    return foreign


def load_index(base_dir: str) -> LoadedIndex | None:
    """The index on disk, its malformed entries left out; None if absent or unusable."""
    path = os.path.join(base_dir, INDEX_NAME)
    try:
        # A link or a FIFO planted in a shared base dir is refused (UnsafeFileError, an
        # OSError: rebuilt below), never followed nor waited on; so is an index another
        # user owns or may write, which could make it lie.
        with open_regular(path) as stream:
            found = os.fstat(stream.fileno())
            distrusted = _distrusted(found)
            if distrusted is not None:
                logger.warning("ignoring lineage index %s (%s); reading the runs", path, distrusted)
                return None
            line, arrays = encoding.split_document(stream.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as error:
        logger.warning("ignoring unreadable lineage index %s (%s); rebuilding it", path, error)
        return None
    header = index_header()
    if not isinstance(line, dict) or any(line.get(key) != value for key, value in header.items()):
        logger.warning(
            "ignoring lineage index %s written by another version (%s); rebuilding it",
            path,
            _version_text(line),
        )
        return None
    try:
        loaded = _decoded(encoding.decode_columns(line, arrays, file_columns=True), found)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as error:
        what = "unreadable" if isinstance(error, encoding.ColumnsError) else "malformed"
        logger.warning("ignoring %s lineage index %s (%s); rebuilding it", what, path, error)
        return None
    if loaded.dropped:
        logger.warning(
            "lineage index %s: %d malformed entr%s read again from the runs",
            path,
            loaded.dropped,
            "y is" if loaded.dropped == 1 else "ies are",
        )
    return loaded


def _version_text(document: Any) -> str:
    if not isinstance(document, dict):
        return "not an index"
    return ", ".join(
        f"{key} {str(document.get(key))[:40]}" for key in ("format", "version", "package")
    )


_DOT_SLASH = itertools.repeat("./")


def _types_of(values: Iterable[Any]) -> set[type]:
    if isinstance(values, encoding.TypedColumn):  # read from a binary kind: known without a pass
        return {values.value_type} if values else set()
    return set(map(type, values))


def _bad_positions(column: Sequence[Any], accepts: Any) -> set[int]:
    return {index for index, value in enumerate(column) if not accepts(value)}


def _is_int(value: Any) -> bool:
    return type(value) is int


# Non-finite floats are stored as MindInsight shows them: "NaN", "Infinity", "-Infinity".
_FIELD_TYPES: dict[str, set[type]] = {"text": {str}, "int": {int}, "number": {int, float, str}}


def _column(document: dict[str, Any], name: str, count: int) -> list[Any]:
    column = document[name]
    if not isinstance(column, list) or len(column) != count:
        raise ValueError(f"column {name!r} is not a list of {count}")
    return column


def _decoded(document: dict[str, Any], found: os.stat_result) -> LoadedIndex:
    """The entries of a decoded index document, each checked; raises on a broken layout."""
    paths = document["path"]
    if not isinstance(paths, list):
        raise ValueError("column 'path' is not a list")
    count = len(paths)
    columns = {
        name: _column(document, name, count)
        for name in ("dir_mtime", "final", "create_time", "update_time", "graph")
    }
    files, bad = _files_column(document, count)
    graphs = document["graphs"]
    fields, metric, user_defined = (document[name] for name in ("fields", "metric", "user_defined"))
    warnings = _warnings(document.get("warnings", {}), count)
    if not all(isinstance(part, dict) for part in (graphs, fields, metric, user_defined)):
        raise ValueError("graphs, fields, metric or user_defined is not an object")
    # Whole columns first (one pass each, in C); only a column that fails is looked at
    # value by value, to find the runs to drop.
    if not (_types_of(paths) == {str} and _plain_relative_paths(paths)):
        bad |= _bad_positions(
            paths, lambda path: isinstance(path, str) and _plain_relative_paths([path])
        )
    for name in ("dir_mtime", "create_time", "update_time"):
        if not _types_of(columns[name]) <= {int}:
            bad |= _bad_positions(columns[name], _is_int)
    if not _types_of(columns["final"]) <= {bool}:
        bad |= _bad_positions(columns["final"], lambda value: type(value) is bool)
    # Runs share a few graphs: each distinct id is checked once.
    try:
        distinct = set(columns["graph"])
    except TypeError:  # a planted {} or []
        distinct = set(map(_hashable, columns["graph"]))
    known_graph = {
        graph: graph is None or (isinstance(graph, str) and isinstance(graphs.get(graph), dict))
        for graph in distinct
    }
    if not all(known_graph.values()):
        bad |= _bad_positions(
            columns["graph"], lambda graph: known_graph.get(_hashable(graph), False)
        )
    field_columns: dict[str, list[Any]] = {}
    for name, column in fields.items():
        kind = field_kind(name) if name in ROW_FIELDS else None
        if kind is None or not isinstance(column, list) or len(column) != count:
            raise ValueError(f"field column {name!r} is not a field's list of {count}")
        allowed: set[type] = {*_FIELD_TYPES.get(kind, {str}), type(None)}
        if not _types_of(column) <= allowed:
            bad |= _bad_positions(column, lambda value, allowed=allowed: type(value) in allowed)
        field_columns[name] = column
    custom = {
        "metric": _sparse(metric, count, bad, None),
        "user_defined": _sparse(user_defined, count, bad, _USER_TYPES),
    }
    kept = [path for at, path in enumerate(paths) if at not in bad] if bad else paths
    duplicates = len(kept) - len(set(kept))
    if duplicates:
        raise ValueError(f"{duplicates} runs are listed twice")
    checked = {
        **columns,
        "containers": _containers(document.get("containers", [[], []])),
        "files": files,
        "path": paths,
        "fields": field_columns,
        **custom,
        "warnings": warnings,
        "graphs": graphs,
    }
    return LoadedIndex(checked, found.st_mtime_ns, _file_signature(found), bad)


def _plain_relative_paths(paths: list[str]) -> bool:
    """Each path is ``./`` or ``./`` then names joined by ``/`` (none empty, ``.`` or ``..``).

    A few passes over the text joined by NUL (which no name holds), in C: a
    warm query checks 100,000 paths.
    """
    if not paths:
        return True
    text = "\0" + "\0".join(paths) + "\0"
    return (
        sum(map(str.startswith, paths, _DOT_SLASH)) == len(paths)
        and text.count("\0") == len(paths) + 1
        and text.count("/\0") == paths.count("./")
        and not any(part in text for part in ("//", "/./", "/../", "/.\0", "/..\0"))
    )


def _containers(column: Any) -> list[list[Any]]:
    """The ``containers`` column, checked: ``[[relative paths], [mtimes]]``."""
    if not (
        isinstance(column, list)
        and len(column) == 2
        and all(isinstance(part, list) for part in column)
        and len(column[0]) == len(column[1])
        and _types_of(column[0]) <= {str}
        and _types_of(column[1]) <= {int}
        and _plain_relative_paths(column[0])
        and "./" not in column[0]
    ):
        raise ValueError("column 'containers' is not [[relative paths], [mtimes]]")
    return column


def _warnings(column: Any, count: int) -> dict[str, list[str]]:
    """The ``warnings`` column, checked: ``{"<run position>": [texts]}``, as written.

    A position is written in ASCII digits, without a leading zero; ``str.isdigit``
    also takes "²", which ``int`` refuses.
    """
    if not isinstance(column, dict) or not all(
        at.isascii()
        and at.isdigit()
        and str(int(at)) == at
        and int(at) < count
        and isinstance(texts, list)
        and _types_of(texts) <= {str}
        for at, texts in column.items()
    ):
        raise ValueError("column 'warnings' is not {\"<run position>\": [texts]}")
    return column


# What a user-defined value can be (map_dict values nest).
_USER_TYPES = {str, int, float, bool, dict}


def _hashable(value: Any) -> Any:
    """``value``, or its type's name when it cannot be a set member (a planted {} or [])."""
    return value if isinstance(value, (str, type(None))) else f"<{type(value).__name__}>"


def _files_column(document: dict[str, Any], count: int) -> tuple[Any, set[int]]:
    """The ``files`` column, and the runs whose files are malformed."""
    files = document["files"]
    if isinstance(files, encoding.FileColumns):  # typed by its kind
        if len(files.names) != count:
            raise ValueError(f"column 'files' is not a list of {count}")
        return files, set()
    files = _column(document, "files", count)
    return files, _bad_files(files)


def _bad_files(files: list[Any]) -> set[int]:
    """Runs whose files are not [name, size, mtime, inode, ctime, ...] lists."""

    def good(item: Any) -> bool:
        return (
            type(item) is list
            and len(item) % _FILE_WIDTH == 0
            and all(
                type(name) is str and _types_of(numbers) <= {int}
                for name, *numbers in zip(*[iter(item)] * _FILE_WIDTH, strict=True)
            )
        )

    if _types_of(files) == {list} and set(map(len, files)) == {_FILE_WIDTH}:
        flat = list(itertools.chain.from_iterable(files))
        names = flat[0::_FILE_WIDTH]
        del flat[0::_FILE_WIDTH]
        if _types_of(names) == {str} and _types_of(flat) == {int}:
            return set()
    return _bad_positions(files, good)


def _sparse(
    columns: dict[str, Any], count: int, bad: set[int], types: set[type] | None
) -> dict[str, tuple[list[int], list[Any]]]:
    """Sparse columns ``{key: [[positions], [values]]}``, checked; bad values mark their run."""
    checked: dict[str, tuple[list[int], list[Any]]] = {}
    for key, column in columns.items():
        if not (
            isinstance(column, list)
            and len(column) == 2
            and all(isinstance(part, list) for part in column)
            and len(column[0]) == len(column[1])
        ):
            raise ValueError(f"custom column {key!r} is not [[positions], [values]]")
        positions, values = column
        if column[0] and (
            _types_of(positions) != {int} or min(positions) < 0 or max(positions) >= count
        ):
            raise ValueError(f"custom column {key!r} has positions out of range")
        if types is not None and not _types_of(values) <= types:
            bad |= {
                position
                for position, value in zip(positions, values, strict=True)
                if type(value) not in types
            }
        checked[key] = (positions, values)
    return checked


def _entries(document: dict[str, Any]) -> list[IndexEntry]:
    """Rows from the checked columns (values of dropped runs too: they are filtered after).

    Built with comprehensions over zipped columns: at 100,000 runs every
    Python-level step per run costs tenths of a second.
    """
    paths = document["path"]
    fields: dict[str, list[Any]] = document["fields"]
    count = len(paths)
    files = document["files"]
    if isinstance(files, encoding.FileColumns):
        files = files.rows()
    names = list(fields)
    field_dicts = (
        [dict(zip(names, values, strict=True)) for values in zip(*fields.values(), strict=True)]
        if names
        else [{} for _ in range(count)]
    )
    sections: dict[str, list[dict[str, Any]]] = {}
    for section in ("metric", "user_defined"):
        dicts: list[dict[str, Any]] = [{} for _ in range(count)]
        for key, (positions, values) in document[section].items():
            for position, value in zip(positions, values, strict=True):
                dicts[position][key] = value
        sections[section] = dicts
    # A field no run of the index has is absent; one some run has is None where missing.
    summaries = [
        None
        if graph is None
        else {"fields": fields_of, "metric": metric, "user_defined": user, "graph": graph}
        for graph, fields_of, metric, user in zip(
            document["graph"],
            field_dicts,
            sections["metric"],
            sections["user_defined"],
            strict=True,
        )
    ]
    warned: list[tuple[str, ...]] = [()] * count
    for at, texts in document["warnings"].items():  # checked by _warnings
        warned[int(at)] = tuple(texts)
    return list(
        map(
            IndexEntry,
            paths,
            document["dir_mtime"],
            document["final"],
            document["create_time"],
            document["update_time"],
            files,
            summaries,
            warned,
        )
    )


def _document(
    entries: list[IndexEntry], graphs: dict[str, Any], containers: dict[str, int]
) -> dict[str, Any]:
    count = len(entries)
    fields: dict[str, list[Any]] = {}
    custom: dict[str, dict[str, tuple[list[int], list[Any]]]] = {"metric": {}, "user_defined": {}}
    for index, entry in enumerate(entries):
        if entry.summary is None:
            continue
        for name, value in entry.summary["fields"].items():
            column = fields.get(name)
            if column is None:
                column = fields[name] = [None] * count
            column[index] = value
        for section, keyed in custom.items():
            for key, value in entry.summary[section].items():
                positions, values = keyed.setdefault(key, ([], []))
                positions.append(index)
                values.append(value)
    used = {entry.summary["graph"] for entry in entries if entry.summary is not None}
    return {
        **index_header(),
        "path": [entry.path for entry in entries],
        "dir_mtime": [entry.dir_mtime for entry in entries],
        "final": [entry.final for entry in entries],
        "create_time": [entry.create_time for entry in entries],
        "update_time": [entry.update_time for entry in entries],
        "files": [entry.files for entry in entries],
        "graph": [None if entry.summary is None else entry.summary["graph"] for entry in entries],
        "fields": fields,
        "metric": {
            key: [positions, values] for key, (positions, values) in custom["metric"].items()
        },
        "user_defined": {
            key: [positions, values] for key, (positions, values) in custom["user_defined"].items()
        },
        "warnings": {
            str(index): list(entry.warnings)
            for index, entry in enumerate(entries)
            if entry.warnings
        },
        "graphs": {graph: graphs[graph] for graph in used},
        "containers": [list(containers), list(containers.values())],
    }


def write_index(
    base_dir: str,
    entries: list[IndexEntry],
    graphs: dict[str, Any],
    containers: dict[str, int] | None = None,
) -> LoadedIndex | None:
    """Write the index whole, renamed into place; what it holds, or None if not written.

    The returned index carries the written file's own mtime and signature,
    taken from the file itself before the rename (so never another writer's).
    """
    document = _document(entries, graphs, containers or {})
    data = encoding.encode_document(document)
    target = os.path.join(base_dir, INDEX_NAME)
    try:
        descriptor, temporary = tempfile.mkstemp(
            prefix=f"{INDEX_NAME}.", suffix=".tmp", dir=base_dir
        )
    except OSError as error:
        logger.debug("cannot write the lineage index of %s: %s", base_dir, error)
        return None
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
            os.fchmod(stream.fileno(), file_mode(False))
            found = os.fstat(stream.fileno())
        os.replace(temporary, target)
        fsync_directory(base_dir)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        logger.debug("cannot write the lineage index of %s: %s", base_dir, error)
        return None
    written = LoadedIndex(document, found.st_mtime_ns, _file_signature(found))
    written._entries = list(entries)
    return written
