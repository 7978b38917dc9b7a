"""Every rank's machine: the ``rankscribe/system/*`` tags, and a straggler verdict's evidence.

The collector samples each rank's process, host and accelerator every
``system_interval`` seconds (``docs/system-metrics.md``) as ordinary scalars:
the job view gives them bands like any tag, and the straggler rule never judges
them (they are not timings). What this module adds is the *evidence*: for each
rank a straggler verdict names, the readings that differ most from the other
ranks' median — its own median reading against the median over the other
ranks of theirs (for a throttle flag, the share of its samples with the flag
set) — as short sentences ("SM clock 1.41 GHz against a median of 1.98 GHz",
"thermal throttling in 60 % of the samples (others: 0 %)").

Samples are taken on each rank's own clock, so the ranks' samples need not
fall on the same steps: the evidence compares each rank's whole series with
the others', not step by step. The readings come from the ranks' series in
memory or from the rank directories on disk (the named ranks and at most
:data:`REFERENCE_RANKS` others, so a large job reads a bounded number of them).
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rankscribe.jobview.job._statistics import SYSTEM_TAG_PREFIX
from rankscribe.writer import WriterError, reader

if TYPE_CHECKING:
    import numpy.typing as npt

    Readings = Mapping[int, Mapping[str, tuple[npt.NDArray[Any], npt.NDArray[Any]]]]

logger = logging.getLogger(__name__)

__all__ = [
    "REFERENCE_RANKS",
    "SYSTEM_TAGS",
    "Evidence",
    "evidence_keys",
    "evidence_lines",
    "evidence_records",
    "machine_evidence",
    "machine_lines",
    "machine_summary",
    "read_readings",
    "series_readings",
]

#: Other ranks read from disk, at most, as the reference for the named ranks.
REFERENCE_RANKS = 16
#: Evidence items per rank, at most, the strongest first.
MOST_ITEMS = 3
#: A level counts as evidence when it differs from the median by this share of it...
LEVEL_SHARE = 0.1
#: ... and a flag when the shares of samples with it set differ by this much.
FLAG_SHARE = 0.2
#: A rank's core this busy (percent) while the rank itself runs less is a shared core.
BUSY_CORE = 90.0


@dataclass(frozen=True)
class _Reading:
    name: str  # the tag without the prefix
    label: str
    kind: str  # "level" or "flag"
    unit: str  # how a value is written (see _format)
    #: Cited as evidence: a reading that says why a rank is slow. The process's own
    #: memory, files and I/O differ by role (rank 0 writes the job's files) and are not.
    evidence: bool = True


_READINGS = (
    _Reading("cpu_percent", "CPU", "level", "percent"),
    _Reading("core_percent", "its core", "level", "percent"),
    _Reading("ctx_switches_involuntary", "involuntary context switches", "level", "rate"),
    _Reading("rss_bytes", "memory (RSS)", "level", "bytes", evidence=False),
    _Reading("threads", "threads", "level", "count", evidence=False),
    _Reading("open_files", "open files", "level", "count", evidence=False),
    _Reading("io_read_bytes", "bytes read", "level", "bytes", evidence=False),
    _Reading("io_write_bytes", "bytes written", "level", "bytes", evidence=False),
    _Reading("load_1m", "host load", "level", "count"),
    _Reading("memory_available_bytes", "host memory available", "level", "bytes"),
    _Reading("gpu_utilization", "GPU utilisation", "level", "percent"),
    _Reading("gpu_memory_used_bytes", "GPU memory used", "level", "bytes"),
    _Reading("gpu_sm_clock_mhz", "SM clock", "level", "mhz"),
    _Reading("gpu_power_watts", "GPU power", "level", "watts"),
    _Reading("gpu_temperature_c", "GPU temperature", "level", "celsius"),
    _Reading("gpu_throttle_reasons", "throttle reasons", "bitmask", "count"),
    _Reading("gpu_throttle_thermal", "thermal throttling", "flag", "share"),
    _Reading("gpu_throttle_power", "power throttling", "flag", "share"),
    _Reading("gpu_throttle_hw_slowdown", "hardware slowdown", "flag", "share"),
)
_BY_TAG = {SYSTEM_TAG_PREFIX + reading.name: reading for reading in _READINGS}
#: Every tag the sampler records (each only when its reading is available).
SYSTEM_TAGS = tuple(_BY_TAG)


@dataclass(frozen=True)
class Evidence:
    """One reading of a named rank against the other ranks' median.

    ``value`` and ``median``: the rank's median reading and the median of the
    other ranks' (for a flag, shares of samples with it set, 0..1); ``score``
    orders the items (the relative difference, or the difference of shares).
    """

    rank: int
    tag: str
    value: float
    median: float
    score: float
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "tag": self.tag,
            "value": self.value,
            "median": self.median,
            "text": self.text,
        }


def _format(unit: str, value: float) -> str:  # noqa: PLR0911 - one return per unit
    if unit == "percent":
        return f"{value:.0f} %"
    if unit == "bytes":
        for size, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
            if abs(value) >= size:
                return f"{value / size:.1f} {name}"
        return f"{value:.0f} B"
    if unit == "mhz":
        return f"{value / 1000:.2f} GHz" if value >= 1000 else f"{value:.0f} MHz"
    if unit == "watts":
        return f"{value:.0f} W"
    if unit == "celsius":
        return f"{value:.0f} C"
    if unit == "rate":
        return f"{value:.0f}/s"
    if unit == "share":
        return f"{value:.0%}".replace("%", " %")
    return f"{value:.3g}"


def _summary(reading: _Reading, values: npt.NDArray[Any]) -> float:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return math.nan
    if reading.kind == "flag":
        return float(np.mean(finite > 0))
    return float(np.median(finite))


def machine_evidence(readings: Readings, ranks: Iterable[int]) -> dict[int, list[Evidence]]:
    """For each of ``ranks``, its readings that differ most from the other ranks' median.

    ``readings``: ``rank -> tag -> (steps, values)`` of the ``rankscribe/system/*``
    tags (other tags are ignored). A rank gets at most :data:`MOST_ITEMS` items,
    the strongest first; a reading no other rank has is no evidence. A rank
    whose own CPU share is low while the core it runs on is busy reads "with
    another process on its core".
    """
    summaries: dict[str, dict[int, float]] = {}
    for rank, tags in readings.items():
        for tag, (_, values) in tags.items():
            reading = _BY_TAG.get(tag)
            if reading is not None and reading.evidence and reading.kind != "bitmask":
                value = _summary(reading, np.asarray(values, dtype=np.float64))
                if not math.isnan(value):
                    summaries.setdefault(tag, {})[rank] = value
    found: dict[int, list[Evidence]] = {}
    for rank in ranks:
        items = [
            item
            for tag, by_rank in summaries.items()
            if (item := _item(rank, tag, by_rank)) is not None
        ]
        items.sort(key=lambda item: -item.score)
        items = _shared_core(rank, items, summaries)
        if items:
            found[rank] = items[:MOST_ITEMS]
    return found


def _item(rank: int, tag: str, by_rank: Mapping[int, float]) -> Evidence | None:
    if rank not in by_rank:
        return None
    others = [value for other, value in by_rank.items() if other != rank]
    if not others:
        return None
    reading = _BY_TAG[tag]
    value, median = by_rank[rank], float(np.median(others))
    if reading.kind == "flag":
        score = abs(value - median)
        if score < FLAG_SHARE:
            return None
        text = (
            f"{reading.label} in {_format('share', value)} of the samples "
            f"(others: {_format('share', median)})"
        )
        return Evidence(rank, tag, value, median, 1.0 + score, text)
    scale = max(abs(median), abs(value), 1e-12)
    score = abs(value - median) / scale
    if score < LEVEL_SHARE:
        return None
    text = (
        f"{reading.label} {_format(reading.unit, value)} against a median of "
        f"{_format(reading.unit, median)}"
    )
    return Evidence(rank, tag, value, median, score, text)


def _shared_core(
    rank: int, items: list[Evidence], summaries: Mapping[str, Mapping[int, float]]
) -> list[Evidence]:
    """The CPU item says so when the rank's core is busy while the rank runs less, and
    other processes take more of its core than of the other ranks' (:func:`_crowded`)."""
    cpu_tag, core_tag = SYSTEM_TAG_PREFIX + "cpu_percent", SYSTEM_TAG_PREFIX + "core_percent"
    cores = summaries.get(core_tag, {})
    core = cores.get(rank)
    for index, item in enumerate(items):
        if item.tag == cpu_tag and item.value < item.median and core is not None:
            if core >= BUSY_CORE and _crowded(rank, cores, summaries.get(cpu_tag, {})):
                text = f"{item.text}, with its core {core:.0f} % busy (another process on its core)"
                items[index] = Evidence(rank, cpu_tag, item.value, item.median, 2.0, text)
                items = [items[index]] + [
                    other for other in items if other.tag not in (cpu_tag, core_tag)
                ]
            break
    return items


def _crowded(rank: int, cores: Mapping[int, float], cpus: Mapping[int, float]) -> bool:
    """Whether other processes take more of ``rank``'s core than of the other ranks': its
    core's busy share less its own CPU, against the other ranks' median of theirs, by
    ``LEVEL_SHARE`` of the larger (a level's evidence, :func:`_item`). Where every rank's
    core is as busy with other work (a machine running more than it has cores for: three
    ranks beside three busy loops on two cores, each core 100 % busy and each rank at 9 to
    12 % of it), the rank's core explains nothing the others' do not, and a rank slow for
    its own reasons was said to have "another process on its core"."""
    foreign = {other: max(cores[other] - cpus[other], 0.0) for other in cores if other in cpus}
    if rank not in foreign:
        return False
    others = [value for other, value in foreign.items() if other != rank]
    if not others:
        return True  # nothing to compare with: the busy core is all there is to go on
    value, median = foreign[rank], float(np.median(others))
    return value > median and (value - median) >= LEVEL_SHARE * max(value, median)


def series_readings(series: Mapping[int, Any]) -> dict[int, dict[str, tuple[Any, Any]]]:
    """The system tags of ranks' series (``rank -> RankSeries``-like, ``scalars`` of points)."""
    found: dict[int, dict[str, tuple[Any, Any]]] = {}
    for rank, one in series.items():
        for tag, points in one.scalars.items():
            if tag in _BY_TAG and points:
                values = np.asarray([value for _, value in points], dtype=np.float64)
                steps = np.asarray([step for step, _ in points], dtype=np.int64)
                found.setdefault(rank, {})[tag] = (steps, values)
    return found


_RANK_DIR = re.compile(r"rank_([0-9]{1,9})")


def read_readings(
    job_dir: str | os.PathLike[str], ranks: Sequence[int]
) -> dict[int, dict[str, tuple[Any, Any]]]:
    """The system tags of ``ranks`` and of at most :data:`REFERENCE_RANKS` other rank dirs.

    Read from ``<job_dir>/rank_<r>`` (only these tags are decoded); a rank dir
    that cannot be read is left out with a warning.
    """
    try:
        names = sorted(
            (int(match.group(1)), entry.path)
            for entry in os.scandir(job_dir)
            if (match := _RANK_DIR.fullmatch(entry.name)) and entry.is_dir(follow_symlinks=False)
        )
    except OSError as error:
        logger.warning("the system readings of %s cannot be listed: %s", job_dir, error)
        return {}
    wanted = set(ranks)
    others = [rank for rank, _ in names if rank not in wanted][:REFERENCE_RANKS]
    chosen = wanted | set(others)
    found: dict[int, dict[str, tuple[Any, Any]]] = {}
    for rank, path in names:
        if rank not in chosen:
            continue
        try:
            columns = reader.scalar_arrays(path, SYSTEM_TAGS)
        except (OSError, WriterError) as error:
            logger.warning("the system readings of %s are left out: %s", path, error)
            continue
        if columns:
            found[rank] = dict(columns)
    return found


#: The readings ``show`` summarises for each rank, in its column order.
SUMMARY_READINGS = (
    "cpu_percent",
    "rss_bytes",
    "load_1m",
    "gpu_utilization",
    "gpu_memory_used_bytes",
)


def machine_summary(readings: Readings) -> list[dict[str, Any]]:
    """Each rank's machine in a few numbers: the median of its samples of each reading.

    ``readings``: ``rank -> tag -> (steps, values)``. One dict per rank, in rank
    order: ``rank``, ``samples`` (the most samples of any of its readings) and
    the tag name without the prefix of each of :data:`SUMMARY_READINGS` the
    rank has (a GPU reading only where the GPU was sampled).
    """
    rows = []
    for rank in sorted(readings):
        tags = readings[rank]
        row: dict[str, Any] = {
            "rank": rank,
            "samples": max((len(values) for _, values in tags.values()), default=0),
        }
        for name in SUMMARY_READINGS:
            found = tags.get(SYSTEM_TAG_PREFIX + name)
            if found is None:
                continue
            value = _summary(_BY_TAG[SYSTEM_TAG_PREFIX + name], np.asarray(found[1], np.float64))
            if not math.isnan(value):
                row[name] = value
        rows.append(row)
    return rows


def machine_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """``rank 0: 12 samples; CPU 95 %; memory (RSS) 2.0 GB; ...``, a line per rank of ``rows``."""
    lines = []
    for row in rows:
        count = row.get("samples", 0)
        items = [f"{count} sample{'s' if count != 1 else ''}"]
        for name in SUMMARY_READINGS:
            if name in row:
                reading = _BY_TAG[SYSTEM_TAG_PREFIX + name]
                items.append(f"{reading.label} {_format(reading.unit, row[name])}")
        lines.append(f"rank {row['rank']}: " + "; ".join(items))
    return lines


def _named_ranks(verdicts: Mapping[str, Any]) -> list[int]:
    text = str(verdicts.get("job/straggler_ranks", ""))
    return [int(item) for item in text.split(",") if item.strip().isdigit()]


def _readings(
    source: Mapping[int, Any] | str | os.PathLike[str], ranks: Sequence[int]
) -> Mapping[int, Mapping[str, Any]]:
    """Readings from ranks' series, from ``rank -> tag -> (steps, values)``, or from a job dir."""
    if not isinstance(source, Mapping):
        return read_readings(source, ranks)
    if all(hasattr(one, "scalars") for one in source.values()):
        return series_readings(source)
    return source


def evidence_records(
    records: Iterable[Mapping[str, Any]], source: Mapping[int, Any] | str | os.PathLike[str]
) -> list[dict[str, Any]]:
    """Straggler verdict records with their ``evidence``: the named ranks' readings.

    ``records``: verdict records (``docs/job-view.md``, "Verdict records"); a
    ``straggler`` record gets ``evidence``, a list of ``{"rank", "tag", "value",
    "median", "text"}`` for its ranks (strongest first per rank; empty when no
    reading differs). ``source``: as :func:`evidence_keys`, or ``rank -> tag ->
    (steps, values)`` arrays. The records given are not changed: copies come back.
    """
    copies = [dict(record) for record in records]
    named = sorted(
        {
            int(rank)
            for record in copies
            if record.get("kind") == "straggler"
            for rank in record.get("ranks", ())
        }
    )
    found = machine_evidence(_readings(source, named), named) if named else {}
    for record in copies:
        if record.get("kind") == "straggler":
            record["evidence"] = [
                item.as_dict() for rank in record.get("ranks", ()) for item in found.get(rank, [])
            ]
    return copies


def evidence_keys(
    verdicts: Mapping[str, Any], source: Mapping[int, Any] | str | os.PathLike[str]
) -> dict[str, str]:
    """The ``user_defined`` keys of the evidence for the ranks a straggler verdict names.

    ``source``: the ranks' series (``rank -> RankSeries``-like), their
    readings (``rank -> tag -> (steps, values)``) or the job directory (its
    rank dirs are read, :func:`read_readings`). Keys:
    ``job/straggler_evidence/<rank>`` for every named rank with evidence, and
    ``job/straggler_evidence`` for the worst (``job/straggler_rank``); the items
    joined by ``"; "``. Empty when no rank is named or no reading differs.
    """
    ranks = _named_ranks(verdicts)
    if not ranks:
        return {}
    found = machine_evidence(_readings(source, ranks), ranks)
    keys = {
        f"job/straggler_evidence/{rank}": "; ".join(item.text for item in items)
        for rank, items in found.items()
    }
    worst = verdicts.get("job/straggler_rank")
    if isinstance(worst, int) and worst in found:
        keys["job/straggler_evidence"] = keys[f"job/straggler_evidence/{worst}"]
    return keys


def evidence_lines(user_defined: Mapping[str, Any]) -> list[str]:
    """``evidence: rank 5: SM clock ...`` for each named rank with evidence (show, report)."""
    lines = []
    for rank in _named_ranks(user_defined):
        text = user_defined.get(f"job/straggler_evidence/{rank}")
        if isinstance(text, str) and text:
            lines.append(f"evidence: rank {rank}: {text}")
    return lines
