"""Test doubles for the tree of ranks (sibling-facing, not the user's API).

:class:`MemoryTreeHub` and its :class:`MemoryTreeChannel` carry the tree's messages
between threads of one process, with the behaviour of :func:`rankscribe.ranks.tree_channel`'s
channels (a timeout when a child is silent, a closed channel refusing more). The sibling
packages' tests build a job's tree with them without starting processes;
docs/contributing.md lists the sibling-facing modules.
"""

from __future__ import annotations

from rankscribe.ranks._tree import MemoryTreeChannel, MemoryTreeHub

__all__ = ["MemoryTreeChannel", "MemoryTreeHub"]
