"""Messages up a tree of ranks, for the sibling packages (not the user's API).

:func:`tree_channel` makes, on every rank, the :class:`TreeChannel` through which a
rank sends one message per round to its parent and collects its children's, so rank 0
hears from at most ``fan_in`` ranks however large the job is; every wait has a
deadline, and a late child is absent from that round. The collector carries the live
job view's partial statistics up this tree (``docs/job-view.md``, "Tree"); the test
doubles are in :mod:`rankscribe.ranks.testing`. docs/contributing.md lists the
sibling-facing modules.
"""

from __future__ import annotations

from rankscribe.ranks.tree._channels import REORDER_WINDOW, TreeChannel, tree_channel

__all__ = ["REORDER_WINDOW", "TreeChannel", "tree_channel"]
