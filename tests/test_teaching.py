"""What a learner reaches for: intermediate gradients (retain_grad), gradient hooks (register_hook),
activation layers for nn.Sequential, and clear errors from a hand-written Function (a backward that returns a bare
array or a broadcast gradient, an option given by position). Expected gradients come from calculus by hand, and from
PyTorch where it is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.array import backend
from minigrad.nn import functional as F


def grad(t: mg.Tensor) -> np.ndarray:
    assert t.grad is not None, f"tensor of shape {t.shape} got no gradient"
    return t.grad.numpy()


# ---- retain_grad ----

def test_retain_grad_keeps_an_intermediate_gradient(rand) -> None:
    x, w = rand(2, 3), rand(2, 3)
    h = x * w
    h.retain_grad()
    h.tanh().sum().backward()
    th = np.tanh(x.numpy() * w.numpy())
    np.testing.assert_allclose(grad(h), 1 - th**2, rtol=1e-12)  # d sum(tanh h) / dh
    np.testing.assert_allclose(grad(x), (1 - th**2) * w.numpy(), rtol=1e-12)


def test_intermediate_without_retain_grad_has_no_grad(rand) -> None:
    x = rand(3)
    h = x * 2.0
    (h * h).sum().backward()
    assert h.grad is None  # as in PyTorch: only leaves and retained tensors keep a gradient


def test_retained_gradient_of_a_tensor_used_twice_is_the_sum(rand) -> None:
    x = rand(4)
    h = x.exp()
    h.retain_grad()
    (h * h + h * 3.0).sum().backward()  # d/dh = 2h + 3
    np.testing.assert_allclose(grad(h), 2 * np.exp(x.numpy()) + 3, rtol=1e-12)


def test_retain_grad_on_the_root_and_across_backward_calls(rand) -> None:
    x = rand(2, 2)
    y = (x * 3.0).sum()
    y.retain_grad()
    y.backward(retain_graph=True)
    y.backward()
    assert type(y.grad.array) in backend.ARRAY_TYPES and y.grad.shape == ()  # an array, not a NumPy scalar
    np.testing.assert_allclose(grad(y), 2.0)  # accumulated like a leaf's: 1 + 1
    np.testing.assert_allclose(grad(x), np.full((2, 2), 6.0))


def test_retain_grad_twice_stores_once(rand) -> None:
    x = rand(3)
    h = x * 2.0
    h.retain_grad()
    h.retain_grad()
    h.sum().backward()
    np.testing.assert_allclose(grad(h), np.ones(3))


def test_retain_grad_on_a_leaf_changes_nothing(rand) -> None:
    x = rand(3)
    x.retain_grad()
    (x * 5.0).sum().backward()
    np.testing.assert_allclose(grad(x), np.full(3, 5.0))


def test_retain_grad_of_a_tensor_without_grad_is_refused(rand) -> None:
    with pytest.raises(RuntimeError, match=r"retain_grad: this tensor of shape \(3,\) does not require grad"):
        rand(3, requires_grad=False).retain_grad()


def test_retained_grad_is_its_own_array(rand) -> None:
    x = rand(3)
    h = x * 1.0
    h.retain_grad()
    h.backward(np.ones(3))
    h.grad[0] = 100.0
    np.testing.assert_allclose(grad(x), np.ones(3))  # the leaf's gradient does not share memory with h's


# ---- register_hook ----

def test_hook_on_a_leaf_sees_the_total_gradient_once(rand, device) -> None:
    x = rand(3)
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    (x * x + x * 2.0).sum().backward()  # two uses of x: the hook sees their sum, 2x + 2
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], 2 * x.numpy() + 2, rtol=1e-12)
    np.testing.assert_allclose(grad(x), seen[0], rtol=1e-12)


def test_hook_on_a_leaf_can_replace_its_gradient(rand, device) -> None:
    x = rand(3)
    x.register_hook(lambda g: g * 10.0)
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(grad(x), np.full(3, 20.0))


def test_hook_on_an_intermediate_changes_what_flows_back(rand, device) -> None:
    x = rand(2, 3)
    h = x.exp()
    h.register_hook(lambda g: g * 0.0 + 1.0)  # pretend d loss / dh is 1 everywhere
    (h * h).sum().backward()  # the real d loss / dh would be 2h
    np.testing.assert_allclose(grad(x), np.exp(x.numpy()), rtol=1e-12)  # 1 * dh/dx


def test_hooks_run_in_order_and_retain_grad_sees_the_result(rand) -> None:
    x = rand(3)
    h = x * 1.0
    h.retain_grad()  # registered first, yet .grad shows the gradient after the hooks (as PyTorch)
    calls = []
    h.register_hook(lambda g: calls.append("double") or g * 2.0)
    h.register_hook(lambda g: calls.append("plus one") or g + 1.0)
    h.sum().backward()
    assert calls == ["double", "plus one"]
    np.testing.assert_allclose(grad(h), np.full(3, 3.0))
    np.testing.assert_allclose(grad(x), np.full(3, 3.0))


def test_hooks_on_the_outputs_of_a_split(rand) -> None:
    x = rand(3, 4)
    a, b = x.split(2, dim=1)  # one node with two outputs
    a.retain_grad()
    b.register_hook(lambda g: g * 0.0)
    ((a * a).sum() + (b * 3.0).sum()).backward()
    np.testing.assert_allclose(grad(a), 2 * x.numpy()[:, :2], rtol=1e-12)
    np.testing.assert_allclose(grad(x), np.concatenate([2 * x.numpy()[:, :2], np.zeros((3, 2))], axis=1), rtol=1e-12)


def test_hook_that_keeps_its_argument_is_not_overwritten(rand) -> None:
    x = rand(3)
    kept = []
    x.register_hook(kept.append)
    (x * 2.0).sum().backward()
    (x * 5.0).sum().backward()  # accumulates into x.grad, which must not be the array the hook kept
    np.testing.assert_allclose(kept[0].numpy(), np.full(3, 2.0))
    np.testing.assert_allclose(grad(x), np.full(3, 7.0))


def test_hook_returning_a_wrong_shape_is_refused(rand) -> None:
    x = rand(2, 3)
    x.register_hook(lambda g: g.sum(axis=0))
    with pytest.raises(RuntimeError, match=r"returned ndarray \(3,\) float64 for a gradient of shape \(2, 3\)"):
        (x * 2.0).sum().backward()


def test_hook_on_a_tensor_without_grad_is_refused(rand) -> None:
    with pytest.raises(RuntimeError, match=r"register_hook: this tensor of shape \(2,\) does not require grad"):
        rand(2, requires_grad=False).register_hook(print)


def test_hooks_and_retain_grad_match_pytorch(rand) -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")
    x, w1, w2 = rand(4, 3), rand(3, 5), rand(5, 2)
    dy = np.random.default_rng(1).standard_normal((4, 2))

    def run(x, w1, w2):  # the same lines for minigrad and torch tensors
        h = x @ w1
        a = h.tanh()
        y = a @ w2
        for t in (h, a):
            t.retain_grad()
        a.register_hook(lambda g: g * 0.5)
        return y, h, a

    y, h, a = run(x, w1, w2)
    y.backward(dy)
    tx, tw1, tw2 = (torch.tensor(t.numpy(), requires_grad=True) for t in (x, w1, w2))
    ty, th, ta = run(tx, tw1, tw2)
    ty.backward(torch.from_numpy(dy))
    for ours, theirs in ((h, th), (a, ta), (x, tx), (w1, tw1), (w2, tw2)):
        np.testing.assert_allclose(grad(ours), theirs.grad.numpy(), rtol=1e-10, atol=1e-12)


# ---- activation layers ----

def test_sequential_mlp_with_gelu_and_relu(rand) -> None:
    mg.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).to(mg.float64)
    assert [name for name, _ in mlp.named_parameters()] == [
        "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    x = rand(3, 4)
    mlp.to(x.device)
    first, _, second, _, last = mlp
    expected = F.linear(F.relu(F.linear(F.gelu(F.linear(x, first.weight, first.bias)), second.weight, second.bias)),
                        last.weight, last.bias)
    np.testing.assert_array_equal(mlp(x).numpy(), expected.numpy())
    mg.gradcheck(lambda x, *params: mlp(x), x, *mlp.parameters())


def test_gelu_layer_takes_the_tanh_form_and_refuses_others(rand) -> None:
    x = rand(2, 5)
    np.testing.assert_array_equal(nn.GELU("tanh")(x).numpy(), F.gelu(x, approximate="tanh").numpy())
    assert not np.array_equal(nn.GELU()(x).numpy(), nn.GELU("tanh")(x).numpy())
    with pytest.raises(ValueError, match="GELU: approximate must be 'none' or 'tanh', got 'fast'"):
        nn.GELU("fast")


# ---- a hand-written backward that returns the wrong thing ----

class _Square(mg.Function):
    def forward(self, x):
        self.x = x
        return x * x


def test_backward_returning_a_bare_array_names_the_mistake(rand) -> None:
    class Square(_Square):
        def backward(self, dout):
            return 2 * self.x * dout  # should be (2 * self.x * dout,)

    with pytest.raises(TypeError, match=r"Square.backward returned ndarray instead of a tuple .*`return \(dx,\)`"):
        Square.apply(rand(2, 3)).sum().backward()


def test_backward_returning_too_few_gradients_names_the_counts(rand) -> None:
    class Mul(mg.Function):
        def forward(self, a, b):
            return a * b

        def backward(self, dout):
            return (dout,)

    with pytest.raises(TypeError, match="Mul.backward returned 1 gradients for 2 inputs"):
        Mul.apply(rand(3), rand(3)).sum().backward()


def test_an_option_passed_by_position_is_named_as_an_option(rand) -> None:
    """Function.apply takes tensors by position and options by keyword: a number there is named as an option,
    an array as an array to wrap."""
    class Scale(mg.Function):
        def forward(self, x, factor):
            self.factor = factor
            return x * factor

        def backward(self, dout):
            return (dout * self.factor,)

    x = rand(3)
    with pytest.raises(TypeError, match=r"^scale: input 1 is a float \(0.5\), not a tensor; options are keyword "
                                        r"arguments: Scale.apply\(x, name=0.5\) calls forward\(x.array, name=0.5\)"):
        Scale.apply(x, 0.5)
    with pytest.raises(TypeError, match=r"^scale: input 0 is a ndarray, not a tensor; wrap it with mg.tensor\(\)"):
        Scale.apply(x.numpy(), factor=0.5)
    Scale.apply(x, factor=0.5).sum().backward()
    np.testing.assert_array_equal(grad(x), np.full(3, 0.5))


def test_a_gradient_left_broadcast_says_to_sum_it_back(rand) -> None:
    """A custom Function whose inputs broadcast sums each gradient back to its input's shape itself."""
    class AddBias(mg.Function):
        def forward(self, x, b):
            return x + b

        def backward(self, dout):
            return dout, dout  # db should be dout summed over the rows

    with pytest.raises(RuntimeError, match=r"AddBias.backward returned a gradient of shape \(2, 3\) and dtype float64 "
                                           r"for an input of shape \(3,\) .*summed back to its shape"):
        AddBias.apply(rand(2, 3), rand(3)).sum().backward()
