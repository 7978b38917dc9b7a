"""The umask under which the file-mode tests run: 022, the common one.

Under it a default mkdir or open would be readable by others, so a test that
finds 0700/0600 there sees the package's own choice. The group-readable request
(``rankscribe.writer.files.GROUP_READABLE_ENV``) is unset too: a test asks for
it itself. Only the standard library and pytest are imported here: every tox
env imports this module, each with its own package alone installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

#: rankscribe.writer.files.GROUP_READABLE_ENV, spelled out: this module imports no package
#: (tests/writer/test_file_safety.py checks that the two agree).
GROUP_READABLE_ENV = "RANKSCRIBE_GROUP_READABLE"


@pytest.fixture(autouse=True)
def umask_022(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Umask 022 and no group-readable request, for one test (import it into a test module)."""
    monkeypatch.delenv(GROUP_READABLE_ENV, raising=False)
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)
