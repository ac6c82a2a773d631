"""Every write the library makes into a `.grad` is counted in .grad's version, as PyTorch counts its own (issue 44,
item 1): the sweep's accumulation into an existing .grad (a second backward(), backward(inputs=...)),
Optimizer.zero_grad / Module.zero_grad with set_to_none=False (which also detach .grad first, as PyTorch's), and
clip_grad_norm_ / clip_grad_value_. A graph that kept .grad (a gradient penalty built with create_graph=True, or
a product with a plain .grad) is then refused by its backward where PyTorch refuses it, instead of differentiating
the new values. Each writer is compared with PyTorch in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg

torch = pytest.importorskip("torch", reason="the writers are compared with PyTorch's")


def parameter(lib, values=(1.0, -2.0)):
    """A float64 parameter of lib (minigrad or torch)."""
    return lib.nn.Parameter(lib.tensor(values, dtype=lib.float64))


def module_zero_grad(lib, p):
    module = lib.nn.Module()
    module.weight = p
    module.zero_grad(set_to_none=False)


# one row per writer into .grad: what it does, given the library and the parameter whose .grad it writes
WRITERS = {
    "a second backward()": lambda lib, p: (p**2).sum().backward(),
    "backward(inputs=p)": lambda lib, p: (p**2).sum().backward(inputs=[p]),
    "Optimizer.zero_grad(set_to_none=False)": lambda lib, p: lib.optim.SGD([p], lr=0.1).zero_grad(set_to_none=False),
    "Module.zero_grad(set_to_none=False)": module_zero_grad,
    "clip_grad_norm_ (over max_norm)": lambda lib, p: lib.nn.utils.clip_grad_norm_([p], 1.0),
    "clip_grad_norm_ (under max_norm)": lambda lib, p: lib.nn.utils.clip_grad_norm_([p], 1e9),
    "clip_grad_value_": lambda lib, p: lib.nn.utils.clip_grad_value_([p], 1.0),
}


def penalty_gradient(lib, write):
    """The issue's gradient penalty: (p**3).sum().backward(create_graph=True), pen = (p.grad**2).sum(), a write into
    p.grad, then d(pen)/dp; returns (that gradient, or the error it raised; p.grad after the write)."""
    p = parameter(lib)
    (p**3).sum().backward(create_graph=True)
    pen = (p.grad**2).sum()
    write(lib, p)
    grad_after = p.grad.detach().numpy().copy()
    try:
        return lib.autograd.grad(pen, p)[0].detach().numpy(), grad_after
    except RuntimeError as err:
        return err, grad_after


def plain_product_gradient(lib, write):
    """The plain-.grad case: a first-order backward, q = (p.grad * w).sum(), a write into p.grad, then q.backward();
    returns (w.grad, or the error it raised; p.grad after the write)."""
    p, w = parameter(lib), parameter(lib, (1.0, 2.0))
    (p**2).sum().backward()
    q = (p.grad * w).sum()
    write(lib, p)
    grad_after = p.grad.detach().numpy().copy()
    try:
        q.backward()
        return w.grad.numpy(), grad_after
    except RuntimeError as err:
        return err, grad_after


@pytest.mark.parametrize("graph", [penalty_gradient, plain_product_gradient], ids=["penalty", "plain .grad"])
@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_graph_that_kept_grad_is_refused_after_each_writer_as_pytorch_refuses_it(writer, graph):
    ours, ours_grad = graph(mg, WRITERS[writer])
    theirs, their_grad = graph(torch, WRITERS[writer])
    np.testing.assert_allclose(ours_grad, their_grad, rtol=1e-12, err_msg=f"{writer}: .grad after the write")
    assert isinstance(theirs, RuntimeError), f"PyTorch no longer refuses after {writer}: {theirs}"
    assert isinstance(ours, RuntimeError), f"{writer}: minigrad gave {ours} where PyTorch refuses ({theirs})"
    assert "modified by an in-place operation" in str(ours)


def test_without_a_write_the_penalty_and_the_product_are_pytorchs():
    """The control: the same graphs, with nothing written into .grad, give PyTorch's answers ([36, -288], [2, 4])."""
    def nothing(lib, p):
        return None

    for graph in (penalty_gradient, plain_product_gradient):
        (ours, _), (theirs, _) = graph(mg, nothing), graph(torch, nothing)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("zero_grad", ["Optimizer.zero_grad(set_to_none=False)", "Module.zero_grad(set_to_none=False)"])
def test_zero_grad_detaches_so_two_steps_of_a_penalty_give_pytorchs(zero_grad):
    """zero_grad(set_to_none=False) cuts .grad from the last step's graph before zeroing it (PyTorch's detach_()), so
    the second step's penalty does not also go back through the first step's: [36, -288] both times, as PyTorch's."""
    results = {}
    for lib in (mg, torch):
        p = parameter(lib)
        steps = []
        for _ in range(2):
            WRITERS[zero_grad](lib, p)
            (p**3).sum().backward(create_graph=True)
            steps.append(lib.autograd.grad((p.grad**2).sum(), p)[0].detach().numpy())
        WRITERS[zero_grad](lib, p)
        assert p.grad.requires_grad is False and p.grad.grad_fn is None  # a leaf again, outside every graph
        results[lib.__name__] = steps
    np.testing.assert_allclose(results["minigrad"], results["torch"], rtol=1e-12)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_each_writer_counts_its_write_in_the_version_of_grad(writer):
    """First order too: the version of .grad goes up with each write (the number itself is PyTorch's business)."""
    p = parameter(mg)
    (p**2).sum().backward()
    grad, before = p.grad, p.grad._version
    WRITERS[writer](mg, p)
    assert grad._version > before


def test_detach_in_place_as_pytorchs():
    """x.detach_(): a leaf outside the graph, in the same memory; a view in the graph is refused, as in PyTorch."""
    for lib in (mg, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        y = x * 2
        array = y.detach().numpy()
        assert y.detach_() is y and y.grad_fn is None and not y.requires_grad
        assert np.shares_memory(array, y.detach().numpy())
        with pytest.raises(RuntimeError, match="detach"):
            (x * 2)[0:1].detach_()


def test_the_data_parallel_sum_of_gradients_counts_its_write():
    """train.py's data parallelism sums each .grad over the ranks in place (gptlab/run.py, Run.sum_grads): counted
    as the library's other writes are (a world of one, whose all-reduce leaves the values as they are)."""
    from types import SimpleNamespace

    from minigrad.distributed import World

    from gptlab.run import Run

    p = parameter(mg)
    (p**2).sum().backward()
    grad, values = p.grad, p.grad.numpy().copy()
    Run.sum_grads(SimpleNamespace(world=World()), [p])
    assert grad._version == 1 and grad.numpy().tolist() == values.tolist()
