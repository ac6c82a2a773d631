"""minigrad.utils.tensorboard.SummaryWriter: the scalars a training loop logs (makemore's add_scalar), one JSON line
each, appended; the panels it does not keep refuse in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import minigrad as mg
from minigrad.utils.tensorboard import SummaryWriter


def read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_scalars_are_written_one_json_line_each_and_appended(tmp_path):
    with SummaryWriter(log_dir=str(tmp_path / "run")) as writer:
        writer.add_scalar("Loss/train", mg.tensor(2.5), 0)
        writer.add_scalar("Loss/train", 1.25, global_step=1, walltime=100.0)
        writer.add_scalars("Loss", {"train": np.float32(0.5), "test": 0.75}, 2)
        assert writer.get_logdir() == str(tmp_path / "run")
    records = read(tmp_path / "run" / "scalars.jsonl")
    assert [(r["tag"], r["value"], r["step"]) for r in records] == [
        ("Loss/train", 2.5, 0), ("Loss/train", 1.25, 1), ("Loss/train", 0.5, 2), ("Loss/test", 0.75, 2)]
    assert records[1]["walltime"] == 100.0 and isinstance(records[0]["walltime"], float)
    with SummaryWriter(log_dir=str(tmp_path / "run")) as writer:  # a resumed run continues the file
        writer.add_scalar("Loss/train", 0.125, 3)
    assert len(read(tmp_path / "run" / "scalars.jsonl")) == 5


def test_the_default_log_dir_is_pytorch_s_runs_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = SummaryWriter(comment="_lr0.1")
    writer.close()
    assert writer.get_logdir().startswith("runs/") and writer.get_logdir().endswith("_lr0.1")


def test_what_it_does_not_keep_is_refused_in_one_line(tmp_path):
    writer = SummaryWriter(log_dir=str(tmp_path))
    with pytest.raises(NotImplementedError, match="add_histogram: minigrad's writer keeps scalars only"):
        writer.add_histogram("w", np.zeros(3), 0)
    with pytest.raises(TypeError, match=r"add_scalar\('loss'\): the value must be a number"):
        writer.add_scalar("loss", mg.zeros(2), 0)
    with pytest.raises(TypeError, match="tag must be a str"):
        writer.add_scalar(3, 1.0)
    with pytest.raises(AttributeError):
        writer.no_such_thing  # noqa: B018
    writer.close()


def strict(line):
    """json.loads that refuses what JSON does not have (NaN, Infinity), as a strict parser (JavaScript's) does."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(line, parse_constant=refuse)


def test_nan_and_infinities_are_written_as_strict_json_strings_that_float_reads_back(tmp_path):
    values = [float("nan"), float("inf"), -float("inf"), np.float32("nan"), mg.tensor(float("-inf")), 0.5]
    with SummaryWriter(log_dir=str(tmp_path)) as writer:
        for step, value in enumerate(values):
            writer.add_scalar("loss", value, step, walltime=float(step))
        writer.add_scalar("loss", 1.0, 9, walltime=float("inf"))
    with open(tmp_path / "scalars.jsonl", encoding="utf-8") as f:
        records = [strict(line) for line in f]
    assert [r["value"] for r in records] == ["NaN", "Infinity", "-Infinity", "NaN", "-Infinity", 0.5, 1.0]
    back = np.array([float(r["value"]) for r in records])
    np.testing.assert_array_equal(back, [np.nan, np.inf, -np.inf, np.nan, -np.inf, 0.5, 1.0])  # NaN equal to NaN
    assert [r["walltime"] for r in records] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, "Infinity"]
    with pytest.raises(ValueError, match="not JSON: NaN"):  # the check itself refuses what json.dumps writes
        strict(json.dumps({"value": float("nan")}))
