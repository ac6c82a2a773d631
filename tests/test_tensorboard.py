"""minigrad.utils.tensorboard.SummaryWriter: the scalars a training loop logs (makemore's add_scalar), as TensorBoard's
event files where the tensorboard package is installed (read back with its own reader), else one JSON line each,
appended; the panels it does not keep refuse in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from minigrad.utils import tensorboard
from minigrad.utils.tensorboard import SummaryWriter

import minigrad as mg


@pytest.fixture
def json_lines(monkeypatch):
    """The fallback, as without the tensorboard package: no event file writer."""
    monkeypatch.setattr(tensorboard, "event_file_writer", lambda *args: None)


def read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_scalars_are_written_one_json_line_each_and_appended(tmp_path, json_lines):
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


@pytest.mark.parametrize("events", [False, True])
def test_what_it_does_not_keep_is_refused_in_one_line(tmp_path, monkeypatch, events):
    if events:
        pytest.importorskip("tensorboard", reason="event files need tensorboard (pip install -e '.[tensorboard]')")
    else:
        monkeypatch.setattr(tensorboard, "event_file_writer", lambda *args: None)
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


def test_nan_and_infinities_are_written_as_strict_json_strings_that_float_reads_back(tmp_path, json_lines):
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


def scalars(log_dir):
    """Every scalar in log_dir's event files, read by TensorBoard's own EventAccumulator: tag -> [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {tag: [(s.step, s.value) for s in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_with_tensorboard_installed_scalars_are_event_files_tensorboard_reads(tmp_path):
    pytest.importorskip("tensorboard", reason="event files need tensorboard (pip install -e '.[tensorboard]')")
    with SummaryWriter(log_dir=str(tmp_path)) as writer:
        writer.add_scalar("Loss/train", mg.tensor(2.5), 0)
        writer.add_scalar("Loss/train", 1.25, global_step=1, walltime=100.0)
        writer.add_scalars("Loss", {"train": np.float32(0.5), "test": float("nan")}, 2)
    assert [p.name.startswith("events.out.tfevents.") for p in tmp_path.iterdir()] == [True]
    back = scalars(tmp_path)
    assert back["Loss/train"] == [(0, 2.5), (1, 1.25), (2, 0.5)]
    [(step, value)] = back["Loss/test"]
    assert step == 2 and np.isnan(value)  # NaN as NaN: an event holds a float


def test_purge_step_hides_what_an_earlier_run_wrote_from_that_step_on(tmp_path):
    pytest.importorskip("tensorboard", reason="event files need tensorboard (pip install -e '.[tensorboard]')")
    with SummaryWriter(log_dir=str(tmp_path)) as writer:
        for step in range(5):
            writer.add_scalar("loss", float(step), step)
    with SummaryWriter(log_dir=str(tmp_path), purge_step=3, filename_suffix=".resumed") as writer:
        writer.add_scalar("loss", 30.0, 3)
    assert scalars(tmp_path)["loss"] == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 30.0)]
