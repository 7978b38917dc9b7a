"""A helper process of a cold scan: parse the runs read from stdin, answer on stdout.

Run by :mod:`rankscribe.lineage.index._parallel` as ``python -m
rankscribe.lineage.index._parse_worker``; not meant to be run by hand. Input is one
pickle, the answer a sequence of pickles (lists of outcomes, in order) written
with one pickler, exchanged with the process that started it.
"""

from __future__ import annotations

import gc
import logging
import pickle
import sys
from typing import Any

from rankscribe.lineage.index._run_summary import parse_directory_for_index, parse_for_index

# Runs per answered part: large enough that a part's pickle is cheap to frame, small
# enough that the last one is a small part of the whole.
ANSWER_PART = 2000


def main() -> int:
    logging.disable(logging.CRITICAL)  # warnings travel back with the outcomes
    # Tens of thousands of runs' dicts and no reference cycles: the cycle collector
    # would only walk the growing heap again and again (a fifth of a helper's time).
    gc.disable()
    kind, jobs = pickle.load(sys.stdin.buffer)  # from the process that started us
    graph_memo: dict[bytes, dict[str, object]] = {}
    graph_ids: dict[int, tuple[dict[str, object], str]] = {}
    # Answered in parts as they are parsed, through one pickler (its memo keeps the
    # graph dicts shared across parts): the caller unpickles a part while this
    # process parses the next, so only the last part is left when both are done.
    pickler = pickle.Pickler(sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    for start in range(0, len(jobs), ANSWER_PART):
        part = jobs[start : start + ANSWER_PART]
        outcomes: list[Any]
        if kind == "directory":
            outcomes = [parse_directory_for_index(job, graph_memo, graph_ids) for job in part]
        else:
            outcomes = [parse_for_index(job, graph_memo, graph_ids) for job in part]
        pickler.dump(outcomes)
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
