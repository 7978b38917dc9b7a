"""Parsing the runs of a cold scan on several cores.

A scan that must parse many runs (no index yet, or a new index format) is
bound by decoding protobuf records in Python, one core's work. From
``PARALLEL_FROM_RUNS`` runs on, the runs are split into contiguous parts:
this process parses the first, and helper processes
(``python -m rankscribe.lineage.index._parse_worker``, the same interpreter, fed
and read through pipes) parse the others. A helper answers in parts as it
parses, which a thread here unpickles meanwhile. Helpers are separate programs, not
forks: nothing of the caller (threads, locks, an MPI runtime, its
``__main__``) is copied or run again. A helper that cannot start, fails or
times out costs only time: its part is parsed here.

``RANKSCRIBE_LINEAGE_WORKERS`` sets how many processes parse (1: only this
one); by default as many as there are usable cores, at most 4.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from rankscribe.lineage.record._discovery import LineageFile

if TYPE_CHECKING:
    from rankscribe.lineage.record._discovery import SummaryDir

logger = logging.getLogger(__name__)

__all__ = [
    "PARALLEL_FROM_RUNS",
    "WORKERS_VARIABLE",
    "DirectoryJob",
    "DirectoryOutcome",
    "Job",
    "Outcome",
    "parse_all",
    "summarize_and_parse_all",
]

PARALLEL_FROM_RUNS = 4000
WORKERS_VARIABLE = "RANKSCRIBE_LINEAGE_WORKERS"
MAX_WORKERS = 4
WORKER_MODULE = "rankscribe.lineage.index._parse_worker"
# A helper parses thousands of runs a second; this only bounds a stuck one.
HELPER_TIMEOUT_SECONDS = 900.0

Job = tuple[str, list[LineageFile]]  # a run's directory and its lineage files
Outcome = tuple[dict[str, Any] | None, list[str], bool]  # summary, warnings, cacheable
# A directory to summarize and parse: path, relative path, mtime (discovery.Pending).
DirectoryJob = tuple[str, str, int]
# Its run (None: no summary file) and outcome, or None and the listing error.
DirectoryOutcome = tuple["SummaryDir | None", "Outcome | None", "str | None"]


def _processes(jobs: int) -> int:
    if jobs < PARALLEL_FROM_RUNS:
        return 1
    configured = os.environ.get(WORKERS_VARIABLE, "").strip()
    if configured:
        try:
            return max(1, int(configured))
        except ValueError:
            logger.warning("ignoring %s=%r: not a whole number", WORKERS_VARIABLE, configured)
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_WORKERS))


def _helper_environment() -> dict[str, str]:
    """The caller's environment, with its import path (it may differ from PYTHONPATH)."""
    paths = [path for path in sys.path if isinstance(path, str) and path]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


class _Helper:
    """One helper process parsing one part, waited for on a thread."""

    def __init__(self, kind: str, part: Sequence[Any]) -> None:
        self.outcomes: list[Any] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._run, args=((kind, list(part)),), daemon=True)
        self._thread.start()

    def _run(self, request: tuple[str, list[Any]]) -> None:
        part = request[1]
        process: subprocess.Popen[bytes] | None = None
        # Bounds every blocking read and write below: a stuck helper is killed.
        killer: threading.Timer | None = None
        try:
            process = self._process = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=_helper_environment(),
            )
            killer = threading.Timer(HELPER_TIMEOUT_SECONDS, process.kill)
            killer.daemon = True
            killer.start()
            assert process.stdin is not None and process.stdout is not None
            # The helper reads all of its input before it answers: no deadlock.
            with process.stdin:
                process.stdin.write(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))
            # Parts as the helper answers them, one unpickler (the helper pickles with one).
            answers = pickle.Unpickler(process.stdout)
            outcomes: list[Any] = []
            while len(outcomes) < len(part):
                answered = answers.load()  # our own helper's answer
                if not isinstance(answered, list) or not answered:
                    break
                outcomes.extend(answered)
            process.stdout.close()
            if process.wait(timeout=HELPER_TIMEOUT_SECONDS) == 0 and len(outcomes) == len(part):
                self.outcomes = outcomes
        except (OSError, subprocess.SubprocessError, pickle.UnpicklingError, EOFError) as error:
            logger.debug("a lineage parsing helper failed: %s", error)
        finally:
            if killer is not None:
                killer.cancel()
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=HELPER_TIMEOUT_SECONDS)

    def join(self) -> list[Any] | None:
        self._thread.join(HELPER_TIMEOUT_SECONDS + 60)
        return self.outcomes


_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def _shared(kind: str, items: Sequence[_Item], one: Callable[[_Item], _Result]) -> list[_Result]:
    """``[one(item) for item in items]``, shared with helper processes when there are many."""
    processes = _processes(len(items))
    if processes <= 1 or not sys.executable:
        return [one(item) for item in items]
    size = -(-len(items) // processes)
    parts = [items[start : start + size] for start in range(0, len(items), size)]
    helpers = [_Helper(kind, part) for part in parts[1:]]
    results = [one(item) for item in parts[0]]
    for helper, part in zip(helpers, parts[1:], strict=True):
        done = helper.join()
        results.extend(done if done is not None else [one(item) for item in part])
    return results


def parse_all(jobs: Sequence[Job], parse_one: Callable[[Job], Outcome]) -> list[Outcome]:
    """``[parse_one(job) for job in jobs]``, shared with helpers when there are many."""
    return _shared("parse", jobs, parse_one)


def summarize_and_parse_all(
    jobs: Sequence[DirectoryJob], one: Callable[[DirectoryJob], DirectoryOutcome]
) -> list[DirectoryOutcome]:
    """``[one(job) for job in jobs]``: list and parse run directories, shared likewise."""
    return _shared("directory", jobs, one)
