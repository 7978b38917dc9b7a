"""torch.distributed, looked at only when the program itself uses it.

rankscribe-ranks does not depend on torch and never imports it: importing
torch takes seconds and pulls in a large native library. A training script
launched by torchrun usually imports torch and initialises the default process
group itself; only then do :func:`initialised_distributed` and the functions
below see it, through ``sys.modules``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

__all__ = ["default_group_rank", "default_store", "initialised_distributed"]

logger = logging.getLogger(__name__)


def initialised_distributed() -> Any | None:
    """``torch.distributed`` if already imported and its default process group initialised.

    Returns None otherwise, and when asking raises (an unusual torch build):
    the caller then falls back to another backend.
    """
    distributed: Any = sys.modules.get("torch.distributed")
    if distributed is None:
        return None
    try:
        if distributed.is_available() and distributed.is_initialized():
            return distributed
    except Exception as error:  # a broken torch must not break rank detection
        logger.debug("torch.distributed cannot tell whether it is initialised: %s", error)
    return None


def default_group_rank(distributed: Any) -> tuple[int, int]:
    """This process's rank and the world size of the default process group."""
    return int(distributed.get_rank()), int(distributed.get_world_size())


def default_store(distributed: Any) -> Any:
    """The c10d store of the default process group (the one every rank reached at init).

    torch keeps it beside the default group and offers no public accessor;
    ``_get_default_store`` is that private one (torch 2.x).
    """
    return distributed.distributed_c10d._get_default_store()
