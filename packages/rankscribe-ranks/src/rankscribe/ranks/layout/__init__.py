"""The job's layout on disk: which job owns a directory, and where each rank writes.

``_claim`` holds the claim a job makes on its summary directory before any rank
writes (:func:`rankscribe.ranks.claim_job_dir`), ``_rank_dir`` the directory each
rank writes into (:func:`rankscribe.ranks.rank_dir`); the rules are in
``docs/layout.md``. The file names, modes and safe file operations they use are in
the sibling-facing :mod:`rankscribe.ranks.files`.

May import: ``coordination`` (the claim is broadcast through a coordinator, on the one
clock), ``detection``, ``messages`` (the claim file is read as bounded JSON),
``rankscribe.ranks._args``, ``errors`` and ``files``. The backends import ``_rank_dir`` for
the directory mode; nothing here imports a backend.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
