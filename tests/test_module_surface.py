"""nn.Module's buffers, ModuleDict's entries as attributes, the printed module tree and NLLLoss/LogSoftmax, each
against PyTorch's behaviour on the same model.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")


def build(lib):
    """The same small model in minigrad (lib=mg) or torch: a ModuleDict, a ModuleList of equal blocks, a Sequential,
    a persistent float buffer and a non-persistent integer one."""
    n = lib.nn

    class Block(n.Module):
        def __init__(self):
            super().__init__()
            self.ln = n.LayerNorm(8)
            self.fc = n.Linear(8, 32)
            self.act = n.GELU()
            self.drop = n.Dropout(0.0)
            self.register_buffer("scale", lib.ones(8))

    class GPT(n.Module):
        def __init__(self):
            super().__init__()
            self.transformer = n.ModuleDict(dict(wte=n.Embedding(65, 8), h=n.ModuleList([Block() for _ in range(3)]),
                                                 ln_f=n.LayerNorm(8, elementwise_affine=False)))
            self.head = n.Sequential(n.Linear(8, 4, bias=False), n.ReLU(), n.Linear(4, 4), n.Linear(4, 4))
            self.register_buffer("steps", lib.zeros(2, dtype=lib.long), persistent=False)

    return GPT()


# ---- buffers ----

def test_buffers_are_listed_saved_when_persistent_and_not_parameters_as_in_torch():
    m, t = build(mg), build(torch)
    assert [k for k, _ in m.named_buffers()] == [k for k, _ in t.named_buffers()]
    assert len(list(m.buffers())) == len(list(t.buffers())) == 4
    assert [k for k, _ in m.named_parameters()] == [k for k, _ in t.named_parameters()]
    assert list(m.state_dict()) == list(t.state_dict())  # each module's parameters, then its persistent buffers
    assert "steps" not in m.state_dict() and "transformer.h.0.scale" in m.state_dict()
    assert not any(p is b for p in m.parameters() for b in m.buffers())


def test_to_a_dtype_converts_float_buffers_only_as_torch():
    m, t = build(mg).to(mg.float64), build(torch).to(torch.float64)
    assert str(m.transformer.h[0].scale.dtype) == "float64" and t.transformer.h[0].scale.dtype == torch.float64
    assert str(m.steps.dtype) == "int64" and t.steps.dtype == torch.int64
    assert m._buffers["steps"] is m.steps and m.transformer.h[0]._buffers["scale"] is m.transformer.h[0].scale


def test_assigning_to_a_buffer_name_replaces_the_buffer_and_is_saved_and_loaded():
    m = build(mg)
    block = m.transformer.h[1]
    block.scale = mg.full((8,), 3.0)
    assert dict(m.named_buffers())["transformer.h.1.scale"] is block.scale
    other = build(mg)
    other.load_state_dict(m.state_dict())
    np.testing.assert_array_equal(other.transformer.h[1].scale.numpy(), np.full(8, 3.0, np.float32))
    block.scale = None  # as torch: the name stays a buffer's, left out of buffers() and state_dict()
    assert "transformer.h.1.scale" not in m.state_dict() and "scale" in block._buffers


def test_bad_buffers_are_refused_in_one_line_as_torch():
    m = build(mg)
    with pytest.raises(TypeError, match="cannot assign ndarray as buffer 'steps'"):
        m.steps = np.zeros(2)
    with pytest.raises(KeyError, match="attribute 'head' already exists"):
        m.register_buffer("head", mg.zeros(1))
    with pytest.raises(KeyError, match="without '.'"):
        m.register_buffer("a.b", mg.zeros(1))
    with pytest.raises(TypeError, match="cannot assign list to buffer 'x'"):
        m.register_buffer("x", [1.0])


# ---- ModuleDict ----

def test_module_dict_entries_are_attributes_as_in_torch():
    m = build(mg)
    assert m.transformer.wte is m.transformer["wte"] and m.transformer.wte.weight.shape == (65, 8)
    del m.transformer["ln_f"]
    with pytest.raises(AttributeError, match="'ModuleDict' object has no attribute 'ln_f'"):
        m.transformer.ln_f  # noqa: B018 - the lookup is the test


# ---- the printed tree ----

def test_repr_is_torchs_line_by_line():
    ours, theirs = repr(build(mg)).splitlines(), repr(build(torch)).splitlines()
    assert ours == theirs
    assert "      (0-2): 3 x Block(" in ours
    assert repr(nn.Embedding(5, 3, padding_idx=1)) == repr(torch.nn.Embedding(5, 3, padding_idx=1))
    assert repr(nn.RMSNorm(4)) == repr(torch.nn.RMSNorm(4))
    assert repr(nn.Flatten()) == repr(torch.nn.Flatten()) and repr(nn.ModuleList()) == repr(torch.nn.ModuleList())


# ---- NLLLoss, LogSoftmax, F.nll_loss ----

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_after_log_softmax_matches_torch_in_value_and_gradient(reduction):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3))  # (B, C, T): the classes on axis 1, as in torch
    target = np.array([[4, -100, 0], [2, 2, -100]])
    mx = mg.tensor(x, requires_grad=True)
    loss = nn.NLLLoss(reduction=reduction)(nn.LogSoftmax(dim=1)(mx), target)
    tx = torch.tensor(x, requires_grad=True)
    t_loss = torch.nn.NLLLoss(reduction=reduction)(torch.nn.LogSoftmax(dim=1)(tx), torch.tensor(target))
    np.testing.assert_allclose(loss.numpy(), t_loss.detach().numpy(), rtol=1e-12)
    seed = rng.standard_normal(loss.shape)
    loss.backward(mg.tensor(seed))
    t_loss.backward(torch.tensor(seed))
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert np.all(mx.grad.numpy()[0, :, 1] == 0)  # the ignored position gets no gradient


def test_nll_loss_gradient_is_its_finite_difference_and_log_softmax_takes_any_dim():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3))
    target = [2, 0, 1, 1]
    mx = mg.tensor(x, requires_grad=True)
    F.nll_loss(mx, target).backward()
    eps, numeric = 1e-6, np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        numeric[i] = (-(x + d)[range(4), target].mean() + (x - d)[range(4), target].mean()) / (2 * eps)
    np.testing.assert_allclose(mx.grad.numpy(), numeric, atol=1e-8)
    out = nn.LogSoftmax(0)(mg.tensor(x))
    np.testing.assert_allclose(out.numpy(), torch.nn.LogSoftmax(0)(torch.tensor(x)).numpy(), rtol=1e-12)
    assert repr(nn.LogSoftmax(0)) == repr(torch.nn.LogSoftmax(0)) and repr(nn.NLLLoss()) == repr(torch.nn.NLLLoss())


def test_nll_loss_with_every_target_ignored_is_nan_as_torch():
    x, tx = mg.ones((2, 3), requires_grad=True), torch.ones(2, 3, requires_grad=True)
    loss, t_loss = nn.NLLLoss()(x, [-100, -100]), torch.nn.NLLLoss()(tx, torch.tensor([-100, -100]))
    assert np.isnan(loss.item()) and torch.isnan(t_loss)
    loss.backward()
    t_loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())  # zeros, not NaN


def test_nll_loss_refuses_bad_targets_in_one_line():
    x = mg.zeros((2, 3))
    with pytest.raises(IndexError, match=r"nll_loss: target 3 at position \(1,\) is out of range \[0, 3\)"):
        nn.NLLLoss()(x, [0, 3])
    with pytest.raises(ValueError, match=r"targets of shape \(3,\) for input of shape \(2, 3\)"):
        nn.NLLLoss()(x, [0, 1, 2])
    with pytest.raises(TypeError, match="nll_loss: expected integer values, got dtype float64"):
        nn.NLLLoss()(x, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="NLLLoss: reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        nn.NLLLoss(reduction="avg")
