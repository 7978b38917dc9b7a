"""The job's verdicts as sentences (``rankscribe-lineage show``, the report, the examples).

Re-exported by :mod:`rankscribe.jobview`; the keys are described in
``docs/job-view.md`` ("Verdicts"). A key holding an unexpected type (a damaged
or hand-edited lineage) reads as unknown, never as an error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rankscribe.jobview._checks import check_mapping
from rankscribe.jobview.job._ranges import last_steps_text, ranks_of_text
from rankscribe.jobview.job._statistics import SECTION_TAG_PREFIX
from rankscribe.jobview.job.verdicts._machine import evidence_lines
from rankscribe.jobview.job.verdicts._records import gradient_text
from rankscribe.jobview.job.verdicts._straggler_verdicts import seconds_text

__all__ = ["live_verdict_lines", "timing_name", "verdict_lines"]


def _ranks_phrase(text: Any) -> str:
    """``rank 3``, ``ranks 1,3`` or ``ranks 1-3`` (a range is several ranks)."""
    return f"ranks {text}" if "," in str(text) or "-" in str(text) else f"rank {text}"


def _number(value: Any) -> float:
    """A verdict's number, NaN when the key holds something else (a damaged lineage)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return float("nan")
    return float(value)


def _rank_number(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def timing_name(tag: Any) -> str:
    """A timing tag in words: ``rankscribe/data_wait`` -> "data wait"."""
    text = str(tag)
    if text.startswith(SECTION_TAG_PREFIX):
        return f"section {text[len(SECTION_TAG_PREFIX) :]!r}"
    return text.removeprefix("rankscribe/").replace("_", " ")


def _straggler_lines(user_defined: Mapping[str, Any]) -> list[str]:
    straggler = _rank_number(user_defined.get("job/straggler_rank", -1))
    skew = _number(user_defined.get("job/step_time_skew"))
    skew_text = f"; step-time skew {skew:.2f}" if not math.isnan(skew) else ""
    if straggler < 0:
        return [f"straggler: none{skew_text}", *_ended_spans_lines(user_defined)]
    message = user_defined.get("job/straggler_message")
    if isinstance(message, str) and message:
        lines = [f"straggler: {message}{skew_text}"]
    else:
        # A lineage from before the cost was recorded: its excess and share (each left
        # out when missing or damaged, never printed as nan).
        share = _number(user_defined.get("job/straggler_slowest_share"))
        excess = _number(user_defined.get("job/straggler_excess"))
        timing = user_defined.get("job/straggler_timing")
        by = f", by {timing_name(timing)}" if isinstance(timing, str) and timing else ""
        measures = []
        if not math.isnan(share):
            measures.append(f"slowest in {share:.0%} of the steps")
        if not math.isnan(excess):
            measures.append(f"{excess:.0%} slower than the faster ranks step by step")
        told = ", ".join(measures) if measures else "no measure recorded"
        lines = [f"straggler: rank {straggler} ({told}{by}){skew_text}"]
    ranks = [item for item in str(user_defined.get("job/straggler_ranks", "")).split(",") if item]
    if len(ranks) > 1:
        details = "; ".join(_rank_detail(user_defined, rank) for rank in ranks)
        lines.append(f"stragglers: ranks {','.join(ranks)} ({details})")
    return lines + _ended_spans_lines(user_defined)


def _ended_spans_lines(user_defined: Mapping[str, Any]) -> list[str]:
    """The straggler verdicts the live view named while the job ran, with their spans,
    where one of them ended (a job that is no straggler at the end may have had one): one
    line, or none (only verdicts standing at the end, which the straggler line gives)."""
    spans = user_defined.get("job/straggler_live_spans")
    if not isinstance(spans, str) or not spans:
        return []
    if all(span.endswith("-end") for span in spans.split("; ")):
        return []
    return [f"named while the job ran: {spans}"]


def _rank_detail(user_defined: Mapping[str, Any], rank: str) -> str:
    """One rank of a slow group: its cost, else its excess, by its timing; what a
    damaged lineage lacks is left out."""
    timing = user_defined.get(f"job/straggler_timing/{rank}")
    by = f" by {timing_name(timing)}" if isinstance(timing, str) and timing else ""
    cost = _number(user_defined.get(f"job/straggler_cost_seconds/{rank}"))
    if not math.isnan(cost):
        share = _number(user_defined.get(f"job/straggler_cost_share/{rank}"))
        of_step = f" ({share:.0%})" if not math.isnan(share) else ""
        return f"rank {rank} costs {seconds_text(cost)} a step{of_step}{by}"
    excess = _number(user_defined.get(f"job/straggler_excess/{rank}"))
    if not math.isnan(excess):
        return f"rank {rank} {excess:.0%} slower{by}"
    return f"rank {rank}{by} (no measure recorded)"


def verdict_lines(user_defined: Mapping[str, Any]) -> list[str]:
    """The verdicts among a merged lineage's ``user_defined`` keys, as sentences.

    Empty when the lineage holds no job verdict (a single-process run). A key
    holding an unexpected type (a damaged or hand-edited lineage) reads as
    unknown, never as an error.
    """
    check_mapping("user_defined", user_defined)
    if not any(str(key).startswith("job/") for key in user_defined):
        return []
    lines = _straggler_lines(user_defined) + evidence_lines(user_defined)
    check = user_defined.get("job/divergence_check", "no_fingerprints")
    diverged = user_defined.get("job/diverged_ranks", "")
    if diverged:
        firsts = ", ".join(
            f"rank {rank} at step {user_defined.get(f'job/diverged_step/{rank}', '?')}"
            for rank in str(diverged).split(",")
        )
        lines.append(f"divergence: {firsts}")
    elif check == "checked":
        lines.append("divergence: none (the ranks' parameters agree)")
    else:
        lines.append(f"divergence: not checked ({str(check).replace('_', ' ')})")
    lines.extend(_gradient_lines(user_defined))
    nonfinite = user_defined.get("job/nonfinite_loss_ranks", "")
    if nonfinite:
        firsts = ", ".join(
            f"rank {rank} at step {user_defined.get(f'job/nonfinite_loss_step/{rank}', '?')}"
            for rank in str(nonfinite).split(",")
        )
        lines.append(f"non-finite loss: {firsts}")
    lines.extend(_stop_lines(user_defined))
    untimed = user_defined.get("job/untimed_ranks", "")
    if untimed:
        lines.append(
            f"no timing: {_ranks_phrase(untimed)} (step times off: not judged as stragglers)"
        )
    missing = user_defined.get("job/missing_ranks", "")
    if missing:
        lines.append(f"missing: {_ranks_phrase(missing)}")
    return lines


def _stop_lines(user_defined: Mapping[str, Any]) -> list[str]:
    """Where the ranks stopped: the rank that stopped first, or why none is named, and
    the ranks whose stop records say they lost a peer or were sent SIGTERM or SIGINT."""
    lines: list[str] = []
    stopped = _rank_number(user_defined.get("job/stopped_first_rank", -1))
    evidence = user_defined.get("job/stopped_first_evidence", "")
    losing = user_defined.get("job/lost_peer_ranks", "")
    if stopped >= 0:
        lines.append(_named_stop(user_defined, stopped, evidence, losing))
    elif evidence == "undetermined":
        lines.append(_undetermined_stop(user_defined))
    if losing and evidence != "lost_peer":
        lines.append(
            f"lost a peer: {_ranks_phrase(losing)} (raised on losing the connection to "
            "another rank)"
        )
    if evidence in _EVERY_RANK_SENT:
        lines.append(_signal_stop(user_defined, _EVERY_RANK_SENT[evidence]))
        return lines
    for key, how in _SOME_RANKS_SENT:
        if user_defined.get(key, ""):
            ranks = _ranks_phrase(user_defined[key])
            lines.append(f"{how}: {ranks} (each wrote every step it ran)")
    return lines


#: The ranks a signal stopped, where not every rank was: the verdict -> its line's head.
_SOME_RANKS_SENT = (
    ("job/sigterm_ranks", "sent SIGTERM"),
    ("job/sigint_ranks", "interrupted (Ctrl-C)"),
)


#: The evidence of a job whose every rank was sent a signal -> how its sentence says so.
_EVERY_RANK_SENT = {
    "sigterm": "was sent SIGTERM",
    "sigint": "was interrupted (Ctrl-C, SIGINT)",
    "signal": "was sent SIGTERM or SIGINT",
}


def _named_stop(user_defined: Mapping[str, Any], stopped: int, evidence: Any, losing: Any) -> str:
    """The sentence naming the rank that stopped first, with the evidence that named it."""
    how = " (reported by the launcher)" if evidence == "launcher" else ""
    if evidence == "lost_peer":
        how = (
            f" (its last recorded step; it left no stop record, and {_ranks_phrase(losing)} "
            "raised on losing the connection to another rank)"
        )
    if evidence == "exception":
        lead = _number(user_defined.get("job/stopped_first_lead_seconds"))
        before = f", {lead:.2f} s before any other rank's" if math.isfinite(lead) else ""
        exception = user_defined.get("job/stopped_first_exception", "?")
        how = f" (its training raised {exception}{before})"
    early = user_defined.get("job/stopped_early_ranks")
    return (
        f"stopped first: rank {stopped} at step "
        f"{user_defined.get('job/stopped_first_step')}{how}"
        + (f" (stopped early: {_ranks_phrase(early)})" if early else "")
    )


#: The most ranks an undetermined stop lists with their last steps (more: the range).
MAX_LISTED_STOPS = 4


def _undetermined_stop(user_defined: Mapping[str, Any]) -> str:
    """The sentence of a stop the evidence does not decide: the ranks that share the
    smallest last step, or whose last steps differ by less than a killed rank may have
    left unwritten (docs/job-view.md, "Where each rank stopped")."""
    tied = user_defined.get("job/stopped_first_tied_ranks", "?")
    ranks = [rank for low, high in ranks_of_text(str(tied)) for rank in range(low, high + 1)]
    last = {rank: user_defined.get(f"job/last_step/{rank}") for rank in ranks}
    if len(set(last.values())) > 1:
        if len(last) <= MAX_LISTED_STOPS:
            steps = ", ".join(f"rank {rank} at step {step}" for rank, step in last.items())
        else:
            numbers = sorted(_number(step) for step in last.values())
            steps = f"{_ranks_phrase(tied)} at steps {numbers[0]:.0f} to {numbers[-1]:.0f}"
        return (
            f"stopped first: undetermined (last recorded: {steps}; "
            f"a rank killed may not have written its last second of steps)"
        )
    return (
        f"stopped first: undetermined ({_ranks_phrase(tied)} stopped at step "
        f"{user_defined.get('job/stopped_first_step')}; nothing tells them apart)"
    )


def _signal_stop(user_defined: Mapping[str, Any], how: str) -> str:
    """The sentence of a job whose every rank was sent a signal (SIGTERM or SIGINT, ``how``
    says which): where each stopped."""
    ranks = sorted(
        rank
        for key in ("job/sigterm_ranks", "job/sigint_ranks")
        for low, high in ranks_of_text(str(user_defined.get(key, "")))
        for rank in range(low, high + 1)
    )
    steps = sorted({_number(user_defined.get(f"job/last_step/{rank}")) for rank in ranks})
    if len(steps) == 1:
        where = f"at step {steps[0]:.0f}"
    elif len(ranks) <= MAX_LISTED_STOPS:
        where = ", ".join(
            f"rank {rank} at step {user_defined.get(f'job/last_step/{rank}')}" for rank in ranks
        )
    else:
        where = f"at steps {steps[0]:.0f} to {steps[-1]:.0f}"
    return f"stopped: every rank {how} ({where}; each wrote every step it ran): none stopped first"


def _gradient_lines(user_defined: Mapping[str, Any]) -> list[str]:
    """``gradient: ...`` per rank named; none when no rank recorded gradient norms."""
    check = user_defined.get("job/gradient_check")
    if check is None:
        return []
    named = [item for item in str(user_defined.get("job/gradient_ranks", "")).split(",") if item]
    if named:
        ranks = [rank for item in named for rank in _expanded(item)]
        return [f"gradient: {gradient_text(rank, user_defined)}" for rank in ranks]
    if check == "checked":
        return ["gradient: none (no rank's local gradient stood apart before the reduce)"]
    return [f"gradient: not checked ({str(check).replace('_', ' ')})"]


def _expanded(item: str) -> list[str]:
    """``"3-5"`` as ``["3", "4", "5"]`` (at most 1,000); ``"3"`` as ``["3"]``."""
    first, _, last = item.partition("-")
    if last and first.isdigit() and last.isdigit() and 0 <= int(last) - int(first) < 1000:
        return [str(rank) for rank in range(int(first), int(last) + 1)]
    return [item]


def live_verdict_lines(
    records: Sequence[Any], verdicts: Mapping[str, Any], *, final: bool = False
) -> list[str]:
    """A live job's verdicts as sentences: ``show`` prints them, TensorBoard's text holds them.

    ``records``: the live view's verdict records (the straggler rule's on the
    recent steps; one without a text ``message`` is left out); ``verdicts``: its
    ``job/`` keys so far (:func:`verdict_lines`), then each rank's last step.
    ``final``: the records the job ended with (a straggler's cost is then the whole
    run's since its onset, ``TimingWatch.take_costs``), said so instead of "recent steps".
    """
    when = "at the end of training" if final else "recent steps"
    lines = [
        f"{record.get('kind', 'verdict')} ({when}): {record['message']}"
        for record in records
        if isinstance(record, Mapping) and isinstance(record.get("message"), str)
    ]
    lines.extend(verdict_lines(verdicts))
    last = last_steps_text(verdicts)
    if last:
        lines.append(f"last step: {last}")
    return lines
