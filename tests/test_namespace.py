"""The rest of the namespace PyTorch programs touch (issue 35): nn as a package (nn.functional, nn.init, nn.utils,
nn.parallel), torch.Tensor's legacy constructor and types, x.type(), nelement, cpu, unsqueeze_, x.device.type,
to(device=, dtype=), torch.distributed and DistributedDataParallel (refused in one line), torch.compile, autocast,
load(map_location=, weights_only=), and the tied key of a state_dict; each compared with torch.
"""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.array import backend

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these cases compare with it")


def test_nn_is_a_package_with_functional_init_utils_and_parallel_and_the_old_paths_keep_working():
    import minigrad.nn.functional
    import minigrad.nn.functional as F
    import minigrad.nn.init as init
    from minigrad.nn.parallel import DistributedDataParallel
    from minigrad.nn.utils import clip_grad_norm_, parameters_to_vector

    assert F is minigrad.nn.functional is mg.nn.functional and init is mg.init is mg.nn.init
    assert clip_grad_norm_ is mg.optim.clip_grad_norm_ and mg.nn.utils.clip_grad_value_ is mg.optim.clip_grad_value_
    assert DistributedDataParallel is mg.nn.parallel.DistributedDataParallel
    assert importlib.import_module("minigrad.optim.lr_scheduler") is mg.lr_scheduler is mg.optim.lr_scheduler
    from minigrad.utils.data.dataloader import DataLoader  # makemore's and minGPT's import
    from torch.utils.data.dataloader import DataLoader as TorchDataLoader
    assert DataLoader is mg.utils.data.DataLoader and TorchDataLoader is torch.utils.data.DataLoader
    w = [mg.tensor([[1.0, 2.0], [3.0, 4.0]]), mg.tensor([5.0])]
    tw = [torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([5.0])]
    np.testing.assert_array_equal(parameters_to_vector(w).numpy(), torch.nn.utils.parameters_to_vector(tw).numpy())


@pytest.mark.parametrize("args", [([0],), ([[1, 2], [3, 4]],), ((2, 3),), ([True, False],), ([1.5, -2.25],),
                                  (np.array([1, 2]),), (np.array([1.5], dtype=np.float64),), (2, 3), (0,), ()])
def test_tensor_constructor_is_pytorchs_float32_for_data_and_a_size_for_ints(args):
    mine, theirs = mg.Tensor(*args), torch.Tensor(*args)
    assert mine.dtype == mg.float32 and mine.shape == tuple(theirs.shape) and not mine.requires_grad
    if args and not isinstance(args[0], int):  # data: the same values (a size's values are uninitialised there)
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    else:  # zero-filled here
        assert not mine.numpy().any()


def test_tensor_of_a_tensor_shares_it_and_bad_arguments_are_refused_as_there():
    x = mg.tensor([1, 2])
    y = mg.Tensor(x)
    assert y.dtype == mg.int64 and torch.Tensor(torch.tensor([1, 2])).dtype == torch.int64
    y[0] = 7
    assert x.tolist() == [7, 2] and x._version == y._version == 1
    for bad, error in ((3.5, TypeError), ("ab", TypeError), (-1, RuntimeError)):
        with pytest.raises(error):
            torch.Tensor(bad)
        with pytest.raises(error):
            mg.Tensor(bad)
    with pytest.raises(TypeError):
        mg.Tensor([1.0], requires_grad=True)  # not an argument of the legacy constructor, as there


def test_tensor_leaf_is_the_engines_constructor_and_mg_tensor_is_unchanged():
    assert mg.tensor([0]).dtype == mg.int64 and mg.Tensor.leaf([0]).dtype == mg.int64
    p = nn.Parameter(np.ones((2, 2), dtype=np.float32))
    assert p.requires_grad and isinstance(p, mg.Tensor)


@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor",
                                  "HalfTensor"])
def test_legacy_types_make_convert_and_check_as_pytorchs(name):
    mine, theirs = getattr(mg, name), getattr(torch, name)
    data = [1.7, -1.7, 0.0]
    np.testing.assert_array_equal(mine(data).numpy(), theirs(data).numpy())
    assert str(mine(data).dtype) == str(theirs(data).dtype).removeprefix("torch.")
    assert mine(2, 3).shape == tuple(theirs(2, 3).shape)
    x, tx = mg.tensor([1.5, 2.0]), torch.tensor([1.5, 2.0])
    assert x.type(mine).type() == tx.type(theirs).type() == f"torch.{name}"
    assert x.type(f"torch.{name}").tolist() == tx.type(f"torch.{name}").tolist()
    assert isinstance(x.type(mine), mine) and (name == "FloatTensor") == isinstance(x, mine)


def test_type_nelement_cpu_is_cuda_and_device_type():
    for dtype in ("float32", "float64", "float16", "int64", "int32", "bool"):
        assert mg.zeros(2, dtype=getattr(mg, dtype)).type() == torch.zeros(2, dtype=getattr(torch, dtype)).type()
    x, tx = mg.ones(2, 3), torch.ones(2, 3)
    assert x.type(mg.long).dtype == mg.int64 and x.type(mg.float32) is x
    for bad in ("long", int):
        with pytest.raises(ValueError):
            tx.type(bad)
        with pytest.raises(ValueError):
            x.type(bad)
    assert x.nelement() == tx.nelement() == 6 and x.cpu() is x and x.is_cuda is tx.is_cuda is False
    assert x.device.type == tx.device.type == "cpu" and x.device == "cpu" and x.device == mg.device("cpu")


def test_to_takes_pytorchs_forms():
    x = mg.tensor([1.5, 2.0], requires_grad=True)
    assert x.to("cpu", non_blocking=True) is x and x.to(device="cpu") is x and x.to(mg.device("cpu")) is x
    assert x.to("cpu", mg.float64).dtype == mg.float64 and x.to(device="cpu", dtype=mg.float64).dtype == mg.float64
    assert x.to(mg.zeros(1, dtype=mg.float64)).dtype == mg.float64
    y = x.to("cpu", copy=True)
    assert y is not x and y.tolist() == x.tolist() and y.grad_fn is not None  # in the graph, as there


def test_unsqueeze_in_place_counts_a_write_and_takes_the_graph_along():
    x, tx = mg.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    assert x.unsqueeze_(0) is x and tx.unsqueeze_(0) is tx
    assert x.shape == tuple(tx.shape) == (1, 2) and x._version == tx._version == 1
    a, ta = mg.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0], requires_grad=True)
    b, tb = a * 3, ta * 3
    b.unsqueeze_(1)
    tb.unsqueeze_(1)
    g = np.array([[0.5], [-2.0]], dtype=np.float32)
    b.backward(mg.tensor(g))
    tb.backward(torch.tensor(g))
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
    with pytest.raises(RuntimeError, match="leaf"):
        ta.unsqueeze_(0)
    with pytest.raises(RuntimeError, match="leaf"):
        a.unsqueeze_(0)
    with pytest.raises(IndexError):
        tx.unsqueeze_(5)
    with pytest.raises((IndexError, ValueError)):
        x.unsqueeze_(5)


def test_distributed_imports_and_refuses_in_one_line_naming_mpi():
    from minigrad.distributed import destroy_process_group, init_process_group
    assert mg.distributed.is_initialized() is False and torch.distributed.is_initialized() is False
    with pytest.raises(RuntimeError, match="mpiexec") as err:
        init_process_group(backend="nccl")
    assert "\n" not in str(err.value)
    with pytest.raises(RuntimeError, match="mpiexec"):
        mg.nn.parallel.DistributedDataParallel(nn.Linear(2, 2), device_ids=[0])
    with pytest.raises(ValueError):
        destroy_process_group()


def test_compile_returns_a_model_that_runs_with_the_same_values():
    pytest.importorskip("numba", reason="mg.compile runs the model under mg.compiled(), which needs Numba")
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    compiled = mg.compile(model, mode="max-autotune")
    x = mg.randn(3, 4)
    np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    assert list(compiled.state_dict()) == ["_orig_mod." + k for k in model.state_dict()]  # as PyTorch's
    assert compiled._orig_mod is model and list(compiled.parameters()) == list(model.parameters())
    assert mg.compile(model, disable=True) is model
    assert mg.compile(mode="default")(model)._orig_mod is model  # as a decorator


def test_autocast_and_grad_scaler_pass_through_as_pytorchs_do_without_cuda():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enabled=False is silent, as there
        with mg.autocast(device_type="cuda", enabled=False), mg.amp.autocast("cpu", dtype=mg.float16, enabled=False):
            y = mg.ones(2) * 2
        scaler = mg.cuda.amp.GradScaler(enabled=False)
        assert scaler.scale(y) is y and mg.amp.GradScaler is mg.cuda.amp.GradScaler
    with pytest.warns(UserWarning, match="Disabling autocast"):
        with mg.cuda.amp.autocast():
            pass
    with pytest.raises(RuntimeError):
        torch.autocast("tpu")
    with pytest.raises(RuntimeError):
        mg.autocast("tpu")
    assert mg.cuda.is_available() is backend.cuda_available()


def test_load_takes_map_location_and_weights_only(tmp_path):
    path = tmp_path / "w.npz"
    mg.save({"w": mg.ones(2)}, path)
    for where in (None, "cpu", mg.device("cpu")):
        for weights_only in (True, False, None):
            assert mg.load(path, map_location=where, weights_only=weights_only)["w"].tolist() == [1.0, 1.0]
    for remap in ({"cuda:0": "cpu"}, lambda storage, loc: storage):
        with pytest.raises(TypeError, match="map_location .* is not supported"):
            mg.load(path, map_location=remap)


class TiedLM(nn.Module):
    """nanoGPT's tie: the head's weight is the token embedding's."""

    def __init__(self, vocab: int = 5, n_embd: int = 3) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.wte.weight = self.lm_head.weight


class TorchTiedLM(torch.nn.Module):
    def __init__(self, vocab: int = 5, n_embd: int = 3) -> None:
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, n_embd)
        self.lm_head = torch.nn.Linear(n_embd, vocab, bias=False)
        self.wte.weight = self.lm_head.weight


def test_state_dict_keeps_a_tied_key_and_loading_keeps_the_tie(tmp_path):
    model = TiedLM()
    assert list(model.state_dict()) == list(TorchTiedLM().state_dict()) == ["wte.weight", "lm_head.weight"]
    assert len(list(model.parameters())) == 1  # named_parameters still gives a shared parameter once, as PyTorch's
    mg.save(model.state_dict(), tmp_path / "tied.npz")
    other = TiedLM()
    other.load_state_dict(mg.load(tmp_path / "tied.npz"))
    assert other.wte.weight is other.lm_head.weight
    np.testing.assert_array_equal(other.lm_head.weight.numpy(), model.wte.weight.numpy())


def test_a_state_dict_of_an_earlier_minigrad_without_the_tied_key_loads_with_a_warning(tmp_path):
    model = TiedLM()
    old = {"wte.weight": model.wte.weight.numpy().copy()}  # what state_dict() gave before: the tied key left out
    mg.save(old, tmp_path / "old.npz")
    other = TiedLM()
    with pytest.warns(DeprecationWarning, match=r"\['lm_head.weight'\] missing, filled from the tied key"):
        other.load_state_dict(mg.load(tmp_path / "old.npz"))
    np.testing.assert_array_equal(other.lm_head.weight.numpy(), old["wte.weight"])
    with pytest.raises(ValueError, match="missing keys"):  # a key with no tied twin in the file is still missing
        nn.Linear(3, 5).load_state_dict({"weight": old["wte.weight"]})


def test_the_legacy_constructor_type_strings_load_and_unsqueeze_on_each_device(device, tmp_path):
    x = mg.Tensor(2, 3, device=device)
    assert x.device == device and x.device.type == device and x.dtype == mg.float32 and not x.numpy().any()
    assert mg.Tensor([1, 2], device=device).device == device
    cuda = ".cuda" if device == "cuda" else ""
    assert x.type() == f"torch{cuda}.FloatTensor" and x.type(mg.long).type() == f"torch{cuda}.LongTensor"
    assert x.is_cuda is (device == "cuda") and x.cpu().device == "cpu"
    assert mg.ones(2).type(f"torch{cuda}.DoubleTensor").device == device
    y = mg.tensor([1.0, 2.0], device=device)
    assert y.unsqueeze_(1).shape == (2, 1) and y.device == device and y._version == 1
    mg.save({"w": mg.ones(2, device=device)}, tmp_path / "w.npz")
    loaded = mg.load(tmp_path / "w.npz", map_location=device)["w"]
    assert loaded.device == device and loaded.tolist() == [1.0, 1.0]  # a tensor, as saved


def test_a_retained_gradient_follows_unsqueeze_in_place_where_pytorch_keeps_the_old_shape():
    """A deliberate difference (docs/pytorch-way.md): PyTorch 2.13 leaves retain_grad's hook on the node before
    unsqueeze_, so y.grad keeps y's old shape; here it follows y, as it does after every other in-place op."""
    grads = []
    for lib in (mg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.retain_grad()
        y.unsqueeze_(0)
        (y * 3).sum().backward()
        grads.append((tuple(y.grad.shape), y.grad.tolist(), x.grad.tolist()))
    assert grads[0] == ((1, 2), [[3.0, 3.0]], [6.0, 6.0]) and grads[1] == ((2,), [3.0, 3.0], [6.0, 6.0])
