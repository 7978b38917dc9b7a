"""The coordinator backends: the ways the ranks of a job reach each other.

Each backend is a subclass of :class:`rankscribe.ranks.Coordinator` in a module of
its own: MPI point-to-point messages (``_mpi``, with their header in ``_message``
and mpi4py loaded on demand by ``rankscribe.ranks._mpi_loader``), the key-value store of
``torch.distributed`` (``_store``; ``rankscribe.ranks._torch_group`` looks at a torch the
program already imported), a rendezvous folder (``_rendezvous``), that folder hidden in the job's
directory (``_jobfolder``, with the ownership rules of every folder in ``_folders``)
and a single process (``_single``). ``rankscribe.ranks.create_coordinator``, above
them, picks one; see ``docs/layout.md``.

May import: ``rankscribe.ranks._coordinator``, ``_codec``, ``_args``, ``_deadline``,
``_info``, ``_mpi_loader``, ``_torch_group``, ``layout._rank_dir``, ``errors``, ``files`` and
``launchers``. Rank detection (``_info``) loads MPI and looks at torch through the same two
top-level modules, so it imports nothing of this folder. Nothing here
imports ``_creation`` or ``layout._claim``, which sit above the backends.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
