"""The collector's settings of the job view: the live view's interval and verdict callback,
and whether the gradient probe is on.

The live view itself, each rank's end of the tree, is the job view's
(:class:`rankscribe.jobview.feed.LiveRankView`); the collector checks the two arguments
a user gives it for the view, ``job_view_interval`` and ``on_verdict``, with its own
errors (``docs/job-view.md``, "Live").
"""

from __future__ import annotations

from rankscribe.collector._checks import check_seconds_setting
from rankscribe.collector.errors import CollectorTypeError
from rankscribe.jobview.feed import DEFAULT_JOB_VIEW_INTERVAL, VerdictCallback

__all__ = [
    "JOB_VIEW_INTERVAL_ENV",
    "check_gradient_probe",
    "check_job_view_interval",
    "check_on_verdict",
]

#: The environment variable that sets ``job_view_interval`` when the argument is not given.
JOB_VIEW_INTERVAL_ENV = "RANKSCRIBE_JOB_VIEW_INTERVAL"


def check_job_view_interval(value: object) -> float:
    """The interval in seconds: the argument, else the environment variable, else the default."""
    return check_seconds_setting(
        value,
        argument="job_view_interval",
        variable=JOB_VIEW_INTERVAL_ENV,
        default=DEFAULT_JOB_VIEW_INTERVAL,
        off="the live job view off",
    )


def check_on_verdict(value: object) -> VerdictCallback | None:
    """``on_verdict`` as given: a callable or None (else a clear error naming it)."""
    if value is None or callable(value):
        return value
    raise CollectorTypeError(
        f"For 'on_verdict', the value should be a callable taking one verdict record (a dict) "
        f"or None, but got {type(value).__name__} {value!r:.80}."
    )


def check_gradient_probe(value: object) -> bool:
    """``gradient_probe`` as given: a bool (else a clear error naming it)."""
    if isinstance(value, bool):
        return value
    raise CollectorTypeError(
        f"For 'gradient_probe', the value should be a bool (True records each rank's gradient "
        f"norms before the reduce of a DDP network), but got {type(value).__name__} {value!r:.80}."
    )
