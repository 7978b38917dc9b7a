"""tools/check_tests.py on small test trees built in tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests._support.launchers import Finished, run_tool

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_tests.py"


def write_test(root: Path, name: str, text: str) -> None:
    path = root / "tests" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def run(root: Path, *arguments: str) -> Finished:
    return run_tool(TOOL, root, *arguments)


def test_public_imports_pass(tmp_path: Path) -> None:
    write_test(
        tmp_path,
        "test_a.py",
        """
        from rankscribe.writer import SummaryRecord
        from rankscribe.ranks.files import atomic_write
        import rankscribe.jobview.feed
        """,
    )
    result = run(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "tests reach private modules on 0 lines" in result.stdout


def test_a_private_import_without_a_reason_fails_and_is_named(tmp_path: Path) -> None:
    write_test(
        tmp_path,
        "writer/test_b.py",
        """
        from rankscribe.writer.format._crc import crc32c
        def test_it(monkeypatch):
            from rankscribe.writer.format import _names
            monkeypatch.setattr("rankscribe.ranks.backends._store._instances", {})
        """,
    )
    result = run(tmp_path)
    assert result.returncode == 1
    assert "3 private-module imports in tests without a reason" in result.stdout
    assert "tests/writer/test_b.py:2: rankscribe.writer.format._crc" in result.stdout
    assert "tests/writer/test_b.py:4: rankscribe.writer.format._names" in result.stdout
    assert "tests/writer/test_b.py:5: rankscribe.ranks.backends._store" in result.stdout


def test_a_reason_on_the_line_or_right_above_it_is_accepted(tmp_path: Path) -> None:
    write_test(
        tmp_path,
        "test_c.py",
        """
        from rankscribe.ranks._codec import decode  # private: the message codec
        # private: CRC-32C's mask, to forge a record
        from rankscribe.writer.format._crc import (
            mask,
        )
        """,
    )
    result = run(tmp_path, "--list")
    assert result.returncode == 0, result.stdout
    assert "tests/test_c.py:2: rankscribe.ranks._codec (the message codec)" in result.stdout
    assert "tests/test_c.py:4: rankscribe.writer.format._crc (CRC-32C's mask, to forge" in (
        result.stdout
    )


def test_more_than_the_limit_fails_even_with_reasons(tmp_path: Path) -> None:
    write_test(
        tmp_path,
        "test_d.py",
        """
        # private: one
        import rankscribe.ranks._codec
        # private: two
        import rankscribe.writer.format._crc
        """,
    )
    result = run(tmp_path, "--limit", "1")
    assert result.returncode == 1
    assert "2 private-module imports in tests, more than the limit of 1" in result.stdout


def test_a_reason_two_lines_above_does_not_count(tmp_path: Path) -> None:
    write_test(
        tmp_path,
        "test_e.py",
        """
        # private: too far away

        import rankscribe.ranks._codec
        """,
    )
    result = run(tmp_path)
    assert result.returncode == 1
    assert "tests/test_e.py:4: rankscribe.ranks._codec" in result.stdout
