"""torch.nn.parallel's DistributedDataParallel: the name exists, so that a program importing it runs, and making one
refuses in one line naming minigrad's data parallelism over MPI (minigrad/pytorch/distributed.py).
"""

from __future__ import annotations

from typing import Any

from minigrad.pytorch.distributed import ALTERNATIVE

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel:
    """Refused when made: there is no torch.distributed process group to spread a module over here."""

    def __init__(self, module: Any, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"DistributedDataParallel: torch.distributed is not supported; {ALTERNATIVE}")
