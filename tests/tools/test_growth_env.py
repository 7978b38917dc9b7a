"""The growth env runs every test that times growth (tests/_support/growth.py).

Every other env skips them, and the growth env runs only the marked tests of the files its
command names (``pytest -m growth FILES``): a file of marked tests it does not name would be
timed nowhere. A test that times growth without the mark fails wherever it runs.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKED = re.compile(r"^@pytest\.mark\.growth\b", re.MULTILINE)


def growth_env_command() -> str:
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "tox.ini", encoding="utf-8")
    return config["testenv:growth"]["commands"]


def test_the_growth_env_names_every_file_of_marked_tests_and_selects_them() -> None:
    command = growth_env_command()
    named = set(re.findall(r"\btests/\S+\.py\b", command))
    marked = {
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if MARKED.search(path.read_text(encoding="utf-8"))
    }
    assert len(marked) >= 9, marked  # the parsers', the index's, the partials', ...
    assert named == marked, (sorted(marked - named), sorted(named - marked))
    assert re.search(r"pytest -m growth\b", command), command
