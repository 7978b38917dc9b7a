"""``export_options={'tensor_format': 'npy'}``: every recorded tensor also as a .npy file.

Layout as in the original: ``<log_dir>/export_<T>/tensor/<quoted tag>_<step>.npy``
with the tag URL-quoted (``a/b c`` -> ``a%2Fb%20c``), files 0400 and folders 0700
(0440 and 0750 group-readable). Quoting with no safe characters means a tag cannot
contain a path separator, so no tag can place a file outside the folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import IO
from urllib.parse import quote

import numpy as np

from rankscribe.ranks.files import atomic_write, file_mode, make_private_dir
from rankscribe.writer.errors import WriterValueError
from rankscribe.writer.files import claim_timestamp

FORMATS = ("npy",)
# Most filesystems refuse names longer than 255 bytes.
_MAX_NAME = 255


def export_file_name(tag: str, step: int) -> str:
    """The file name a tensor ``tag`` recorded at ``step`` is exported under."""
    quoted = quote(tag, safe="")
    name = f"{quoted}_{step}.npy"
    if len(name.encode()) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(tag.encode()).hexdigest()[:16]
    keep = _MAX_NAME - len(f"-{digest}_{step}.npy")
    return f"{quoted[:keep]}-{digest}_{step}.npy"


class NpyExporter:
    """Writes the .npy files of one SummaryRecord into its own ``export_<T>`` folder.

    :meth:`claim` creates ``export_<T>`` when the record is created, with ``mkdir``: a
    name taken already (by a record of another process created in the same second, or
    by a link someone planted) is never shared or followed; the record takes another
    ``T`` instead. The ``tensor`` folder appears with the first file; an
    ``export_<T>`` that stayed empty is removed when the record is closed.
    """

    def __init__(self, export_dir: str, *, group_readable: bool = False) -> None:
        self.export_dir = export_dir
        self.folder = os.path.join(export_dir, "tensor")
        self._group_readable = group_readable

    def release(self) -> None:
        """Remove ``export_<T>`` if nothing was exported: it only held the name."""
        with contextlib.suppress(OSError):  # not empty: it holds the exports
            os.rmdir(self.export_dir)

    @classmethod
    def claim(cls, log_dir: str, timestamp: int, *, group_readable: bool = False) -> NpyExporter:
        """Create ``<log_dir>/export_<timestamp>``; FileExistsError when the name is taken."""
        export_dir = make_private_dir(
            os.path.join(log_dir, f"export_{timestamp}"),
            group_readable=group_readable,
            exist_ok=False,
        )
        return cls(export_dir, group_readable=group_readable)

    def export(self, tag: str, step: int, array: np.ndarray) -> str:
        make_private_dir(self.folder, group_readable=self._group_readable)
        path = os.path.join(self.folder, export_file_name(tag, step))
        if os.path.dirname(os.path.realpath(path)) != os.path.realpath(self.folder):
            raise WriterValueError(f"export path for tag {tag!r} escapes {self.folder!r}")

        def save(handle: IO[bytes], _: bytes | memoryview) -> None:
            np.save(handle, array, allow_pickle=False)

        # A reader never sees half a file, and a tag recorded twice at one step replaces
        # the read-only file; a link planted at the name is replaced, never followed.
        return atomic_write(path, [b""], mode=file_mode(True, self._group_readable), write=save)


_EXPORT_DIR_ATTEMPTS = 100


def claim_export_dir(
    log_dir: str, timestamp: int, *, group_readable: bool
) -> tuple[NpyExporter, int]:
    """A record's own ``export_<T>`` and its ``T``: a ``T`` whose folder is taken (by a
    record of another process in the same second, or by a planted link) is passed over."""
    for _ in range(_EXPORT_DIR_ATTEMPTS):
        try:
            return NpyExporter.claim(log_dir, timestamp, group_readable=group_readable), timestamp
        except FileExistsError:
            timestamp = claim_timestamp(log_dir, not_before=timestamp + 1)
    raise WriterValueError(
        f"For 'SummaryRecord', no free export_<T> folder in {log_dir!r} after "
        f"{_EXPORT_DIR_ATTEMPTS} tries."
    )
