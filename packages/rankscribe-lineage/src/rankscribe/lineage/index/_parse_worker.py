"""A helper process of a cold scan: parse the runs read from stdin, answer on stdout.

Run by :mod:`rankscribe.lineage.index._parallel` as ``python -m
rankscribe.lineage.index._parse_worker``; not meant to be run by hand. Input and
output are pickles exchanged with the process that started it.
"""

from __future__ import annotations

import gc
import logging
import pickle
import sys
from typing import Any

from rankscribe.lineage.index._run_summary import parse_directory_for_index, parse_for_index


def main() -> int:
    logging.disable(logging.CRITICAL)  # warnings travel back with the outcomes
    # Tens of thousands of runs' dicts and no reference cycles: the cycle collector
    # would only walk the growing heap again and again (a fifth of a helper's time).
    gc.disable()
    kind, jobs = pickle.load(sys.stdin.buffer)  # from the process that started us
    graph_memo: dict[bytes, dict[str, object]] = {}
    graph_ids: dict[int, tuple[dict[str, object], str]] = {}
    outcomes: list[Any]
    if kind == "directory":
        outcomes = [parse_directory_for_index(job, graph_memo, graph_ids) for job in jobs]
    else:
        outcomes = [parse_for_index(job, graph_memo, graph_ids) for job in jobs]
    pickle.dump(outcomes, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
