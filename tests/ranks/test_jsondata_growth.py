"""parse_json takes time linear in its text, whatever the text holds.

Each hostile shape is parsed at 1, 4 and 16 MB (``tests/_support/growth.py``). Before
the depth check read each string in one match, more brackets than the depth bound
followed by an opening quote and many ``\\"`` took time quadratic in the text (64 KB:
20 s), before ``json.loads`` ran.
"""

from __future__ import annotations

import pytest

from rankscribe.ranks.jsondata import JSONDataError, parse_json
from tests._support.growth import assert_linear


def parsed(text: str) -> object:
    try:
        return parse_json(text, what="t", max_bytes=len(text))
    except JSONDataError:
        return None


def deep_then_open_escaped_string(size: int) -> str:
    return "[" * 20 + '"' + '\\"' * (size // 2)


def deep_then_open_plain_string(size: int) -> str:
    return "{" * 20 + '"' + "a" * size


def many_quotes_inside_deep_brackets(size: int) -> str:
    return "[" * 20 + '"\\"' * (size // 3)


def deep_unclosed_brackets(size: int) -> str:
    return "[{" * (size // 2)


def bracket_pairs_in_strings(size: int) -> str:
    return "[" * 16 + ",".join(['"[{\\\\"'] * (size // 8)) + "]" * 16


def deep_valid_nesting(size: int) -> str:
    unit = "[" * 16 + "1" + "]" * 16
    return "[" + ",".join([unit] * (size // 34)) + "]"


def many_strings(size: int) -> str:
    return "[" * 17 + ",".join(['"ab\\"c"'] * (size // 8)) + "]" * 17


def long_number(size: int) -> str:
    return "[" * 20 + "1" * size


@pytest.mark.growth
@pytest.mark.parametrize(
    "build",
    [
        deep_then_open_escaped_string,
        deep_then_open_plain_string,
        many_quotes_inside_deep_brackets,
        deep_unclosed_brackets,
        deep_valid_nesting,
        many_strings,
        long_number,
    ],
)
def test_parse_json_is_linear_in_hostile_text(build) -> None:
    assert_linear(parsed, build)


def test_the_hostile_shapes_are_still_refused_or_read_as_before() -> None:
    for text in (
        deep_then_open_escaped_string(100),
        many_quotes_inside_deep_brackets(100),
        deep_unclosed_brackets(100),
    ):
        with pytest.raises(JSONDataError, match="t holds arrays or objects nested deeper than 16"):
            parse_json(text, what="t", max_bytes=len(text))
    value = parse_json(bracket_pairs_in_strings(100), what="t", max_bytes=1000)
    for _ in range(15):
        value = value[0]
    assert value[:2] == ["[{\\", "[{\\"]
