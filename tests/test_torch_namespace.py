"""The namespace around the engine that PyTorch programs touch (issue 35): dtype names, mg.device, mg.cuda, mg.backends,
inference_mode, the random and indexing functions, each compared with torch where torch has it.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

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
    """PyTorch's defaults, False and True, read in a fresh process: in this one the docs' examples set them."""
    fresh = subprocess.run([sys.executable, "-c", "import minigrad as mg; print(mg.backends.cuda.matmul.allow_tf32, "
                            "mg.backends.cudnn.allow_tf32)"], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).resolve().parents[1])
    assert fresh.stdout.split() == ["False", "True"]
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


# ---- random and indexing functions ----

def test_randint_forms_shapes_dtypes_range_and_errors():
    for args, kwargs in (((10, (3, 4)), {}), ((5, 8, (200,)), {}), ((), {"low": 2, "high": 4, "size": (6,)}),
                         ((3,), {"size": (2,)}), ((10, (5,)), {"dtype": torch.float32})):
        theirs = torch.randint(*args, **kwargs)
        mine = mg.randint(*args, **{k: (mg.float32 if k == "dtype" else v) for k, v in kwargs.items()})
        assert mine.shape == tuple(theirs.shape) and str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")
        low, high = (0, args[0]) if len(args) < 3 and "low" not in kwargs else \
            (kwargs["low"], kwargs["high"]) if "low" in kwargs else args[:2]
        assert low <= mine.numpy().min() and mine.numpy().max() < high
    assert set(mg.randint(5, 8, (200,)).tolist()) == {5, 6, 7}
    with pytest.raises(RuntimeError):
        torch.randint(5, 5, (2,))
    with pytest.raises(RuntimeError, match="low=5 >= high=5"):
        mg.randint(5, 5, (2,))


def test_generator_gives_a_stream_of_its_own():
    a, b = mg.Generator().manual_seed(7), mg.Generator().manual_seed(7)
    assert mg.Generator().manual_seed(3).initial_seed() == torch.Generator().manual_seed(3).initial_seed() == 3
    mg.manual_seed(0)
    first = mg.randn(4).numpy()
    for make in (lambda g: mg.randn(2, 3, generator=g), lambda g: mg.randint(0, 100, (5,), generator=g),
                 lambda g: mg.randperm(6, generator=g), lambda g: mg.multinomial(mg.ones(4), 3, generator=g)):
        np.testing.assert_array_equal(make(a).numpy(), make(b).numpy())
    mg.manual_seed(0)
    np.testing.assert_array_equal(mg.randn(4).numpy(), first)  # the global stream was not touched


def test_randperm_and_linspace_as_torch():
    perm = mg.randperm(10)
    assert perm.dtype == mg.int64 and sorted(perm.tolist()) == list(range(10)) and mg.randperm(0).shape == (0,)
    with pytest.raises(RuntimeError):
        mg.randperm(-1)
    for args in ((0.0, 1.0, 5), (-3, 7, 11), (2.0, 2.0, 1), (0, 1, 0), (1.0, -1.0, 4)):
        theirs, mine = torch.linspace(*args), mg.linspace(*args)
        assert mine.dtype == mg.float32 and mine.shape == tuple(theirs.shape)
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(mg.linspace(0, 10, 4, dtype=mg.long).numpy(),
                                  torch.linspace(0, 10, 4, dtype=torch.long).numpy())
    with pytest.raises(RuntimeError):
        torch.linspace(0, 1, -1)
    with pytest.raises(RuntimeError, match="non-negative"):
        mg.linspace(0, 1, -1)


def test_multinomial_shapes_frequencies_and_errors_as_torch():
    probs = np.array([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]], dtype=np.float32)
    mg.manual_seed(1)
    for replacement, n in ((True, 4000), (False, 3)):
        theirs = torch.multinomial(torch.tensor(probs), n, replacement=replacement)
        mine = mg.multinomial(mg.tensor(probs), n, replacement=replacement)
        assert mine.shape == tuple(theirs.shape) and mine.dtype == mg.int64
        assert 1 not in mine.numpy()[0]  # a zero weight is never drawn
    freq = np.bincount(mg.multinomial(mg.tensor(probs[0] * 5), 20000, replacement=True).numpy(), minlength=4) / 20000
    np.testing.assert_allclose(freq, probs[0], atol=0.02)  # unnormalised weights are fine
    no_repeat = mg.multinomial(mg.tensor(probs), 3).numpy()
    assert all(len(set(row)) == 3 for row in no_repeat)
    assert mg.multinomial(mg.tensor([0.0, 1.0]), 1).shape == (1,)
    exhausted = [[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]]  # more draws than non-zero weights: the zero ones follow, in order
    np.testing.assert_array_equal(mg.multinomial(mg.tensor(exhausted), 3).numpy(),
                                  torch.multinomial(torch.tensor(exhausted), 3).numpy())
    for bad, n, match in ((probs[0], 5, "without replacement"), ([1.0, -1.0], 1, "below 0"),
                          ([0.0, 0.0], 1, "sums to 0"), ([1, 2], 1, "float")):
        with pytest.raises(RuntimeError):
            torch.multinomial(torch.tensor(bad), n)
        with pytest.raises(RuntimeError, match=match):
            mg.multinomial(mg.tensor(bad), n)


@pytest.mark.parametrize("k, dim, largest", [(2, -1, True), (3, 0, False), (1, 1, True), (0, -1, True)])
def test_topk_values_indices_and_gradient_as_torch(k, dim, largest):
    data = np.random.default_rng(0).permutation(24).reshape(4, 6).astype(np.float64)  # no ties: one right answer
    data[1, 2] = np.nan
    mine_x, theirs_x = mg.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    mine, theirs = mg.topk(mine_x, k, dim=dim, largest=largest), torch.topk(theirs_x, k, dim=dim, largest=largest)
    np.testing.assert_array_equal(mine.indices.numpy(), theirs.indices.numpy())
    np.testing.assert_array_equal(mine.values.numpy(), theirs.values.detach().numpy())
    weights = np.arange(mine.values.numel(), dtype=np.float64).reshape(mine.values.shape)
    (mg.where(mine.values == mine.values, mine.values, 0.0) * mg.tensor(weights)).sum().backward()
    (torch.where(theirs.values == theirs.values, theirs.values, 0.0) * torch.tensor(weights)).sum().backward()
    np.testing.assert_array_equal(mine_x.grad.numpy(), theirs_x.grad.numpy())
    values, indices = mine_x.topk(k, dim, largest)  # the method, unpacked
    assert values.shape == indices.shape == tuple(theirs.values.shape)


def test_topk_refuses_k_beyond_the_dim_as_torch():
    with pytest.raises(RuntimeError):
        torch.topk(torch.zeros(3), 4)
    with pytest.raises(RuntimeError, match="k=4 is out of range"):
        mg.topk(mg.zeros(3), 4)
    assert mg.topk(mg.tensor(2.0), 1).values.shape == tuple(torch.topk(torch.tensor(2.0), 1).values.shape)


@pytest.mark.parametrize("shifts, dims", [(1, None), (-7, None), (2, 0), ((1, -2), (0, 2)), (5, -1), (0, 1)])
def test_roll_values_and_gradient_as_torch(shifts, dims):
    data = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    mine_x, theirs_x = mg.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    mine, theirs = mg.roll(mine_x, shifts, dims), torch.roll(theirs_x, shifts, dims)
    np.testing.assert_array_equal(mine.numpy(), theirs.detach().numpy())
    weights = np.random.default_rng(1).standard_normal(data.shape)
    (mine * mg.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_array_equal(mine_x.grad.numpy(), theirs_x.grad.numpy())
    assert mine is not mine_x and mine_x.roll(shifts, dims).shape == data.shape
    with pytest.raises(RuntimeError, match="one length"):
        mg.roll(mine_x, (1, 2), (0,))


def test_max_keepdim_without_a_dim_is_refused_as_in_torch():
    for op in ("max", "min"):
        with pytest.raises(TypeError):
            getattr(torch.zeros(2, 3), op)(keepdim=True)
        with pytest.raises(TypeError, match="keepdim=True needs a dim"):
            getattr(mg.zeros(2, 3), op)(keepdim=True)
    assert mg.zeros(2, 3).amax(keepdim=True).shape == tuple(torch.zeros(2, 3).amax((0, 1), keepdim=True).shape)


@pytest.mark.cuda
def test_random_and_indexing_functions_on_the_gpu():
    g = mg.Generator("cuda").manual_seed(0)
    draws = [mg.randint(0, 5, (4,), device="cuda", generator=g), mg.randperm(6, device="cuda"),
             mg.multinomial(mg.ones(2, 4, device="cuda"), 3, generator=g),
             mg.multinomial(mg.ones(4, device="cuda"), 6, replacement=True), mg.linspace(0, 1, 3, device="cuda"),
             mg.randn(2, device="cuda", generator=g)]
    assert [d.device for d in draws] == ["cuda"] * len(draws)
    assert sorted(draws[1].tolist()) == list(range(6)) and draws[2].shape == (2, 3)
    x = mg.tensor([[3.0, 1.0, 2.0]], device="cuda", requires_grad=True)
    values, indices = x.topk(2)
    (values.sum() + x.roll(1, 1)[0, 0]).backward()
    assert values.tolist() == [[3.0, 2.0]] and indices.tolist() == [[0, 2]] and x.grad.tolist() == [[1.0, 0.0, 2.0]]
    with pytest.raises(RuntimeError, match="generator on 'cpu'"):
        mg.randn(2, device="cuda", generator=mg.Generator())
