"""``group_runs``: runs side by side, grouped by lineage keys (docs/groups.md).

The runs are the query's (``filter_runs``'s rows, its ``where`` filter and
names); a job is one run. Each group gets its final values (the lineage's
``loss`` and ``metric/<k>``) as mean, std, min and max over its runs, and its
curves (per step over its runs: mean, min, max, std, number of runs) as
event files under ``BASE/_groups/<group>/``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rankscribe.lineage._checks import (
    check_bool,
    check_host,
    check_optional_int,
    check_path,
    shown,
)
from rankscribe.lineage.errors import LineageParamTypeError, LineageParamValueError
from rankscribe.lineage.group._curves import default_workers, group_statistics
from rankscribe.lineage.group._folder import foreign_groups, replace_groups
from rankscribe.lineage.group._forming import (
    GroupSpread,
    folder_names,
    group_positions,
    spread,
)
from rankscribe.lineage.index._run_table import RunTable
from rankscribe.lineage.query._conditions import is_searchable, sort_by
from rankscribe.lineage.query._expressions import parse_sort_keys
from rankscribe.lineage.query._selection import missing_key_problem, select_rows
from rankscribe.lineage.record._discovery import GROUPS_DIR
from rankscribe.ranks.files import UnsafeFileError

logger = logging.getLogger(__name__)

__all__ = ["GROUPS_DIR", "GroupSpread", "GroupedRuns", "RunGroup", "form_groups", "group_runs"]

_LOSS = "loss"


@dataclass
class RunGroup:
    """One group: the runs whose values of the keys agree.

    ``values`` holds each key's value (None where the runs lack it: the key
    is then in ``missing``); ``runs`` are the runs' directories relative to
    the base (``./name``); ``finals`` the lineage's ``loss`` and each
    ``metric/<k>`` over the runs that have it; ``tags`` the scalar tags of
    its curves; ``directory`` the folder of its files (None when not written).
    """

    name: str
    values: dict[str, Any]
    missing: list[str]
    runs: list[str]
    finals: dict[str, GroupSpread]
    tags: list[str] = field(default_factory=list)
    directory: str | None = None


@dataclass
class GroupedRuns:
    """What :func:`group_runs` found: the groups, best first, and where their files are."""

    base: str
    by: list[str]
    groups: list[RunGroup]
    #: ``BASE/_groups`` (None when the curves were not written).
    directory: str | None

    @property
    def run_count(self) -> int:
        return sum(len(group.runs) for group in self.groups)


def _checked_keys(by: object) -> list[str]:
    keys = [by] if isinstance(by, str) else by
    if (
        not isinstance(keys, Sequence)
        or isinstance(keys, (bytes, bytearray))
        or not keys
        or not all(isinstance(key, str) for key in keys)
    ):
        raise LineageParamTypeError(
            f"by must be a key such as 'learning_rate' or a non-empty list of keys, "
            f"got {shown(by)} ({type(by).__name__})"
        )
    names = [key.strip() for key in keys]
    for name in names:
        if name == "summary_dir" or not is_searchable(name) or name.endswith("/"):
            raise LineageParamValueError(
                f"by: {name!r} is not a key to group by; use a lineage field such as "
                f"learning_rate, optimizer, batch_size, or metric/<name>, user_defined/<name>"
            )
    if len(set(names)) != len(names):
        raise LineageParamValueError(f"by names a key twice: {names!r}")
    return names


def _check_custom(table: RunTable, names: Sequence[str], argument: str) -> None:
    existing = set(table.custom_keys())
    for name in names:
        problem = missing_key_problem(existing, name)
        if problem is not None:
            raise LineageParamValueError(f"no run has {name!r} ({argument}); {problem}")


def _finals(
    table: RunTable, positions: Sequence[int], metric_keys: Sequence[str]
) -> dict[str, GroupSpread]:
    finals: dict[str, GroupSpread] = {}
    for name in (_LOSS, *metric_keys):
        column = table.column(name)
        found = spread([column[position] for position in positions])
        if found is not None:
            finals[name] = found
    return finals


def _sort_value(group: RunGroup, table: RunTable, members: Sequence[int], name: str) -> Any:
    """What a group is sorted by: its key's value, or the mean of the runs' values."""
    if name in group.values:
        return group.values[name]
    if name in group.finals:
        value = group.finals[name].mean
        return value
    column = table.column(name)
    found = spread([column[position] for position in members])
    return None if found is None else found.mean


def form_groups(
    base: str | os.PathLike[str],
    by: str | Sequence[str],
    where: str | None = None,
    sort: str | Sequence[str] | None = None,
) -> tuple[GroupedRuns, list[list[tuple[int, str]]]]:
    """The groups, best first, without curves; and each group's ``(run number, directory)``.

    What :func:`group_runs` does before it reads a file (the report draws the
    curves itself, from :func:`rankscribe.lineage.group._curves.group_statistics`).
    """
    keys = _checked_keys(by)
    if sort is not None and not isinstance(sort, (str, list, tuple)):
        raise LineageParamTypeError(
            f"sort must be None, a sort key such as 'metric/acc desc' or a list of them, "
            f"got {shown(sort)} ({type(sort).__name__})"
        )
    sort_keys = parse_sort_keys(sort) if sort is not None else [(_LOSS, False)]
    selection = select_rows(base, where)
    table = selection.table
    _check_custom(table, [*keys, *(name for name, _ in sort_keys)], "by or sort")
    positions = sorted(selection.positions)  # base order
    columns = [table.column(key) for key in keys]
    members = group_positions(columns, positions)
    metric_keys = [key for key in table.custom_keys(positions) if key.startswith("metric/")]
    values = [[column[held[0]] for column in columns] for held in members]
    names = folder_names(keys, values)
    groups = [
        RunGroup(
            name=name,
            values=dict(zip(keys, group_values, strict=True)),
            missing=[key for key, value in zip(keys, group_values, strict=True) if value is None],
            runs=[table.paths[position] for position in held],
            finals=_finals(table, held, metric_keys),
        )
        for name, group_values, held in zip(names, values, members, strict=True)
    ]
    order = list(range(len(groups)))
    for name, descending in reversed(sort_keys):
        sort_values = [
            _sort_value(group, table, held, name)
            for group, held in zip(groups, members, strict=True)
        ]
        order = sort_by(order, sort_values.__getitem__, descending=descending, none_last=True)
    directories = [
        [(number, table.summary_dir(position)) for number, position in enumerate(members[index])]
        for index in order
    ]
    grouped = GroupedRuns(table.base_dir, keys, [groups[index] for index in order], None)
    return grouped, directories


def _warn_not_written(refused: UnsafeFileError) -> None:
    logger.warning(
        "the groups' curves are not written: %s, %s; what a viewer shows under it is not "
        "these groups' (its owner, or the base's, can remove it)",
        refused.path,
        refused.reason,
    )


def group_runs(
    base: str | os.PathLike[str],
    by: str | Sequence[str],
    where: str | None = None,
    sort: str | Sequence[str] | None = None,
    *,
    write: bool = True,
    workers: int | None = None,
    host: str | None = None,
) -> GroupedRuns:
    """Group the runs under ``base`` by the lineage values of ``by``; write the groups' curves.

    Args:
        base: the base directory (its runs as :func:`rankscribe.lineage.filter_runs`
            finds them; a job is one run).
        by: a key or a list of keys: the query's names (``learning_rate``,
            ``optimizer``, ``metric/<k>``, ``user_defined/<k>``, ...).
        where: a filter, as ``filter_runs``'s (only matching runs are grouped).
        sort: sort keys as ``filter_runs``'s ``order_by`` (``"metric/acc desc"``):
            a key of ``by`` sorts by its value, any other name by the mean of
            the group's runs' values; groups without one go last. Default: the
            mean ``loss``, lowest first.
        write: write each group's curves under ``base/_groups/<group>/``
            (replacing the folder whole). A ``_groups`` of another user is left
            as it is, with a warning naming its owner, and nothing is written
            (``directory`` stays None).
        workers: processes reading the runs' files (default one per CPU, at most 8).
        host: the host part of the files' names (default this machine's name).

    Raises:
        LineageParamTypeError, LineageParamValueError: a malformed argument, a
            key that is not a query name, or a ``metric/`` or ``user_defined/``
            key that no run has.
        LineageExpressionError: ``where`` does not parse.
        LineageFileNotFoundError: no lineage file under ``base``.
        OSError: the files could not be written (the earlier ones are kept).
    """
    check_path("base", base, owner="group_runs")
    if where is not None and not isinstance(where, str):
        raise LineageParamTypeError(
            f"For 'group_runs', the argument 'where' must be a str (a filter) or None, "
            f"but got {shown(where)} ({type(where).__name__})."
        )
    keys = _checked_keys(by)
    check_bool("write", write)
    check_optional_int("workers", workers, minimum=1)
    check_host("host", host)
    grouped, directories = form_groups(base, keys, where, sort)
    if write:
        refused = foreign_groups(grouped.base)
        if refused is not None:
            _warn_not_written(refused)
            return grouped
        statistics = group_statistics(directories, workers)
        written = [
            (group.name, statistics.get(index, {})) for index, group in enumerate(grouped.groups)
        ]
        count = default_workers() if workers is None else workers
        try:
            folder = replace_groups(grouped.base, written, host=host, workers=count, by=grouped.by)
        except UnsafeFileError as error:  # planted meanwhile
            _warn_not_written(error)
            return grouped
        for group, (_, tags) in zip(grouped.groups, written, strict=True):
            group.tags = sorted(tags)
            group.directory = os.path.join(folder, group.name)
        grouped.directory = folder
    return grouped
