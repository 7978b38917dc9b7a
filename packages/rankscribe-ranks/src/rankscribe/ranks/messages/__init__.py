"""What a rank reads that someone else wrote, decoded as data and within bounds.

``_codec`` is the data-only format of the objects ranks send each other, on every
coordinator backend (``docs/layout.md``, "Collectives and their timeouts"); ``_jsondata``
the one bounded JSON parser for what the packages read from a file or a message
(sibling-facing as :mod:`rankscribe.ranks.jsondata`). Neither unpickles, imports or calls
anything its input names, each takes time linear in its input, and a malformed input is
an error (:class:`~rankscribe.ranks.errors.MessageError`,
:class:`~rankscribe.ranks.errors.JSONDataError`), never a crash or a hang.

May import: ``rankscribe.ranks.errors`` only; the coordinators, the backends, the layout
and :mod:`rankscribe.ranks.files` decode through it.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
