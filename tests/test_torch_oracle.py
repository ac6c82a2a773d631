"""PyTorch as the oracle: every case of minigrad.check.gradcheck_cases.CASES, written again with torch, must give the
same values and the same input gradients (float64, CPU, one random upstream gradient) to 1e-10.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.check.gradcheck_cases import (
    _CLASS_WEIGHT,
    _GATHER_0,
    _GATHER_1,
    _IGNORED,
    _MASK_2D,
    _POS_WEIGHT,
    _PROBS,
    _ROW_WEIGHT,
    _SEES,
    _TARGETS,
    _TOKENS,
    CASES,
    Case,
)
from minigrad.nn import functional as F

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]' to run the oracle")
TF = torch.nn.functional

TOL = dict(rtol=1e-10, atol=1e-12)


def _t(array: np.ndarray):
    return torch.from_numpy(np.array(array))  # a copy: torch never shares memory with minigrad here


def _torch_attention_head(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv  # (B, T, hs)
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])  # (B, T, T)
    T = x.shape[1]
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))  # True: may attend
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v  # masked_fill's True = fill


# CASES name -> the same computation in torch, on torch tensors of the case's input shapes
TORCH = {
    "add": lambda a, b: a + b,
    "add broadcast": lambda a, b: a + b,
    "add scalar tensor": lambda a, b: a + b,
    "add trailing": lambda a, b: a + b,
    "sub broadcast": lambda a, b: a - b,
    "sub x - x": lambda x: x - x,
    "mul": lambda a, b: a * b,
    "mul broadcast": lambda a, b: a * b,
    "mul x * x": lambda x: x * x,
    "mul x * x of a scalar": lambda x: x * x,
    "(x + x) * x of a scalar": lambda x: (x + x) * x,
    "mul python scalar": lambda x: 2.5 * x,
    "div": lambda a, b: a / b,
    "div broadcast": lambda a, b: a / b,
    "rdiv python scalar": lambda x: 1.0 / x,
    "pow scalar exponent": lambda x: x**3,
    "pow tensor exponent": lambda a, b: a**b,
    "neg": lambda x: -x,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "tanh": torch.tanh,
    "sum all": lambda x: x.sum(),
    "sum axis 0": lambda x: x.sum(dim=0),
    "sum axes (0, 2) keepdims": lambda x: x.sum(dim=(0, 2), keepdim=True),
    "mean all": lambda x: x.mean(),
    "mean axis 1": lambda x: x.mean(dim=1),
    "mean axis -1 keepdims": lambda x: x.mean(dim=-1, keepdim=True),
    "max all": lambda x: x.amax(),
    "amax axis 1": lambda x: x.amax(dim=1),
    "amax axes (0, 2) keepdims": lambda x: x.amax(dim=(0, 2), keepdim=True),
    "max dim 1 values": lambda x: x.max(dim=1).values,
    "max dim 0 keepdim values": lambda x: x.max(0, keepdim=True)[0],
    "reshape": lambda x: x.reshape(6, 4),
    "reshape -1": lambda x: x.reshape(-1),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose two dims": lambda x: x.transpose(0, -1),
    "transpose .T": lambda x: x.T,
    "swapaxes": lambda x: x.swapaxes(0, 2),
    "getitem slices": lambda x: x[1:, ::2],
    "getitem int and None": lambda x: x[1, None, :, -1],
    "getitem repeated ints": lambda x: x[[0, 2, 0, 0]],
    "getitem columns": lambda x: x[:, torch.tensor([1, 1, 3])],
    "matmul": torch.matmul,
    "matmul batched @ 2-D": torch.matmul,
    "matmul broadcast batch": torch.matmul,
    "matmul transposed inputs": lambda a, b: a.T @ b.T,
    "matmul vector @ matrix": torch.matmul,
    "matmul matrix @ vector": torch.matmul,
    "matmul vector @ vector": torch.matmul,
    "linear": TF.linear,
    "linear no bias": TF.linear,
    "softmax last axis": lambda x: torch.softmax(x, dim=-1),
    "softmax axis 0": lambda x: torch.softmax(x, dim=0),
    "softmax axis 1": lambda x: torch.softmax(x, dim=1),
    "log_softmax last axis": lambda x: torch.log_softmax(x, dim=-1),
    "log_softmax axis 0": lambda x: torch.log_softmax(x, dim=0),
    "softmax of a scalar": lambda x: torch.softmax(x, dim=-1),
    "log_softmax of a scalar": lambda x: torch.log_softmax(x, dim=-1),
    "masked_fill broadcast mask": lambda x: x.masked_fill(_t(_MASK_2D), -7.0),
    "masked_fill row mask": lambda x: x.masked_fill(_t(_MASK_2D[:1]), 0.0),
    "layer_norm": lambda x, w, b: TF.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5),
    "layer_norm no affine": lambda x: TF.layer_norm(x, (x.shape[-1],), eps=1e-5),
    "layer_norm over two axes": lambda x, w, b: TF.layer_norm(x, (3, 4), w, b, eps=1e-5),
    "cross_entropy": lambda x: TF.cross_entropy(x, _t(_TARGETS)),  # (N, C, d1) logits, (N, d1) targets
    "cross_entropy ignore_index": lambda x: TF.cross_entropy(x, _t(_IGNORED), ignore_index=-100),
    "embedding repeated indices": lambda w: TF.embedding(_t(_TOKENS), w),
    "gelu tanh": lambda x: TF.gelu(x, approximate="tanh"),
    "gelu tanh of a scalar": lambda x: TF.gelu(x, approximate="tanh"),
    "relu": torch.relu,
    "cat dim 1": lambda a, b: torch.cat([a, b], dim=1),
    "cat three": lambda a, b, c: torch.cat([a, b, c], dim=0),
    "composite linear + layer_norm + gelu":
        lambda x, w, b, g, h: TF.gelu(TF.layer_norm(x @ w + b, (g.shape[0],), g, h, eps=1e-5), approximate="tanh"),
    "composite attention head": _torch_attention_head,
}

# ---- more math: elementwise, activations, reductions ----
_MASK = _t(_MASK_2D)
TORCH.update({
    "sigmoid": torch.sigmoid,
    "sigmoid of large values": lambda x: torch.sigmoid(x * 20.0),
    "silu": TF.silu,
    "leaky_relu": TF.leaky_relu,
    "leaky_relu slope 0.2": lambda x: TF.leaky_relu(x, negative_slope=0.2),
    "abs": torch.abs,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "erf": torch.erf,
    "erfc": torch.erfc,
    "erf of large values": lambda x: torch.erf(x * 4.0),
    "gelu exact (default)": TF.gelu,
    "maximum broadcast": torch.maximum,
    "maximum batched": torch.maximum,
    "maximum python scalar": lambda x: torch.maximum(x, torch.tensor(0.25, dtype=x.dtype)),
    "minimum broadcast": torch.minimum,
    "where broadcast": lambda a, b: torch.where(_MASK, a, b),
    "where batched": lambda a, b: torch.where(_MASK, a, b),
    "where python scalar": lambda x: torch.where(_MASK, x, 0.5),
    "clamp": lambda x: torch.clamp(x, min=-0.5, max=0.7),
    "clamp min only": lambda x: torch.clamp(x, min=0.1),
    "clip max only": lambda x: torch.clip(x, max=-0.2),
    "min all": lambda x: x.amin(),
    "amin axis 1": lambda x: x.amin(dim=1),
    "amin axes (0, 2) keepdims": lambda x: x.amin(dim=(0, 2), keepdim=True),
    "min dim 1 values": lambda x: x.min(dim=1).values,
    "min dim 0 keepdim values": lambda x: x.min(0, keepdim=True)[0],
    "var all": lambda x: x.var(),
    "var axis 1 correction 0": lambda x: x.var(dim=1, correction=0),
    "var axes (0, 2) keepdims": lambda x: x.var(dim=(0, 2), keepdim=True),
    "var unbiased=False": lambda x: x.var(dim=-1, unbiased=False),
    "std axis -1": lambda x: x.std(dim=-1),
    "std all correction 2": lambda x: x.std(correction=2),
    "prod all": lambda x: x.prod(),
    "prod axis 1": lambda x: x.prod(dim=1),
    "prod axes (0, 2) keepdims": lambda x: x.prod(dim=2, keepdim=True).prod(dim=0, keepdim=True),
    "logsumexp axis 1": lambda x: torch.logsumexp(x, dim=1),
    "logsumexp axes (0, 2) keepdims": lambda x: torch.logsumexp(x, dim=(0, 2), keepdim=True),
    "logsumexp axis -1": lambda x: torch.logsumexp(x, dim=-1),
    "cumsum axis 0": lambda x: torch.cumsum(x, dim=0),
    "cumsum axis -1": lambda x: torch.cumsum(x, dim=-1),
    "cumsum axis 1": lambda x: torch.cumsum(x, dim=1),
    "composite SwiGLU feed-forward": lambda x, w1, w2, w3: (TF.silu(x @ w1) * (x @ w2)) @ w3,
    "composite RMS norm by rsqrt": lambda x, g: x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * g,
})

# ---- PyTorch's shape ops, RMS norm, attention, and cross-entropy's options ----

def _torch_split_sizes(x):
    a, b, c = x.split([1, 3, 2], dim=1)
    return torch.cat([c * 2.0, a, b * b], dim=1)


def _torch_split_one_unused(x):
    a, _, c = x.split(2, dim=-1)
    return a * c


def _torch_split_piece_twice(x):
    a, b = x.split(2, dim=1)
    return a * b + a


def _torch_split_uneven(x):
    a, b, c = x.split(2)
    return torch.cat([a * 3.0, b, c * c])


def _torch_chunk_broadcast(x):
    a, b, c = x.chunk(3, dim=-1)
    return a * b + c


TORCH.update({
    "stack dim 1": lambda a, b, c: torch.stack([a, b, c], dim=1),
    "stack dim -1 batched": lambda a, b: torch.stack([a, b], dim=-1),
    "split sizes list": _torch_split_sizes,
    "split a piece unused": _torch_split_one_unused,
    "split a piece used twice": _torch_split_piece_twice,
    "split uneven": _torch_split_uneven,
    "chunk uneven broadcast": _torch_chunk_broadcast,
    "squeeze all": lambda x: x.squeeze(),
    "squeeze dims": lambda x: torch.squeeze(x, (0, 1)),
    "unsqueeze outer product": lambda x: x.unsqueeze(-1) * torch.unsqueeze(x, 1),
    "expand": lambda x: x.expand(2, -1, 4),
    "broadcast_to": lambda x: torch.broadcast_to(x, (2, 3, 4)),
    "expand new and stretched axes": lambda x, y: x.expand(2, 3, 4) * y,
    "flatten": lambda x: x.flatten(1),
    "flatten middle": lambda x: torch.flatten(x, 1, 2),
    "unflatten": lambda x: x.unflatten(1, (3, -1)),
    "flip two dims": lambda x: x.flip(0, 2),
    "flip last dim": lambda x: torch.flip(x, (-1,)),
    "tril batched": lambda x: x.tril(),
    "tril diagonal -1": lambda x: torch.tril(x, -1),
    "triu diagonal 1": lambda x: x.triu(1),
    "repeat": lambda x: x.repeat(2, 3),
    "repeat new axis": lambda x: x.repeat(2, 1, 3),
    "gather dim 1 repeated": lambda x: x.gather(1, _t(_GATHER_1)),
    "gather dim 0 smaller index": lambda x: torch.gather(x, 0, _t(_GATHER_0)),
    "rms_norm": lambda x, w: TF.rms_norm(x, (8,), w, eps=1e-5),
    "rms_norm two axes eps None": lambda x, w: TF.rms_norm(x, (3, 4), w),
    "rms_norm no weight": lambda x: TF.rms_norm(x, (5,)),
    "sdpa": TF.scaled_dot_product_attention,
    "sdpa causal": lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True),
    "sdpa causal T_q < T_k": lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True),
    "sdpa bool mask broadcast batch": lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, _t(_SEES)),
    "sdpa float mask and scale": lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, m, scale=0.3),
    "cross_entropy sum": lambda x: TF.cross_entropy(x, _t(_TARGETS), reduction="sum"),
    "cross_entropy none ignore_index": lambda x: TF.cross_entropy(x, _t(_IGNORED), reduction="none"),
    "cross_entropy smoothing ignore_index": lambda x: TF.cross_entropy(x, _t(_IGNORED), label_smoothing=0.2),
    "cross_entropy probabilities": lambda x, p: TF.cross_entropy(x, p, label_smoothing=0.1),
    "cross_entropy probabilities none": lambda x, p: TF.cross_entropy(x, p, reduction="none"),
})

# ---- regression and binary losses, and the loss layers ----
TORCH.update({
    "mse_loss": lambda x, y: TF.mse_loss(x, y),
    "mse_loss sum": lambda x, y: TF.mse_loss(x, y, reduction="sum"),
    "mse_loss none": lambda x, y: TF.mse_loss(x, y, reduction="none"),
    "mse_loss array target": lambda x: TF.mse_loss(x, _t(_PROBS)),
    "bce_with_logits": lambda x: TF.binary_cross_entropy_with_logits(x, _t(_PROBS)),
    "bce_with_logits target gradient": lambda x, t: TF.binary_cross_entropy_with_logits(x, t),
    "bce_with_logits weight pos_weight sum": lambda x, t: TF.binary_cross_entropy_with_logits(
        x, t, _t(_CLASS_WEIGHT), pos_weight=_t(_POS_WEIGHT), reduction="sum"),
    "bce_with_logits row weight none": lambda x: TF.binary_cross_entropy_with_logits(
        x, _t(_PROBS), _t(_ROW_WEIGHT), reduction="none"),
    "bce_with_logits large logits": lambda x: TF.binary_cross_entropy_with_logits(
        x * 30.0, _t(_PROBS), pos_weight=_t(_POS_WEIGHT)),
    "CrossEntropyLoss layer smoothing": lambda x: torch.nn.CrossEntropyLoss(label_smoothing=0.1)(x, _t(_IGNORED)),
    "MSELoss layer sum": lambda x, y: torch.nn.MSELoss(reduction="sum")(x, y),
    "BCEWithLogitsLoss layer": lambda x: torch.nn.BCEWithLogitsLoss(pos_weight=_t(_POS_WEIGHT))(x, _t(_PROBS)),
})

TORCH.update({  # the names of PyTorch's namespace beyond the teaching set (minigrad/ops/pointwise.py, indexing.py)
    "scatter_add repeated places": lambda x, s: torch.scatter_add(x, 1, _t(_GATHER_1), s),
    "index_add": lambda x, s: x.index_add(0, torch.tensor([2, 0, 2]), s, alpha=0.5),
    "log10 log2 log1p": lambda x: x.log10() * x.log2() + x.log1p(),
    "expm1": torch.expm1,
})

# CASES entries with no torch counterpart, and why
EXEMPT = {
    "dropout": "torch draws its own random mask, so values cannot match; test_autograd checks dropout's mask and scale",
    "sdpa dropout": "torch draws its own random mask; tests/test_ops_nn.py checks it against minigrad's F.dropout",
}


def test_every_case_has_a_torch_counterpart() -> None:
    names = {c.name for c in CASES}
    assert names - set(TORCH) - set(EXEMPT) == set(), "add these CASES to TORCH (or to EXEMPT with a reason)"
    assert set(TORCH) - names == set(), "TORCH names cases that CASES no longer has"
    assert set(EXEMPT) <= names and not set(EXEMPT) & set(TORCH)


CHECKED = [c for c in CASES if c.name in TORCH]


@pytest.mark.parametrize("case", CHECKED, ids=[c.name for c in CHECKED])
def test_case_matches_torch(case: Case) -> None:
    inputs = case.inputs("cpu", seed=3)
    t_inputs = [_t(x.numpy()).requires_grad_() for x in inputs]
    out, t_out = case.fn(*inputs), TORCH[case.name](*t_inputs)
    assert out.shape == tuple(t_out.shape)
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), **TOL, err_msg=f"{case.name}: values")
    dout = np.random.default_rng(5).standard_normal(out.shape)
    out.backward(dout)
    t_out.backward(_t(dout))
    for i, (x, tx) in enumerate(zip(inputs, t_inputs, strict=True)):
        np.testing.assert_allclose(x.grad, tx.grad.numpy(), **TOL, err_msg=f"{case.name}: gradient of input {i}")


@pytest.mark.parametrize("T, T_k", [(1, 1), (4, 4), (3, 7)])
def test_causal_mask_is_torch_triu(T: int, T_k: int) -> None:
    """Query i sits at position i + T_k - T, so it may see keys 0 .. i + T_k - T: True there and False beyond, where
    torch.nn.Transformer.generate_square_subsequent_mask puts its 0s and -infs for T == T_k."""
    future = torch.triu(torch.ones(T, T_k, dtype=torch.bool), diagonal=T_k - T + 1)
    mask = F.causal_mask(T, T_k)
    assert mask.dtype == np.bool_ and not mask.requires_grad
    np.testing.assert_array_equal(mask.numpy(), ~future.numpy())
    if T == T_k:
        square = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64).numpy()
        np.testing.assert_array_equal(mask.numpy(), square == 0)


def test_max_ties_match_torch_amax() -> None:
    """amax, as torch.amax, shares the gradient equally between tied maxima."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, -1.0, 5.0]])
    mx, tx = mg.tensor(x, requires_grad=True), _t(x).requires_grad_()
    dout = np.array([0.7, -1.3, 2.0])
    mx.amax(axis=1).backward(dout)
    tx.amax(dim=1).backward(_t(dout))
    np.testing.assert_allclose(mx.grad, tx.grad.numpy(), **TOL)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_with_a_dim_gives_values_and_indices_as_torch(op) -> None:
    """With a dim: (values, indices), the first of tied extremes, its gradient going to that one element only."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, -1.0, 5.0], [np.nan, 1.0, np.nan]])
    mx, tx = mg.tensor(x, requires_grad=True), _t(x).requires_grad_()
    for keepdim in (False, True):
        mine, theirs = getattr(mx, op)(dim=1, keepdim=keepdim), getattr(tx, op)(dim=1, keepdim=keepdim)
        values, indices = mine  # unpacks into the two, as torch.return_types.max does
        np.testing.assert_array_equal(values.numpy(), theirs.values.detach().numpy())
        np.testing.assert_array_equal(mine.indices.numpy(), theirs.indices.numpy())
        assert indices.dtype == mg.int64
    dout = np.array([0.7, -1.3, 2.0, 0.5])
    getattr(mx, op)(1).values.backward(dout)
    getattr(tx, op)(1).values.backward(_t(dout))
    np.testing.assert_array_equal(mx.grad, tx.grad.numpy())
    assert np.count_nonzero(mx.grad.numpy()) == 4  # one element per row, not shared between ties
    other = np.array([[2.0, 2.0, 4.0]])
    np.testing.assert_array_equal(getattr(mg, op)(mg.tensor(x), mg.tensor(other)).numpy(),
                                  getattr(torch, op)(_t(x), _t(other)).numpy())  # max(a, b): the elementwise one
