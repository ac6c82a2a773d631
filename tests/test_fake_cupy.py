"""The CuPy stand-in (tests/fake_cupy.py): each of its rules refuses a deliberately wrong call, as CuPy would, and
lets the right one through; read-backs and host-to-device copies are counted. These run in every `pytest` (on the
stand-in's arrays directly, nothing installed). The last tests run with it standing in for CuPy
(MINIGRAD_CUPY_STANDIN=1 pytest -m cuda): one default training step reads back twice and copies only its batch, a
CPU run makes nothing on the device."""

from __future__ import annotations

import math

import fake_cupy as cp
import numpy as np
import pytest

import minigrad as mg
import train
from gptlab import run
from minigrad.array import backend


@pytest.fixture
def ledger() -> cp.Ledger:
    cp.ledger.reset()
    return cp.ledger


def device_array(values, dtype=np.float64) -> cp.ndarray:
    return cp.asarray(np.asarray(values, dtype=dtype))


def test_no_implicit_conversion_to_numpy() -> None:
    x = device_array([1.0, 2.0])
    host = np.zeros(2)
    for convert in (np.asarray, np.array, lambda a: host.__setitem__(..., a)):
        with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
            convert(x)
    assert type(np.zeros(2) + 0.5) is np.ndarray  # NumPy on the host is untouched


def test_numpy_functions_run_cupy_s_where_it_has_one_and_refuse_where_not() -> None:
    x = device_array([[1.0, -2.0], [3.0, 4.0]])
    y = np.exp(x)  # a ufunc: __array_ufunc__
    assert type(y) is cp.ndarray and np.allclose(y.get(), np.exp(x.get()))
    joined = np.concatenate([x, x])  # a function: __array_function__
    assert type(joined) is cp.ndarray and joined.shape == (4, 2)
    total = np.sum(x)  # a reduction gives a 0-d array, not a NumPy scalar
    assert type(total) is cp.ndarray and total.shape == () and total.item() == 6.0
    with pytest.raises(TypeError, match="nanpercentile"):  # CuPy has no nanpercentile
        np.nanpercentile(x, 50)
    with pytest.raises(AttributeError, match="errstate"):  # nor errstate
        cp.errstate  # noqa: B018


def test_host_arrays_and_lists_are_refused_as_operands() -> None:
    x = device_array([1.0, 2.0, 3.0])
    for wrong in (lambda: x + np.ones(3), lambda: np.ones(3) + x, lambda: np.add(x, np.ones(3)),
                  lambda: cp.add(x, [1.0, 2.0, 3.0]), lambda: cp.where(x > 1, x, np.zeros(3))):
        with pytest.raises(TypeError, match="Unsupported type"):
            wrong()
    right = x + 1.0, x * np.float32(2), cp.where(x > 1, x, 0.0), x + device_array([1.0, 1.0, 1.0])
    assert all(type(r) is cp.ndarray for r in right)


def test_reductions_take_no_initial_and_no_where() -> None:
    x = device_array([1.0, -5.0])
    for wrong in (lambda: x.max(initial=0.0), lambda: np.max(x, initial=0.0), lambda: x.sum(where=x > 0),
                  lambda: cp.amax(x, initial=0.0)):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            wrong()
    assert x.max().item() == 1.0 and np.max(x, axis=0, keepdims=True).shape == (1,)


def test_read_backs_are_counted(ledger) -> None:
    x = device_array(2.5)
    assert (float(x), int(x), x.item(), bool(x), x.tolist(), cp.asnumpy(x).tolist(), x.get().tolist()) == (
        2.5, 2, 2.5, True, 2.5, 2.5, 2.5)
    assert [entry.split()[0] for entry in ledger.read_backs] == [
        "float()", "int()", "item()", "bool()", "tolist()", "get()", "get()"]
    assert all("tests/test_fake_cupy.py" in entry for entry in ledger.read_backs)  # where it was asked
    with pytest.raises(TypeError):  # no __index__ on CuPy's arrays: a device integer cannot index a list
        [1, 2][cp.asarray(np.int64(0))]


def test_host_to_device_copies_are_counted_and_device_made_arrays_are_not(ledger) -> None:
    x = cp.asarray([1.0, 2.0, 3.0])
    x[np.array([0, 1])] = 0.0
    x.set(np.ones(3))
    x[0:2] = [4.0, 5.0]
    assert [entry.split(" at ")[0] for entry in ledger.host_to_device] == [
        "cupy.asarray() of shape (3,)", "x[index] = with a host index of shape (2,)", "set() of shape (3,)",
        "x[index] = host values of shape (2,)"]
    ledger.reset()
    made = (cp.full((), 0.5, dtype=np.float32), cp.zeros(3), cp.asarray(x), x * 2, cp.arange(3))
    assert not ledger.host_to_device and ledger.arrays == len(made) - 1  # asarray of a device array: itself


def test_out_of_bounds_indices_wrap_around_and_masks_are_read_back(ledger) -> None:
    x = device_array([10.0, 20.0, 30.0])
    assert x[cp.asarray(np.array([1, 3, -1]))].tolist() == [20.0, 10.0, 30.0]  # no IndexError, as CuPy
    with pytest.raises(IndexError):  # NumPy raises for the same index
        x.get()[np.array([1, 3])]
    ledger.reset()
    assert x[x > 15].shape == (2,)  # the number of Trues decides the shape: read back
    assert len(ledger.read_backs) == 1 and "boolean mask" in ledger.read_backs[0]


def test_ufunc_at_accumulates_and_special_functions_match(ledger) -> None:
    target = cp.zeros(3)
    cp.add.at(target, cp.asarray(np.array([0, 2, 0])), device_array([1.0, 2.0, 3.0]))
    assert target.tolist() == [4.0, 0.0, 2.0]
    x = device_array([-1.0, 0.0, 0.5], np.float32)
    for name in ("erf", "erfc"):
        y = getattr(cp.cupyx.scipy.special, name)(x)
        assert y.dtype == np.float32
        np.testing.assert_allclose(y.get(), [getattr(math, name)(v) for v in (-1.0, 0.0, 0.5)], rtol=1e-6)
    with pytest.raises(TypeError, match="Unsupported type"):
        cp.cupyx.scipy.special.erf(np.zeros(2))


def test_only_numbers_and_cupy_s_own_generator_methods() -> None:
    with pytest.raises(ValueError, match="Unsupported dtype"):
        cp.asarray(np.array(["a"]))
    rng = cp.random.default_rng(0)
    assert type(rng.standard_normal((2,), dtype=np.float32)) is cp.ndarray
    for missing in ("normal", "choice"):  # CuPy's Generator has neither
        assert not hasattr(rng, missing)
    with pytest.raises(AttributeError, match="'cupy.ndarray' object has no attribute 'ctypes'"):
        device_array([1.0]).ctypes  # noqa: B018
    assert cp.cuda.runtime.getDeviceCount() == 1
    with pytest.raises(ImportError):  # NCCL cannot be faked
        from cupy.cuda import nccl  # noqa: F401


# ---- with the stand-in in place of CuPy (MINIGRAD_CUPY_STANDIN=1 pytest -m cuda) ----

needs_stand_in = pytest.mark.skipif(not cp.active(), reason=f"needs the CuPy stand-in: {cp.ENV}=1 pytest -m cuda")


@pytest.mark.cuda
@needs_stand_in
@pytest.mark.parametrize("arch, batch_arrays", [("gpt", 3), ("llama", 2)])  # tokens, targets; GPT's positions too
def test_a_default_training_step_reads_back_twice_and_copies_only_its_batch(tmp_path, capsys, arch, batch_arrays):
    """The two documented read-backs (the loss, the clip norm), and no host-to-device copy but the batch's arrays:
    no Python number of an op or a loss becomes a copied array. Saving checks the weights with one read-back."""
    ledger, counted = backend.cupy.ledger, {}

    def one_step(r: run.Run) -> int:
        x, y = train.get_batch(r.data, r.data_rng, r.settings["batch_size"])
        args = r.model, r.opt, x, y, r.settings["grad_clip"], r.settings["batch_size"]
        train.train_step(*args)  # the first makes the optimizer's state
        ledger.reset()
        train.train_step(*args)
        counted.update(read_backs=list(ledger.read_backs), copies=list(ledger.host_to_device))
        ledger.reset()
        r.save(1)  # are the weights finite? once for all of them (then each is read back to be written)
        counted["save_checks"] = [entry for entry in ledger.read_backs if entry.startswith("bool()")]
        return 0

    assert run.main(["--device", "cuda", "--arch", arch, "--out", str(tmp_path)], one_step) == 0
    assert "on cuda" in capsys.readouterr().out
    assert [entry.split(" at ")[0] for entry in counted["read_backs"]] == ["item()", "float()"], counted["read_backs"]
    assert "minigrad/optim/__init__.py" in counted["read_backs"][1]  # clip_grad_norm_'s norm
    assert len(counted["copies"]) == batch_arrays, counted["copies"]
    shapes = [entry.split(" of shape ")[1].split(" at ")[0] for entry in counted["copies"]]
    assert "(32, 8)" in shapes and "(256,)" in shapes, shapes  # the tokens, and the targets flattened for the loss
    assert len(counted["save_checks"]) == 1, counted["save_checks"]


@pytest.mark.cuda
@needs_stand_in
def test_a_cpu_run_makes_nothing_on_the_device(tmp_path, capsys) -> None:
    """--device cpu, where a GPU is present: no array, generator or kernel on it (CuPy would start a CUDA context);
    asking how many GPUs there are is allowed. A CUDA run, by contrast, does make its arrays there."""
    ledger = backend.cupy.ledger
    ledger.reset()
    argv = ["--steps", "2", "--eval-iters", "1", "--eval-interval", "2", "--samples", "1", "--out"]
    assert train.main(["--device", "cpu", *argv, str(tmp_path / "cpu")]) == 0
    assert (ledger.arrays, ledger.generators) == (0, 0)
    mg.randn(2)  # the CPU's generator, seeded by manual_seed: still none on the device
    assert (ledger.arrays, ledger.generators) == (0, 0)
    assert train.main(["--device", "cuda", *argv, str(tmp_path / "cuda")]) == 0
    assert ledger.arrays > 0
    capsys.readouterr()
