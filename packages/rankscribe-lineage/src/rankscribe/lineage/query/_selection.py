"""Which runs a string filter selects: the rows behind ``filter_runs``.

``select_rows`` loads the rows of a base dir (through the index), checks the
``metric/`` and ``user_defined/`` names a filter or a sort uses against the
keys the runs have, filters and sorts. The querier turns its rows into
MindInsight-shaped results; the command line formats them itself.
Semantics in ``docs/lineage-queries.md``.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rankscribe.lineage.errors import (
    LineageExpressionError,
    LineageFileNotFoundError,
    LineageParamValueError,
    LineageQuerySummaryDataError,
)
from rankscribe.lineage.index._cache import LineageRow, scan_base_dir
from rankscribe.lineage.index._run_table import RunTable
from rankscribe.lineage.query._conditions import resolve_summary_path, sort_by
from rankscribe.lineage.query._expressions import (
    Comparison,
    Expression,
    close_names,
    did_you_mean,
    parse_expression,
    parse_sort_keys,
)

logger = logging.getLogger(__name__)

__all__ = [
    "CUSTOM_PREFIXES",
    "Selection",
    "custom_keys",
    "load_rows",
    "load_table",
    "missing_key_problem",
    "select_rows",
]


def load_table(base_dir: str, use_index: bool | None) -> RunTable | None:
    """The runs under ``base_dir`` with dataset marks, as columns; None if it has no lineage."""
    try:
        scan = scan_base_dir(base_dir, use_index=use_index)
    except OSError as error:
        logger.error("cannot list %s: %s", base_dir, error)
        raise LineageQuerySummaryDataError("Filter summary lineage failed.") from error
    if scan.lineage_file_count == 0:
        return None
    return scan.table


def load_rows(base_dir: str, use_index: bool | None) -> list[LineageRow] | None:
    """Rows of the runs under ``base_dir`` with dataset marks; None if it has no lineage."""
    table = load_table(base_dir, use_index)
    return None if table is None else table.rows(range(len(table)))


def _absolute_summary_dir(comparison: Comparison, base_dir: str) -> Comparison:
    """``summary_dir = 'run1'`` or ``'./run1'`` means the run1 directory of the base dir.

    A bare name is what the command line's table shows in its run column.
    """
    if comparison.name != "summary_dir":
        return comparison

    def absolute(path: Any) -> Any:
        if not isinstance(path, str) or os.path.isabs(path):
            return path
        relative = path[2:] if path.startswith("./") else path
        return os.path.realpath(os.path.join(base_dir, relative))

    value = comparison.value
    resolved = [absolute(item) for item in value] if isinstance(value, list) else absolute(value)
    return dataclasses.replace(comparison, value=resolved)


CUSTOM_PREFIXES = ("metric", "user_defined")


@dataclass
class Selection:
    """What :func:`select_rows` found: the runs asked for and how many matched.

    ``positions`` are the runs asked for, as positions in ``table`` (every
    run of the base dir, in base order); ``page`` makes their rows.
    """

    table: RunTable
    positions: list[int]
    count: int
    expression: Expression | Comparison | None
    sort_keys: list[tuple[str, bool]]

    @property
    def page(self) -> list[LineageRow]:
        return self.table.rows(self.positions)

    @property
    def rows(self) -> list[LineageRow]:
        return self.table.rows(range(len(self.table)))


def custom_keys(rows: Iterable[LineageRow]) -> list[str]:
    """The ``metric/<k>`` then ``user_defined/<k>`` keys of ``rows``, in order of appearance.

    One pass over the rows' key views (no Python loop per value).
    """
    rows = list(rows)
    metric = dict.fromkeys(itertools.chain.from_iterable(row.metric for row in rows))
    user = dict.fromkeys(itertools.chain.from_iterable(row.user_defined for row in rows))
    return [f"metric/{key}" for key in metric] + [f"user_defined/{key}" for key in user]


# How many keys a refused key's message lists when none is close to it.
_KEYS_LISTED = 10


def missing_key_problem(existing: Iterable[str], name: str) -> str | None:
    """Why ``name`` (a ``metric/`` or ``user_defined/`` key no run has) is refused, or None.

    A key that no run of the base dir has is a typo until shown otherwise:
    the text names the keys of that kind close to it, or, when none is, the
    first keys of that kind in order (a base dir may hold hundreds).
    """
    prefix = next((kind + "/" for kind in CUSTOM_PREFIXES if name.startswith(kind + "/")), None)
    existing = set(existing)
    if prefix is None or name in existing:
        return None
    same_kind = sorted(key for key in existing if key.startswith(prefix))
    if not same_kind:
        return f"no run has a {prefix} key"
    # Compared without the prefix they share, which would make every key look close.
    close = close_names(name[len(prefix) :], [key[len(prefix) :] for key in same_kind])
    if close:
        return did_you_mean([prefix + key for key in close])
    listed = ", ".join(same_kind[:_KEYS_LISTED])
    more = len(same_kind) - _KEYS_LISTED
    if more > 0:
        listed += f" and {more} more (--columns all shows them)"
    return f"the {prefix} keys are: {listed}"


def _check_custom_keys(
    table: RunTable,
    expression: Expression | Comparison | None,
    sort_keys: list[tuple[str, bool]],
    where: str,
) -> None:
    """Refuse a ``metric/`` or ``user_defined/`` name that no run has (a typo)."""
    comparisons = (
        []
        if expression is None
        else ([expression] if isinstance(expression, Comparison) else expression.comparisons())
    )
    names = [comparison.name for comparison in comparisons] + [name for name, _ in sort_keys]
    if not any(name.startswith(("metric/", "user_defined/")) for name in names):
        return
    existing = set(table.custom_keys())
    for comparison in comparisons:
        problem = missing_key_problem(existing, comparison.name)
        if problem is not None:
            raise LineageExpressionError(
                f"no run has {comparison.name!r}; {problem}", where, comparison.column
            )
    for name, _ in sort_keys:
        problem = missing_key_problem(existing, name)
        if problem is not None:
            raise LineageParamValueError(f"no run has {name!r} (order_by); {problem}")


def select_rows(
    base_dir: str | os.PathLike[str],
    where: str | None = None,
    *,
    order_by: str | Sequence[str] | None = None,
    limit: int | None = None,
    offset: int = 0,
    use_index: bool | None = None,
    check_keys: bool = True,
) -> Selection:
    """The rows :func:`filter_runs` returns, before they become result dicts.

    The command line formats these rows itself (building a dict per run
    only to read it again costs as much as the query at 100,000 runs).
    ``check_keys=False`` leaves the check of ``metric/`` and
    ``user_defined/`` names to the caller (see :func:`missing_key_problem`).
    """
    directory = resolve_summary_path(os.path.abspath(os.fspath(base_dir)))
    blank = isinstance(where, str) and not where.strip()
    expression = parse_expression(where) if where is not None and not blank else None
    if expression is not None:
        expression = expression.transform(
            lambda comparison: _absolute_summary_dir(comparison, directory)
        )
    sort_keys = parse_sort_keys(order_by)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise LineageParamValueError(f"limit must be an int >= 0 or None, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise LineageParamValueError(f"offset must be an int >= 0, got {offset!r}")
    table = load_table(directory, use_index)
    if table is None:
        raise LineageFileNotFoundError("There is no summary log file under summary_base_dir.")
    if check_keys:
        _check_custom_keys(table, expression, sort_keys, where or "")
    selected: list[int] = list(range(len(table)))
    if expression is not None:
        selected = list(itertools.compress(selected, expression.mask(table.column)))
    for name, descending in reversed(sort_keys):
        selected = sort_by(selected, table.getter(name), descending=descending, none_last=True)
    end = None if limit is None else offset + limit
    return Selection(table, selected[offset:end], len(selected), expression, sort_keys)
