"""The umask under which the file-mode tests run: 022, the common one.

Under it a default mkdir or open would be readable by others, so a test that
finds 0700/0600 there sees the package's own choice. The group-readable request
(``rankscribe.ranks.files.GROUP_READABLE_ENV``) is unset too: a test asks for
it itself. Besides the standard library and pytest only ``rankscribe.ranks`` is
imported here: every tox env imports this module, and every package stands on ranks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from rankscribe.ranks.files import GROUP_READABLE_ENV


@pytest.fixture(autouse=True)
def umask_022(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Umask 022 and no group-readable request, for one test (import it into a test module)."""
    monkeypatch.delenv(GROUP_READABLE_ENV, raising=False)
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)
