"""The runs of a scan column by column: what a query filters, sorts and prints.

A warm query over 100,000 runs cannot afford a Python object per run and per
section (``docs/lineage-queries.md``, "The index"): the index is stored in
columns, and a :class:`RunTable` keeps them so. Position ``i`` of every
column is run ``i``, in base order (newest ``update_time`` first, then
relative path). A :class:`LineageRow` is made only for the runs a caller
asks for (:meth:`RunTable.row`): the page the API returns, never the
100,000 rows of a table the command line prints.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rankscribe.lineage.index._run_summary import LineageRow

__all__ = ["CUSTOM_SECTIONS", "RunTable", "Sparse"]

CUSTOM_SECTIONS = ("metric", "user_defined")
# A key's runs (positions, ascending) and their values.
Sparse = tuple[list[int], list[Any]]


class RunTable:
    """Columns of the runs that have a usable lineage, in base order.

    ``fields`` are dense (None where a run lacks the field); ``metric`` and
    ``user_defined`` are sparse, keyed in the order the keys first appear
    in base order (a run's own keys in its dict's order).
    """

    def __init__(
        self,
        base_dir: str,
        paths: list[str],
        update_times: list[int],
        graph_ids: list[str],
        graphs: dict[str, Any],
        fields: dict[str, list[Any]],
        custom: dict[str, dict[str, Sparse]],
    ) -> None:
        self.base_dir = base_dir
        self.paths = paths
        self.update_times = update_times
        self.graph_ids = graph_ids
        self.graphs = graphs
        self.fields = fields
        self.custom = custom
        self.marks = _dataset_marks(graph_ids)
        self._dense: dict[str, list[Any]] = {}
        self._by_position: dict[str, dict[str, dict[int, Any]]] = {}
        self._rows: list[LineageRow | None] = [None] * len(paths)
        self._made_from_rows = False

    def __len__(self) -> int:
        return len(self.paths)

    @classmethod
    def of_rows(cls, base_dir: str, rows: list[LineageRow]) -> RunTable:
        """The table of rows already made (runs parsed or listed in this scan)."""
        names = dict.fromkeys(itertools.chain.from_iterable(row.fields for row in rows))
        fields = {name: [row.fields.get(name) for row in rows] for name in names}
        custom: dict[str, dict[str, Sparse]] = {}
        for section in CUSTOM_SECTIONS:
            keyed: dict[str, Sparse] = {}
            for position, row in enumerate(rows):
                for key, value in getattr(row, section).items():
                    positions, values = keyed.setdefault(key, ([], []))
                    positions.append(position)
                    values.append(value)
            custom[section] = keyed
        graphs = {row.graph_id: row.dataset_graph for row in rows}
        table = cls(
            base_dir,
            [row.relative_path for row in rows],
            [row.update_time_ns for row in rows],
            [row.graph_id for row in rows],
            graphs,
            fields,
            custom,
        )
        for position, row in enumerate(rows):
            row.dataset_mark = table.marks[position]
            table._rows[position] = row
        table._made_from_rows = True
        return table

    def summary_dir(self, position: int) -> str:
        path = self.paths[position]
        return self.base_dir + path[1:] if path != "./" else self.base_dir

    def column(self, name: str) -> list[Any]:
        """The value of ``name`` for every run (None where it has none), made once."""
        values = self._dense.get(name)
        if values is not None:
            return values
        prefix, _, key = name.partition("/")
        if prefix in CUSTOM_SECTIONS and key:
            positions, found = self.custom[prefix].get(key, ([], []))
            if len(positions) == len(self.paths) and _ascending(positions):
                values = list(found)  # every run has the key (the usual metric)
            else:
                values = [None] * len(self.paths)
                for position, value in zip(positions, found, strict=True):
                    values[position] = value
        elif name == "summary_dir":
            values = list(map(self.summary_dir, range(len(self.paths))))
        elif name == "dataset_mark":
            values = self.marks
        else:
            values = self.fields.get(name) or [None] * len(self.paths)
        self._dense[name] = values
        return values

    def getter(self, name: str) -> Callable[[int], Any]:
        """The value of ``name`` at a position (for sorting positions)."""
        return self.column(name).__getitem__

    def row(self, position: int) -> LineageRow:
        """Run ``position`` as a :class:`LineageRow` (made once)."""
        made = self._rows[position]
        if made is not None:
            return made
        # As the index's entries always were: a field some run has is None where missing.
        fields = {name: column[position] for name, column in self.fields.items()}
        sections = [
            {
                key: held[position]
                for key, held in self._section(section).items()
                if position in held
            }
            for section in CUSTOM_SECTIONS
        ]
        graph_id = self.graph_ids[position]
        made = LineageRow(
            self.paths[position],
            self.summary_dir(position),
            self.update_times[position],
            fields,
            sections[0],
            sections[1],
            graph_id,
            self.graphs[graph_id],
            self.marks[position],
        )
        self._rows[position] = made
        return made

    def _section(self, section: str) -> dict[str, dict[int, Any]]:
        """A section's keys, each with its values by position (made once per query)."""
        by_position = self._by_position.get(section)
        if by_position is None:
            by_position = self._by_position[section] = {
                key: dict(zip(positions, values, strict=True))
                for key, (positions, values) in self.custom[section].items()
            }
        return by_position

    def rows(self, positions: Iterable[int]) -> list[LineageRow]:
        return list(map(self.row, positions))

    def custom_keys(self, positions: Sequence[int] | None = None) -> list[str]:
        """``metric/<k>`` then ``user_defined/<k>`` keys the runs at ``positions`` have.

        In order of appearance over ``positions`` (default: every run), as
        :func:`rankscribe.lineage.query._selection.custom_keys` orders rows.
        """
        if positions is None:
            return [
                f"{section}/{key}" for section in CUSTOM_SECTIONS for key in self.custom[section]
            ]
        if self._made_from_rows:  # each row's own key order counts: ask the rows
            rows = self.rows(positions)
            return [
                f"{section}/{key}"
                for section in CUSTOM_SECTIONS
                for key in dict.fromkeys(
                    itertools.chain.from_iterable(getattr(row, section) for row in rows)
                )
            ]
        # Made from the index: every run's keys are in the table's key order.
        order = dict(zip(positions, itertools.count()))
        absent = len(order)  # the rank of a run not among ``positions``: after them all
        found: list[str] = []
        for section in CUSTOM_SECTIONS:
            keyed = self.custom[section]
            first: list[tuple[int, int, str]] = []
            for rank, (key, (held, _)) in enumerate(keyed.items()):
                seen = min(map(order.get, held, itertools.repeat(absent)), default=absent)
                if seen < absent:
                    first.append((seen, rank, key))
            found += [f"{section}/{key}" for _, _, key in sorted(first)]
        return found


def _ascending(positions: list[int]) -> bool:
    """Strictly ascending: positions ``0..n-1`` when there are ``n`` of them, in range."""
    return all(map(operator.lt, positions, itertools.islice(positions, 1, None)))


def _dataset_marks(graph_ids: list[str]) -> list[str]:
    """Runs with equal dataset graphs share a mark: '2', '3', ... in base order.

    MindInsight starts its table with mark '1' for "no graph at all", which no
    run has (a run without a graph has ``{}``), so '1' is never given. It
    computes the next mark from the largest mark compared as text, so after
    '9' every new graph got '10'; the numeric maximum is used here.
    """
    marks = {graph: str(rank + 2) for rank, graph in enumerate(dict.fromkeys(graph_ids))}
    return list(map(marks.__getitem__, graph_ids))
