"""Errors raised by rankscribe.lineage.

The classes and codes are MindInsight's lineage manager's (v0.2-0.7), so code
written for ``mindinsight.lineagemgr`` catches and reads them the same way:
every one derives from :class:`MindInsightException`, ``str(error)`` is
``'[ClassName] code: XXXXXXXX, msg: ...'`` and ``error.error_code`` the eight
upper-case hex digits. Each class also derives from the built-in exception it
refines (``TypeError``, ``ValueError``, ``FileNotFoundError``, ...), so
callers that catch built-ins keep working.
"""

from __future__ import annotations

__all__ = [
    "LineageDirNotExistError",
    "LineageError",
    "LineageExpressionError",
    "LineageFileNotFoundError",
    "LineageLogError",
    "LineageMergeError",
    "LineageParamSummaryPathError",
    "LineageParamTypeError",
    "LineageParamValueError",
    "LineageQuerySummaryDataError",
    "LineageSearchConditionParamError",
    "LineageSummaryAnalyzeException",
    "LineageSummaryParseException",
    "MindInsightException",
]

# MindInsight's code layout: runtime(2) type(2) level(3) system(8) module(5) value(12).
# Its lineage module is 2 inside system 42, so every lineage code is 0x50542000 | value.
_SYSTEM_BASE = (1 << 30) | (1 << 28) | (0 << 25) | (42 << 17)
_GENERAL_MODULE = 0
_LINEAGE_MODULE = 2

_PARAM_MASK = 0b00001 << 7
_COLLECTOR_MASK = 0b00011 << 7
_MODEL_API_MASK = 0b00100 << 7
_SUMMARY_ANALYZE_MASK = 0b00111 << 7
_QUERIER_MASK = 0b01000 << 7


class MindInsightException(Exception):  # noqa: N818 - MindInsight's name
    """MindInsight's base exception: ``MindInsightException(error, message, http_code=500)``.

    ``error`` is the error's value inside its module: an int, or an enum
    member whose ``value`` is one (MindInsight passes its error enums). The
    message is kept with its whitespace collapsed, as MindInsight does;
    ``error_code`` is the composed code as eight upper-case hex digits.
    Raised directly, the module is MindInsight's "general" one (0).
    """

    module: int = _GENERAL_MODULE

    def __init__(self, error: object, message: str, http_code: int = 500) -> None:
        if isinstance(message, str):
            message = " ".join(message.split())
        super().__init__(message)
        self.error = error
        self.message = message
        self.http_code = http_code

    @property
    def error_code(self) -> str:
        """The MindInsight error code as eight upper-case hex digits, e.g. ``'50542080'``."""
        value = getattr(self.error, "value", self.error)
        number = value if isinstance(value, int) and not isinstance(value, bool) else 0
        return f"{_SYSTEM_BASE | (self.module << 12) | (number & 0x0FFF):08X}"

    def __str__(self) -> str:
        return f"[{type(self).__name__}] code: {self.error_code}, msg: {self.message}"


class LineageError(MindInsightException):
    """Base class of every error raised by rankscribe.lineage.

    Built from a message alone: the error value is the class's ``code_value``
    and the message is the class's ``message_template`` filled with it.
    """

    module = _LINEAGE_MODULE
    code_value: int = 0
    message_template: str = "{}"

    def __init__(self, msg: str = "", http_code: int = 500) -> None:
        super().__init__(self.code_value, self.message_template.format(msg), http_code)


class LineageParamTypeError(LineageError, TypeError):
    """An argument has the wrong type (50542080)."""

    code_value = 0 | _PARAM_MASK
    message_template = "TypeError. {}"


class LineageParamValueError(LineageError, ValueError):
    """An argument has an unusable value (50542081)."""

    code_value = 1 | _PARAM_MASK
    message_template = "ValueError. {}"


class LineageLogError(LineageError, RuntimeError):
    """Recording lineage failed (50542191); raised by the callbacks with ``raise_exception=True``.

    The failure that caused it is chained as ``__cause__``.
    """

    code_value = 17 | _COLLECTOR_MASK
    message_template = "Fail to write lineage information into log file. {}"


class LineageDirNotExistError(LineageError, FileNotFoundError):
    """A directory does not exist (50542214)."""

    code_value = 20 | _MODEL_API_MASK
    message_template = "Dir not exist error: {}"


class LineageQuerySummaryDataError(LineageError, RuntimeError):
    """The lineage could not be queried (50542215)."""

    code_value = 21 | _MODEL_API_MASK
    message_template = "Query summary data error: {}"


class LineageFileNotFoundError(LineageError, FileNotFoundError):
    """There is no lineage file where one was expected (50542216)."""

    code_value = 22 | _MODEL_API_MASK
    message_template = "File not found error: {}"


class LineageParamSummaryPathError(LineageError, ValueError):
    """A summary path argument is not an absolute, existing directory (50542217)."""

    code_value = 23 | _MODEL_API_MASK
    message_template = "The parameter summary path error: {}"


class LineageSearchConditionParamError(LineageError, ValueError):
    """A search condition is invalid (50542218)."""

    code_value = 24 | _MODEL_API_MASK
    message_template = "Search_condition param error: {}"


class LineageExpressionError(LineageSearchConditionParamError):
    """A string filter does not parse (50542218, like any invalid search condition).

    ``str(error)`` ends with the expression and a caret line under the
    offending column, so a terminal shows where the mistake is.
    """

    def __init__(self, detail: str, expression: str, column: int) -> None:
        self.detail = detail
        self.expression = expression
        self.column = column
        super().__init__(f"{detail} at column {column + 1}")

    def __str__(self) -> str:
        caret = " " * self.column + "^"
        return f"{super().__str__()}\n  {self.expression}\n  {caret}"


class LineageMergeError(LineageError, ValueError):
    """Rank lineages cannot be merged (50542220; not a MindInsight code)."""

    code_value = 32 | _MODEL_API_MASK
    message_template = "Merge rank lineage error: {}"


class LineageSummaryAnalyzeException(LineageError, ValueError):  # noqa: N818 - MindInsight name
    """One lineage file could not be analysed (50542380)."""

    code_value = 0 | _SUMMARY_ANALYZE_MASK
    message_template = "Failed to analyze summary log. {}"


class LineageSummaryParseException(LineageError, ValueError):  # noqa: N818 - MindInsight name
    """No lineage file could be parsed (50542402)."""

    code_value = 2 | _QUERIER_MASK
    message_template = "All summary logs parsing failed.{}"

    def __init__(self, msg: str = "", http_code: int = 500) -> None:
        super().__init__(f" {msg}" if msg else "", http_code)


# Not in __all__: only the report command raises it, and the command turns it into its
# message and exit status; no function of the user's API lets it out.
class ReportUnavailableError(LineageError, ImportError):
    """The report's charting library (plotly) is not installed (``rankscribe-lineage report``)."""

    message_template = "{}"
