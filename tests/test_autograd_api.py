"""The autograd surface as PyTorch has it, each case checked against torch where it is installed: hooks that return
handles, retain_grad holding its tensor weakly, the refused assignments (requires_grad, .grad), grad mode (off inside
backward; no_grad, enable_grad, set_grad_enabled as block, decorator and call; generators), custom Functions (None
for options, missing methods), a second backward where nothing was saved, mg.autograd.grad and backward(inputs=...);
and a Module's side: what assigning a parameter or child module does, zero_grad, forward hooks.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

try:
    import torch
except ImportError:  # the cases still run on minigrad alone; the comparisons skip
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: the comparison with it is skipped")


def pair(shape=(3,), seed=0, requires_grad=True):
    """The same float64 values as a minigrad and (where installed) a torch tensor."""
    values = np.random.default_rng(seed).standard_normal(shape)
    theirs = None if torch is None else torch.tensor(values, requires_grad=requires_grad)
    return mg.tensor(values, requires_grad=requires_grad), theirs


def same(mine, theirs):
    mine = mine.numpy() if isinstance(mine, mg.Tensor) else mine
    np.testing.assert_allclose(mine, theirs.detach().numpy(), rtol=1e-12, atol=1e-15)


# ---- hooks return handles ----

@needs_torch
def test_a_hook_handle_removes_that_hook_only():
    """test_autograd's hook case: two hooks, one removed; the other still runs, and changes the gradient."""
    results = {}
    for lib, (x, tx) in (("mg", pair()), ("torch", pair())):
        t = x if lib == "mg" else tx
        calls = []
        keep = t.register_hook(lambda g, calls=calls: calls.append("keep") or g * 2)
        drop = t.register_hook(lambda g, calls=calls: calls.append("drop") or g * 100)
        drop.remove()
        drop.remove()  # twice: nothing more happens
        (t * 3).sum().backward()
        keep.remove()
        (t * 3).sum().backward()  # no hook left: plain 3 added
        results[lib] = (calls, t.grad)
    assert results["mg"][0] == results["torch"][0] == ["keep"]
    same(results["mg"][1], results["torch"][1])  # 6 + 3


def test_the_same_function_registered_twice_is_removed_once_per_handle():
    x, _ = pair()
    calls = []
    hook = lambda g: calls.append(1)  # noqa: E731
    first, second = x.register_hook(hook), x.register_hook(hook)
    first.remove()
    (x * 1).sum().backward()
    assert calls == [1]
    second.remove()
    (x * 1).sum().backward()
    assert calls == [1]


def test_a_handle_removes_its_hook_at_the_end_of_a_with_block():
    x, _ = pair()
    y = x * 2
    calls = []
    with y.register_hook(lambda g: calls.append(g.numpy().copy())):
        y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert len(calls) == 1


# ---- retain_grad holds its tensor weakly ----

@needs_torch
def test_retain_grad_does_not_keep_its_tensor_alive():
    """test_autograd's retain_grad cycle: the graph of z outlives y, which retain_grad must not keep alive."""
    def run(lib, x):
        y = x * 2
        y.retain_grad()
        return y / 2, weakref.ref(y) if lib == "mg" else torch._C._WeakTensorRef(y)

    x, tx = pair()
    z, ref = run("mg", x)
    tz, tref = run("torch", tx)
    gc.collect()
    assert ref() is None and tref.expired()
    z.sum().backward()  # the hook finds no tensor: nothing fails, the leaf gets its gradient
    tz.sum().backward()
    same(x.grad, tx.grad)


def test_a_kept_retained_tensor_gets_its_gradient_and_says_so():
    x, _ = pair()
    y = x * 2
    assert not y.retains_grad and not x.retains_grad
    y.retain_grad()
    assert y.retains_grad
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad, 2 * y.numpy())


# ---- refused assignments ----

def refusals():
    x_mg, x_t = pair()
    i_mg, i_t = mg.ones(3, dtype=mg.int64), None if torch is None else torch.ones(3, dtype=torch.long)

    def assign(t, name, value):
        setattr(t, name, value)

    cases = {
        "non-leaf requires_grad_(False)": (lambda: (x_mg * 2).requires_grad_(False),
                                           lambda: (x_t * 2).requires_grad_(False), RuntimeError, "only a leaf"),
        "non-leaf requires_grad = False": (lambda: assign(x_mg * 2, "requires_grad", False),
                                           lambda: assign(x_t * 2, "requires_grad", False), RuntimeError,
                                           "only a leaf"),
        "int requires_grad = True": (lambda: assign(i_mg, "requires_grad", True),
                                     lambda: assign(i_t, "requires_grad", True), (TypeError, RuntimeError),
                                     "only floating-point tensors can require grad"),
        "grad of another shape": (lambda: assign(x_mg, "grad", mg.zeros(4, dtype=mg.float64)),
                                  lambda: assign(x_t, "grad", torch.zeros(4, dtype=torch.float64)), RuntimeError,
                                  r"shape \(4,\)"),
        "grad of another dtype": (lambda: assign(x_mg, "grad", mg.zeros(3)),
                                  lambda: assign(x_t, "grad", torch.zeros(3, dtype=torch.float32)), RuntimeError,
                                  "dtype float32"),
        "grad that is the tensor": (lambda: assign(x_mg, "grad", x_mg), lambda: assign(x_t, "grad", x_t),
                                    RuntimeError, "its own grad"),
        "grad that is not an array": (lambda: assign(x_mg, "grad", [0.0, 0.0, 0.0]),
                                      lambda: assign(x_t, "grad", [0.0, 0.0, 0.0]), TypeError, "list"),
    }
    return cases


@pytest.mark.parametrize("name", list(refusals()))
def test_what_torch_refuses_is_refused(name):
    mine, theirs, error, message = refusals()[name]
    with pytest.raises(error, match=message):
        mine()
    if torch is not None:
        with pytest.raises((RuntimeError, TypeError)):
            theirs()


def test_a_grad_of_the_right_kind_is_taken_and_accumulated_into():
    x, _ = pair()
    x.grad = mg.ones(3, dtype=mg.float64)  # a tensor: taken as it is
    assert isinstance(x.grad, mg.Tensor) and isinstance(x.grad.array, np.ndarray)
    (x * 2).sum().backward()
    np.testing.assert_array_equal(x.grad, np.full(3, 3.0))
    x.grad = None
    assert x.grad is None
    leaf = mg.zeros(2)
    leaf.requires_grad = True  # a leaf's flag may change, as in PyTorch
    assert leaf.requires_grad and leaf.is_leaf


def test_an_array_assigned_to_grad_is_still_taken_with_a_deprecation_warning():
    """.grad was an array before 0.2: an array assigned to it is wrapped (shared, not copied) and warned about;
    anything else that is not a tensor is refused, as PyTorch refuses it."""
    x, _ = pair()
    g = np.ones(3)
    with pytest.warns(DeprecationWarning, match=r"assign mg.tensor\(array\)"):
        x.grad = g
    assert isinstance(x.grad, mg.Tensor) and x.grad.array is g
    (x * 2).sum().backward()
    np.testing.assert_array_equal(g, np.full(3, 3.0))  # accumulated into the array given
    with pytest.raises(TypeError, match="expected a tensor or None, got list"):
        x.grad = [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="shape"):
        x.grad = mg.ones(4, dtype=mg.float64)


@needs_torch
def test_a_parameter_is_replaced_only_by_a_parameter_or_none():
    """test_nn's assignment case: l2.weight = l1.weight + 2 would take the weight out of parameters() silently."""
    l1, l2 = nn.Linear(2, 2), nn.Linear(2, 2)
    t1, t2 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"cannot assign Tensor as parameter 'weight' \(nn.Parameter or None"):
        l2.weight = l1.weight + 2
    with pytest.raises(TypeError, match="cannot assign"):
        t2.weight = t1.weight + 2
    with pytest.raises(TypeError, match="cannot assign int as child module '0'"):
        nn.Sequential(nn.ReLU()).__setattr__("0", 5)
    l2.weight = nn.Parameter(l1.weight.detach())  # a Parameter takes the place
    assert any(p is l2.weight for p in l2.parameters())
    l2.bias = None  # None empties it: no longer trained, and only a Parameter may come back
    t2.bias = None
    assert [n for n, _ in l2.named_parameters()] == [n for n, _ in t2.named_parameters()] == ["weight"]
    with pytest.raises(TypeError, match="cannot assign"):
        l2.bias = mg.zeros(2)
    with pytest.raises(TypeError, match="cannot assign"):
        t2.bias = torch.zeros(2)
    l2.scale = mg.ones(2)  # a new name holds any value, a plain attribute
    assert len(list(l2.parameters())) == 1


def assignments(lib, N):
    """test_nn's assignment case, step by step: what parameters() and the children are after each assignment."""
    m = N.Module()
    a, b, c = (N.Parameter(lib.zeros(1)) for _ in range(3))
    first, second = N.Linear(1, 1), N.Linear(1, 1)
    seen = []

    def names(what):
        seen.append((what, [n for n, _ in m.named_parameters()], [n for n, _ in m.named_children()]))

    m.a = None
    names("a plain None")
    m.a = a
    names("a Parameter on a plain name")
    m.b = b
    m.a = None
    names("a parameter set to None")
    m.a = a
    del m.a
    names("del a parameter")
    m.a = first
    m.a = second
    names("a Module, then another in its place")
    m.a = None
    names("a child module set to None")
    m.a = c
    names("a Parameter where a child module was")
    del m.b
    names("del the other")
    m.v = lib.zeros(2)
    names("a plain tensor on a new name")
    return seen


@needs_torch
def test_assigning_parameters_and_modules_registers_them_as_torch_does():
    mine, theirs = assignments(mg, nn), assignments(torch, torch.nn)
    assert mine == theirs
    assert mine[-1][1:] == (["a"], [])


@needs_torch
def test_zero_grad_drops_or_zeroes_the_gradients_as_torchs():
    """Module.zero_grad and Optimizer.zero_grad: set_to_none=True (the default) drops .grad, False zeroes it in
    place."""
    results = {}
    for name, lib, N in (("mg", mg, nn), ("torch", torch, torch.nn)):
        layer = N.Linear(3, 2)
        opt = lib.optim.SGD(layer.parameters(), lr=0.1)
        steps = []
        for owner, options in ((layer, {"set_to_none": False}), (opt, {"set_to_none": False}), (layer, {}), (opt, {})):
            layer(lib.ones(1, 3)).sum().backward()
            kept = layer.weight.grad
            owner.zero_grad(**options)  # {}: the default, set_to_none=True
            grad = layer.weight.grad
            steps.append(None if grad is None else (grad is kept, np.asarray(grad).tolist()))
        results[name] = steps
    assert results["mg"] == results["torch"] == [(True, [[0.0] * 3] * 2)] * 2 + [None] * 2


# ---- grad mode ----

@needs_torch
def test_grad_mode_is_off_inside_a_functions_backward():
    seen = {}

    class Twice(mg.Function):
        def forward(self, x):
            return x * 2

        def backward(self, dout):
            seen["mg"] = mg.is_grad_enabled()
            return (dout * 2,)

    class TorchTwice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, dout):
            seen["torch"] = torch.is_grad_enabled()
            return dout * 2

    x, tx = pair()
    Twice.apply(x).sum().backward()
    TorchTwice.apply(tx).sum().backward()
    assert seen == {"mg": False, "torch": False} and mg.is_grad_enabled()
    same(x.grad, tx.grad)


def test_grad_mode_is_off_in_a_hook_and_restored_when_a_hook_raises():
    x, _ = pair()
    seen = []
    x.register_hook(lambda g: seen.append(mg.is_grad_enabled()))
    (x * 2).sum().backward()
    assert seen == [False] and mg.is_grad_enabled()
    y = x * 2
    y.register_hook(lambda g: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        y.sum().backward()
    assert mg.is_grad_enabled()


def modes(lib):
    """Grad mode seen inside each way of switching it, with lib = mg or torch."""
    seen = {}
    with lib.no_grad():
        with lib.enable_grad():
            seen["enable_grad inside no_grad"] = lib.is_grad_enabled()
        seen["after it"] = lib.is_grad_enabled()
    with lib.set_grad_enabled(False):
        seen["set_grad_enabled(False) block"] = lib.is_grad_enabled()
    seen["after the block"] = lib.is_grad_enabled()
    lib.set_grad_enabled(False)
    seen["set_grad_enabled(False) called"] = lib.is_grad_enabled()
    lib.set_grad_enabled(True)

    @lib.set_grad_enabled(False)
    def decorated():
        return lib.is_grad_enabled()

    seen["after decorating"] = lib.is_grad_enabled()
    seen["the decorated function"] = decorated()

    @lib.no_grad
    def bare():
        return lib.is_grad_enabled()

    seen["@no_grad without parentheses"] = bare()

    @lib.no_grad()
    def generator():
        for _ in range(2):
            yield lib.is_grad_enabled()

    it = generator()
    seen["a no_grad generator's first value"] = next(it)
    seen["the caller between values"] = lib.is_grad_enabled()
    seen["its second value"] = next(it)

    @lib.enable_grad()
    def enabling_generator():
        yield lib.is_grad_enabled()

    with lib.no_grad():
        seen["an enable_grad generator inside no_grad"] = next(enabling_generator())
    seen["at the end"] = lib.is_grad_enabled()
    return seen


@needs_torch
def test_the_grad_mode_switches_behave_as_torchs():
    mine, theirs = modes(mg), modes(torch)
    assert mine == theirs
    assert mine["set_grad_enabled(False) block"] is False and mine["at the end"] is True


def test_a_generator_passes_sent_and_thrown_values_through_and_closes_inside_the_block():
    seen = []

    @mg.no_grad()
    def echo():
        try:
            received = yield 1
            seen.append((received, mg.is_grad_enabled()))
            yield 2
        except KeyError:
            seen.append(("thrown", mg.is_grad_enabled()))
            yield 3
        finally:
            seen.append(("closed", mg.is_grad_enabled()))

    gen = echo()
    assert next(gen) == 1 and gen.send("hi") == 2 and gen.throw(KeyError()) == 3
    gen.close()
    assert seen == [("hi", False), ("thrown", False), ("closed", False)] and mg.is_grad_enabled()


def test_grad_mode_switches_refuse_what_is_not_a_flag_or_a_function():
    with pytest.raises(TypeError, match="set_grad_enabled: mode must be True or False, got int"):
        mg.set_grad_enabled(1)
    with pytest.raises(TypeError, match=r"no_grad\(\) takes no arguments"):
        mg.no_grad(5)
    assert mg.is_grad_enabled()


# ---- custom Functions ----

@needs_torch
def test_a_functions_backward_may_return_none_for_its_options():
    """torch's Function.backward returns one value per forward argument, None for the non-tensor ones."""
    class Scale(mg.Function):
        def forward(self, x, *, factor):
            self.factor = factor
            return x * factor

        def backward(self, dout):
            return dout * self.factor, None  # None for the option `factor`

    class TorchScale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, dout):
            return dout * ctx.factor, None

    x, tx = pair()
    Scale.apply(x, factor=3.0).sum().backward()
    TorchScale.apply(tx, 3.0).sum().backward()
    same(x.grad, tx.grad)


def test_a_functions_backward_must_still_give_each_input_its_gradient():
    class Wrong(mg.Function):
        def forward(self, x):
            return x * 1

        def backward(self, dout):
            return dout, dout  # a second gradient, not None, for no input

    x, _ = pair()
    with pytest.raises(TypeError, match="Wrong.backward returned 2 gradients for 1 inputs"):
        Wrong.apply(x).sum().backward()


@needs_torch
def test_a_function_without_forward_or_backward_says_what_is_missing():
    class NoBackward(mg.Function):
        def forward(self, x):
            return x * 1

    class NoForward(mg.Function):
        pass

    x, tx = pair()
    with pytest.raises(NotImplementedError, match=r"NoBackward does not define backward\(self, dout\)"):
        NoBackward.apply(x).sum().backward()
    with pytest.raises(NotImplementedError, match=r"NoForward does not define forward\(self, \*arrays"):
        NoForward.apply(x)

    class TorchNoBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

    with pytest.raises(NotImplementedError, match="must implement"):
        TorchNoBackward.apply(tx).sum().backward()


@needs_torch
def test_a_second_backward_works_where_nothing_was_saved_as_in_torch():
    """test_autograd's backward-twice cases: add and a slice save no tensor, mul does."""
    x, tx = pair()
    for t in (x, tx):
        c = (t + 1)[1:]
        c.sum().backward()
        c.sum().backward()
    same(x.grad, tx.grad)
    for t in (x, tx):
        d = (t * t).sum()
        d.backward()
        with pytest.raises(RuntimeError, match="(already used by a backward|a second time)"):
            d.backward()


# ---- mg.autograd.grad and backward(inputs=...) ----

@needs_torch
def test_autograd_grad_returns_the_gradients_and_leaves_grad_alone():
    (x, tx), (w, tw) = pair(seed=1), pair(seed=2)
    mine = mg.autograd.grad((x * w).tanh().sum(), [x, w])
    theirs = torch.autograd.grad((tx * tw).tanh().sum(), [tx, tw])
    assert x.grad is None and w.grad is None and all(isinstance(g, mg.Tensor) for g in mine)
    for a, b in zip(mine, theirs, strict=True):
        same(a, b)


@needs_torch
def test_autograd_grad_of_several_outputs_with_their_gradients_and_an_intermediate_input():
    x, tx = pair((2, 3))
    dy = np.random.default_rng(5).standard_normal((2, 3))
    results = []
    for lib, t, g in ((mg, x, dy), (torch, tx, torch.tensor(dy))):
        y = t * 3
        results.append(lib.autograd.grad([(y * y).sum(), y.exp()], [t, y], [None, g]))
    for a, b in zip(*results, strict=True):
        same(a, b)


@needs_torch
def test_an_unused_input_is_refused_or_none_or_zeros():
    (x, tx), (u, tu) = pair(seed=1), pair(seed=2)
    with pytest.raises(RuntimeError, match="input 1, of shape \\(3,\\), was not used .* allow_unused=True"):
        mg.autograd.grad((x * 2).sum(), [x, u])
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        torch.autograd.grad((tx * 2).sum(), [tx, tu])
    assert mg.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)[1] is None
    assert torch.autograd.grad((tx * 2).sum(), [tx, tu], allow_unused=True)[1] is None
    same(mg.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)[1],
         torch.autograd.grad((tx * 2).sum(), [tx, tu], materialize_grads=True)[1])


@needs_torch
def test_autograd_grad_runs_hooks_where_torch_does_and_takes_each_gradient_where_torch_does():
    """torch's rule, kept exactly: an input the sweep goes past (b, with a below it) gives its gradient before its
    hooks; one it stops at (b alone, or the leaf a), after them."""
    results = []
    for lib in (mg, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = a * 2
        c = b * 3
        calls = []
        for name, t in (("a", a), ("b", b), ("c", c)):
            t.register_hook(lambda g, name=name, calls=calls: calls.append(name) or g * 10)
        (gb,) = lib.autograd.grad(c.sum(), [b], retain_graph=True)
        gb_a = lib.autograd.grad(c.sum(), [b, a])
        results.append((calls, gb.tolist(), gb_a[0].tolist(), gb_a[1].tolist()))
    assert results[0] == results[1]
    assert results[0][0] == ["c", "b", "c", "b", "a"]
    assert results[0][1:] == ([300.0, 300.0], [30.0, 30.0], [6000.0, 6000.0])


def test_autograd_grad_runs_only_the_part_of_the_graph_it_needs():
    x, _ = pair()
    other = mg.tensor([1.0, 2.0, 3.0], dtype=mg.float64, requires_grad=True)
    ran = []

    class Spy(mg.Function):
        def forward(self, a):
            return a * 1

        def backward(self, dout):
            ran.append(1)
            return (dout,)

    loss = (x * 2).sum() + Spy.apply(other).sum()
    (gx,) = mg.autograd.grad(loss, x)
    np.testing.assert_array_equal(gx.numpy(), np.full(3, 2.0))
    assert ran == [] and other.grad is None


@pytest.mark.parametrize("call, error, message", [
    (lambda x: mg.autograd.grad((x * 2).sum(), [mg.zeros(3)]), RuntimeError, "does not require grad"),
    (lambda x: mg.autograd.grad((x * 2).sum(), []), RuntimeError, "inputs cannot be empty"),
    (lambda x: mg.autograd.grad(x * 2, [x]), RuntimeError, r"output of shape \(3,\) is not a scalar"),
    (lambda x: mg.autograd.grad([(x * 2).sum()] * 2, [x], [None]), ValueError, "1 grad_outputs for 2 outputs"),
    (lambda x: mg.autograd.grad((x * 2).sum(), ["x"]), TypeError, "inputs must be a tensor"),
    (lambda x: (x * 2).sum().backward(inputs=[]), RuntimeError, "inputs cannot be empty"),
])
def test_autograd_grad_refuses_what_torch_refuses(call, error, message):
    x, _ = pair()
    with pytest.raises(error, match=message):
        call(x)


def test_autograd_grad_after_a_freed_graph_says_so():
    x, _ = pair()
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="already used by a backward"):
        mg.autograd.grad(y, [x])


@needs_torch
def test_backward_with_inputs_fills_only_their_grad():
    (x, tx), (w, tw) = pair(seed=1), pair(seed=2)
    results = []
    for a, b in ((x, w), (tx, tw)):
        y = a * b
        y.retain_grad()
        (y * y).sum().backward(inputs=[a, y])  # a leaf and an intermediate; b is left alone
        results.append((a.grad, y.grad, b.grad))
    mine, theirs = results
    same(mine[0], theirs[0])
    same(mine[1], theirs[1])  # once, though y also retains its gradient
    assert mine[2] is None and theirs[2] is None


@needs_torch
def test_a_non_leaf_input_of_backward_retains_its_gradient_from_then_on():
    """torch's backward(inputs=[y]) calls y.retain_grad(): a later backward() adds into y.grad too."""
    x, tx = pair(seed=1)
    results = []
    for t in (x, tx):
        y = t * 3
        (y * y).sum().backward(inputs=[y], retain_graph=True)
        first = (y.retains_grad, t.grad is None)
        (y * y).sum().backward()
        results.append((first, y.grad, t.grad))
    assert results[0][0] == results[1][0] == (True, True)
    same(results[0][1], results[1][1])
    same(results[0][2], results[1][2])


# ---- a Module's forward hooks ----

@needs_torch
def test_forward_hooks_see_and_replace_the_arguments_and_the_output():
    """test_nn's hook cases: a pre-hook that doubles the input, a hook that adds one to the output, both removed."""
    mg.manual_seed(0)
    lin = nn.Linear(3, 2).to(mg.float64)
    tlin = torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        tlin.weight.copy_(torch.from_numpy(lin.weight.numpy()))
        tlin.bias.copy_(torch.from_numpy(lin.bias.numpy()))
    x, tx = pair((4, 3), requires_grad=False)
    outputs = {}
    for name, module, inp in (("mg", lin, x), ("torch", tlin, tx)):
        seen = []
        pre = module.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        post = module.register_forward_hook(lambda m, args, out, seen=seen: seen.append(args[0].shape) or out + 1)
        first = module(inp)
        pre.remove()
        post.remove()
        outputs[name] = (first, module(inp), seen)
    same(outputs["mg"][0], outputs["torch"][0])
    same(outputs["mg"][1], outputs["torch"][1])
    assert outputs["mg"][2] == [(4, 3)] and list(outputs["torch"][2][0]) == [4, 3]


def test_forward_hooks_run_in_order_with_prepend_and_keyword_arguments():
    class Scale(nn.Module):
        def forward(self, x, *, factor=1.0):
            return x * factor

    m, calls = Scale(), []
    m.register_forward_hook(lambda mod, args, out: calls.append("second"))
    m.register_forward_hook(lambda mod, args, out: calls.append("first"), prepend=True)
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {**kwargs, "factor": 10.0}), with_kwargs=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: calls.append(kwargs["factor"]), with_kwargs=True)
    out = m(mg.ones(2), factor=2.0)
    np.testing.assert_array_equal(out.numpy(), np.full(2, 10.0))
    assert calls == ["first", "second", 10.0]
    m.register_forward_pre_hook(lambda mod, args, kwargs: "nonsense", with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"must return None or \(args, kwargs\)"):
        m(mg.ones(2))


def test_forward_hooks_complement_the_models_trace():
    """A pre-hook on a layer's output projection sees the heads merged, the `out` the model's own trace records."""
    from models import GPT, GPTConfig

    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8))
    seen = []
    handle = model.blocks[1].attn.proj.register_forward_pre_hook(lambda m, args: seen.append(args[0].numpy().copy()))
    trace = []
    model(np.array([[1, 2, 3, 4]]), trace=trace)
    handle.remove()
    model(np.array([[1, 2, 3, 4]]))
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], trace[1]["out"].numpy())
