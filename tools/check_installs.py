#!/usr/bin/env python3
"""Fail a tox env when a rankscribe-* distribution did not come from this checkout.

    python tools/check_installs.py rankscribe-writer [rankscribe-ranks ...] [--absent MODULE ...]

Each named distribution must be installed editable from packages/<name>/ of this
checkout (PEP 610 direct_url.json), and no other rankscribe-* distribution may be
installed: an env that tests one package alone must hold only that package and
what it declares. A copy from the index, a wheel cache or another clone fails.
Each module named after ``--absent`` must not be importable here (the ``ranks`` env:
installing the ground floor brings no numpy, protobuf nor Pillow).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parent.parent


def _origin(dist: metadata.Distribution) -> tuple[Path | None, bool]:
    text = dist.read_text("direct_url.json")
    if not text:
        return None, False
    info = json.loads(text)
    url = urlparse(info.get("url", ""))
    if url.scheme != "file":
        return None, False
    return Path(unquote(url.path)).resolve(), bool(info.get("dir_info", {}).get("editable"))


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is absent
        return False


def main(expected: list[str], absent: list[str] | None = None) -> int:
    installed = {
        dist.metadata["Name"].lower(): dist
        for dist in metadata.distributions()
        if dist.metadata["Name"] and dist.metadata["Name"].lower().startswith("rankscribe-")
    }
    problems = []
    for name in sorted(set(installed) - set(expected)):
        problems.append(f"{name} is installed but this env must not depend on it")
    for name in expected:
        dist = installed.get(name)
        if dist is None:
            problems.append(f"{name} is not installed")
            continue
        origin, editable = _origin(dist)
        want = ROOT / "packages" / name
        if origin != want.resolve() or not editable:
            problems.append(
                f"{name} {dist.version} comes from {origin or 'an index'}, not editable from {want}"
            )
    for module in absent or []:
        if _importable(module):
            problems.append(f"{module} is importable but this env must not install it")
    for problem in problems:
        print(f"check_installs: {problem}", file=sys.stderr)
    if not problems:
        without = f"; without {', '.join(absent)}" if absent else ""
        print(f"check_installs: {', '.join(expected)} from this checkout, nothing else{without}")
    return 1 if problems else 0


if __name__ == "__main__":
    arguments = sys.argv[1:]
    cut = arguments.index("--absent") if "--absent" in arguments else len(arguments)
    sys.exit(main([arg.lower() for arg in arguments[:cut]], arguments[cut + 1 :]))
