"""Rank detection: which rank this process is, among how many, and which launcher started it.

``_info`` holds :func:`rankscribe.ranks.detect` and :class:`rankscribe.ranks.RankInfo`,
read from the launchers' environment variables in ``_launchers`` (their one table,
sibling-facing as :mod:`rankscribe.ranks.launchers`) or from what the program itself
initialised: MPI ``COMM_WORLD`` through ``_mpi_loader`` (mpi4py loaded on demand, for the
MPI backend too) and torch.distributed's default process group through ``_torch_group``
(torch never imported; the store backend looks through it too). The rules are in
``docs/layout.md`` ("Rank detection").

May import: ``rankscribe.ranks._args`` and ``errors``, nothing else of the package: the
coordinators, the layout and the backends stand on detection, and the choice of a backend
(``backends._creation``) sits above the backends.
"""

__all__: list[str] = []  # the modules inside are private; public names are re-exported above
