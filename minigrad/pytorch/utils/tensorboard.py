"""torch.utils.tensorboard's SummaryWriter, the half a training loop uses (`add_scalar`, `add_scalars`), so that
makemore's `writer.add_scalar("Loss/train", loss.item(), step)` runs unchanged. Where the tensorboard package is
installed (pip install -e '.[tensorboard]'), each value is an event in TensorBoard's own event file, written by its
EventFileWriter as PyTorch's writer does: `tensorboard --logdir runs` shows it. Without it, the fallback appends one
JSON line per value to `log_dir/scalars.jsonl` ({"tag", "value", "step", "walltime"}; strict JSON, so a NaN or
infinite value is the string "NaN", "Infinity" or "-Infinity", which float() reads back), which TensorBoard does not
read, but `pandas.read_json(path, lines=True)` or a few lines of Python do. train.py --tensorboard writes through it.
The other `add_*` methods (images, histograms, graphs, ...) refuse in one line.
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


def event_file_writer(log_dir: str, max_queue: int, flush_secs: int, filename_suffix: str) -> Any | None:
    """TensorBoard's EventFileWriter on a new events.out.tfevents.* file in log_dir, as torch.utils.tensorboard opens
    it; None where the tensorboard package is not installed."""
    try:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        return None
    return EventFileWriter(log_dir, max_queue, flush_secs, filename_suffix)


class SummaryWriter:
    """Scalars of a run, in TensorBoard's event files where it is installed, else one JSON line each in
    log_dir/scalars.jsonl (log_dir as PyTorch's: runs/DATETIME_HOST + comment where not given). A resumed run continues
    the folder: purge_step, as PyTorch's, tells TensorBoard to hide what an earlier run wrote at that step and after
    (the JSON lines are only appended to). close() or `with` closes the file."""

    def __init__(self, log_dir: str | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        if log_dir is None:
            log_dir = os.path.join("runs", f"{datetime.now():%b%d_%H-%M-%S}_{socket.gethostname()}{comment}")
        os.makedirs(log_dir, exist_ok=True)
        self.log_dir = log_dir
        self.events = event_file_writer(log_dir, max_queue, flush_secs, filename_suffix)
        if self.events is not None:
            self.path = self.events.get_logdir()
            if purge_step is not None:  # as PyTorch's: a START at purge_step makes TensorBoard drop the later events
                from tensorboard.compat.proto.event_pb2 import Event, SessionLog

                self.events.add_event(Event(step=purge_step, file_version="brain.Event:2"))
                self.events.add_event(Event(step=purge_step, session_log=SessionLog(status=SessionLog.START)))
            return
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
        step = None if global_step is None else int(global_step)
        walltime = time.time() if walltime is None else walltime
        if self.events is not None:
            from tensorboard.compat.proto.event_pb2 import Event
            from tensorboard.compat.proto.summary_pb2 import Summary

            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            self.events.add_event(Event(wall_time=walltime, step=step or 0, summary=summary))
            return
        record = {"tag": tag, "value": as_json(value), "step": step, "walltime": as_json(walltime)}
        self.file.write(json.dumps(record, allow_nan=False) + "\n")

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict[str, Any], global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Several values at one step, each under main_tag/name (PyTorch writes each to a folder of that name)."""
        for name, value in tag_scalar_dict.items():
            self.add_scalar(f"{main_tag}/{name}", value, global_step, walltime)

    def flush(self) -> None:
        (self.file if self.events is None else self.events).flush()

    def close(self) -> None:
        (self.file if self.events is None else self.events).close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("add_"):
            raise NotImplementedError(f"SummaryWriter.{name}: minigrad's writer keeps scalars only (add_scalar, "
                                      f"add_scalars, in {self.__dict__.get('path', 'log_dir')}); for "
                                      f"TensorBoard's other panels use torch.utils.tensorboard itself")
        raise AttributeError(f"'SummaryWriter' object has no attribute {name!r}")


def as_json(value: float) -> float | str:
    """A float as strict JSON holds it: a finite one as a number, NaN and the infinities as the strings that float()
    and JavaScript's Number() read back ("NaN", "Infinity", "-Infinity"); json.dumps would write bare NaN, not JSON."""
    value = float(value)
    return value if math.isfinite(value) else {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(value)]
