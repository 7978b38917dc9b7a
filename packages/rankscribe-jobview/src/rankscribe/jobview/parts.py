"""The job view's parts the lineage manager uses (sibling-facing, not the user's API).

The lineage manager merges a job and shows, queries, groups and reports runs; the job
view owns the job's files and statistics, so the manager reaches them here:

- the job's files: their names (:func:`job_file_names`), the curves and their records
  (:class:`Curve`, :func:`step_table`, :func:`summary_file_records`,
  :func:`tensorboard_file_records`), written atomically (:func:`write_job_files`) at a
  wall time (:func:`now`); a group's curves under ``_groups`` are written the same way;
- a TensorBoard HParams session (:class:`HParamsRun`, :func:`add_session`,
  :func:`hparam_value`, :func:`metric_value`, :data:`FINAL_PREFIX`), which
  ``rankscribe-lineage hparams`` writes for every run;
- statistics of a tag (:class:`TagStatistics`, :func:`sorted_arrays`, merged in
  batches: :func:`merge_all`, :func:`reduced_rows`; a job's bands with its machine
  samples held to common steps: :func:`job_bands`) and a subtree's partial
  (:class:`Partial`, :class:`PartialFormatError`), which the offline merge streams;
- the tags (:data:`STEP_TIME_TAG`, :data:`FINGERPRINT_TAG`, :data:`LOSS_TAGS`) and
  a timing's name (:func:`timing_name`);
- the job merge's ranks (:func:`holds_tensorboard_files`, :func:`missing_ranges`,
  :func:`ranges_text`);
- what ``show`` prints: the live state (:func:`read_live_state`), the verdicts as
  records (:func:`records_from_verdicts`, :data:`ACTIONABLE_KINDS`) and the machine's
  readings (:data:`SYSTEM_TAGS`, :func:`read_readings`, :func:`machine_summary`,
  :func:`machine_lines`);
- the arrays archive the job's wire format and the lineage index share
  (:func:`pack_arrays`, :func:`unpack_arrays`, :data:`MAX_ARRAYS`, :class:`ArchiveError`).

The user's API is :mod:`rankscribe.jobview`; docs/contributing.md lists the
sibling-facing modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankscribe.ranks.imports import lazy_attributes

if TYPE_CHECKING:
    from rankscribe.jobview._npz import MAX_ARRAYS, ArchiveError, pack_arrays, unpack_arrays
    from rankscribe.jobview._session import (
        FINAL_PREFIX,
        HParamsRun,
        add_session,
        hparam_value,
        metric_value,
    )
    from rankscribe.jobview._view import holds_tensorboard_files
    from rankscribe.jobview.job._batch_merge import merge_all, reduced_rows
    from rankscribe.jobview.job._files import (
        Curve,
        job_file_names,
        now,
        step_table,
        summary_file_records,
        tensorboard_file_records,
        write_job_files,
    )
    from rankscribe.jobview.job._live import read_live_state
    from rankscribe.jobview.job._partials import Partial, PartialFormatError
    from rankscribe.jobview.job._ranges import missing_ranges, ranges_text
    from rankscribe.jobview.job._samples import job_bands
    from rankscribe.jobview.job._statistics import (
        FINGERPRINT_TAG,
        LOSS_TAGS,
        STEP_TIME_TAG,
        TagStatistics,
        sorted_arrays,
    )
    from rankscribe.jobview.job.verdicts._machine import (
        SYSTEM_TAGS,
        machine_lines,
        machine_summary,
        read_readings,
    )
    from rankscribe.jobview.job.verdicts._records import ACTIONABLE_KINDS, records_from_verdicts
    from rankscribe.jobview.job.verdicts._sentences import timing_name

# Where each name lives, imported on first use (PEP 562): the lineage index reads the
# arrays archive without loading NumPy.
_HOMES = {
    "ACTIONABLE_KINDS": "rankscribe.jobview.job.verdicts._records",
    "ArchiveError": "rankscribe.jobview._npz",
    "Curve": "rankscribe.jobview.job._files",
    "FINAL_PREFIX": "rankscribe.jobview._session",
    "FINGERPRINT_TAG": "rankscribe.jobview.job._statistics",
    "HParamsRun": "rankscribe.jobview._session",
    "LOSS_TAGS": "rankscribe.jobview.job._statistics",
    "MAX_ARRAYS": "rankscribe.jobview._npz",
    "Partial": "rankscribe.jobview.job._partials",
    "PartialFormatError": "rankscribe.jobview.job._partials",
    "STEP_TIME_TAG": "rankscribe.jobview.job._statistics",
    "SYSTEM_TAGS": "rankscribe.jobview.job.verdicts._machine",
    "TagStatistics": "rankscribe.jobview.job._statistics",
    "add_session": "rankscribe.jobview._session",
    "holds_tensorboard_files": "rankscribe.jobview._view",
    "hparam_value": "rankscribe.jobview._session",
    "job_bands": "rankscribe.jobview.job._samples",
    "job_file_names": "rankscribe.jobview.job._files",
    "machine_lines": "rankscribe.jobview.job.verdicts._machine",
    "machine_summary": "rankscribe.jobview.job.verdicts._machine",
    "merge_all": "rankscribe.jobview.job._batch_merge",
    "metric_value": "rankscribe.jobview._session",
    "missing_ranges": "rankscribe.jobview.job._ranges",
    "now": "rankscribe.jobview.job._files",
    "pack_arrays": "rankscribe.jobview._npz",
    "ranges_text": "rankscribe.jobview.job._ranges",
    "read_live_state": "rankscribe.jobview.job._live",
    "read_readings": "rankscribe.jobview.job.verdicts._machine",
    "records_from_verdicts": "rankscribe.jobview.job.verdicts._records",
    "reduced_rows": "rankscribe.jobview.job._batch_merge",
    "sorted_arrays": "rankscribe.jobview.job._statistics",
    "step_table": "rankscribe.jobview.job._files",
    "summary_file_records": "rankscribe.jobview.job._files",
    "tensorboard_file_records": "rankscribe.jobview.job._files",
    "timing_name": "rankscribe.jobview.job.verdicts._sentences",
    "unpack_arrays": "rankscribe.jobview._npz",
    "write_job_files": "rankscribe.jobview.job._files",
}

__getattr__, __dir__ = lazy_attributes(__name__, _HOMES, globals())

__all__ = [
    "ACTIONABLE_KINDS",
    "FINAL_PREFIX",
    "FINGERPRINT_TAG",
    "LOSS_TAGS",
    "MAX_ARRAYS",
    "STEP_TIME_TAG",
    "SYSTEM_TAGS",
    "ArchiveError",
    "Curve",
    "HParamsRun",
    "Partial",
    "PartialFormatError",
    "TagStatistics",
    "add_session",
    "holds_tensorboard_files",
    "hparam_value",
    "job_bands",
    "job_file_names",
    "machine_lines",
    "machine_summary",
    "merge_all",
    "metric_value",
    "missing_ranges",
    "now",
    "pack_arrays",
    "ranges_text",
    "read_live_state",
    "read_readings",
    "records_from_verdicts",
    "reduced_rows",
    "sorted_arrays",
    "step_table",
    "summary_file_records",
    "tensorboard_file_records",
    "timing_name",
    "unpack_arrays",
    "write_job_files",
]
