"""The job verdicts as plain records (``docs/job-view.md``, "Verdict records").

A record is a JSON-ready dict with the same keys whatever its kind::

    {"kind": "straggler" | "divergence" | "gradient" | "nonfinite" | "stopped",
     "ranks": [int, ...], "timing": str | None,
     "cost_seconds_per_step": float | None, "cost_share": float | None,
     "since_step": int | None, "persistent": bool | None,
     "share_of_steps": float | None, "top": [...], "message": str}

:func:`records_from_verdicts` makes them from the ``job/`` keys of a merged
lineage (or the live view's verdicts so far); values of other types than the
merge writes are skipped, never an error (the keys come from files).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankscribe.jobview.job.verdicts._record_types import VerdictRecord

__all__ = ["ACTIONABLE_KINDS", "blank_record", "gradient_text", "records_from_verdicts"]

#: The kinds of verdict ``rankscribe-lineage show --check`` answers 3 for.
ACTIONABLE_KINDS = ("straggler", "divergence", "gradient")


def blank_record(kind: str, ranks: list[int], message: str) -> VerdictRecord:
    """A record of ``kind`` naming ``ranks``, every other field None (or empty)."""
    return {
        "kind": kind,
        "ranks": ranks,
        "timing": None,
        "cost_seconds_per_step": None,
        "cost_share": None,
        "since_step": None,
        "persistent": None,
        "share_of_steps": None,
        "top": [],
        "message": message,
    }


def _rank_list(value: Any) -> list[int]:
    """``"1,3-5"`` as ``[1, 3, 4, 5]`` (ranges of at most 100,000 ranks; else empty)."""
    if not isinstance(value, str) or not value.strip():
        return []
    ranks: list[int] = []
    for part in value.split(","):
        text = part.strip()
        if text.startswith("..."):
            break
        first, _, last = text.partition("-")
        try:
            low, high = int(first), int(last or first)
        except ValueError:
            return []
        if high < low or high - low > 100_000 or len(ranks) > 100_000:
            return []
        ranks.extend(range(low, high + 1))
    return ranks


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def records_from_verdicts(verdicts: Mapping[str, Any]) -> list[VerdictRecord]:
    """The records of a merged lineage's (or the live view's) ``job/`` verdict keys."""
    records: list[VerdictRecord] = []
    stragglers = _rank_list(verdicts.get("job/straggler_ranks"))
    worst = _int(verdicts.get("job/straggler_rank"))
    if not stragglers and worst is not None and worst >= 0:
        stragglers = [worst]
    by_timing: dict[str, list[int]] = {}
    for rank in stragglers:
        timing = verdicts.get(f"job/straggler_timing/{rank}")
        if not isinstance(timing, str):
            timing = verdicts.get("job/straggler_timing")
        by_timing.setdefault(timing if isinstance(timing, str) else "", []).append(rank)
    for timing, ranks in sorted(by_timing.items()):
        excess = [_number(verdicts.get(f"job/straggler_excess/{rank}")) for rank in ranks]
        worst_excess = max((value for value in excess if value is not None), default=None)
        record = blank_record(
            "straggler",
            ranks,
            f"rank {', '.join(map(str, ranks))} slower in {timing or 'a timing'}"
            + (f" ({worst_excess:.0%} slower than the others)" if worst_excess else ""),
        )
        record["timing"] = timing or None
        costs = [
            (_number(verdicts.get(f"job/straggler_cost_seconds/{rank}")), rank) for rank in ranks
        ]
        known = [(cost, rank) for cost, rank in costs if cost is not None]
        if known:
            cost, costliest = max(known)
            record["cost_seconds_per_step"] = cost
            record["cost_share"] = _number(verdicts.get(f"job/straggler_cost_share/{costliest}"))
        if worst in ranks:
            record["since_step"] = _int(verdicts.get("job/straggler_since_step"))
            persistent = verdicts.get("job/straggler_persistent")
            record["persistent"] = bool(persistent) if _number(persistent) is not None else None
            record["share_of_steps"] = _number(verdicts.get("job/straggler_share_of_steps"))
            message = verdicts.get("job/straggler_message")
            if isinstance(message, str) and message:
                record["message"] = message
        records.append(record)
    diverged = _rank_list(verdicts.get("job/diverged_ranks"))
    if diverged:
        record = blank_record(
            "divergence",
            diverged,
            f"rank {', '.join(map(str, diverged))} left the majority's parameters",
        )
        record["since_step"] = _int(verdicts.get("job/diverged_first_step"))
        records.append(record)
    records.extend(_gradient_records(verdicts))
    nonfinite = _rank_list(verdicts.get("job/nonfinite_loss_ranks"))
    if nonfinite:
        record = blank_record(
            "nonfinite", nonfinite, f"rank {', '.join(map(str, nonfinite))} had a NaN or inf loss"
        )
        record["since_step"] = _int(verdicts.get("job/nonfinite_loss_first_step"))
        records.append(record)
    stopped = _int(verdicts.get("job/stopped_first_rank"))
    if stopped is not None and stopped >= 0:
        record = blank_record("stopped", [stopped], f"rank {stopped} stopped first")
        record["since_step"] = _int(verdicts.get("job/stopped_first_step"))
        records.append(record)
    return records


def _gradient_records(verdicts: Mapping[str, Any]) -> list[VerdictRecord]:
    """One ``gradient`` record per rank named (``docs/job-view.md``, "Gradient")."""
    records: list[VerdictRecord] = []
    for rank in _rank_list(verdicts.get("job/gradient_ranks")):
        step = _int(verdicts.get(f"job/gradient_step/{rank}"))
        bucket = _int(verdicts.get(f"job/gradient_bucket/{rank}"))
        ratio = _number(verdicts.get(f"job/gradient_ratio/{rank}"))
        nonfinite = _number(verdicts.get(f"job/gradient_nonfinite/{rank}")) == 1.0
        persistent = _number(verdicts.get(f"job/gradient_persistent/{rank}"))
        record = blank_record("gradient", [rank], gradient_text(rank, verdicts))
        record["since_step"] = step
        record["persistent"] = bool(persistent) if persistent is not None else None
        record["bucket"] = bucket if bucket is not None and bucket >= 0 else None
        record["ratio"] = None if nonfinite else ratio
        record["nonfinite"] = nonfinite
        record["element"] = _number(verdicts.get(f"job/gradient_element/{rank}")) == 1.0
        names = verdicts.get(f"job/gradient_parameters/{rank}")
        record["parameters"] = names.split(",") if isinstance(names, str) and names else []
        records.append(record)
    return records


def gradient_text(rank: int | str, verdicts: Mapping[str, Any]) -> str:
    """What a ``gradient`` verdict says of ``rank``: where its local gradient stood apart."""
    step = _int(verdicts.get(f"job/gradient_step/{rank}"))
    bucket = _int(verdicts.get(f"job/gradient_bucket/{rank}"))
    ratio = _number(verdicts.get(f"job/gradient_ratio/{rank}"))
    named = _int(verdicts.get(f"job/gradient_named_steps/{rank}"))
    where = f"bucket {bucket}" if bucket is not None and bucket >= 0 else "its whole gradient"
    names = verdicts.get(f"job/gradient_parameters/{rank}")
    if isinstance(names, str) and names and bucket is not None and bucket >= 0:
        where += f" ({names.replace(',', ', ')})"
    if _number(verdicts.get(f"job/gradient_nonfinite/{rank}")) == 1.0:
        what = "a NaN or infinite local norm"
    elif ratio is not None and _number(verdicts.get(f"job/gradient_element/{rank}")) == 1.0:
        what = (
            f"its largest row of 256 elements, against the rest of the bucket, is {ratio:.3g}x "
            "the other ranks'"
        )
    elif ratio is not None:
        what = f"{ratio:.3g}x the other ranks' median norm"
    else:
        what = "a norm apart from the other ranks'"
    at = f" at step {step}" if step is not None else ""
    how = ""
    if named is not None:
        how = "; named once" if named == 1 else f"; named at {named} steps"
        if _number(verdicts.get(f"job/gradient_persistent/{rank}")) == 1.0:
            how += ", persistent"
    return (
        f"rank {rank}'s local gradient{at}, before the reduce: {where}, {what}{how}"
        f"{_fallout_text(rank, verdicts)}"
    )


def _fallout_text(rank: int | str, verdicts: Mapping[str, Any]) -> str:
    """The ranks apart only in ``rank``'s fault's fallout, as a clause of its verdict."""
    after = [
        (step, other)
        for other in _rank_list(verdicts.get("job/gradient_fallout_ranks"))
        if str(_int(verdicts.get(f"job/gradient_fallout_of/{other}"))) == str(rank)
        and (step := _int(verdicts.get(f"job/gradient_fallout_step/{other}"))) is not None
    ]
    if not after:
        return ""
    ranks = ", ".join(f"rank {other} at step {step}" for step, other in sorted(after)[:8])
    more = f" and {len(after) - 8} more" if len(after) > 8 else ""
    return (
        f"; its update moved every replica's norms, and {ranks}{more} stood apart after it "
        f"(its fallout, not named)"
    )
