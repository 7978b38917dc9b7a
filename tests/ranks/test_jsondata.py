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
