"""JSON read from a file or a message someone else may have written, with bounds.

What the packages parse as JSON from disk or from another rank (the job
directory's claim, the rendezvous members, the live view's state file, a
job-view partial's header, a checkpoint's metadata) may have been written by
another user or damaged. :func:`parse_json` refuses, as :class:`JSONDataError`
(a :class:`~rankscribe.ranks.errors.RanksError` and a ``ValueError``), what the
standard library would turn into a ``RecursionError`` or a ``MemoryError``, and
everything else it cannot parse:

- more than ``max_bytes`` bytes;
- text that is not UTF-8;
- arrays and objects nested deeper than ``max_depth`` levels, measured before
  the text is parsed and without recursion: the strings are removed, then each
  pass removes the innermost brackets, ``max_depth`` passes at most (each a
  regular expression over the text, in C);
- anything ``json.loads`` refuses (an integer of more digits than Python
  converts included).

``NaN`` and ``Infinity`` are accepted, as ``json.dumps`` writes them: whoever
uses a number checks that it is finite and in range. See
``docs/contributing.md`` ("Public and private modules").

This module is for the sibling packages; it is not part of the user's API.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rankscribe.ranks.errors import JSONDataError

__all__ = ["DEFAULT_MAX_DEPTH", "JSONDataError", "parse_json"]

#: Levels of arrays and objects accepted by default (the files the packages write use 4).
DEFAULT_MAX_DEPTH = 16

# A JSON string, escapes included (the unrolled form: no backtracking between alternatives).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# An array or object holding no other one: the innermost level.
_INNERMOST = re.compile(r"\[[^\[\]{}]*\]|\{[^\[\]{}]*\}")
_BRACKETS = frozenset("[]{}")


def parse_json(
    data: bytes | bytearray | memoryview | str,
    *,
    what: str,
    max_bytes: int,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """The value the JSON text ``data`` holds; :class:`JSONDataError` naming ``what`` if not.

    ``what`` says what the text is, for the message ("the claim file /x/.rankscribe-job").
    """
    size = len(data) if not isinstance(data, memoryview) else data.nbytes
    if size > max_bytes:
        raise JSONDataError(f"{what} holds {size} bytes, more than {max_bytes}")
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as error:
            raise JSONDataError(f"{what} is not UTF-8 text: {error}") from None
    if _nesting_beyond(text, max_depth):
        raise JSONDataError(
            f"{what} holds arrays or objects nested deeper than {max_depth} levels "
            "(or brackets that do not pair)"
        )
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise JSONDataError(f"{what} is not valid JSON: {str(error)[:200]}") from None


def _nesting_beyond(text: str, max_depth: int) -> bool:
    """Whether ``text`` nests arrays and objects deeper than ``max_depth`` (or unpaired)."""
    if sum(text.count(bracket) for bracket in "[{") <= max_depth:
        return False  # too few openings to nest deeper: nothing to measure
    structure = _STRING.sub("", text) if '"' in text else text
    for _ in range(max_depth):
        structure, removed = _INNERMOST.subn("", structure)
        if not removed:
            break
    return any(character in _BRACKETS for character in structure)
