"""What a directory holds, to compare before and after a run that must leave it alone.

Only the standard library is imported here: every tox env imports this module.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def snapshot(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with a digest of its bytes."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }
