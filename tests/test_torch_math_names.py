"""Issue 50, first area: the other logarithms, the bitwise operators, the small integer dtypes, the constants, the
top-level activations, the settings (default dtype, print options, matmul precision), type_as, x.new_*(...) and the
random fills in place, each compared with torch (values, float64 gradients, dtypes, errors)."""

from __future__ import annotations

import numpy as np
import pytest
from torch_pairs import same_as_torch

import minigrad as mg

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these cases compare with it")


@pytest.mark.parametrize("name", ["log10", "log2", "log1p", "expm1"])
def test_logarithms_values_gradients_and_dtypes_are_torchs(name, device):
    x = np.random.default_rng(0).uniform(0.1, 3.0, (2, 3))
    same_as_torch(getattr(mg, name), getattr(torch, name), [x], device)
    same_as_torch(lambda t: getattr(t, name)(), lambda t: getattr(t, name)(), [x], device)
    small = np.array([1e-12, -1e-9, 1e-5])  # where log(1 + x) and exp(x) - 1 lose every digit
    if name in ("log1p", "expm1"):
        same_as_torch(getattr(mg, name), getattr(torch, name), [small], device, gradcheck=False)
    ints = [1, 2, 5]
    assert str(getattr(mg, name)(mg.tensor(ints)).dtype) == "float32"
    np.testing.assert_allclose(getattr(mg, name)(mg.tensor(ints)).numpy(), getattr(torch, name)(torch.tensor(ints)),
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64"])
def test_bitwise_operators_on_bool_and_integer_tensors_are_torchs(dtype, device):
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2 if dtype == "bool" else 100, (2, 2, 3)).astype(dtype)
    for op in ("__and__", "__or__", "__xor__"):
        for other_mine, other_theirs in ((mg.tensor(b, device=device), torch.tensor(b)), (1, 1), (True, True)):
            mine = getattr(mg.tensor(a, device=device), op)(other_mine)
            theirs = getattr(torch.tensor(a), op)(other_theirs)
            assert str(mine.dtype) == str(theirs.dtype).removeprefix("torch."), (op, other_mine)
            np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    np.testing.assert_array_equal((~mg.tensor(a, device=device)).numpy(), (~torch.tensor(a)).numpy())
    np.testing.assert_array_equal((True & mg.tensor(a, device=device)).numpy(), (True & torch.tensor(a)).numpy())
    for name in ("logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"):
        np.testing.assert_array_equal(getattr(mg, name)(mg.tensor(a), mg.tensor(b)).numpy(),
                                      getattr(torch, name)(torch.tensor(a), torch.tensor(b)).numpy())
        np.testing.assert_array_equal(getattr(mg.tensor(a), name)(mg.tensor(b)).numpy(),
                                      getattr(torch.tensor(a), name)(torch.tensor(b)).numpy())
    for name in ("bitwise_not", "logical_not"):
        np.testing.assert_array_equal(getattr(mg, name)(mg.tensor(a)).numpy(), getattr(torch, name)(torch.tensor(a)))
        np.testing.assert_array_equal(getattr(mg.tensor(a), name)().numpy(), getattr(torch.tensor(a), name)())


def test_bitwise_operators_refuse_floats_as_torch_does():
    for make, error in ((lambda m: m.ones(2) & m.ones(2), RuntimeError), (lambda m: ~m.ones(2), TypeError),
                        (lambda m: m.ones(2) | True, RuntimeError)):
        with pytest.raises(error):
            make(torch)
        with pytest.raises(error, match=r"bool and integer tensors, got float32"):
            make(mg)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "short"])
def test_small_integer_dtypes_are_torchs(name):
    mine, theirs = mg.tensor([1, 2], dtype=getattr(mg, name)), torch.tensor([1, 2], dtype=getattr(torch, name))
    assert str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")
    assert str((mine + 1).dtype) == str((theirs + 1).dtype).removeprefix("torch.")


def test_constants_and_top_level_activations_are_torchs():
    assert (mg.pi, mg.e, mg.inf) == (torch.pi, torch.e, torch.inf) and np.isnan(mg.nan) and np.isnan(torch.nan)
    x = np.random.default_rng(0).standard_normal((2, 3))
    same_as_torch(mg.relu, torch.relu, [x])
    same_as_torch(lambda t: mg.dropout(t, 0.0, True), lambda t: torch.dropout(t, 0.0, True), [x])
    same_as_torch(lambda t: mg.layer_norm(t, (3,), eps=1e-5), lambda t: torch.layer_norm(t, (3,), eps=1e-5), [x])


def test_default_dtype_is_torchs_and_refuses_integers():
    assert mg.get_default_dtype() == mg.float32 and torch.get_default_dtype() == torch.float32
    mg.set_default_dtype(mg.float64)
    torch.set_default_dtype(torch.float64)
    try:
        for make in (lambda m: m.zeros(2), lambda m: m.tensor([1.5]), lambda m: m.tensor([1]) / 2,
                     lambda m: m.arange(0.0, 1.0, 0.5), lambda m: m.rand(2), lambda m: m.tensor([1]) * 0.5,
                     lambda m: m.linspace(0, 1, 3), lambda m: m.exp(m.tensor([1]))):
            assert str(make(mg).dtype) == str(make(torch).dtype).removeprefix("torch.")
    finally:
        mg.set_default_dtype(mg.float32)
        torch.set_default_dtype(torch.float32)
    assert mg.zeros(2).dtype == mg.float32
    with pytest.raises(TypeError):
        torch.set_default_dtype(torch.int64)
    with pytest.raises(TypeError, match="only floating-point types"):
        mg.set_default_dtype(mg.int64)


def test_print_options_and_matmul_precision():
    x = mg.tensor([1.234567, 2.0])
    try:
        mg.set_printoptions(precision=2)
        assert "1.23" in repr(x) and "1.2345" not in repr(x)
        mg.set_printoptions(sci_mode=True)
        assert "1.23e+00" in repr(x)
        mg.set_printoptions(profile="full")
        assert "..." not in repr(mg.zeros(2000))
    finally:
        mg.set_printoptions(profile="default")
    assert "..." in repr(mg.zeros(2000)) and "1.234567" in repr(x)
    with pytest.raises(ValueError, match="profile"):
        mg.set_printoptions(profile="long")
    assert mg.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "highest"
    try:
        mg.set_float32_matmul_precision("high")
        assert mg.get_float32_matmul_precision() == "high"
    finally:
        mg.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError, match="'highest', 'high' or 'medium'"):
        mg.set_float32_matmul_precision("low")


@pytest.mark.parametrize("name, args", [("new_zeros", (2, 3)), ("new_ones", ((2, 3),)), ("new_empty", (4,)),
                                        ("new_full", ((2,), 7)), ("new_tensor", ([1, 2],))])
def test_new_tensors_take_dtype_and_device_as_torchs(name, args, device):
    for dtype in ("float64", "int64", "bool"):
        mine = getattr(mg.zeros(1, dtype=dtype, device=device), name)(*args)
        theirs = getattr(torch.zeros(1, dtype=getattr(torch, dtype)), name)(*args)
        assert mine.shape == tuple(theirs.shape) and str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")
        assert mine.device == device and not mine.requires_grad and mine.is_leaf
        if name != "new_empty":
            np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    made = mg.zeros(1).new_zeros(2, dtype=mg.int64, requires_grad=False)
    assert made.dtype == mg.int64 and mg.zeros(1).new_ones(2, requires_grad=True).requires_grad


def test_type_as_is_torchs():
    for a, b in (("float32", "float64"), ("int64", "float32"), ("float64", "bool")):
        mine = mg.zeros(2, dtype=a).type_as(mg.zeros(1, dtype=b))
        theirs = torch.zeros(2, dtype=getattr(torch, a)).type_as(torch.zeros(1, dtype=getattr(torch, b)))
        assert str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")
    x = mg.ones(2, requires_grad=True)
    x.type_as(mg.zeros(1, dtype=mg.float64)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_random_fills_in_place_are_seeded_in_range_and_refused_as_torchs(device):
    x = mg.zeros(4000, dtype=mg.float64, device=device)
    assert x.uniform_(-2, 3) is x and -2 <= float(x.min()) and float(x.max()) < 3
    assert abs(float(x.mean()) - 0.5) < 0.1
    assert abs(float(x.normal_(1.0, 2.0).mean()) - 1.0) < 0.15 and abs(float(x.std()) - 2.0) < 0.15
    assert float(x.exponential_(2.0).min()) >= 0 and abs(float(x.mean()) - 0.5) < 0.05
    flags = mg.zeros(4000, dtype=mg.int64, device=device).bernoulli_(0.25)
    assert flags.dtype == mg.int64 and set(np.unique(flags.numpy())) <= {0, 1}
    assert abs(float(flags.double().mean()) - 0.25) < 0.05
    assert x.bernoulli_(mg.ones(4000, dtype=mg.float64, device=device)).numpy().all()
    g = mg.Generator().manual_seed(3)
    first = mg.zeros(3).uniform_(generator=g).numpy()
    np.testing.assert_array_equal(first, mg.zeros(3).uniform_(generator=mg.Generator().manual_seed(3)).numpy())
    for name in ("uniform_", "normal_", "exponential_"):
        with pytest.raises(RuntimeError):
            getattr(torch.zeros(2, dtype=torch.int64), name)()
        with pytest.raises(TypeError, match=f"{name}: needs a floating-point tensor, got int64"):
            getattr(mg.zeros(2, dtype=mg.int64), name)()
    leaf = mg.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        leaf.uniform_()
    with mg.no_grad():
        leaf.normal_()
    assert leaf._version == 1


def test_module_walks_are_generators_as_torchs():
    mine, theirs = mg.nn.Sequential(mg.nn.Linear(2, 3), mg.nn.ReLU()), torch.nn.Sequential(torch.nn.Linear(2, 3),
                                                                                           torch.nn.ReLU())
    for name in ("parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
                 "modules", "named_modules"):
        got, expected = getattr(mine, name)(), getattr(theirs, name)()
        assert iter(got) is got and iter(expected) is expected, name  # iterators, not lists
        assert len(list(got)) == len(list(expected)), name
    assert next(mine.parameters()) is mine[0].weight


def test_torchs_import_paths_and_refusals():
    import minigrad.nn.modules
    import minigrad.serialization
    from minigrad.nn.modules.module import Module
    from minigrad.utils.data.dataset import Dataset, TensorDataset

    assert minigrad.nn.modules.Module is Module is mg.nn.Module and Dataset is mg.utils.data.Dataset
    assert TensorDataset is mg.utils.data.TensorDataset and minigrad.serialization.save is mg.save
    with pytest.raises(NotImplementedError, match="cannot export a model to ONNX.*state_dict"):
        mg.onnx.export(mg.nn.Linear(2, 2), mg.zeros(1, 2), "model.onnx")
    assert mg.onnx.is_in_onnx_export() is torch.onnx.is_in_onnx_export() is False


def test_accelerator_answers_as_torchs_without_one():
    if mg.cuda.is_available():
        assert mg.accelerator.is_available() and mg.accelerator.current_accelerator().type == "cuda"
        return
    assert mg.accelerator.is_available() is torch.accelerator.is_available() is False
    assert mg.accelerator.current_accelerator() is torch.accelerator.current_accelerator() is None
    assert mg.accelerator.device_count() == torch.accelerator.device_count() == 0
    for name in ("current_device_index", "synchronize"):
        with pytest.raises(RuntimeError, match="none is available"):
            getattr(torch.accelerator, name)()
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
            getattr(mg.accelerator, name)()
