"""The run a user watches: the metrics log that train.py writes into --out as it goes (metrics.csv, one row per
estimate of the loss), TensorBoard's event files of the same scalars (--tensorboard), and `python train.py plot`, which
draws the log's curves, of one run or several on one figure. run.py keeps a MetricsLog; explain's page reads the log.
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Sequence
from typing import Any

from gptlab.settings import METRICS, FlagParser, UsageError, check_writes, dated_name, run_files, write_atomically

# the columns, in order: the step, the estimates at it (the last row: the final report's, over every held-out
# example), the learning rate of that step, training tokens per second so far and seconds since the run began
COLUMNS = ("step", "train_loss", "val_loss", "val_acc", "lr", "tokens_per_s", "elapsed_s")
# TensorBoard's tag of each column after the step: loss/train and loss/val share one panel
TAGS = {"train_loss": "loss/train", "val_loss": "loss/val", "val_acc": "accuracy/val", "lr": "lr",
        "tokens_per_s": "tokens_per_s"}


def read_log(path: str) -> list[dict[str, float]]:
    """The rows of a metrics log, each column as a float (the step as an int)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise UsageError(f"{path} is not a metrics log of train.py: its header is {reader.fieldnames}, not "
                             f"{','.join(COLUMNS)}")
        return [{key: int(row[key]) if key == "step" else float(row[key]) for key in COLUMNS} for row in reader]


class MetricsLog:
    """--out/metrics.csv, one row per estimate, each flushed as it is written, so a run that dies leaves its rows.
    A resumed run keeps the rows up to the checkpoint's step, drops those after it (written by a run that died after
    its last checkpoint, or past --keep-best's), in one atomic rewrite, and appends, its elapsed time going on from
    theirs. A fresh run starts a new log at its first row or checkpoint (begin), whichever comes first: until then an
    earlier run's log stays beside the earlier checkpoint, then it is kept under a dated name, as that checkpoint is
    (metrics-2025-01-31-142501.csv)."""

    def __init__(self, out: str, resume_step: int | None) -> None:
        self.path, self.file = os.path.join(out, METRICS), None
        self.elapsed_before, self.started = 0.0, time.perf_counter()
        if resume_step is not None:
            kept = [row for row in read_log(self.path) if row["step"] <= resume_step] \
                if os.path.exists(self.path) else []
            self.elapsed_before = kept[-1]["elapsed_s"] if kept else 0.0
            write_atomically(self.path, "the metrics log", lambda tmp: self.write_rows(tmp, kept))
            self.file = open(self.path, "a", newline="", encoding="utf-8")
        self.writer = None if self.file is None else csv.writer(self.file)

    @staticmethod
    def write_rows(path: str, rows: list[dict[str, float]]) -> None:
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(COLUMNS)
            writer.writerows([row[key] for key in COLUMNS] for row in rows)

    def begin(self) -> None:
        """A fresh run's log, once: an earlier one goes aside under a dated name; a new one starts with the header."""
        if self.file is None:
            if os.path.exists(self.path):
                os.replace(self.path, dated_name(self.path))
            self.file = open(self.path, "w", newline="", encoding="utf-8")
            self.writer = csv.writer(self.file)
            self.writer.writerow(COLUMNS)

    def write(self, step: int, **values: float) -> dict[str, float]:
        """One row: the step, the values COLUMNS names, and the elapsed time; returned as written."""
        self.begin()
        row = {"step": step, **{key: float(values[key]) for key in COLUMNS[1:-1]},
               "elapsed_s": round(self.elapsed_before + time.perf_counter() - self.started, 3)}
        self.writer.writerow([row[key] for key in COLUMNS])  # repr of a float: it reads back the same
        self.file.flush()
        return row

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


# ---- python train.py plot ----

def plot_main(argv: Sequence[str], prog: str = "train.py plot") -> int:
    p = FlagParser(prog=prog, description=f"Draw the training and held-out loss, and the learning rate, against the "
                   f"steps, from the {METRICS} of one run's folder or several (one colour each), to a PNG.")
    p.add_argument("out", nargs="*", default=["out"], help="the runs' --out folders (default ./out)")
    p.add_argument("--png", metavar="FILE", help=f"the picture (default: {os.path.splitext(METRICS)[0]}.png in the "
                                                 "first folder)")
    args = p.parse_args(argv)
    logs = {}
    for out in args.out:
        path = os.path.join(out, METRICS)
        if not os.path.isfile(path):
            raise UsageError(f"{out} has no {METRICS}: train a run there first (python train.py --out {out})")
        logs[out] = read_log(path)
    png = args.png or os.path.join(args.out[0], os.path.splitext(METRICS)[0] + ".png")
    if os.path.isdir(png) or not os.path.isdir(os.path.dirname(os.path.abspath(png))):
        raise UsageError(f"--png {png}: give a file name in a folder that exists")
    check_writes({"--png": png}, {path: what for out in args.out for path, what in run_files(out).items()})
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("plot needs matplotlib: pip install -e '.[plot]'") from None
    fig = curves_figure(logs)
    import matplotlib.pyplot as plt

    try:
        write_atomically(png, "--png", lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    finally:
        plt.close(fig)
    print(f"wrote {png}: {', '.join(f'{out} ({len(rows)} rows)' for out, rows in logs.items())}")
    return 0


def curves_figure(logs: dict[str, list[dict[str, float]]]) -> Any:
    """A matplotlib Figure: above, each run's training loss (solid) and held-out loss (dashed) against the step, on a
    log scale; below, its learning rate. One colour per run, named by its folder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss_ax, lr_ax) = plt.subplots(2, 1, sharex=True, figsize=(7, 5.5), height_ratios=(3, 1),
                                         layout="constrained")
    for i, (name, rows) in enumerate(logs.items()):
        steps, colour = [row["step"] for row in rows], f"C{i}"
        loss_ax.plot(steps, [row["train_loss"] for row in rows], color=colour, label=f"{name}: train")
        loss_ax.plot(steps, [row["val_loss"] for row in rows], color=colour, linestyle="--", label=f"{name}: val")
        lr_ax.plot(steps, [row["lr"] for row in rows], color=colour, label=name)
    loss_ax.set_yscale("log")  # a loss falls by orders of magnitude on a toy task: its tail stays readable
    loss_ax.set_ylabel("loss (cross-entropy, log scale)")
    loss_ax.set_title("Loss against steps (dashed: held out; the last point: every held-out example)", fontsize=10)
    loss_ax.legend(fontsize=8)
    loss_ax.grid(alpha=0.3)
    lr_ax.set_ylabel("learning rate")
    lr_ax.set_xlabel("step")
    lr_ax.grid(alpha=0.3)
    return fig


def loss_points(rows: list[dict[str, float]]) -> dict[str, list[tuple[int, float]]]:
    """(step, loss) of the training and held-out curves, the finite losses above 0 (a log scale has no 0): what the
    explain page draws."""
    return {part: [(row["step"], row[f"{part}_loss"]) for row in rows
                   if math.isfinite(row[f"{part}_loss"]) and row[f"{part}_loss"] > 0] for part in ("train", "val")}
