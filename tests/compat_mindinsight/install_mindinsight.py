#!/usr/bin/env python3
"""Install MindInsight 2.3.1 and its dependencies into a directory of their own.

    python tests/compat_mindinsight/install_mindinsight.py TARGET

MindInsight needs protobuf <= 3.20.1 and the writer protobuf >= 6.31.1, so the
two cannot share one environment: MindInsight goes into TARGET (``pip install
--target``) and the tests run it as ``python -S`` with ``PYTHONPATH=TARGET``.
Nothing is done when TARGET already holds what requirements-mindinsight.txt
asks for (its text is kept in TARGET as a stamp).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REQUIREMENTS = Path(__file__).with_name("requirements-mindinsight.txt")
STAMP = "rankscribe-requirements.txt"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    target = Path(argv[0])
    wanted = REQUIREMENTS.read_text(encoding="utf-8")
    stamp = target / STAMP
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted:
        print(f"MindInsight already installed in {target}")
        return 0
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--upgrade",
            "--no-warn-conflicts",
            "--target",
            str(target),
            "-r",
            str(REQUIREMENTS),
        ],
        check=True,
    )
    stamp.write_text(wanted, encoding="utf-8")
    print(f"installed MindInsight into {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
