"""PyTorch habits that must give PyTorch's answer, or a clear error, never another answer: masks selected rather than
multiplied where values are not finite, max/min with a dim as (values, indices), the Python protocols of a tensor
(iter, len, float, int, index, format, np.asarray, in), integers beyond int64, where() of two numbers, grouped-query
SDPA, LayerNorm of a tuple shape, SGD's default learning rate. torch is the oracle throughout.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.nn import functional as F

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these cases compare with it")
TF = torch.nn.functional
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's, on the inf and NaN fed here on purpose
INF, NAN = math.inf, math.nan


def pair(values, requires_grad=True):
    values = np.asarray(values, dtype=np.float64)
    return mg.tensor(values, requires_grad=requires_grad), torch.tensor(values, requires_grad=requires_grad)


def assert_same(mine, theirs):
    np.testing.assert_allclose(np.asarray(mine.numpy() if isinstance(mine, mg.Tensor) else mine, dtype=np.float64),
                               theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs,
                               rtol=1e-12, atol=1e-15, equal_nan=True)


# ---- masks meet non-finite values: selected, as in torch ----

CROSS_ENTROPY = {
    "mean": {}, "sum": {"reduction": "sum"}, "none": {"reduction": "none"},
    "smoothing": {"label_smoothing": 0.2}, "smoothing sum": {"label_smoothing": 0.2, "reduction": "sum"},
}


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
@pytest.mark.parametrize("name", CROSS_ENTROPY)
@pytest.mark.parametrize("ignored_row", [[-INF, 1.0, 2.0], [INF, 1.0, 2.0], [NAN, 1.0, 2.0]],
                         ids=["-inf", "inf", "nan"])
def test_an_ignored_row_that_is_not_finite_counts_for_nothing(name, fused, ignored_row):
    """The issue's reproduction: F.cross_entropy([[-inf, 1, 2], [.5, 1, -1]], [-100, 1]) was NaN (torch: 0.555)."""
    logits = [ignored_row, [0.5, 1.0, -1.0], [0.1, -0.2, 0.3]]
    x, tx = pair(logits)
    targets = [-100, 1, 2]
    with mg.fused(fused):
        loss = F.cross_entropy(x, targets, **CROSS_ENTROPY[name])
    tloss = TF.cross_entropy(tx, torch.tensor(targets), **CROSS_ENTROPY[name])
    if name == "none":
        np.testing.assert_array_equal(loss.numpy()[0], 0.0)
    assert_same(loss, tloss)
    dout = np.ones(loss.shape)
    loss.backward(dout)
    tloss.backward(torch.tensor(dout))
    if not math.isnan(ignored_row[0]) and ignored_row[0] != INF:  # torch's own gradient of a NaN/inf row is NaN
        assert_same(x.grad, tx.grad)
    assert np.isfinite(x.grad.numpy()[1:]).all()
    assert_same(x.grad[1:], tx.grad[1:])


def test_std_of_equal_values_has_a_zero_gradient():
    """mg.tensor([[2., 2., 2.]]).std(1) backward was NaN (torch: 0)."""
    for values, dims in (([[2.0, 2.0, 2.0]], 1), ([[2.0, 2.0], [1.0, 3.0]], 1), ([[5.0, 5.0], [5.0, 5.0]], None)):
        x, tx = pair(values)
        y, ty = (x.std(dims), tx.std(dims)) if dims is not None else (x.std(), tx.std())
        assert_same(y, ty)
        y.backward(np.ones(y.shape))
        ty.backward(torch.ones(ty.shape, dtype=torch.float64))
        assert_same(x.grad, tx.grad)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_with_nan_sends_the_gradient_to_both_as_torch(op):
    """mg.maximum([nan], [1.]) sent no gradient to the NaN input (torch sends it to both)."""
    a, ta = pair([NAN, 1.0, 2.0, 3.0, NAN])
    b, tb = pair([1.0, NAN, 2.0, 0.0, NAN])
    y, ty = getattr(mg, op)(a, b), getattr(torch, op)(ta, tb)
    assert_same(y, ty)
    dout = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    y.backward(dout)
    ty.backward(torch.tensor(dout))
    assert_same(a.grad, ta.grad)
    assert_same(b.grad, tb.grad)


REDUCTIONS_AND_ACTIVATIONS = {
    "amax": (lambda t: t.amax(1), lambda t: t.amax(1)),
    "amin": (lambda t: t.amin(1), lambda t: t.amin(1)),
    "clamp": (lambda t: t.clamp(-1.0, 1.0), lambda t: t.clamp(-1.0, 1.0)),
    "relu": (F.relu, TF.relu),
    "prod": (lambda t: t.prod(1), lambda t: t.prod(1)),
}


@pytest.mark.parametrize("name", REDUCTIONS_AND_ACTIVATIONS)
def test_a_non_finite_upstream_gradient_reaches_only_where_it_should(name):
    """An inf gradient times a 0/1 mask is NaN where the mask is 0: these ops select instead. torch does too, but for
    amax and amin, whose backward multiplies (NaN where x is not the maximum); here those places get 0."""
    mine, theirs = REDUCTIONS_AND_ACTIVATIONS[name]
    x, tx = pair([[0.5, 3.0, -2.0], [4.0, -0.5, 0.25]])
    y, ty = mine(x), theirs(tx)
    dout = np.full(y.shape, INF)
    y.backward(dout)
    ty.backward(torch.tensor(dout))
    expected = tx.grad.numpy()
    if name in ("amax", "amin"):
        assert np.isnan(expected).sum() == 4  # torch's
        expected = np.nan_to_num(expected, nan=0.0, posinf=INF)
    assert not np.isnan(x.grad.numpy()).any()
    assert_same(x.grad, expected)


def test_relu_of_minus_inf_is_zero_and_of_nan_is_nan():
    x, tx = pair([-INF, NAN, INF, -1.0, 2.0])
    assert_same(F.relu(x), TF.relu(tx))
    assert_same(F.relu(x), [0.0, NAN, INF, 0.0, 2.0])


def test_prod_whose_product_overflows_keeps_other_gradients():
    x, tx = pair([[1e200, 1e200, 0.0], [1e200, 1e200, 2.0]])
    y, ty = x.prod(1), tx.prod(1)
    y.backward(np.ones(2))
    ty.backward(torch.ones(2, dtype=torch.float64))
    assert_same(x.grad, tx.grad)


# ---- max and min with a dim: (values, indices) ----

def test_max_with_a_dim_unpacks_into_values_and_indices():
    """The issue's reproduction: `v, i = x.max(dim=1)` unpacked the first two maxima."""
    x, tx = pair([[1.0, 5.0, 3.0], [7.0, 2.0, 7.0]], requires_grad=False)
    v, i = x.max(dim=1)
    tv, ti = tx.max(dim=1)
    assert_same(v, tv)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    v, i = mg.max(x, axis=0)  # NumPy's name too
    assert v.shape == i.shape == (3,)
    assert x.max(1).values is not None and x.min(dim=1, keepdim=True).indices.shape == (2, 1)
    assert x.max().shape == () and x.max().item() == 7.0  # no dim: the value
    with pytest.raises(TypeError, match="max: dim must be one int, got \\(0, 1\\); for values over several dims use "
                                        "amax"):
        x.max(dim=(0, 1))
    np.testing.assert_array_equal(x.amax(dim=(0, 1)).numpy(), 7.0)


# ---- the Python protocols of a tensor ----

def test_a_tensor_iterates_by_rows_and_a_scalar_does_not_iterate():
    """list(mg.tensor(1.0)) was []: now a TypeError, as torch."""
    x, tx = pair([[1.0, 2.0], [3.0, 4.0]], requires_grad=False)
    assert [r.numpy().tolist() for r in x] == [r.numpy().tolist() for r in tx]
    assert len(x) == len(tx) == 2
    for call in (lambda t: list(t), lambda t: len(t), lambda t: iter(t)):
        with pytest.raises(TypeError):
            call(torch.tensor(1.0))
        with pytest.raises(TypeError, match="0-d tensor"):
            call(mg.tensor(1.0))
    rows = list(mg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True))
    (rows[0] * 2 + rows[1]).sum().backward()  # rows are in the graph


def test_one_element_tensors_convert_as_torchs():
    for value in (2.5, -3.0):
        t, tt = mg.tensor(value), torch.tensor(value)
        assert float(t) == float(tt) and int(t) == int(tt) and bool(t) == bool(tt)
        assert f"{t}" == f"{tt}" and f"{t:.3f}" == f"{tt:.3f}" and f"{t:+.1e}" == f"{tt:+.1e}"
    assert f"{mg.tensor([1.5]):.2f}" == "1.50"
    assert int(mg.tensor([7])) == 7 and range(mg.tensor(3))[-1] == 2 and [10, 20, 30][mg.tensor(1)] == 20
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        range(mg.tensor(2.0))
    with pytest.raises(ValueError, match="only a one-element tensor converts"):
        float(mg.tensor([1.0, 2.0]))
    with pytest.raises(TypeError):
        f"{mg.tensor([1.0, 2.0]):.2f}"
    assert f"{mg.tensor([1.0, 2.0])}" == str(mg.tensor([1.0, 2.0]))


def test_np_asarray_of_a_tensor_is_numeric():
    """np.asarray(t) was an object array."""
    t = mg.tensor([[1.0, 2.0]])
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.shape == (1, 2) and np.asarray(torch.tensor([[1.0, 2.0]])).dtype == np.float32
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(np.array([mg.tensor(1.0), mg.tensor(2.0)]), [1.0, 2.0])


def test_membership_as_torch():
    t, tt = mg.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0])
    for value in (2.0, 5, mg.tensor(3.0)):
        assert (value in t) == ((value if not isinstance(value, mg.Tensor) else torch.tensor(value.item())) in tt)
    with pytest.raises(RuntimeError, match="expected a tensor or a number, got str"):
        t.__contains__("a")


# ---- integers beyond int64 ----

@pytest.mark.parametrize("data", [2**70, 2**63, [1, 2**64 - 1], [[1, 2], [3, -(2**63) - 1]]],
                         ids=["2**70", "2**63", "[1, 2**64 - 1]", "nested"])
def test_integers_beyond_int64_are_refused_as_torch_refuses_them(data):
    """mg.tensor(2**70) was an object tensor, 2**63 uint64, [1, 2**64 - 1] rounded to float32."""
    with pytest.raises((ValueError, RuntimeError, OverflowError)):
        torch.tensor(data)
    with pytest.raises(ValueError, match="tensor: overflow: the integer .* does not fit in int64"):
        mg.tensor(data)


def test_integers_within_int64_and_big_ints_among_floats_are_kept():
    assert mg.tensor(2**63 - 1).item() == torch.tensor(2**63 - 1).item()
    assert mg.tensor(-(2**63)).dtype == mg.int64
    assert mg.tensor([1.5, 2**70]).dtype == mg.float32 and torch.tensor([1.5, 2**70]).dtype == torch.float32
    np.testing.assert_allclose((mg.ones(2) * 2**70).numpy(), np.float32(2**70))  # a number with a float tensor


# ---- torch-shaped calls ----

def test_where_of_two_numbers_is_a_tensor_of_their_dtype():
    cond = [True, False]
    for a, b in ((1, 3), (1.0, 3), (True, False), (0.5, 1.5)):
        mine, theirs = mg.where(mg.tensor(cond), a, b), torch.where(torch.tensor(cond), a, b)
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
        assert str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")


@pytest.mark.parametrize("hq, hkv", [(6, 2), (4, 1), (3, 3)])
def test_sdpa_with_grouped_query_heads_matches_torch(hq, hkv):
    rng = np.random.default_rng(hq + hkv)
    q, tq = pair(rng.standard_normal((2, hq, 3, 4)))
    k, tk = pair(rng.standard_normal((2, hkv, 5, 4)))
    v, tv = pair(rng.standard_normal((2, hkv, 5, 2)))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=False, enable_gqa=True)
    tout = TF.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True)
    assert_same(out, tout)
    dout = rng.standard_normal(out.shape)
    out.backward(dout)
    tout.backward(torch.tensor(dout))
    for mine, theirs in ((q, tq), (k, tk), (v, tv)):
        np.testing.assert_allclose(mine.grad, theirs.grad.numpy(), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="enable_gqa: 6 query heads for key"):
        F.scaled_dot_product_attention(q if hq == 6 else q[:, :1].expand(2, 6, 3, 4), k[:, :1].expand(2, 4, 5, 4),
                                       v[:, :1].expand(2, 4, 5, 2), enable_gqa=True)


def test_layernorm_of_a_tuple_shape_matches_torch():
    """nn.LayerNorm((2, 4)) failed; its arguments are torch's, in torch's order."""
    rng = np.random.default_rng(0)
    x, tx = pair(rng.standard_normal((3, 2, 4)))
    mine, theirs = nn.LayerNorm((2, 4), dtype=mg.float64), torch.nn.LayerNorm((2, 4), dtype=torch.float64)
    with mg.no_grad(), torch.no_grad():
        w = rng.standard_normal((2, 4))
        mine.weight.copy_(mg.tensor(w, dtype=mg.float64))
        theirs.weight.copy_(torch.tensor(w))
    assert_same(mine(x), theirs(tx))
    mine(x).sum().backward()
    theirs(tx).sum().backward()
    assert_same(x.grad, tx.grad)
    assert_same(mine.weight.grad, theirs.weight.grad)
    no_affine = nn.LayerNorm(4, 1e-5, False)  # torch's third argument: elementwise_affine
    assert no_affine.weight is None and no_affine.bias is None and not list(no_affine.parameters())
    assert nn.LayerNorm(4, bias=False).bias is None
    with pytest.raises(TypeError):
        nn.Linear(2, 3, True, 0.5)  # std is keyword-only: torch's fourth argument is the device
    with pytest.raises(ValueError, match="normalized_shape must be a positive int or a tuple of them"):
        nn.LayerNorm(())
    with pytest.raises(ValueError, match="Linear: in_features must be an int >= 0, got -1"):
        nn.Linear(-1, 3)
    with pytest.raises(ValueError, match="Embedding: embedding_dim must be an int >= 0, got 2.5"):
        nn.Embedding(4, 2.5)


def test_sgd_default_learning_rate_is_torchs():
    w = mg.tensor([1.0], requires_grad=True)
    assert optim.SGD([w]).param_groups[0]["lr"] == torch.optim.SGD([torch.ones(1, requires_grad=True)]).defaults["lr"]
