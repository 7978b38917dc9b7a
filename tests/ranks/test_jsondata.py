"""parse_json: JSON from a file or a message, refused as a package error when it is hostile."""

from __future__ import annotations

import json
import sys

import pytest

from rankscribe.ranks import RanksError
from rankscribe.ranks.jsondata import DEFAULT_MAX_DEPTH, JSONDataError, parse_json


def test_plain_json_reads_as_json_loads_does() -> None:
    text = json.dumps({"job_id": "ab", "ranks": [[0, 1], [2, 3]], "note": "[[{{", "x": 1.5})
    assert parse_json(text, what="t", max_bytes=1000) == json.loads(text)
    assert parse_json(text.encode(), what="t", max_bytes=1000) == json.loads(text)


@pytest.mark.parametrize("depth", [DEFAULT_MAX_DEPTH + 1, 10_000, sys.getrecursionlimit() * 10])
def test_nesting_deeper_than_the_bound_is_a_package_error(depth: int) -> None:
    limit = DEFAULT_MAX_DEPTH
    for opening, closing in (("[", "]"), ('{"a":', "}")):
        text = opening * depth + "1" + closing * depth
        with pytest.raises(
            JSONDataError,
            match=f"the claim file x holds arrays or objects nested deeper than {limit}",
        ) as caught:
            parse_json(text, what="the claim file x", max_bytes=len(text))
        assert isinstance(caught.value, RanksError)
        assert isinstance(caught.value, ValueError)


def test_nesting_at_the_bound_and_brackets_inside_strings_are_read() -> None:
    depth = DEFAULT_MAX_DEPTH
    text = "[" * depth + '"' + "[" * 5000 + '\\"]"' + "]" * depth
    value = parse_json(text, what="t", max_bytes=len(text))
    for _ in range(depth):
        value = value[0]
    assert value == "[" * 5000 + '"]'


def test_an_unclosed_deep_opening_is_refused_without_recursion() -> None:
    text = "[" * 200_000
    with pytest.raises(JSONDataError, match="nested deeper than 16 levels"):
        parse_json(text, what="t", max_bytes=len(text))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"x" * 101, "t holds 101 bytes, more than 100"),
        (b'{"a": "\xff"}', "t is not UTF-8 text"),
        (b'{"a": }', "t is not valid JSON"),
        (b"9" * 5000, "t is not valid JSON"),
    ],
)
def test_what_json_refuses_is_a_package_error(data: bytes, message: str) -> None:
    with pytest.raises(JSONDataError, match=message):
        parse_json(data, what="t", max_bytes=max(100, len(data) if len(data) != 101 else 100))


def test_a_number_of_more_digits_than_python_converts_inside_a_document_is_a_package_error() -> (
    None
):
    limit = sys.int_info.default_max_str_digits
    for text in (
        '{"metric": [1, ' + "7" * (limit + 700) + "]}",
        '{"metric": -' + "7" * (limit + 1) + "}",
        "[" * 20 + "9" * 5000 + "]" * 20,
    ):
        with pytest.raises(JSONDataError) as caught:
            parse_json(text, what="t", max_bytes=len(text))
        assert isinstance(caught.value, RanksError)
        assert str(caught.value).startswith("t ")


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ('[{"k":' * 8 + '"a"' + "}]" * 8, True),  # 16 levels, the kinds alternating
        ('[{"k":' * 8 + "[1]" + "}]" * 8, False),  # 17 levels
        ("[" * 17 + "1" + "]" * 16 + "}", False),  # a closing of the other kind
        ("[1}" + ",[]" * 20, False),
        ("[" + "[]," * 20 + "{}]", True),
        ("[" * 16 + '"' + "[" * 20, False),  # a string left open
    ],
)
def test_the_depth_bound_counts_both_kinds_and_refuses_unpaired_brackets(
    text: str, read: bool
) -> None:
    if read:
        assert parse_json(text, what="t", max_bytes=len(text)) == json.loads(text)
    else:
        with pytest.raises(JSONDataError, match="nested deeper than 16 levels"):
            parse_json(text, what="t", max_bytes=len(text))


@pytest.mark.parametrize("bound", [0, 100_000_000])
def test_integers_beyond_the_default_bound_are_refused_where_the_interpreter_allows_them(
    bound: int,
) -> None:
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(bound)
    try:
        value = parse_json("[" + "7" * 4300 + ", -1]", what="t", max_bytes=10_000)
        assert value == [int("7" * 4300), -1]
        text = '{"a": [-' + "7" * 4301 + "]}"
        with pytest.raises(JSONDataError, match="t is not valid JSON: an integer of 4301 digits"):
            parse_json(text, what="t", max_bytes=len(text))
    finally:
        sys.set_int_max_str_digits(previous)
