"""PyTorch's custom Function protocol through mg.autograd.Function (minigrad/autograd/custom_function.py, an adapter
around minigrad's own): staticmethod forward(ctx, *args) / backward(ctx, *grads) on tensors, checked against torch, with
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


# ---- ctx keeps what the user stores (issue 44, item 2) ----

# names a Function's forward may well store on ctx, some of which the engine once used for its own bookkeeping
CTX_NAMES = ["shape", "dtype", "outputs", "saved", "parents", "n_outputs", "fn", "versions", "freed", "saved_as",
             "saved_indices", "is_tensor", "unpacked", "index", "view", "op", "backward_hooks", "node"]


def keeping_class(lib, name, n_outputs):
    """A Function whose forward stores (x.shape, x.dtype) as ctx.<name>, which its backward then needs."""

    class Keeps(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            setattr(ctx, name, (x.shape, x.dtype))
            ctx.save_for_backward(x)
            cube = (x**3).sum()  # of shape (): the node's output, whose shape the engine needs for its checks
            return (cube, x.reshape(-1) * 2) if n_outputs == 2 else cube

        @staticmethod
        def backward(ctx, dcube, *dflat):
            shape, dtype = getattr(ctx, name)
            x, = ctx.saved_tensors
            dx = 3 * x**2 * dcube.expand(*shape)
            return (dx + dflat[0].reshape(shape) * 2 if dflat else dx).to(dtype)

    return Keeps


@pytest.mark.parametrize("n_outputs", [1, 2])
@pytest.mark.parametrize("name", CTX_NAMES)
def test_ctx_keeps_what_forward_stores_under_any_name_as_pytorchs(name, n_outputs):
    """ctx.shape = x.shape (and every other name here) survives to backward and stays on y.grad_fn; first and second
    derivatives are PyTorch's, in float64."""
    rng = np.random.default_rng(0)
    x0, r = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    results = []
    for lib in (mg, torch):
        x = lib.tensor(x0, requires_grad=True)
        out = keeping_class(lib, name, n_outputs).apply(x)
        node = (out[0] if n_outputs == 2 else out).grad_fn
        if n_outputs == 2:
            node = node.mg_parents[0] if lib is mg else node  # minigrad: the edge to output 0, then the node
        assert getattr(node, name) == ((2, 3), x.dtype)
        loss = out[0] + (out[1] * lib.tensor(r.reshape(-1))).sum() if n_outputs == 2 else out
        (dx,) = lib.autograd.grad(loss, x, create_graph=True)
        (ddx,) = lib.autograd.grad((dx * lib.tensor(r)).sum(), x)
        results.append([dx.detach().numpy(), ddx.numpy()])
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12)


def reversal_class(lib, same_tensor):
    """A gradient-reversal layer: forward returns its input as a view (x.view_as(x)), or the input itself."""

    class GradReverse(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x if same_tensor else x.view_as(x)

        @staticmethod
        def backward(ctx, dy):
            return -dy

    return GradReverse


@pytest.mark.parametrize("same_tensor", [False, True], ids=["x.view_as(x)", "x itself"])
def test_an_output_in_the_inputs_memory_refuses_an_in_place_write_as_pytorchs(same_tensor):
    """Written in place where recorded, such an output would change its input behind a node that saved it: refused,
    as PyTorch refuses. Under no_grad the write passes and counts in the input's version, so a node that saved the
    input refuses its backward, as PyTorch's does."""
    for lib in (mg, torch):
        x = lib.tensor([1.0, -2.0], dtype=lib.float64, requires_grad=True)
        h = x * 1
        y = reversal_class(lib, same_tensor).apply(h)
        assert (-y).sum().item() == -h.sum().item()  # the values forward gave
        with pytest.raises(RuntimeError, match="(?i)output 0 of GradReverse"):
            y.mul_(2)
        square = h * h
        with lib.no_grad():
            y.mul_(2)
        assert h.tolist() == [2.0, -4.0] and h._version == y._version == 1
        with pytest.raises(RuntimeError, match="modified by an in-?place operation"):
            square.sum().backward()


def test_the_gradient_reversal_layer_reverses_the_gradient_as_pytorchs():
    grads = []
    for lib in (mg, torch):
        x = lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64, requires_grad=True)
        (reversal_class(lib, False).apply(x * x) * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


def test_a_function_in_minigrads_protocol_keeps_what_it_stores_on_self_too():
    """self.shape = ..., self.parents = ... in forward(self, *arrays): the engine's names (mg_...) leave them alone."""

    class SumRows(mg.autograd.Function):
        def forward(self, x):
            self.shape, self.parents, self.dtype = x.shape, "mine", x.dtype
            return x.sum(axis=0)

        def backward(self, dout):
            assert self.parents == "mine"
            return (np.broadcast_to(dout, self.shape).astype(self.dtype),)

    x0 = np.arange(6.0).reshape(2, 3)
    x = mg.tensor(x0, requires_grad=True)
    r = np.array([1.0, -2.0, 3.0])
    SumRows.apply(x).backward(mg.tensor(r))
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(r, (2, 3)))
