"""PyTorch's shape ops, RMS norm, scaled dot-product attention, one_hot and cross-entropy's options,
beyond the CASES table (which gradchecks each of them and compares it with PyTorch): split as one node
with several outputs, the arguments each op accepts or refuses, and the conventions that must match
PyTorch exactly (chunk's sizes, squeeze of a non-1 axis, label smoothing with ignore_index, the mean
of no row, a query that may see no key).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F
from minigrad.ops import shapes

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install 'minigrad[torch]'")

TOL = dict(rtol=1e-10, atol=1e-12)


def grad(t: mg.Tensor) -> np.ndarray:
    assert t.grad is not None, f"tensor of shape {t.shape} got no gradient"
    return t.grad.numpy()


def _t(array, requires_grad: bool = False):
    return torch.from_numpy(np.array(array)).requires_grad_(requires_grad)


# ---- split: one node, several outputs ----

def test_split_pieces_share_one_node(rand) -> None:
    x = rand(2, 3, 12)
    q, k, v = x.split(4, dim=-1)
    nodes = {id(p.grad_fn.mg_parents[0]) for p in (q, k, v)}
    assert len(nodes) == 1 and q.grad_fn.mg_parents[0].mg_parents == (x,)
    assert [p.grad_fn.mg_index for p in (q, k, v)] == [0, 1, 2]


def test_split_backward_runs_once_for_all_pieces(rand, monkeypatch) -> None:
    calls = []
    original = shapes.Split.backward
    monkeypatch.setattr(shapes.Split, "backward", lambda self, douts: calls.append(len(douts)) or original(self, douts))
    x = rand(2, 9)
    q, k, v = x.split(3, dim=1)
    (q * 2.0 + k * v).sum().backward()
    assert calls == [3]
    expected = np.concatenate([np.full((2, 3), 2.0), v.numpy(), k.numpy()], axis=1)
    np.testing.assert_allclose(grad(x), expected, rtol=1e-15)


def test_backward_from_one_piece_gives_zeros_elsewhere(rand) -> None:
    x = rand(4, 3)
    _, middle, _ = x.split([1, 2, 1])
    middle.backward(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(grad(x), [[0, 0, 0], [0, 1, 2], [3, 4, 5], [0, 0, 0]])


def test_split_with_retain_graph_accumulates_twice(rand) -> None:
    x = rand(2, 4)
    a, b = x.split(2, dim=1)
    y = (a * b).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(grad(x), 2 * np.concatenate([b.numpy(), a.numpy()], axis=1), rtol=1e-15)
    with pytest.raises(RuntimeError, match="already used by a backward"):
        y.backward()


def test_split_without_grad_records_nothing(rand) -> None:
    x = rand(3, 4, requires_grad=False)
    pieces = mg.split(x, 2, dim=1)
    assert isinstance(pieces, tuple) and all(p.grad_fn is None and not p.requires_grad for p in pieces)
    with mg.no_grad():
        assert all(p.grad_fn is None for p in rand(3, 4).split(2))


@needs_torch
@pytest.mark.parametrize("shape, sizes, dim", [((5, 3), 2, 0), ((2, 7), [3, 0, 4], 1), ((2, 6), 6, -1),
                                               ((2, 6), 10, 1), ((0, 3), 2, 0), ((4, 6), [1, 2, 3], -1)])
def test_split_matches_torch(shape, sizes, dim) -> None:
    x = np.random.default_rng(0).standard_normal(shape)
    ours, theirs = mg.split(mg.tensor(x), sizes, dim), torch.split(_t(x), sizes, dim)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@needs_torch
@pytest.mark.parametrize("n, chunks", [(5, 3), (6, 4), (7, 7), (3, 5), (0, 3), (8, 1)])
def test_chunk_sizes_match_torch(n: int, chunks: int) -> None:
    """torch.chunk makes pieces of ceil(n / chunks), so 6 in 4 chunks gives 3 pieces, not 4."""
    ours = [p.shape for p in mg.arange(n).chunk(chunks)]
    assert ours == [tuple(p.shape) for p in torch.arange(n).chunk(chunks)]


@pytest.mark.parametrize("call, message", [
    (lambda x: x.split([2, 2]), "sizes [2, 2] do not add up to 5, the size of dim 0 of a tensor of shape (5, 3)"),
    (lambda x: x.split(0), "split_size must be positive, got 0 for dim 0 of size 5"),
    (lambda x: x.split([6, -1]), "sizes [6, -1] do not add up to 5"),
    (lambda x: x.split(2, dim=2), "split: dim 2 is out of range [-2, 1] for a tensor of shape (5, 3)"),
    (lambda x: x.chunk(0), "chunk: chunks must be at least 1, got 0"),
])
def test_split_and_chunk_refuse_bad_arguments(rand, call, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call(rand(5, 3))


# ---- the other shape ops: PyTorch's conventions, and what they refuse ----

@needs_torch
@pytest.mark.parametrize("op", [
    lambda m, x: m.squeeze(x, 0),  # size 2: PyTorch leaves it, rather than raising
    lambda m, x: m.squeeze(x, (1, -1)),
    lambda m, x: m.squeeze(x),
    lambda m, x: m.unsqueeze(x, 4),
    lambda m, x: m.unsqueeze(x, -5),
    lambda m, x: m.flatten(x),
    lambda m, x: m.flatten(x, -2),
    lambda m, x: m.flatten(x[0, 0, 0, 0]),  # a 0-d tensor becomes (1,)
    lambda m, x: m.unflatten(x, 2, (1, 3, 1)),
    lambda m, x: m.flip(x, (0, 2)),
    lambda m, x: m.stack([x, x], -1),
    lambda m, x: x.expand(4, -1, 5, -1, 2),
    lambda m, x: x.repeat(1, 2, 1, 3, 2),
    lambda m, x: m.tril(x[:, 0], 1),
    lambda m, x: m.triu(x[0, 0], -1),
], ids=["squeeze non-1", "squeeze tuple", "squeeze all", "unsqueeze last", "unsqueeze first", "flatten all",
        "flatten last two", "flatten 0-d", "unflatten", "flip", "stack", "expand", "repeat", "tril", "triu"])
def test_shape_op_matches_torch(op) -> None:
    x = np.random.default_rng(1).standard_normal((2, 1, 3, 1))
    ours, theirs = op(mg, mg.tensor(x)), op(torch, _t(x))
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@needs_torch
def test_gather_matches_torch_on_every_dim(rand) -> None:
    x = rand(3, 4, 5)
    for dim in (0, 1, 2, -1):
        index = np.random.default_rng(dim + 3).integers(0, x.shape[dim], size=(2, 3, 4))
        np.testing.assert_array_equal(x.gather(dim, index).numpy(), torch.gather(_t(x.numpy()), dim, _t(index)).numpy())


@pytest.mark.parametrize("call, error, message", [
    (lambda x: x.unflatten(1, (2, 2)), ValueError, "unflatten: sizes (2, 2) do not multiply to 3"),
    (lambda x: x.unflatten(1, (-1, -1)), ValueError, "sizes (-1, -1) do not multiply to 3"),
    (lambda x: x.flatten(2, 1), ValueError, "start_dim 2 comes after end_dim 1"),
    (lambda x: x.expand(2, 5, 4), ValueError, "shape (2, 3, 4) cannot be expanded to (2, 5, 4)"),
    (lambda x: x.expand(3, 4), ValueError, "shape (2, 3, 4) cannot be expanded to (3, 4)"),
    (lambda x: x.expand(-1, 2, 3, 4), ValueError, "cannot be expanded to (-1, 2, 3, 4)"),
    (lambda x: x.repeat(2, 2), ValueError, "repeat: sizes (2, 2) for a tensor of shape (2, 3, 4)"),
    (lambda x: x.flip(0, -3), ValueError, "flip: dims (0, 0) name an axis twice"),
    (lambda x: x.squeeze(3), ValueError, "squeeze: dim 3 is out of range [-3, 2]"),
    (lambda x: x.unsqueeze(4), ValueError, "unsqueeze: dim 4 is out of range [-4, 3]"),
    (lambda x: x[0, 0].tril(), ValueError, "tril: needs a tensor of at least 2 dimensions, got shape (4,)"),
    (lambda x: mg.stack([x, x[0]]), ValueError, "stack: tensors must have one shape, got (2, 3, 4), (3, 4)"),
    (lambda x: mg.stack([]), ValueError, "stack: need at least one tensor"),
    (lambda x: x.gather(1, np.zeros((2, 3), int)), ValueError, "gather: index of shape (2, 3) for a tensor of shape"),
    (lambda x: x.gather(1, np.zeros((3, 3, 4), int)), ValueError, "none larger than the tensor's except along dim"),
    (lambda x: x.gather(1, np.full((2, 5, 4), 3)), IndexError, "gather: index 3 at position (0, 0, 0) is out of range"),
    (lambda x: x.gather(2, np.full((2, 3, 4), -1)), IndexError, "gather: index -1"),
    (lambda x: x.gather(0, np.zeros((2, 3, 4))), TypeError, "gather: expected integer values, got dtype float64"),
])
def test_shape_ops_refuse_bad_arguments(rand, call, error, message) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call(rand(2, 3, 4))


def test_expand_shares_memory_and_its_gradient_sums(rand) -> None:
    x = rand(3, 1)
    y = x.expand(2, 3, 4)
    assert 0 in y.array.strides  # a broadcast view: nothing was copied
    y.backward(np.ones((2, 3, 4)))
    np.testing.assert_array_equal(grad(x), np.full((3, 1), 8.0))


# ---- RMS norm ----

@needs_torch
@pytest.mark.parametrize("shape, normalized, affine, eps", [((2, 3, 8), 8, True, 1e-6), ((2, 3, 4), (3, 4), True, None),
                                                           ((5, 6), [6], False, None)])
def test_rmsnorm_module_matches_torch(shape, normalized, affine, eps) -> None:
    x = np.random.default_rng(2).standard_normal(shape)
    ours = nn.RMSNorm(normalized, eps=eps, elementwise_affine=affine, dtype=mg.float64)
    theirs = torch.nn.RMSNorm(normalized, eps=eps, elementwise_affine=affine, dtype=torch.float64)
    if affine:
        w = np.random.default_rng(3).standard_normal(ours.weight.shape)
        ours.weight.data[...] = w
        theirs.weight.data[...] = _t(w)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    mx, tx = mg.tensor(x, requires_grad=True), _t(x, requires_grad=True)
    y, ty = ours(mx), theirs(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **TOL)
    dy = np.random.default_rng(4).standard_normal(shape)
    y.backward(dy)
    ty.backward(_t(dy))
    np.testing.assert_allclose(grad(mx), tx.grad.numpy(), **TOL)
    if affine:
        np.testing.assert_allclose(grad(ours.weight), theirs.weight.grad.numpy(), **TOL)


@needs_torch
def test_rms_norm_default_eps_is_the_dtypes_epsilon_in_float32() -> None:
    """eps=None is finfo(float32).eps = 1.2e-7 here, as in PyTorch: visible on an input of tiny values."""
    x = np.full((2, 4), 1e-4, dtype=np.float32)
    x[1] = 3e-4
    ours = F.rms_norm(mg.tensor(x), 4)
    assert ours.dtype == mg.float32
    np.testing.assert_allclose(ours.numpy(), TF.rms_norm(_t(x), (4,)).numpy(), rtol=1e-6)
    assert not np.allclose(ours.numpy(), F.rms_norm(mg.tensor(x), 4, eps=1e-5).numpy(), rtol=1e-3)


def test_rms_norm_refuses_shapes_that_do_not_fit(rand) -> None:
    with pytest.raises(ValueError, match=r"normalized_shape \(3, 5\) is not the trailing shape .* \(2, 3, 4\)"):
        F.rms_norm(rand(2, 3, 4), (3, 5))
    with pytest.raises(ValueError, match=r"weight of shape \(3,\) for normalized_shape \(4,\)"):
        F.rms_norm(rand(2, 3, 4), 4, rand(3))


# ---- scaled dot-product attention ----

def composed_weights(q, k, mask=None):
    """The steps written out, as models/attention.py does: scores, the boolean mask (True: may attend), softmax."""
    scores = (q @ k.transpose(-2, -1)) * (1 / np.sqrt(q.shape[-1]))
    if mask is not None:
        scores = mg.where(mask, scores, -np.inf)
    return F.softmax(scores, axis=-1)


def twins_of(tensors):
    return [mg.tensor(t.numpy().copy(), requires_grad=True, device=t.device) for t in tensors]


def assert_same_values_and_gradients(fused, composed, inputs, twins) -> None:
    np.testing.assert_allclose(fused.numpy(), composed.numpy(), rtol=1e-12, atol=1e-14)
    dout = np.random.default_rng(5).standard_normal(fused.shape)
    fused.backward(dout)
    composed.backward(dout)
    for a, b in zip(inputs, twins, strict=True):
        np.testing.assert_allclose(grad(a), grad(b), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("T, T_k", [(4, 4), (1, 6), (3, 7)])
def test_sdpa_with_causal_mask_is_the_kv_cache_mask(rand, T, T_k) -> None:
    """attn_mask=F.causal_mask(T, T_k): the T queries are the last T of T_k positions, as a KV cache needs."""
    q, k, v = rand(2, 3, T, 4), rand(2, 3, T_k, 4), rand(2, 3, T_k, 5)
    qt, kt, vt = twins = twins_of((q, k, v))
    mask = F.causal_mask(T, T_k, device=q.device)
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    composed = composed_weights(qt, kt, mask) @ vt
    assert_same_values_and_gradients(fused, composed, (q, k, v), twins)


@needs_torch
@pytest.mark.parametrize("L, S", [(3, 5), (5, 3), (4, 4), (1, 6)])
def test_sdpa_is_causal_aligns_top_left_as_torch(L, S) -> None:
    """is_causal: query i sees keys 0..i, as PyTorch's (the KV cache's bottom-right mask is F.causal_mask(L, S));
    values and gradients compared in float64."""
    rng = np.random.default_rng(6)
    arrays = rng.standard_normal((1, 2, L, 4)), rng.standard_normal((1, 2, S, 4)), rng.standard_normal((1, 2, S, 3))
    ours = [mg.tensor(a, requires_grad=True) for a in arrays]
    theirs = [_t(a, requires_grad=True) for a in arrays]
    out = F.scaled_dot_product_attention(*ours, is_causal=True)
    expected = TF.scaled_dot_product_attention(*theirs, is_causal=True)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), **TOL)
    dout = rng.standard_normal(out.shape)
    out.backward(dout)
    expected.backward(_t(dout))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **TOL)
    if L < S:  # the bottom-right mask answers differently
        kv_cache = F.scaled_dot_product_attention(*ours, attn_mask=F.causal_mask(L, S))
        assert not np.allclose(kv_cache.numpy(), out.numpy())


def test_sdpa_is_one_node_and_keeps_float32(rand) -> None:
    q, k, v = (rand(2, 3, 4, dtype=mg.float32) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == mg.float32 and out.shape == (2, 3, 4)
    assert out.grad_fn.mg_parents == (q, k, v)


def test_sdpa_query_that_sees_no_key_gets_zeros(rand) -> None:
    q, k, v = rand(2, 3, 4), rand(2, 5, 4), rand(2, 5, 6)
    sees = np.ones((3, 5), bool)
    sees[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=sees)
    np.testing.assert_array_equal(out.numpy()[:, 1], 0)
    assert np.isfinite(out.numpy()).all()
    out.backward(np.ones(out.shape))
    np.testing.assert_array_equal(grad(q)[:, 1], 0)
    assert np.isfinite(grad(k)).all() and np.isfinite(grad(v)).all()


@needs_torch
def test_a_query_that_sees_no_key_gets_zeros_from_sdpa_and_nan_written_out_as_in_pytorch() -> None:
    """SDPA takes attention to no key as the empty sum, 0, with no gradient through that query; the written-out
    steps take softmax of a row of -inf alone, 0 / 0 = NaN. The rows that see a key agree, in value and gradient."""
    rng = np.random.default_rng(7)
    q, k, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 6))
    mask = np.zeros((3, 5))
    mask[1] = -np.inf  # query 1 sees no key
    mask[2, 3:] = -np.inf
    dout = rng.standard_normal((2, 3, 6))
    sdpa, written = ([mg.tensor(a, requires_grad=True) for a in (q, k, v)] for _ in range(2))
    ours = F.scaled_dot_product_attention(*sdpa, attn_mask=mask)
    with np.errstate(invalid="ignore"):  # -inf - (-inf) in the softmax of query 1's row
        ours_written = F.softmax(written[0] @ written[1].transpose(-2, -1) / 2 + mg.tensor(mask), axis=-1) @ written[2]
    tq, tk, tv = (_t(a, requires_grad=True) for a in (q, k, v))
    theirs = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=_t(mask))
    theirs_written = torch.softmax(tq @ tk.transpose(-2, -1) / 2 + _t(mask), dim=-1) @ tv

    np.testing.assert_array_equal(ours.numpy()[:, 1], 0)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), **TOL)
    assert np.isnan(ours_written.numpy()[:, 1]).all() and np.isnan(theirs_written.detach().numpy()[:, 1]).all()
    np.testing.assert_allclose(ours_written.numpy()[:, [0, 2]], ours.numpy()[:, [0, 2]], **TOL)

    ours.backward(dout)
    theirs.backward(_t(dout))
    np.testing.assert_array_equal(grad(sdpa[0])[:, 1], 0)
    for m, t in zip(sdpa, (tq, tk, tv), strict=True):
        np.testing.assert_allclose(grad(m), t.grad.numpy(), **TOL)
    ours_written.backward(dout)  # NaN weights reach every gradient but dq of the rows that see a key
    assert np.isnan(grad(written[2])).all() and np.isnan(grad(written[1])).all()
    np.testing.assert_allclose(grad(written[0])[:, [0, 2]], grad(sdpa[0])[:, [0, 2]], **TOL)


def test_sdpa_with_the_projects_causal_mask_is_causal_attention(rand) -> None:
    """F.causal_mask is boolean, True: may attend, so as attn_mask it hides the future, exactly as is_causal does for as
    many queries as keys; with fewer queries, they are the last ones (a KV cache's)."""
    q, k, v = rand(2, 3, 4, 4), rand(2, 3, 6, 4), rand(2, 3, 6, 5)
    square = F.scaled_dot_product_attention(k, k, v, attn_mask=F.causal_mask(6, device=q.device))
    np.testing.assert_array_equal(square.numpy(), F.scaled_dot_product_attention(k, k, v, is_causal=True).numpy())
    with_mask = F.scaled_dot_product_attention(q, k, v, attn_mask=F.causal_mask(4, 6, device=q.device))
    changed = v.numpy().copy()
    changed[..., -1, :] += 1  # the last key's value: in the future of every query but the last
    moved = F.scaled_dot_product_attention(q, k, mg.tensor(changed, device=q.device),
                                           attn_mask=F.causal_mask(4, 6, device=q.device))
    np.testing.assert_array_equal(moved.numpy()[..., :3, :], with_mask.numpy()[..., :3, :])
    assert not np.allclose(moved.numpy()[..., 3, :], with_mask.numpy()[..., 3, :])


def test_the_allowed_keys_are_made_once_per_shape_and_cannot_be_written() -> None:
    """The cached triangle attention reads in every layer: the same array each time, read-only, so that no caller
    can change the mask of the next one; True where a query may attend, as PyTorch's boolean attn_mask: F.causal_mask
    is it."""
    from minigrad.ops.shapes import allowed_keys

    first = allowed_keys(3, 5, "cpu")
    assert first is allowed_keys(3, 5, "cpu") and first.dtype == bool
    np.testing.assert_array_equal(first, np.arange(5)[None, :] <= np.arange(3)[:, None] + 2)
    with pytest.raises(ValueError, match="read-only"):
        first[0, 0] = False
    np.testing.assert_array_equal(F.causal_mask(3, 5).numpy(), first)


@needs_torch
@pytest.mark.parametrize("kind", ["boolean, True: may attend", "float, added to the scores"])
@pytest.mark.parametrize("path", ["plain, float64", "compiled kernel, float32"])
def test_sdpa_takes_both_kinds_of_mask_as_torch_does(kind: str, path: str) -> None:
    """One convention, PyTorch's: a boolean attn_mask is True where a query may attend, a float one is added to the
    scores. The same mask gives torch's values and gradients, a query that sees no key included (its row is 0), on
    the teaching code and on the compiled kernel (float32 on the CPU, under mg.compiled())."""
    compiled = path.startswith("compiled")
    if compiled:
        pytest.importorskip("numba", reason="the compiled kernels need the extra minigrad[compiled]")
    dtype, tol = (np.float32, dict(rtol=1e-5, atol=1e-6)) if compiled else (np.float64, TOL)
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal(shape).astype(dtype) for shape in ((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    allowed = rng.random((3, 5)) < 0.6
    allowed[1] = False  # query 1 sees no key
    mask = allowed if kind.startswith("boolean") else np.where(allowed, rng.standard_normal((3, 5)), -np.inf)
    mask = mask.astype(dtype, copy=False) if mask.dtype != bool else mask
    dout = rng.standard_normal((2, 3, 6)).astype(dtype)
    ours = [mg.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [_t(a, requires_grad=True) for a in (q, k, v)]
    with mg.compiled(compiled):
        out = F.scaled_dot_product_attention(*ours, attn_mask=mask)
        out.backward(dout)
    assert type(out.grad_fn).__name__ == ("CompiledAttention" if compiled else "ScaledDotProductAttentionFunction")
    expected = TF.scaled_dot_product_attention(*theirs, attn_mask=_t(mask))
    expected.backward(_t(dout))
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), **tol)
    np.testing.assert_array_equal(out.numpy()[:, 1], 0)
    for m, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(grad(m), t.grad.numpy(), **tol)


def test_causal_mask_with_a_dtype_is_the_additive_mask_before_0_5(rand) -> None:
    """F.causal_mask(T, T_k, dtype=) still gives the float mask of 0.4 (0 where the boolean one is True, -inf
    elsewhere) for one release, with a DeprecationWarning: as attn_mask it gives what the boolean one gives (the last
    T of T_k positions, a KV cache's), and for as many queries as keys what is_causal gives."""
    q, k, v = rand(2, 3, 4, 4), rand(2, 3, 6, 4), rand(2, 3, 6, 5)
    for queries, T in ((q, 4), (k, 6)):
        causal = F.causal_mask(T, 6, device=q.device)
        with pytest.warns(DeprecationWarning, match="causal_mask is boolean now"):
            additive = F.causal_mask(T, 6, dtype=q.dtype, device=q.device)
        np.testing.assert_array_equal(additive.numpy(), np.where(causal.numpy(), 0.0, -np.inf))
        expected = F.scaled_dot_product_attention(queries, k, v, attn_mask=causal).numpy()
        if T == 6:
            np.testing.assert_array_equal(F.scaled_dot_product_attention(k, k, v, is_causal=True).numpy(), expected)
        np.testing.assert_allclose(F.scaled_dot_product_attention(queries, k, v, attn_mask=additive).numpy(),
                                   expected, rtol=1e-12, atol=1e-12)


@needs_torch
def test_masked_fill_takes_pytorchs_opposite_sense_and_refuses_a_float_mask(rand) -> None:
    """masked_fill is PyTorch's: True = fill (the opposite of attn_mask's True = may attend), so the causal fill is
    masked_fill(~allowed, -inf); a float mask is refused by both."""
    x = np.random.default_rng(13).standard_normal((3, 5))
    allowed = np.arange(5)[None, :] <= np.arange(3)[:, None] + 2
    ours = F.masked_fill(mg.tensor(x), ~allowed, float("-inf")).numpy()
    np.testing.assert_array_equal(ours, _t(x).masked_fill(_t(~allowed), float("-inf")).numpy())
    np.testing.assert_array_equal(ours == x, allowed)
    np.testing.assert_array_equal(ours, np.where(F.causal_mask(3, 5).numpy(), x, -np.inf))
    with pytest.raises(TypeError, match="boolean values"):
        F.masked_fill(mg.tensor(x), np.where(allowed, 0.0, -np.inf), 0.0)
    with pytest.raises(RuntimeError):
        _t(x).masked_fill(_t(np.where(allowed, 0.0, -np.inf)), 0.0)


def test_sdpa_dropout_drops_the_weights_as_f_dropout_does(rand) -> None:
    """Same seed, same draw: the fused node equals softmax, F.dropout, @ v, in value and gradient."""
    q, k, v = rand(2, 4, 3), rand(2, 6, 3), rand(2, 6, 5)
    qt, kt, vt = twins = twins_of((q, k, v))
    mg.manual_seed(11)
    fused = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    mg.manual_seed(11)
    composed = F.dropout(composed_weights(qt, kt), 0.4) @ vt
    assert_same_values_and_gradients(fused, composed, (q, k, v), twins)
    everything_dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=1.0)
    np.testing.assert_array_equal(everything_dropped.numpy(), 0)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(attn_mask=np.ones((3, 5), bool), is_causal=True), ValueError, "pass attn_mask or is_causal=True, not both"),
    (dict(attn_mask=np.ones((4, 5), bool)), ValueError, "attn_mask of shape (4, 5) does not broadcast to the scores' "
                                                        "shape (2, 3, 5)"),
    (dict(attn_mask=np.ones((3, 5), int)), TypeError, "attn_mask must be boolean (True: may attend) or float"),
    (dict(dropout_p=1.5), ValueError, "dropout_p must be in [0, 1], got 1.5"),
])
def test_sdpa_refuses_bad_arguments(rand, kwargs, error, message) -> None:
    with pytest.raises(error, match=re.escape(message)):
        F.scaled_dot_product_attention(rand(2, 3, 4), rand(2, 5, 4), rand(2, 5, 6), **kwargs)


@pytest.mark.parametrize("shapes, message", [
    (((2, 3, 4), (2, 5, 3), (2, 5, 6)), "query (2, 3, 4), key (2, 5, 3), value (2, 5, 6) do not fit"),
    (((2, 3, 4), (2, 5, 4), (2, 4, 6)), "query (2, 3, 4), key (2, 5, 4), value (2, 4, 6) do not fit"),
    (((2, 3, 4), (3, 5, 4), (2, 5, 6)), "batch axes of query (2, 3, 4), key (3, 5, 4) and value (2, 5, 6)"),
])
def test_sdpa_refuses_shapes_that_do_not_fit(rand, shapes, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        F.scaled_dot_product_attention(*(rand(*s) for s in shapes), is_causal=True)


def test_sdpa_float_mask_from_an_array_takes_the_query_dtype(rand) -> None:
    q, k, v = (rand(2, 3, 4, dtype=mg.float32) for _ in range(3))
    bias = np.random.default_rng(9).standard_normal((3, 3))  # float64, as NumPy makes it
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert out.dtype == mg.float32
    scores = (q.numpy().astype(np.float64) @ k.numpy().transpose(0, 2, 1)) / 2 + bias
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(out.numpy(), weights @ v.numpy(), rtol=1e-5, atol=1e-6)


# ---- one_hot ----

@needs_torch
@pytest.mark.parametrize("indices, num_classes", [([3, 0, 1], -1), ([[1, 2], [0, 4]], 6), (7, 9)])
def test_one_hot_matches_torch(indices, num_classes) -> None:
    ours = F.one_hot(mg.tensor(indices), num_classes)
    theirs = TF.one_hot(torch.tensor(indices), num_classes)
    assert ours.dtype == mg.int64 and not ours.requires_grad
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_one_hot_on_the_device_of_its_input(device) -> None:
    hot = F.one_hot(mg.tensor([2, 0], device=device), 3)
    assert hot.device == device
    np.testing.assert_array_equal(hot.numpy(), [[0, 0, 1], [1, 0, 0]])


@pytest.mark.parametrize("indices, num_classes, error, message", [
    ([0, 3], 3, IndexError, "one_hot: index 3 at position (1,) is out of range [0, 3)"),
    ([0, -1], -1, IndexError, "one_hot: index -1 at position (1,)"),
    ([0.0, 1.0], 2, TypeError, "one_hot: class indices must be integers, got dtype float32"),
    (np.zeros(0, int), -1, ValueError, "an empty tensor has no largest index; pass num_classes"),
    ([1], 0, ValueError, "num_classes must be positive or -1, got 0"),
])
def test_one_hot_refuses_bad_input(indices, num_classes, error, message) -> None:
    with pytest.raises(error, match=re.escape(message)):
        F.one_hot(indices, num_classes)


# ---- cross-entropy: reduction, label smoothing, ignore_index, class probabilities ----

CE_INDICES = np.array([[1, -100, 4], [-100, 2, 3]])


@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.25, 1.0])
@pytest.mark.parametrize("targets", ["indices", "indices, none ignored", "probabilities"])
def test_cross_entropy_matches_torch(rand, reduction, smoothing, targets) -> None:
    x = rand(6, 5)
    if targets == "probabilities":
        t = np.random.default_rng(10).dirichlet(np.ones(5), size=6)
    else:
        t = CE_INDICES.reshape(-1) if targets == "indices" else np.abs(CE_INDICES.reshape(-1)) % 5
    tx = _t(x.numpy(), requires_grad=True)
    loss = F.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing)
    expected = TF.cross_entropy(tx, _t(t), reduction=reduction, label_smoothing=smoothing)
    np.testing.assert_allclose(loss.numpy(), expected.detach().numpy(), **TOL)
    dout = np.random.default_rng(11).standard_normal(loss.shape)
    loss.backward(dout)
    expected.backward(_t(dout))
    np.testing.assert_allclose(grad(x), tx.grad.numpy(), **TOL)


@needs_torch
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_of_only_ignored_targets_matches_torch(rand, smoothing) -> None:
    """The mean of no row is NaN and its gradient 0; the sum is 0 (PyTorch's answers, computed on the
    device without asking it how many rows counted)."""
    x = rand(2, 4, 3)  # (N, C, d1)
    ignored = np.full((2, 3), -100)
    for reduction in ("mean", "sum", "none"):
        x.zero_grad()
        loss = F.cross_entropy(x, ignored, reduction=reduction, label_smoothing=smoothing)
        expected = TF.cross_entropy(_t(x.numpy()), _t(ignored), reduction=reduction, label_smoothing=smoothing)
        np.testing.assert_array_equal(loss.numpy(), expected.numpy())
        loss.backward(np.ones(loss.shape))
        np.testing.assert_array_equal(grad(x), 0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kind", ["indices", "probabilities"])
def test_cross_entropy_keeps_float32(rand, reduction, kind) -> None:
    x = rand(2, 5, 3, dtype=mg.float32)  # (N, C, d1)
    t = CE_INDICES if kind == "indices" else np.full((2, 5, 3), 0.2)  # float64 probabilities take x's dtype
    loss = F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.1)
    assert loss.dtype == mg.float32 and loss.shape == ((2, 3) if reduction == "none" else ())
    loss.backward(np.ones(loss.shape))
    assert x.grad.dtype == mg.float32


def test_cross_entropy_probability_targets_get_a_gradient(rand) -> None:
    """d loss / d p_c = -(1 - eps) log softmax(x)_c / N for the mean."""
    x, p = rand(4, 3), rand(4, 3)
    F.cross_entropy(x, p, label_smoothing=0.2).backward()
    log_probs = x.numpy() - np.log(np.exp(x.numpy()).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(grad(p), -0.8 * log_probs / 4, rtol=1e-12)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.cross_entropy(x, [0, 1], reduction="avg"), ValueError, "reduction must be 'mean', 'sum' or 'none'"),
    (lambda x: F.cross_entropy(x, [0, 1], label_smoothing=1.5), ValueError, "label_smoothing must be in [0, 1]"),
    (lambda x: F.cross_entropy(x, np.zeros((2, 4))), TypeError, "integer class indices of shape (2,) or class "
                                                                "probabilities of the logits' shape (2, 5)"),
    (lambda x: F.cross_entropy(x, [0, 1], None), TypeError, "positional argument"),
])
def test_cross_entropy_refuses_bad_arguments(rand, call, error, message) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call(rand(2, 5))
