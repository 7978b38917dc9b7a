"""Fixtures of the ranks' tests."""

from __future__ import annotations

from tests._support.clocks import ranks_clock  # noqa: F401 - the fixture, for every test here
