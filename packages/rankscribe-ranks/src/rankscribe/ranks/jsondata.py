"""JSON read from a file or a message someone else may have written, with bounds.

A sibling-facing module (``docs/contributing.md``, "Sibling modules"), not part of the
user's API: :func:`parse_json` is the one parser of what the packages read as JSON from
disk or from another rank, and refuses as :class:`JSONDataError` (a
:class:`~rankscribe.ranks.errors.RanksError` and a ``ValueError``) what is too large, not
UTF-8, nested deeper than ``max_depth`` or not JSON, in time linear in the text. It lives
with the ranks' other decoder of what others wrote (``rankscribe/ranks/messages/``).
"""

from __future__ import annotations

from rankscribe.ranks.messages._jsondata import DEFAULT_MAX_DEPTH, JSONDataError, parse_json

__all__ = ["DEFAULT_MAX_DEPTH", "JSONDataError", "parse_json"]
