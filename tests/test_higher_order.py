"""Gradients of gradients (create_graph=True, issue 39): every row of the gradcheck table gets the same gradient from
its one backward formula run on tensors (create_graph=True) as run on arrays, and passes gradgradcheck; second
derivatives of every primitive against PyTorch's; PyTorch's own test_hessian_vector, test_grad, test_grad_nonleaf and
the create_graph half of test_accumulate_grad, ported; hooks, retain_grad, version checks, mg.compiled(), mg.fused()
and the CuPy stand-in.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad.check.gradcheck_cases import CASES, Case
from minigrad.nn import functional as F

# ---- the gradcheck table: two formulas that must agree, and second derivatives by finite differences ----

# The rows with no second derivative: their gradient does not depend on their inputs (linear or piecewise linear
# ops, those that only move or pick values, and softmax of one element, a constant), so it is zero wherever it exists
# and gradgradcheck has only the gradient's dependence on dout to check (the test below checks the list).
NO_SECOND_DERIVATIVE = {
    "scatter_add repeated places", "index_add",
    "add", "add broadcast", "add scalar tensor", "add trailing", "sub broadcast", "sub x - x", "mul python scalar",
    "neg", "sum all", "sum axis 0", "sum axes (0, 2) keepdims", "mean all", "mean axis 1", "mean axis -1 keepdims",
    "max all", "amax axis 1", "amax axes (0, 2) keepdims", "max dim 1 values", "max dim 0 keepdim values", "reshape",
    "reshape -1", "permute", "transpose two dims", "transpose .T", "swapaxes", "broadcast_to", "getitem slices",
    "getitem int and None", "getitem repeated ints", "getitem columns", "softmax of a scalar",
    "log_softmax of a scalar",
    "masked_fill broadcast mask", "masked_fill row mask", "embedding repeated indices", "relu", "dropout", "cat dim 1",
    "cat three", "leaky_relu", "leaky_relu slope 0.2", "abs", "maximum broadcast", "maximum batched",
    "maximum python scalar", "minimum broadcast", "where broadcast", "where batched", "where python scalar", "clamp",
    "clamp min only", "clip max only", "min all", "amin axis 1", "amin axes (0, 2) keepdims", "min dim 1 values",
    "min dim 0 keepdim values", "cumsum axis 0", "cumsum axis -1", "cumsum axis 1", "stack dim 1",
    "stack dim -1 batched", "squeeze all", "squeeze dims", "expand", "flatten", "flatten middle", "unflatten",
    "flip two dims", "flip last dim", "tril batched", "tril diagonal -1", "triu diagonal 1", "repeat",
    "repeat new axis", "gather dim 1 repeated", "gather dim 0 smaller index",
}


def gradients(case: Case, upstream: np.ndarray, create_graph: bool, device: str = "cpu"):
    inputs = case.inputs(device)
    out = case.fn(*inputs)
    v = mg.tensor(upstream, device=device)
    return inputs, mg.autograd.grad(out, inputs, v, create_graph=create_graph, materialize_grads=True)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_graph_backward_equals_array_backward(case: Case, device: str) -> None:
    """The formula of create_graph=True and the array backward give one gradient on the same inputs."""
    with mg.no_grad():
        shape = case.fn(*case.inputs(device)).shape
    upstream = np.random.default_rng(1).standard_normal(shape)
    _, plain = gradients(case, upstream, False, device)
    _, graph = gradients(case, upstream, True, device)
    for i, (a, b) in enumerate(zip(plain, graph, strict=True)):
        assert b.shape == a.shape and b.dtype == a.dtype and b.device == a.device
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-10, atol=1e-12, err_msg=f"input {i}")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gradgradcheck_table(case: Case) -> None:
    result = mg.gradgradcheck(case.fn, *case.inputs())
    assert result.passed and len(result.inputs) == len(case.shapes) + 1  # every input, and the upstream gradient


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_second_derivatives_are_zero_exactly_for_the_named_rows(case: Case) -> None:
    """A row named in NO_SECOND_DERIVATIVE has a gradient that no input reaches; every other row's does."""
    with mg.no_grad():
        shape = case.fn(*case.inputs()).shape
    inputs, grads = gradients(case, np.random.default_rng(1).standard_normal(shape), True)
    direction = [mg.tensor(np.random.default_rng(2 + i).standard_normal(g.shape)) for i, g in enumerate(grads)]
    total = sum(((g * u).sum() for g, u in zip(grads, direction, strict=True)), mg.tensor(0.0, dtype=mg.float64))
    second = [] if not total.requires_grad else \
        mg.autograd.grad(total, inputs, allow_unused=True, materialize_grads=True)
    largest = max((float(np.abs(h.numpy()).max(initial=0)) for h in second), default=0.0)
    if case.name in NO_SECOND_DERIVATIVE:
        assert largest == 0, f"{case.name}: second derivative {largest}"
    else:
        assert largest > 1e-6, f"{case.name}: no second derivative found; name it in NO_SECOND_DERIVATIVE"


def test_the_named_rows_are_rows_of_the_table() -> None:
    assert NO_SECOND_DERIVATIVE <= {c.name for c in CASES}


# ---- every primitive's second derivatives against PyTorch's ----

_T = np.array([[1, 0, 4], [2, 2, 3]])
_MASK = np.array([[True, False, False, True], [False, True, False, False], [False, False, True, True]])
_ZEROS = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])  # one zero, two, none
_IDX = np.array([[0, 0, 3], [1, 2, 1], [3, 3, 3]])

# (name, f(m, F, T, *inputs) for m = mg or torch, F its functional, T its tensor(), input shapes, positive inputs)
TORCH_TABLE = [
    ("add mul sub", lambda m, F, T, a, b: (a + b) * (a - b) * a, ((3, 1), (1, 4)), False),
    ("div", lambda m, F, T, a, b: a / b, ((2, 3), (3,)), True),
    ("pow tensor exponent", lambda m, F, T, a, b: a**b, ((3, 1), (1, 4)), True),
    ("pow scalar exponent", lambda m, F, T, a: a**3, ((2, 3),), False),
    ("exp log sqrt", lambda m, F, T, x: x.exp() + x.log() + x.sqrt(), ((2, 3),), True),
    ("tanh sigmoid", lambda m, F, T, x: x.tanh() * x.sigmoid(), ((2, 3),), False),
    ("rsqrt", lambda m, F, T, x: x.rsqrt(), ((2, 3),), True),
    ("sin cos erf erfc", lambda m, F, T, x: x.sin() * x.cos() + x.erf() * x.erfc(), ((2, 3),), False),
    ("prod with a zero", lambda m, F, T, x: (x * T(_ZEROS)).prod(1), ((3, 4),), False),
    ("abs maximum minimum", lambda m, F, T, a, b: (m.maximum(a, b) * m.minimum(a, b) * a.abs()), ((3, 4), (4,)),
     False),
    ("where clamp masked_fill", lambda m, F, T, a, b: m.where(T(_MASK), a, b) * a.clamp(min=-0.5, max=0.7)
     * a.masked_fill(T(_MASK), 0.0), ((3, 4), (3, 4)), False),
    ("sum mean", lambda m, F, T, x: x.sum(1, keepdim=True) * x.mean(0) * x, ((2, 3, 4),), False),
    ("amax", lambda m, F, T, x: x.amax(1) * x.sum(1), ((2, 3, 4),), False),
    ("var std", lambda m, F, T, x: x.var(1) * x.std(-1, keepdim=True).sum(1), ((2, 3, 4),), False),
    ("prod", lambda m, F, T, x: x.prod(1), ((3, 4),), False),
    ("logsumexp cumsum", lambda m, F, T, x: x.logsumexp(1) * x.cumsum(1).sum(1), ((2, 3, 4),), False),
    ("reshape permute transpose", lambda m, F, T, x: (x.reshape(4, 6).T @ x.permute(2, 0, 1).reshape(4, 6)).sum(0)
     * x.transpose(0, 2).reshape(4, 6), ((2, 3, 4),), False),
    ("log10 log2 log1p expm1", lambda m, F, T, x: x.log10() * x.log2() + x.log1p() * x.expm1(), ((2, 3),), True),
    ("scatter_add index_add", lambda m, F, T, a, b: m.scatter_add(a * a, 1, T(_IDX), (b * b)[:, :3])
     * m.index_add(a, 0, T(np.array([2, 0, 2])), b * a, alpha=0.5), ((3, 4), (3, 4)), False),
    ("getitem gather", lambda m, F, T, x: x[1:, ::2] * x[T(np.array([0, 2, 1]))][:2, ::2]
     * x.gather(1, T(_IDX))[:2, :2], ((3, 4),), False),
    ("cat stack split", lambda m, F, T, a, b: m.cat([a * b, a], 1) * m.stack([b, a], 1).reshape(2, 6)
     * m.cat(list(m.split(a * a, [1, 2], 1)), 1).repeat(1, 2), ((2, 3), (2, 3)), False),
    ("expand repeat flip tril", lambda m, F, T, a: a.expand(2, 3, 4) * a.repeat(2, 3, 1).flip(0)[:, :3]
     * m.tril(a * a.T.sum()), ((3, 4),), False),
    ("matmul batched", lambda m, F, T, a, b: (a @ b) * (a @ b), ((2, 3, 4), (4, 5)), False),
    ("linear", lambda m, F, T, x, w, b: F.linear(x, w, b) ** 2, ((2, 3, 4), (5, 4), (5,)), False),
    ("softmax", lambda m, F, T, x: F.softmax(x, dim=1), ((2, 4, 3),), False),
    ("log_softmax", lambda m, F, T, x: F.log_softmax(x, dim=-1), ((2, 3, 5),), False),
    ("gelu tanh", lambda m, F, T, x: F.gelu(x, approximate="tanh"), ((2, 3, 4),), False),
    ("gelu exact", lambda m, F, T, x: F.gelu(x), ((2, 3, 4),), False),
    ("relu leaky_relu silu", lambda m, F, T, x: F.relu(x) * F.leaky_relu(x, 0.2) + F.silu(x), ((3, 4),), False),
    ("layer_norm", lambda m, F, T, x, w, b: F.layer_norm(x, (6,), w, b), ((2, 3, 6), (6,), (6,)), False),
    ("layer_norm no affine", lambda m, F, T, x: F.layer_norm(x, (5,)), ((4, 5),), False),
    ("rms_norm", lambda m, F, T, x, w: F.rms_norm(x, (6,), w, eps=1e-5), ((2, 3, 6), (6,)), False),
    ("sdpa causal", lambda m, F, T, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     ((2, 4, 3), (2, 4, 3), (2, 4, 5)), False),
    ("sdpa float mask", lambda m, F, T, q, k, v, mask: F.scaled_dot_product_attention(q, k, v, mask, scale=0.3),
     ((2, 3, 4), (2, 5, 4), (2, 5, 2), (3, 5)), False),
    ("cross_entropy smoothing", lambda m, F, T, x: F.cross_entropy(x.reshape(6, 5), T(_T).reshape(6),
                                                                  label_smoothing=0.2), ((2, 3, 5),), False),
    ("cross_entropy probabilities", lambda m, F, T, x, p: F.cross_entropy(x, p, reduction="sum"), ((4, 5), (4, 5)),
     False),
    ("nll_loss of log_softmax", lambda m, F, T, x: F.nll_loss(F.log_softmax(x, -1), T(_T[0])), ((3, 5),), False),
    ("mse_loss", lambda m, F, T, x, y: F.mse_loss(x * x, y), ((3, 4), (3, 4)), False),
    ("bce_with_logits", lambda m, F, T, x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=T(_MASK[0] + 0.5)),
     ((3, 4), (3, 4)), False),
    ("embedding", lambda m, F, T, w: F.embedding(T(_T), w) ** 2, ((5, 3),), False),
]


@pytest.mark.parametrize("name, fn, shapes, positive", TORCH_TABLE, ids=[row[0] for row in TORCH_TABLE])
def test_second_derivatives_match_pytorch(name, fn, shapes, positive) -> None:
    """H u for a random direction u and upstream gradient v, H the Hessian of sum(f(x) * v), and the gradients
    themselves, against torch.autograd.grad with create_graph=True, in float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    values = [rng.uniform(0.5, 2.0, s) if positive else rng.standard_normal(s) for s in shapes]

    def run(m, functional, as_tensor):
        xs = [as_tensor(v.copy()) for v in values]
        for x in xs:
            x.requires_grad_()
        out = fn(m, functional, as_tensor, *xs)
        v = as_tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)))
        grads = m.autograd.grad(out, xs, v, create_graph=True)
        total = sum((g * as_tensor(np.random.default_rng(2 + i).standard_normal(tuple(g.shape)))).sum()
                    for i, g in enumerate(grads))
        second = m.autograd.grad(total, xs, allow_unused=True, materialize_grads=True)
        return [g.detach().numpy() for g in grads], [h.detach().numpy() for h in second]

    grads, second = run(mg, F, mg.tensor)
    torch_grads, torch_second = run(torch, torch.nn.functional, torch.tensor)
    for i, (a, b) in enumerate(zip(grads + second, torch_grads + torch_second, strict=True)):
        assert a.shape == b.shape, f"{name}: result {i} of shape {a.shape}, PyTorch's {b.shape}"
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11, err_msg=f"{name}: result {i}")


# ---- PyTorch's own tests (test/test_autograd.py), in our words ----

def _xy():
    rng = np.random.default_rng(0)
    return (mg.tensor(rng.standard_normal((2, 2)), requires_grad=True),
            mg.tensor(rng.standard_normal((2, 2)), requires_grad=True))


def test_hessian_vector() -> None:
    """backward(create_graph=True), then backward of an expression of the gradients: .grad adds the Hessian-vector
    product to the gradients."""
    x, y = _xy()
    z = x**2 + y * x + y**2
    z.backward(mg.ones(2, 2, dtype=mg.float64), create_graph=True)
    with mg.no_grad():
        x_grad, y_grad = 2 * x + y, x + 2 * y
    np.testing.assert_allclose(x.grad.numpy(), x_grad.numpy())
    np.testing.assert_allclose(y.grad.numpy(), y_grad.numpy())
    grad_sum = 2 * x.grad + y.grad
    grad_sum.backward(mg.ones(2, 2, dtype=mg.float64))
    np.testing.assert_allclose(x.grad.numpy(), (x_grad + 5).numpy())  # d(grad_sum)/dx = 2 * 2 + 1
    np.testing.assert_allclose(y.grad.numpy(), (y_grad + 4).numpy())  # d(grad_sum)/dy = 2 * 1 + 2


def test_grad() -> None:
    """mg.autograd.grad of an expression of .grad: the Hessian-vector product, .grad untouched; grad_outputs of
    another shape refused."""
    x, y = _xy()
    z = x**2 + y * x + y**2
    z.backward(mg.ones(2, 2, dtype=mg.float64), create_graph=True)
    x_grad, y_grad = (2 * x + y).detach(), (x + 2 * y).detach()
    grad_sum = 2 * x.grad + y.grad
    x_hv, = mg.autograd.grad(grad_sum, [x], grad_outputs=[mg.ones(2, 2, dtype=mg.float64)], create_graph=True)
    np.testing.assert_allclose(x_hv.numpy(), np.full((2, 2), 5.0))
    np.testing.assert_allclose(x.grad.numpy(), x_grad.numpy())
    np.testing.assert_allclose(y.grad.numpy(), y_grad.numpy())
    with pytest.raises(ValueError, match=r"gradient of shape \(2,\) for a tensor of shape \(2, 2\)"):
        mg.autograd.grad(grad_sum, [x], grad_outputs=[mg.ones(2, dtype=mg.float64)], create_graph=True)


def test_grad_nonleaf() -> None:
    """Gradient ascent through create_graph=True, each step's x computed from the last: the leaves' .grad untouched
    until the final backward, which reaches x_init through every step."""
    x_init, y = _xy()
    x = x_init
    grad_output = mg.ones(2, 2, dtype=mg.float64)

    def fn(x):
        return x**2 + y * x + y**2

    for _ in range(5):
        grad_x, = mg.autograd.grad(fn(x), x, grad_outputs=grad_output, create_graph=True)
        assert y.grad is None and x.grad is None
        np.testing.assert_allclose(grad_x.numpy(), (2 * x + y).numpy())
        x = x + 0.05 * grad_x
    assert fn(x).sum().item() > fn(x_init).sum().item()
    x.backward(grad_output)
    assert y.grad is not None and x_init.grad is not None


def test_accumulate_grad_out_of_place_with_create_graph() -> None:
    """A second backward adds into .grad in place (the tensor held before sees it), except with create_graph=True,
    where .grad becomes a new tensor (the one held before keeps its values), as PyTorch's."""
    def compute_grad(create_graph):
        x = mg.tensor(np.random.default_rng(0).standard_normal((5, 5)), requires_grad=True)
        y = x + 2
        y.backward(mg.ones(5, 5, dtype=mg.float64), retain_graph=True)
        x_grad = x.grad
        x_grad_clone = x.grad.clone()
        y.backward(mg.ones(5, 5, dtype=mg.float64), create_graph=create_graph)
        return x, x_grad, x_grad_clone

    x, x_grad, x_grad_clone = compute_grad(create_graph=False)
    np.testing.assert_allclose(x_grad.numpy(), x_grad_clone.numpy() * 2)
    x, x_grad, x_grad_clone = compute_grad(create_graph=True)
    np.testing.assert_allclose(x_grad.numpy(), x_grad_clone.numpy())
    assert x.grad is not x_grad
    np.testing.assert_allclose(x.grad.numpy(), x_grad_clone.numpy() * 2)


# ---- the contract around it ----

def test_grad_of_grad_to_the_fourth_order() -> None:
    x = mg.tensor(0.7, dtype=mg.float64, requires_grad=True)
    y = x.sin() * x.exp()
    derivatives = []
    for _ in range(4):
        y, = mg.autograd.grad(y, x, create_graph=True)
        derivatives.append(y.item())
    s, c, e = np.sin(0.7), np.cos(0.7), np.exp(0.7)
    np.testing.assert_allclose(derivatives, [e * (s + c), 2 * e * c, 2 * e * (c - s), -4 * e * s])


def test_retain_graph_defaults_to_create_graph() -> None:
    x = mg.tensor([1.0, 2.0], dtype=mg.float64, requires_grad=True)
    y = (x.exp() * x).sum()
    mg.autograd.grad(y, x, create_graph=True)
    mg.autograd.grad(y, x)  # the graph was kept: runs again, and frees it this time
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        mg.autograd.grad(y, x)


def test_a_gradient_without_any_graph_behind_it_is_a_plain_tensor() -> None:
    x = mg.tensor([1.0, 2.0], dtype=mg.float64, requires_grad=True)
    (3 * x).sum().backward(create_graph=True)  # d/dx = 3: a constant
    assert not x.grad.requires_grad
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_hooks_and_retain_grad_see_the_gradient_s_graph() -> None:
    torch = pytest.importorskip("torch")

    def run(m, as_tensor):
        x = as_tensor(np.array([0.5, -1.0, 2.0]))
        x.requires_grad_()
        h = x * x
        h.retain_grad()
        seen = []
        h.register_hook(lambda g: seen.append(g.requires_grad) or g * h)  # replaced by a gradient in the graph
        h.sin().sum().backward(create_graph=True)
        found = (list(seen), h.grad.requires_grad, h.grad.detach().numpy().copy(), x.grad.detach().numpy().copy())
        second, = m.autograd.grad(x.grad.sum(), x)
        return (*found, second.numpy())

    ours, theirs = run(mg, mg.tensor), run(torch, torch.tensor)
    assert ours[:2] == theirs[:2] == ([True], True)
    for a, b in zip(ours[2:], theirs[2:], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_write_between_the_two_backwards_is_refused() -> None:
    """The gradient's graph goes back through exp's node, which kept its output: written since, refused, as in
    PyTorch. (Where PyTorch's second formula keeps an array that ours does not, ours goes on, with the right values.)"""
    torch = pytest.importorskip("torch")
    for m, as_tensor in ((mg, mg.tensor), (torch, torch.tensor)):
        x = as_tensor(np.array([1.0, 2.0]))
        x.requires_grad_()
        y = x.exp()
        g, = m.autograd.grad(y.sum(), x, create_graph=True)  # exp(x), computed by exp's node
        y.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation|modified by an in-place operation"):
            g.sum().backward()


def test_non_differentiable_ops_as_pytorch() -> None:
    """argmax, comparisons and integer indices are outside the graph: they pick, and the second derivative flows
    through what they picked."""
    torch = pytest.importorskip("torch")

    def run(m, as_tensor):
        x = as_tensor(np.array([[0.5, -1.0, 2.0], [1.5, 0.3, -0.2]]))
        x.requires_grad_()
        i = x.argmax(1)
        y = (x[as_tensor(np.array([0, 1])), i] ** 3).sum() + m.where(x > 0, x * x, x).sum()
        g, = m.autograd.grad(y, x, create_graph=True)
        h, = m.autograd.grad((g * g).sum(), x)
        return g.detach().numpy(), h.numpy()

    for a, b in zip(run(mg, mg.tensor), run(torch, torch.tensor), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_grad_outputs_in_the_graph_give_a_jacobian_vector_product() -> None:
    """The double-backward trick: g = J^T v with v requiring grad is linear in v, and its gradient along u is J u."""
    torch = pytest.importorskip("torch")

    def run(m, as_tensor):
        x = as_tensor(np.array([0.3, -1.2, 2.0]))
        x.requires_grad_()
        y = (as_tensor(np.arange(6.0).reshape(2, 3) / 5) @ x).tanh()
        v = as_tensor(np.zeros(2))
        v.requires_grad_()
        g, = m.autograd.grad(y, x, v, create_graph=True)  # J^T v
        jvp, = m.autograd.grad(g, v, as_tensor(np.array([1.0, -2.0, 0.5])))  # J u
        return jvp.detach().numpy()

    np.testing.assert_allclose(run(mg, mg.tensor), run(torch, torch.tensor), rtol=1e-12)


def test_gradgradcheck_catches_a_wrong_second_formula() -> None:
    """A formula that treats x as a constant gives the right gradient, so gradcheck passes, but the wrong second
    derivative: gradgradcheck names it."""

    class Cube(mg.Function):
        graph_backward = True
        keeps_x = None  # where self.saved finds x: None, a constant (wrong); 0, input 0 of the graph (right)

        def forward(self, x):
            self.x = x
            return x**3

        def backward(self, dout):
            return (3 * self.saved(self.x, self.keeps_x) ** 2 * dout,)

    x = mg.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    assert mg.gradcheck(Cube.apply, x)
    with pytest.raises(mg.GradcheckError, match="input 0"):
        mg.gradgradcheck(Cube.apply, x)
    Cube.keeps_x = 0
    assert mg.gradgradcheck(Cube.apply, x)


def test_an_array_backward_runs_first_order_and_refuses_create_graph_in_one_line() -> None:
    class Cube(mg.Function):
        def forward(self, x):
            self.x = x
            return x**3

        def backward(self, dout):
            return (3 * self.x**2 * dout,)

    x = mg.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    assert mg.gradcheck(Cube.apply, x)
    with pytest.raises(NotImplementedError, match=r"^create_graph=True: Cube.backward computes on arrays[^\n]*$"):
        mg.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)


def test_the_deprecated_formula_and_sum_to_still_work() -> None:
    """minigrad.autograd.second_order.formula registers a second formula for create_graph=True, and sum_to sums a
    tensor back to a shape, each with a DeprecationWarning, for one release."""
    from minigrad.autograd.second_order import formula, sum_to

    class Square(mg.Function):
        def forward(self, x):
            self.x = x
            return x * x

        def backward(self, dout):
            return (2 * self.x * dout,)

    with pytest.warns(DeprecationWarning, match="formula is deprecated"):
        @formula(Square)
        def square_graph(node, dout):
            return (2 * node.mg_parents[0] * dout,)  # x is a leaf here: its edge is the tensor itself

    x = mg.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    g, = mg.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
    h, = mg.autograd.grad((g * g).sum(), x)
    np.testing.assert_allclose(h.numpy(), 8 * x.numpy())  # d/dx (2x)^2 = 8x
    with pytest.warns(DeprecationWarning, match="sum_to is deprecated"):
        summed = sum_to(mg.ones(2, 3), (1, 3))
    np.testing.assert_array_equal(summed.numpy(), np.full((1, 3), 2.0))


def test_a_gelu_twin_that_saved_its_slope_refuses_create_graph_in_one_line() -> None:
    """mg.fused()'s GELU saves dy/dx, not x: create_graph=True through it is refused, naming it."""
    x = mg.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    with mg.fused():
        y = F.gelu(x).sum()
    with pytest.raises(NotImplementedError, match=r"^create_graph=True: FastGeluErf.backward"):
        mg.autograd.grad(y, x, create_graph=True)


def test_compiled_runs_the_same_formulas() -> None:
    """Under mg.compiled() the compiled Functions' nodes run their teaching Function's formula under create_graph=True:
    the same gradients and second derivatives as without it (float32, where the kernels run; the GELU twin, which
    saves dy/dx, refuses, above)."""
    pytest.importorskip("numba")
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 8), (8,), (8,), (16, 8))]

    def run():
        x, g, b, w = (mg.tensor(v, requires_grad=True) for v in values)
        h = F.relu(F.layer_norm(x, (8,), g, b) @ w.T)
        out = F.scaled_dot_product_attention(h, h, h, is_causal=True).softmax(-1)
        grads = mg.autograd.grad((out * out).sum(), [x, g, w], create_graph=True)
        second = mg.autograd.grad(sum((d * d).sum() for d in grads), [x, g, b, w])
        return [t.numpy() for t in (*grads, *second)]

    plain = run()
    with mg.compiled():
        compiled = run()
    for a, b in zip(compiled, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-5)


def test_fused_attention_gives_the_same_second_derivatives() -> None:
    """mg.fused() runs the models' attention as one node, F.scaled_dot_product_attention: its formula gives the same
    gradient penalty as the steps written out."""
    from models.attention import MultiHeadSelfAttention

    mg.manual_seed(0)
    attention = MultiHeadSelfAttention(8, 2).to(mg.float64)
    x = mg.tensor(np.random.default_rng(0).standard_normal((2, 5, 8)), requires_grad=True)

    def penalty():
        g, = mg.autograd.grad((attention(x) ** 2).sum(), x, create_graph=True)
        return mg.autograd.grad((g * g).sum(), [x, *attention.parameters()])

    plain = penalty()
    with mg.fused():
        fused = penalty()
    for a, b in zip(fused, plain, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.cuda
def test_second_derivatives_on_the_gpu_match_the_cpu() -> None:
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s) for s in ((2, 3, 6), (6,), (6, 5))]

    def run(device):
        x, g, w = (mg.tensor(v, requires_grad=True, device=device) for v in values)
        logits = F.gelu(F.layer_norm(x, (6,), g)) @ w  # (2, 3, 5), flattened for the loss as nanoGPT does
        out = F.cross_entropy(logits.view(6, 5), mg.tensor(_T.reshape(6), device=device))
        grads = mg.autograd.grad(out, [x, g, w], create_graph=True)
        return [t.to("cpu").numpy() for t in mg.autograd.grad(sum((d * d).sum() for d in grads), [x, g, w])]

    for a, b in zip(run("cuda"), run("cpu"), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_no_node_keeps_its_own_output_and_release_drops_the_tensors_kept():
    """The tensors a backward makes of what its node saved are its own, not kept on the node (no node holds its own
    output: no reference cycle); the nodes made for derived quantities (layer norm's xhat and rstd) hold tensors, and
    release(), after the backward that goes through them, drops those as it drops arrays."""
    from minigrad.core import graph_order

    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    w = mg.tensor(rng.standard_normal(5), requires_grad=True)
    out = (F.layer_norm(x, 5, w).exp() * mg.tensor(rng.standard_normal((3, 5)))).sum()
    g, = mg.autograd.grad(out, x, create_graph=True)
    nodes = [n for n in graph_order(g.grad_fn, out.grad_fn) if isinstance(n, mg.Function)]
    kept = [(n, v) for n in nodes for v in vars(n).values() if isinstance(v, mg.Tensor)]
    assert kept, "the derived nodes keep tensors"
    assert not [n for n, v in kept if v.grad_fn is n]
    (g * g).sum().backward()  # first order, retain_graph=False: every node it went through is released
    assert not [(type(n).__name__, k) for n in graph_order(g.grad_fn) if isinstance(n, mg.Function)
                for k, v in vars(n).items() if isinstance(v, mg.Tensor)]
