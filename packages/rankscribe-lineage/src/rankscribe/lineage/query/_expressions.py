"""A string filter for people at a terminal.

    loss < 0.5 and optimizer in ('Adam', 'Momentum') or metric/acc >= 0.9

Grammar (keywords are case-insensitive; ``and`` binds tighter than ``or``)::

    expression := term ("or" term)*
    term       := factor ("and" factor)*
    factor     := "(" expression ")" | comparison
    comparison := name ("=" | "==" | "!=" | "<" | "<=" | ">" | ">=") value
                | name ["not"] "in" "(" value ("," value)* [","] ")"
    name       := a bare name such as loss, metric/acc, user_defined/seed
                | a quoted name: "user_defined/my key", 'metric/top-1', `x y`
    value      := a number (-1, 0.5, 1e-3) | a quoted string | true | false

Names are the fields of ``filter_summary_lineage`` (``loss``, ``optimizer``,
``summary_dir``, ...) plus ``metric/<k>`` and ``user_defined/<k>``. Each
comparison obeys the same rules as the dict condition (a string field takes
only ``=``, ``!=``, ``in`` and ``not in``; ``epoch`` wants an int, ...) and
matches the same runs, but for one rule: a run without the value never
matches, whatever the operator, ``!=`` and ``not in`` included (the dict
condition's ``not_in`` keeps such a run, as MindInsight 2.3.1 does).

A mistake raises :class:`LineageExpressionError`, whose message shows the
expression with a caret under the offending column.
"""

from __future__ import annotations

import difflib
import itertools
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rankscribe.lineage.errors import (
    LineageExpressionError,
    LineageParamTypeError,
    LineageParamValueError,
    LineageSearchConditionParamError,
)
from rankscribe.lineage.query._conditions import (
    FIELD_MAPPING,
    field_kind,
    matches,
    validate_search_condition,
)

__all__ = [
    "Comparison",
    "Expression",
    "close_names",
    "did_you_mean",
    "parse_expression",
    "parse_sort_key",
    "parse_sort_keys",
]

# Deeper nesting than any person writes; deeper still would exhaust Python's recursion.
MAX_NESTING = 100
# Python refuses to turn longer digit strings into an int (sys.get_int_max_str_digits).
MAX_DIGITS = 4300

_COMPARATORS = {"=": "eq", "==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_KEYWORDS = ("and", "or", "not", "in", "true", "false")

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))(?![\w./-])
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`)
  | (?P<operator>==|!=|<=|>=|=|<|>)
  | (?P<punct>[(),\[\]])
  | (?P<word>[A-Za-z_][\w./-]*)
    """,
    re.VERBOSE,
)
_ESCAPE = re.compile(r"\\(.)")


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    column: int

    @property
    def keyword(self) -> str | None:
        lowered = self.text.lower()
        return lowered if self.kind == "word" and lowered in _KEYWORDS else None


def _tokenize(expression: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None:
            raise LineageExpressionError(
                f"unexpected character {expression[position]!r}", expression, position
            )
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            if kind == "string" and len(match.group()) < 2:
                raise LineageExpressionError("unterminated string", expression, position)
            tokens.append(_Token(kind, match.group(), position))
        position = match.end()
    tokens.append(_Token("end", "", len(expression)))
    return tokens


def _unquote(text: str) -> str:
    if text.startswith("`"):
        return text[1:-1]
    return _ESCAPE.sub(r"\1", text[1:-1])


_NUMBERS = {int, float}
_NUMBER_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    name: getattr(operator, name) for name in ("eq", "ne", "lt", "le", "gt", "ge")
}


@dataclass(frozen=True)
class Comparison:
    """``name <operator> value``; operator is eq, ne, lt, le, gt, ge, in or not_in."""

    name: str
    operator: str
    value: Any
    column: int
    operator_column: int = 0
    value_column: int = 0

    def transform(self, change: Callable[[Comparison], Comparison]) -> Comparison:
        return change(self)

    def evaluate(self, value_of: Callable[[str], Any]) -> bool:
        return self.accepts(value_of(self.name))

    def accepts(self, actual: Any) -> bool:
        """Whether a run whose value of :attr:`name` is ``actual`` matches."""
        if actual is None:
            return False
        if self.operator == "ne":
            return not matches("eq", self.value, actual)
        return matches(self.operator, self.value, actual)

    def mask(self, column_of: Callable[[str], list[Any]]) -> list[bool]:
        """Whether each run matches, given every run's values by name (a column each).

        A column of plain numbers compared with a number (the usual filter,
        ``loss < 0.5``) is compared by one ``map`` of the operator (C loops):
        no value is None and no comparison can fail, so :func:`matches`
        would answer alike.
        """
        column = column_of(self.name)
        compare = _NUMBER_OPERATORS.get(self.operator)
        if (
            compare is not None
            and type(self.value) in _NUMBERS
            and set(map(type, column)) <= _NUMBERS
        ):
            return list(map(compare, column, itertools.repeat(self.value)))
        return list(map(self.accepts, column))


@dataclass(frozen=True)
class Expression:
    """A parsed filter: ``kind`` is 'and' or 'or' over ``parts``, or a single comparison."""

    kind: str
    parts: tuple[Expression | Comparison, ...]

    def evaluate(self, value_of: Callable[[str], Any]) -> bool:
        if self.kind == "and":
            return all(part.evaluate(value_of) for part in self.parts)
        return any(part.evaluate(value_of) for part in self.parts)

    def mask(self, column_of: Callable[[str], list[Any]]) -> list[bool]:
        """Whether each run matches (:meth:`evaluate` for every run at once)."""
        combine = all if self.kind == "and" else any
        masks = [part.mask(column_of) for part in self.parts]
        return list(map(combine, zip(*masks, strict=True)))

    def transform(self, change: Callable[[Comparison], Comparison]) -> Expression:
        """The same expression with every comparison passed through ``change``."""
        return Expression(self.kind, tuple(part.transform(change) for part in self.parts))

    def comparisons(self) -> list[Comparison]:
        found: list[Comparison] = []
        for part in self.parts:
            if isinstance(part, Comparison):
                found.append(part)
            else:
                found.extend(part.comparisons())
        return found


class _Parser:
    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _tokenize(expression)
        self.position = 0
        self.depth = 0

    @property
    def current(self) -> _Token:
        return self.tokens[self.position]

    def error(self, detail: str, token: _Token | None = None) -> LineageExpressionError:
        token = token or self.current
        return LineageExpressionError(detail, self.expression, token.column)

    def describe(self, token: _Token) -> str:
        return "the end of the filter" if token.kind == "end" else repr(token.text)

    def advance(self) -> _Token:
        token = self.current
        self.position += 1
        return token

    def expect_punct(self, text: str) -> _Token:
        if self.current.kind == "punct" and self.current.text == text:
            return self.advance()
        raise self.error(f"expected {text!r} but found {self.describe(self.current)}")

    def parse(self) -> Expression | Comparison:
        if self.current.kind == "end":
            raise self.error("the filter is empty")
        result = self.parse_or()
        if self.current.kind != "end":
            raise self.error(
                f"expected 'and', 'or' or the end of the filter but found "
                f"{self.describe(self.current)}"
            )
        return result

    def parse_or(self) -> Expression | Comparison:
        parts = [self.parse_and()]
        while self.current.keyword == "or":
            self.advance()
            parts.append(self.parse_and())
        return parts[0] if len(parts) == 1 else Expression("or", tuple(parts))

    def parse_and(self) -> Expression | Comparison:
        parts = [self.parse_factor()]
        while self.current.keyword == "and":
            self.advance()
            parts.append(self.parse_factor())
        return parts[0] if len(parts) == 1 else Expression("and", tuple(parts))

    def parse_factor(self) -> Expression | Comparison:
        if self.current.kind == "punct" and self.current.text == "(":
            if self.depth >= MAX_NESTING:
                raise self.error(f"parentheses nested more than {MAX_NESTING} deep")
            self.advance()
            self.depth += 1
            inner = self.parse_or()
            self.depth -= 1
            self.expect_punct(")")
            return inner
        return self.parse_comparison()

    def parse_name(self) -> _Token:
        token = self.current
        if token.kind == "string" or (token.kind == "word" and token.keyword is None):
            return self.advance()
        raise self.error(f"expected a field name but found {self.describe(token)}")

    def parse_comparison(self) -> Comparison:
        name_token = self.parse_name()
        name = _unquote(name_token.text) if name_token.kind == "string" else name_token.text
        token = self.current
        if token.kind == "operator":
            self.advance()
            value_column = self.current.column
            return Comparison(
                name,
                _COMPARATORS[token.text],
                self.parse_value(),
                name_token.column,
                token.column,
                value_column,
            )
        if token.keyword == "not":
            self.advance()
            if self.current.keyword != "in":
                found = self.describe(self.current)
                raise self.error(f"expected 'in' after 'not' but found {found}")
            self.advance()
            value_column = self.current.column
            return Comparison(
                name, "not_in", self.parse_list(), name_token.column, token.column, value_column
            )
        if token.keyword == "in":
            self.advance()
            value_column = self.current.column
            return Comparison(
                name, "in", self.parse_list(), name_token.column, token.column, value_column
            )
        raise self.error(
            f"expected a comparison (=, !=, <, <=, >, >=, in, not in) after {name!r} but "
            f"found {self.describe(token)}"
        )

    def parse_list(self) -> list[Any]:
        opening = self.current
        if not (opening.kind == "punct" and opening.text in "(["):
            found = self.describe(opening)
            raise self.error(f"expected '(' and a list of values but found {found}")
        closing = ")" if opening.text == "(" else "]"
        self.advance()
        values: list[Any] = []
        while not (self.current.kind == "punct" and self.current.text == closing):
            values.append(self.parse_value())
            if self.current.kind == "punct" and self.current.text == ",":
                self.advance()
            elif not (self.current.kind == "punct" and self.current.text == closing):
                raise self.error(
                    f"expected ',' or {closing!r} but found {self.describe(self.current)}"
                )
        self.advance()
        return values

    def parse_value(self) -> Any:
        token = self.current
        if token.kind == "number":
            self.advance()
            text = token.text
            if re.fullmatch(r"[-+]?\d+", text):
                if len(text.lstrip("+-")) > MAX_DIGITS:
                    raise self.error(f"a number of more than {MAX_DIGITS} digits", token)
                return int(text)
            return float(text)
        if token.kind == "string" and not token.text.startswith("`"):
            self.advance()
            return _unquote(token.text)
        if token.keyword in ("true", "false"):
            self.advance()
            return token.keyword == "true"
        if token.kind == "word":
            raise self.error(
                f"expected a number or a quoted string but found the bare word {token.text} "
                f"(did you mean '{token.text}'?)"
            )
        raise self.error(f"expected a number or a quoted string but found {self.describe(token)}")


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**63 - 1


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_KIND_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "text": (_is_text, "is text: put the value in quotes"),
    "int": (_is_count, "takes a whole number from 0 to 2**63-1"),
    "number": (_is_number, "takes a number"),
}


def close_names(name: str, candidates: Sequence[str]) -> list[str]:
    """The candidates close to ``name`` (a typo's likely meaning), closest first, three at most."""
    return difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)


def did_you_mean(names: Sequence[str]) -> str:
    """``did you mean 'a'?``, ``did you mean 'a' or 'b'?``, ... (names already escaped)."""
    quoted = [f"'{name}'" for name in names]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f"did you mean {listed}?"


def _field_advice(name: str) -> str:
    """What to write instead of an unknown field: the close ones, else every field."""
    close = close_names(name, list(FIELD_MAPPING))
    if close:
        return did_you_mean(close)
    fields = ", ".join(FIELD_MAPPING)
    return f"the fields are {fields}, metric/<name> and user_defined/<name>"


def _validate(comparison: Comparison, expression: str) -> None:
    """Check one comparison: the same rules as the dict condition, said for a terminal."""
    name = comparison.name
    kind = field_kind(name)
    if kind is None:
        raise LineageExpressionError(
            f"unknown field {name!r}; {_field_advice(name)}", expression, comparison.column
        )
    if kind == "text" and comparison.operator in ("lt", "le", "gt", "ge"):
        raise LineageExpressionError(
            f"{name!r} is text: compare it with =, !=, in or not in",
            expression,
            comparison.operator_column,
        )
    rule = _KIND_RULES.get(kind)
    if rule is not None and comparison.operator not in ("in", "not_in"):
        accepts, what = rule
        if not accepts(comparison.value):
            raise LineageExpressionError(
                f"{name!r} {what}, got {comparison.value!r}", expression, comparison.value_column
            )
    operator = "eq" if comparison.operator == "ne" else comparison.operator
    try:  # the dict condition's own check, as a backstop
        validate_search_condition({name: {operator: comparison.value}})
    except LineageSearchConditionParamError as error:
        detail = error.message.removeprefix("Search_condition param error: ")
        raise LineageExpressionError(detail, expression, comparison.column) from None


def parse_expression(expression: str) -> Expression | Comparison:
    """Parse and check a string filter; raise LineageExpressionError on a mistake."""
    if not isinstance(expression, str):
        raise LineageExpressionError(
            f"the filter must be a str, got {type(expression).__name__}", repr(expression), 0
        )
    parsed = _Parser(expression).parse()
    comparisons = [parsed] if isinstance(parsed, Comparison) else parsed.comparisons()
    for comparison in comparisons:
        _validate(comparison, expression)
    return parsed


def parse_sort_keys(order_by: object) -> list[tuple[str, bool]]:
    """Parse ``filter_runs``'s ``order_by``: None, one sort key, or a sequence of them.

    Raises :class:`LineageParamTypeError` naming ``order_by`` for another type, and what
    :func:`parse_sort_key` raises for a bad key.
    """
    if order_by is None:
        return []
    keys = [order_by] if isinstance(order_by, str) else order_by
    if (
        not isinstance(keys, Sequence)
        or isinstance(keys, (bytes, bytearray))
        or not all(isinstance(key, str) for key in keys)
    ):
        raise LineageParamTypeError(
            f"the argument 'order_by' must be None, a sort key such as 'metric/acc desc' or "
            f"a list of them, got {order_by!r:.80} ({type(order_by).__name__})"
        )
    return [parse_sort_key(key) for key in keys]


def parse_sort_key(text: str) -> tuple[str, bool]:
    """Parse ``"<name> [asc|desc]"`` (or ``"-<name>"``); return (name, descending).

    Raises :class:`LineageParamValueError` for an empty or unknown key.
    """
    if not isinstance(text, str) or not text.strip():
        raise LineageParamValueError(f"a sort key must be a non-empty str, got {text!r}")
    stripped = text.strip()
    descending = False
    if stripped.startswith("-"):
        descending, stripped = True, stripped[1:].strip()
    words = stripped.rsplit(None, 1)
    if len(words) == 2 and words[1].lower() in ("asc", "ascending", "desc", "descending"):
        stripped, descending = words[0].strip(), words[1].lower().startswith("desc")
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "'\"`":
        stripped = stripped[1:-1]
    try:
        stripped = validate_search_condition({"sorted_name": stripped})["sorted_name"]
    except LineageSearchConditionParamError:
        close = close_names(stripped, list(FIELD_MAPPING))
        if close:
            raise LineageParamValueError(
                f"unknown sort key {stripped!r} in {text!r}; {did_you_mean(close)}"
            ) from None
        fields = ", ".join(field for field in FIELD_MAPPING)
        raise LineageParamValueError(
            f"unknown sort key {stripped!r} in {text!r}; sort on one of {fields}, "
            f"metric/<name> or user_defined/<name>, optionally followed by asc or desc"
        ) from None
    return stripped, descending
