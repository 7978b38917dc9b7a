"""The coordinator backends: the ways the ranks of a job reach each other, and the choice.

Each backend is a subclass of :class:`rankscribe.ranks.Coordinator` in a module of
its own: MPI point-to-point messages (``_mpi``, with their header in ``_message``
and mpi4py loaded on demand by ``detection._mpi_loader``), the key-value store of
``torch.distributed`` (``_store``; ``detection._torch_group`` looks at a torch the
program already imported), a rendezvous folder (``_rendezvous``), that folder hidden in
the job's directory (``_jobfolder``, with the ownership rules of every folder in
``_folders``) and a single process (``_single``). ``_creation``, above them, picks one
(:func:`rankscribe.ranks.choose_backend`) and creates it
(:func:`rankscribe.ranks.create_coordinator`); see ``docs/layout.md``.

May import: ``coordination`` (the base class and the one clock), ``detection``,
``messages``, ``layout._rank_dir``, ``rankscribe.ranks._args``, ``errors`` and ``files``.
Rank detection loads MPI and looks at torch through ``detection``'s own modules, so it
imports nothing of this folder. No backend imports ``_creation``, and nothing here
imports ``layout._claim`` or ``tree``, which sit above the backends.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
