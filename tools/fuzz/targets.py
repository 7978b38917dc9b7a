"""What the fuzzer drives, and what counts as a failure (shared by the fuzzer and the tests).

Each target takes the bytes of one hostile file, puts them where a reader
would find them (a summary, TensorBoard or lineage file in a run under a base
dir) and reads them through every public reader: the event readers, the
directory loaders, ``rankscribe-dump``, the lineage queries and the
``rankscribe-lineage`` CLI. A reader may refuse a file only with the
project's own errors; anything else escaping (``MemoryError``,
``UnicodeDecodeError``, PIL's errors, a ``TypeError`` from ``json``) is a bug,
and so is a lineage answer holding a value that is not a plain JSON type.

An input that takes more than :data:`TIME_LIMIT` seconds of CPU time is a
failure too (a reader that is slow on some input lets a planted file stall a
command): every target in :data:`TARGETS` is wrapped by :func:`time_limited`.

``tools/fuzz/fuzz.py`` runs them under atheris, ``tools/fuzz/hostile.py`` runs
them on structure-aware hostile inputs, and ``tests/*/test_fuzz_corpus.py``
replay every input in ``tools/fuzz/corpus/<target>/`` through them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import itertools
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _summary_name(number: int) -> str:
    return f"events.out.events.summary.{1700000000 + number}.0.fuzzhost_MS"


def _lineage_name(number: int) -> str:
    return f"events.out.events.summary.{1700000000 + number}.0.fuzzhost_lineage"


def _tensorboard_name(number: int) -> str:
    return f"events.out.tfevents.{1700000000 + number}.fuzzhost"


# A run MindSpore itself recorded: every query over a base dir must keep finding it.
GOOD_RUN = (
    Path(__file__).resolve().parents[2]
    / "tests"
    / "compat"
    / "data"
    / "mindspore-2.10"
    / "lineage_train_eval"
)

# Nothing a reader logs about a hostile file is of interest here.
logging.getLogger("rankscribe").setLevel(logging.CRITICAL + 1)


class FuzzFailureError(AssertionError):
    """A reader misbehaved on an input: the message says which and how."""


#: The most CPU time (seconds) one input may take. Process time, not wall time: on a
#: loaded machine the wall clock counts other programs' work, CPU time only the input's.
TIME_LIMIT = 1.0


class _TimeUp(BaseException):
    """Raised in the target by the CPU-time alarm. A BaseException, so that no reader's
    ``except Exception`` can swallow it and keep a runaway input going."""


@contextlib.contextmanager
def _cpu_alarm(limit: float) -> Iterator[None]:
    """Interrupt the code inside with :class:`_TimeUp` once the process has used ``limit``
    seconds of CPU time (``ITIMER_PROF``; the regular expression engine and ``json``
    check for signals, so a quadratic C loop is cut short too). Where no timer can be
    set (not the main thread, no ``setitimer``), nothing: the time is checked after."""
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def time_up(_signum: int, _frame: object) -> None:
        raise _TimeUp

    previous = signal.signal(signal.SIGPROF, time_up)
    signal.setitimer(signal.ITIMER_PROF, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def time_limited(
    target: Callable[[bytes], None], limit: float = TIME_LIMIT
) -> Callable[[bytes], None]:
    """``target``, failing with :class:`FuzzFailureError` when one input takes more than
    ``limit`` seconds of CPU time (stopped by an alarm at the limit where one can be set,
    measured after the input otherwise; not at all under a tracer such as coverage's)."""

    @functools.wraps(target)
    def run(data: bytes) -> None:
        if sys.gettrace() is not None:
            # Under a tracer (coverage's, in the measured envs) an input's time is the
            # tracer's, and an alarm raised inside the tracer's own locked code would
            # leave its lock held.
            target(data)
            return
        start = time.process_time()
        try:
            with _cpu_alarm(limit):
                target(data)
        except _TimeUp:
            raise FuzzFailureError(
                f"{target.__name__}: the input took more than {limit:g} s of CPU time "
                "(stopped there)"
            ) from None
        spent = time.process_time() - start
        if spent > limit:
            raise FuzzFailureError(
                f"{target.__name__}: the input took {spent:.2f} s of CPU time, more than "
                f"the limit of {limit:g} s"
            )

    return run


class _Scratch:
    """One directory per process, reused: a fresh temporary dir per input costs more than the
    readers themselves. Each input gets a new file name (the creation time in the name counts
    up), so no cache keyed on name, size and mtime can confuse two inputs."""

    def __init__(self) -> None:
        self._root: Path | None = None
        self._count = itertools.count(1)

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="rankscribe-fuzz-"))
            atexit.register(shutil.rmtree, self._root, True)
        return self._root

    def place(self, folder: str, name_of: Callable[[int], str], data: bytes) -> Path:
        """Write ``data`` as the only event file of ``folder`` (under the scratch root)."""
        directory = self.root / folder
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.iterdir():
            if old.is_file():
                old.unlink()
        path = directory / name_of(next(self._count))
        path.write_bytes(data)
        return path


_scratch = _Scratch()


def _quiet(function: Callable[..., int], *args: Any) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return function(*args)


def _expect(
    call: str, allowed: tuple[type[BaseException], ...], function: Callable[[], Any]
) -> Any:
    try:
        return function()
    except allowed:
        return None
    except Exception as error:
        raise FuzzFailureError(f"{call} raised {type(error).__name__}: {error}") from error


def _writer_errors() -> tuple[type[BaseException], ...]:
    from rankscribe.writer import WriterError

    return (WriterError,)


def _lineage_errors() -> tuple[type[BaseException], ...]:
    from rankscribe.lineage import LineageError

    return (LineageError, *_writer_errors())


def _check_plain_json(call: str, value: Any) -> None:
    """Lineage answers are made of dict, list, str, int, float, bool and None only."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        return  # NaN and infinities are floats: lineage keeps a diverged loss
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                kind = type(key).__name__
                raise FuzzFailureError(f"{call} returned a key of type {kind}: {key!r}")
            _check_plain_json(call, item)
        return
    if isinstance(value, list):
        for item in value:
            _check_plain_json(call, item)
        return
    raise FuzzFailureError(f"{call} returned a value of type {type(value).__name__}: {value!r:.80}")


def _read_summary_values(directory: Path) -> None:
    from rankscribe.writer.events import Image, load_dir
    from rankscribe.writer.reader import scalars

    errors = _writer_errors()
    events = _expect("load_dir", errors, lambda: load_dir(directory)) or []
    for event in events:
        for value in getattr(event, "values", None) or ():
            if isinstance(value.value, Image):
                _expect("Image.pixels", errors, value.value.pixels)
    _expect("scalars", errors, lambda: scalars(directory))


def _check_scalar_columns(path: Path, *, tensorboard: bool) -> None:
    """``scalar_arrays``: str tags, int64/float64 columns; for a summary file the same points
    as the protobuf messages hold (its fast path reads bytes protobuf never sees)."""
    import numpy as np

    from rankscribe.writer.events import read_events
    from rankscribe.writer.reader import scalar_arrays

    errors = _writer_errors()
    got = _expect("scalar_arrays", errors, lambda: scalar_arrays(path))
    if got is None:
        return
    for tag, (steps, values) in got.items():
        if not isinstance(tag, str) or steps.dtype != np.int64 or values.dtype != np.float64:
            raise FuzzFailureError(f"scalar_arrays returned {tag!r}: {steps.dtype}, {values.dtype}")
        if steps.shape != values.shape:
            raise FuzzFailureError(f"scalar_arrays returned {tag!r} with columns of two lengths")
    if tensorboard:
        return
    steps_of: dict[str, list[int]] = {}
    values_of: dict[str, list[float]] = {}
    for event in read_events(path):
        if event.WhichOneof("what") != "summary":
            continue
        for value in event.summary.value:
            if value.WhichOneof("value") == "scalar_value":
                tag = value.tag
                text = tag if isinstance(tag, str) else tag.decode("utf-8", "backslashreplace")
                steps_of.setdefault(text, []).append(event.step)
                values_of.setdefault(text, []).append(value.scalar_value)
    if list(got) != list(steps_of) or any(
        got[tag][0].tolist() != steps_of[tag]
        or not np.array_equal(got[tag][1], np.array(values_of[tag]), equal_nan=True)
        for tag in steps_of
    ):
        raise FuzzFailureError("scalar_arrays and protobuf read different points")


def summary_file(data: bytes) -> None:
    """A summary (``_MS``) file: event readers, loaders, decoded values, scalar columns (checked
    against protobuf), rankscribe-dump."""
    from rankscribe.writer import dump
    from rankscribe.writer.events import read_events

    errors = _writer_errors()
    path = _scratch.place("summary", _summary_name, data)
    _expect("read_events(strict=True)", errors, lambda: list(read_events(path, strict=True)))
    _read_summary_values(path.parent)
    _check_scalar_columns(path, tensorboard=False)
    status = _expect(
        "rankscribe-dump --full", (), lambda: _quiet(dump.main, ["--full", str(path.parent)])
    )
    if status not in (0, 1):
        raise FuzzFailureError(f"rankscribe-dump --full exited {status}")


def tensorboard_file(data: bytes) -> None:
    """A TensorBoard events file: the TensorBoard reader, scalar columns and rankscribe-dump."""
    from rankscribe.writer import dump
    from rankscribe.writer.events import read_tensorboard_events

    errors = _writer_errors()
    path = _scratch.place("tensorboard", _tensorboard_name, data)
    _expect(
        "read_tensorboard_events(strict=True)",
        errors,
        lambda: list(read_tensorboard_events(path, strict=True)),
    )
    _check_scalar_columns(path, tensorboard=True)
    status = _expect("rankscribe-dump", (), lambda: _quiet(dump.main, ["--full", str(path)]))
    if status not in (0, 1):
        raise FuzzFailureError(f"rankscribe-dump exited {status}")


def lineage_file(data: bytes) -> None:
    """A lineage file in one run of a base dir beside a good run: every query answers."""
    from rankscribe.lineage import cli as lineage_cli
    from rankscribe.lineage import filter_runs, filter_summary_lineage, get_summary_lineage
    from rankscribe.writer.events import load_lineage_dir

    errors = _lineage_errors()
    run = _scratch.place("base/hostile", _lineage_name, data)
    base, good = run.parent.parent, run.parent.parent / "good"
    if not good.exists():
        shutil.copytree(GOOD_RUN, good)
    _expect("load_lineage_dir", _writer_errors(), lambda: load_lineage_dir(run.parent))
    answer = _expect("get_summary_lineage", errors, lambda: get_summary_lineage(str(run.parent)))
    _check_plain_json("get_summary_lineage", answer)
    for condition in (None, {"loss": {"lt": 1.0}, "sorted_name": "metric/accuracy"}):
        answer = _expect(
            f"filter_summary_lineage({condition})",
            errors,
            lambda c=condition: filter_summary_lineage(str(base), c),
        )
        _check_plain_json("filter_summary_lineage", answer)
        _expect("json.dumps(filter_summary_lineage)", (), lambda a=answer: json.dumps(a))
        if condition is None:
            found = [item.get("summary_dir") for item in (answer or {}).get("object", [])]
            if str(good) not in found:
                raise FuzzFailureError(f"a hostile run hid the good run from the query: {found}")
    rows = _expect("filter_runs", errors, lambda: filter_runs(str(base), "loss < 1e9"))
    _check_plain_json("filter_runs", rows)
    status = _expect(
        "rankscribe-lineage query", (), lambda: _quiet(lineage_cli.main, ["query", str(base)])
    )
    if status not in (0, 1, 2):
        raise FuzzFailureError(f"rankscribe-lineage query exited {status}")


JOB_RANKS = (2, 3)


def job_files(data: bytes) -> tuple[int, int | None, list[tuple[bytes | None, bytes | None]]]:
    """Split a job-view input: (ranks, world_size for the merge, per rank (summary, lineage)).

    The first byte chooses 2 or 3 ranks and the merge's ``world_size`` (None, the
    ranks, or one more: a missing rank). Then, per rank, a summary and a lineage
    file, each a 4-byte little-endian length and that many bytes (cut at the
    end of the input; a file the input does not reach is not written).
    """
    head = data[0] if data else 0
    ranks = JOB_RANKS[head % 2]
    world_size = (None, ranks, ranks + 1)[(head >> 1) % 3]
    files: list[tuple[bytes | None, bytes | None]] = []
    at = 1
    for _ in range(ranks):
        pair: list[bytes | None] = []
        for _ in range(2):
            if at + 4 > len(data):
                pair.append(None)
                continue
            length = int.from_bytes(data[at : at + 4], "little")
            pair.append(data[at + 4 : at + 4 + length])
            at += 4 + length
        files.append((pair[0], pair[1]))
    return ranks, world_size, files


def pack_job_files(world_mode: int, files: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """The input :func:`job_files` splits back into ``files`` (2 or 3 ranks; the seeds)."""
    out = bytearray([JOB_RANKS.index(len(files)) | (world_mode << 1)])
    for pair in files:
        for blob in pair:
            data = blob or b""
            out += len(data).to_bytes(4, "little") + data
    return bytes(out)


def job_view(data: bytes) -> None:
    """A job dir of 2-3 ranks with hostile summary and lineage files: the merge and job view.

    ``merge_run_dir`` and ``write_job_view`` (with each rank's ``series_from_dir``)
    either succeed, with verdicts of plain types, or refuse with the project's errors.
    """
    from rankscribe.jobview import series_from_dir, write_job_view
    from rankscribe.lineage import merge_run_dir

    errors = _lineage_errors()
    ranks, world_size, files = job_files(data)
    job = _scratch.root / f"job-{next(_scratch._count)}"
    try:
        for rank, (summary, lineage) in enumerate(files):
            folder = job / f"rank_{rank}"
            folder.mkdir(parents=True)
            if summary is not None:
                (folder / _summary_name(rank)).write_bytes(summary)
            if lineage is not None:
                (folder / _lineage_name(rank)).write_bytes(lineage)
        outcome = _expect(
            f"merge_run_dir(world_size={world_size})",
            errors,
            lambda: merge_run_dir(job, world_size=world_size, host="fuzzhost"),
        )
        if outcome is not None:
            _check_plain_json("merge_run_dir's lineage", outcome.lineage.sections)
            if outcome.job_view is not None:
                _check_plain_json("merge_run_dir's verdicts", outcome.job_view.verdicts)
        series = _expect(
            "series_from_dir",
            errors,
            lambda: {rank: series_from_dir(job / f"rank_{rank}", rank) for rank in range(ranks)},
        )
        if series is not None:
            view = _expect(
                "write_job_view",
                errors,
                lambda: write_job_view(
                    job, series, world_size=ranks, tensorboard=True, host="fuzzhost"
                ),
            )
            if view is not None:
                _check_plain_json("write_job_view's verdicts", view.verdicts)
    finally:
        shutil.rmtree(job, ignore_errors=True)


def live_state_file(data: bytes) -> None:
    """The live view's state file of a job dir: ``live_lines`` and ``rankscribe-lineage show``.

    ``show`` never fails on it: ``live_lines`` raises nothing at all (a state file
    it cannot use is no live view), and every line it returns is a str.
    """
    from rankscribe.jobview import live_lines
    from rankscribe.jobview.protocol import LIVE_STATE_NAME
    from rankscribe.lineage import cli as lineage_cli

    job = _scratch.root / "livejob"
    job.mkdir(exist_ok=True)
    (job / LIVE_STATE_NAME).write_bytes(data)
    lines = _expect("live_lines", (), lambda: live_lines(job))
    if not all(isinstance(line, str) for line in lines):
        raise FuzzFailureError(f"live_lines returned {lines!r:.200}")
    status = _expect(
        "rankscribe-lineage show", (), lambda: _quiet(lineage_cli.main, ["show", str(job)])
    )
    if status not in (0, 1, 2):
        raise FuzzFailureError(f"rankscribe-lineage show exited {status}")


def claim_file(data: bytes) -> None:
    """A claim file planted in a job dir (written an hour ago): ``claim_job_dir`` with each
    ``on_exists``. "new" claims the next directory; "error" refuses with
    ``JobDirClaimedError``; "append" joins with the claim's job id or refuses with
    ``JobDirError``; nothing else escapes, and no claim is waited for.
    """
    from rankscribe.ranks import JobClaim, claim_job_dir
    from rankscribe.ranks.errors import JobDirClaimedError, JobDirError
    from rankscribe.ranks.files import CLAIM_FILE_NAME

    base = _scratch.root / f"claims-{next(_scratch._count)}"
    try:
        for on_exists in ("new", "error", "append"):
            folder = base / on_exists
            folder.mkdir(parents=True)
            planted = folder / CLAIM_FILE_NAME
            planted.write_bytes(data)
            os.utime(planted, (1_700_000_000, 1_700_000_000))
            claim = _expect(
                f"claim_job_dir(on_exists={on_exists!r})",
                (JobDirError,),
                lambda f=folder, o=on_exists: claim_job_dir(f, on_exists=o),
            )
            if on_exists == "new" and (
                claim is None or claim != JobClaim(base / "new-2", claim.job_id)
            ):
                raise FuzzFailureError(f"on_exists='new' claimed {claim!r}")
            if on_exists == "error" and claim is not None:
                raise FuzzFailureError(f"on_exists='error' claimed {claim!r}")
            if claim is not None and not isinstance(claim.job_id, str):
                raise FuzzFailureError(f"a job id of type {type(claim.job_id).__name__}")
            if planted.read_bytes() != data:
                raise FuzzFailureError(f"on_exists={on_exists!r} changed the planted claim")
        try:
            claim_job_dir(base / "error", on_exists="error")
        except JobDirClaimedError:
            pass
        else:
            raise FuzzFailureError("on_exists='error' did not refuse a claimed directory")
    finally:
        shutil.rmtree(base, ignore_errors=True)


#: The tree of tree_message: 7 ranks, fan-in 2; rank 0 hears rank 1 (subtree 1, 3-4).
TREE_SENDER, TREE_WORLD, TREE_FAN_IN = 1, 7, 2


def tree_message(data: bytes) -> None:
    """A message from rank 1 to rank 0 of a 7-rank tree, as rank 0's live view takes it.

    The first byte says what follows: 0, what rank 1 put on the channel (an envelope:
    the tree's header, then a job-view partial), delivered twice (a replay: taken once
    at most); anything else, a partial, which the target wraps in a valid envelope (so
    that mutations reach the partial's decoder, not only the envelope's checks). Rank 0
    receives it, decodes each message with rank 1's subtree and merges it. A message is refused with
    ``PartialFormatError`` only; a partial that is taken names only ranks of the
    subtree, and its statistics read.
    """
    from rankscribe.jobview.protocol import JobPartial, PartialFormatError
    from rankscribe.ranks.testing import MemoryTreeChannel, MemoryTreeHub

    hub = MemoryTreeHub()
    root = MemoryTreeChannel(hub, 0, TREE_WORLD, TREE_FAN_IN)
    if data[:1] == b"\x00":
        hub.boxes[TREE_SENDER].extend([data[1:], data[1:]])  # sent, then replayed
    else:
        sender = MemoryTreeChannel(hub, TREE_SENDER, TREE_WORLD, TREE_FAN_IN)
        sender.send(1, data[1:], timeout=1)
    subtree = list(root.subtree(TREE_SENDER))
    merged = JobPartial.of_rank(0, {"loss/auto": [(1, 0.5), (2, 0.25)]})
    received = root.receive(0, timeout=0).get(TREE_SENDER, [])
    if len(received) > 1:
        raise FuzzFailureError(f"a message sent once and replayed was taken {len(received)} times")
    for _, payload in received:
        partial = _expect(
            "JobPartial.from_bytes",
            (PartialFormatError,),
            lambda p=payload: JobPartial.from_bytes(p, ranks=subtree),
        )
        if partial is None:
            continue
        outside = [
            rank
            for rank in (*partial.ranks, *partial.finished, *partial.nonfinite_loss)
            if not any(first <= rank <= last for first, last in subtree)
        ]
        if outside:
            raise FuzzFailureError(f"a partial from rank 1 names ranks {outside}")
        _expect("JobPartial.merge", (), lambda p=partial: merged.merge(p))
        statistics = _expect("JobPartial.job_statistics", (), merged.job_statistics)
        _check_plain_json("last_steps", {str(k): v for k, v in statistics.last_steps.items()})


def _container_as_index(data: bytes) -> None:
    """``data`` as the lineage index of a base dir holding the good run: the query answers
    with plain values and still finds the good run, whatever the index holds.

    An archive whose document claims to be an index is also read with this code's header
    put in (its CRCs made again): its columns then meet every check behind the header,
    whichever version of the code wrote the input.
    """
    from rankscribe.jobview import _npz
    from rankscribe.lineage.index._index_file import index_header

    _query_with_index(data)
    try:
        document, arrays = _npz.unpack_arrays(data)
    except _npz.ArchiveError:
        return
    if isinstance(document, dict) and document.get("format") == index_header()["format"]:
        document.update(index_header())
        _query_with_index(_npz.pack_arrays(document, arrays))


def _query_with_index(data: bytes) -> None:
    from rankscribe.lineage import filter_runs
    from rankscribe.lineage.index._cache import INDEX_NAME, forget_scans

    errors = _lineage_errors()
    base = _scratch.root / "indexed"
    good = base / "good"
    if not good.exists():
        shutil.copytree(GOOD_RUN, good)
    index = base / INDEX_NAME
    index.unlink(missing_ok=True)
    descriptor = os.open(index, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # ours: trusted
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)
    forget_scans()  # as a new process: the index is read from the file
    for where in (None, "loss < 1e9"):
        rows = _expect(f"filter_runs({where})", errors, lambda w=where: filter_runs(str(base), w))
        _check_plain_json("filter_runs", rows)
        found = [item.get("summary_dir") for item in (rows or {}).get("object", [])]
        if where is None and found != [str(good)]:
            raise FuzzFailureError(f"a hostile index changed the runs a query lists: {found}")


def _container_as_partial(data: bytes) -> None:
    """``data`` as a job-view partial: refused with PartialFormatError, or a partial that
    merges with another and travels again."""
    from rankscribe.jobview.protocol import JobPartial, PartialFormatError

    partial = _expect(
        "JobPartial.from_bytes", (PartialFormatError,), lambda: JobPartial.from_bytes(data)
    )
    if partial is None:
        return
    partial.merge(JobPartial.of_rank(1 << 20, {"loss": [(1, 1.0)]}))
    again = _expect(
        "JobPartial.from_bytes(to_bytes())", (), lambda: JobPartial.from_bytes(partial.to_bytes())
    )
    _check_plain_json(
        "a decoded partial's last steps", {str(k): v for k, v in again.last_steps.items()}
    )


def container(data: bytes) -> None:
    """The lineage package's binary container (an ``.npz``): the same bytes read as a lineage
    index and as a job-view partial (the two things stored in it)."""
    _container_as_index(data)
    _container_as_partial(data)


def control_file(data: bytes) -> None:
    """The live view's control file of a job dir, read as rank 0 reads it each round: the
    settings (a dict of known keys, each of its type) or None; nothing raises."""
    from rankscribe.jobview.protocol import CONTROL_NAME, ControlFile

    job = _scratch.root / "controljob"
    job.mkdir(exist_ok=True)
    path = job / CONTROL_NAME
    path.unlink(missing_ok=True)
    path.write_bytes(data)
    settings = _expect("ControlFile.read", (), ControlFile(job).read)
    if settings is None:
        return
    kinds = {
        "job_view_interval": float,
        "cost_floor": float,
        "confidence": float,
        "window_steps": int,
    }
    for key, value in settings.items():
        if type(value) is not kinds.get(key):
            raise FuzzFailureError(f"ControlFile.read returned {key!r}: {value!r:.80}")


def _job_with_golden_rank(name: str) -> Path:
    """A new job dir whose ``rank_0`` holds the golden MindSpore lineage."""
    job = _scratch.root / f"{name}-{next(_scratch._count)}"
    (job / "rank_0").mkdir(parents=True)
    for source in GOOD_RUN.glob("*_lineage"):
        shutil.copyfile(source, job / "rank_0" / source.name)
    return job


def _merge_job(job: Path) -> None:
    from rankscribe.lineage import merge_run_dir

    outcome = _expect(
        "merge_run_dir", _lineage_errors(), lambda: merge_run_dir(job, host="fuzzhost")
    )
    if outcome is not None:
        _check_plain_json("merge_run_dir's lineage", outcome.lineage.sections)
        if not all(isinstance(rank, int) for rank in outcome.ranks_missing):
            raise FuzzFailureError(f"merge_run_dir's missing ranks: {outcome.ranks_missing!r:.80}")


def rank_dirs_file(data: bytes) -> None:
    """A job dir's ``.rankscribe-rank-dirs`` beside a good ``rank_0``: ``read_rank_dirs``
    answers with ranks and absolute paths (never raises), and the merge of the job
    succeeds or refuses with the project's errors."""
    from rankscribe.ranks.files import RANK_DIRS_FILE_NAME, read_rank_dirs

    job = _job_with_golden_rank("rankdirs")
    try:
        (job / RANK_DIRS_FILE_NAME).write_bytes(data)
        found = _expect("read_rank_dirs", (), lambda: read_rank_dirs(job))
        if not all(
            isinstance(rank, int) and rank >= 0 and isinstance(path, str) and os.path.isabs(path)
            for rank, path in found.items()
        ):
            raise FuzzFailureError(f"read_rank_dirs returned {found!r:.200}")
        _merge_job(job)
    finally:
        shutil.rmtree(job, ignore_errors=True)


def train_start_file(data: bytes) -> None:
    """A rank's ``.rankscribe-train-start`` (a lineage event file) in a job whose rank has
    no train lineage of its own: the merge reads it, succeeding with plain values or
    refusing with the project's errors."""
    from rankscribe.lineage.recording import TRAIN_START_FILE_NAME

    job = _scratch.root / f"trainstart-{next(_scratch._count)}"
    rank = job / "rank_0"
    rank.mkdir(parents=True)
    try:
        (rank / TRAIN_START_FILE_NAME).write_bytes(data)
        _merge_job(job)
    finally:
        shutil.rmtree(job, ignore_errors=True)


def members_file(data: bytes) -> None:
    """The file rendezvous' ``members.json``, as each joining rank reads it: an object of
    objects, or ``RendezvousError``."""
    from rankscribe.ranks.backends._rendezvous import read_members
    from rankscribe.ranks.errors import RendezvousError

    folder = _scratch.root / "rendezvous"
    folder.mkdir(exist_ok=True)
    path = folder / "members.json"
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)
    members = _expect("read_members", (RendezvousError,), lambda: read_members(path))
    if members is not None and not all(isinstance(key, str) for key in members):
        raise FuzzFailureError(f"read_members returned {members!r:.200}")


def checkpoint_file(data: bytes) -> None:
    """A checkpoint file (safetensors: a JSON header, its metadata holding JSON texts):
    ``load_checkpoint`` answers with arrays and a dict of append info, or refuses with
    ``CheckpointError``."""
    import numpy as np

    from rankscribe.collector import load_checkpoint
    from rankscribe.collector.errors import CheckpointError

    folder = _scratch.root / "checkpoints"
    folder.mkdir(exist_ok=True)
    path = folder / f"net-{next(_scratch._count)}.ckpt"
    path.write_bytes(data)
    try:
        loaded = _expect("load_checkpoint", (CheckpointError,), lambda: load_checkpoint(path))
    finally:
        path.unlink()
    if loaded is None:
        return
    if not all(isinstance(value, np.ndarray) for value in loaded.parameters.values()):
        raise FuzzFailureError("load_checkpoint returned a parameter that is not an array")
    if not isinstance(loaded.append_info, dict):
        raise FuzzFailureError(f"load_checkpoint's append info: {loaded.append_info!r:.80}")


WRITER_TARGETS: dict[str, Callable[[bytes], None]] = {
    "summary": time_limited(summary_file),
    "tensorboard": time_limited(tensorboard_file),
}
LINEAGE_TARGETS: dict[str, Callable[[bytes], None]] = {
    "lineage": time_limited(lineage_file),
    "jobview": time_limited(job_view),
    "livestate": time_limited(live_state_file),
    "claim": time_limited(claim_file),
    "treemessage": time_limited(tree_message),
    "container": time_limited(container),
    "control": time_limited(control_file),
    "rankdirs": time_limited(rank_dirs_file),
    "trainstart": time_limited(train_start_file),
    "members": time_limited(members_file),
}
COLLECTOR_TARGETS: dict[str, Callable[[bytes], None]] = {
    "checkpoint": time_limited(checkpoint_file),
}
TARGETS = {**WRITER_TARGETS, **LINEAGE_TARGETS, **COLLECTOR_TARGETS}

CORPUS = Path(__file__).resolve().parent / "corpus"


def corpus_inputs(target: str) -> list[Path]:
    """Every saved input of ``target``, in name order (an empty list if there are none)."""
    folder = CORPUS / target
    return sorted(path for path in folder.iterdir() if path.is_file()) if folder.is_dir() else []


__all__ = [
    "COLLECTOR_TARGETS",
    "CORPUS",
    "LINEAGE_TARGETS",
    "TARGETS",
    "TIME_LIMIT",
    "WRITER_TARGETS",
    "FuzzFailureError",
    "corpus_inputs",
    "job_files",
    "pack_job_files",
    "time_limited",
]

if os.environ.get("RANKSCRIBE_FUZZ_DEBUG"):  # pragma: no cover - for reproducing by hand
    logging.getLogger("rankscribe").setLevel(logging.DEBUG)
