"""``export_options={'tensor_format': 'npy'}``: every recorded tensor also as a .npy file.

Layout as in the original: ``<log_dir>/export_<T>/tensor/<quoted tag>_<step>.npy``
with the tag URL-quoted (``a/b c`` -> ``a%2Fb%20c``), files 0400, the
``tensor`` folder 0700. Quoting with no safe characters means a tag cannot
contain a path separator, so no tag can place a file outside the folder.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from urllib.parse import quote

import numpy as np

from rankscribe.writer.errors import WriterValueError

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
    """Writes the .npy files of one SummaryRecord; the folder appears with the first file."""

    def __init__(self, log_dir: str, timestamp: int) -> None:
        self.folder = os.path.join(log_dir, f"export_{timestamp}", "tensor")

    def export(self, tag: str, step: int, array: np.ndarray) -> str:
        os.makedirs(os.path.dirname(self.folder), exist_ok=True)
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        path = os.path.join(self.folder, export_file_name(tag, step))
        if os.path.dirname(os.path.realpath(path)) != os.path.realpath(self.folder):
            raise WriterValueError(f"export path for tag {tag!r} escapes {self.folder!r}")
        # Written under a temporary name and renamed: a reader never sees half a
        # file, and a tag recorded twice at one step replaces the read-only file.
        handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                np.save(stream, array, allow_pickle=False)
            os.chmod(temporary, 0o400)
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
        return path
