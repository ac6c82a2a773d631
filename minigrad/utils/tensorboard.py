"""torch.utils.tensorboard's SummaryWriter, the half a training loop uses: `add_scalar` and `add_scalars` append one
JSON line per value to `log_dir/scalars.jsonl` ({"tag", "value", "step", "walltime"}; strict JSON, so a NaN or
infinite value is the string "NaN", "Infinity" or "-Infinity", which float() reads back), so that makemore's
`writer.add_scalar("Loss/train", loss.item(), step)` runs unchanged. These are not TensorBoard's event files:
TensorBoard does not read them; `pandas.read_json(path, lines=True)` or a few lines of Python do. The other `add_*`
methods (images, histograms, graphs, ...) refuse in one line.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from datetime import datetime
from typing import Any

__all__ = ["SummaryWriter"]


class SummaryWriter:
    """Scalars of a run, one JSON line each, in log_dir/scalars.jsonl (log_dir as PyTorch's: runs/DATETIME_HOST +
    comment where not given). The file is appended to, so a resumed run continues it; close() or `with` closes it."""

    def __init__(self, log_dir: str | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        if log_dir is None:
            log_dir = os.path.join("runs", f"{datetime.now():%b%d_%H-%M-%S}_{socket.gethostname()}{comment}")
        os.makedirs(log_dir, exist_ok=True)
        self.log_dir = log_dir
        self.path = os.path.join(log_dir, f"scalars{filename_suffix}.jsonl")
        self.file = open(self.path, "a", encoding="utf-8")  # closed by close() or `with`, as PyTorch's writer

    def get_logdir(self) -> str:
        return self.log_dir

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None, walltime: float | None = None,
                   new_style: bool = False, double_precision: bool = False) -> None:
        """One value (a number, or a tensor or array of one element) under `tag` at `global_step`."""
        if not isinstance(tag, str):
            raise TypeError(f"SummaryWriter.add_scalar: tag must be a str, got {type(tag).__name__} {tag!r:.40}")
        value = scalar_value
        if hasattr(scalar_value, "item"):
            try:
                value = scalar_value.item()
            except (RuntimeError, ValueError):  # more than one element: refused below
                pass
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError(f"SummaryWriter.add_scalar({tag!r}): the value must be a number or a one-element tensor, "
                            f"got {type(scalar_value).__name__} {scalar_value!r:.40}")
        record = {"tag": tag, "value": as_json(value), "step": None if global_step is None else int(global_step),
                  "walltime": time.time() if walltime is None else as_json(walltime)}
        self.file.write(json.dumps(record, allow_nan=False) + "\n")

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict[str, Any], global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Several values at one step, each under main_tag/name (PyTorch writes each to a folder of that name)."""
        for name, value in tag_scalar_dict.items():
            self.add_scalar(f"{main_tag}/{name}", value, global_step, walltime)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("add_"):
            raise NotImplementedError(f"SummaryWriter.{name}: minigrad's writer keeps scalars only (add_scalar, "
                                      f"add_scalars, in {self.__dict__.get('path', 'log_dir/scalars.jsonl')}); for "
                                      f"TensorBoard's other panels use torch.utils.tensorboard itself")
        raise AttributeError(f"'SummaryWriter' object has no attribute {name!r}")


def as_json(value: float) -> float | str:
    """A float as strict JSON holds it: a finite one as a number, NaN and the infinities as the strings that float()
    and JavaScript's Number() read back ("NaN", "Infinity", "-Infinity"); json.dumps would write bare NaN, not JSON."""
    value = float(value)
    return value if math.isfinite(value) else {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(value)]
