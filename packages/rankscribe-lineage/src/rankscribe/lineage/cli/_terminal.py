"""What the command line prints: escaped text, plain tables, the width to fit, its errors.

- Text from files (run names, tags, lineage values) goes to the terminal
  escaped: C0 and C1 control characters, DEL and the Unicode bidirectional
  controls (U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069) are written as
  ``\\n``, ``\\t``, ``\\r`` or ``\\u001b`` (the JSON escapes
  ``rankscribe-dump`` prints), so a lineage value holding ESC or BEL cannot
  move the cursor, retitle the window or ring the bell, and one holding U+202E
  cannot show the rest of its line reversed (``docs/lineage-queries.md``).
- A mistake is a :class:`CommandLineError`: one line on stderr, exit 1.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from typing import Any

__all__ = [
    "DEFAULT_WIDTH",
    "PROGRAM",
    "CommandLineError",
    "EscapingFormatter",
    "existing_directory",
    "plain_table",
    "printable",
    "runs_below_text",
    "terminal_width",
]

PROGRAM = "rankscribe-lineage"
DEFAULT_WIDTH = 100

_SHORT_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# The bidirectional controls (marks, embeddings, overrides, isolates) reorder what a
# terminal shows after them: a run name holding U+202E prints the rest of the line backwards.
_BIDI_CODES = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_CONTROL_CODES = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI_CODES]
_ESCAPES = str.maketrans(
    {chr(code): _SHORT_ESCAPES.get(chr(code), f"\\u{code:04x}") for code in _CONTROL_CODES}
)
_CONTROLS = frozenset(chr(code) for code in _CONTROL_CODES)


def printable(text: str) -> str:
    """``text`` with its control characters escaped (returned as is when it has none)."""
    if text.isprintable():
        return text
    if _CONTROLS.isdisjoint(text):  # other non-printables (e.g. U+2028) are harmless here
        return text
    return text.translate(_ESCAPES)


class CommandLineError(Exception):
    """A mistake on the command line, reported as one line."""


class EscapingFormatter(logging.Formatter):
    """Warnings name files and runs: their control characters are escaped too."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def existing_directory(path: str) -> str:
    """The absolute path of ``path``, or a one-line problem naming it."""
    directory = os.path.abspath(path)
    if not os.path.exists(directory):
        raise CommandLineError(f"no such directory: {printable(path)}")
    if not os.path.isdir(directory):
        raise CommandLineError(f"not a directory: {printable(path)}")
    return directory


def plain_table(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns two spaces apart (cells already escaped)."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        for line in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)


def terminal_width() -> int:
    """The width to fit: $COLUMNS, else the terminal's, else 100 (e.g. into a pipe)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if sys.stdout.isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def value_text(value: Any) -> str:
    """One value as a table shows it (escaped)."""
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)  # JSON escapes control characters itself
    return printable(str(value))


def runs_below_text(directory: str, shown: str, *, with_lineage: bool = False) -> str:
    """The runs below ``directory`` named as ``shown/<path>`` (five at most), or ''.

    What a command given a directory that holds no run says, when runs sit
    deeper (``show runs/digits`` names ``runs/digits/version_0``).
    """
    from rankscribe.lineage.record._discovery import runs_below  # noqa: PLC0415

    names = runs_below(directory, with_lineage=with_lineage)
    listed = ", ".join(printable(os.path.join(shown, name)) for name in names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"{listed}{more}"
