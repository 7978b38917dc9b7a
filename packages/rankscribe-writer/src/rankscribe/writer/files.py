"""Event files: names and record framing (a public module).

Everything another package (or a user's tool) needs to find, parse or frame
RankScribe's event files is here, so that each rule has one home (the
name rules are defined in the private ``format._names`` module, framing in
``format._framing`` and wire primitives in ``format._wire``; this module is their
only public face):

- names: :func:`summary_file_name`, :func:`parse_file_name`, :func:`file_kind`,
  :func:`list_summary_files`, :func:`tensorboard_file_name`, :func:`host_name`,
  :func:`claim_timestamp`, :func:`is_valid_affix`, :data:`LINEAGE_SUFFIX`,
  :data:`SUMMARY_SUFFIX`;
- framing (TFRecord's, see ``docs/file-format.md``): :func:`frame`,
  :class:`RecordReader`, :func:`read_records`, :data:`RECORD_OVERHEAD`;
- the version strings that open each file, :data:`SUMMARY_FILE_VERSION` and
  :data:`TENSORBOARD_FILE_VERSION` (the other packages' event files are written by
  :mod:`rankscribe.writer.eventfiles`, which encodes and frames their events).

How files are created on disk (modes, private directories, atomic writes, the
``rank_<n>`` names) is the job layout's, in :mod:`rankscribe.ranks.files`.
"""

from __future__ import annotations

from rankscribe.writer.format._framing import (
    RECORD_OVERHEAD,
    RawRecord,
    RecordReader,
    frame,
    read_records,
)
from rankscribe.writer.format._names import (
    LINEAGE_SUFFIX,
    SUMMARY_SUFFIX,
    EventFileName,
    FileKind,
    claim_timestamp,
    file_kind,
    host_name,
    is_valid_affix,
    list_summary_files,
    parse_file_name,
    summary_file_name,
    tensorboard_file_name,
)
from rankscribe.writer.format._wire import SUMMARY_FILE_VERSION, TENSORBOARD_FILE_VERSION

__all__ = [
    "LINEAGE_SUFFIX",
    "RECORD_OVERHEAD",
    "SUMMARY_FILE_VERSION",
    "SUMMARY_SUFFIX",
    "TENSORBOARD_FILE_VERSION",
    "EventFileName",
    "FileKind",
    "RawRecord",
    "RecordReader",
    "claim_timestamp",
    "file_kind",
    "frame",
    "host_name",
    "is_valid_affix",
    "list_summary_files",
    "parse_file_name",
    "read_records",
    "summary_file_name",
    "tensorboard_file_name",
]
