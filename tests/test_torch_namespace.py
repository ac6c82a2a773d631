"""The namespace around the engine that PyTorch programs touch (issue 35): dtype names, mg.device, mg.cuda, mg.backends,
inference_mode, the random and indexing functions, each compared with torch where torch has it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import optim

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these cases compare with it")


@pytest.mark.parametrize("name", ["long", "float", "int", "double", "half", "float16", "float32", "float64", "int64",
                                  "int32"])
def test_dtype_names_are_pytorchs(name):
    made = mg.zeros(2, dtype=getattr(mg, name))
    assert str(made.dtype) == str(torch.zeros(2, dtype=getattr(torch, name)).dtype).removeprefix("torch.")


def test_bfloat16_exists_and_refuses_a_tensor_naming_the_alternative():
    assert torch.bfloat16 is not None and mg.bfloat16 is not None
    for make in (lambda: mg.zeros(2, dtype=mg.bfloat16), lambda: mg.tensor([1.0], dtype=mg.bfloat16),
                 lambda: mg.ones(2).to(mg.bfloat16)):
        with pytest.raises(TypeError, match=r"bfloat16 is not supported.*use mg\.float16"):
            make()
    assert mg.cuda.is_bf16_supported() is False


def test_device_objects_go_where_device_strings_do():
    for spec in (("cpu",), ("cuda",), ("cuda:0",), ("cuda", 0)):
        mine, theirs = mg.device(*spec), torch.device(*spec)
        assert (mine.type, mine.index, str(mine), repr(mine)) == (theirs.type, theirs.index, str(theirs), repr(theirs))
    cpu = mg.device("cpu")
    assert mg.zeros(2, device=cpu).device == "cpu" and mg.tensor([1.0], device=cpu).to(cpu).device == cpu
    assert mg.device(cpu) is cpu
    for bad in ("tpu", "cuda:x", "cuda:1"):
        with pytest.raises(ValueError, match=repr(bad.split(":")[0]) if bad == "tpu" else "cuda"):
            mg.device(bad)


def test_cuda_namespace_without_or_with_a_gpu():
    assert mg.cuda.is_available() == mg.cuda_available()
    assert mg.cuda.device_count() == int(mg.cuda.is_available())
    mg.manual_seed(0)
    first = mg.randn(3).numpy()
    mg.manual_seed(0)
    mg.cuda.manual_seed_all(5)  # the GPU's generator only: the CPU's stream goes on from manual_seed(0)
    np.testing.assert_array_equal(mg.randn(3).numpy(), first)


def test_grad_scaler_passes_through_as_pytorchs_does_without_cuda():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs_enabled = torch.amp.GradScaler("cuda", enabled=True)  # no CUDA here: disabled, with a warning
    with pytest.warns(UserWarning, match="Disabling"):
        mine_enabled = mg.cuda.amp.GradScaler(enabled=True)
    assert mine_enabled.is_enabled() == theirs_enabled.is_enabled() is False
    w = mg.tensor([1.0, -2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    scaler = mg.cuda.amp.GradScaler(enabled=False)
    loss = (w * w).sum()
    assert scaler.scale(loss) is loss
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(w.numpy(), [0.0, 0.0])  # w - 0.5 * 2w: one plain step
    assert scaler.get_scale() == torch.amp.GradScaler("cuda", enabled=False).get_scale() == 1.0
    assert scaler.state_dict() == {}


def test_backends_flags_are_settable_and_named():
    assert mg.backends.cuda.matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32
    assert mg.backends.cudnn.allow_tf32 == torch.backends.cudnn.allow_tf32
    before = mg.backends.cuda.matmul.allow_tf32, mg.backends.cudnn.allow_tf32
    try:
        mg.backends.cuda.matmul.allow_tf32 = True
        mg.backends.cudnn.allow_tf32 = True
        assert mg.backends.cuda.matmul.allow_tf32 and mg.backends.cudnn.allow_tf32
        a = mg.tensor(np.arange(6.0).reshape(2, 3))
        np.testing.assert_array_equal((a @ a.T).numpy(), a.numpy() @ a.numpy().T)  # no effect on the CPU
    finally:
        mg.backends.cuda.matmul.allow_tf32, mg.backends.cudnn.allow_tf32 = before
    with pytest.raises(AttributeError, match="allow_tf3"):
        mg.backends.cudnn.allow_tf3 = True


def test_inference_mode_is_no_grad_as_block_and_decorator():
    w = mg.tensor([1.0], requires_grad=True)
    with mg.inference_mode():
        assert not (w * 2).requires_grad and not mg.is_grad_enabled()
    assert mg.is_grad_enabled()

    @mg.inference_mode
    def bare():
        return (w * 2).requires_grad

    @mg.inference_mode()
    def called():
        return (w * 2).requires_grad

    assert bare() is False and called() is False and mg.is_grad_enabled()
    with mg.no_grad(), mg.inference_mode(False), torch.no_grad(), torch.inference_mode(False):  # grad mode on
        assert mg.is_grad_enabled() == torch.is_grad_enabled() is True
        assert (w * 2).requires_grad
    assert mg.is_grad_enabled()


@pytest.mark.parametrize("data", [[2**63], [1, 2**64], [[-(2**63) - 1]]])
def test_an_int_beyond_int64_in_a_list_overflows_as_in_torch(data):
    with pytest.raises(ValueError, match="Overflow"):
        torch.tensor(data)
    with pytest.raises(ValueError, match="overflow: the integer"):
        mg.tensor(data)
