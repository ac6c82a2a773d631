"""In-place writes and what guards them, as in PyTorch: the version counter (every write counted, views sharing
it, backward refusing an array saved before a write), in-place ops and x[idx] = v recorded in the graph (a view's
base too, as CopySlices), refused on a leaf that requires grad, and the copy rules of mg.tensor, as_tensor,
from_numpy and detach. Cases from PyTorch's test_autograd.py are written again here, with torch as the oracle.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the in-place cases compare with it")
pytestmark = [pytest.mark.filterwarnings("ignore:Using a non-tuple sequence:UserWarning"),  # torch's, on x[[...]]
              pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf:UserWarning")]

MODIFIED = "modified by an in-place operation"


def both(values, requires_grad=False):
    """The same float64 values as a minigrad tensor and a torch tensor."""
    values = np.asarray(values, dtype=np.float64)
    return mg.tensor(values, requires_grad=requires_grad), torch.tensor(values, requires_grad=requires_grad)


# ---- the version counter ----

def test_an_optimizer_step_between_forward_and_backward_is_refused():
    """The issue's reproduction: x.grad was computed from the updated w, silently."""
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    x = mg.tensor([3.0, 4.0], requires_grad=True)
    loss = (w * x).sum()
    w.grad = mg.ones(2)  # as an earlier backward would have left it
    optim.SGD([w], lr=1).step()
    with pytest.raises(RuntimeError, match=rf"{MODIFIED}: input 0 of mul \(a leaf\), of shape \(2,\) and dtype "
                                           r"float32, is at version 1; mul saved it at version 0"):
        loss.backward()


@pytest.mark.parametrize("fused", [False, True])
def test_every_optimizer_step_counts_as_a_write(fused):
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.AdamW([w], fused=fused) if fused else optim.SGD([w], lr=0.1, momentum=0.9)
    for expected in (1, 2, 3):
        w.grad = mg.ones(2)
        opt.step()
        assert w._version == expected


def test_version_counter_as_pytorch_counts_it():
    """test_version_counter: in-place ops bump the version; a view shares its base's counter."""
    x, tx = both(np.random.default_rng(0).standard_normal((1, 2)))
    x.add_(1).add_(1)
    tx.add_(1).add_(1)
    assert x._version == tx._version == 2
    xz, txz = x[:], tx[:]
    assert xz._version == x._version
    xz.add_(1)
    txz.add_(1)
    assert x._version == xz._version == tx._version == txz._version == 3
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    d = x.detach()  # detach shares memory, so the counter too (as PyTorch's)
    d.mul_(2)
    tx.detach().mul_(2)
    assert x._version == tx._version == 4
    np.testing.assert_array_equal(x.numpy(), tx.numpy())


def test_load_state_dict_counts_as_a_write_and_data_assignment_keeps_the_version():
    """load_state_dict writes into the parameters; `x.data = y` swaps what x holds and keeps its version, as
    PyTorch's (its test_version_counter)."""
    layer = nn.Linear(2, 2)
    start = layer.weight._version  # 1, as torch's: its init wrote it in place
    x = mg.tensor([[1.0, 2.0]], requires_grad=True)
    y = layer(x).sum()
    layer.load_state_dict({k: np.ones(v.shape) for k, v in layer.state_dict().items()})
    assert layer.weight._version == start + 1
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.backward()
    t = mg.zeros(3)
    t.data = np.ones(3, dtype=np.float32)
    t.data = mg.full(3, 2.0)  # a tensor's array, as torch's x.data = y takes a tensor
    assert t._version == 0 and t.numpy().tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(TypeError, match=r"data: expected a tensor \(or a NumPy or CuPy array\) of numbers, got list"):
        t.data = [1.0, 2.0]


def test_no_grad_modifies_version():
    """test_no_grad_modifies_version: a write under no_grad is still a write."""
    x = mg.tensor(np.random.default_rng(1).standard_normal(5), requires_grad=True)
    y = mg.tensor(np.random.default_rng(2).standard_normal(5), requires_grad=True)
    z = (x * y).sum()
    with mg.no_grad():
        x *= 2
    with pytest.raises(RuntimeError, match=MODIFIED):
        z.backward()


def test_a_write_only_matters_to_a_node_that_saved_the_array():
    """test_inplace, first part: add saves nothing, so its backward still runs; mul saved z, so it refuses."""
    x, tx = both(np.ones((5, 5)), requires_grad=True)
    y, ty = both(np.ones((5, 5)) * 4, requires_grad=True)
    z, tz = x * y, tx * ty
    q, tq = z + y, tz + ty
    w, tw = z * y, tz * ty
    z.add_(2)
    tz.add_(2)
    q.backward(np.ones((5, 5)), retain_graph=True)
    tq.backward(torch.ones(5, 5), retain_graph=True)
    np.testing.assert_array_equal(x.grad, tx.grad.numpy())
    np.testing.assert_array_equal(y.grad, ty.grad.numpy())
    with pytest.raises(RuntimeError):
        tw.backward(torch.ones(5, 5))
    with pytest.raises(RuntimeError, match=rf"{MODIFIED}: input 0 of mul \(the output of mul\)"):
        w.backward(np.ones((5, 5)))


def test_a_write_into_a_saved_output_is_refused_and_the_writers_own_node_is_not():
    """test_inplace, exp_ part: exp_ saves its result, so w = z.exp_() backpropagates; q, which saved the old z,
    does not. Through r (add) the gradient is x's 1/2, through w (1 + e) / 2, as in torch."""
    x, tx = both(np.ones((5, 5)), requires_grad=True)
    y, ty = both(np.ones((5, 5)) * 4, requires_grad=True)
    m, tm = x / 2, tx / 2
    z, tz = m + y / 8, tm + ty / 8
    q = z * y
    r, tr = z + y, tz + ty
    before = z._version
    w, tw = z.exp_(), tz.exp_()
    assert w is z and z._version != before
    r.backward(np.ones((5, 5)), retain_graph=True)
    tr.backward(torch.ones(5, 5), retain_graph=True)
    np.testing.assert_allclose(x.grad, np.ones((5, 5)) / 2)
    w.backward(np.ones((5, 5)), retain_graph=True)
    tw.backward(torch.ones(5, 5), retain_graph=True)
    np.testing.assert_allclose(x.grad, np.full((5, 5), (1 + math.e) / 2), rtol=1e-12)
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match=MODIFIED):
        q.backward(np.ones((5, 5)))


def test_a_leafs_clone_stays_usable_after_a_write():
    """test_inplace, last part: the last backward meets mul's refusal before the nodes the first one freed."""
    leaf = mg.ones(5, 5, requires_grad=True)
    x = leaf.clone()
    x.add_(10)
    np.testing.assert_array_equal(x.numpy(), np.full((5, 5), 11))
    y = x + 2
    y.backward(np.ones((5, 5)))
    np.testing.assert_array_equal(leaf.grad, np.ones((5, 5)))
    z = x * y
    x.add_(2)
    with pytest.raises(RuntimeError, match=MODIFIED):
        z.backward(np.ones((5, 5)))


def test_the_error_names_a_saved_output():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.mul_(2)  # exp saved y for its backward
    with pytest.raises(RuntimeError, match=rf"{MODIFIED}: output 0 of exp, of shape \(2,\) .* at version 1; exp "
                                           r"saved it at version 0"):
        y.backward(np.ones(2))


# ---- in-place ops: the same values and gradients as torch's ----

INPLACE = {
    "add_": (lambda t: t.add_(2.5), lambda t: t.add_(2.5)),
    "add_ alpha": (lambda t: t.add_(t.detach() * 0 + 1, alpha=-3), lambda t: t.add_(t.detach() * 0 + 1, alpha=-3)),
    "sub_": (lambda t: t.sub_(0.5), lambda t: t.sub_(0.5)),
    "mul_": (lambda t: t.mul_(-2.0), lambda t: t.mul_(-2.0)),
    "div_": (lambda t: t.div_(4.0), lambda t: t.div_(4.0)),
    "pow_": (lambda t: t.pow_(2), lambda t: t.pow_(2)),
    "+=": (lambda t: t.__iadd__(1.5), lambda t: t.__iadd__(1.5)),
    "-=": (lambda t: t.__isub__(1.5), lambda t: t.__isub__(1.5)),
    "*=": (lambda t: t.__imul__(3.0), lambda t: t.__imul__(3.0)),
    "/=": (lambda t: t.__itruediv__(3.0), lambda t: t.__itruediv__(3.0)),
    "**=": (lambda t: t.__ipow__(3), lambda t: t.__ipow__(3)),
    "neg_": (lambda t: t.neg_(), lambda t: t.neg_()),
    "exp_": (lambda t: t.exp_(), lambda t: t.exp_()),
    "tanh_": (lambda t: t.tanh_(), lambda t: t.tanh_()),
    "sigmoid_": (lambda t: t.sigmoid_(), lambda t: t.sigmoid_()),
    "abs_": (lambda t: t.abs_(), lambda t: t.abs_()),
    "relu_": (lambda t: t.relu_(), lambda t: t.relu_()),
    "clamp_": (lambda t: t.clamp_(-0.3, 0.4), lambda t: t.clamp_(-0.3, 0.4)),
    "masked_fill_": (lambda t: t.masked_fill_(t.detach() > 0, 7.0), lambda t: t.masked_fill_(t.detach() > 0, 7.0)),
    "fill_": (lambda t: t.fill_(0.25), lambda t: t.fill_(0.25)),
    "zero_": (lambda t: t.zero_(), lambda t: t.zero_()),
    "copy_": (lambda t: t.copy_(mg.tensor([1.0, 2.0, 3.0], dtype=mg.float64)),
              lambda t: t.copy_(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))),
}


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_ops_give_torchs_values_versions_and_gradients(name):
    mine_op, theirs_op = INPLACE[name]
    values = np.random.default_rng(3).standard_normal((2, 3))
    leaf, tleaf = both(values, requires_grad=True)
    x, tx = leaf * 1.5, tleaf * 1.5  # a non-leaf, as an in-place op in grad mode needs
    out = mine_op(x)
    assert theirs_op(tx) is tx and out is x and x._version == tx._version == 1
    np.testing.assert_allclose(x.numpy(), tx.detach().numpy(), rtol=1e-12)
    dout = np.random.default_rng(4).standard_normal((2, 3))
    (x * x).backward(dout)  # x is used twice: its gradient meets the in-place op's backward
    (tx * tx).backward(torch.tensor(dout))
    np.testing.assert_allclose(leaf.grad, tleaf.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_ops_under_no_grad_write_into_the_same_memory(name):
    mine_op, theirs_op = INPLACE[name]
    values = np.random.default_rng(5).standard_normal((2, 3))
    array = values.copy()
    x, tx = mg.from_numpy(array), torch.tensor(values)
    with mg.no_grad():
        mine_op(x)
    with torch.no_grad():
        theirs_op(tx)
    np.testing.assert_allclose(array, tx.numpy(), rtol=1e-12)  # the caller's array itself was written
    assert x._version == 1


def test_manual_sgd_with_minus_equals_updates_the_model():
    """The issue's reproduction: `p -= 0.1 * p.grad` rebound the name and left the model as it was."""
    mg.manual_seed(0)
    model = nn.Linear(3, 2)
    start = [p._version for p in model.parameters()]  # 1 each, as torch's: their init wrote them in place
    before = [p.numpy().copy() for p in model.parameters()]
    model(mg.ones(4, 3)).sum().backward()
    with mg.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    for p, b, v in zip(model.parameters(), before, start, strict=True):
        np.testing.assert_allclose(p.numpy(), b - 0.1 * p.grad, rtol=1e-6)
        assert p.is_leaf and p.requires_grad and p._version == v + 1


def test_an_inplace_op_on_a_leaf_that_requires_grad_is_refused_in_grad_mode():
    """As torch: "a leaf Variable that requires grad is being used in an in-place operation"."""
    w, tw = both([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError):
        tw.add_(1)
    for write in (lambda t: t.add_(1), lambda t: t.__iadd__(1), lambda t: t.__setitem__(0, 5.0), lambda t: t.zero_()):
        with pytest.raises(RuntimeError, match=r"a leaf tensor that requires grad \(shape \(2,\)\) is being used in an "
                                               r"in-place operation; update it under mg.no_grad\(\)"):
            write(w)
    with pytest.raises(RuntimeError, match="a view of a leaf tensor that requires grad"):
        w[0:1].mul_(2)
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])
    assert w._version == 0  # refused before anything was written


def test_inplace_results_that_do_not_fit_are_refused_as_torch_refuses_them():
    i = mg.tensor([1, 2])
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).add_(1.5)
    with pytest.raises(RuntimeError, match=r"add_: the result, of shape \(2,\) and dtype float32, cannot be written "
                                           r"into this tensor of shape \(2,\) and dtype int64"):
        i += 1.5
    with pytest.raises(RuntimeError):
        torch.ones(3, 1).add_(torch.ones(1, 4))
    with pytest.raises(RuntimeError, match=r"of shape \(3, 4\) .* cannot be written into this tensor of shape "
                                           r"\(3, 1\)"):
        mg.ones(3, 1).add_(mg.ones(1, 4))
    with pytest.raises(RuntimeError, match="several elements of this tensor .* share one memory location"):
        mg.ones(1, 4).expand(3, 4).add_(1)
    np.testing.assert_array_equal(i.numpy(), [1, 2])
    int_fill = mg.tensor([1, 2])
    int_fill.fill_(1.5)  # fill_ casts its value, as torch's
    np.testing.assert_array_equal(int_fill.numpy(), torch.tensor([1, 2]).fill_(1.5).numpy())


def test_a_tensor_without_grad_becomes_part_of_the_graph_through_an_inplace_op():
    """x = zeros(3); x += w gives x a node, as torch's AddBackward."""
    w, tw = both([1.0, 2.0, 3.0], requires_grad=True)
    x, tx = mg.zeros(3, dtype=mg.float64), torch.zeros(3, dtype=torch.float64)
    x += w * 2
    tx += tw * 2
    assert x.requires_grad and not x.is_leaf and x.grad_fn is not None and tx.grad_fn is not None
    x.sum().backward()
    tx.sum().backward()
    np.testing.assert_array_equal(w.grad, tw.grad.numpy())


# ---- x[idx] = v ----

SETITEM_INDEXES = [
    ((5, 5), 1), ((5,), 1), ((1,), 0), ((10,), [[0, 4, 2]]), ((5, 5), [[0, 4], [2, 2]]),
    ((5, 5, 5), [slice(None), slice(None), [1, 3]]), ((5, 5, 5), [slice(None), [1, 3], slice(None)]),
    ((5, 5, 5), [[1, 3], slice(None), slice(None)]), ((5, 5, 5), [slice(None), [2, 4], [1, 3]]),
    ((5, 5, 5), [[1, 3], [2, 4], slice(None)]), ((5, 5), (slice(1, 4), -1)), ((4, 3), (Ellipsis, 0)),
]


@pytest.mark.parametrize("size, index", SETITEM_INDEXES, ids=[f"{s} {i}" for s, i in SETITEM_INDEXES])
def test_setitem_of_a_number(size, index):
    """test_setitem (_test_setitem): the overwritten places get no gradient; lists of sequences are tuples of
    indices, as torch reads them."""
    x, tx = both(np.ones(size), requires_grad=True)
    y, ty = x + 2, tx + 2
    y[index] = 2
    ty[index] = 2
    assert y._version == ty._version == 1
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    y.backward(np.ones(size))
    ty.backward(torch.ones(*size, dtype=torch.float64))
    np.testing.assert_array_equal(x.grad, tx.grad.numpy())


@pytest.mark.parametrize("size, index", [((5, 5), 3), ((5, 5), [[0, 1], [1, 0]]), ((5,), 3), ((5,), [[0, 1, 2, 3]]),
                                         ((5, 5, 5), [slice(None), slice(None), [1, 3]]),
                                         ((5, 5, 5), [[1, 3], [2, 4], slice(None)])])
def test_setitem_of_a_tensor_sends_the_gradient_to_it(size, index):
    """test_setitem (_test_setitem_tensor)."""
    x, tx = both(np.ones(size), requires_grad=True)
    y, ty = x + 2, tx + 2
    shape = ty[index].shape
    value, tvalue = both(np.full(tuple(shape), 7.0), requires_grad=True)
    y[index] = value
    ty[index] = tvalue
    dout = np.random.default_rng(6).standard_normal(size)
    y.backward(dout)
    ty.backward(torch.tensor(dout))
    np.testing.assert_array_equal(x.grad, tx.grad.numpy())
    np.testing.assert_array_equal(value.grad, tvalue.grad.numpy())


def test_setitem_with_an_index_tensor_and_a_broadcast_value():
    x, tx = both(np.random.default_rng(7).standard_normal(4), requires_grad=True)
    y, ty = mg.zeros(2, 3, 4, dtype=mg.float64), torch.zeros(2, 3, 4, dtype=torch.float64)
    y[1] = x  # x broadcast to (3, 4): its gradient is summed back
    ty[1] = tx
    index = mg.tensor(3).sum()
    y[0, 0, index] = x[0] * 5
    ty[0, 0, torch.tensor(3).sum()] = tx[0] * 5
    dout = np.random.default_rng(8).standard_normal((2, 3, 4))
    y.backward(dout)
    ty.backward(torch.tensor(dout))
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-12)


def test_leaf_assignment():
    """test_leaf_assignment: x[0] = y makes x, a leaf without grad, part of the graph."""
    rng = np.random.default_rng(9)
    x, tx = both(rng.standard_normal((5, 5)))
    y, ty = both(rng.standard_normal(5), requires_grad=True)
    z, tz = both(rng.standard_normal(5), requires_grad=True)
    x[0] = y
    x[1] = 2 * z
    tx[0] = ty
    tx[1] = 2 * tz
    assert x.requires_grad and x.grad_fn is not None
    x.sum().backward()
    tx.sum().backward()
    np.testing.assert_array_equal(y.grad, np.ones(5))
    np.testing.assert_array_equal(z.grad, np.full(5, 2.0))
    np.testing.assert_array_equal(x.numpy(), tx.detach().numpy())


def test_setitem_under_no_grad_writes_in_place_and_counts():
    array = np.zeros((3, 4))
    x = mg.from_numpy(array)
    x[1, 1:3] = 5.0
    x[[0, 2], 0] = mg.tensor([1.0, 2.0], dtype=mg.float64)
    assert x._version == 2
    np.testing.assert_array_equal(array, [[1, 0, 0, 0], [0, 5, 5, 0], [2, 0, 0, 0]])


# ---- views: a write through one reaches its base's graph, and the other way round ----

def test_inplace_view_backprop_base():
    """test_inplace_on_view_backprop_base: modify a view, backpropagate through the base."""
    root, troot = both(np.random.default_rng(10).standard_normal((2, 2)), requires_grad=True)
    x, tx = root.clone(), troot.clone()
    v1, tv1 = x[0:1], tx.narrow(0, 0, 1)
    v1.mul_(2)
    tv1.mul_(2)
    x.sum().backward()
    tx.sum().backward()
    np.testing.assert_array_equal(root.grad, [[2, 2], [1, 1]])
    np.testing.assert_array_equal(root.grad, troot.grad.numpy())


def test_inplace_on_a_view_of_a_view():
    root, troot = both(np.random.default_rng(11).standard_normal((2, 2)), requires_grad=True)
    x, tx = root.clone(), troot.clone()
    x[0:1][:, 1:2].mul_(2)
    tx.narrow(0, 0, 1).narrow(1, 1, 1).mul_(2)
    x.sum().backward()
    tx.sum().backward()
    np.testing.assert_array_equal(root.grad, [[1, 2], [1, 1]])
    np.testing.assert_array_equal(root.grad, troot.grad.numpy())


def test_inplace_view_backprop_view():
    """test_inplace_on_view_backprop_view: the written view keeps the old values it multiplied by (b.grad = 5)."""
    a, ta = both([2.0, 5.0])
    b, tb = both([3.0], requires_grad=True)
    res, tres = a[1:2].mul_(b), ta.narrow(0, 1, 1).mul_(tb)
    res.sum().backward()
    tres.sum().backward()
    np.testing.assert_array_equal(b.grad, [5.0])
    np.testing.assert_array_equal(b.grad, tb.grad.numpy())
    assert a.grad is None and ta.grad is None
    np.testing.assert_array_equal(a.numpy(), [2.0, 15.0])


def test_inplace_on_a_view_makes_its_base_require_grad():
    """test_inplace_on_view_makes_base_require_grad, with gradcheck as torch's has it."""
    rng = np.random.default_rng(12)

    def func(root, b):
        x = root.clone()
        x[:, 2:4].mul_(b)
        return x

    a = mg.tensor(rng.standard_normal((4, 4)), dtype=mg.float64)
    b = mg.tensor(rng.standard_normal((4, 2)), dtype=mg.float64, requires_grad=True)
    x = a.clone()
    assert not x.requires_grad
    x[:, 2:4].mul_(b)
    assert x.requires_grad and not x.is_leaf
    assert mg.gradcheck(func, a, b)


@pytest.mark.parametrize("view", ["reshape", "transpose", "T", "slice", "index", "split piece", "unsqueeze"])
def test_a_write_into_the_base_reaches_an_older_view(view):
    """The view's node is made again from the base's new history when it is used, as PyTorch's view grad_fn.
    (torch refuses to use a piece of split after such a write; here it is made again too, and compared with the
    same piece cut by narrow.)"""
    cut = {"reshape": lambda t: t.reshape(3, 2), "transpose": lambda t: t.transpose(0, 1), "T": lambda t: t.T,
           "slice": lambda t: t[:, 1:], "index": lambda t: t[1], "split piece": lambda t: t.split(1, dim=0)[1],
           "unsqueeze": lambda t: t.unsqueeze(0)}[view]
    cut_torch = (lambda t: t.narrow(0, 1, 1)) if view == "split piece" else cut
    root, troot = both(np.random.default_rng(13).standard_normal((2, 3)), requires_grad=True)
    x, tx = root.clone(), troot.clone()
    v, tv = cut(x), cut_torch(tx)
    x.mul_(3)
    tx.mul_(3)
    assert v._version == x._version == 1
    np.testing.assert_array_equal(v.numpy(), tv.detach().numpy())
    (v * v).sum().backward()
    (tv * tv).sum().backward()
    np.testing.assert_allclose(root.grad, troot.grad.numpy(), rtol=1e-12)


def test_a_view_made_under_no_grad_and_written_in_grad_mode_is_recorded_as_any_view():
    """torch refuses this write; here the view's node is made from its base first, so the gradient is that of
    x[0] *= w written in grad mode, not one that treats the view's old values as constants."""
    rng = np.random.default_rng(14)
    root, troot = both(rng.standard_normal((2, 3)), requires_grad=True)
    w, tw = both(rng.standard_normal(3), requires_grad=True)
    x, tx = root.clone(), troot.clone()
    with mg.no_grad():
        v = x[0]
    assert not v.requires_grad
    v.mul_(w)
    tx[0].mul_(tw)  # the same write through a view made in grad mode
    dout = rng.standard_normal((2, 3))
    x.backward(dout)
    tx.backward(torch.tensor(dout))
    np.testing.assert_allclose(root.grad, troot.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad, tw.grad.numpy(), rtol=1e-12)


def test_a_piece_of_split_cannot_be_written_in_place_where_a_gradient_is_recorded():
    """test_inplace_on_view_multiple_outputs: torch refuses it too; under no_grad the write goes through."""
    x = mg.ones(4, requires_grad=True).clone()
    tx = torch.ones(4, requires_grad=True).clone()
    with pytest.raises(RuntimeError):
        tx.split(2)[0].mul_(2)
    with pytest.raises(RuntimeError, match="one of several views that split returned"):
        x.split(2)[0].mul_(2)
    with mg.no_grad():
        x.split(2)[1].mul_(2)
    np.testing.assert_array_equal(x.numpy(), [1, 1, 2, 2])


def test_a_view_shares_memory_and_a_copy_does_not():
    x = mg.zeros(2, 3)
    for view in (x[0], x.reshape(6), x.T, x[:, 1:], x.detach(), x[0, 0]):
        assert view._version == x._version
    flipped, gathered = x.flip(0), x[[0, 1]]  # copies in torch (and NumPy's flip view is copied here)
    with mg.no_grad():
        flipped.add_(1)
        gathered.add_(1)
        x[0, 0].add_(5)  # a 0-d view, as torch's x[0, 0]
    assert x._version == 1 and x.numpy()[0, 0] == 5 and x.numpy().sum() == 5


# ---- hooks and retain_grad across writes ----

def test_tensor_hooks_inplace():
    """test_tensor_hooks_inplace: the second hook is registered on the new version of the tensor."""
    counts = [0, 0]

    def fn1(grad):
        counts[0] += 1
        assert grad.item() == 4.0  # x2 from mul, x2 from fn2
        return grad * 2

    def fn2(grad):
        counts[1] += 1
        assert grad.item() == 1.0
        return grad * 2

    a = mg.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.register_hook(fn1)
    b.mul_(2)
    b.register_hook(fn2)
    b.sum().backward()
    assert counts == [1, 1] and a.grad == 8.0


def test_retain_grad_inplace():
    """test_retain_grad_inplace: .grad is the gradient of the latest version, after writes and through views."""
    a = mg.tensor([1.0], requires_grad=True).clone()
    a.retain_grad()
    a.mul_(2)
    a.sum().backward()
    np.testing.assert_array_equal(a.grad, [1.0])

    a = mg.tensor([1.0], requires_grad=True).clone()
    a.retain_grad()
    a.mul_(2)
    a.mul_(2)
    a.sum().backward()
    np.testing.assert_array_equal(a.grad, [1.0])

    x = mg.tensor([1.0], requires_grad=True).clone()
    x.retain_grad()
    x_view = x[:]
    x_view *= 2
    x *= 2
    x.sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0])

    x = mg.zeros(4)
    y = x.reshape(2, 2)
    y.add_(mg.randn(2, 2, requires_grad=True))  # the base did not require grad: no hook to move
    x.sum().backward()


# ---- copy rules ----

def test_tensor_copies_its_data_and_as_tensor_and_from_numpy_share_it():
    """The issue's reproduction: mg.tensor(buf) followed writes into buf, so backward saw the next batch."""
    buf = np.array([1.0, 2.0], dtype=np.float32)
    w = mg.tensor([3.0, 4.0], requires_grad=True)
    x = mg.tensor(buf)
    loss = (w * x).sum()
    buf[:] = [10.0, 20.0]  # the next batch, written into the same buffer
    loss.backward()
    np.testing.assert_array_equal(w.grad, [1.0, 2.0])
    assert mg.tensor(x) is not x and not np.shares_memory(mg.tensor(x).numpy(), x.numpy())
    shared, tshared = mg.from_numpy(buf), torch.from_numpy(buf)
    buf[0] = -1.0
    assert shared.numpy()[0] == tshared[0].item() == -1.0 and shared.dtype == mg.float32
    assert mg.as_tensor(buf).numpy().base is buf or mg.as_tensor(buf).numpy() is buf
    assert mg.as_tensor(x) is x and mg.as_tensor(x, dtype=mg.float64) is not x
    assert not np.shares_memory(mg.as_tensor(buf, dtype=mg.float64).numpy(), buf)  # converted: a copy
    with pytest.raises(TypeError, match="from_numpy: expected a numpy.ndarray, got list"):
        mg.from_numpy([1.0])


def test_a_parameter_shares_the_memory_it_is_made_from_as_torchs():
    array = np.zeros((2, 2), dtype=np.float32)
    p = nn.Parameter(array)
    with mg.no_grad():
        p.add_(1)
    np.testing.assert_array_equal(array, np.ones((2, 2)))
    frozen = nn.Parameter(array, requires_grad=False)
    assert not frozen.requires_grad


# ---- index and mask tensors a node keeps for backward ----

def _index_cases(lib):
    """(name, make): make() builds a graph through an op that keeps an index or mask tensor, writes that tensor in
    place, and returns the loss, in minigrad (lib = mg) or in torch (lib = torch)."""
    Fl = mg.functional if lib is mg else torch.nn.functional

    def embedding():
        w, i = lib.ones(5, 3, requires_grad=True), lib.tensor([0, 1, 2])
        loss = (Fl.embedding(i, w) * 2).sum()
        i.add_(2)
        return loss

    def gather():
        x, idx = lib.ones(3, 4, requires_grad=True), lib.tensor([[0, 1, 2, 0]])
        loss = lib.gather(x, 0, idx).sum()
        idx.add_(1)
        return loss

    def getitem_index():
        x, idx = lib.ones(5, requires_grad=True), lib.tensor([0, 1])
        loss = (x[idx] * 2).sum()
        idx.add_(2)
        return loss

    def getitem_mask():
        x, m = lib.ones(3, requires_grad=True), lib.tensor([True, False, True])
        loss = (x[m] * 2).sum()
        m.copy_(lib.tensor([False, True, True]))
        return loss

    def masked_fill():
        x, m = lib.ones(3, requires_grad=True), lib.tensor([True, False, True])
        loss = (x.masked_fill(m, 0.0) * 2).sum()
        m.copy_(lib.tensor([False, True, False]))
        return loss

    def where():
        x, m = lib.ones(3, requires_grad=True), lib.tensor([True, False, True])
        loss = (lib.where(m, x, lib.zeros(3)) * 2).sum()
        m.copy_(lib.tensor([False, True, False]))
        return loss

    return {f.__name__: f for f in (embedding, gather, getitem_index, getitem_mask, masked_fill, where)}


@pytest.mark.parametrize("name", list(_index_cases(mg)))
def test_an_index_or_mask_written_after_use_is_refused_as_in_torch(name):
    """The gradient would go where the index points now (the node keeps the very array the write changed)."""
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _index_cases(torch)[name]().backward()
    with pytest.raises(RuntimeError, match=r"an index or mask tensor that \w+ saved .* modified by an in-place"):
        _index_cases(mg)[name]().backward()


def test_an_index_written_before_use_or_given_as_a_list_is_fine():
    w = mg.ones(5, 3, requires_grad=True)
    i = mg.tensor([0, 1, 2])
    i.add_(1)  # before the op: nothing saved it yet
    (mg.functional.embedding(i, w) * 2).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [0, 2, 2, 2, 0])
    idx = [0, 1]  # not a tensor: nothing to write in place
    x = mg.ones(5, requires_grad=True)
    (x[idx] * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 0, 0, 0])


def test_version_counter():
    """PyTorch's test_version_counter: views share the counter, and `x.data = y` keeps it (and the sharing)."""
    x = mg.randn(1, 2)
    saved = x._version
    x.add_(1).add_(1)
    assert x._version > saved
    xz = x[:]
    assert x._version == xz._version
    xz.add_(1)
    assert x._version == xz._version
    saved = x._version
    x.data = mg.randn(2, 3)
    assert x._version == saved
    x.add_(1)
    assert x._version > saved and x._version == xz._version
    xz.add_(1)
    assert x._version == xz._version


# ops whose backward reads the arrays PyTorch's saves (not div: minigrad's reads its output where PyTorch's reads b)
DATA_CASES = {
    "mul": lambda x, w: (x * w).sum(),
    "pow": lambda x, w: (x**3).sum(),
    "exp (its output)": lambda x, w: x.exp().sum(),
    "sin": lambda x, w: (x.sin() * w).sum(),
    "matmul of views": lambda x, w: (x.reshape(3, 1) @ w.reshape(1, 3)).sum(),
    "tanh and log": lambda x, w: (x.tanh() * x.log()).sum(),
    "softmax": lambda x, w: (x.softmax(0) * w).sum(),
}


@pytest.mark.parametrize("create_graph", [False, True], ids=["backward()", "backward(create_graph=True)"])
@pytest.mark.parametrize("case", list(DATA_CASES))
def test_backward_after_data_assignment_reads_the_new_values_as_pytorchs(case, create_graph):
    """x.data = y after forward: a node that kept x's array reads y's (as PyTorch's saved tensor reads x's data), one
    that kept an array derived from it (its output, a view) the old one, and backward() and create_graph=True agree
    (issue 44, item 3); w.grad too, as w's node kept x."""
    grads = []
    for lib in (mg, torch):
        x, w = (lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in ([1.0, 2.0, 3.0], [0.5, -1.0, 2.0]))
        y = DATA_CASES[case](x, w)
        x.data = lib.tensor([4.0, 5.0, 6.0], dtype=lib.float64)
        y.backward(create_graph=create_graph and lib is mg)
        grads.append([x.grad.detach().numpy(), None if w.grad is None else w.grad.detach().numpy()])
    (dx, dw), (tdx, tdw) = grads
    np.testing.assert_allclose(dx, tdx, rtol=1e-12)
    assert (dw is None) == (tdw is None)
    if dw is not None:
        np.testing.assert_allclose(dw, tdw, rtol=1e-12)


def test_backward_after_data_assignment_of_another_shape_is_refused():
    """PyTorch fails inside the node's backward on the shapes; here the node says which input changed shape."""
    x = mg.ones(3, requires_grad=True)
    y = (x * x).sum()
    x.data = mg.ones(4)
    with pytest.raises(RuntimeError, match=r"input 0 of mul, a leaf of shape \(3,\).*shape \(4,\)"):
        y.backward()


def test_data_assignment_to_a_tensor_that_does_not_require_grad_keeps_the_values_forward_read():
    """A deliberate difference (docs/pytorch-way.md): the graph keeps no edge to an input that needs no gradient, so
    its node cannot see `w.data = y`; it keeps the values forward read, where PyTorch's reads the new ones."""
    grads = {}
    for lib in (mg, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        w = lib.tensor([3.0, 4.0], dtype=lib.float64)
        y = (x * w).sum()
        w.data = lib.tensor([5.0, 6.0], dtype=lib.float64)
        y.backward()
        grads[lib.__name__] = x.grad.detach().numpy().tolist()
    assert grads == {"minigrad": [3.0, 4.0], "torch": [5.0, 6.0]}
