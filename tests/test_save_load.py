"""Issue 50: mg.save / mg.load as torch.save and torch.load's weights-only loading: any nesting of tensors, arrays,
numbers, strings, None, lists, tuples and dicts, to a path or an open binary file, given back as torch gives it back;
a module refused naming state_dict(); never unpickling; files of format 1 (minigrad 0.3) still read."""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
from minigrad.array import backend

FORMAT_1 = Path(__file__).parent / "data" / "checkpoint-format-1.npz"  # written by minigrad's save before format 2


def _kinds(obj):
    """The structure of obj with each leaf as its kind: what a round trip must keep."""
    if isinstance(obj, dict):
        return {k: _kinds(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj).__name__, [_kinds(v) for v in obj]
    if hasattr(obj, "shape") and hasattr(obj, "requires_grad"):
        return "tensor", tuple(obj.shape), str(obj.dtype).removeprefix("torch."), obj.requires_grad
    if isinstance(obj, np.ndarray):
        return "array", obj.shape, str(obj.dtype)
    return type(obj).__name__, obj


def _objects(lib):
    w = lib.tensor([[1.0, 2.0]], requires_grad=True)
    return {"weights": [w, w], "step": 3, "ints": lib.tensor([1, 2]), "pair": (0.9, "x", None, True),
            "array": np.arange(4.0).reshape(2, 2), 7: {"nested": [{"deep": lib.zeros(0)}]}, "lr": 2.5e-4}


@pytest.mark.parametrize("where", ["path", "open file", "bytes"])
def test_any_object_round_trips_as_torchs_weights_only_load_gives_it_back(where, tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: this case compares with it")
    buffer = io.BytesIO()
    torch.save(_objects(torch), buffer)
    buffer.seek(0)
    numpy_arrays = [np._core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype("float64"))]
    with torch.serialization.safe_globals(numpy_arrays):  # PyTorch's weights-only load takes arrays once told to
        theirs = torch.load(buffer, weights_only=True)
    mine = _objects(mg)
    if where == "path":
        mg.save(mine, tmp_path / "x.pt")
        back = mg.load(tmp_path / "x.pt")
    elif where == "open file":
        with open(tmp_path / "x.pt", "wb") as f:
            mg.save(mine, f)
        with open(tmp_path / "x.pt", "rb") as f:
            back = mg.load(f)
    else:
        mg.save(mine, buffer := io.BytesIO())
        back = mg.load(io.BytesIO(buffer.getvalue()))
    assert _kinds(back) == _kinds(theirs)
    assert back["weights"][0] is back["weights"][1] and theirs["weights"][0] is theirs["weights"][1]
    assert back["weights"][0].tolist() == [[1.0, 2.0]] and back["ints"].tolist() == [1, 2]
    np.testing.assert_array_equal(back["array"], mine["array"])


def test_numpy_scalars_and_special_floats_keep_their_type():
    buffer = io.BytesIO()
    mg.save({"i": np.int64(4), "f": np.float32(0.5), "nan": float("nan"), "big": 2**70, None: -1, 1.5: "x"}, buffer)
    back = mg.load(io.BytesIO(buffer.getvalue()))
    assert type(back["i"]) is np.int64 and type(back["f"]) is np.float32 and back["big"] == 2**70
    assert np.isnan(back["nan"]) and back[None] == -1 and back[1.5] == "x"


def test_a_module_is_refused_naming_state_dict_as_torchs_weights_only_load_refuses_it(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: this case compares with it")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "m.pt")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "m.pt", weights_only=True)
    with pytest.raises(TypeError, match=r"is a Linear module.*save its state_dict\(\): mg.save\(model.state_dict"):
        mg.save(mg.nn.Linear(2, 2), tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


def test_torchs_allow_list_is_taken_and_changes_nothing(tmp_path):
    mg.serialization.add_safe_globals([np.ndarray])
    with mg.serialization.safe_globals([np.dtype]):
        mg.save({"w": np.zeros(2)}, tmp_path / "x.npz")
        assert mg.load(tmp_path / "x.npz", weights_only=True)["w"].tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="expected a list"):
        mg.serialization.add_safe_globals(np.ndarray)


def test_load_never_unpickles(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: this case writes a pickle with it")
    torch.save({"w": torch.zeros(2)}, tmp_path / "torch.pt")  # a zip of pickles: mg.load must not run them
    with pytest.raises(ValueError, match="is not a readable minigrad checkpoint"):
        mg.load(tmp_path / "torch.pt")
    with open(tmp_path / "plain.pkl", "wb") as f:
        pickle.dump({"w": 1}, f)
    with pytest.raises(ValueError, match="is not a readable minigrad checkpoint"):
        mg.load(tmp_path / "plain.pkl")


def test_a_file_of_format_1_still_reads_and_loads_into_a_model_and_an_optimizer():
    ckpt = mg.load(FORMAT_1)  # minigrad 0.3's layout: dicts, arrays as NumPy arrays, ints keys restored
    assert set(ckpt) == {"model", "optim", "step", "config"} and ckpt["step"] == 1
    assert ckpt["config"] == {"betas": [0.9, 0.95], "name": "tiny"}  # format 1 gave tuples back as lists
    assert isinstance(ckpt["model"]["weight"], np.ndarray) and list(ckpt["optim"]["state"]) == [0, 1]
    model = mg.nn.Linear(3, 2)
    model.load_state_dict(ckpt["model"])
    np.testing.assert_array_equal(model.weight.numpy(), ckpt["model"]["weight"])
    opt = mg.optim.AdamW(model.parameters(), lr=0.01)
    opt.load_state_dict(ckpt["optim"])
    assert opt.state[model.weight]["step"] == 1


def test_a_file_of_a_newer_format_is_refused_in_one_line(tmp_path):
    buffer = io.BytesIO()
    mg.save({"w": np.zeros(2)}, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source, zipfile.ZipFile(tmp_path / "new.npz", "w") as out:
        for name in source.namelist():
            data = source.read(name)
            if name == "__format__.npy":
                data = io.BytesIO()
                np.save(data, np.array(3))
                data = data.getvalue()
            out.writestr(name, data)
    with pytest.raises(ValueError, match="reads formats 1 to 2 .a newer minigrad wrote it"):
        mg.load(tmp_path / "new.npz")


def test_a_model_and_its_optimizer_round_trip_through_an_open_file():
    mg.manual_seed(0)
    model = mg.nn.Linear(3, 2)
    opt = mg.optim.AdamW(model.parameters(), lr=0.01)
    model(mg.randn(4, 3)).sum().backward()
    opt.step()
    buffer = io.BytesIO()
    mg.save({"model": model.state_dict(), "optim": opt.state_dict()}, buffer)
    back = mg.load(io.BytesIO(buffer.getvalue()))
    fresh = mg.nn.Linear(3, 2)
    fresh.load_state_dict(back["model"])
    again = mg.optim.AdamW(fresh.parameters(), lr=0.01)
    again.load_state_dict(back["optim"])
    np.testing.assert_array_equal(fresh.weight.numpy(), model.weight.numpy())
    np.testing.assert_array_equal(again.state[fresh.weight]["exp_avg"], opt.state[model.weight]["exp_avg"])


@pytest.mark.cuda
def test_map_location_puts_tensors_and_arrays_on_the_gpu():
    buffer = io.BytesIO()
    mg.save({"t": mg.ones(2), "a": np.zeros(2)}, buffer)
    back = mg.load(io.BytesIO(buffer.getvalue()), map_location="cuda")
    assert back["t"].device == "cuda" and backend.device_of(back["a"]) == "cuda"
