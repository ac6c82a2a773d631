"""PyTorch's custom Function protocol through mg.autograd.Function (minigrad/custom_function.py, an adapter around
minigrad's own): staticmethod forward(ctx, *args) / backward(ctx, *grads) on tensors, checked against torch, with
gradcheck, and PyTorch's tutorial polynomial_custom_function.py run under `import minigrad as torch`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these cases compare with it")


def legendre_class(lib):
    """The tutorial's LegendrePolynomial3 (PyTorch's tutorials, BSD-3-Clause), on the library `lib`."""

    class LegendrePolynomial3(lib.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    return LegendrePolynomial3


def polynomial_custom_function(torch, steps: int = 600) -> float:
    """PyTorch's tutorial polynomial_custom_function.py (BSD-3-Clause, Copyright (c) 2017-2022 PyTorch contributors),
    its loop shortened to `steps`: fit sin on [-pi, pi] with a + b P3(c + d x). Returns the final loss."""
    LegendrePolynomial3 = legendre_class(torch)
    dtype = torch.float
    device = torch.device("cpu")
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)
    a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)
    learning_rate = 5e-6
    for _ in range(steps):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    return loss.item()


def test_the_tutorials_legendre_polynomial_trains_to_pytorchs_loss():
    mine, theirs = polynomial_custom_function(mg), polynomial_custom_function(torch)
    assert abs(mine - theirs) <= 1e-4 * theirs and mine < 40  # from 210 at the start, as there


def test_the_node_is_named_as_pytorchs_grad_fn():
    names = [type(legendre_class(lib).apply(lib.ones(2, requires_grad=True)).grad_fn).__name__ for lib in (mg, torch)]
    assert names[0] == names[1] == "LegendrePolynomial3Backward"


def test_gradcheck_works_on_a_pytorch_style_function():
    P3 = legendre_class(mg).apply
    x = mg.tensor(np.random.default_rng(0).standard_normal((2, 3)), dtype=mg.float64, requires_grad=True)
    assert mg.gradcheck(P3, x)


def scaled_class(lib):
    """Two tensors and a number: needs_input_grad per argument, None for the number, two outputs."""

    class ScaledPair(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, k):
            ctx.save_for_backward(x, w)
            ctx.k = k
            ctx.seen = ctx.needs_input_grad
            return x * w * k, (x + w).argmax()

        @staticmethod
        def backward(ctx, dy, dindex):
            x, w = ctx.saved_tensors
            assert dindex is None or not dindex.any()
            return (dy * w * ctx.k if ctx.needs_input_grad[0] else None,
                    dy * x * ctx.k if ctx.needs_input_grad[1] else None, None)

    return ScaledPair


def test_several_inputs_a_number_argument_and_a_non_differentiable_output_as_pytorchs():
    rng = np.random.default_rng(1)
    xv, wv, g = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    results = []
    for lib in (mg, torch):
        x, w = lib.tensor(xv, requires_grad=True), lib.tensor(wv)
        y, index = scaled_class(lib).apply(x, w, 3.0)
        y.backward(lib.tensor(g))
        results.append((y.detach().numpy(), index.item(), index.requires_grad, x.grad.numpy(), w.grad))
    (y, i, i_grad, dx, dw), (ty, ti, ti_grad, tdx, tdw) = results
    np.testing.assert_allclose(y, ty, rtol=1e-6)
    np.testing.assert_allclose(dx, tdx, rtol=1e-6)
    assert (i, i_grad, dw) == (ti, ti_grad, tdw) == (ti, False, None)


def test_needs_input_grad_is_one_per_argument_as_pytorchs():
    seen = []
    for lib in (mg, torch):
        cls = scaled_class(lib)
        original = cls.forward

        def forward(ctx, *args, original=original):
            out = original(ctx, *args)
            seen.append(tuple(ctx.needs_input_grad))
            return out

        cls.forward = staticmethod(forward)
        cls.apply(lib.ones(2), lib.ones(2, requires_grad=True), 2.0)
    assert seen[0] == seen[1] == (False, True, False)


def test_a_gradient_for_a_number_argument_or_the_wrong_count_is_refused():
    class Wrong(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, dy):
            return dy, dy

    class TooFew(Wrong):
        @staticmethod
        def backward(ctx, dy):
            return dy

    x = mg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="argument 1 of forward, which is not a tensor"):
        Wrong.apply(x, 2.0).sum().backward()
    with pytest.raises(RuntimeError, match="returned 1 gradients for 2 arguments"):
        TooFew.apply(x, 2.0).sum().backward()


def test_saved_tensors_are_version_checked_and_freed_as_a_nodes_arrays():
    P3 = legendre_class(mg).apply
    x = mg.tensor([0.5, 1.0], requires_grad=True)
    h = x * 1
    y = P3(h)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()
    y = P3(x * 1)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.sum().backward()


class Once(mg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @mg.autograd.once_differentiable
    def backward(ctx, dy):
        x, = ctx.saved_tensors
        return 2 * x * dy


def test_once_differentiable_runs_once_and_refuses_create_graph_in_one_line():
    x = mg.tensor([3.0], requires_grad=True)
    Once.apply(x).backward()
    assert x.grad.tolist() == [6.0]
    with pytest.raises(RuntimeError, match="Once.backward is marked @once_differentiable") as err:
        mg.autograd.grad(Once.apply(x).sum(), x, create_graph=True)
    assert "\n" not in str(err.value)


def test_double_backward_through_a_pytorch_style_function_is_pytorchs():
    """create_graph=True runs the Function's own backward on tensors of the graph, its saved input back in it."""
    hessians = []
    for lib in (mg, torch):
        x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(legendre_class(lib).apply(x * 1).sum(), x, create_graph=True)
        (h,) = lib.autograd.grad((g * g).sum(), x)
        hessians.append((g.detach().numpy(), h.numpy()))
    np.testing.assert_allclose(hessians[0][0], hessians[1][0], rtol=1e-12)
    np.testing.assert_allclose(hessians[0][1], hessians[1][1], rtol=1e-12)
    x = mg.tensor(np.random.default_rng(2).standard_normal(4), requires_grad=True)
    assert mg.gradgradcheck(legendre_class(mg).apply, x)


def test_mark_dirty_is_refused_once_differentiable_passes_and_minigrads_own_protocol_still_runs():
    class Dirty(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x

        @staticmethod
        @mg.autograd.once_differentiable
        def backward(ctx, dy):
            return dy

    with pytest.raises(NotImplementedError, match="mark_dirty"):
        Dirty.apply(mg.ones(2, requires_grad=True))

    class Square(mg.autograd.Function):  # minigrad's protocol: instance methods on arrays
        def forward(self, x):
            self.x = x
            return x * x

        def backward(self, dout):
            return (2 * self.x * dout,)

    x = mg.tensor([3.0], requires_grad=True)
    Square.apply(x).backward(mg.tensor([1.0]))
    assert x.grad.tolist() == [6.0] and not Square.torch_style and mg.Function is not mg.autograd.Function


def test_save_for_backward_takes_tensors_only_as_pytorchs():
    for lib in (mg, torch):
        class SaveNumber(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(3)
                return x * 1

            @staticmethod
            def backward(ctx, dy):
                return dy

        with pytest.raises(TypeError, match="save_for_backward"):
            SaveNumber.apply(lib.ones(1, requires_grad=True))
