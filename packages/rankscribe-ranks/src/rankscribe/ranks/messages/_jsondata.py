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
  the text is parsed and without recursion: the strings are removed (one match
  each, a string left open running to the end of the text), then all but the
  brackets, then each pass removes the innermost pairs, ``max_depth`` passes at
  most (each in C, reading each character once: the check takes time linear in
  the text, whatever it holds);
- anything ``json.loads`` refuses, and an integer of more than 4,300 digits
  (Python's default bound, beyond which converting digits takes time quadratic in
  their count) even where the interpreter's bound was raised or removed.

``NaN`` and ``Infinity`` are accepted, as ``json.dumps`` writes them: whoever
uses a number checks that it is finite and in range. See
``docs/contributing.md`` ("Public and private modules").

The sibling packages read it through :mod:`rankscribe.ranks.jsondata`; it is not part
of the user's API.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from rankscribe.ranks.errors import JSONDataError

__all__ = ["DEFAULT_MAX_DEPTH", "JSONDataError", "parse_json"]

#: Levels of arrays and objects accepted by default (the files the packages write use 4).
DEFAULT_MAX_DEPTH = 16

# A JSON string, escapes included (the unrolled form: no backtracking between alternatives),
# or one left open, which runs to the end of the text. Every opening quote matches, so each
# character is read by one match only: a text of many ``\"`` after an opening quote that is
# never closed, tried again from each quote, took time quadratic in its length. The
# quantifiers are possessive: what follows a run always matches (a quote, or the end after
# at most one backslash), so no match ever gives back what a run took, and without the
# backtracking state Python's engine keeps for each repetition of a plain ``*`` (about 120
# bytes each: a string of 8 million escapes had it allocate and touch 1 GB) the removal
# runs 5-9x faster and allocates nothing but its result.
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
# Python's default bound on the digits int() converts: converting more takes quadratic time.
_MOST_DIGITS = 4300
# What is not a bracket, once the strings are removed.
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
# Arrays and objects as one kind, for their depth.
_ONE_KIND = str.maketrans("{}", "[]")


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
    bound = sys.get_int_max_str_digits()
    try:
        return json.loads(text, parse_int=None if 0 < bound <= _MOST_DIGITS else _bounded_int)
    except (ValueError, RecursionError) as error:
        raise JSONDataError(f"{what} is not valid JSON: {str(error)[:200]}") from None


def _nesting_beyond(text: str, max_depth: int) -> bool:
    """Whether ``text`` nests arrays and objects deeper than ``max_depth`` (or unpaired)."""
    if sum(text.count(bracket) for bracket in "[{") <= max_depth:
        return False  # too few openings to nest deeper: nothing to measure
    structure = _STRING.sub("", text) if '"' in text else text
    brackets = _NOT_BRACKET.sub("", structure)
    if _without_pairs(brackets.translate(_ONE_KIND), ("[]",), max_depth):
        return True  # deeper than the bound, or an opening or closing without its pair
    # Nested no deeper than the bound: each pass removes at least the innermost level, so
    # what remains after that many passes is a closing of the other kind than its opening.
    return bool(_without_pairs(brackets, ("[]", "{}"), max_depth))


def _without_pairs(brackets: str, pairs: tuple[str, ...], passes: int) -> str:
    """``brackets`` less its innermost pairs, ``passes`` times (one level each, at least).

    ``str.replace`` reads left to right and never looks back at the brackets a removal
    joins: one pass of a single kind removes exactly the innermost level, in time linear
    in the text.
    """
    for _ in range(passes):
        before = len(brackets)
        for pair in pairs:
            brackets = brackets.replace(pair, "")
        if len(brackets) == before:
            break
    return brackets


def _bounded_int(digits: str) -> int:
    """The integer ``digits`` spell, if there are at most ``_MOST_DIGITS`` of them."""
    count = len(digits.lstrip("-"))
    if count > _MOST_DIGITS:
        raise ValueError(f"an integer of {count} digits, more than {_MOST_DIGITS}")
    return int(digits)
