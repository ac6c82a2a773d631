"""The run a user watches (gptlab/metrics.py): train.py's metrics log in --out, kept across --resume, its last row the
`final:` line; `train.py plot` drawing it (the figure's data read back from matplotlib); --tensorboard's event files
read back with TensorBoard's own reader; the explain page's curve. Tiny real runs, as a user starts them."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest

import train
from gptlab import metrics
from gptlab.explain_page import page_html
from gptlab.metrics import COLUMNS, TAGS, loss_points, read_log

SMALL = ["--n-embd", "16", "--n-head", "2", "--n-layer", "1", "--batch-size", "8", "--eval-iters", "2", "--samples",
         "0", "--no-explain", "--eval-interval", "4"]


def run(capsys: pytest.CaptureFixture, out: Path, *argv: str) -> str:
    assert train.main([*argv, "--out", str(out), *SMALL]) == 0
    return capsys.readouterr().out


def final_line(printed: str) -> dict[str, float]:
    line = re.search(r"^final: (.*)$", printed, flags=re.M)[1]
    return {key: float(value) for key, value in (pair.split("=") for pair in line.split())}


def test_a_run_logs_each_estimate_and_ends_with_the_final_line(tmp_path, capsys):
    printed = run(capsys, tmp_path, "--steps", "10")
    with open(tmp_path / "metrics.csv", newline="", encoding="utf-8") as f:
        assert next(csv.reader(f)) == list(COLUMNS)  # a header pandas and a spreadsheet read as column names
    rows = read_log(str(tmp_path / "metrics.csv"))
    assert [row["step"] for row in rows] == [4, 8, 10]
    estimates = re.findall(r"step\s+(\d+)  train loss ([\d.]+)  val loss ([\d.]+)", printed)
    for (step, train_loss, val_loss), row in zip(estimates[:-1], rows[:-1], strict=True):  # before the last: as printed
        assert (int(step), float(train_loss), float(val_loss)) == (row["step"], round(row["train_loss"], 4),
                                                                    round(row["val_loss"], 4))
    final = final_line(printed)
    last = rows[-1]
    assert final == {"step": last["step"], "train_loss": round(last["train_loss"], 4),
                     "val_loss": round(last["val_loss"], 4), "val_acc": round(last["val_acc"], 4),
                     "tokens_per_s": round(last["tokens_per_s"])}
    assert all(0 < row["lr"] <= 1e-3 * 3 and row["tokens_per_s"] > 0 for row in rows)
    assert [row["elapsed_s"] for row in rows] == sorted(row["elapsed_s"] for row in rows)


def test_resume_appends_and_drops_the_rows_of_a_run_that_died_after_its_checkpoint(tmp_path, capsys):
    run(capsys, tmp_path, "--steps", "8")
    log = tmp_path / "metrics.csv"
    before = read_log(str(log))
    with open(log, "a", encoding="utf-8") as f:  # what a run killed after step 12 but before saving would leave
        f.write("12,1.5,1.6,0.5,0.001,100.0,99.0\n")
    run(capsys, tmp_path, "--steps", "16", "--resume")
    rows = read_log(str(log))
    assert rows[:len(before)] == before  # kept as they were
    assert [row["step"] for row in rows] == [4, 8, 12, 16] and rows[2]["elapsed_s"] != 99.0  # 12: the new run's
    assert rows[2]["elapsed_s"] > before[-1]["elapsed_s"]  # the resumed run's time goes on from the log's
    assert not list(tmp_path.glob(".metrics.csv*"))  # the atomic rewrite left no temporary file


def test_a_fresh_run_keeps_the_earlier_log_under_a_dated_name(tmp_path, capsys):
    run(capsys, tmp_path, "--steps", "4")
    earlier = (tmp_path / "metrics.csv").read_text(encoding="utf-8")
    run(capsys, tmp_path, "--steps", "8")
    [kept] = tmp_path.glob("metrics-*.csv")
    assert kept.read_text(encoding="utf-8") == earlier
    assert [row["step"] for row in read_log(str(tmp_path / "metrics.csv"))] == [4, 8]


def test_a_file_that_is_not_a_log_is_refused_by_name(tmp_path):
    (tmp_path / "metrics.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    assert train.main(["plot", str(tmp_path)]) == 2


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for name, lr in (("a", "1e-3"), ("b", "3e-3")):
        assert train.main(["--steps", "12", "--lr", lr, "--out", str(root / name), *SMALL]) == 0
    return root / "a", root / "b"


def test_plot_draws_every_run_s_log_on_one_figure(two_runs, tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib", reason="train.py plot needs matplotlib (pip install -e '.[plot]')")
    drawn = []
    monkeypatch.setattr(metrics, "curves_figure", lambda logs, draw=metrics.curves_figure: drawn.append(draw(logs))
                        or drawn[-1])
    png = tmp_path / "both.png"
    assert train.main(["plot", *map(str, two_runs), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    loss_ax, lr_ax = drawn[0].axes
    for i, out in enumerate(two_runs):
        rows = read_log(str(out / "metrics.csv"))
        train_line, val_line = loss_ax.lines[2 * i: 2 * i + 2]
        assert train_line.get_label() == f"{out}: train" and val_line.get_linestyle() == "--"
        for line, key in ((train_line, "train_loss"), (val_line, "val_loss"), (lr_ax.lines[i], "lr")):
            assert list(line.get_xdata()) == [row["step"] for row in rows]
            assert list(line.get_ydata()) == [row[key] for row in rows]
    assert train.main(["plot", str(two_runs[0])]) == 0  # default: metrics.png in the run's folder
    assert (two_runs[0] / "metrics.png").is_file()


def test_plot_refuses_a_folder_without_a_log_in_one_line(tmp_path, capsys):
    assert train.main(["plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{tmp_path} has no metrics.csv" in err


def test_plot_refuses_to_write_over_a_file_of_the_run(two_runs, capsys):
    assert train.main(["plot", *map(str, two_runs), "--png", str(two_runs[1] / "metrics.csv")]) == 2
    assert "is the metrics log of the run in" in capsys.readouterr().err
    assert read_log(str(two_runs[1] / "metrics.csv"))  # untouched


def test_plot_without_matplotlib_says_what_to_install(two_runs, monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert train.main(["plot", str(two_runs[0])]) == 2
    assert "plot needs matplotlib: pip install -e '.[plot]'" in capsys.readouterr().err


def test_the_explain_page_shows_the_log_s_curve(two_runs, tmp_path, capsys):
    page = tmp_path / "page.html"
    assert train.main(["explain", "--out", str(two_runs[0]), "--html", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    rows = read_log(str(two_runs[0] / "metrics.csv"))
    polylines = dict(re.findall(r'<polyline class="(\w+)" points="([^"]*)"', text))
    assert set(polylines) == {"train", "val"}
    for part, points in polylines.items():
        ys = [float(p.split(",")[1]) for p in points.split()]
        assert len(ys) == len(rows)
        # pixels grow downwards: the highest loss is the smallest y, in the order of the log
        losses = [row[f"{part}_loss"] for row in rows]
        assert ys.index(min(ys)) == losses.index(max(losses)) and ys.index(max(ys)) == losses.index(min(losses))
    assert 'id="training"' not in page_html_without_log(two_runs[0])


def page_html_without_log(out: Path) -> str:
    from gptlab.checkpoint import load_checkpoint, restore
    from gptlab.explain import attention_steps, default_ids

    task, model = restore(load_checkpoint(str(out)), "cpu")
    return page_html(attention_steps(model.eval(), task, default_ids(task)))


def test_loss_points_leave_out_what_a_log_scale_cannot_show():
    rows = [{"step": 1, "train_loss": 2.0, "val_loss": math.nan}, {"step": 2, "train_loss": 1.0, "val_loss": 1.5},
            {"step": 3, "train_loss": 0.0, "val_loss": math.inf}]
    assert loss_points(rows) == {"train": [(1, 2.0), (2, 1.0)], "val": [(2, 1.5)]}


def test_tensorboard_writes_the_same_scalars_as_the_log(tmp_path, capsys):
    pytest.importorskip("tensorboard", reason="--tensorboard needs tensorboard (pip install -e '.[tensorboard]')")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run(capsys, tmp_path, "--steps", "8", "--tensorboard")
    run(capsys, tmp_path, "--steps", "12", "--tensorboard", "--resume")
    rows = read_log(str(tmp_path / "metrics.csv"))
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(TAGS.values())
    for key, tag in TAGS.items():
        scalars = events.Scalars(tag)
        assert [s.step for s in scalars] == [row["step"] for row in rows]
        assert [s.value for s in scalars] == pytest.approx([row[key] for row in rows], rel=1e-6)  # float32 there


def test_tensorboard_without_the_package_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard"
                        else find_spec(name, *a))
    assert train.main(["--tensorboard", "--out", str(tmp_path / "run"), *SMALL]) == 2
    assert "--tensorboard needs the tensorboard package: pip install -e '.[tensorboard]'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
